// The gather program interpreter, built for x86-64-v4 plus AVX512-VBMI (flags in CMakeLists.txt).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <type_traits>
#include <utility>

#include "kernels/permute/gather.hpp"
#include "kernels/stream_store.hpp"

namespace regrid::kernels {
namespace {

// Output handled together: each chunk of the program is built at all of a strip's periods (of
// several rows when they are short) with its steps' indices, windows and masks in registers; an
// interpreter reloading them per chunk ran at half speed. The strip's output lines, which
// unaligned chunks write in two parts, stay in L1 meanwhile. Over the 258 gather cells of the
// grid, strips of 16 KiB ran 1.2x faster than 4 KiB ones (fewer chunk set-ups per byte); 32 KiB
// gained another 1-5% on this 48 KiB L1, 64 KiB lost.
constexpr std::int64_t strip_bytes = 16 * 1024;
static_assert(2 * max_gather_period_bytes <= strip_bytes, "a long row must hold whole periods");
// Long rows whose strips stream out (gather_rows::stream) go in strips of 4 KiB: a 16 KiB strip's
// 256 streaming stores, issued at once, held the stores and loads of building the next strip back
// until they had drained to memory. Measured on an Intel Xeon with AMX (2 vCPUs), the 52 grid
// cells of 256 MiB whose gather rows are cut into strips (16 KiB or more, not across rows: s2d
// NHWC, s2d channels-last K = 3), alternate processes of regrid bench: 1.10x / 1.10x on one / two
// threads (30 / 31 faster by over 4%, the least 0.95x / 0.97x; s2d NHWC DCR b3 C1 of bytes 0.53 ->
// 0.63 of memcpy), the same cells of 64 MiB 1.06x on one (0.95-1.26x). Strips of 4 KiB for the
// other streamed rows lost (rows of 5.8 KiB cut into strips of 2 periods, s2d channels-last K = 3
// DCR b3 C1 of bytes, 0.86x; rows sharing their source, d2s NHWC CRD b3 C1 of bytes, 0.91x), as
// did strips of 2 KiB (0.8-1.07x) and 1 KiB (0.7-0.9x) of any row. On a Zen 5 strips of 16 KiB lost
// far past the cache as well (0.82x over the 24 cells of periods over 512 bytes at 256 MiB, one
// thread, bench/plan_ab), but won where the output stays in its L3 (see wide_strips below).
constexpr std::int64_t streamed_long_row_strip_bytes = 4096;
static_assert(2 * max_gather_period_bytes <= streamed_long_row_strip_bytes, "a long row must hold whole periods");
// ... or of 8 KiB where the planner says so (gather_rows::wide_strips; see
// gathers_stream_wide_strips in permute.cpp).
constexpr std::int64_t wide_streamed_long_row_strip_bytes = 8192;

// Byte-masked loads read nothing outside their mask (and cannot fault there), so a window may
// start anywhere a needed byte is.
inline __m512i permuted(__m512i index, const std::byte* a_at, std::uint64_t load_a, const std::byte* b_at,
                        std::uint64_t load_b, bool two) {
  const __m512i a = _mm512_maskz_loadu_epi8(load_a, a_at);
  // The zero-masked form: GCC 12 warns about the plain one's undefined pass-through.
  if (!two) return _mm512_maskz_permutexvar_epi8(~__mmask64{0}, index, a);
  return _mm512_permutex2var_epi8(a, index, _mm512_maskz_loadu_epi8(load_b, b_at));
}

// The bytes from p up to src_end, as a load mask.
inline std::uint64_t readable(const std::byte* p, const std::byte* src_end) {
  const std::int64_t left = src_end - p;
  if (left >= 64) return ~std::uint64_t{0};
  return left <= 0 ? 0 : (std::uint64_t{1} << left) - 1;
}

// A whole chunk's store: a streaming store where the strip goes straight out (gather_rows::
// stream_in_place, each chunk a whole line), else an ordinary one.
template <bool Stream>
inline void store_chunk(std::byte* at, __m512i value) {
  if constexpr (Stream) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(at), value);
  } else {
    _mm512_storeu_si512(at, value);
  }
}

// How a chunk's steps load their windows (see chunk_steps::build).
enum class loads { whole, masked, clipped };

struct strip {
  const std::byte* src;
  std::byte* dst;
  std::int64_t rows;
  std::int64_t first_period;
  std::int64_t end_period;  ///< whole periods [first, end) of each row
  std::int64_t tail_bytes;  ///< then this part of the next period (0: none)
};

// One chunk's steps, held in registers while the chunk is built at every period of a strip: each
// step's permute is blended into the chunk by its take mask and the chunk is stored once, whole
// (1.04x over storing the first step and overwriting with a masked store per further step, 1.10x
// at 1 MiB and up). N = 0: the step count is only known at run time, and steps load per chunk.
// Counts up to 8 have their own N: chunks of 5-8 steps (tiny 3-D tensors) ran 1.1-1.5x faster
// with their steps in registers than loaded per chunk.
template <int N>
struct chunk_steps {
  static constexpr int capacity = N == 0 ? 1 : N;
  int count = N;
  __m512i index[capacity];
  std::int64_t window_a[capacity];
  std::int64_t window_b[capacity];
  std::uint64_t load_a[capacity];
  std::uint64_t load_b[capacity];
  std::uint64_t take[capacity];
  const gather_step* steps = nullptr;

  explicit chunk_steps(const gather_step* first, int n) : steps(first) {
    if constexpr (N == 0) {
      count = n;
    } else {
      for (int k = 0; k < N; ++k) {
        index[k] = _mm512_load_si512(first[k].index.data());
        window_a[k] = first[k].window_a;
        window_b[k] = first[k].window_b;
        load_a[k] = first[k].load_a;
        load_b[k] = first[k].load_b;
        take[k] = first[k].take;
      }
    }
  }

  // The chunk of the period whose source starts at `base`. Loads: `whole`, every window is read
  // whole (the period's windows all lie below src_end); else byte-masked to the bytes the chunk
  // needs, and with `clip` also to the bytes below src_end.
  template <loads kind>
  [[nodiscard]] __m512i build(const std::byte* base, const std::byte* src_end) const {
    __m512i chunk = _mm512_setzero_si512();
    for (int k = 0; k < (N == 0 ? count : N); ++k) {
      if constexpr (N == 0) {
        const gather_step& step = steps[k];
        const __m512i value = one<kind>(_mm512_load_si512(step.index.data()), base + step.window_a, step.load_a,
                                        base + step.window_b, step.load_b, src_end);
        chunk = k == 0 ? value : _mm512_mask_blend_epi8(step.take, chunk, value);
      } else {
        const __m512i value =
            one<kind>(index[k], base + window_a[k], load_a[k], base + window_b[k], load_b[k], src_end);
        chunk = k == 0 ? value : _mm512_mask_blend_epi8(take[k], chunk, value);
      }
    }
    return chunk;
  }

  template <loads kind>
  static __m512i one(__m512i index, const std::byte* a_at, std::uint64_t load_a, const std::byte* b_at,
                     std::uint64_t load_b, const std::byte* src_end) {
    if constexpr (kind == loads::whole) {
      const __m512i a = _mm512_loadu_si512(a_at);
      if (load_b == 0) return _mm512_maskz_permutexvar_epi8(~__mmask64{0}, index, a);
      return _mm512_permutex2var_epi8(a, index, _mm512_loadu_si512(b_at));
    } else {
      if constexpr (kind == loads::clipped) {
        load_a &= readable(a_at, src_end);
        load_b &= readable(b_at, src_end);
      }
      return permuted(index, a_at, load_a, b_at, load_b, load_b != 0);
    }
  }
};

// One chunk of every period of a strip: `dst` already points at the chunk within the first period.
struct chunk_walk {
  const std::byte* src;
  std::byte* dst;
  std::int64_t rows;
  std::int64_t src_stride;
  std::int64_t dst_stride;
  std::int64_t first_period;
  std::int64_t end_period;
  std::int64_t period_src;
  std::int64_t period_dst;
  bool tail;                   ///< the chunk has bytes in the part-period ending each row
  bool clip;                   ///< ... whose loads must be clipped to the source
  bool whole;                  ///< every window of the strip lies below src_end: loads need no mask
  std::uint64_t tail_written;  ///< ... and these are its bytes
  const std::byte* src_end;
};

// A chunk that lies in the part-period of rows shorter than a period: one build and one store per
// row, the load kind and the store (whole or byte-masked) chosen once. Inside walk_rows' row loop
// such rows took two branches to out-of-line code and a mask test from the stack per chunk: d2s
// NHWC DCR b2 C3 of 2-byte elements (1248-byte rows, 1280-byte period) ran at 0.27 of memcpy at
// 64 KiB, where a loop of its loads, permute and store alone runs at 0.5.
template <loads kind, bool WholeStore, int N>
inline __attribute__((always_inline)) void walk_tails_storing(const chunk_steps<N>& chunk, const chunk_walk& walk) {
  const std::byte* from = walk.src + walk.end_period * walk.period_src;
  std::byte* to = walk.dst + walk.end_period * walk.period_dst;
  for (std::int64_t r = 0; r < walk.rows; ++r, from += walk.src_stride, to += walk.dst_stride) {
    const __m512i value = chunk.template build<kind>(from, walk.src_end);
    if constexpr (WholeStore) {
      _mm512_storeu_si512(to, value);
    } else {
      _mm512_mask_storeu_epi8(to, walk.tail_written, value);
    }
  }
}

template <loads kind, int N>
inline __attribute__((always_inline)) void walk_tails(const chunk_steps<N>& chunk, const chunk_walk& walk) {
  if constexpr (kind == loads::masked) {
    if (walk.clip) {
      walk_tails<loads::clipped>(chunk, walk);
      return;
    }
  }
  if (walk.tail_written == ~std::uint64_t{0}) {
    walk_tails_storing<kind, true>(chunk, walk);
  } else {
    walk_tails_storing<kind, false>(chunk, walk);
  }
}

// Inlined into each run_strip, as it was before groups existed: left to itself, GCC makes it a
// call shared by the grouped and one-group kernels.
template <loads kind, bool Stream, int N>
inline __attribute__((always_inline)) void walk_rows(const chunk_steps<N>& chunk, const chunk_walk& walk) {
  for (std::int64_t r = 0; r < walk.rows; ++r) {
    const std::byte* from = walk.src + r * walk.src_stride;
    std::byte* to = walk.dst + r * walk.dst_stride;
    for (std::int64_t p = walk.first_period; p < walk.end_period; ++p) {
      store_chunk<Stream>(to + p * walk.period_dst,
                          chunk.template build<kind>(from + p * walk.period_src, walk.src_end));
    }
    if (walk.tail) {
      const std::byte* base = from + walk.end_period * walk.period_src;
      __m512i value;
      if constexpr (kind == loads::whole) {
        value = chunk.template build<loads::whole>(base, walk.src_end);
      } else {
        value = walk.clip ? chunk.template build<loads::clipped>(base, walk.src_end)
                          : chunk.template build<loads::masked>(base, walk.src_end);
      }
      std::byte* at = to + walk.end_period * walk.period_dst;
      if (walk.tail_written == ~std::uint64_t{0}) {
        _mm512_storeu_si512(at, value);
      } else {
        _mm512_mask_storeu_epi8(at, walk.tail_written, value);
      }
    }
  }
}

// The rows of a call: one group of rows (no_groups), or several at a stride (row_groups, the
// innermost outer axis of a plan whose rows are short). Separate types, so that the one-group
// kernel compiles as if groups did not exist: a group loop and a larger walk inside the shared
// kernel cost the other gather cells 0.5-0.75x.
struct no_groups {
  static constexpr std::int64_t count = 1;
  static constexpr std::int64_t src_stride = 0;
  static constexpr std::int64_t dst_stride = 0;
};
struct row_groups {
  std::int64_t count;
  std::int64_t src_stride;
  std::int64_t dst_stride;
};

// TailsOnly: the strip's rows are shorter than a period (see walk_tails).
template <bool TailsOnly, loads kind, bool Stream, int N>
inline __attribute__((always_inline)) void walk_chunk(const chunk_steps<N>& chunk, const chunk_walk& walk) {
  if constexpr (TailsOnly) {
    walk_tails<kind>(chunk, walk);
  } else {
    walk_rows<kind, Stream>(chunk, walk);
  }
}

template <bool TailsOnly, bool Stream, int N, class Groups>
void run_chunk(const gather_step* first, int count, const chunk_walk& walk_ref, const Groups& groups) {
  // A local copy: stores through std::byte* may alias anything, which would make the compiler
  // reload every bound and stride after each store.
  chunk_walk walk = walk_ref;
  const chunk_steps<N> chunk(first, count);
  // The load choice is written out in both branches: a shared lambda, or one loop with no_groups
  // as a single pass of zero strides, changed the one-group kernel's machine code.
  if constexpr (std::is_same_v<Groups, no_groups>) {
    if (walk.whole) {
      walk_chunk<TailsOnly, loads::whole, Stream>(chunk, walk);
    } else {
      walk_chunk<TailsOnly, loads::masked, Stream>(chunk, walk);
    }
  } else {
    const row_groups each = groups;
    for (std::int64_t g = 0; g < each.count; ++g) {
      if (walk.whole) {
        walk_chunk<TailsOnly, loads::whole, Stream>(chunk, walk);
      } else {
        walk_chunk<TailsOnly, loads::masked, Stream>(chunk, walk);
      }
      walk.src += each.src_stride;
      walk.dst += each.dst_stride;
    }
  }
}

// Prefetches the source and destination lines of the strip `ahead` source and `ahead_dst`
// destination bytes after this one, up to the end of the source. Addresses are integers: the next
// strip may lie past the end of either tensor, where a pointer may not point (a prefetch of such an
// address does nothing).
template <class Groups>
void prefetch_strip(const gather_program& program, const gather_rows& rows, const strip& part, const Groups& groups,
                    const std::byte* src_end, std::int64_t ahead, std::int64_t ahead_dst) {
  // Streamed strips never read their destination lines (run_strip_streamed, stream_in_place).
  const bool destination = !rows.stream && !rows.stream_in_place;
  const std::int64_t source_left = src_end - part.src;
  const auto source_start = reinterpret_cast<std::uintptr_t>(part.src);
  const auto destination_start = reinterpret_cast<std::uintptr_t>(part.dst);
  // A single-block program's rows are nothing but the part-period ending each row.
  const std::int64_t end_period = part.end_period + (program.single_block && part.tail_bytes > 0 ? 1 : 0);
  for (std::int64_t g = 0; g < groups.count; ++g) {
    for (std::int64_t r = 0; r < part.rows; ++r) {
      for (std::int64_t p = part.first_period; p < end_period; ++p) {
        const std::int64_t source = g * groups.src_stride + r * rows.src_stride + p * program.period_src_bytes + ahead;
        if (source_left - source < program.reach) return;
        for (std::int64_t offset : program.prefetch_offsets) {
          prefetch_into_l1(source_start + static_cast<std::uintptr_t>(source + offset));
        }
        if (!destination) continue;
        const std::int64_t to = g * groups.dst_stride + r * rows.dst_stride + p * program.period_dst_bytes + ahead_dst;
        for (std::int64_t offset = 0; offset < program.period_dst_bytes; offset += 64) {
          prefetch_into_l1(destination_start + static_cast<std::uintptr_t>(to + offset));
        }
      }
    }
  }
}

// How close a strip's loads come to the end of the source.
struct strip_reach {
  bool clip;   ///< the part-periods' loads must be clipped to the source
  bool whole;  ///< every window lies below src_end: loads need no mask
};

template <class Groups>
strip_reach reach_of(const gather_program& program, const gather_rows& rows, const strip& part, const Groups& groups,
                     const std::byte* src_end) {
  const std::int64_t tail_chunks = (part.tail_bytes + 63) / 64;
  const std::int64_t period_src = program.period_src_bytes;
  // The part of a period ending each row reads windows that may reach past the last source byte
  // the row needs; only near the end of the source must those loads be clipped (strides are
  // non-negative, so the strip's last row of its last group reaches furthest).
  const std::byte* last_tail = part.src + (groups.count - 1) * groups.src_stride + (part.rows - 1) * rows.src_stride +
                               part.end_period * period_src;
  // Windows start at a byte the period needs, so where even the strip's last period reaches no
  // further than src_end, every window lies in the source and is loaded whole: no load masks to
  // keep in registers, and the second load folds into the permute (1.03x at 64 KiB, 1.10x at 1 and
  // 16 MiB over the 489 gather cells of the grid).
  const std::int64_t last_period_left = src_end - last_tail + (tail_chunks > 0 ? 0 : period_src);
  return {tail_chunks > 0 && src_end - last_tail < program.reach, last_period_left >= program.reach};
}

template <bool TailsOnly, bool Stream, class Groups>
void run_strip_walking(const gather_program& program, const gather_rows& row_walk, const strip& strip_walk,
                       const Groups& groups, const std::byte* src_end) {
  const gather_rows rows = row_walk;
  const strip part = strip_walk;
  const gather_step* steps = program.steps.data();
  const std::uint32_t* chunk_end = program.chunk_end.data();
  // Rows shorter than a period only need the chunks of their part-period.
  const std::int64_t tail_chunks = (part.tail_bytes + 63) / 64;
  const std::int64_t chunks =
      part.end_period > part.first_period ? static_cast<std::int64_t>(program.chunk_end.size()) : tail_chunks;
  const std::int64_t period_src = program.period_src_bytes;
  const std::int64_t period_dst = program.period_dst_bytes;
  const strip_reach reach = reach_of(program, rows, part, groups, src_end);
  const bool clip = reach.clip;
  const bool whole = reach.whole;
  std::uint32_t s = 0;
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t left = std::clamp<std::int64_t>(part.tail_bytes - c * 64, 0, 64);
    const chunk_walk walk{part.src,
                          part.dst + c * 64,
                          part.rows,
                          rows.src_stride,
                          rows.dst_stride,
                          part.first_period,
                          part.end_period,
                          period_src,
                          period_dst,
                          c < tail_chunks,
                          clip,
                          whole,
                          left == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << left) - 1,
                          src_end};
    const int count = static_cast<int>(chunk_end[c] - s);
    switch (count) {
      case 1: run_chunk<TailsOnly, Stream, 1>(steps + s, count, walk, groups); break;
      case 2: run_chunk<TailsOnly, Stream, 2>(steps + s, count, walk, groups); break;
      case 3: run_chunk<TailsOnly, Stream, 3>(steps + s, count, walk, groups); break;
      case 4: run_chunk<TailsOnly, Stream, 4>(steps + s, count, walk, groups); break;
      case 5: run_chunk<TailsOnly, Stream, 5>(steps + s, count, walk, groups); break;
      case 6: run_chunk<TailsOnly, Stream, 6>(steps + s, count, walk, groups); break;
      case 7: run_chunk<TailsOnly, Stream, 7>(steps + s, count, walk, groups); break;
      case 8: run_chunk<TailsOnly, Stream, 8>(steps + s, count, walk, groups); break;
      default: run_chunk<TailsOnly, Stream, 0>(steps + s, count, walk, groups); break;
    }
    s = chunk_end[c];
  }
}

// A group of chunks (gather_chunk_group) of G chunks over W windows, its steps in registers: each
// period's windows are loaded once, then every chunk of the group is built from them and stored,
// the group's chunks side by side.
// The permutes bound the build: on an Intel Xeon with AMX (2 vCPUs, about 4 GHz) a two-source
// byte permute (vpermt2b, zmm) issues once per 2 cycles (0.50 ns apart over 8 independent chains,
// vpermb and vpshufb 0.25, vpaddd 0.12), so a chunk of 3 windows' pairs takes 6 cycles of shuffle
// port alone. There d2s NHWC CRD b3 C3 of bytes spends 97% of its time in this loop (perf, timer
// sampling: run_chunk_group<2, 6>, 6 loads, 6 vpermt2b, 4 blends and 2 stores per period of two
// chunks) and runs at 11-15 cycles per chunk (35-45 GB/s read + written at 64 KiB-1 MiB):
// half of that is the permutes. One-source permutes of each window and a blend per window cost
// the shuffle port as much. (llvm-mca 14's model of Ice Lake and Sapphire Rapids counts vpermt2b
// as one cycle, and predicts 2 cycles per chunk.)
template <int G, int W>
struct chunk_group_steps {
  static constexpr int steps = (W + 1) / 2;
  __m512i index[G][steps];
  std::uint64_t take[G][steps];
  std::int64_t window[W];

  chunk_group_steps(const gather_program& program, const gather_chunk_group& group) {
    const gather_step* step = program.group_steps.data() + group.first_step;
    for (int j = 0; j < G; ++j) {
      for (int k = 0; k < steps; ++k, ++step) {
        index[j][k] = _mm512_load_si512(step->index.data());
        take[j][k] = step->take;
      }
    }
    for (int k = 0; k < W; ++k) window[k] = program.group_windows[group.first_window + static_cast<std::uint32_t>(k)];
  }

  [[nodiscard]] __m512i build(int j, const __m512i (&windows)[W]) const {
    __m512i chunk = _mm512_setzero_si512();
    for (int k = 0; k < steps; ++k) {
      const __m512i value = 2 * k + 1 < W ? _mm512_permutex2var_epi8(windows[2 * k], index[j][k], windows[2 * k + 1])
                                          : _mm512_maskz_permutexvar_epi8(~__mmask64{0}, index[j][k], windows[2 * k]);
      chunk = k == 0 ? value : _mm512_mask_blend_epi8(take[j][k], chunk, value);
    }
    return chunk;
  }
};

// The whole periods of a strip whose windows all lie below the source's end, for one group.
template <int G, int W, bool Stream, class Groups>
void run_chunk_group(const gather_program& program, const gather_chunk_group& group, const gather_rows& row_walk,
                     const strip& strip_walk, const Groups& group_walk) {
  const gather_rows rows = row_walk;
  const strip part = strip_walk;
  const Groups groups = group_walk;
  const chunk_group_steps<G, W> steps(program, group);
  const std::int64_t period_src = program.period_src_bytes;
  const std::int64_t period_dst = program.period_dst_bytes;
  for (std::int64_t g = 0; g < groups.count; ++g) {
    for (std::int64_t r = 0; r < part.rows; ++r) {
      const std::byte* from = part.src + g * groups.src_stride + r * rows.src_stride;
      std::byte* to = part.dst + g * groups.dst_stride + r * rows.dst_stride + std::int64_t{group.first_chunk} * 64;
      for (std::int64_t p = part.first_period; p < part.end_period; ++p) {
        const std::byte* base = from + p * period_src;
        __m512i windows[W];
        for (int k = 0; k < W; ++k) windows[k] = _mm512_loadu_si512(base + steps.window[k]);
        std::byte* out = to + p * period_dst;
        for (int j = 0; j < G; ++j) store_chunk<Stream>(out + j * 64, steps.build(j, windows));
      }
    }
  }
}

template <class Groups>
using chunk_group_fn = void (*)(const gather_program&, const gather_chunk_group&, const gather_rows&, const strip&,
                                const Groups&);

template <class Groups, bool Stream, std::size_t... I>
constexpr auto chunk_group_table(std::index_sequence<I...> /*unused*/) {
  return std::array<chunk_group_fn<Groups>, sizeof...(I)>{
      &run_chunk_group<static_cast<int>(I) / max_group_windows + 1, static_cast<int>(I) % max_group_windows + 1, Stream,
                       Groups>...};
}

// Strips of rows shorter than a period, which is every strip of a single-block program, take
// their own kernel (walk_tails): a check inside the shared one changed its code, and cells with
// whole periods lost up to 0.88x. Programs with chunk groups build their whole periods group by
// group where every window lies below the source's end, then the part-periods chunk by chunk.
// Stream: the whole periods' chunks go out with streaming stores (gather_rows::stream_in_place).
template <bool Stream, class Groups>
void run_strip(const gather_program& program, const gather_rows& rows, const strip& part, const Groups& groups,
               const std::byte* src_end) {
  if (part.first_period == part.end_period) {
    run_strip_walking<true, false>(program, rows, part, groups, src_end);
    return;
  }
  if (!program.chunk_groups.empty() && reach_of(program, rows, part, groups, src_end).whole) {
    static constexpr auto table = chunk_group_table<Groups, Stream>(
        std::make_index_sequence<std::size_t{max_group_chunks} * max_group_windows>{});
    for (const gather_chunk_group& group : program.chunk_groups) {
      table[(group.chunks - 1) * max_group_windows + (group.windows - 1)](program, group, rows, part, groups);
    }
    if (part.tail_bytes > 0) {
      const strip tails{part.src, part.dst, part.rows, part.end_period, part.end_period, part.tail_bytes};
      run_strip_walking<true, false>(program, rows, tails, groups, src_end);
    }
    return;
  }
  run_strip_walking<false, Stream>(program, rows, part, groups, src_end);
}

// Outputs well past the cache (gather_rows::stream) whose periods span several chunks: built in
// place, each chunk of a strip at every period in turn, the stores land on the strip's lines in no
// order the store path can merge, so each line is first read from memory (read-for-ownership) and
// written back whenever it is evicted before it is whole. Such a strip is built in an L1 buffer
// instead, its rows packed, and then written out in order with streaming stores. Same-run A/B on a
// Zen 5 over the 140 gather cells of the grid, for the 118 whose period is over 64 bytes: op
// throughput 1.06x / 1.05x at 256 MiB on one / two threads (1.17x / 0.91x at 16 MiB then, 1.18x /
// 1.15x in a later A/B: see streamed_gather_output_bytes_on); the 22 of one chunk per period lost
// (0.96x), their chunk-major walk being in order already. On an Emerald Rapids Xeon: 1.42x at
// 256 MiB (the 31 s2d NHWC CRD gather cells), 0.85x at 16 MiB. The AVX2 gather lost so on the
// Zen 5 (0.90x at 16 MiB). The strip goes out in whole lines (stream_copy_lines_avx512): strips start at
// a period, off a line wherever rows are not whole lines, and stream_copy's 16-byte streaming
// stores then wrote each strip's first and last lines in part. Same-run A/B on a Zen 5, the 147
// gather cells of the 16 MiB grid, four alternations: 1.06x / 1.04x on one / two threads (rows
// off lines 1.04-1.13x per period, on lines 0.97-1.06x; 13 cells under 0.95x, the least 0.79x:
// s2d channels-last K = 3 DCR b3 C4 of 4-byte elements); 37 of them at 256 MiB 1.01x / 1.01x.
// Waiting for the buffer to stream out is not what holds these strips back far past the cache.
// On an Intel Xeon with AMX (2 vCPUs), d2s NHWC CRD b3 C3 of bytes at 256 MiB, one thread (rows
// of 7 and 28 KiB across 3 rows, 0.46-0.49 of memcpy): the buffer's stream-out took about half
// of each strip's time, yet streaming the previous strip's buffer out in slices between the next
// strip's chunk groups (two buffers) ran 0.95-0.98x, process against process. Building alone,
// nothing written, ran at 1.6x the whole kernel's pace there, reading 9.7 GB/s where a plain read
// loop reads 16; at 16 MiB it ran no faster than the whole kernel. Prefetching 1, 2 or 4 strips
// ahead, into L1 or L2, changed nothing (within 3%).
constexpr std::int64_t strip_buffer_bytes = strip_bytes + max_gather_period_bytes;

template <class Groups>
void run_strip_streamed(const gather_program& program, const gather_rows& rows, const strip& part, const Groups& groups,
                        const std::byte* src_end) {
  alignas(64) std::byte buffer[strip_buffer_bytes];
  const std::int64_t periods = part.end_period - part.first_period;
  const std::int64_t row_bytes = periods * program.period_dst_bytes + part.tail_bytes;
  gather_rows packed = rows;
  packed.dst_stride = row_bytes;
  Groups packed_groups = groups;
  if constexpr (std::is_same_v<Groups, row_groups>) packed_groups.dst_stride = part.rows * row_bytes;
  const strip into{
      part.src + part.first_period * program.period_src_bytes, buffer, part.rows, 0, periods, part.tail_bytes};
  run_strip<false>(program, packed, into, packed_groups, src_end);
  std::byte* const dst = part.dst + part.first_period * program.period_dst_bytes;
  if (rows.dst_stride == row_bytes && (groups.count == 1 || groups.dst_stride == part.rows * row_bytes)) {
    stream_copy_lines_avx512(dst, buffer, static_cast<std::size_t>(groups.count * part.rows * row_bytes));
    return;
  }
  const std::byte* from = buffer;
  for (std::int64_t g = 0; g < groups.count; ++g) {
    for (std::int64_t r = 0; r < part.rows; ++r, from += row_bytes) {
      stream_copy_lines_avx512(dst + g * groups.dst_stride + r * rows.dst_stride, from,
                               static_cast<std::size_t>(row_bytes));
    }
  }
}

// A strip, built in place or, for outputs well past the cache (gather_rows::stream), streamed.
template <class Groups>
void write_strip(const gather_program& program, const gather_rows& rows, const strip& part, const Groups& groups,
                 const std::byte* src_end) {
  if (rows.stream_in_place) {
    run_strip<true>(program, rows, part, groups, src_end);
  } else if (rows.stream) {
    run_strip_streamed(program, rows, part, groups, src_end);
  } else {
    run_strip<false>(program, rows, part, groups, src_end);
  }
}

// A row of `bytes`: this many whole periods, then a part-period of `tail` bytes.
struct row_periods {
  std::int64_t whole;
  std::int64_t tail;
};
row_periods periods_of(const gather_program& program, std::int64_t bytes) {
  const std::int64_t whole = bytes / program.period_dst_bytes;
  return {whole, bytes - whole * program.period_dst_bytes};
}

// One group's rows.
void gather_group(const gather_program& program, const gather_rows& rows, const std::byte* src, std::byte* dst,
                  const std::byte* src_end) {
  const std::int64_t period_dst = program.period_dst_bytes;
  const auto [whole, tail] = periods_of(program, rows.bytes);
  const no_groups one;
  if (rows.across && rows.count > 1) {
    // Rows that read the same source lines: strips of periods across every row (see
    // gather_rows_share_source), each source line from memory once.
    // A call's stretch may hold nothing but the part-period ending the rows: one strip of tails.
    // A streamed strip is built in the L1 buffer (strip_buffer_bytes), which one period of every
    // row may overflow (168 rows of s2d channels-first K = 3 b3 C8, 1344-byte periods) and so may
    // a last strip's part-periods (8 rows of 2 periods and 600 bytes): the rows then go in blocks
    // that fit, and such a last strip's part-periods in a strip of their own.
    const std::int64_t block_rows =
        rows.stream ? std::clamp<std::int64_t>(strip_bytes / period_dst, 1, rows.count) : rows.count;
    for (std::int64_t first = 0; first < rows.count; first += block_rows) {
      gather_rows block = rows;
      block.count = std::min(block_rows, rows.count - first);
      const std::byte* from = src + first * rows.src_stride;
      std::byte* to = dst + first * rows.dst_stride;
      const std::int64_t per_strip = std::max<std::int64_t>(1, strip_bytes / (period_dst * block.count));
      std::int64_t p = 0;
      do {
        const std::int64_t end = std::min(whole, p + per_strip);
        const std::int64_t strip_tail = end == whole ? tail : 0;
        const bool tail_apart =
            rows.stream && end > p && block.count * ((end - p) * period_dst + strip_tail) > strip_buffer_bytes;
        const strip part{from, to, block.count, p, end, tail_apart ? 0 : strip_tail};
        if (rows.prefetch) {
          prefetch_strip(program, block, part, one, src_end, per_strip * program.period_src_bytes,
                         per_strip * period_dst);
        }
        write_strip(program, block, part, one, src_end);
        if (tail_apart) write_strip(program, block, strip{from, to, block.count, end, end, strip_tail}, one, src_end);
        p = end;
      } while (p < whole);
    }
    return;
  }
  if (rows.bytes >= strip_bytes) {
    // Long rows: strips of periods of one row (periods are at most half a strip, so every long
    // row has whole periods and its tail goes with the last strip).
    const std::int64_t row_strip_bytes = !rows.stream       ? strip_bytes
                                         : rows.wide_strips ? wide_streamed_long_row_strip_bytes
                                                            : streamed_long_row_strip_bytes;
    const std::int64_t per_strip = std::max<std::int64_t>(1, row_strip_bytes / period_dst);
    for (std::int64_t r = 0; r < rows.count; ++r) {
      const std::byte* from = src + r * rows.src_stride;
      std::byte* to = dst + r * rows.dst_stride;
      for (std::int64_t p = 0; p < whole; p += per_strip) {
        const std::int64_t end = std::min(whole, p + per_strip);
        const strip part{from, to, 1, p, end, end == whole ? tail : 0};
        if (rows.prefetch)
          prefetch_strip(program, rows, part, one, src_end, per_strip * program.period_src_bytes,
                         per_strip * period_dst);
        write_strip(program, rows, part, one, src_end);
      }
    }
    return;
  }
  const std::int64_t per_strip = std::max<std::int64_t>(1, strip_bytes / std::max<std::int64_t>(rows.bytes, 1));
  for (std::int64_t r = 0; r < rows.count; r += per_strip) {
    const strip part{
        src + r * rows.src_stride, dst + r * rows.dst_stride, std::min(per_strip, rows.count - r), 0, whole, tail};
    if (rows.prefetch)
      prefetch_strip(program, rows, part, one, src_end, per_strip * rows.src_stride, per_strip * rows.dst_stride);
    write_strip(program, rows, part, one, src_end);
  }
}

void gather_strips(const gather_program& program, const gather_rows& rows, const std::byte* src, std::byte* dst,
                   const std::byte* src_end) {
  const std::int64_t group_bytes = rows.count * rows.bytes;
  if (rows.groups > 1 && group_bytes <= strip_bytes) {
    // Whole groups of short rows per strip: a group alone may hold too few rows to repay each
    // chunk's set-up (3 rows of 1521 bytes).
    const auto [whole, tail] = periods_of(program, rows.bytes);
    const std::int64_t per_strip = strip_bytes / group_bytes;
    for (std::int64_t g = 0; g < rows.groups; g += per_strip) {
      row_groups groups{std::min(per_strip, rows.groups - g), rows.group_src_stride, rows.group_dst_stride};
      const strip part{src + g * rows.group_src_stride, dst + g * rows.group_dst_stride, rows.count, 0, whole, tail};
      if (rows.prefetch) {
        prefetch_strip(program, rows, part, groups, src_end, per_strip * rows.group_src_stride,
                       per_strip * rows.group_dst_stride);
      }
      // Near the end of the source the strip's loads are masked, or clipped; only its last group
      // needs that, and a strip of whole groups is a quarter of a 64 KiB tensor.
      const bool last_apart = groups.count > 1 && !reach_of(program, rows, part, groups, src_end).whole;
      if (last_apart) --groups.count;
      write_strip(program, rows, part, groups, src_end);
      if (last_apart) {
        const std::int64_t last = g + groups.count;
        gather_group(program, rows, src + last * rows.group_src_stride, dst + last * rows.group_dst_stride, src_end);
      }
    }
    return;
  }
  for (std::int64_t g = 0; g < rows.groups; ++g) {
    gather_group(program, rows, src + g * rows.group_src_stride, dst + g * rows.group_dst_stride, src_end);
  }
}

}  // namespace

void gather_rows_avx512vbmi(const gather_program& program, const gather_rows& rows, const std::byte* src,
                            std::byte* dst, const std::byte* src_end) {
  gather_strips(program, rows, src, dst, src_end);
  if (rows.stream || rows.stream_in_place) stream_fence();
}

}  // namespace regrid::kernels
