// The gather program interpreter for halves_of_16 programs, built for x86-64-v3 (flags in
// CMakeLists.txt). AVX2 has no byte permute across its 128-bit halves, so each 32-byte chunk is
// built from one vpshufb per pair of 16-byte windows, one window per half (see gather.hpp), ORed
// together. Without it, CPUs lacking AVX-512 moved the short runs of channels-last CRD and RGB
// pixel shuffles 1 to 6 bytes at a time (0.04-0.25 of memcpy).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <span>

#include "kernels/permute/gather.hpp"

namespace regrid::kernels {
namespace {

constexpr std::int64_t chunk = 32;
constexpr std::int64_t window = 16;

// Output handled together: each chunk of the program is built at every period of a strip (rows, and
// groups of rows when they are short) with its steps' indices and windows in registers. The strip's
// output stays in L1 meanwhile, so the chunks of a line written one after another merge there.
constexpr std::int64_t strip_bytes = 16 * 1024;
static_assert(2 * max_gather_period_bytes <= strip_bytes, "a long row must hold whole periods");

// A part of the output walked chunk by chunk: `groups` groups of `rows` rows, each row the periods
// [first_period, end_period) and then tail_bytes of the next one.
struct strip {
  const std::byte* src;
  std::byte* dst;
  std::int64_t groups;
  std::int64_t group_src_stride;
  std::int64_t group_dst_stride;
  std::int64_t rows;
  std::int64_t src_stride;
  std::int64_t dst_stride;
  std::int64_t first_period;
  std::int64_t end_period;
  std::int64_t tail_bytes;
  std::int64_t period_src;
  std::int64_t period_dst;
};

inline __m256i load_halves(const std::byte* low, const std::byte* high) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(low))),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(high)), 1);
}

// One step. Checked: near the end of the source, where a window's 16 bytes may reach past src_end
// (its needed bytes never do), such a window is read as the 16 bytes ending at src_end, and its
// half's indices move up by as many bytes. A window may also lie wholly past src_end: in the part
// of a period past a row's end, whose bytes are never stored. Shifts stop at 16, so that 0x80
// entries stay at 0x80 or above and still give zero.
inline char shift_to(const std::byte* at, const std::byte* last) {
  return static_cast<char>(at > last ? std::min<std::ptrdiff_t>(at - last, window) : 0);
}

template <bool Checked>
inline __m256i shuffled(__m256i index, const std::byte* low, const std::byte* high, const std::byte* src_end) {
  if constexpr (Checked) {
    const std::byte* last = src_end - window;
    const char low_shift = shift_to(low, last);
    const char high_shift = shift_to(high, last);
    index = _mm256_add_epi8(index, _mm256_setr_m128i(_mm_set1_epi8(low_shift), _mm_set1_epi8(high_shift)));
    low = std::min(low, last);
    high = std::min(high, last);
  }
  return _mm256_shuffle_epi8(load_halves(low, high), index);
}

// One chunk's N steps, held in registers while the chunk is built at every period of a strip.
template <int N>
struct steps_in_registers {
  __m256i index[N];
  std::int64_t low[N];  // window offsets of the two halves
  std::int64_t high[N];

  explicit steps_in_registers(const gather_step* first) {
    for (int k = 0; k < N; ++k) {
      index[k] = _mm256_load_si256(reinterpret_cast<const __m256i*>(first[k].index.data()));
      low[k] = first[k].window_a;
      high[k] = first[k].window_b;
    }
  }

  // The chunk of the period whose source starts at `base`.
  template <bool Checked>
  [[nodiscard]] __m256i build(const std::byte* base, const std::byte* src_end) const {
    __m256i value = shuffled<Checked>(index[0], base + low[0], base + high[0], src_end);
    for (int k = 1; k < N; ++k) {
      value = _mm256_or_si256(value, shuffled<Checked>(index[k], base + low[k], base + high[k], src_end));
    }
    return value;
  }
};

// A chunk of more steps than fit the registers: read from the program at each build.
struct steps_in_memory {
  const gather_step* first;
  int count;

  template <bool Checked>
  [[nodiscard]] __m256i build(const std::byte* base, const std::byte* src_end) const {
    __m256i value = _mm256_setzero_si256();
    for (const gather_step& step : std::span(first, static_cast<std::size_t>(count))) {
      const __m256i index = _mm256_load_si256(reinterpret_cast<const __m256i*>(step.index.data()));
      value = _mm256_or_si256(value, shuffled<Checked>(index, base + step.window_a, base + step.window_b, src_end));
    }
    return value;
  }
};

// The first `bytes` bytes of a chunk: AVX2 has no byte-masked store.
inline void store_part(std::byte* to, __m256i value, std::int64_t bytes) {
  alignas(32) std::byte buffer[chunk];
  _mm256_store_si256(reinterpret_cast<__m256i*>(buffer), value);
  std::memcpy(to, buffer, static_cast<std::size_t>(bytes));
}

// Chunk c of every period of the strip.
template <bool Checked, class Steps>
void run_chunk(const Steps& steps, const strip& part_ref, std::int64_t c, const std::byte* src_end) {
  // A local copy: stores through std::byte* may alias anything, which would make the compiler
  // reload every bound and stride after each store.
  const strip part = part_ref;
  const std::int64_t tail = std::clamp<std::int64_t>(part.tail_bytes - c * chunk, 0, chunk);
  for (std::int64_t g = 0; g < part.groups; ++g) {
    const std::byte* group_src = part.src + g * part.group_src_stride;
    std::byte* group_dst = part.dst + c * chunk + g * part.group_dst_stride;
    for (std::int64_t r = 0; r < part.rows; ++r) {
      const std::byte* from = group_src + r * part.src_stride;
      std::byte* to = group_dst + r * part.dst_stride;
      for (std::int64_t p = part.first_period; p < part.end_period; ++p) {
        const __m256i value = steps.template build<Checked>(from + p * part.period_src, src_end);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + p * part.period_dst), value);
      }
      if (tail == 0) continue;
      const __m256i value = steps.template build<Checked>(from + part.end_period * part.period_src, src_end);
      std::byte* at = to + part.end_period * part.period_dst;
      if (tail == chunk) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), value);
      } else {
        store_part(at, value, tail);
      }
    }
  }
}

template <bool Checked>
void run_chunks(const gather_program& program, const strip& part, const std::byte* src_end) {
  const gather_step* steps = program.steps.data();
  const std::uint32_t* chunk_end = program.chunk_end.data();
  // Rows shorter than a period only need the chunks of their part-period.
  const auto chunks = part.end_period > part.first_period ? static_cast<std::int64_t>(program.chunk_end.size())
                                                          : (part.tail_bytes + chunk - 1) / chunk;
  std::uint32_t s = 0;
  for (std::int64_t c = 0; c < chunks; ++c) {
    const int count = static_cast<int>(chunk_end[c] - s);
    const gather_step* first = steps + s;
    auto run = [&]<int N>() { run_chunk<Checked>(steps_in_registers<N>(first), part, c, src_end); };
    switch (count) {
      case 1: run.template operator()<1>(); break;
      case 2: run.template operator()<2>(); break;
      case 3: run.template operator()<3>(); break;
      case 4: run.template operator()<4>(); break;
      case 5: run.template operator()<5>(); break;
      case 6: run.template operator()<6>(); break;
      case 7: run.template operator()<7>(); break;
      case 8: run.template operator()<8>(); break;
      default: run_chunk<Checked>(steps_in_memory{first, count}, part, c, src_end); break;
    }
    s = chunk_end[c];
  }
}

// The source byte past the furthest one the strip's windows reach (strides are non-negative, so
// its last row of its last group reaches furthest).
const std::byte* reach_end(const gather_program& program, const strip& part) {
  const std::int64_t periods = part.end_period + (part.tail_bytes > 0 ? 1 : 0);
  if (periods == 0) return part.src;
  return part.src + (part.groups - 1) * part.group_src_stride + (part.rows - 1) * part.src_stride +
         (periods - 1) * part.period_src + program.reach;
}

// Prefetches the source and destination lines of the strip `ahead` source and `ahead_dst`
// destination bytes after this one, up to the end of the source: each chunk of a strip is built at
// all of its periods in turn, an order the hardware prefetchers do not follow.
void prefetch_next(const gather_program& program, const strip& part, const std::byte* src_end, std::int64_t ahead,
                   std::int64_t ahead_dst) {
  const std::int64_t source_left = src_end - part.src;
  const std::int64_t periods = part.end_period + (part.tail_bytes > 0 ? 1 : 0);
  for (std::int64_t g = 0; g < part.groups; ++g) {
    for (std::int64_t r = 0; r < part.rows; ++r) {
      const std::int64_t row_source = g * part.group_src_stride + r * part.src_stride + ahead;
      const std::int64_t row_destination = g * part.group_dst_stride + r * part.dst_stride + ahead_dst;
      for (std::int64_t p = part.first_period; p < periods; ++p) {
        const std::int64_t source = row_source + p * part.period_src;
        if (source_left - source < program.reach) return;
        prefetch_period(program, reinterpret_cast<std::uintptr_t>(part.src) + static_cast<std::uintptr_t>(source),
                        reinterpret_cast<std::uintptr_t>(part.dst) +
                            static_cast<std::uintptr_t>(row_destination + p * part.period_dst));
      }
    }
  }
}

void run_strip(const gather_program& program, const strip& part, const std::byte* src_end) {
  if (reach_end(program, part) <= src_end) {
    run_chunks<false>(program, part, src_end);
  } else {
    run_chunks<true>(program, part, src_end);
  }
}

}  // namespace

void gather_rows_avx2(const gather_program& program, const gather_rows& rows, const std::byte* src, std::byte* dst,
                      const std::byte* src_end) {
  const std::int64_t period_dst = program.period_dst_bytes;
  const std::int64_t whole = rows.bytes / period_dst;
  const std::int64_t tail = rows.bytes - whole * period_dst;
  strip part{src,
             dst,
             1,
             rows.group_src_stride,
             rows.group_dst_stride,
             rows.count,
             rows.src_stride,
             rows.dst_stride,
             0,
             whole,
             tail,
             program.period_src_bytes,
             period_dst};
  const std::int64_t group_bytes = rows.count * rows.bytes;
  if (rows.across && rows.count > 1) {
    // Rows that read the same source lines: strips of periods across every row (see
    // gather_rows_share_source), each source line from memory once.
    // One group (run_permute never groups such rows). A call's stretch may hold nothing but the
    // part-period ending the rows: one strip of tails.
    const std::int64_t per_strip = std::max<std::int64_t>(1, strip_bytes / (period_dst * rows.count));
    do {
      part.end_period = std::min(whole, part.first_period + per_strip);
      part.tail_bytes = part.end_period == whole ? tail : 0;
      if (rows.prefetch) prefetch_next(program, part, src_end, per_strip * part.period_src, per_strip * period_dst);
      run_strip(program, part, src_end);
      part.first_period = part.end_period;
    } while (part.first_period < whole);
    return;
  }
  if (rows.bytes >= strip_bytes) {
    // Long rows: strips of periods of one row (periods are at most half a strip, so every long row
    // has whole periods and its tail goes with the last strip).
    const std::int64_t per_strip = std::max<std::int64_t>(1, strip_bytes / period_dst);
    part.rows = 1;
    for (std::int64_t g = 0; g < rows.groups; ++g) {
      for (std::int64_t r = 0; r < rows.count; ++r) {
        part.src = src + g * rows.group_src_stride + r * rows.src_stride;
        part.dst = dst + g * rows.group_dst_stride + r * rows.dst_stride;
        for (std::int64_t p = 0; p < whole; p += per_strip) {
          part.first_period = p;
          part.end_period = std::min(whole, p + per_strip);
          part.tail_bytes = part.end_period == whole ? tail : 0;
          if (rows.prefetch) prefetch_next(program, part, src_end, per_strip * part.period_src, per_strip * period_dst);
          run_strip(program, part, src_end);
        }
      }
    }
    return;
  }
  if (rows.groups > 1 && group_bytes <= strip_bytes) {
    // Whole groups of short rows per strip: a group alone may hold too few rows to repay each
    // chunk's set-up.
    const std::int64_t per_strip = strip_bytes / std::max<std::int64_t>(group_bytes, 1);
    for (std::int64_t g = 0; g < rows.groups; g += per_strip) {
      part.src = src + g * rows.group_src_stride;
      part.dst = dst + g * rows.group_dst_stride;
      part.groups = std::min(per_strip, rows.groups - g);
      if (rows.prefetch) {
        prefetch_next(program, part, src_end, per_strip * rows.group_src_stride, per_strip * rows.group_dst_stride);
      }
      run_strip(program, part, src_end);
    }
    return;
  }
  const std::int64_t per_strip = std::max<std::int64_t>(1, strip_bytes / std::max<std::int64_t>(rows.bytes, 1));
  for (std::int64_t g = 0; g < rows.groups; ++g) {
    for (std::int64_t r = 0; r < rows.count; r += per_strip) {
      part.src = src + g * rows.group_src_stride + r * rows.src_stride;
      part.dst = dst + g * rows.group_dst_stride + r * rows.dst_stride;
      part.rows = std::min(per_strip, rows.count - r);
      if (rows.prefetch)
        prefetch_next(program, part, src_end, per_strip * rows.src_stride, per_strip * rows.dst_stride);
      run_strip(program, part, src_end);
    }
  }
}

}  // namespace regrid::kernels
