#include "kernels/permute/permute.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <optional>
#include <string_view>

#include "core/checked.hpp"
#include "kernels/permute/gather.hpp"
#include "kernels/stream_store.hpp"
#include "regrid/runtime.hpp"
#include "runtime/cpu_features.hpp"
#include "runtime/thread_pool.hpp"

namespace regrid::kernels {
namespace {

// a / b rounded up, for a >= 0 and b > 0.
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Rows handed to the tile kernel at once: about this many bytes of output.
constexpr std::int64_t bytes_per_work_item = 64 * 1024;
// With more than one thread, work items are cut to at most 1 / (threads x this) of the tensor
// (and no less than min_work_item_bytes), so that a tensor of 48-512 KiB does not make one
// item that a single thread runs while the others wait.
constexpr std::int64_t min_items_per_thread = 4;
constexpr std::int64_t min_work_item_bytes = 4 * 1024;
// A gather call groups its rows (gather_tile::grouped_rows_bytes) over an outer axis of at least
// this many positions: the strip nearest the source's end runs its last group alone (its loads
// are masked), so two or three groups save next to nothing (s2d channels-first CRD C16, 2 and 3
// groups: 0.84-0.91x).
constexpr std::int64_t min_row_groups = 4;
// A shuffle call moving fewer bytes than this over its run and inner repeat also walks an outer one.
constexpr std::int64_t short_call_bytes = 4 * 1024;
// Runs shorter than this are staged through an L1 buffer when their rows continue across a
// repeat axis (shuffle_tile::segment_copy): below a vector per way, the shuffle's per-run
// loads, masks and stores cost more than copying the segments twice. Interleaves also stage runs
// of one to two vectors, whose masked tail step is half empty: 1.22x at 64 KiB, 1.35x at 1 MiB,
// 1.0x at 16 MiB over the 161 grid cells this moves; de-interleaves lost there (0.98x at 1 MiB,
// 0.92x at 16 MiB), and staging runs up to 256 bytes lost in both directions (0.8-0.97x).
constexpr std::int64_t staged_interleave_run_bytes = 128;
constexpr std::int64_t staged_deinterleave_run_bytes = 64;
// De-interleaves of 65-95 byte runs (a vector and a tail under half a vector per way) whose
// output does not stream stage too: measured on the grid cells of 64-127 byte runs, each cell
// alone, direct and staged alternating, twice: runs of 65-95 bytes 1.33x at 64 KiB, 1.44x at
// 1 MiB, 1.19x at 16 MiB (83 cells); runs of 64 bytes lost (0.87-0.90x), runs of 96-127 bytes
// were mixed (0.93x at 16 MiB), and 16 MiB cells whose output streams lost 0.36-0.44x.
constexpr std::int64_t staged_unstreamed_deinterleave_run_bytes = 96;
// De-interleaves whose destination rows do not all start on cache lines stream their runs of at
// least this many bytes, each row's vectors re-cut into whole lines (see b_way_run); from 1 KiB
// where the output is 64 MiB or more (streamed_deinterleave_run_bytes).
constexpr std::int64_t streamed_unaligned_deinterleave_run_bytes = 2048;
// On CPUs without AVX-512 the AVX2 kernels (32-byte vectors) take the direct plan from two of
// their vectors per way on; AVX-512 CPUs keep the rules above, also for the AVX2 byte kernels they
// use (unmeasured there). Planning the grid's staged cells both ways in one binary on a Zen 3
// without AVX-512 (regrid bench --threads 1 2 at 64 KiB, 1 MiB and 16 MiB, three alternations):
// - interleaves of runs of 64-127 bytes gained 1.14-1.51x per size on 1 thread, except 8 and 16
//   ways (0.5-0.66x at 16 MiB, 0.75-0.94x at 1 MiB), whose direct plans walk the ways as a repeat
//   far apart, and 64-byte runs of 8-byte elements (0.72-0.89x at 16 MiB on 2 threads);
// - power-of-two de-interleaves of 65-95 bytes (the unstreamed rule above) 1.13-1.48x, except
//   8 ways again (0.61-0.82x on 2 threads: s2d NCHW b8, channels-first K = 3 b8);
// - odd-way de-interleaves lost direct in the cache (0.82-0.94x at 32-95 bytes) and gained where
//   the output streams (1.10-1.46x from 32 bytes on);
// - shorter runs lost direct (0.23-0.69x under 32 bytes).
// The 58 / 58 / 70 cells this moves, 1 thread: 1.27x / 1.28x / 1.48x at 64 KiB / 1 MiB / 16 MiB
// (median 0.30 -> 0.41, 0.50 -> 0.66, 0.58 -> 0.90 of memcpy); 2 threads 1.15x / 1.16x / 1.42x.
// Since each run's tail is one step (b_way_step::padded_tail), more interleaves go direct: runs of
// 32-63 bytes of up to 4 ways where the output streams, and of 8 and 16 ways (and 64-byte runs of
// 8-byte elements) in the cache. Staged cells of 32-127 byte runs planned both ways, both with the
// one-step tails, alternating per layout group, three rounds, 1 thread: up to 4 ways 1.35-1.95x
// per element width at 16 MiB (8-byte elements 0.93-0.99x); 8 and 16 ways 1.26-1.47x at 64 KiB,
// 1.0-1.24x at 1 MiB, but 0.51-0.69x at 16 MiB for 8 ways. Up to 4 ways of 32-63 bytes in the
// cache went 0.89x / 0.80x on 1 / 2 threads at 64 KiB and 1.07x / 0.98x at 1 MiB (same-binary-pair
// A/B of the whole change), and stay staged. Under 32 bytes direct still lost (0.39-0.82x).
constexpr std::int64_t staged_avx2_interleave_run_bytes = 32;
constexpr std::int64_t staged_avx2_cached_interleave_run_bytes = 64;
constexpr std::int64_t max_ways_direct_avx2 = 4;
constexpr std::int64_t max_staged_avx2_interleave_run_elements = 8;
constexpr std::int64_t staged_avx2_streamed_odd_deinterleave_run_bytes = 32;
// The staging buffer: batches of segments, small enough to stay in L1 next to the rows in flight.
constexpr std::int64_t staging_bytes = 16 * 1024;

using axis_list = detail::fixed_vector<permute_axis, max_permute_axes>;
using way_list = detail::fixed_vector<std::size_t, 4>;

// The level plans are made for: active_isa(), except while the avx512 level asks what the AVX2
// level would plan (see plan_permute).
thread_local std::optional<isa> planning_level_override;

isa planning_isa() { return planning_level_override.value_or(active_isa()); }

// Set while plan_permute plans an output that would stream as one that stays in the cache (see
// plan_permute).
thread_local bool planning_for_the_cache = false;

std::int64_t magnitude(std::int64_t stride) { return stride < 0 ? -stride : stride; }

bool contains(const way_list& ways, std::size_t axis) {
  return std::find(ways.begin(), ways.end(), axis) != ways.end();
}

// The shuffle kernel a plan takes, and the ISA it was built for (null fn: none). A
// non-power-of-two B (3, 9) needs general two-source permutes: SSE2 has none for bytes or
// 16-bit lanes, and for bytes x86-64-v4 has no AVX512-VBMI; GCC then builds them from element
// moves, up to 70x slower (d2s NHWC CRD b3 C16 uint8: 11.6 GB/s on AVX2, 0.17 on AVX-512 and
// scalar). So bytes take the VBMI build where the CPU has it (one vpermt2b per shuffle), else
// AVX-512 takes the AVX2 kernel for bytes, whose permutes stay inside 128-bit lanes (vpshufb),
// and the scalar level takes no non-power-of-two shuffle. Power-of-two byte interleaves keep
// the avx512 build: its lane-local zip network was as fast as the VBMI permutes over the grid,
// while de-interleaves and B = 3, 9 gained 1.05-3.5x from VBMI. Elements of 16 and 32 bytes have
// avx512 shuffles only (2, 4, 8 or 16 ways); below it they stay run copies.
struct shuffle_choice {
  shuffle_fn fn = nullptr;
  isa level = isa::scalar;
  bool transposes = false;
};

// Where the assembling kernel (shuffle_repeat::assembled) replaces staging. Each rule measured on
// the grid cells it moves, each alone, old and new alternating (the changed plans' ratios to
// memcpy in parentheses):
// - Interleaves of 4 ways, 1- or 2-byte elements, runs of 32-127 bytes: 36 cells (32 assembled;
//   4 of 32-byte runs become gathers, gather_beats judging an unstaged plan), four times: 1.19x at
//   64 KiB (median 0.40 -> 0.49), 1.24x at 1 MiB (0.46 -> 0.60), 1.20x at 16 MiB (0.59 -> 0.72);
//   one cell under 0.9x (0.88x, one of the gathers). 4- and 8-byte elements lost at 64 KiB (0.95x,
//   0.94x) and gained little above; 2 ways were mixed (0.53-1.23x over 14 cells).
// - ... and runs of 16-31 bytes of 2-byte elements (one whole piece per row, and a tail): 1.07x at
//   64 KiB (6 cells, median 0.24 -> 0.26), 1.25x at 1 MiB (8, 0.36 -> 0.46), 1.21x at 16 MiB (4;
//   one, a gather before, 0.82x), four times. Bytes lost there (0.90-0.96x), and runs under 16
//   bytes, where every vector is a tail, lost 0.26-0.76x.
// - De-interleaves of 8 ways whose output streams (too large for the cache), where each way's
//   output row continues for under 1 KiB and one call moves more than 512 bytes of it: the s2d
//   channels-first K = 3 b = 8 tensors of C = 3 to 64, whose staged plans read 0.12-0.5 of memcpy
//   at 16 MiB. Over all 40 such cells, twice: 1.37x (median 0.38 -> 0.46), 0.58-0.65x for C = 1
//   (1-1.6 KiB rows, 0.62-0.78 staged), hence the first limit. Without them, four times: calls of
//   648 bytes and more 1.12-4.15x (28 cells), of 432-512 bytes 0.67-1.06x (6 cells, CRD C = 4 and
//   64, where staging joins several calls' rows), hence the second. 2- and 4-way de-interleaves
//   and all those in cache lost or tied (0.76-1.14x at 16 MiB, 0.78-1.0x at 64 KiB and 1 MiB):
//   each input vector becomes B narrow stores, where staging stores whole vectors twice.
constexpr std::int64_t min_assembled_run_bytes = 32;
constexpr std::int64_t min_assembled_word_run_bytes = 16;
constexpr std::int64_t max_assembled_deinterleave_row_bytes = 1024;
constexpr std::int64_t min_assembled_deinterleave_call_bytes = 512;
std::atomic<bool> assembled_forced{false};

// `continued_bytes`: how far each far-side row continues over the repeat axis that continues it;
// `call_bytes`: how much of each far-side row one kernel call moves.
//
// Interleaves whose output streams but stays under 64 MiB stage instead, and so stream their
// output in order where a destination group exists (take_destination_group): same-run A/B on a
// Zen 5, the 18 cells of the 16 MiB grid this changes (d2s channels-first K = 3 b4 of 1- and
// 2-byte elements, 17 of them grouped; d2s NHWC CRD b8 C4 of 2-byte elements, now a gather), two
// alternations: 1.38x / 1.19x on one / two threads (d2s channels-first K = 3 DCR b4 C16 of 2-byte
// elements 0.29 -> 0.54-0.70 of memcpy; C1 0.88-1.14x). At 256 MiB the same 14 cells went 0.79x /
// 0.87x (0.55-1.42x).
bool assembles_shuffle(std::size_t width, std::int64_t ways, bool interleave, std::int64_t run_bytes,
                       std::int64_t continued_bytes, std::int64_t call_bytes, bool output_streams,
                       bool far_past_cache) {
  const isa needed = width == 1 ? isa::avx512vbmi : isa::avx512;
  if (planning_isa() < needed || (ways != 2 && ways != 4 && ways != 8)) return false;
  if (assembled_forced.load(std::memory_order_relaxed)) return true;
  if (!interleave) {
    return ways == 8 && output_streams && continued_bytes < max_assembled_deinterleave_row_bytes &&
           call_bytes > min_assembled_deinterleave_call_bytes;
  }
  if (output_streams && !far_past_cache) return false;
  const std::int64_t min_run = width == 2 ? min_assembled_word_run_bytes : min_assembled_run_bytes;
  return ways == 4 && width <= 2 && run_bytes >= min_run;
}

// AVX2 de-interleaves of 16 ways of 2-byte elements: two 8 x 8 block transposes in 128-bit
// registers (transposing_shuffle_kernel_avx2) instead of the 16-way network, whose 16 vectors and
// their temporaries do not fit AVX2's 16 registers. Zen 3 without AVX-512, the 6 grid cells this
// takes (d2s NHWC CRD b4 C16 / C64, s2d NHWC CRD b8 C16 and channels-last K = 3 CRD b3 / b4 / b8
// C16, of 2-byte elements; 4 of them staged), each planned both ways in one process (bench/plan_ab,
// both orders; 9 samples, 3 at 256 MiB), one / two threads: 1.21-1.45x / 1.27-1.41x at 64 KiB
// (0.13-0.26 of memcpy before), 1.11-1.61x / 1.15-1.57x at 1 MiB, 1.11-1.28x / 1.05-1.25x at
// 16 MiB, 1.09-1.28x / 0.98-1.25x at 256 MiB. The other 16-way shuffles lost to their networks
// that way at 1 MiB: bytes 0.51-0.97x, 2-byte interleaves 0.82-0.98x (0.75-0.78x at 16 MiB),
// 4-byte ones 0.38-1.12x (geometric means 0.61-1.11x by direction and staging), 8-byte ones
// 0.75-1.43x (0.95-1.03x).
bool transposes_sixteen_ways(std::size_t width, std::int64_t ways, bool interleave) {
  return planning_isa() == isa::avx2 && width == 2 && ways == 16 && !interleave;
}

shuffle_choice select_shuffle(std::size_t width, std::int64_t ways, bool interleave, bool wide_eight_byte = false,
                              bool assembled = false) {
  const bool power_of_two = std::has_single_bit(static_cast<std::uint64_t>(ways));
  // 32 and 64 ways (the channels-last CRD transposes of b = 8, and of b = 4 with K = 3): block
  // transposes in registers (transposing_shuffle_kernel_*). The shuffle networks of that many
  // ways keep 64 vectors in flight and spill; same-run A/Bs over the 26 such grid cells of each
  // width against them: bytes 5.4x at 64 KiB, 3.3x at 1 MiB, 1.6x at 16 MiB (interleaves
  // streaming); 2-byte 3.7x, 2.6x, 1.4x; 4-byte 6.1x, 3.9x, 1.7x. For 8-byte elements the tile
  // transpose (transpose_tile_kernel_avx512) was as fast or faster where it applies; at the
  // avx512 level the block-transposing shuffle serves them only where it does not
  // (`wide_eight_byte`, see plan_permute). AVX2 has no tile transpose; there the shuffles of all
  // four widths replaced gathers and element-by-element tile copies: same-binary-pair A/B on a Zen
  // 3 without AVX-512 over the grid cells that change (48 at 64 KiB, 36 at 1 MiB and at 16 MiB),
  // six alternations, 1 thread: 3.05x / 2.52x / 2.34x (median 0.16 -> 0.39, 0.23 -> 0.55,
  // 0.22 -> 0.52 of memcpy), one cell under 0.95x (0.89x, d2s channels-last DCR b8 C1 of bytes at
  // 64 KiB); 2 threads, six: 3.13x / 1.92x / 2.27x (0.83x for d2s channels-last CRD b8 C1 of
  // bytes at 64 KiB).
  if (transposes_sixteen_ways(width, ways, interleave))
    return {transposing_shuffle_kernel_avx2(width, ways, interleave), isa::avx2, true};
  if (ways > max_register_ways) {
    if (planning_isa() >= isa::avx512) {
      if (width == 8 && !wide_eight_byte) return {};
      return {transposing_shuffle_kernel_avx512(width, ways, interleave), isa::avx512, true};
    }
    if (planning_isa() == isa::avx2) return {transposing_shuffle_kernel_avx2(width, ways, interleave), isa::avx2, true};
    return {};
  }
  // Byte interleaves of powers of two take the AVX-512 networks, except the assembling kernel's,
  // whose one-source byte permute needs VBMI.
  if (width == 1 && planning_isa() >= isa::avx512vbmi && (!(interleave && power_of_two) || assembled)) {
    return {shuffle_kernel_avx512vbmi(width, ways, interleave), isa::avx512vbmi};
  }
  isa level = std::min(planning_isa(), isa::avx512);
  if (!power_of_two) {
    if (level == isa::scalar) return {};
    if (width == 1) level = isa::avx2;
  }
  switch (level) {
    case isa::avx512vbmi:
    case isa::avx512: return {shuffle_kernel_avx512(width, ways, interleave), level};
    case isa::avx2: return {shuffle_kernel_avx2(width, ways, interleave), level};
    case isa::scalar: break;
  }
  return {shuffle_kernel_scalar(width, ways, interleave), level};
}

// Whether the plan's output is too large to stay in cache, so that its kernel should write it with
// streaming stores (kernels/stream_store.hpp).
bool output_streams(const permute_plan& plan) { return plan.streams; }

// The bytes one run of a shuffle plan moves: every way's positions of it.
std::int64_t shuffle_run_bytes(const permute_plan& plan) {
  const shuffle_tile& tile = *plan.shuffle;
  return static_cast<std::int64_t>(tile.offsets.size() * plan.width) * tile.run.extent;
}

// Bytes of one way's row of a shuffle plan: the run's elements.
std::int64_t way_row_bytes(const permute_plan& plan) {
  return plan.shuffle->run.extent * static_cast<std::int64_t>(plan.width);
}

// Whether a VBMI gather of this plan's size builds its strips in an L1 buffer and streams them out
// (gather_rows::stream, which periods of one chunk skip: see run_permute).
bool gather_strips_stream(const permute_plan& plan) {
  return output_streams(plan) && plan.total_bytes >= streamed_gather_output_bytes_on(runtime::planning_core_kind());
}

// Gathers of one 64-byte chunk per period write each strip in place in order. Outputs well past
// the cache still stream them through the L1 buffer where rows are long enough: at 256 MiB, one
// thread, with and without, the 23 such grid cells on an Intel Xeon with AMX (2 vCPUs; bench/plan_ab,
// both orders): rows of 10-64 KiB (d2s and s2d NHWC CRD, s2d channels-last K = 3 CRD) 1.07-1.22x,
// rows of 1.6 and 4 KiB (d2s channels-last K = 3 CRD) 0.64-0.78x, 6.5 KiB even; on two threads
// the 16 cells of long rows 1.08-1.24x. (A Zen 5 had measured 0.96x for them all, rows not told
// apart.)
constexpr std::int64_t min_streamed_one_chunk_row_bytes = 8192;
bool gather_streams_strips(const permute_plan& plan, std::int64_t period, std::int64_t row_bytes) {
  return gather_strips_stream(plan) && (period > 64 || (period == 64 && row_bytes >= min_streamed_one_chunk_row_bytes));
}

// Whether any of the tile's lined programs has its windows on lines where they fit.
bool has_fitted_programs(const gather_tile& tile) {
  return std::ranges::any_of(tile.lined_programs, [](const auto& lined) { return lined->lines_where_they_fit; });
}

// Whether a gather runs its lined programs (windows on source lines): it has them, and the source
// starts on a line.
bool runs_lined_programs(const gather_tile& tile, const std::byte* src) {
  return !tile.lined_programs.empty() && reinterpret_cast<std::uintptr_t>(src) % 64 == 0;
}

// Whether a tile reads its source a line after another in stretches: one of its axes steps by a
// line, and its lines reach the tile's next longer source stride (or there is none), leaving no
// gap within the stretch for another call to read.
bool reads_source_stretches(const permute_plan& plan) {
  const std::array tile_axes{plan.plane, plan.row, plan.col};
  for (const permute_axis& lines : tile_axes) {
    if (lines.extent <= 1 || lines.src_stride != 64) continue;
    std::int64_t next = 0;
    for (const permute_axis& a : tile_axes) {
      const std::int64_t stride = magnitude(a.src_stride);
      if (a.extent > 1 && stride > 64 && (next == 0 || stride < next)) next = stride;
    }
    if (next == 0 || next == lines.extent * 64) return true;
  }
  return false;
}

// Whether streamed run copies of 12-63 bytes join the runs of tiles that read the source in one
// stretch into whole lines (see run_tile_kernel_avx512): everywhere but on a Zen 5. There, each
// of the 43 cells of the 16 MiB grid whose plan it changes (d2s channels-last K = 3, d2s NHWC DCR,
// s2d channels-last K = 3 b8), planned both ways in one process (bench/plan_ab, 7 samples each):
// the ordinary copy 1.28x / 1.35x on one / two threads (d2s channels-last K = 3 DCR b4 C3 of
// 2-byte elements 0.19 -> 0.43 of memcpy; 0.86x the least, s2d channels-last K = 3 DCR b3 C3 of
// 2-byte elements); joining the tiles that read interleaved source streams instead lost there
// (0.84x, s2d channels-last K = 3 b8 0.32-0.53x). Of the 67 cells of 256 MiB, joining only the
// interleaved ones 1.18x / 1.13x (the 22 one-stretch d2s cells 1.25-2.5x; the rest, whose kernel
// copies alike, 0.82-1.15x, noise). A Zen 4 had measured these joins 1.42x at 16 MiB.
bool joins_source_stretches() { return runtime::planning_core_kind() != runtime::core_kind::amd_zen5; }

// Whether runs under a line into outputs that stay in the cache walk innermost the axis that writes
// the destination in order (see plan_permute_unsplit): everywhere but on a Zen 5. There, the 13
// cells of the 64 KiB grid it changes (s2d NHWC DCR of few channels, d2s channels-last K = 3 DCR
// b8 C3), planned both ways in one process (bench/plan_ab, 11 samples, both orders), ran 0.94x /
// 0.94x on one thread (s2d NHWC DCR b3 C16 of bytes 0.81x) and 0.93x / 0.93x on two; the 11 of
// 1 MiB 1.01x / 1.01x on one thread, 1.01x / 1.02x on two; at the AVX2 level 0.98x / 0.96x at
// 64 KiB and 1.03x / 1.01x at 1 MiB. An Intel Xeon had gained 1.15x and 1.23x.
bool writes_short_runs_in_output_order() { return runtime::planning_core_kind() != runtime::core_kind::amd_zen5; }

// Elements of 1, 2, 4 or 8 bytes are moved one at a time by the scalar kernels (a shuffle takes
// them where one side is contiguous); anything wider, or of odd width, is a run the vector
// kernels copy whole, with streaming stores when `streaming` (see run_tile_kernel_avx512 for
// `far_past_cache`).
tile_kernel tile_kernel_for_isa(std::size_t width, bool streaming = false, bool far_past_cache = false) {
  const bool number = width == 1 || width == 2 || width == 4 || width == 8;
  if (!number) {
    switch (planning_isa()) {
      case isa::avx512vbmi:
      case isa::avx512: return run_tile_kernel_avx512(width, streaming, far_past_cache, joins_source_stretches());
      case isa::avx2: return run_tile_kernel_avx2(width, streaming, far_past_cache, joins_source_stretches());
      case isa::scalar: break;
    }
  }
  return select_tile_kernel(width);
}

// The first axis that continues far-side rows ending at `far_stride` (far side: src for an
// interleave, dst for a de-interleave), skipping those `skip` names; axes.size() if none.
template <class Skip>
std::size_t find_continuing(const axis_list& axes, bool interleave, std::int64_t far_stride, Skip skip) {
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (!skip(i) && (interleave ? axes[i].src_stride : axes[i].dst_stride) == far_stride) return i;
  }
  return axes.size();
}

// Removes axes[i], keeping the others' order, and returns it.
permute_axis take_axis(axis_list& axes, std::size_t i) {
  const permute_axis axis = axes[i];
  for (std::size_t j = i + 1; j < axes.size(); ++j) axes[j - 1] = axes[j];
  axes.pop_back();
  return axis;
}

// The repeat a shuffle call walks, taken off the back of `axes` (innermost last): the innermost
// axis, and the next one too when one pass over the first moves under short_call_bytes of
// positions of `position_bytes` each, so that one call moves a useful amount of data.
shuffle_repeat take_repeat(axis_list& axes, std::int64_t position_bytes) {
  shuffle_repeat repeat;
  if (!axes.empty()) {
    repeat.inner = axes.back();
    axes.pop_back();
  }
  if (!axes.empty() && position_bytes * repeat.inner.extent < short_call_bytes) {
    repeat.outer = axes.back();
    axes.pop_back();
  }
  return repeat;
}

// Whether every position of a repeat starts a whole number of cache lines into the destination.
bool repeat_steps_by_lines(const shuffle_repeat& repeat) {
  return repeat.inner.dst_stride % 64 == 0 && repeat.outer.dst_stride % 64 == 0;
}

// Whether the runs of a repeat keep the destination's cache-line alignment from one to the next.
bool lines_line_up(const shuffle_repeat& repeat, std::int64_t run_bytes, std::int64_t ways) {
  return repeat_steps_by_lines(repeat) &&
         (run_bytes % 64 == 0 || std::has_single_bit(static_cast<std::uint64_t>(ways)));
}

// A de-interleave's direct plan walks its repeat axes in the destination's order: for s2d NCHW it
// reads source rows h*b + i for one i at a time, passing over the source b times with gaps of
// (b - 1) rows. Outside the cache that costs. Walking the axes in the source's order instead (one
// pass, writing b x b output rows at once), first A/B over the 485 grid cells whose plan changed
// (ratios to memcpy, two alternations): at 16 MiB 1.06-1.48x for B <= 4, 1.14-1.28x for streamed
// runs of 8 ways under 1 KiB; B = 8 unstreamed lost (0.35-0.74x, 64 rows written at once) and
// streamed runs of 1 KiB or more tied (0.89-1.05x); in cache (64 KiB, 1 MiB) it tied or lost
// (geo mean 0.96-1.0). The rule below, the 181 16 MiB cells it changes, three alternations:
// 1.25x on one thread (median 0.71 -> 0.89 of memcpy, cells under 0.75: 115 -> 11), 1.22x on two
// (0.71 -> 0.88, 115 -> 22).
constexpr std::int64_t max_source_order_ways = 4;
constexpr std::int64_t max_streamed_source_order_ways = 8;
constexpr std::int64_t max_streamed_source_order_run_bytes = 1024;
// Streamed runs of 1 KiB or more walk in the source's order too where the output is this large,
// far past the last-level cache: same-run A/B on a Zen 5, the 140 cells of the 256 MiB grid this
// changes (s2d NCHW and NCHW_VECT_C, b2-b8, every element width, runs of 1-32 KiB), two
// alternations, op throughput: one thread 1.31x (0.99-1.63x; s2d NCHW CRD b2 C4 of 2-byte
// elements 0.70 -> 1.05-1.09 of memcpy, b2 of bytes 0.8 -> 1.3), two threads 1.05x (0.85-1.27x,
// the two-thread alternations scattering). Each direct call there de-interleaves every b-th source
// row, coming back for the others b - 1 times; in the source's order one pass reads it. At 16 MiB,
// where the source stays in the cache between passes, the 44 cells it would change tied (0.99x on
// one and two threads, b3 of 8-byte elements 0.82-0.93x).
constexpr std::int64_t min_long_run_source_order_output_bytes = std::int64_t{64} << 20;
bool far_past_the_cache(const permute_plan& plan) { return plan.total_bytes >= min_long_run_source_order_output_bytes; }

// Whether an interleave's output rows that continue one another (rows_continue in choose_shuffle)
// keep ordinary stores on the AVX2 level, whose kernels have no line sink: each row streams from
// its first whole line on and writes its partial lines at either end with ordinary stores. Rows
// under 512 bytes that are not whole lines, of elements of up to 4 bytes, power-of-two ways, short
// of far past the cache. Zen 3 without AVX-512, the streamed plan against the same plan with
// ordinary stores (a switch in b_way; regrid bench, alternate processes, twice), one / two
// threads: the 20 cells of the 16 MiB grid this changes (d2s channels-first K = 3 b2 / b4 of
// C1-C64, rows of 160-408 bytes) 1.35x / 1.50x (b2 of bytes, 162- and 178-byte rows, 2.3-4.4x:
// 0.22-0.41 -> 0.78-1.00 of memcpy; the least 0.61x, a streamed 1.55 -> 1.14), the 18 at 32 MiB
// 1.38x / 1.27x (0.50-0.85 -> 1.0-1.34 where streaming lost most; the least 0.76x, 1.29 -> 1.08).
// 8-byte elements lost (0.61-1.18x at 16 MiB; rows of 512 bytes or more 0.56-0.89x at 32 MiB),
// as did rows of 512 bytes or more (geometric means per element width and way count 0.72-1.00x at
// 16 MiB on one thread). The binaries before and after, regrid bench, two alternations, the d2s
// channels-first K = 3 cells this changes: 16 MiB 1.53x / 1.49x (20 cells), 32 MiB 1.59x / 1.33x
// (18), the least 0.71x; the 140 others 0.99x / 1.02x.
constexpr std::int64_t min_streamed_avx2_continuing_row_bytes = 512;
constexpr std::size_t max_unstreamed_avx2_continuing_row_element_bytes = 4;
bool avx2_streams_continuing_rows_badly(const permute_plan& plan, isa level, std::int64_t ways,
                                        std::int64_t run_bytes) {
  const std::int64_t row = ways * run_bytes;
  return level == isa::avx2 && std::has_single_bit(static_cast<std::uint64_t>(ways)) &&
         plan.width <= max_unstreamed_avx2_continuing_row_element_bytes &&
         row < min_streamed_avx2_continuing_row_bytes && row % 64 != 0 && !far_past_the_cache(plan);
}

// Whether a streamed output's runs of `run_width` bytes (under a line) are copied with ordinary
// stores, so that the swap of short runs of odd lengths in plan_permute_unsplit (the longer axis
// innermost where the columns are few) applies as it does in the cache: on a Zen 5 below
// far_past_the_cache, where joins_source_stretches leaves them unjoined. There the tiles of d2s
// NHWC DCR b3 / b4 of 1-4 channels and s2d NHWC DCR b3 C3 (runs of 18-48 bytes) read the source in
// order and wrote each output row in b passes. Family 1Ah model 2 (2 vCPUs), the grid's cells this
// changes, the two plans in alternate processes of regrid bench, three times, op throughput,
// geometric mean, one / two threads: 12 MiB 1.26x / 1.09x (5 cells), 16 MiB 1.40x / 1.19x (11;
// 1.14-1.50x on one thread; d2s NHWC DCR b3 C1 of 8-byte elements 0.35-0.43 -> 0.51-0.61 of
// memcpy), 24 MiB 1.17x / 1.16x (11), 32 MiB 1.12x / 1.06x (11), 48 MiB 1.12x / 1.05x (11; the
// least 1.01x on one thread). Runs of up to 16 bytes keep the walk: of 12 bytes, where a gather
// took the unswapped plan (lone_element_gather_beats counts the output streams the copy writes),
// the swapped copy replaced it and lost 0.70-0.94x (d2s NHWC b3 C1 of 4-byte elements, DCR b3 C4 of
// bytes).
constexpr std::int64_t max_gathered_run_bytes = 16;
bool copies_streamed_runs_with_ordinary_stores(const permute_plan& plan, std::int64_t run_width) {
  return run_width > max_gathered_run_bytes && !joins_source_stretches() && !far_past_the_cache(plan);
}

// Where run copies write an output that streams with ordinary stores: on Intel's cores, below
// far_past_the_cache, but for runs of 65-127 bytes. There the output stays in the last-level cache,
// where streaming stores send it to memory. On an Intel Xeon with AMX (2 vCPUs):
// - runs under a line (joined into streamed lines by copy_joined_runs_streaming where their tiles
//   read one source stream): each of the 68 such cells of the 16 MiB grid planned both ways in one
//   process (bench/plan_ab, both orders), 1.10x / 1.09x on one / two threads, 23 / 20 cells faster
//   by over 4% (d2s channels-last K = 3 and NHWC DCR, 1.05-1.82x; d2s channels-last K = 3 DCR b2
//   C3 of 8-byte elements 1.82x), one slower (0.77x on two threads, s2d NHWC DCR b2 C3 of 4-byte
//   elements, whose tiles the joining kernel copied the ordinary way too). A Zen 4 had measured
//   the joined runs 1.42x at 16 MiB (see min_joined_run_bytes), so other cores keep them.
// - runs of a line or more: a quarter of the 162 run-copy cells of the 16 MiB grid (any run
//   length), each alone in alternate processes of regrid bench, twice: runs of 128 bytes or more
//   1.09x / 1.10x on one / two threads (31 cells, the least 1.03x), of 64 bytes 1.11x / 1.11x (3),
//   of 65-127 bytes 0.99x / 0.99x (7, 0.93-1.06x), which keep streaming.
// The runs copy_short_runs_streaming takes (see run_tile_kernel_avx512).
constexpr std::int64_t min_short_streamed_run_bytes = 65;
constexpr std::int64_t max_short_streamed_run_bytes = 127;
// The AVX2 level's run copies do not stream, so they keep their kernels.
bool copies_runs_into_the_cache(const permute_plan& plan) {
  const auto run = static_cast<std::int64_t>(plan.width);
  const bool short_streamed = run >= min_short_streamed_run_bytes && run <= max_short_streamed_run_bytes;
  return !short_streamed && !far_past_the_cache(plan) && planning_isa() >= isa::avx512 &&
         runtime::planning_core_kind() == runtime::core_kind::intel;
}

// A plan's tile (plane x row x column), whole: run_permute cuts its planes or rows among items.
tile_shape whole_tile_of(const permute_plan& plan) {
  return {.planes = plan.plane.extent,
          .rows = plan.row.extent,
          .cols = plan.col.extent,
          .src_plane = plan.plane.src_stride,
          .src_row = plan.row.src_stride,
          .src_col = plan.col.src_stride,
          .dst_plane = plan.plane.dst_stride,
          .dst_row = plan.row.dst_stride,
          .dst_col = plan.col.dst_stride};
}

// Where the run copies of a streamed output that joins_source_stretches leaves to ordinary stores
// (runs of 12-63 bytes below far_past_the_cache) fetch each plane's source a plane ahead
// (plane_prefetching_run_kernel_avx512): tiles of prefetched_column_bytes. On a Zen 5 (family
// 1Ah, model 2, 2 vCPUs) the 12 cells of the 16 MiB grid this changes (d2s channels-last K = 3 of
// b3, b4 and b8 C1), planned both ways in one process (bench/plan_ab, 7 samples, twice in each
// order): 1.27x on one thread (1.08-1.49x per cell; d2s channels-last K = 3 DCR b4 C3 of 2-byte
// elements 1.45x), 1.38x / 1.48x on two (two runs). Far past the cache these tiles have no planes
// (the plane axis walks outside them), so nothing changes there; other cores are unmeasured.
bool prefetches_next_planes(const permute_plan& plan) {
  const tile_shape tile = whole_tile_of(plan);
  return planning_isa() >= isa::avx512 && !joins_source_stretches() && output_streams(plan) &&
         !far_past_the_cache(plan) && plan.width >= min_joined_run_bytes && plan.width < 64 &&
         prefetched_column_bytes(tile, plan.width) > 0;
}

// Where the source-order walks (walks_source_order for de-interleave runs of 1 KiB or more,
// source_order_interleave_repeat, and the off-line streaming of such de-interleave runs that goes
// with them) are taken: far past the cache on every CPU; on AMD's Zen 4 and Zen 5 wherever the
// output streams, for de-interleaves and for interleaves of 4 ways or more planned at the AVX-512
// level. On a Zen 4 (family 19h, model 11h, 2 vCPUs) each of the 154 cells of the 16 MiB grid this changes was
// planned both ways in one process, the two plans alternating 11 times, then again in the other
// order: 1.44x / 1.19x on one / two threads (s2d NCHW and NCHW_VECT_C 1.28-1.59x / 1.08-1.29x per
// block, d2s NCHW and NCHW_VECT_C b4 / b8 1.18-1.92x / 1.03-1.41x, d2s channels-first K = 3 b4 / b8
// 1.25x / 3.15x on one thread; 6 / 4 cells under 0.9x, the least 0.70x, d2s NCHW DCR b4 C64 of
// 8-byte elements). Interleaves of 2 and 3 ways went both ways (d2s channels-first K = 3 b2 0.95x,
// NCHW b3 0.92x on one thread), and so did AVX2-level plans (d2s channels-first K = 3 b2 / b4
// 0.63-0.77x): those keep the direct walk below 64 MiB, as every other CPU does. On a Zen 5
// (family 1Ah, model 2, 2 vCPUs) the same 154 cells, planned both ways in one process
// (bench/plan_ab, 7 samples each): 1.41x / 1.37x on one / two threads (d2s channels-first K = 3
// 1.78-1.90x, d2s NCHW_VECT_C 1.86x, d2s NCHW 1.47-1.56x, s2d NCHW 1.16-1.25x on one thread;
// 2 / 3 cells under 0.9x, the least 0.80x, d2s NCHW CRD b4 C64 of 8-byte elements on two).
bool walks_source_order_past_the_cache(const permute_plan& plan, bool interleave, std::int64_t ways) {
  if (far_past_the_cache(plan)) return true;
  return runtime::takes_amd_rules(runtime::planning_core_kind()) && output_streams(plan) &&
         planning_isa() >= isa::avx512 && (!interleave || ways >= 4);
}
// Where the output is that large, de-interleave runs of 1 KiB or more stream even where their rows
// are off cache lines (each row's vectors re-cut into whole lines, as for runs of
// streamed_unaligned_deinterleave_run_bytes in smaller outputs): same-run A/B on a Zen 5, the 20
// cells of the 256 MiB grid this changes (s2d NCHW and NCHW_VECT_C b3 / b8 and channels-first
// K = 3 b2 of runs of 1-2 KiB, which also walk in the source's order once they stream), two
// alternations, op throughput: 1.20x / 1.21x on one / two threads (0.99-1.51x; s2d NCHW DCR b3
// C16 of 2-byte elements 0.69 -> 0.88 of memcpy). From 512 bytes on, channels-first K = 3 gained
// too (1.0-1.5x over 16 cells) but s2d NCHW lost (0.63-0.86x over 9, b8 C16 of 2-byte elements
// 0.81 -> 0.52).
constexpr std::int64_t far_streamed_unaligned_deinterleave_run_bytes = 1024;
std::int64_t streamed_deinterleave_run_bytes(const permute_plan& plan) {
  return walks_source_order_past_the_cache(plan, false, 0) ? far_streamed_unaligned_deinterleave_run_bytes
                                                           : streamed_unaligned_deinterleave_run_bytes;
}

// Whether a direct plan passes over the source more than once: an axis outside its calls is
// nearer in the source than the call's own repeat.
bool walk_passes_source_again(const shuffle_repeat& direct, const axis_list& outside) {
  if (direct.inner.extent <= 1) return false;
  return std::ranges::any_of(
      outside, [&](const permute_axis& axis) { return axis.extent > 1 && axis.src_stride < direct.inner.src_stride; });
}
// ... and its output streams.
bool streamed_walk_passes_source_again(const permute_plan& plan, const shuffle_repeat& direct,
                                       const axis_list& outside) {
  return output_streams(plan) && walk_passes_source_again(direct, outside);
}

// `rest` ordered as the source is (largest source stride first) and the call's repeat taken from
// its nearest-strided axes, streaming where its runs keep the destination's lines or the output
// runs are long.
shuffle_repeat take_source_order_repeat(axis_list& rest, std::int64_t run_bytes, std::int64_t ways,
                                        bool long_output_runs) {
  std::stable_sort(rest.begin(), rest.end(),
                   [](const permute_axis& a, const permute_axis& b) { return a.src_stride > b.src_stride; });
  shuffle_repeat repeat = take_repeat(rest, ways * run_bytes);
  repeat.streaming = lines_line_up(repeat, run_bytes, ways) || long_output_runs;
  repeat.by_source = true;
  return repeat;
}

// Whether a de-interleave walks its axes in the source's order (see source_order_repeat) rather
// than in the direct plan's `direct` repeat with the `outside` axes around it. Only where the
// direct plan passes over the source more than once: an axis outside its calls is nearer in the
// source than the call's own repeat. Where the call's repeat already covers its source span
// (s2d NHWC CRD, its outer repeat contiguous in the source), the source order broke up the
// destination's rows instead: 0.64-0.77x.
bool walks_source_order(bool interleave, std::int64_t ways, std::int64_t run_bytes, const shuffle_repeat& direct,
                        const axis_list& outside, const permute_plan& plan) {
  if (interleave || !streamed_walk_passes_source_again(plan, direct, outside)) return false;
  return direct.streaming
             ? ways <= max_streamed_source_order_ways && (run_bytes < max_streamed_source_order_run_bytes ||
                                                          walks_source_order_past_the_cache(plan, false, ways))
             : ways <= max_source_order_ways;
}

// Takes the next axis of `rest` (innermost last) as the repeat's outer one where it continues each
// way's rows (its destination stride is one row) and the call then sinks at most `most_sinks`
// rows (inner positions x ways; b_way_sunk_row_blocks).
void take_sunk_row_blocks(shuffle_repeat& repeat, axis_list& rest, std::int64_t run_bytes, std::int64_t ways,
                          std::int64_t most_sinks) {
  if (repeat.outer.extent == 1 && !rest.empty() && rest.back().dst_stride == run_bytes &&
      ways * repeat.inner.extent <= most_sinks) {
    repeat.outer = rest.back();
    rest.pop_back();
  }
}

// The repeat of a de-interleave whose output streams, with `rest` (the axes left after the run and
// the ways) walked in the source's order: the nearest-strided ones inside the call (take_repeat),
// as the direct plan takes the destination's, and the others outside it, ordered too.
// `short_rows_sink`: the rows are too short to stream one by one but
// streams_short_rows_through_line_sinks may stream them through line sinks once the call holds the
// axis that continues them (sinks_short_rows_into_cache_sized_outputs).
shuffle_repeat source_order_repeat(axis_list& rest, std::int64_t run_bytes, std::int64_t ways, bool transposes,
                                   bool long_output_runs, bool short_rows_sink) {
  shuffle_repeat repeat = take_source_order_repeat(rest, run_bytes, ways, long_output_runs);
  repeat.streaming = repeat.streaming && !transposes;
  // Where the next axis continues each way's rows (s2d NCHW: the next block of source rows), a
  // streaming call takes it too, so that it streams each row through a line sink across it
  // (b_way_sunk_row_blocks), where the rows do not start on lines; the walk's order is the same.
  // 25 plans of the 16 MiB grid change (s2d NCHW / NCHW_VECT_C, b <= 4). Per family, against
  // one call per h', 1 thread, alternating: aligned 1.05-1.16x (f32 DCR median 0.82 -> 0.94 of
  // memcpy: rows of odd length start off lines there too), 16 bytes off a line 1.10-1.17x;
  // 2 threads 1.0-1.14x.
  // Calls whose rows would stream only through sinks take it too, or they never would: their rows
  // continue along an outer axis, which rows_fit_line_sinks does not see. On a Zen 5 (family 1Ah,
  // model 2, 2 vCPUs) that left s2d NCHW b3 / b4 of 100-840-byte rows off lines with ordinary
  // stores at 12-64 MiB. The s2d NCHW and NCHW_VECT_C cells this changes (b3 and b4 of C3-C64,
  // every element width; none of b2), the two plans in alternate processes of regrid bench, three
  // times, op throughput, geometric mean, one thread: 12 MiB 1.30x (14 cells, 1.07-1.55x), 16 MiB
  // 1.34x (23 cells, 1.07-1.83x; s2d NCHW DCR b3 C64 of 8-byte elements 0.45-0.58 -> 0.89-1.01 of
  // memcpy), 32 MiB 1.07x (17, 0.81-1.39x: b3 C16 of 2-byte elements 0.81-0.85x), 48 MiB 1.13x (15,
  // 0.91-1.47x). On two threads, where the sinks stream from 16 MiB on
  // (streams_sunk_rows_on_one_thread_only): 16 MiB 1.06x (the 10 cells of 16 MiB or more), 32 MiB
  // 1.24x, 48 MiB 1.29x; below 16 MiB the plans on more threads are as before. Far past the cache
  // (256 MiB) the same went both ways on one thread (0.78-1.21x over 16 cells; s2d NCHW b3 C64 of
  // bytes 0.78x), so it stays below.
  if (repeat.streaming || short_rows_sink)
    take_sunk_row_blocks(repeat, rest, run_bytes, ways, max_sunk_deinterleave_rows);
  return repeat;
}

// An interleave's direct plan walks its repeat axes in the destination's order too: for d2s NCHW
// each call writes b consecutive output rows, interleaving rows of b x b source planes, each plane
// one row further on per call; b x b streams, 64 for b = 8, which hardware prefetchers do not
// follow once the tensor is out of cache. Walking in the source's order instead, each call reads
// b planes through (one output row in b), and the rows go out b apart. Taken where the output is
// far past the cache (min_long_run_source_order_output_bytes), the runs are 64 bytes or more and
// that walk still streams its rows (long rows, or rows whose vectors stay on lines). Same-run A/B
// on a Zen 5, the 229 cells of the 256 MiB grid this changes, two alternations, op throughput,
// one / two threads: d2s NCHW and NCHW_VECT_C (169 cells) 1.32x / 1.13x (b4 1.54x / 1.15x, b8
// 1.48x / 1.25x, b2-b3 1.11-1.15x / 1.04-1.07x; d2s NCHW CRD b8 C16 of 2-byte elements 0.54 of
// memcpy before), d2s channels-first K = 3 (60) 1.42x / 1.30x (b8 2.03x / 1.58x, b2 0.98x / 0.99x).
// Left out: walks that would no longer stream (b2 / b3 rows under 4 KiB off lines, 0.77-0.91x),
// and runs under 64 bytes, which went both ways (d2s channels-first K = 3 DCR b4 C64 of bytes,
// 40-byte runs, 0.69-0.77x; 16-byte runs, whose plans a gather then replaced, 0.56-1.26x).
// In the cache, interleaves of 4 ways or more walk in the source's order too (their output does
// not stream; ordinary stores): d2s NCHW b8 read 64 planes at once, each a multiple of 4 KiB from
// the next, so that each call's loads fall into a few L1 sets and the source lines come from L2
// and L3 in 64 streams. Zen 4, each cell of the 1 MiB grid this changes planned both ways in one
// process, alternating 15 times, then in the other order, one / two threads: the 22 of 8 ways
// (d2s NCHW / NCHW_VECT_C / channels-last K = 3 b8, NHWC CRD b8 of 8-byte elements) 1.24x / 1.23x
// (d2s NCHW b8 1.09-1.33x), at the AVX2 level 1.16x, at 256 KiB and 4 MiB 1.07x / 1.11x; the 29
// of 4 ways (d2s NCHW / channels-first K = 3 b4) 1.05x / 1.10x (channels-first K = 3 1.1-1.3x,
// d2s NCHW b4 of 8-byte elements 0.94-1.0x), at 256 KiB 1.03x, at 4 MiB 0.99x. The 64 KiB grid's
// plans do not change (staged). Interleaves of 2 and 3 ways lost (d2s NCHW b2 / b3 0.94-1.0x,
// channels-first K = 3 b2 0.87-1.06x; 0.97x / 0.99x over 21 cells each).
// Returns the repeat, with `rest` left in the walk's order; none (`rest` untouched) where the direct
// walk stays.
constexpr std::int64_t min_source_order_interleave_run_bytes = 64;
constexpr std::int64_t min_cached_source_order_interleave_ways = 4;
std::optional<shuffle_repeat> source_order_interleave_repeat(bool interleave, axis_list& rest,
                                                             const shuffle_repeat& direct, const axis_list& outside,
                                                             const permute_plan& plan, std::int64_t run_bytes,
                                                             std::int64_t ways, bool transposes,
                                                             bool long_output_runs) {
  if (!interleave || transposes || run_bytes < min_source_order_interleave_run_bytes ||
      !walk_passes_source_again(direct, outside)) {
    return std::nullopt;
  }
  if (!output_streams(plan)) {
    if (ways < min_cached_source_order_interleave_ways) return std::nullopt;
    shuffle_repeat repeat = take_source_order_repeat(rest, run_bytes, ways, long_output_runs);
    repeat.streaming = false;
    return repeat;
  }
  if (!walks_source_order_past_the_cache(plan, true, ways)) return std::nullopt;
  axis_list by_source = rest;
  const shuffle_repeat repeat = take_source_order_repeat(by_source, run_bytes, ways, long_output_runs);
  if (!repeat.streaming) return std::nullopt;
  rest = std::move(by_source);
  return repeat;
}

// Line sinks take lanes of up to 8 bytes (b_way).
constexpr std::size_t max_sunk_lane_bytes = 8;

// Far past the cache, 8-way de-interleaves that would stage, and whose rows (a line or more)
// continue one another along the source's order in more rows per call than
// max_sunk_deinterleave_rows, walk the source in order instead, unstaged, each row through a line
// sink (b_way_sunk_row_blocks, up to max_far_sunk_deinterleave_rows of them): s2d channels-first
// K = 3 b8, each of whose input row blocks of 8 rows goes to 64 output planes. The staged walk
// writes 8 planes at a time, in the destination's order, which reads one input row in 8 (the rest
// on 7 later passes) in an order the hardware prefetchers do not follow. On an Intel Xeon with AMX
// (2 vCPUs), the 8 such cells of the 256 MiB grid planned both ways in one process (bench/plan_ab,
// three alternations, both orders): 1.24-1.80x on one thread (geometric mean 1.45x; s2d
// channels-first K = 3 CRD b8 C16 of 4-byte elements 0.36 -> 0.64 of memcpy), 1.43x on two, 1.22x
// into outputs 16 bytes off a line, none slower; regrid bench, the binaries in alternate processes,
// twice: 1.39x / 1.40x on one / two threads (the least 1.18x; mean ratio 0.37 -> 0.52 and
// 0.65 -> 0.92), and at the avx512 level without VBMI the 6 of 2-byte lanes and wider 1.17-1.78x.
// The same walk for 2- and 3-way ones (4 and 9 sinks, within the old limit) went both ways
// (0.95-1.16x over 6 cells), and 64 sinks for the plain walk of s2d NCHW b8 lost up to 0.81x:
// those keep their plans. Unmeasured on AMD's cores. Returns the repeat, with `rest` left in the
// walk's order; none (`rest` untouched) where the staged plan stays.
std::optional<shuffle_repeat> far_sunk_row_blocks_repeat(const permute_plan& plan, const shuffle_choice& kernel,
                                                         bool interleave, axis_list& rest, std::int64_t run_bytes,
                                                         std::int64_t ways, bool long_output_runs) {
  // Below VBMI the sinks shift rows by 2-byte steps only (join_bytes): rows of bytes would fall
  // back to ordinary stores (0.73-0.83x at the avx512 level, against 1.17-1.78x for the others).
  const bool joins_rows = plan.width > 1 || kernel.level >= isa::avx512vbmi;
  if (interleave || kernel.transposes || kernel.level < isa::avx512 || !joins_rows ||
      plan.width > max_sunk_lane_bytes || !output_streams(plan) || !far_past_the_cache(plan) ||
      ways != max_sunk_deinterleave_ways || run_bytes < min_sunk_deinterleave_row_bytes) {
    return std::nullopt;
  }
  axis_list by_source = rest;
  shuffle_repeat repeat = take_source_order_repeat(by_source, run_bytes, ways, long_output_runs);
  take_sunk_row_blocks(repeat, by_source, run_bytes, ways, max_far_sunk_deinterleave_rows);
  const std::int64_t sinks = ways * repeat.inner.extent;
  if (repeat.outer.dst_stride != run_bytes || sinks <= max_sunk_deinterleave_rows ||
      sinks > max_far_sunk_deinterleave_rows) {
    return std::nullopt;
  }
  repeat.streaming = true;
  repeat.most_sunk_rows = max_far_sunk_deinterleave_rows;
  rest = std::move(by_source);
  return repeat;
}

// Whether a shuffle of runs of `run_bytes` stages: `stages_by_default` is the rule for AVX-512
// and SSE2 kernels, which the AVX2 ones (see staged_avx2_interleave_run_bytes) keep for many ways
// and, in the cache, for odd ones.
bool stages_avx2_shuffle(bool interleave, std::int64_t ways, std::int64_t run_bytes, std::int64_t run_elements,
                         bool output_streams, bool stages_by_default) {
  if (interleave) {
    if (run_bytes < staged_avx2_interleave_run_bytes) return true;
    if (!stages_by_default) return false;
    if (output_streams) return ways > max_ways_direct_avx2 || run_elements <= max_staged_avx2_interleave_run_elements;
    return ways <= max_ways_direct_avx2 && run_bytes < staged_avx2_cached_interleave_run_bytes;
  }
  if (std::has_single_bit(static_cast<std::uint64_t>(ways))) {
    return ways > max_ways_direct_avx2 ? stages_by_default : run_bytes < staged_deinterleave_run_bytes;
  }
  return output_streams ? run_bytes < staged_avx2_streamed_odd_deinterleave_run_bytes : stages_by_default;
}

// Bytes from the source's first byte to one past its last, or 0 where a stride runs backwards.
std::int64_t source_span_of(const axis_list& axes, std::size_t width) {
  auto span = static_cast<std::int64_t>(width);
  for (const permute_axis& axis : axes) {
    if (axis.src_stride < 0) return 0;
    span += (axis.extent - 1) * axis.src_stride;
  }
  return span;
}

// One past the source's last byte, which a shuffle's loads may approach (shuffle_repeat::readable_end),
// or null where the span is unknown.
const std::byte* source_end(const shuffle_tile& tile, const std::byte* src) {
  return tile.source_span > 0 ? src + tile.source_span : nullptr;
}

// A staged interleave writes one segment (an output row) per run, at the repeat's destination
// strides. Where the output's rows follow one another across an outer axis first (d2s
// channels-first K = 3: rows h * b + bh, b of them from b different source planes, bh outer), every
// call wrote every b-th row with ordinary stores, and each line twice where rows end off lines.
// Such a plan takes that axis into each call (shuffle_tile::destination_group), so that a call
// lays out whole stretches of the output in order and streams them. Same-run A/B on a Zen 5, the
// 74 cells of the 16 MiB grid this takes (d2s channels-first K = 3, channels-last K = 3 CRD, NCHW
// and NHWC CRD b8 of 2-byte elements), two alternations: 1.50x / 1.38x on one / two threads
// (d2s channels-first K = 3 CRD b4 C16 of bytes 0.30 -> 0.58 of memcpy; b8 C16 of bytes, 64
// source planes at once in pieces of 169 bytes, 0.65-1.4x on one thread, 1.1-1.5x on two).
// Far past the cache (the 38 such cells of the 256 MiB grid) it depends on what a call reads.
// Where each way's source row is 64 KiB or more (channels-first: channel planes), a call reads
// group extent x ways such rows at once: up to 16 won (b3 / b4, 1.06-1.54x over 10 cells), 64 lost
// (b8, 0.70-0.90x; 1.10x for CRD C16 of 2-byte elements). Where the rows are short (channels-last
// K = 3: the group's positions are source pixels, each holding all ways), it won where pixels are
// 8 KiB or more apart (b8, and b4 C16 of 8-byte elements: 1.08-2.03x over 7 cells) and went both
// ways below (0.72-1.77x over 21: b3 C16 of 4-byte elements 0.72x, b4 C16 of bytes 1.77x).
constexpr std::int64_t min_far_destination_group_plane_bytes = std::int64_t{64} << 10;
constexpr std::int64_t max_far_destination_group_planes = 16;
constexpr std::int64_t min_far_destination_group_pixel_bytes = 8192;
// At the AVX2 level (the same 16 MiB A/B under REGRID_MAX_ISA=avx2, 59 cells: 1.51x / 1.40x),
// segments under 48 bytes went both ways (0.51-2.26x over 22 cells: channels-last K = 3 C3 of
// bytes b2 / b3 0.51-0.56x); from 48 bytes on 0.77-2.8x, one cell under 0.95x.
constexpr std::int64_t min_avx2_destination_group_segment_bytes = 48;

// Far past the cache, groups of source pixels closer than min_far_destination_group_pixel_bytes
// are taken where their segments are under a line, the repeat's inner axis has 4 or more positions
// (b4 / b8) and the repeat's output rows start on lines: in parts (destination_group_part) where
// the whole group does not fit half the buffer with every inner position. On an Intel Xeon with AMX
// (2 vCPUs), the 3 such cells of the 256 MiB grid (d2s channels-last K = 3 CRD b4 / b8 C3 of 1- and
// 2-byte elements, segments of 12-48 bytes), planned both ways in one process (bench/plan_ab, five
// samples, both orders): 1.47x / 1.50x on one / two threads (b4 C3 of bytes 0.23 -> 0.42 of
// memcpy), 1.18x into outputs 16 bytes past a line (which take the whole group: b8 C3 of 2-byte
// elements 0.96x). Without the line condition three more took groups in parts (b4 C3 / C4 of
// 2-byte elements, b4 C3 of 4-byte: 1.03-1.09x, their parts' ends inside lines); b3 lost (0.91-0.98x
// over 3 cells).
constexpr std::int64_t min_parted_short_segment_positions = 4;
bool takes_short_segment_pixels_in_parts(const shuffle_tile& tile, std::int64_t segment_bytes) {
  return tile.level >= isa::avx512 && segment_bytes < 64 &&
         tile.repeat.inner.extent >= min_parted_short_segment_positions && repeat_steps_by_lines(tile.repeat);
}

void take_destination_group(shuffle_tile& tile, axis_list& rest, std::int64_t segment_bytes, bool far) {
  if (planning_isa() == isa::avx2 && segment_bytes < min_avx2_destination_group_segment_bytes) return;
  const auto ways = static_cast<std::int64_t>(tile.offsets.size());
  const std::int64_t way_row_bytes = segment_bytes / ways * tile.repeat.inner.extent * tile.repeat.outer.extent;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    const permute_axis axis = rest[i];
    const std::int64_t stretch = axis.extent * segment_bytes;
    if (axis.extent < 2 || axis.dst_stride != segment_bytes || stretch != tile.repeat.inner.dst_stride ||
        stretch > staging_bytes) {
      continue;
    }
    if (far && (way_row_bytes >= min_far_destination_group_plane_bytes
                    ? axis.extent * ways > max_far_destination_group_planes
                    : magnitude(axis.src_stride) < min_far_destination_group_pixel_bytes &&
                          !takes_short_segment_pixels_in_parts(tile, segment_bytes))) {
      return;
    }
    tile.destination_group = take_axis(rest, i);
    return;
  }
}

// Far past the cache, a group of source pixels of up to 64 KiB whose stretch leaves room for few
// positions of repeat.inner per batch (d2s channels-last K = 3 CRD b8 C64 of bytes: a 10 KiB
// output row of 20 pixels, so one of each pixel's 8 source rows bh per batch, 8 bytes of each line
// it reads) is cut into parts of as many positions as fill half the buffer with every inner
// position: each batch reads its pixels' lines whole. On an Intel Xeon with AMX (2 vCPUs), the 6
// such cells of the 256 MiB grid (d2s channels-last K = 3 CRD b4 / b8 of C16 / C64, segments of
// 256-1024 bytes), planned both ways in one process (bench/plan_ab, five samples, both orders):
// 1.55x on one thread (1.19-2.1x; b8 C16 of 4- and 8-byte elements 2.0-2.1x, 0.29 -> 0.61 of
// memcpy), 1.56x on two; at 64 MiB 1.13x (0.97-1.67x). Parts that fill the whole buffer gained
// less (1.40x over 7 cells, against 1.43x). Segments under 256 bytes (b8 C16 of bytes) went
// 0.94-0.99x and keep the whole group, as do groups whose positions lie farther apart
// (channels-first K = 3 CRD, planes of 250 KB: 0.65x in parts). Into outputs off a line each
// part's first and last lines are shared with the next part's (0.81x for b8 C16 of bytes 16 bytes
// past a line), so those keep the whole group (run_staged_in_destination_order).
constexpr std::int64_t min_parted_destination_group_segment_bytes = 256;
constexpr std::int64_t max_parted_destination_group_pixel_bytes = std::int64_t{64} << 10;

std::int64_t destination_group_part(const permute_plan& plan) {
  const shuffle_tile& tile = *plan.shuffle;
  if (tile.destination_group.extent <= 1 || tile.level < isa::avx512 || !far_past_the_cache(plan)) return 0;
  const std::int64_t segment = shuffle_run_bytes(plan);
  const bool parted_segments =
      takes_short_segment_pixels_in_parts(tile, segment) || segment >= min_parted_destination_group_segment_bytes;
  if (magnitude(tile.destination_group.src_stride) > max_parted_destination_group_pixel_bytes ||
      !repeat_steps_by_lines(tile.repeat) || !parted_segments) {
    return 0;
  }
  // Whole lines per part: positions in multiples of 64 / gcd(segment, 64).
  const std::int64_t line_positions = 64 / std::gcd<std::int64_t>(segment, 64);
  const std::int64_t fit = staging_bytes / (2 * segment * tile.repeat.inner.extent);
  const std::int64_t part = fit / line_positions * line_positions;
  return part > 0 && part < tile.destination_group.extent ? part : 0;
}

// A destination group caps a call's batch at what one stretch per inner position fills of the
// buffer: the block-transposing interleaves of d2s channels-last K = 3 CRD C64 (each source pixel's
// 64 x b^3 block) then transposed b positions per call (b3: 16 x 16 blocks of which 3 rows are
// stored, 64 permutes per 192 bytes) instead of a whole pixel's 27 (b3) or the 64-256 of as many
// of its b x b rows as fill the buffer (b8). On Intel's cores, below far_past_the_cache, where the
// output stays in the last-level cache and ordinary stores keep it there (see
// copies_runs_into_the_cache), they take no group. Measured on an Intel Xeon with AMX (2 vCPUs),
// the 6 such cells of the 16 MiB grid (b3 and b8 of 1-, 2- and 4-byte elements), the binaries
// before and after in alternate processes of regrid bench, twice: 1.63x / 1.67x on one / two
// threads (b3 1.76-2.19x / 1.86-2.17x, d2s channels-last K = 3 CRD b3 C64 of 4-byte elements 0.45
// -> 0.96 of memcpy; b8 1.09-1.77x / 1.14-1.85x); under the AVX2 cap (7 cells, C64 of 8-byte
// elements too; a switch, twice) 1.08-2.32x / 1.05-2.21x. At 32 MiB (one alternation) 1.37-1.66x
// but b8 of bytes (0.91x / 1.00x). Far past the cache the b8 cells, which still take the group
// there, lost without it (0.54-0.80x). AMD's cores, whose outputs of that size stream, keep the
// group (not measured there).
bool transposes_whole_runs_into_the_cache(const permute_plan& plan, bool transposes) {
  return transposes && !far_past_the_cache(plan) && runtime::planning_core_kind() == runtime::core_kind::intel;
}

// Far past the cache, staged AVX-512 interleaves that take no destination group copy their
// segments of a line or more out of the buffer with streaming stores: each call writes whole
// segments, which ordinary stores read from memory first. Measured on an Intel Xeon with AMX (2
// vCPUs), the 20 cells of the 256 MiB grid this changes (d2s NHWC CRD b8 C16, channels-first K = 3
// b8 C1-C16, channels-last K = 3 CRD b3-b8; 16 of them 3-, 8- and 16-way interleaves, 4 block-
// transposing 64-way ones), the binaries before and after in alternate processes of regrid bench:
// 1.23x / 1.22x on one / two threads (1.09-1.80x; d2s channels-first K = 3 DCR b8 C16 of 2-byte
// elements 0.21 -> 0.37 of memcpy), but for segments of 65-127 bytes (72 and 96: 0.995-1.07x).
// At the avx512 level without VBMI one more (d2s NHWC CRD b3 C3 of 8-byte elements, 72-byte
// segments): 1.00x. Not measured on AMD's cores.
bool streams_staged_segments(const permute_plan& plan, const shuffle_tile& tile, std::int64_t segment_bytes) {
  return far_past_the_cache(plan) && output_streams(plan) && planning_isa() >= isa::avx512 &&
         tile.segmented == nullptr && tile.destination_group.extent <= 1 && segment_bytes >= 64;
}

// Looks for a B-way (de-)interleave among the normalized axes (outermost first). Interleave:
// one or two "way" axes fill the destination's innermost B elements and a run axis is contiguous
// in the source with destination stride B * width. De-interleave: the same with the roles of
// source and destination swapped. The order in which the other axes are walked does not change
// the result, so they become the outer axes as they are.
bool streams_short_rows_through_line_sinks(const permute_plan& plan);  // below, with rows_fit_line_sinks
bool streams_sunk_rows_on_one_thread_only(const permute_plan& plan);   // below, with rows_fit_line_sinks
bool streams_short_staged_rows(const permute_plan& plan);              // below, with run_staged_plan
bool stages_far_stretch(const permute_plan& plan);                     // below, with run_staged_plan
// Below, with rows_fit_line_sinks: whether a Zen 5 streams a de-interleave's short rows of `ways`
// ways through line sinks short of far past the cache.
bool sinks_short_rows_into_cache_sized_outputs(const permute_plan& plan, std::int64_t ways);

// Whether a staged AVX2 de-interleave packs its segments into the buffer with the spilling copy
// (spilling_run_kernel_avx2; see spills_short_runs): segments of 5-31 bytes but 8 and 16, which
// lie side by side in the buffer, each but a row's last moved as one wider piece. Zen 3 without
// AVX-512, the grid cells whose staged plans pack such segments (s2d channels-first K = 3 of most
// channel counts, NHWC and channels-last K = 3 CRD of 3 or 4 channels), planned both ways in one
// process (bench/plan_ab, both orders; 21 samples in the cache, 7 at 16 MiB, 3 at 256 MiB), one /
// two threads: 42 cells of 64 KiB 1.14x / 1.08x (1.02-1.36x; s2d channels-first K = 3 DCR b2 C64
// of bytes 0.12 -> 0.18 of memcpy), 16 of 1 MiB 1.09x / 1.08x (1.00-1.17x), 10 of 16 MiB 1.05x /
// 1.07x (s2d channels-last K = 3 CRD b8 C3 of bytes 0.94x / 0.87x, the rest 1.02-1.26x), 10 of
// 256 MiB 1.06x / 1.04x (1.00-1.12x). The interleaves unpack the buffer into strided segments,
// where the stores must be exact.
// The run lengths spilling_run_kernel_avx2 moves as wider pieces: 5-31 bytes but 8 and 16, which
// take one piece already.
bool spills_runs_of(std::size_t bytes) { return bytes > 4 && bytes < 32 && bytes != 8 && bytes != 16; }

bool packs_segments_spilling(bool interleave, std::size_t segment_bytes) {
  return planning_isa() == isa::avx2 && !interleave && spills_runs_of(segment_bytes);
}

bool choose_shuffle(permute_plan& plan, axis_list& axes, bool wide_eight_byte = false) {
  const auto w = static_cast<std::int64_t>(plan.width);
  const std::size_t none = axes.size();
  struct candidate {
    bool interleave = true;
    way_list ways_axes;
    std::size_t run = 0;
    std::int64_t ways = 1;
  };
  std::optional<candidate> best;
  for (bool interleave : {true, false}) {
    // The "near" side is the one whose innermost B elements the ways fill.
    auto near = [&](const permute_axis& a) { return interleave ? a.dst_stride : a.src_stride; };
    auto far = [&](const permute_axis& a) { return interleave ? a.src_stride : a.dst_stride; };
    // Way axes: the first fills the near side's innermost elements, each further one continues
    // it (near stride = product so far); at most three, B <= 64. Fewer are tried too.
    way_list ways_axes;
    std::int64_t product = 1;
    for (int level = 0; level < 3; ++level) {
      std::size_t next = none;
      for (std::size_t i = 0; i < axes.size() && next == none; ++i) {
        if (!contains(ways_axes, i) && near(axes[i]) == product * w && product * axes[i].extent <= max_shuffle_ways)
          next = i;
      }
      if (next == none) break;
      ways_axes.push_back(next);
      product *= axes[next].extent;
    }
    for (; !ways_axes.empty(); ways_axes.pop_back()) {
      std::int64_t ways = 1;
      for (std::size_t a : ways_axes) ways *= axes[a].extent;
      for (std::size_t i = 0; i < axes.size(); ++i) {
        if (contains(ways_axes, i) || far(axes[i]) != w || near(axes[i]) != ways * w || axes[i].extent < 2) continue;
        // Runs of 2 or 3 are worth a shuffle only when staging joins them into long rows.
        if (axes[i].extent < 4 && find_continuing(axes, interleave, axes[i].extent * w, [&](std::size_t j) {
                                    return j == i || contains(ways_axes, j);
                                  }) == axes.size()) {
          continue;
        }
        if (select_shuffle(plan.width, ways, interleave, wide_eight_byte).fn == nullptr) continue;
        // AVX2 interleaves of 32-byte elements (one per vector: the kernel only walks the runs in
        // another order) tied or lost to the run copies where the output streams, on two threads
        // (0.72-1.10x over the 13 grid cells of 16 MiB, 1.0x on one thread); in the cache they won.
        if (plan.width == 32 && interleave && planning_isa() == isa::avx2 && output_streams(plan)) continue;
        // Ways that fit in registers beat more; then the longest run wins: it decides how many whole vectors
        // each call moves.
        const bool narrow = ways <= max_register_ways;
        const bool best_narrow = best && best->ways <= max_register_ways;
        if (!best || (narrow && !best_narrow) || (narrow == best_narrow && axes[i].extent > axes[best->run].extent)) {
          best = candidate{interleave, ways_axes, i, ways};
        }
      }
    }
  }
  if (!best) return false;
  auto far = [&](const permute_axis& a) { return best->interleave ? a.src_stride : a.dst_stride; };
  shuffle_tile tile;
  tile.source_span = source_span_of(axes, plan.width);
  axis_list rest;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (!contains(best->ways_axes, i) && i != best->run) rest.push_back(axes[i]);
  }
  const std::int64_t best_run_bytes = axes[best->run].extent * static_cast<std::int64_t>(plan.width);
  shuffle_choice kernel = select_shuffle(plan.width, best->ways, best->interleave, wide_eight_byte);
  tile.fn = kernel.fn;
  tile.run = axes[best->run];
  // Offsets in near-side order: the first way axis is the fastest digit.
  tile.offsets.assign(1, 0);
  for (std::size_t a : best->ways_axes) {
    decltype(tile.offsets) grown;
    for (std::int64_t i = 0; i < axes[a].extent; ++i) {
      for (std::int64_t base : tile.offsets) grown.push_back(base + i * far(axes[a]));
    }
    tile.offsets = std::move(grown);
  }
  // Short runs: repeat axes along which the far-side rows continue, the first right after a run,
  // the second right after all of the first, found in any order (the other axes stay outer as
  // they are), make a staged plan.
  const std::int64_t run_bytes = tile.run.extent * w;
  auto take_continuing = [&](std::int64_t far_stride) -> std::optional<permute_axis> {
    const std::size_t i = find_continuing(rest, best->interleave, far_stride, [](std::size_t) { return false; });
    if (i == rest.size()) return std::nullopt;
    return take_axis(rest, i);
  };
  // The direct plan walks the innermost remaining axes (the destination's order) inside the call.
  axis_list direct_rest = rest;
  shuffle_repeat direct = take_repeat(direct_rest, static_cast<std::int64_t>(tile.offsets.size()) * run_bytes);
  // Outputs larger than the cache stream their whole output vectors, where the repeat axes keep
  // the destination's line alignment from one run to the next, and the runs end on lines or the
  // way count is a power of two: the 512 such cells of the 16 MiB grid gained 1.40x (median
  // 0.73 -> 1.11 of memcpy); the 410 others lost 0.97x, their runs switching between streaming
  // and ordinary stores as the alignment varied. Interleaves stream the rest of their rows too
  // from each row's first whole line on (b_way_run), where a row is 4 KiB or more: 1.33x over
  // those 76 cells (median 0.80 -> 1.10); the 99 with shorter rows lost (0.69x for 256-byte rows,
  // 0.9x for 0.5-2 KiB ones). De-interleaves stream runs of 2 KiB or more whose rows are off lines
  // too, joining each row's consecutive vectors into whole lines: 1.36x over those 65 cells (median
  // 0.77 -> 1.15); shorter runs lost (0.50x for 64-byte runs, 0.76x for 512, 1.00x for 1 KiB).
  const auto ways = static_cast<std::int64_t>(tile.offsets.size());
  // The block-transposing de-interleaves do not stream: their far-side rows are written 256
  // bytes at a time (a piece of each of 64 rows), and streaming those read 0.76-1.2x of ordinary
  // stores over the 6 such 16 MiB cells; their interleaves stream whole 16 KiB pieces.
  const bool long_output_runs = best->interleave ? ways * run_bytes >= streamed_unaligned_interleave_bytes
                                                 : run_bytes >= streamed_deinterleave_run_bytes(plan);
  // Shorter interleave rows that continue one another stream as one output (line_sink in b_way):
  // 1.26x over those 96 cells (median 0.55 -> 0.70; rows under 1 KiB 1.39x, 1-4 KiB 1.19x with 5
  // of 59 under 0.9x). Runs under 64 bytes keep the four-runs path and ordinary stores: through
  // the sink they lost 0.36-0.70x.
  const bool rows_continue = best->interleave && direct.inner.dst_stride == ways * run_bytes && run_bytes >= 64 &&
                             !avx2_streams_continuing_rows_badly(plan, kernel.level, ways, run_bytes);
  direct.streaming =
      output_streams(plan) && !(kernel.transposes && !best->interleave) &&
      (lines_line_up(direct, run_bytes, ways) || ((long_output_runs || rows_continue) && !kernel.transposes));
  // Staging gives up streaming stores: de-interleaves of runs a little over a vector stage only
  // where the direct plan would not stream.
  const bool stages_by_default = best->interleave
                                     ? run_bytes < staged_interleave_run_bytes
                                     : run_bytes < staged_deinterleave_run_bytes ||
                                           (!direct.streaming && run_bytes > staged_deinterleave_run_bytes &&
                                            run_bytes < staged_unstreamed_deinterleave_run_bytes);
  // The block-transposing kernels stage by the default rule at either level.
  const bool would_stage = planning_isa() == isa::avx2 && !kernel.transposes
                               ? stages_avx2_shuffle(best->interleave, ways, run_bytes, tile.run.extent,
                                                     output_streams(plan), stages_by_default)
                               : stages_by_default;
  // The assembling kernel replaces staging only: where the rows do not continue (a direct plan)
  // or a gather won, it lost or tied (0.79-1.08x over the 10 such grid cells of 4-way interleaves).
  const std::size_t continuing =
      find_continuing(rest, best->interleave, best_run_bytes, [](std::size_t) { return false; });
  const bool assembled =
      would_stage && continuing != rest.size() &&
      assembles_shuffle(plan.width, best->ways, best->interleave, best_run_bytes,
                        best_run_bytes * rest[continuing].extent, run_bytes * direct.inner.extent * direct.outer.extent,
                        output_streams(plan), far_past_the_cache(plan));
  if (assembled) {
    kernel = select_shuffle(plan.width, best->ways, best->interleave, wide_eight_byte, true);
    tile.fn = kernel.fn;
    direct.assembled = true;
    direct.streaming = false;  // the assembling kernel stores whole vectors in place
  }
  const std::optional<shuffle_repeat> sunk_row_blocks =
      would_stage && !assembled
          ? far_sunk_row_blocks_repeat(plan, kernel, best->interleave, rest, run_bytes, ways, long_output_runs)
          : std::nullopt;
  const bool staged = would_stage && !assembled && !sunk_row_blocks;
  if (sunk_row_blocks) {
    tile.repeat = *sunk_row_blocks;
  } else if (const std::optional<permute_axis> inner = staged ? take_continuing(run_bytes) : std::nullopt) {
    tile.repeat.inner = *inner;
    if (const std::optional<permute_axis> outer = take_continuing(inner->extent * run_bytes))
      tile.repeat.outer = *outer;
    // A staged de-interleave's shuffle writes the far side, whose rows continue over the batch: it
    // streams them where the output is larger than the cache (see run_staged).
    tile.repeat.streaming = !best->interleave && output_streams(plan);
    const auto segment_bytes = static_cast<std::size_t>(run_bytes) * tile.offsets.size();
    // AVX2 shuffles whose segments are whole vectors walk them in place (segmented_shuffle_kernel_avx2)
    // rather than through the buffer, so that each byte crosses L1 once, not twice. Same-binary-
    // pair A/B on a Zen 3 without AVX-512 over the 425 grid cells this takes: 1.16x / 1.13x / 1.14x
    // at 64 KiB / 1 MiB / 16 MiB on one thread (geometric mean, four alternations; 26 cells under
    // 0.95x, the least 0.71x), 1.13x / 1.19x / 1.15x on two. Left staged: 16 ways (0.94-1.01x:
    // their 16 loads or stores per step walk the segments one vector apart) and de-interleaves of 8
    // ways or more whose output streams (1.0x, down to 0.67x: B far rows written while the near
    // side is read in segments, where the staging copy read the source in order).
    // Segments of an odd number of 16-byte halves, whose vectors are built from two halves, gained
    // where they are short: 16 bytes, and de-interleaves of 48 (57 cells, four alternations: 1.14x /
    // 1.09x / 1.17x); longer ones lost (0.83-0.98x), as did 48-byte interleaves (0.87x at 1 MiB).
    const bool whole_vectors = segment_bytes % 32 == 0;
    const bool short_halves = segment_bytes == 16 || (!best->interleave && segment_bytes == 48);
    if (planning_isa() == isa::avx2 && kernel.level == isa::avx2 && !kernel.transposes &&
        (whole_vectors || short_halves) && ways < 16 && (best->interleave || ways < 8 || !output_streams(plan))) {
      tile.segmented =
          segmented_shuffle_kernel_avx2(plan.width, ways, best->interleave, static_cast<std::int64_t>(segment_bytes));
    }
    if (best->interleave && output_streams(plan) && tile.segmented == nullptr &&
        !transposes_whole_runs_into_the_cache(plan, kernel.transposes)) {
      tile.level = kernel.level;  // as below; take_destination_group asks
      take_destination_group(tile, rest, static_cast<std::int64_t>(segment_bytes), far_past_the_cache(plan));
    }
    // The staging copies (whole vectors on the buffer side, one masked access on the strided side)
    // gained 1.12x at 64 KiB and 1.07x at 1 MiB over the run copies (the 1037 staged grid cells,
    // same-run A/B, twice); at 16 MiB, where the strided side misses the cache, masked accesses
    // lost: 0.7-0.8x for segments of up to 64 bytes.
    const bool streams_segments =
        best->interleave && streams_staged_segments(plan, tile, static_cast<std::int64_t>(segment_bytes));
    tile.segment_copy = planning_isa() >= isa::avx512 && !output_streams(plan)
                            ? staging_tile_kernel_avx512(segment_bytes, !best->interleave)
                            : tile_kernel_for_isa(segment_bytes, streams_segments, far_past_the_cache(plan));
    if (packs_segments_spilling(best->interleave, segment_bytes)) tile.segment_copy = spilling_run_kernel_avx2();
  } else if (walks_source_order(best->interleave, ways, run_bytes, direct, direct_rest, plan)) {
    const bool short_rows_sink =
        !long_output_runs && !far_past_the_cache(plan) && sinks_short_rows_into_cache_sized_outputs(plan, ways);
    tile.repeat = source_order_repeat(rest, run_bytes, ways, kernel.transposes, long_output_runs, short_rows_sink);
  } else if (const std::optional<shuffle_repeat> by_source =
                 source_order_interleave_repeat(best->interleave, rest, direct, direct_rest, plan, run_bytes, ways,
                                                kernel.transposes, long_output_runs)) {
    tile.repeat = *by_source;
  } else {
    tile.repeat = direct;
    rest = std::move(direct_rest);
  }
  plan.outer = std::move(rest);
  plan.shuffle = std::move(tile);
  plan.shuffle->interleave = best->interleave;
  plan.shuffle->level = kernel.level;
  plan.shuffle->transposes = kernel.transposes;
  plan.shuffle->repeat.far_past_cache = far_past_the_cache(plan);
  if (streams_short_rows_through_line_sinks(plan)) {
    plan.shuffle->repeat.streaming = true;
    plan.shuffle->streams_on_one_thread_only = streams_sunk_rows_on_one_thread_only(plan);
  }
  plan.shuffle->streams_short_staged_rows = streams_short_staged_rows(plan);
  plan.shuffle->stages_far_stretch = stages_far_stretch(plan);
  plan.shuffle->destination_group_part = destination_group_part(plan);
  return true;
}

std::atomic<gather_forcing> gather_forced{gather_forcing::off};
// The shortest gather row (stream extent x block bytes) gather_beats accepts.
constexpr std::int64_t min_gather_row_bytes = 256;
// The smallest block block_gather_beats accepts: a whole chunk.
constexpr std::int64_t min_gather_block_bytes = 64;
// Permute steps per chunk a gather may take: four, and eight where the plan moves runs of a few
// bytes per call or per element (moves_tiny_pieces), 5.2 of those over a staged shuffle whose
// output stays in the cache.
constexpr double max_gather_steps = 4;
constexpr double max_gather_steps_for_tiny_moves = 8;
constexpr double max_gather_steps_over_cached_staging = 5.2;
// Staged shuffle calls under this many bytes are all overhead (see gather_beats).
constexpr std::int64_t tiny_staged_call_bytes = 256;

// Whether the plan's spilling run copy (spills_short_runs) keeps its place over any VBMI gather
// (prefer_gather): where the output streams, tiles of 8 columns or more (d2s channels-last K = 3
// DCR / CRD of 1-3 channels, each output row's runs from source pixels apart), and far past the
// cache tiles of 3 or more (s2d NHWC and channels-last K = 3 b3 of few channels, too). Zen 4 (2 vCPUs), the grid
// cells this changes, both plans in alternate processes (regrid bench, 3 pairs at 16 MiB, 2 at
// 256 MiB; one plan streams and the other not at 16 MiB), one / two threads: d2s channels-last
// K = 3 b2 C3 of bytes and b3 C1 of 2-byte elements 1.21-1.31x / 0.97-1.23x at 16 MiB (0.38 ->
// 0.50 of memcpy) and 1.32-2.32x / 1.13-1.79x at 256 MiB (DCR b3 C1 0.27 -> 0.63); s2d NHWC DCR b3
// C3 of bytes and NHWC / channels-last K = 3 b3 C1 of 2-byte elements 1.34-1.66x / 1.11-1.52x at
// 256 MiB (NHWC DCR b3 C3 0.52 -> 0.84). In the cache the gather stayed faster, each cell timed
// alone in its own processes (bench/plan_ab, 3 pairs; timed among others the cells had shown the
// opposite): d2s NHWC DCR of 9- and 12-byte runs 0.44-0.99x on one thread at 64 KiB and 1 MiB,
// d2s channels-last K = 3 DCR 1.05-1.27x on one thread but 0.88-1.03x on two at 1 MiB. Tiles of 2
// columns (s2d NHWC and channels-last K = 3 DCR b2 C3 of bytes) lost at 256 MiB as well
// (0.64-0.97x, bench/plan_ab). Not measured on Intel's cores or a Zen 5.
constexpr std::int64_t min_spilled_columns_over_gather = 8;
constexpr std::int64_t min_spilled_columns_over_gather_far_past_the_cache = 3;
bool keeps_spilled_runs_over_gather(const permute_plan& plan) {
  if (plan.shuffle || plan.kernel.copy != spilling_run_kernel_avx2().copy || !output_streams(plan)) return false;
  return plan.col.extent >= (far_past_the_cache(plan) ? min_spilled_columns_over_gather_far_past_the_cache
                                                      : min_spilled_columns_over_gather);
}

// The bytes one call of a staged shuffle moves; 0 for any other plan.
std::int64_t staged_call_bytes(const permute_plan& plan) {
  if (!plan.shuffle || plan.shuffle->segment_copy.copy == nullptr) return 0;
  const shuffle_tile& tile = *plan.shuffle;
  return shuffle_run_bytes(plan) * tile.repeat.inner.extent * tile.repeat.outer.extent;
}

// Where the plan moves a few bytes at a time: staged shuffles of calls under 256 bytes (the tiny
// 3-D tensors of CL-K3 and CF-K3 CRD: 3 x 3 x 3 runs of 3-8 ways), and tiles of elements under 8
// bytes (a call per run). There even 5-8 permute steps per chunk win: same-run A/B of the 31 grid
// cells where a single-block gather of 5-8 steps replaces them (each alone, twice): 1.94x at
// 64 KiB, 2.20x at 1 MiB, 3.01x at 16 MiB, none slower (s2d CL-K3 CRD b3 C3 uint8: 0.02 -> 0.07 of
// memcpy at 64 KiB, 0.03 -> 0.12 at 1 MiB); and the 8 where a periodic one of 5 steps replaces
// copies of 3- and 6-byte runs (s2d CL-K3 b3 C1 of 1- and 2-byte elements at 16 and 256 MiB, a
// Zen 5, two alternations): ratio to memcpy 0.16 -> 0.23-0.26 for bytes (op 1.4-1.6x), 0.22-0.29
// -> 0.26-0.35 for 2-byte elements (1.03-1.27x on one thread), on two threads too. Staged calls of
// 432 bytes or more, measured the same way, lost (0.32-0.9x on 14 of 19 cells). Since the staged
// shuffles grouped their small calls, the longest such gathers lose to them in the cache: same-run
// A/B on a Zen 5, two alternations, staged against gather, the grid cells of over 5 steps (d2s NHWC
// CRD b8 C3 and s2d channels-last K = 3 CRD b4 C3 of bytes, 5.25-5.33 and 8 steps): 2.7x and 2.2x
// at 64 KiB, 2.4x and 1.7x at 1 MiB, 0.76-1.03x and 0.60-0.75x at 16 MiB (where the gather
// streams); those of 5-5.11 steps in the cache went both ways (0.46-1.37x over 9 cells). The
// binaries before and after, the 4 cells whose plan changed, 1 / 2 threads: 0.10 -> 0.26 / 0.27 and
// 0.06 -> 0.14 / 0.19-0.22 of memcpy at 64 KiB, 0.21-0.22 -> 0.58-0.59 / 0.15-0.19 -> 0.32-0.36 and
// 0.16 -> 0.28-0.29 / 0.12 -> 0.18-0.20 at 1 MiB.
bool moves_tiny_pieces(const permute_plan& plan, double steps) {
  const std::int64_t call_bytes = staged_call_bytes(plan);
  if (call_bytes > 0) {
    return call_bytes < tiny_staged_call_bytes &&
           (steps <= max_gather_steps_over_cached_staging || output_streams(plan));
  }
  return !plan.shuffle && plan.width < 8;
}

// Estimated cycles per output byte of a gather row: per full chunk a store and about two cycles
// per permute step (two masked loads, the permute, a masked store after the first); a partial
// chunk costs more (clipped loads); each row is a call and an odometer step.
double gather_cost(const gather_program& program, std::int64_t row_bytes) {
  const double steps = program.steps_per_chunk();
  const std::int64_t chunk = program.chunk_bytes;
  const std::int64_t full_chunks = row_bytes / program.period_dst_bytes * (program.period_dst_bytes / chunk);
  const std::int64_t tail_chunks = (row_bytes % program.period_dst_bytes + chunk - 1) / chunk;
  const double cycles = static_cast<double>(full_chunks) * (1.0 + 2.0 * steps) +
                        static_cast<double>(tail_chunks) * (4.0 + 3.0 * steps) + 30.0;
  return cycles / static_cast<double>(row_bytes);
}

// Estimated cycles per output byte of a single-block gather (gather_block_program_for): every
// chunk goes through the row-end path, the last one part-filled and byte-masked; rows are walked
// inside the kernel, a few cycles each.
double block_gather_cost(const gather_program& program, std::int64_t block_bytes) {
  const double steps = program.steps_per_chunk();
  const auto chunks = static_cast<double>(program.chunk_end.size());
  return (chunks * (2.0 + 2.0 * steps) + 8.0) / static_cast<double>(block_bytes);
}

// What a program's period costs a halves_of_16 gather beyond its steps: each chunk of a strip is
// built at every period in turn, the builds a period apart, and with periods of KiBs the strip's
// source and destination lines no longer stay in a 32 KiB L1 between the chunks that share them
// (d2s NHWC CRD b2 C4 of bytes at 1 MiB: a period of 2048 bytes ran at 0.24 of memcpy, one of
// 32 bytes with as many steps at 0.49).
double period_weight(const gather_program& program) {
  if (program.layout != gather_layout::halves_of_16) return 1.0;
  return 1.0 + static_cast<double>(program.period_dst_bytes) / 512.0;
}

struct found_gather {
  gather_tile tile;
  std::size_t axes_taken = 0;  ///< innermost axes the tile's program and stream cover
  std::size_t block_axes = 0;  ///< innermost axes the program's block covers
};

struct gather_candidates {
  std::optional<found_gather> periodic;      ///< the cheapest periodic program
  std::optional<found_gather> single_block;  ///< the cheapest single-block one
};

// Where the innermost axis is too long to be part of a block (its extent x the element over 2 KiB),
// a block of one element, continued by that axis, may make the gather (see lone_element_gather_beats).
// Elements of 24 and 48 bytes went both ways at 16 MiB (0.63-1.59x over 11 grid families, a Zen 5)
// and are not offered; neither is the AVX2 gather's layout, not measured.
constexpr std::size_t max_lone_element_block_bytes = 15;
bool lone_elements_make_blocks(std::size_t width, gather_layout layout) {
  return layout == gather_layout::pairs_of_64 && width <= max_lone_element_block_bytes;
}

// The cheapest gathers (gather.hpp, by gather_cost) among the normalized axes (outermost first):
// the innermost m axes form a dense destination block, and either the next one continues it (a
// periodic program) or the block is gathered on its own, as rows of one block (where the period,
// lcm(D, 64), would be too long or nothing continues the block); see lone_elements_make_blocks for
// m = 0.
gather_candidates find_gathers(const axis_list& axes, std::size_t width, gather_layout layout) {
  gather_candidates found;
  if (axes.empty()) return found;
  // Windows are placed from each row's first byte on, so strides must not run backwards.
  const std::int64_t source_span = source_span_of(axes, width);
  if (source_span == 0 || std::ranges::any_of(axes, [](const permute_axis& axis) { return axis.dst_stride < 0; })) {
    return found;
  }
  if (layout == gather_layout::halves_of_16 && source_span < min_avx2_gather_source_bytes) return found;
  const gather_fn fn = layout == gather_layout::halves_of_16 ? gather_rows_avx2 : gather_rows_avx512vbmi;
  const std::int64_t chunk = chunk_bytes_of(layout);
  const std::size_t n = axes.size();
  std::int64_t block = static_cast<std::int64_t>(width);
  double periodic_cost = 0;
  double single_block_cost = 0;
  const bool only_blocks = gather_forced.load(std::memory_order_relaxed) == gather_forcing::single_block;
  auto consider = [&](std::optional<found_gather>& kept, double& kept_cost,
                      std::shared_ptr<const gather_program> program, double cost, const permute_axis& stream,
                      std::size_t taken, std::size_t block_axes) {
    if (kept && cost >= kept_cost) return;
    kept.emplace(
        found_gather{gather_tile{fn, std::move(program), {}, 1, stream, {}, block, source_span}, taken, block_axes});
    kept_cost = cost;
  };
  const permute_axis& innermost = axes[n - 1];
  if (innermost.dst_stride == block && block * innermost.extent > max_gather_period_bytes &&
      lone_elements_make_blocks(width, layout) && !only_blocks) {
    if (auto program = gather_program_for({}, width, innermost.src_stride, unlined, layout)) {
      const double cost = gather_cost(*program, innermost.extent * block);
      consider(found.periodic, periodic_cost, std::move(program), cost, innermost, 1, 0);
    }
  }
  for (std::size_t m = 1; m <= n; ++m) {
    const permute_axis& newest = axes[n - m];
    if (newest.dst_stride != block) break;
    block *= newest.extent;
    if (block > max_gather_period_bytes) break;
    const std::span<const permute_axis> inner = std::span(axes).subspan(n - m, m);
    const bool continued = m < n && axes[n - m - 1].dst_stride == block;
    if (continued && std::lcm(block, chunk) <= max_gather_period_bytes && !only_blocks) {
      const permute_axis& stream = axes[n - m - 1];
      if (auto program = gather_program_for(inner, width, stream.src_stride, unlined, layout)) {
        const double cost = gather_cost(*program, stream.extent * block) * period_weight(*program);
        consider(found.periodic, periodic_cost, std::move(program), cost, stream, m + 1, m);
      }
    } else if (auto program = gather_block_program_for(inner, width, unlined, layout)) {
      const double cost = block_gather_cost(*program, block);
      consider(found.single_block, single_block_cost, std::move(program), cost, permute_axis{1, 0, block}, m, m);
    }
  }
  return found;
}

// Whether a gather taking `steps` permute steps per output chunk beats the plan the other kernels
// made. Measured over the benchmark grid (1 thread, 64 KiB to 16 MiB, every cell planned both
// ways): the gather wins where the other plan moves short runs, by 1.2-15x (RGB pixel shuffles,
// 3-way staged runs: 0.01-0.05 -> 0.3-0.4 of memcpy); it loses to runs of 64 bytes or more
// (0.4-0.7x), to the 8- and 16-way network shuffles of runs of 16 bytes or more, and mostly
// wherever a chunk takes three steps or more. Rows under 256 bytes lose too (0.13-0.5x against the
// VBMI 3-way shuffle of 11-27 byte runs), rows of 441 bytes or more won 1.7-32x: a row's partial
// period and its call cost as much as several whole periods. Two exceptions pay for more steps:
// 3- and 9-way shuffles of runs under 64 bytes (general permutes, up to 3 steps; the runs of
// 16-32 bytes, all 9-way in the grid, were measured against the shuffle with constant masks:
// 1.04-2.4x on 17 of 18 cells, 0.97x on one at 16 MiB), and staged shuffles whose calls move
// under 256 bytes (one input pixel of NHWC CRD, say), where the call and staging overhead per
// few hundred bytes outweighs up to 4 steps per chunk (2.1x over 107 cells; under 256 bytes even
// up to 8, see moves_tiny_pieces).
// Since chunks are built in registers (each cell alone, old rule against new, same run), the
// 8- and 16-way network shuffles of runs of 16-63 bytes lose to two-step gathers too (97 cells:
// 1.87x at 64 KiB, 1.77x at 1 MiB, 1.23x at 16 MiB), and so do tiles of elements under 16
// bytes to three-step ones (2.1x over 23 cells).
// Blocks of 24-byte elements that a Zen 5 gathers at any size short of far past the cache, up to
// this many elements and a power of two of them (see gather_beats; 0: not known yet).
constexpr std::int64_t max_short_24_byte_block_elements = 4;
bool short_block_of_24_byte_elements(std::size_t width, std::int64_t block_bytes) {
  const auto elements = static_cast<std::uint64_t>(block_bytes / 24);
  return width == 24 &&
         (block_bytes == 0 ||
          (std::has_single_bit(elements) && elements <= static_cast<std::uint64_t>(max_short_24_byte_block_elements)));
}
bool gather_beats(const permute_plan& plan, double steps, std::int64_t block_bytes, std::int64_t row_bytes) {
  if (gather_forced.load(std::memory_order_relaxed) != gather_forcing::off) return true;
  if (row_bytes < min_gather_row_bytes) return false;
  if (steps > max_gather_steps) return steps <= max_gather_steps_for_tiny_moves && moves_tiny_pieces(plan, steps);
  if (plan.shuffle) {
    const shuffle_tile& tile = *plan.shuffle;
    const auto run_bytes = static_cast<std::int64_t>(plan.width) * tile.run.extent;
    const auto ways = static_cast<std::int64_t>(tile.offsets.size());
    const bool power_of_two = std::has_single_bit(static_cast<std::uint64_t>(ways));
    // Assembled plans keep their place. The later rules' were measured against what they replace with
    // no gather there; the 4-way interleaves of 32-byte runs of bytes, which gathers of 2 steps took,
    // ran slower as gathers on a Zen 4: the 6 grid cells (d2s NCHW b4 C4 / C16 / C64 of bytes at
    // 64 KiB / 256 KiB / 1 MiB) planned both ways in one process, alternating 15-31 times, both
    // orders, the assembled plan 1.42-1.54x per size on one thread (0.51-0.55 -> 0.74-0.80 of
    // memcpy), 1.35-1.48x on two; on a Zen 5 one of them had been the one cell under 0.9x against
    // staging (see min_assembled_run_bytes).
    if (tile.repeat.assembled) return false;
    if (tile.segment_copy.copy == nullptr) {
      if (!power_of_two && run_bytes < 64 && steps <= 3) return true;
      // Runs under 8 bytes pay for a third step: 8 ways of 4-byte runs of bytes (tiny 3-D tensors)
      // 4.1-4.5x over the shuffle at 64 KiB, 2.1-2.3 steps.
      return (steps <= 2 || (run_bytes < 8 && steps <= 3)) && run_bytes < 64;
    }
    const std::int64_t call_bytes = staged_call_bytes(plan);
    if (call_bytes < tiny_staged_call_bytes) return true;
    if (steps > 2) return false;
    if (call_bytes < 1024) return true;
    // Staged: short runs of 3 or 9 ways (no single-instruction permute below VBMI) or of 4.
    if (!power_of_two) return run_bytes < 16;
    // 2-way interleaves of runs up to 8 bytes too (d2s channels-first K = 3 b2 C16 / C64 of 8 x 8 x
    // 8 pixels, two steps): Zen 5, the 3 grid cells (64 KiB), both plans in one process
    // (bench/plan_ab, 31 samples, both orders) 1.73-2.66x / 1.27-1.68x on one / two threads (CRD
    // C16 of bytes 0.18 -> 0.49 of memcpy). Runs of 12-14 bytes went both ways (0.72-1.50x over 8
    // cells), and so did the 2-way de-interleaves of the same s2d cells (0.67-1.32x): they keep
    // the staged shuffle.
    constexpr std::int64_t max_gathered_two_way_staged_run_bytes = 8;
    // 4-way interleaves of runs of one line take it too (64 bytes: d2s NCHW / channels-first K = 3
    // b4 of 16 x 16 pixels of 4-byte elements, channels-last K = 3 and NHWC CRD b8 C4 of 8-byte
    // ones), where the output stays in the cache: a two-step gather builds each line from four
    // quarter-lines where the staged shuffle wrote the buffer and copied it out again. Zen 5, the
    // 14 grid cells (64 KiB and 1 MiB; at 64 KiB the staged plan had given way to the AVX2
    // interleave), both plans in one process (bench/plan_ab, 21 samples, both orders): 1.08-1.21x /
    // 0.97-1.10x at 64 KiB on one / two threads, 1.11-1.17x / 1.12-1.21x at 1 MiB (d2s
    // channels-last K = 3 CRD b8 C4 of 8-byte elements 0.62 -> 0.73 of memcpy). Runs of 44-104 bytes, whose gathers
    // take 2.2-2.6 steps, lost (0.55-0.71x), and so did streamed outputs of 64-byte runs at 16 MiB (0.80-1.06x).
    constexpr std::int64_t gathered_four_way_staged_run_bytes = 64;
    const bool line_runs_in_cache =
        tile.interleave && ways == 4 && run_bytes == gathered_four_way_staged_run_bytes && !output_streams(plan);
    return (run_bytes < 16 && ways == 4) || (run_bytes < 32 && steps <= 1) ||
           (tile.interleave && ways == 2 && run_bytes <= max_gathered_two_way_staged_run_bytes) || line_runs_in_cache;
  }
  if (plan.width < 16) return steps <= 3;
  // Run copies of 24- and 48-byte elements (two overlapping 16- or 32-byte pieces each) lose to
  // gathers of up to two steps only where the gather streams its strips into an output the
  // last-level cache could still hold (streamed_gather_output_bytes_on; a Zen 5's 12 MiB up to 64
  // MiB): same-run A/B on a Zen 5, the 35 grid families where the gather replaces them, two
  // alternations, run copy against gather: 1.35x / 1.34x at 64 KiB on one / two threads, 1.19x /
  // 1.02x at 1 MiB, 0.77x / 0.98x at 16 MiB, 1.09x / 1.03x at 256 MiB; the binaries before and
  // after, on the 84 cells whose plan changed: 1.35x / 1.33x at 64 KiB, 1.28x / 1.11x at 1 MiB,
  // 1.10x / 1.09x at 256 MiB (on one thread 12 cells 1.2-1.5x, mostly b3-b8, and 5 0.65-0.89x, the
  // worst s2d b2 C3 of 4- and 8-byte elements at 0.65-0.79x). (Measured against the run copies of
  // 2026-11-21, the gathers won at every size up to 16 MiB.) 16- and 32-byte elements (whole
  // vectors) and 36-byte ones lost to the gather at every size measured then (0.48-0.92x). A Zen 4,
  // whose gathers stream their strips from 12 MiB too, keeps the run copies: there the 25 run-copy
  // cells of the 16 MiB grid a gather would take ran 0.90x / 0.80x on one / two threads (three
  // alternations, 0.44-1.69x per cell).
  // Since then the gathers have grown faster (chunk groups, windows on source lines): on a Zen 5,
  // 24-byte elements in destination blocks of 2 or 4 (192-byte periods: s2d NHWC DCR b2 C3 of
  // 4-byte elements and b4 C3 of 2-byte ones, s2d channels-last K = 3 DCR b2 C3 of 4-byte ones)
  // take gathers of up to two steps at every size short of streamed_gather_output_bytes. Both
  // plans in one process (bench/plan_ab, 21 samples, both orders), one / two threads: 64 KiB
  // 1.25-1.47x / 1.28-1.44x, 1 MiB 1.26-1.99x / 1.24-2.24x (channels-last b2 C3 of 4-byte
  // elements 0.25 -> 0.63 of memcpy, NHWC 0.64 -> 0.85), 4 MiB 1.25-1.98x / 1.22-1.58x, 8 MiB
  // 1.08-1.66x / 0.99-1.44x. Blocks of 8 (s2d NHWC DCR b8 C3 of bytes: 0.98-1.11x, 0.73x on two
  // threads at 8 MiB) and of 3 (b3, 576-byte periods: 0.75-1.06x) keep the run copies, as does
  // depth_to_space (0.62-0.93x but for one cell at 64 KiB). Far past the cache such gathers went
  // both ways (0.80-2.3x over 6 cells at 256 MiB) and are not taken.
  const bool words_not_power_of_two = plan.width % 8 == 0 && !std::has_single_bit(plan.width);
  const bool zen5 = runtime::planning_core_kind() == runtime::core_kind::amd_zen5;
  const bool streamed_into_cache_sized_output =
      zen5 && gather_strips_stream(plan) && plan.total_bytes < streamed_gather_output_bytes;
  if (zen5 && short_block_of_24_byte_elements(plan.width, block_bytes) && steps <= 2 &&
      plan.total_bytes < streamed_gather_output_bytes) {
    return true;
  }
  return words_not_power_of_two && plan.width < 64 && steps <= 2 && streamed_into_cache_sized_output;
}

// Whether a single-block gather of `block_bytes` blocks taking `steps` permute steps per chunk
// beats the plan, where no periodic gather does. Measured on the 141 grid cells that have one at
// up to 4 steps (1 thread, 64 KiB to 16 MiB, each cell alone, the old plan and the gather
// alternating): it wins wherever the plan moves runs under 8 bytes (the 3- and 6-byte pixels of
// b = 3 depth_to_space, the 2-5 byte runs of tiny 3-D tensors: 1.1-9.8x at up to 4 steps), for
// 8-15 byte elements at up to 2 steps (1.4-2.8x, but 0.71x for one 16 MiB cell), and over the
// 9-way shuffles of NHWC CRD b = 3 (1.5-1.7x); it loses to staged shuffles of longer runs
// (0.4-0.9x) and to 12-byte elements at 3 steps (0.7-0.8x at 16 MiB). Blocks of under a chunk
// were not measured.
bool block_gather_beats(const permute_plan& plan, double steps, std::int64_t block_bytes) {
  if (gather_forced.load(std::memory_order_relaxed) != gather_forcing::off) return true;
  if (block_bytes < min_gather_block_bytes) return false;
  if (steps > max_gather_steps) return steps <= max_gather_steps_for_tiny_moves && moves_tiny_pieces(plan, steps);
  if (plan.shuffle) {
    const shuffle_tile& tile = *plan.shuffle;
    const auto run_bytes = static_cast<std::int64_t>(plan.width) * tile.run.extent;
    const bool power_of_two = std::has_single_bit(tile.offsets.size());
    return run_bytes < 8 || (tile.segment_copy.copy == nullptr && !power_of_two && run_bytes < 64 && steps <= 3);
  }
  return plan.width < 8 || (plan.width < 16 && steps <= 2);
}

// Whether a gather of one-element blocks (lone_elements_make_blocks) beats the plan, given that
// gather_beats accepts its steps: in the cache, and where the output streams for elements under 4
// bytes, or where the plan's tile writes several destination streams at once (its inner axis does
// not continue the destination). Same-run A/B on a Zen 5 of every such gather against the run copy
// it replaced (d2s NHWC b2-b4 of 3-12 byte elements, 1-2 steps per chunk), two alternations, op
// throughput, one / two threads: tiles continuing the destination 0.93-1.31x / 0.70-0.97x at 16
// MiB (d2s NHWC DCR b3 C3 of bytes, 9-byte elements, 0.94-0.99x / 0.74-0.86x) and 0.75x / 0.85x
// at 256 MiB (channels-last K = 3 DCR b2 C3 of 4-byte elements, rows of 2,136 bytes): those keep
// the copy. The binaries before and after, the cells whose plan changed: 1 MiB (4 cells) 1.18x /
// 1.02x (0.75-1.50x on two threads, whose memcpy there is bimodal); 16 MiB (5: 3-byte elements and
// 12-byte ones whose tile walked 3 output rows innermost) 1.66x / 1.49x, ratio to memcpy 0.23-0.29
// -> 0.38-0.47 on one thread; 256 MiB (9) 1.65x / 1.38x, d2s NHWC b3 C1 of bytes 0.28-0.30 -> 0.64-0.69.
bool lone_element_gather_beats(const permute_plan& plan) {
  if (!output_streams(plan)) return true;
  constexpr std::size_t max_tiny_element_bytes = 3;
  const bool writes_several_streams =
      !plan.shuffle && magnitude(plan.col.dst_stride) != static_cast<std::int64_t>(plan.width);
  return plan.width <= max_tiny_element_bytes || writes_several_streams;
}

// Rows of a gather whose windows can sit on source lines take at most this many programs, one per
// offset within a line their starts cycle through; where that is more than one, each program's rows
// hold this many bytes at least, it takes at most max_line_phase_step_growth times the steps, and
// the output stays in the cache.
constexpr std::int64_t max_line_phase_rows = 8;
constexpr std::int64_t min_line_phase_class_bytes = 3072;
constexpr double max_line_phase_step_growth = 1.3;

// The tile's programs with their windows on source lines (gather_tile::lined_programs), where
// every source stride the walk steps by but the rows' (the period's, every outer axis's, so also
// the row groups' and the work items') is a multiple of 64 bytes, the rows' start offsets within a
// line cycle through at most max_line_phase_rows values, and no program takes more than one step
// more per chunk (and where the rows take several, see max_line_phase_rows); none otherwise. With
// lined windows forced on every gather whose periods all start on lines (64 KiB grid, 1 thread,
// alternating): where the steps stayed the same, 1.04-1.50x; one step more, 0.96-1.34x
// (1.21-1.29x for 2 -> 3); more, 0.90-1.09x. As chosen here, same-binary-pair A/Bs of three
// alternations: rows all on lines, the 61 cells of the 64 KiB grid that take it 1.25x (median
// 0.28 -> 0.37 of memcpy), the 12 at 1 MiB 1.20x (0.50 -> 0.63), none slower. Rows in 2-8 line
// offsets, each offset's rows one call: without the limits, 0.67-1.38x over 58 cells, losing where
// a program's rows held under 3 KiB (0.67-0.85x; each call sets up every chunk for few periods) or
// it took 1.35x the steps or more (0.78-0.93x at 64 KiB). With the limits: 18 cells at 64 KiB 1.07x,
// 19 at 1 MiB 1.12x; the 15 at 16 MiB 0.98x (0.74-1.21x; each offset's rows walked apart), which
// keep the plain program.
// Where a phase's lined program takes too many steps, that phase takes the program with windows on
// lines where they fit (gather_program_for's lines_where_they_fit): the plain program's steps, each
// window moved onto its line where the bytes it supplies lie in one, so that only windows whose
// bytes straddle two lines load across them. Zen 5, the 8 grid cells this changes (none at 16 MiB),
// planned both ways in one process (bench/plan_ab, 21 samples, both orders): s2d channels-first
// K = 3 CRD b8 C3 / C4 of bytes at 64 KiB 1.30x / 1.29x (0.10 -> 0.13 of memcpy), b8 C64 at 1 MiB
// 1.24x, b4 C64 of bytes 1.13x (d2s 1.09x), d2s NHWC DCR b2 / b4 C3 1.00-1.06x. Choosing between the
// two by modelled load and permute time where both are within the limits went both ways (0.92-1.13x
// over 8 more cells) and is not done. Such programs do not group (group_chunks covers its windows
// by lines); where the plain program groups, the tile keeps it alone.
// Where a period's source bytes are not a multiple of 64 (s2d NHWC CRD b8 C3 of 4-byte elements: 96
// bytes), the lined programs join as many periods as put every joined one's source at the same
// offset within a line (gather_program_for's joined_periods), up to max_gather_period_bytes, and
// only where they keep the plain program's steps, 2 or more per chunk: Zen 5, the 9 grid cells that
// takes (none at 16 MiB), both plans in one process (bench/plan_ab, 31 samples, both orders): s2d
// NHWC CRD b8 C3 of 4-byte elements 1.18x / 1.21x at 64 KiB / 1 MiB, b4 C3 of 8-byte elements
// 1.28x / 1.22x, b4 C4 of bytes 1.33x at 1 MiB, s2d channels-last K = 3 CRD b2 C16 of bytes and C4
// of 4-byte elements 1.08x; b4 C4 of 2-byte elements 0.91x / 0.94x. Joined programs of more steps
// than the plain one lost (0.75-0.97x over 10 cells: s2d NHWC CRD b4 C3, 2.0 -> 3.0 steps), as did
// those of one step per chunk (0.90-0.92x).
// Rows whose starts cycle through more offsets than max_line_phase_rows, but that are no more rows
// than that, take a program each (each row one call), where every one is exact and the plain
// program takes 2 steps per chunk or more: Zen 5, both plans in one process (bench/plan_ab, 31
// samples, both orders), d2s channels-last K = 3 CRD b2 C4 / C16 of bytes at 1 MiB 1.18x / 1.17x on
// one thread (0.38 -> 0.45, 0.33 -> 0.38 of memcpy), 0.97-1.01x on two; d2s NHWC CRD b4 C16 of bytes
// at 1 MiB, whose timing is bimodal in either plan, 0.99-1.14x / 0.97-1.02x; C16 at 64 KiB 1.04x
// on one, 0.88-1.13x on two. Programs with windows on lines only where they fit lost there (d2s
// channels-first K = 3 CRD b8 C3 / C4 / C64 of bytes 0.87-0.92x, rows of 9 bytes apart, read across
// rows), as did those of one step per chunk (d2s NHWC CRD b2 C16, 0.95x).
void add_lined_programs(gather_tile& tile, const axis_list& outer, const axis_list& normalized, std::size_t block_axes,
                        std::size_t width, bool output_streams) {
  auto on_lines = [](const permute_axis& axis) { return axis.extent == 1 || axis.src_stride % 64 == 0; };
  if (!std::ranges::all_of(outer, on_lines)) return;
  // Periods whose sources start at different offsets within a line join into longer ones that all
  // start at the same offset (see above).
  const std::int64_t joined = 64 / std::gcd(tile.program->period_src_bytes % 64, std::int64_t{64});
  const double steps = tile.program->steps_per_chunk();
  if (joined > 1 && (steps < 2 || tile.program->period_dst_bytes * joined > max_gather_period_bytes)) return;
  const std::int64_t row_offset = tile.rows.extent == 1 ? 0 : tile.rows.src_stride % 64;
  const std::int64_t cycle = 64 / std::gcd(row_offset, std::int64_t{64});
  // Rows in more phases than that, but no more rows than that, take a program each where it is
  // exact and of 2 steps or more per chunk (see above).
  const bool row_by_row = cycle > max_line_phase_rows;
  if (row_by_row && (tile.rows.extent > max_line_phase_rows || steps < 2)) return;
  const std::int64_t class_bytes = (tile.rows.extent + cycle - 1) / cycle * tile.stream.extent * tile.block_bytes;
  if (cycle > 1 && (output_streams || class_bytes < min_line_phase_class_bytes)) return;
  const double most_steps = cycle > 1 ? std::min(steps + 1.0, steps * max_line_phase_step_growth) : steps + 1.0;
  const std::span<const permute_axis> inner = std::span(normalized).last(block_axes);
  auto program_at = [&](std::int64_t phase, bool fitted) {
    return tile.program->single_block
               ? gather_block_program_for(inner, width, phase, gather_layout::pairs_of_64, fitted)
               : gather_program_for(inner, width, tile.stream.src_stride, phase, gather_layout::pairs_of_64, fitted,
                                    joined);
  };
  std::vector<std::shared_ptr<const gather_program>> programs;
  for (std::int64_t j = 0; j < std::min(cycle, tile.rows.extent); ++j) {
    const std::int64_t phase = j * row_offset % 64;
    std::shared_ptr<const gather_program> lined = program_at(phase, false);
    if (joined > 1 && (!lined || lined->steps_per_chunk() > steps)) return;
    if (!lined || lined->steps_per_chunk() > most_steps) {
      if (row_by_row) return;
      lined = program_at(phase, true);
    }
    if (!lined || lined->steps_per_chunk() > most_steps) return;
    programs.push_back(std::move(lined));
  }
  tile.lined_programs = std::move(programs);
  tile.line_phase_rows = cycle;
}

// Whether an AVX2 gather (halves_of_16) taking `steps` steps per 32-byte chunk beats the plan the
// AVX2 kernels made. Measured over the benchmark grid on a Zen 3 without AVX-512 (1 thread, 64 KiB
// to 16 MiB, every cell that has a gather planned both ways in the same binary, two alternations,
// 4,135 cells): the gather wins where the plan moves a few bytes per step, and loses nearly
// everywhere else (0.3-0.8x against runs of 16 bytes or more, whose shuffles and copies move
// whole vectors). Taken:
// - direct shuffles of runs under 16 bytes, up to 4 steps (NHWC CRD of 4 channels: 2.0-7.4x);
// - staged shuffles of runs under 4 bytes up to 4 steps, under 8 up to 3, under 16 up to 2
//   (1.6-9.9x; more steps lost: 3-4 steps over 4-7 byte runs 0.97x, 8-16 byte runs 0.64x);
// - tiles of elements moved one at a time (channels-last CRD of 64 channels, before the AVX2
//   block-transposing shuffles took those: 1.2-2.6x, up to 16 steps), and run copies of 3-byte pixels
//   (up to 4 steps, or 6 for periodic programs: 1.3-2.8x) and of 6-byte ones (periodic, up to 3:
//   1.2-1.8x).
// Where the output is larger than the cache the copies tied or lost (0.79-1.05x: both are
// memory-bound there) and keep their plan, but for the copies of 3- and 6-byte pixels of
// short_pixels_gather_where_the_output_streams; the shuffles still won (1.4-5x), but for long
// periods.
// Rows of 117-192 bytes won too (1.1-1.6x, 5 cells); rows under two chunks (single blocks under
// one), which the grid does not hold, keep their plan.
constexpr std::int64_t min_avx2_gather_row_bytes = 64;
constexpr std::int64_t min_avx2_gather_block_bytes = 32;
// Outside the cache, periods of 864 bytes lost where the same shuffles won in cache (s2d NHWC CRD
// b3 C3 of 1- and 2-byte elements: 0.56-0.62x at 16 MiB, 2.4x at 1 MiB); 288 bytes still won.
constexpr std::int64_t max_avx2_streamed_gather_period_bytes = 512;
// Staged 3-way shuffles (RGB pixels: s2d / d2s NHWC and channels-last K = 3 CRD of 3 channels) of
// runs up to 4 bytes pay for a fifth step, and of 8 bytes for a third: the staging copies each
// 2-8 byte run into its buffer and out. Zen 3 without AVX-512, the 7 grid families this adds (each
// cell planned both ways in one process, bench/plan_ab, 31 / 21 / 9 / 5 samples at 64 KiB / 1 MiB
// / 16 MiB / 256 MiB, both orders), one / two threads: 1.47-3.53x / 1.37-3.34x at 64 KiB,
// 1.95-4.52x / 1.89-4.20x at 1 MiB, 1.07-2.99x / 1.09-2.61x at 16 MiB, 0.97-1.96x / 0.98-2.07x at
// 256 MiB (s2d NHWC CRD b4 C3 of bytes at 1 MiB 0.10 -> 0.37 of memcpy). The same reach over 4-way
// segmented shuffles lost (0.40-0.95x but for d2s NHWC CRD b4 C4 of bytes in the cache), as did
// 3-way runs of 3-4 bytes at 6 steps (0.60-1.37x) and of 8 bytes at 4-5 (0.37-1.43x).
constexpr std::int64_t max_odd_way_staged_gather_run_bytes = 4;
constexpr double max_odd_way_staged_gather_steps = 5;
constexpr std::int64_t max_odd_way_staged_three_step_gather_run_bytes = 8;
// Run copies whose tile rows hold at most 4 runs (space_to_depth's block columns: NHWC and
// channels-last K = 3 DCR of 3-4 channels, CRD of one), of elements under 16 bytes, take gathers of
// up to 2 steps (4 for elements under 8 bytes) in the cache where the period is short: each tile
// row's copy loop is all overhead. Zen 3 without AVX-512, each cell planned both ways in one
// process (bench/plan_ab, 31 / 21 / 11 / 9 / 7 samples, both orders), one / two threads:
// - periods of 96-192 bytes (s2d NHWC DCR b2 C3 of 2-byte elements and b4 C3 of bytes,
//   channels-last K = 3 DCR b2 C3 of 1- and 2-byte elements and b4 C3 of bytes): 1.20-2.42x /
//   1.16-1.81x at 64 KiB, 1.26-2.34x / 1.34-2.32x at 1 MiB (channels-last b2 C3 of bytes 0.18 ->
//   0.41 of memcpy), 1.48-2.54x / 1.41-2.89x at 4 MiB, 1.28-2.74x / 1.34-2.79x at 8 MiB,
//   1.03-1.16x / 0.95-1.15x at 12 MiB;
// - periods of 288 bytes (s2d NHWC b3 of 4 channels of bytes, one of 4-byte elements) only below
//   8 MiB: 1.09-1.11x / 1.04-1.11x at 64 KiB, 1.09-1.14x / 1.21-1.24x at 1 MiB, 1.16-1.27x /
//   1.21-1.26x at 4 MiB, 0.97-1.14x / 1.06-1.11x at 8 MiB, 0.69-0.74x / 0.76-0.79x at 12 MiB;
// - periods of 864 bytes (channels-last K = 3 b3) went both ways (0.90-1.29x) and keep the copy.
// Tiles of more runs a row (depth_to_space's) lost (0.39-1.17x).
constexpr std::int64_t max_few_runs_a_row = 4;
constexpr std::int64_t max_short_few_runs_period_bytes = 192;
constexpr std::int64_t max_few_runs_period_bytes = 288;
constexpr std::int64_t max_few_runs_long_period_output_bytes = std::int64_t{8} << 20;
bool few_runs_a_row_gather(const permute_plan& plan, double steps, std::int64_t period_bytes) {
  if (plan.col.extent > max_few_runs_a_row || plan.width >= 16) return false;
  if (steps > (plan.width < 8 ? 4 : 2)) return false;
  return period_bytes <= max_short_few_runs_period_bytes ||
         (period_bytes <= max_few_runs_period_bytes && plan.total_bytes < max_few_runs_long_period_output_bytes);
}

// Where the output streams (streaming_output_bytes and more), run copies of few runs a row
// (few_runs_a_row_gather's tiles) still lose to gathers of 3-byte elements of up to 3 steps, and
// short of far past the cache of 6-byte ones with periods of up to 96 bytes: a copy of a 3- or
// 6-byte run takes about 5 cycles, so the copies move about a byte a cycle, below what the memory
// does. Zen 3 without AVX-512, each run-copy cell of the 16 MiB grid that has a gather, planned
// both ways in one process (bench/plan_ab, 7 samples, both orders, 3 at 256 MiB), one / two
// threads:
// - 3-byte elements, 288-byte periods of 3 steps (s2d NHWC DCR and CRD b3 C1 of bytes): 1.78-2.29x
//   / 1.64-1.93x at 16 MiB (0.13 -> 0.34 of memcpy), 1.33-1.48x / 1.61-1.64x at 32 MiB,
//   1.27-1.34x / 1.56-1.66x at 256 MiB;
// - 6-byte elements, 96-byte periods (s2d NHWC and channels-last K = 3 DCR b2 C3 of bytes, 2 and
//   3.67 steps): 1.93-2.02x / 1.29-1.85x at 16 MiB, 1.37-1.96x / 1.40-1.78x at 32 MiB, at 256 MiB
//   0.93x / 0.94x (NHWC) and 1.35x / 1.32x (channels-last), hence the limit.
// Left to the copies: 6-byte elements of 288-byte periods (s2d NHWC b3 C1 of 2-byte elements,
// 0.64-0.93x), 3-byte ones of 6 steps (s2d channels-last K = 3 b3 C1 of bytes, 0.84-1.19x),
// 12-byte ones (0.61-1.50x; s2d NHWC DCR b4 C3 of bytes 0.72-1.06x), single blocks (d2s
// channels-last K = 3, 0.35-0.59x), and tiles of elements of other widths under 8 bytes, which no
// streamed grid cell has (unmeasured).
constexpr std::int64_t max_streamed_short_pixel_period_bytes = 96;
bool short_pixels_gather_where_the_output_streams(const permute_plan& plan, double steps, std::int64_t period_bytes,
                                                  bool single_block) {
  if (single_block || plan.col.extent > max_few_runs_a_row) return false;
  if (plan.width == 3) return steps <= 3;
  return plan.width == 6 && period_bytes <= max_streamed_short_pixel_period_bytes && steps <= 4 &&
         !far_past_the_cache(plan);
}

bool avx2_gather_beats(const permute_plan& plan, double steps, std::int64_t period_bytes, std::int64_t row_bytes,
                       bool single_block) {
  if (gather_forced.load(std::memory_order_relaxed) != gather_forcing::off) return true;
  if (row_bytes < (single_block ? min_avx2_gather_block_bytes : min_avx2_gather_row_bytes)) return false;
  const bool streams = output_streams(plan);
  if (streams && period_bytes > max_avx2_streamed_gather_period_bytes) return false;
  if (plan.shuffle) {
    const shuffle_tile& tile = *plan.shuffle;
    const auto run_bytes = static_cast<std::int64_t>(plan.width) * tile.run.extent;
    if (tile.segment_copy.copy == nullptr) return run_bytes < 16 && steps <= 4;
    const bool power_of_two = std::has_single_bit(tile.offsets.size());
    if (!power_of_two &&
        ((run_bytes <= max_odd_way_staged_gather_run_bytes && steps <= max_odd_way_staged_gather_steps) ||
         (run_bytes <= max_odd_way_staged_three_step_gather_run_bytes && steps <= 3))) {
      return true;
    }
    return (run_bytes < 4 && steps <= 4) || (run_bytes < 8 && steps <= 3) || (run_bytes < 16 && steps <= 2);
  }
  if (streams) return short_pixels_gather_where_the_output_streams(plan, steps, period_bytes, single_block);
  if (plan.kernel.copy == select_tile_kernel(plan.width).copy) return steps <= 16;
  if (plan.width < 4) return steps <= 4 || (!single_block && steps <= 6);
  if (!single_block && few_runs_a_row_gather(plan, steps, period_bytes)) return true;
  return plan.width < 8 && !single_block && steps <= 3;
}

bool loses_to_avx2_on_amd(const permute_plan& plan);  // below, with the other per-core rules

// The cores whose VBMI gathers build their chunks in groups (see prefer_gather): AMD's Zen 4 and
// Zen 5, and Intel's. On a Zen 5 (family 1Ah, model 2, 2 vCPUs) each grid cell whose plan grouping
// changes, planned both ways in one process (bench/plan_ab; 31 / 15 / 7 / 3 samples at 64 KiB /
// 1 MiB / 16 MiB / 256 MiB): 90 / 54 / 75 / 53 cells 1.21x / 1.27x / 1.13x / 1.11x on one thread,
// 1.20x / 1.36x / 1.20x / 1.08x on two; 5 of the 544 under 0.95x, the least 0.86x (s2d NHWC CRD b2
// C16 of 2-byte elements at 1 MiB, one thread).
bool groups_gather_chunks(runtime::core_kind cores) {
  return runtime::takes_amd_rules(cores) || cores == runtime::core_kind::intel;
}

// The cores that take the AVX2 level's plan over staged AVX-512 shuffles by the rules measured on
// AMD's cores (stages_where_avx2_segments_win_on_amd, stages_where_avx2_direct_wins_on_amd): AMD's,
// and Intel's, where they held too. On an Intel Xeon with AMX (family 6, 2 vCPUs, 48 KiB L1d and
// 2 MiB L2 per core), each grid cell planned both ways in one process (bench/plan_ab, 31 / 15
// alternations at 64 KiB / 1 MiB, then in the other order), one thread: the 18 / 12 cells these
// change (2- and 3-way de-interleaves of 4- and 8-byte lanes, 3-way interleaves of 4-byte lanes,
// which the AVX2 level walks in place) 1.36x / 1.32x, the least 1.07x.
bool takes_amd_staging_rules(runtime::core_kind cores) {
  return takes_amd_rules(cores) || cores == runtime::core_kind::intel;
}

// ... by the rules measured on a Zen 4 (stages_where_avx2_direct_wins_on_zen4,
// stages_interleave_where_avx2_wins_on_zen4): a Zen 4, and Intel's cores. The same A/B on the same
// Xeon, one thread: staged shuffles of 2-4 ways that the AVX2 level runs unstaged, 54 / 52 cells at
// 64 KiB / 1 MiB 1.33x / 1.20x (the least 0.92x), and staged interleaves of more than 4 ways, 23 /
// 31 cells 1.18x / 1.08x (the least 0.89x). These and the AMD staging rules together, planned with
// grouped gathers (groups_gather_chunks): the 95 staged cells they change, 1.08x / 1.26x at
// 64 KiB / 1 MiB on two threads; at 16 MiB 1.62x on one thread (3-way interleaves and
// de-interleaves of 1- and 2-byte lanes and 2-way interleaves of bytes 1.6-1.7x; the least 0.66x,
// a 3-way de-interleave of 4-byte lanes) and 1.47x on two (110 cells, the assembled de-interleaves
// of plans_streamed_deinterleaves_for_the_cache among them); at 256 MiB, where far_past_the_cache
// leaves the Zen 4 rules out, 5 cells 1.16x (2-way interleaves of bytes 0.75x).
// A Zen 5 (family 1Ah, model 2, 2 vCPUs) takes them for outputs under 512 KiB, inside its 1 MiB
// L2: each grid cell they change planned both ways in one process (bench/plan_ab, 31 / 21 / 15 / 7
// samples), one / two threads: 64 KiB 91 cells 1.07x / 1.19x, 256 KiB 95 cells 1.05x / 1.25x
// (staged 2-8-way interleaves of 4- and 8-byte lanes 1.2-1.4x on two threads; 16 / 6 cells of
// 64 KiB under 0.95x, 3- and 2-way ones of bytes 0.78-0.82x on one), 1 MiB 99 cells 0.98x / 1.01x,
// 16 MiB 94 cells 0.83x / 0.87x.
constexpr std::int64_t max_zen5_zen4_staging_output_bytes = std::int64_t{512} << 10;
bool takes_zen4_staging_rules(runtime::core_kind cores, const permute_plan& plan) {
  if (cores == runtime::core_kind::amd_zen5) return plan.total_bytes < max_zen5_zen4_staging_output_bytes;
  return cores == runtime::core_kind::amd_zen4 || cores == runtime::core_kind::intel;
}

// The *_on_amd rules below are for runtime::takes_amd_rules' cores, Zen 4 and Zen 5. The rules were
// measured on a Zen 5 first and held on a Zen 4 (see loses_to_avx2_on_amd; the planning of
// assembled de-interleaves for the cache, assembles_streamed_deinterleave, held there once measured
// plan against plan in one process); the rule that did not is Zen 5's alone (gathers in place of
// run copies of 24- and 48-byte elements: gather_beats).
using runtime::takes_amd_rules;

// Run copies of 9- to 15-byte elements beat a VBMI gather of more than 2 steps per chunk on a
// Zen 4 where the gather's windows do not sit on source lines (gather_tile::lined_programs), so
// that many of its loads cross a line. Each grid cell whose plan this changes (channels-last K = 3
// b3 / b4 of 12-byte pixels, 3 steps) planned both ways in one process, alternating 7-31 times,
// both orders, copy against gather, one thread: 64 KiB 1.31x (5 cells, 1.23-1.60x), 256 KiB 1.05x
// (4, 0.96-1.12x), 1 MiB 1.29x (4, 0.99-1.41x), 4 MiB 1.26x, 16 MiB 1.18x (4, 0.96-1.30x); two
// threads 1.26x / 1.36x at 64 KiB / 1 MiB. With lined windows the gather won (3 cells at 64 KiB,
// copies 0.72-0.82x); at up to 2 steps the two went both ways (39 cells at 64 KiB - 16 MiB,
// 0.50-1.57x, 0.95x over all).
bool loses_to_run_copies_on_zen4(const permute_plan& plan, const gather_tile& gather) {
  constexpr std::size_t min_element_bytes = 9;
  constexpr std::size_t max_element_bytes = 15;
  constexpr double max_steps = 2;
  return runtime::planning_core_kind() == runtime::core_kind::amd_zen4 && !plan.shuffle &&
         plan.width >= min_element_bytes && plan.width <= max_element_bytes &&
         gather.program->steps_per_chunk() > max_steps && gather.lined_programs.empty();
}

// Where a run-copy tile's or a gather's output streams, its outer axes are walked in the source's
// order rather than the destination's, provided every outer step writes at least a page away:
// d2s channels-last K = 3 (and NHWC CRD of 8-byte elements) read part of each source row per
// call, and in the destination's order came back for the rest only after a slab of megabytes,
// from memory again. Intel Xeon with AMX (2 vCPUs), each grid cell this changes planned both ways
// in one process (bench/plan_ab, both orders; 3-5 alternations): run copies at 256 MiB, 71 cells,
// 1.23x / 1.28x on one / two threads (1.01-1.75x; copy_runs_streaming 1.20x, the joined runs
// 1.33x, d2s channels-last K = 3 DCR b2 C64 of bytes 0.51 -> 0.65 of memcpy), at 16 MiB, 56 cells,
// 1.06x / 1.06x (0.97-1.55x); VBMI gathers (d2s channels-last K = 3 CRD) at 256 MiB, 11 cells,
// 1.11x / 1.12x (0.97-1.23x), at 16 MiB, 3 cells, 1.09x; the one AVX2 gather at 256 MiB 1.15x.
// The limit: s2d tiles whose innermost outer step writes the next line (a 64-byte destination
// stride) lost 0.52-0.75x so walked, writing each line in pieces far apart in time.
constexpr std::int64_t min_source_order_outer_dst_stride = 4096;
bool walks_outer_axes_in_source_order(const permute_plan& plan) {
  return output_streams(plan) && std::all_of(plan.outer.begin(), plan.outer.end(), [](const permute_axis& axis) {
           return magnitude(axis.dst_stride) >= min_source_order_outer_dst_stride;
         });
}

// Outermost = largest magnitude of stride(axis), ties in their order. A stable insertion sort: a
// handful of axes, and std::stable_sort allocates a buffer.
template <class Stride>
void order_outermost_first(axis_list& axes, Stride stride) {
  for (std::size_t i = 1; i < axes.size(); ++i) {
    const permute_axis axis = axes[i];
    std::size_t j = i;
    for (; j > 0 && magnitude(stride(axes[j - 1])) < magnitude(stride(axis)); --j) axes[j] = axes[j - 1];
    axes[j] = axis;
  }
}

void order_by_source_stride(axis_list& axes) {
  order_outermost_first(axes, [](const permute_axis& axis) { return axis.src_stride; });
}

// A gather whose rows read the same source lines (d2s NHWC CRD: each output row of a block row
// takes a few bytes of every source pixel) builds every row over a stretch of periods in turn, so
// that each source line comes from memory once and serves all the rows from L1; one row after
// another, each row's pass read the whole stretch again (the first from memory, the others from
// L2). Intel Xeon with AMX (2 vCPUs), the grid's gather cells whose rows so share their source
// (rows axis under 64 bytes apart in the source), planned both ways in one process (bench/plan_ab,
// both orders): 256 MiB, 55 cells, 1.06x / 1.07x on one / two threads (31 / 30 faster by over 4%
// in both orders, 1.05-1.22x; none slower); 16 MiB, 51 cells, 1.02x / 1.01x (6 / 5 faster,
// 1.04-1.43x; 2 at 0.92-0.95x on one thread); 1 MiB 0.999x (no call there holds rows longer than
// a work item, and the strips barely change).
bool gather_rows_share_source(const gather_tile& tile) {
  return tile.rows.extent > 1 && magnitude(tile.rows.src_stride) < tile.program->period_src_bytes;
}

// How many windows a group of gather chunks may have (grouped_gather_program_for): where the output
// lies past the L2 cache, on Intel's cores, up to max_group_windows, else max_near_group_windows.
// Chunks reading 9 or more source rows (s2d channels-last K = 3 b3: 3 x 3 rows; d2s NHWC CRD b3;
// s2d NHWC CRD b8 C3) loaded two windows per step, 9-10 a chunk, where a group of them loads each
// of its 7-10 windows once per period (2.3-2.7 a chunk). Intel Xeon with AMX (2 vCPUs, 2 MiB L2
// per core), the grid's gather cells whose program this changes (31-36 a size), planned both ways
// in one process (bench/plan_ab, both orders), one thread: 64 KiB 0.96x (17 slower), 1 MiB 1.03x
// (11 faster, 11 slower), 2 MiB 1.09x (19 / 2), 4 MiB 1.13x (21 / 0), 16 MiB 1.17x (24 / 0; two
// threads 1.16x), 64 MiB 1.14x (22 / 4), 256 MiB 1.02x (9 / 12); regrid bench at 16 MiB, alternate
// processes, 1.19x (26 / 0; s2d channels-last K = 3 b3 C1 of bytes 0.46 -> 0.66 of memcpy). All
// 12 losers at 256 MiB and 3 of the 4 at 64 MiB (0.89-0.98x) are gathers whose rows share their
// source lines (gather_rows_share_source), d2s NHWC: from 64 MiB their groups stay small. The
// fourth, d2s channels-last K = 3 DCR b2 C3 of 2-byte elements at 64 MiB (0.92x), keeps the wide
// groups. Zen 4 is not measured.
constexpr std::int64_t min_wide_group_output_bytes = std::int64_t{2} << 20;
int most_group_windows(const permute_plan& plan, const gather_tile& tile) {
  const bool past_l2 = plan.total_bytes >= min_wide_group_output_bytes;
  const bool rows_share_far_past_the_cache = far_past_the_cache(plan) && gather_rows_share_source(tile);
  return runtime::planning_core_kind() == runtime::core_kind::intel && past_l2 && !rows_share_far_past_the_cache
             ? max_group_windows
             : max_near_group_windows;
}

// Replaces the plan with a periodic gather where gather_beats says so, else with a single-block one
// where block_gather_beats does; `normalized` are the axes the plan was made from. Gathers need
// VBMI or AVX2 (the avx512 level without VBMI takes the AVX2 plan's gather: see plan_permute).
void prefer_gather(permute_plan& plan, const axis_list& normalized, std::size_t width) {
  const isa level = planning_isa();
  if (level != isa::avx512vbmi && level != isa::avx2) return;
  const bool vbmi = level == isa::avx512vbmi;
  // A shuffle that loses to the AVX2 level's plan on AMD's cores stays, for plan_permute to replace
  // with that plan: where a VBMI gather would beat the shuffle (9-way ones of 8-byte lanes, 2-3
  // steps per chunk; 8-way de-interleaves of them and of 2-byte lanes, see loses_to_avx2_on_amd),
  // the AVX2 shuffle beats the gather too. Same-run A/B on a Zen 5, the 6 grid cells this changes
  // (d2s / s2d NHWC CRD b3 C4 and NCHW CRD b4 C64 of 8-byte elements at 64 KiB and 1 MiB), six
  // alternations: 1.15-1.75x per cell on one thread, 0.90-1.75x on two (1.23x over all).
  if (vbmi && takes_amd_rules(runtime::planning_core_kind()) && loses_to_avx2_on_amd(plan)) return;
  // Nor does a spilled run copy that beats any VBMI gather (unless a test forces gathers).
  if (vbmi && gather_forced.load(std::memory_order_relaxed) == gather_forcing::off &&
      keeps_spilled_runs_over_gather(plan)) {
    return;
  }
  auto periodic_beats = [&](double steps, std::int64_t period_bytes, std::int64_t block_bytes, std::int64_t row_bytes) {
    return vbmi ? gather_beats(plan, steps, block_bytes, row_bytes)
                : avx2_gather_beats(plan, steps, period_bytes, row_bytes, false);
  };
  auto single_block_beats = [&](double steps, std::int64_t period_bytes, std::int64_t block_bytes) {
    return vbmi ? block_gather_beats(plan, steps, block_bytes)
                : avx2_gather_beats(plan, steps, period_bytes, block_bytes, true);
  };
  // No gather would win: skip building programs.
  if (!periodic_beats(0.0, 0, 0, max_gather_period_bytes) && !single_block_beats(0.0, 0, max_gather_period_bytes)) {
    return;
  }
  gather_candidates candidates =
      find_gathers(normalized, width, vbmi ? gather_layout::pairs_of_64 : gather_layout::halves_of_16);
  if (candidates.periodic && candidates.periodic->block_axes == 0 && !lone_element_gather_beats(plan)) {
    candidates.periodic.reset();
  }
  found_gather* found = nullptr;
  if (candidates.periodic) {
    const gather_tile& tile = candidates.periodic->tile;
    if (periodic_beats(tile.program->steps_per_chunk(), tile.program->period_dst_bytes, tile.block_bytes,
                       tile.stream.extent * tile.block_bytes)) {
      found = &*candidates.periodic;
    }
  }
  if (found == nullptr && candidates.single_block) {
    const gather_tile& tile = candidates.single_block->tile;
    if (single_block_beats(tile.program->steps_per_chunk(), tile.program->period_dst_bytes, tile.block_bytes)) {
      found = &*candidates.single_block;
    }
  }
  if (found == nullptr) return;
  gather_tile& tile = found->tile;
  axis_list outer = normalized;
  while (outer.size() > normalized.size() - found->axes_taken) outer.pop_back();
  if (!outer.empty()) {
    tile.rows = outer.back();
    outer.pop_back();
  }
  if (vbmi) add_lined_programs(tile, outer, normalized, found->block_axes, width, output_streams(plan));
  if (vbmi && loses_to_run_copies_on_zen4(plan, tile)) return;
  // On a Zen 4, whose gathers are bound by their loads (most cross a line), chunks are built in
  // groups that load their windows once per period (grouped_gather_program_for). Each gather cell
  // of the grid planned both ways in one process, alternating 7-31 times, then in the other order,
  // one / two threads: 64 KiB 1.06x / 1.05x over all 196 (the 43 whose program groups 1.29x),
  // 1 MiB 1.10x / 1.10x over 131 (42 grouped: 1.33x, s2d NHWC and channels-last K = 3 CRD b2-b4 of
  // 3-4 channels 1.5-1.7x, e.g. 0.37 -> 0.57 of memcpy for s2d NHWC DCR b3 C1 of bytes), 16 MiB
  // 1.04x on one thread (53 grouped: 1.09x, the least 0.94x). The lined programs (windows on
  // lines, each load 1.1 permutes' time) group as well, against the same with only the unlined
  // program grouped: 64 KiB 1.05x / 1.04x (28 grouped: 1.43x on one thread, s2d channels-first
  // K = 3 and channels-last K = 3 CRD up to 1.84x), 1 MiB 1.02x / 1.02x (10: 1.26x / 1.28x),
  // 16 MiB 1.01x. Intel's cores group them too: on an Intel Xeon with AMX (family 6, 2 vCPUs,
  // 48 KiB L1d and 2 MiB L2 per core), each grid cell planned both ways in one process
  // (bench/plan_ab, 31 / 15 / 7 alternations at 64 KiB / 1 MiB / 16 MiB, then in the other order),
  // the cells whose program groups: one thread 1.16x / 1.14x / 1.17x over 92 / 55 / 52 (68 / 40 / 43
  // faster by over 4% in both orders, 1.22x / 1.19x / 1.21x; one slower, 0.92-0.95x), two threads
  // 1.01x / 1.12x / 1.17x; at 256 MiB 1.04x on one thread (52 cells, 0.94-1.17x). Zen 5 is not
  // measured.
  if (vbmi && groups_gather_chunks(runtime::planning_core_kind()) && !tile.program->single_block) {
    // The same programs as find_gathers' and add_lined_programs', from the program cache: grouping
    // one costs 4-15 us, a plan without it 0.2-0.5.
    const std::span<const permute_axis> inner = std::span(normalized).last(found->block_axes);
    const int most_windows = most_group_windows(plan, tile);
    tile.program = grouped_gather_program_for(inner, width, tile.stream.src_stride, unlined, most_windows);
    // Programs with windows on lines where they fit do not group (their windows are not lines),
    // and where the plain program groups, it runs instead: it loads fewer windows.
    if (has_fitted_programs(tile) && !tile.program->chunk_groups.empty()) {
      tile.lined_programs.clear();
      tile.line_phase_rows = 1;
    }
    for (auto& lined : tile.lined_programs) {
      if (lined->lines_where_they_fit) continue;
      lined = grouped_gather_program_for(inner, width, tile.stream.src_stride, lined->line_phase, most_windows,
                                         lined->joined_periods);
    }
  }
  const std::int64_t total_bytes = plan.total_bytes;
  const bool streams = plan.streams;
  plan = permute_plan{};
  plan.outer = std::move(outer);
  plan.width = width;
  plan.total_bytes = total_bytes;
  plan.streams = streams;
  plan.gather = std::move(tile);
  plan.gather->rows_share_source = gather_rows_share_source(*plan.gather);
  if (walks_outer_axes_in_source_order(plan)) order_by_source_stride(plan.outer);
}

// Output rows at least this long let run copies of short runs walk the source in order (see
// plan_permute).
constexpr std::int64_t min_source_order_output_row_bytes = 8192;

// How many places of memory a run-copy tile walk writes (or reads) at once on one side: 1 when
// the inner axis continues the runs, else the inner extent, each inner step landing elsewhere.
// Hardware prefetchers follow a few streams; dozens, each visited in turn, run at half of memory
// speed once the tensor is out of cache (d2s NHWC b8 C16: 64 source streams one way, 8 the other).
std::int64_t concurrent_streams(const permute_axis& inner, std::int64_t width) {
  auto side = [&](std::int64_t inner_stride) { return magnitude(inner_stride) == width ? 1 : inner.extent; };
  return std::max(side(inner.src_stride), side(inner.dst_stride));
}

}  // namespace

void force_assembled_for_testing(bool forced) noexcept { assembled_forced.store(forced, std::memory_order_relaxed); }

void force_gather_for_testing(gather_forcing forcing) noexcept {
  gather_forced.store(forcing, std::memory_order_relaxed);
}

namespace {

// Whether the runs of a one-level repeat, each position of which is a work item, are cut into
// chunks of about item_bytes on `threads` threads: where there are fewer than min_items_per_thread
// per thread, they do not share out evenly, and each is 128 KiB or more. s2d / d2s channels-first
// K = 1 CRD of 3 channels (3 runs of 0.3-90 MB) gave two threads 2 runs and 1. Measured on an Intel
// Xeon with AMX (2 vCPUs), the 32 such cells of each grid size, two threads, the binaries before
// and after in alternate processes of regrid bench (twice; once at 256 MiB): 1.29x at 1 MiB (median
// 0.60 -> 0.78 of memcpy), 1.32x at 16 MiB (0.71 -> 0.96), 1.20x at 256 MiB, none slower. Runs that
// share out evenly keep their items: cut, the 96 of 4, 16 and 64 channels at 16 MiB went 0.985x
// (one thread 0.98x), and runs under 128 KiB at 64 KiB 0.83x (0.51x at the least).
bool chunks_repeated_runs(std::int64_t run_bytes, std::int64_t runs, int threads) {
  // One thread (runs % 1 == 0) keeps them.
  return run_bytes >= 2 * bytes_per_work_item && runs < min_items_per_thread * threads && runs % threads != 0;
}

// The work items of an unstaged shuffle plan (see shuffle_split), of about item_bytes each; with
// `chunk_runs` (one-level repeats only), the runs cut into chunks too (see chunks_repeated_runs).
shuffle_split split_of(const permute_plan& plan, std::int64_t item_bytes = bytes_per_work_item,
                       bool chunk_runs = false) {
  const shuffle_tile& tile = *plan.shuffle;
  const std::int64_t run_bytes = shuffle_run_bytes(plan);
  const std::int64_t call_bytes = run_bytes * tile.repeat.inner.extent;
  const bool two_levels = tile.repeat.outer.extent > 1;
  const permute_axis& split_axis = two_levels ? tile.repeat.outer : tile.repeat.inner;
  const std::int64_t unit_bytes = two_levels ? call_bytes : run_bytes;
  const std::int64_t position_bytes = run_bytes / tile.run.extent;
  shuffle_split split;
  if (chunk_runs) {
    // Whole lines of each way's row per chunk where the rows start on lines.
    const std::int64_t positions = item_bytes / position_bytes;
    split.chunk = std::clamp<std::int64_t>(positions / 64 * 64, 1, tile.run.extent);
  } else {
    split.chunk = tile.repeat.inner.extent > 1 || two_levels
                      ? tile.run.extent
                      : std::clamp<std::int64_t>(item_bytes / position_bytes, 1, tile.run.extent);
  }
  split.per_item = std::clamp<std::int64_t>(item_bytes / std::max<std::int64_t>(unit_bytes, 1), 1, split_axis.extent);
  split.run_items = (tile.run.extent + split.chunk - 1) / split.chunk;
  split.items_per_outer = split.run_items * ((split_axis.extent + split.per_item - 1) / split.per_item);
  return split;
}

permute_plan plan_permute_unsplit(std::span<const permute_axis> axes, std::size_t element_bytes);

// The streamed 8-way de-interleaves that assemble their output vectors (assembles_shuffle): the
// s2d channels-first K = 3 b = 8 tensors of 1- to 8-byte elements. On a Zen 5 each lost to the plan
// the same problem gets where the output stays in the cache (an AVX2 segmented or an AVX-512 staged
// de-interleave with ordinary stores): the 26 such cells of the 16 MiB grid, the old plan and the
// cached one alternating per whole grid run, five A/Bs of one or two threads (two or three rounds
// each; memcpy interleaved, or each sample after untimed calls of its own kind), op throughput
// 1.8-2.2x (geometric means; median ratio to memcpy about 0.2 -> 0.4), least 0.75-1.43x. At
// 256 MiB the 6 that assemble there: 2.4x / 2.25x on one / two threads. On a Zen 4 (family 19h,
// model 11h, 2 vCPUs) the same 26 cells, three alternations of whole grid runs, had gone both ways
// (1.12x on one thread, 0.87x on two; 0.54-1.52x per cell), and the rule was Zen 5's alone; there
// each of the 25 such cells planned both ways in one process, the two plans alternating 11 times,
// then again in the other order: 1.33x / 1.19x on one / two threads (median 0.28 -> 0.38 of memcpy
// on one; the least 1.02x / 0.80x, s2d CRD b8 C4 of 4-byte elements on two), and the 6 at 256 MiB
// 1.56x / 1.43x (the least 0.66x on two threads, CRD C64 of 4-byte elements). On an Intel Xeon with
// AMX (family 6, 2 vCPUs) the same: the 26 cells of the 16 MiB grid, each planned both ways in one
// process (bench/plan_ab, 7 alternations, both orders), 1.29x / 1.34x on one / two threads (the
// least 1.02x / 0.95x; s2d channels-first K = 3 b8 of 2-byte elements 1.38x / 1.47x), the 3 at
// 256 MiB 1.88x / 1.84x.
bool assembles_streamed_deinterleave(const permute_plan& plan) {
  return plan.shuffle && plan.shuffle->repeat.assembled && !plan.shuffle->interleave && output_streams(plan);
}

// The cores that plan assembles_streamed_deinterleave's problems for the cache: AMD's and Intel's.
bool plans_streamed_deinterleaves_for_the_cache(runtime::core_kind cores) {
  return takes_amd_rules(cores) || cores == runtime::core_kind::intel;
}

// Interleaves, and de-interleaves of 8 ways or more, whose output streams but stays under 64 MiB
// are planned for the cache (ordinary stores) on Intel's cores, where their plan, made for the
// streamed output, is an AVX-512 one that does not transpose blocks. The output then stays in the
// last-level cache, where streaming stores send it to memory. On an Intel Xeon with AMX (2 vCPUs),
// each planned both ways in one process (bench/plan_ab, both orders), one / two threads:
// - interleaves: half of the 506 cells of the 16 MiB grid this changes (every other), 1.31x /
//   1.29x, 241 / 233 faster by over 4% (1.06-2.15x), 3 / 4 slower (staged 3-way interleaves of
//   bytes 0.88x, staged 8-way ones 0.85x on two threads);
// - de-interleaves of 8-16 ways: the 126 cells, 1.53x / 1.48x, 105 / 104 faster, 2 / 1 slower
//   (staged ones of 2-byte lanes, 0.91-0.96x); in regrid bench, alternate processes, twice, 1.08x /
//   1.09x (78 / 86 faster, 2 / 5 slower, the least 0.94x: s2d channels-last K = 3 CRD).
// With every plan under 64 MiB made for the cache (regrid bench, a fifth of the 1401 cells that
// changes, alternate processes, twice), the AVX-512 interleaves had gained 1.05-1.15x per kind on
// one and two threads, where the AVX2 level's (0.85-0.98x) and the 2- to 4-way de-interleaves
// (0.91-1.0x, the least 0.5x) lost: those keep their streamed plans.
constexpr std::size_t min_cached_deinterleave_ways_on_intel = 8;
bool plans_streamed_shuffle_for_the_cache(const permute_plan& plan) {
  return plan.shuffle &&
         (plan.shuffle->interleave || plan.shuffle->offsets.size() >= min_cached_deinterleave_ways_on_intel) &&
         !plan.shuffle->transposes && plan.shuffle->level >= isa::avx512 && output_streams(plan) &&
         !far_past_the_cache(plan) && runtime::planning_core_kind() == runtime::core_kind::intel;
}

// On a Zen 5, outputs that stream but could stay in its 32 MiB L3, under
// max_cached_output_bytes_on_more_threads, also keep the plan made for the cache (ordinary stores),
// which run_permute takes wherever two or more threads share the call (permute_plan::
// on_more_threads), where the streamed plan is an unstaged shuffle that does not transpose blocks
// or a run copy with streaming stores. Two threads' memcpy of such an output stays in the L3 (the
// runs below: median 224 GB/s at 16 MiB, against 64 on one thread), and so do those plans. Family 1Ah
// model 2 (2 vCPUs), two threads, op throughput, geometric mean:
// - first every plan under 32 MiB made for the cache, in alternate processes of regrid bench, the
//   16 MiB grid twice, by kind of streamed plan: direct interleaves 1.31x (464 cells), direct
//   de-interleaves 1.14x (462), copy_runs_streaming 1.20x (124), copy_x*_streaming 1.13x (18);
//   staged shuffles 0.79x (interleaves) and 0.92x (de-interleaves), gathers 0.96x, short-run copies
//   0.88x, transposing 0.74x and segmented shuffles 0.65x, which keep the streamed plan; on one
//   thread the cache plans lost (0.69x over the s2d cells at 16 MiB), as at 24 MiB on two (0.88x);
// - then this rule, the binaries before and after in alternate processes, twice: the 699 cells of
//   the 12 MiB grid it changes 1.69x (604 faster by over 5%, 47 slower; mean ratio to memcpy 0.49
//   -> 0.79; the cells it leaves alone 1.01x); the 1097 of the 16 MiB grid 1.24x (833 faster, 144
//   slower; 0.63 -> 0.75), where two-thread runs are bimodal: the new binary's two runs differed
//   1.8x for every cell alike, and against the untouched cells of the same run the changed ones
//   gained 1.17x and 1.33x (mean ratio 0.63 -> 0.71 and 0.80); with the bound at 24 MiB, the 1097
//   of the 20 MiB grid 0.88x (634 slower), so it stops short of 20 MiB.
// Unmeasured on other cores.
constexpr std::int64_t max_cached_output_bytes_on_more_threads = std::int64_t{18} << 20;
bool takes_the_cache_plan_on_more_threads(const permute_plan& plan) {
  if (runtime::planning_core_kind() != runtime::core_kind::amd_zen5 || !output_streams(plan) ||
      plan.total_bytes >= max_cached_output_bytes_on_more_threads) {
    return false;
  }
  if (plan.shuffle) {
    const shuffle_tile& tile = *plan.shuffle;
    return tile.segment_copy.copy == nullptr && tile.segmented == nullptr && !tile.transposes;
  }
  if (plan.gather) return false;
  const std::string_view kernel = plan.kernel.name;
  return kernel.starts_with("copy_runs_streaming") ||
         (kernel.starts_with("copy_x") && kernel.find("_streaming") != std::string_view::npos);
}

// AVX-512 shuffles that lose to the AVX2 level's plan for the same problem on Intel's cores,
// in the cache: interleaves of 3 ways of 2-byte lanes (unstaged) and of 8-byte lanes, 9-way ones of
// both, 16-way ones of 1- and 2-byte lanes, and staged 4-way ones of bytes; staged 8-way
// de-interleaves of 1- and 2-byte lanes. Intel runs the 2-byte two-source permutes (vpermt2w) as
// three micro-ops, and the 8-byte ones lost too for reasons not established (no counters there).
// Measured on an Emerald Rapids Xeon: the grid cells whose plan this changes (126 at 64 KiB and
// 1 MiB; outputs that stream keep theirs), old and new binaries alternating per case, three rounds:
// 1 thread 1.10x / 1.33x at 64 KiB / 1 MiB (median 0.48 -> 0.59 and 0.56 -> 0.80 of memcpy),
// 2 threads 1.12x / 1.29x; unstaged 3-way interleaves of 8-byte lanes at 1 MiB 1.41x (2 threads
// 1.48x). The same A/B lost on 3-way interleaves of 4-byte lanes (0.91-0.97x) and staged ones of
// 2-byte lanes (0.90-0.95x), 9- and 16-way ones of 4-byte lanes (0.68-0.96x) and 16-way ones of
// 8-byte lanes (0.83-1.02x), which keep their AVX-512 plans. Staged 4-way interleaves of bytes and
// staged 8-way de-interleaves of 1- and 2-byte lanes joined later, up to an output of 1.5 MiB
// (max_avx2_over_staging_bytes_on_intel): on an Intel Xeon with AMX (family 6, 2 vCPUs), each grid
// cell this changes planned both ways in one process (bench/plan_ab, buffers on cache lines, 61 /
// 41 / 21 alternations at 64 KiB / 256 KiB / 1 MiB, then the other order): 19 / 17 / 25 cells,
// 1.15x / 1.17x / 1.06x on one thread, 1.05x / 1.03x / 1.04x on two; per family at 1 MiB 1.08x
// (interleaves of bytes), 1.08x / 1.03x (de-interleaves of 1- / 2-byte lanes), the least 0.89x. At
// 2 MiB, the L2 cache per core, they lost (22 cells, 0.96x / 0.98x on one / two threads), and at
// 4 MiB (0.93x / 0.95x). The A/B that found them (loses_to_avx2_on_zen4 for Intel, 89 cells at
// 64 KiB, 1.001x) lost on staged 4-way de-interleaves (0.89-0.92x on two threads at 64 KiB, 0.96x
// for 2-byte lanes at 1 MiB), unstaged 4- and 8-way interleaves of bytes and 3-way ones of 4-byte
// lanes; 16-way interleaves of 4-byte lanes won on this Xeon (1.25x / 1.06x at 64 KiB, 1.02x /
// 1.12x at 1 MiB) but lost on the Emerald Rapids one (above), and keep theirs.
constexpr std::int64_t max_avx2_over_staging_bytes_on_intel = std::int64_t{3} << 19;

// The plan's shuffle where it is one of the AVX-512 level's own, not block-transposing: the
// shuffles the loses_to_avx2_on_* rules weigh (else null).
const shuffle_tile* own_avx512_shuffle(const permute_plan& plan) {
  if (!plan.shuffle || plan.shuffle->transposes || plan.shuffle->level != isa::avx512) return nullptr;
  return &*plan.shuffle;
}

// ... whose output stays in the cache: the shuffles loses_to_avx2_on_intel weighs.
const shuffle_tile* cached_avx512_shuffle(const permute_plan& plan) {
  return output_streams(plan) ? nullptr : own_avx512_shuffle(plan);
}

bool loses_to_avx2_on_intel(const permute_plan& plan) {
  if (!plan.shuffle || plan.shuffle->transposes) return false;
  const shuffle_tile& shuffle = *plan.shuffle;
  const std::size_t ways = shuffle.offsets.size();
  const bool staged = shuffle.segment_copy.copy != nullptr;
  const bool staged_within_l2 = staged && plan.total_bytes <= max_avx2_over_staging_bytes_on_intel;
  if (!shuffle.interleave) return staged_within_l2 && ways == 8 && plan.width <= 2;
  if (cached_avx512_shuffle(plan) == nullptr) return false;
  switch (plan.width) {
    case 1: return ways == 16 || (ways == 4 && staged_within_l2);
    case 2: return ways == 9 || ways == 16 || (ways == 3 && !staged);
    case 8: return ways == 3 || ways == 9;
    default: return false;
  }
}

// Staged AVX-512 shuffles (segments copied through the L1 buffer) whose problem the AVX2 level
// walks in place (shuffle_tile::segmented) lose to that on Intel's cores, for these ways and lanes:
// interleaves of 2 and 8 ways, of 4 ways except 2-byte lanes, and of 3 ways of 8-byte lanes whose
// output streams (loses_to_avx2_on_intel takes the others); de-interleaves of 4 and 8 ways except
// 4-byte lanes. Measured on an Emerald Rapids Xeon: the 294 grid cells whose plan this changes,
// old and new binaries alternating per case, four rounds: 1 thread 1.21x / 1.22x / 1.15x at
// 64 KiB / 1 MiB / 16 MiB (median 0.42 -> 0.53, 0.54 -> 0.66, 0.71 -> 0.78 of memcpy), 2 threads
// 1.13x / 1.18x / 1.13x; the least 0.62x (d2s CF-K3 DCR b8 C16 of bytes at 64 KiB). The same A/B
// lost on the ways and lanes left out: 2- and 3-way de-interleaves (0.76-1.14x), de-interleaves of
// 4-byte lanes (0.79-1.05x), 4-way interleaves of 2-byte lanes (0.88-1.06x) and 16-way ones.
// They beat the staged ones on AMD's cores too (stages_where_avx2_segments_win_on_amd).
bool stages_where_avx2_segments_win_on_intel(const permute_plan& plan) {
  if (!plan.shuffle || plan.shuffle->segment_copy.copy == nullptr || plan.shuffle->transposes) return false;
  const std::size_t ways = plan.shuffle->offsets.size();
  if (plan.shuffle->interleave) {
    return ways == 2 || ways == 8 || (ways == 4 && plan.width != 2) || (ways == 3 && plan.width == 8);
  }
  return (ways == 4 || ways == 8) && plan.width != 4;
}

// AVX-512 shuffles that lose to the AVX2 level's plan for the same problem on AMD's cores (Zen 4
// and Zen 5, see takes_amd_rules): in the cache, 3- and 9-way interleaves and de-interleaves of
// 8-byte lanes that are not staged (Intel's loses_to_avx2_on_intel has the interleaves among its
// cases). Measured on a Zen 5 (family 1Ah, 2 vCPUs): the grid cells whose plan this changes, old
// and new plans alternating per grid run, five rounds: 3 ways 1.09x / 1.05x at 64 KiB / 1 MiB (34 /
// 46 cells, the least 0.94x), 9 ways 1.43x / 1.23x (6 / 4 cells) on one thread; both 1.10x / 1.07x
// on two. The same A/B lost where the output streams (0.75x over 62 cells at 16 MiB, down to 0.39x)
// and on staged ones (0.93-0.99x). Also 8-way de-interleaves of 8-byte lanes in runs of 4 elements,
// one AVX2 vector per way (half a vector for AVX-512), which a VBMI gather replaced (see
// prefer_gather): same-run A/B on a Zen 5, the 3 grid cells this changes (d2s channels-last K = 3
// CRD b2 C4 at 64 KiB and 1 MiB, d2s channels-first K = 3 CRD b4 C16 at 64 KiB, of 8-byte
// elements), four alternations: 1.36-1.83x on one thread, 1.02-1.67x on two (0.26-0.44 -> 0.37-0.80
// of memcpy). Such runs of 16 elements stay AVX-512 (its 8-way kernel beat the AVX2 one there,
// 0.54-0.85x). And 8-way de-interleaves of 2-byte lanes in runs of 16, a vector per way too, which
// the AVX2 kernel transposes as 8 x 8 words (d2s channels-last K = 3 CRD b2 C16 of 2-byte elements
// at 64 KiB and 1 MiB, gather before): 1.45-2.35x on one thread, 1.05-1.83x on two (0.26-0.43 ->
// 0.39-0.71 of memcpy), two A/Bs of two alternations; for 1- and 4-byte lanes the AVX2 plan went
// both ways. Both 8-way cases hold where the output streams too (d2s channels-last K = 3 CRD b2 C16
// of 2-byte and C4 of 8-byte elements, the VBMI gather streaming its strips before): 1.26-1.56x at
// 16 MiB (0.42-0.46 -> 0.60-0.64 of memcpy), 1.05-1.13x at 256 MiB, one and two threads, two
// alternations. On a Zen 4 (family 19h, model 11h, 2 vCPUs) these rules and the ones below, against
// none: the grid cells they change, the plans alternating per grid run, five rounds at 64 KiB and
// 1 MiB (three at 16 MiB). Unstaged shuffles taking the AVX2 plan (40 / 50 cells at 64 KiB /
// 1 MiB): 1.21x / 1.10x on one thread (median 0.71 -> 0.86, 0.79 -> 0.85 of memcpy), 1.23x / 1.09x
// on two, the least 0.81x (3-way interleaves of 8-byte lanes at 1 MiB on two threads); where a VBMI
// gather had replaced them (7 / 4 cells) 1.71x / 1.74x on one thread, 1.57x / 1.54x on two (0.39 ->
// 0.65 of memcpy); the 2 vector-per-way cells 1.08x / 1.21x at 16 MiB, 1.24x / 1.14x at 256 MiB
// (three rounds).
bool loses_to_avx2_on_amd(const permute_plan& plan) {
  const shuffle_tile* const shuffle = own_avx512_shuffle(plan);
  if (shuffle == nullptr || shuffle->segment_copy.copy != nullptr) return false;
  const std::size_t ways = shuffle->offsets.size();
  const bool vector_per_way = ways == 8 && !shuffle->interleave &&
                              shuffle->run.extent * static_cast<std::int64_t>(plan.width) == 32 &&
                              (plan.width == 8 || plan.width == 2);
  return vector_per_way || (!output_streams(plan) && plan.width == 8 && (ways == 3 || ways == 9));
}

// AVX-512 interleaves that lose to the AVX2 level's plan on a Zen 5 (family 1Ah, model 2, 2 vCPUs,
// 32 MiB L3) where the output is larger than the cache but not far past it (12-64 MiB). Measured
// on the grid cells each changes, each alone in alternate processes of regrid bench, twice, op
// throughput on one / two threads; found by two whole 16 MiB grids per level, whose other
// classes of shuffle favoured AVX-512 or went both ways.
// - Streamed unstaged 2-way interleaves of 1-4 KiB runs (output rows of 2-8 KiB: d2s NCHW and
//   NCHW_VECT_C b2), under 40 MiB: 12 MiB (16 cells) 1.34x / 1.79x, 16 MiB (27) 1.27x / 1.69x
//   (mean ratio to memcpy 0.81 -> 0.92 / 0.74 -> 0.99; d2s NCHW DCR b2 C16 of 4-byte elements
//   1.83x), 24 MiB (25) 1.12x / 1.11x, 32 MiB (25) 1.07x / 1.01x, 48 MiB (22) 0.99x / 0.92x, just
//   under 64 MiB (10) 0.98x on one thread. In the grid at 16 MiB, runs of 4-8 KiB or under 1 KiB
//   went the other way (0.65-0.78x with AVX2, two grid runs per level); d2s NCHW CRD b2 C4 of bytes
//   tied at 1 and 4 MiB, and far past the cache its AVX-512 plan ran 1.6x the AVX2 one (256 MiB).
//   At 16 MiB that cell's AVX-512 kernel with ordinary stores moved 51-54 GB/s, streaming 42, the
//   AVX2 one 66: not the stores alone.
// - Staged 8-way interleaves of bytes (d2s channels-first K = 3 b8, d2s NCHW b8 C16 / C64): 12 MiB
//   (2 cells) 1.16x / 0.99x, 16 MiB (4) 1.59x / 1.45x (d2s CF-K3 b8 C16 of bytes 0.21-0.26 ->
//   0.44-0.56 of memcpy), 24 MiB (12) 1.24x / 1.15x, 32 MiB (6) 1.23x / 1.25x, 48 MiB (8) 1.17x /
//   1.19x, just under 64 MiB (2) 1.15x / 1.16x. At 1 MiB they went both ways (0.89-1.21x). At
//   16 MiB on one thread the AVX-512 plan of d2s CF-K3 b8 C16 of bytes ran at 10-15 GB/s in 8 of
//   10 processes and 28-39 in the other 2, the AVX2 one at 22-41 in all 10 (four grid runs and
//   the A/B above); the C3 cells spread alike at either level (16-40 GB/s).
constexpr std::int64_t min_zen5_avx2_pair_interleave_run_bytes = 1024;
constexpr std::int64_t max_zen5_avx2_pair_interleave_run_bytes = 4096;
constexpr std::int64_t max_zen5_avx2_pair_interleave_output_bytes = std::int64_t{40} << 20;
bool loses_to_avx2_on_zen5(const permute_plan& plan) {
  const shuffle_tile* const shuffle = own_avx512_shuffle(plan);
  if (shuffle == nullptr || !shuffle->interleave || !output_streams(plan) || far_past_the_cache(plan)) return false;
  const std::size_t ways = shuffle->offsets.size();
  if (shuffle->segment_copy.copy != nullptr) return ways == 8 && plan.width == 1;
  const std::int64_t run_bytes = way_row_bytes(plan);
  return ways == 2 && shuffle->repeat.streaming && plan.total_bytes < max_zen5_avx2_pair_interleave_output_bytes &&
         run_bytes >= min_zen5_avx2_pair_interleave_run_bytes && run_bytes < max_zen5_avx2_pair_interleave_run_bytes;
}

// AMD's counterpart of stages_where_avx2_segments_win_on_intel: staged AVX-512 shuffles whose
// problem the AVX2 level walks in place lose to that on AMD's Zen 4 and Zen 5 cores too, for the
// same ways and lanes and for 3-way de-interleaves of 4- and 8-byte lanes, 3-way interleaves of
// 4-byte lanes and 2-way de-interleaves of 8-byte lanes, except where each way's piece of a segment
// is under 8 bytes or a de-interleave's output streams. Measured on a Zen 5 (family 1Ah, 2 vCPUs):
// the grid cells whose plan this changes (141 / 106 / 53 at 64 KiB / 1 MiB / 16 MiB), old and new
// plans alternating per grid run, five rounds (three at 16 MiB): 1 thread 1.14x / 1.10x / 1.32x
// (median 0.40 -> 0.44, 0.57 -> 0.61, 0.35 -> 0.45 of memcpy), 2 threads 1.07x / 1.14x at 64 KiB /
// 1 MiB. Left out, from the same A/B: pieces under 8 bytes, where the in-place walk fell to 0.22x
// (d2s CF-K3 DCR b8 C16 of 1- and 2-byte elements at 64 KiB, whose calls write 16- or 32-byte
// segments of lines other calls finish) and to 0.54-0.81x elsewhere; de-interleaves whose output
// streams (4 ways of 1- and 2-byte lanes, 0.69-0.83x). Intel's other rule (loses_to_avx2_on_intel)
// does not carry over whole: 1.01x over its 60-66 cells, 3-way interleaves of 2-byte lanes falling
// to 0.69x (see loses_to_avx2_on_amd). On a Zen 4, which runs 512-bit operations as two 256-bit
// halves, the staging loses by more: the A/B of loses_to_avx2_on_amd, the staged cells this rule
// and stages_where_avx2_direct_wins_on_amd change (141 / 106 / 17 at 64 KiB / 1 MiB / 16 MiB):
// 1.58x / 1.43x / 1.17x on one thread (median 0.47 -> 0.77 and 0.48 -> 0.70 of memcpy at 64 KiB /
// 1 MiB), 1.30x / 1.37x / 1.17x on two; the least 0.76x (two threads at 64 KiB), 0.75-0.81x at
// 16 MiB (4-way interleaves of bytes). At 256 MiB (35 cells, three rounds) 1.17x / 1.05x on one /
// two threads, the least 0.64x (3- and 4-way interleaves of 8-byte lanes, 0.98-1.01x over their 8).
// On a Zen 4, 4- and 8-way de-interleaves of 4-byte lanes too (which Intel's cores keep staged),
// since the AVX2 level moves those lanes by in-register transposes (unpacks and 128-bit lane
// swaps): the grid cells this changes (s2d channels-first K = 3 b4 / b8, NCHW and NCHW_VECT_C b4
// / b8 of 3-64 channels, channels-last K = 3 and NHWC CRD of 4 channels), both plans in one
// process, each cell alone (bench/plan_ab, both orders), one / two threads: 32 cells of 64 KiB
// 1.44x / 1.17x (1.02-1.91x), 22 of 1 MiB 1.37x / 1.37x (1.02-2.13x; s2d channels-first K = 3 DCR
// b8 C3 of 4-byte elements 0.47 -> 0.82 of memcpy), 7 of 16 MiB (planned for the cache) 1.17x /
// 1.15x (0.97-1.29x), 2 of 256 MiB 1.24x / 1.22x. And 2-way de-interleaves of 1-, 2- and 4-byte
// lanes where the AVX2 level walks them in place (s2d channels-first K = 3 and NCHW b2 of few
// channels or of many bytes): 9 cells of 64 KiB 1.30x / 1.29x (0.89-1.63x), 6 of 1 MiB 1.20x /
// 1.25x (1.15-1.31x). Not measured on a Zen 5. And on a Zen 4 de-interleaves whose output streams
// short of far past the cache take the segments too, for 4 ways and for 2 ways of bytes (the
// loss the exception above records was a Zen 5's): the 20 cells of 16 MiB this changes (s2d
// channels-first K = 3 b2 C64 and b4, channels-last K = 3 and NHWC CRD of 4 channels), each alone
// (bench/plan_ab, both orders), 1.20x / 1.21x on one / two threads (0.93-1.47x; s2d channels-last
// K = 3 CRD b3 C4 of 8-byte elements 0.30 -> 0.43 of memcpy). Far past the cache not measured.
bool stages_where_avx2_segments_win_on_amd(const permute_plan& plan) {
  if (!plan.shuffle || plan.shuffle->segment_copy.copy == nullptr || plan.shuffle->transposes) return false;
  const shuffle_tile& shuffle = *plan.shuffle;
  if (shuffle.run.extent * static_cast<std::int64_t>(plan.width) < 8) return false;
  const std::size_t ways = shuffle.offsets.size();
  const bool zen4 = runtime::planning_core_kind() == runtime::core_kind::amd_zen4;
  if (!shuffle.interleave && output_streams(plan)) {
    return zen4 && !far_past_the_cache(plan) && (ways == 4 || (ways == 2 && plan.width == 1));
  }
  if (stages_where_avx2_segments_win_on_intel(plan)) return true;
  if (shuffle.interleave) return ways == 3 && plan.width == 4;
  if (((ways == 4 || ways == 8) && plan.width == 4) || (ways == 2 && plan.width <= 4)) return zen4;
  return (ways == 3 && plan.width >= 4) || (ways == 2 && plan.width == 8);
}

// Staged AVX-512 interleaves that stream a destination group (take_destination_group) keep their
// plan on AMD's cores where the rules above would take the AVX2 level's in-place walk of segments,
// for elements of 2 bytes or more in groups of up to 64 positions, below 64 MiB. Same-run A/B
// there, the 36 cells of the 16 MiB grid this changes (d2s channels-first K = 3 b4 / b8,
// channels-last K = 3 CRD b3-b8 of 3-4 channels), two alternations: 1.38x / 1.22x on one / two
// threads (0.98-2.6x / 0.77-2.3x; d2s channels-first K = 3 CRD b8 C16 of 4-byte elements 0.44 ->
// 0.70 of memcpy). Bytes went both ways (0.51-1.44x over 20 cells), as did groups of over 100
// positions (d2s NHWC CRD b8 of 4-byte elements, 0.63-1.32x); at 256 MiB the segments won 6 of the
// 7 cells it would change (0.69-0.93x, and 1.50x for channels-last K = 3 CRD b8 C3 of 8-byte
// elements).
constexpr std::int64_t max_grouped_positions_over_avx2_segments = 64;

// The plan streams a destination group below 64 MiB, where the AMD rules keep it.
bool groups_within_reach(const permute_plan& plan) {
  return plan.shuffle && plan.shuffle->destination_group.extent > 1 && !far_past_the_cache(plan);
}

bool streams_grouped_on_amd(const permute_plan& plan) {
  return groups_within_reach(plan) &&
         plan.shuffle->destination_group.extent <= max_grouped_positions_over_avx2_segments && plan.width >= 2;
}

// Staged 2-way AVX-512 interleaves whose output streams lose on AMD's cores to the AVX2 level's
// plan where that plan interleaves in place, unstaged and unsegmented (it takes both halves of each
// output row into one call, whose rows then stream whole; the staged one writes every other row).
// Measured on a Zen 5 (family 1Ah, 2 vCPUs), same binary, two alternations: the 14 grid cells of
// 16 MiB this changes (d2s channels-first K = 3 DCR and CRD b2 of 1-, 2- and 4-byte elements),
// 1.36x / 1.44x on one / two threads (10 cells 1.1-2.1x, d2s CF-K3 DCR b2 C4 and C16 of bytes
// 0.77-1.0x); at 256 MiB only C64 of bytes changes, CRD 1.61-1.69x, DCR 0.70-0.79x. The same A/B
// for 4 ways went both ways (0.57-1.60x over 10 cells) and is left out. Below 64 MiB, staged plans
// that stream a destination group (take_destination_group) keep it: same-run A/B on a Zen 5, the 14
// such cells of the 16 MiB grid, four alternations: 1.33x / 1.00x on one / two threads, consistent
// per cell (1T 0.90-2.23x, 2T 0.76-1.69x: the cells where the AVX2 plan ran at 0.3-0.45 of memcpy
// gained on both, e.g. d2s channels-first K = 3 CRD b2 C16 of 2-byte elements 0.33 -> 0.95, those
// where it ran at 0.5-0.7 lost 0.76-0.87x on two threads). At 256 MiB the two such cells split (C64
// of bytes: DCR 1.82x, CRD 0.80x) and keep the AVX2 plan.
bool stages_where_avx2_direct_wins_on_amd(const permute_plan& plan) {
  return plan.shuffle && plan.shuffle->segment_copy.copy != nullptr && !plan.shuffle->transposes &&
         plan.shuffle->interleave && plan.shuffle->offsets.size() == 2 && output_streams(plan) &&
         !groups_within_reach(plan);
}

// Staged AVX-512 shuffles of 2-4 ways whose problem the AVX2 level shuffles in place (unstaged and
// unsegmented: its vectors, half as long, fit the runs) lose to that on a Zen 4, which runs each
// 512-bit permute as two 256-bit halves and so gains nothing from the longer vectors that the
// staging pays for, below 64 MiB. Measured on a Zen 4 (family 19h, model 11h, 2 vCPUs): the grid
// cells this changes (60 / 60 / 94 at 64 KiB / 1 MiB / 16 MiB, interleaves of 2-4 ways and 2- and
// 4-way de-interleaves in the cache, 3-way de-interleaves too where the output streams), the plans
// alternating per grid run, five rounds (three at 16 MiB): 1 thread 1.38x / 1.28x / 1.10x (median
// 0.46 -> 0.68 and 0.50 -> 0.67 of memcpy at 64 KiB / 1 MiB), 2 threads 1.37x / 1.35x / 1.42x; the
// least 0.80x (d2s channels-first K = 3 DCR b2 C1 of 8-byte elements at 64 KiB on two threads) and
// 0.60-0.94x at 16 MiB on one thread (4-way interleaves of 4- and 8-byte lanes, 3-way
// de-interleaves of bytes). 8- and 16-way interleaves, which the same A/B over every staged plan
// whose AVX2 plan is direct had gain at 64 KiB (1.26-1.88x), lost at 1 MiB (0.39-1.06x); past
// 64 MiB, where the direct calls read the source in b passes (see far_past_the_cache), it is not
// measured.
bool stages_where_avx2_direct_wins_on_zen4(const permute_plan& plan) {
  return plan.shuffle && plan.shuffle->segment_copy.copy != nullptr && !plan.shuffle->transposes &&
         plan.shuffle->offsets.size() <= 4 && !far_past_the_cache(plan);
}

// Staged AVX-512 interleaves of more than 4 ways, in the cache, lose on a Zen 4 to the AVX2
// level's plan for the same problem where that interleaves unstaged in the source's order
// (source_order_interleave_repeat: runs of 64 bytes or more) or stages too. Each of the cells this
// changes planned both ways in one process, alternating 15-31 times, then in the other order.
// Unstaged in the source's order (d2s NCHW b8 of 3-16 channels, whose runs of 64-127 bytes the
// AVX-512 level stages): the 15 of the 1 MiB grid 1.37x / 1.37x on one / two threads (d2s NCHW
// 1.17-1.52x; d2s channels-last K = 3 CRD b8 C16 of 8-byte elements 0.86-0.88x), the 5 of 64 KiB
// 1.47x / 1.62x, at 256 KiB 1.03x. Staged (d2s channels-first K = 3 and NCHW b8, channels-last
// K = 3 CRD b3 / b4 C16: 16 ways): 64 cells over 64 KiB - 1 MiB, one thread 0.95-1.74x (median
// about 1.2x), two 0.75-1.48x (d2s NCHW DCR b8 of bytes 0.75-0.89x). Left out: AVX2 plans that walk
// in the destination's order (runs under 64 bytes: 64 source streams per call, 0.4x), and its
// segmented ones, which went both ways (d2s channels-first K = 3 DCR b8 C16 of 1- and 2-byte
// elements, segments of 16-32 bytes, 0.63-0.73x at 64-128 KiB, 1.13-1.22x at 256-512 KiB).
bool stages_interleave_where_avx2_wins_on_zen4(const permute_plan& plan) {
  return plan.shuffle && plan.shuffle->segment_copy.copy != nullptr && !plan.shuffle->transposes &&
         plan.shuffle->interleave && plan.shuffle->offsets.size() > 4 && !output_streams(plan);
}

// AVX-512 shuffles that lose to the AVX2 level's plan for the same problem, whatever form that
// takes (unstaged, staged or segmented), on a Zen 4 in the cache: interleaves of 16 ways (staged
// ones of 1- and 2-byte lanes, unstaged ones of lanes other than 8 bytes), of 4 ways of bytes, and
// unstaged 8-way ones of 1- and 16-byte lanes, 9-way ones of 2-byte lanes and 3-way ones of 4-byte
// lanes; staged de-interleaves of 4 and 8 ways of 1- and 2-byte lanes. Zen 4 runs each 512-bit
// permute as two 256-bit halves, so the AVX-512 kernels' extra cross-lane steps and longer tails
// buy nothing there. Found by an A/B of the whole grid under REGRID_MAX_ISA=avx2 against these
// plans by category of plan (ways, lane width, staged or not); then the cells this changes (42 /
// 47 unstaged, 60 / 53 staged at 64 KiB / 1 MiB), the plans alternating per grid run, five rounds,
// on a Zen 4 (family 19h, model 11h, 2 vCPUs): unstaged 1.18x / 1.13x on one thread (median 0.71
// -> 0.87 and 0.80 -> 0.83 of memcpy), 1.10x / 1.10x on two; staged 1.13x / 1.10x on one, 1.09x /
// 1.07x on two; the least 0.74x (a staged 4-way interleave of bytes on two threads at 64 KiB). At
// 4 MiB, the binaries before and after alternating, four rounds: the 93 cells it changes 1.10x /
// 1.10x on one / two threads (median 0.54 -> 0.62 of memcpy, the least 0.92x). Where the output
// streams, the AVX2 plans lost (16 MiB, three rounds: 0.44-0.96x per category), so those keep
// theirs; only the 16-way staged interleaves of 1- and 2-byte lanes won there (1.07-1.17x over 8
// cells, the least 0.63x), left to the same limit. Unstaged 3-way interleaves of 4-byte lanes
// joined later: each of the 22 / 13 such cells of the 1 MiB / 64 KiB grid planned both ways in one
// process, alternating 15 / 31 times, then in the other order: 1.05x / 1.08x on one thread (d2s
// NCHW b3 C16 1.19-1.20x, b3 C1 at 64 KiB 1.27-1.32x; the least 0.98x), 1.06x / 1.05x on two.
// Since then the AVX2 level moves 4- and 8-byte lanes by in-register transposes (unpacks and
// 128-bit lane swaps), and its plans also win for unstaged 8-way interleaves of 4- and 8-byte
// lanes and unstaged 2-, 4- and 8-way de-interleaves of 8-byte lanes in runs under 4 KiB (a single
// run of the whole tensor, s2d channels-first K = 1 b8, went 0.5-0.7x). Each grid cell this
// changes planned both ways in one process, alone (bench/plan_ab, both orders), one / two threads:
// the interleaves (d2s NCHW, NCHW_VECT_C and channels-first K = 1 b8, s2d channels-last K = 3 CRD b2
// C16 / C64, NHWC b8 C1) 1.01-1.43x / 0.98-1.14x at 64 KiB and 0.94-1.71x / 0.95-1.43x at 1 MiB
// (d2s NCHW_VECT_C DCR b8 C3 0.46 -> 0.79 of memcpy); the de-interleaves (s2d NCHW, channels-first
// and channels-last K = 3, d2s NHWC and channels-last K = 3 CRD, s2d channels-first K = 1 CRD of
// several channels at 64 KiB) 0.99-1.60x / 0.98-1.34x at 64 KiB
// and 0.96-1.52x / 0.94-1.48x at 1 MiB (s2d channels-first K = 3 DCR b4 C4 0.70 -> 0.98); over
// the 64 / 94 cells of 64 KiB / 1 MiB this changes, 1.16x / 1.06x and 1.12x / 1.09x. So do
// unstaged 4-way interleaves of 8-byte lanes in runs under 4 KiB (d2s NCHW b4, s2d channels-last
// K = 3 b2 C1 / C4, NHWC CRD b2 C16 / C64 and b4 C1): the 11 / 15 cells of 64 KiB / 1 MiB, alone,
// both orders, 1.30x / 1.08x (0.98-1.51x) and 1.11x / 1.09x (1.01-1.42x); longer runs (d2s
// channels-first K = 1 b4, one run per channel) went 0.83-1.15x and keep theirs.
constexpr std::int64_t max_avx2_eight_byte_lane_run_bytes_on_zen4 = 4096;
bool loses_to_avx2_on_zen4(const permute_plan& plan) {
  if (!plan.shuffle || plan.shuffle->transposes || output_streams(plan)) return false;
  const shuffle_tile& shuffle = *plan.shuffle;
  const std::size_t ways = shuffle.offsets.size();
  const bool staged = shuffle.segment_copy.copy != nullptr;
  const bool short_runs =
      shuffle.run.extent * static_cast<std::int64_t>(plan.width) < max_avx2_eight_byte_lane_run_bytes_on_zen4;
  if (!shuffle.interleave) {
    if (!staged && plan.width == 8 && short_runs && (ways == 2 || ways == 4 || ways == 8)) return true;
    return staged && plan.width <= 2 && (ways == 4 || ways == 8);
  }
  if (shuffle.level != isa::avx512) return false;  // the VBMI byte interleaves won
  if (ways == 16) return staged ? plan.width <= 2 : plan.width != 8;
  if (ways == 4 && plan.width == 1) return true;
  const bool eight_way_lanes = plan.width == 1 || plan.width == 4 || plan.width == 8 || plan.width == 16;
  return !staged && ((ways == 8 && eight_way_lanes) || (ways == 4 && plan.width == 8 && short_runs) ||
                     (ways == 9 && plan.width == 2) || (ways == 3 && plan.width == 4));
}

// Whether a streamed de-interleave's ways' rows continue one another so that b_way can stream
// each through a line sink (b_way_sunk_rows along the inner repeat, b_way_sunk_row_blocks along
// the outer one), the plan's sinks_rows aside.
bool rows_fit_line_sinks(const permute_plan& plan) {
  const shuffle_tile& tile = *plan.shuffle;
  const std::int64_t row = way_row_bytes(plan);
  const auto ways = static_cast<std::int64_t>(tile.offsets.size());
  return ways <= max_sunk_deinterleave_ways &&
         (tile.repeat.inner.dst_stride == row ||
          (tile.repeat.outer.dst_stride == row && ways * tile.repeat.inner.extent <= tile.repeat.most_sunk_rows));
}

// The short de-interleave rows that streams_short_rows_through_line_sinks (below) streams far past
// the cache: on a Zen 5 those of 3- and 4-way de-interleaves stream from streaming_output_bytes on,
// where the output could still stay in its 32 MiB L3. There, with ordinary stores, one thread's
// rows ran at 0.3-0.7 of memcpy (s2d channels-first K = 3 b3 / b4 and NCHW b3 / b4, rows of
// 100-840 bytes off lines). Family 1Ah model 2 (2 vCPUs), the s2d grid cells this changes at each
// size, the two plans in alternate processes of regrid bench, twice, op throughput, geometric mean,
// one / two threads, 3-way / 4-way: 12 MiB 1.53x / 0.92x and 1.34x / 0.84x (21 / 8 cells), 16 MiB
// 1.79x / 1.33x and 1.39x / 0.99x (25 / 16), 24 MiB 1.75x / 1.44x and 1.49x / 1.31x (35 / 16),
// 32 MiB 1.58x / 1.30x and 1.29x / 1.14x (30 / 10), 48 MiB 1.48x / 1.53x and 1.33x / 1.49x (26 /
// 18); on one thread none slower. On two threads below 16 MiB, where the output written with
// ordinary stores stays in the L3 from call to call, streaming lost: there a call on more than one
// thread keeps ordinary stores (streams_sunk_rows_on_one_thread_only). The binaries before and
// after, the 41 cells of the 16 MiB grid, alternate processes, twice: 1.65x on one thread (1.22-2.20x;
// mean ratio to memcpy 0.48 -> 0.85), 1.27x on two for the 26 of 16 MiB or more (3 under 0.95x),
// the other 15 as before. 8-way ones went both ways: 0.80-1.34x on one thread, 0.71-1.41x on two
// (down to 0.48x at 32-48 MiB). So did 2-way ones, 0.95-1.22x and 0.53-1.42x, which the rule
// below takes where they won.
constexpr std::int64_t min_multithread_sunk_output_bytes = std::int64_t{16} << 20;
// 2-way ones stream from 16 MiB on, on more than one thread from 32 MiB on. Same machine, the s2d
// cells of 16-32 MiB this changes (s2d channels-first K = 3 b2 of C1-C16, NCHW b2 C64 of 8-byte
// elements; rows of 102-728 bytes off lines), the two plans in alternate processes of regrid bench,
// twice, op throughput, geometric mean, one / two threads: 16 MiB 1.22x / - (10 cells, each
// 1.10-1.40x; mean ratio to memcpy 0.68 -> 0.93), 20 MiB 1.23x / 0.66x (16), 24 MiB 1.15x / 0.88x
// (19), 32 MiB 1.10x / 1.08x (16; one 0.90x on one thread, none under 1.00x on two); 48 MiB 1.08x
// / 1.42x in the A/B above; at 12 MiB that A/B had them 0.95x on one thread. The binaries before
// and after, the 10 cells of the 16 MiB grid, twice: 1.32x on one thread (1.22-1.52x; mean ratio
// 0.71 -> 0.97), 1.03x on two, where the plan is as before.
constexpr std::int64_t min_two_way_sunk_output_bytes = std::int64_t{16} << 20;
constexpr std::int64_t min_multithread_two_way_sunk_output_bytes = std::int64_t{32} << 20;
bool sinks_short_rows_into_cache_sized_outputs(const permute_plan& plan, std::int64_t ways) {
  return runtime::planning_core_kind() == runtime::core_kind::amd_zen5 &&
         (ways == 3 || ways == 4 || (ways == 2 && plan.total_bytes >= min_two_way_sunk_output_bytes));
}

// Far past the cache, unstaged AVX-512 de-interleaves whose ways' rows are too short to stream one
// by one (under streamed_deinterleave_run_bytes) and start off cache lines stream them all the
// same where the rows continue one another along the call's repeat, each way (and inner position)
// as one output through a line sink (rows_fit_line_sinks). With ordinary stores each line of a
// 256 MiB output was read from memory before it was written. s2d channels-first K = 3 walks so
// (each call a source row block of b rows, whose ways go to b x b planes), and s2d NCHW b8 of
// 2-byte elements. On an Intel Xeon with AMX (2 vCPUs), each grid cell this changes planned both
// ways in one process (bench/plan_ab, three alternations, both orders): at 256 MiB the 80 cells
// 1.19x / 1.17x on one / two threads, every one faster by over 4% on one thread (1.06-1.58x;
// s2d channels-first K = 3 CRD b8 C4 of 8-byte elements 0.33 -> 0.53 of memcpy, b2 of bytes
// 1.27x), 77 on two, none slower; into outputs 16 bytes off a line (--dst-offset 16) half of
// them 1.16x, all faster; at the avx512 level without VBMI 40 of them 1.15x (31 faster, none
// slower; its byte rows do not join and keep ordinary stores); regrid bench, the two binaries in
// alternate processes, twice: the 74 channels-first K = 3 cells 1.19x on one thread (mean ratio
// 0.52 -> 0.61), the 6 NCHW ones 1.05-1.30x, the cells around them 1.00x. At 64 MiB the 82 cells 1.04x
// (31 faster, 5 slower: 8-way ones, 0.86-0.93x). At 16 MiB, where the output stays in this
// Xeon's last-level cache, the same lost 0.65x (61 of 81 cells slower). Unmeasured on AMD's cores.
// Rows under a line, and wide lanes (16 and 32 bytes), have no sinks (b_way); staged plans stream
// their far rows already.
bool streams_short_rows_through_line_sinks(const permute_plan& plan) {
  const shuffle_tile& tile = *plan.shuffle;
  const auto ways = static_cast<std::int64_t>(tile.offsets.size());
  return !tile.interleave && !tile.repeat.streaming && !tile.transposes && !tile.repeat.assembled &&
         tile.segment_copy.copy == nullptr && tile.level >= isa::avx512 && plan.width <= max_sunk_lane_bytes &&
         output_streams(plan) && (far_past_the_cache(plan) || sinks_short_rows_into_cache_sized_outputs(plan, ways)) &&
         way_row_bytes(plan) >= min_sunk_deinterleave_row_bytes && rows_fit_line_sinks(plan);
}

// Where streams_short_rows_through_line_sinks streams rows into an output under
// min_multithread_sunk_output_bytes (2-way ones: min_multithread_two_way_sunk_output_bytes): on
// one thread only (shuffle_tile::streams_on_one_thread_only).
bool streams_sunk_rows_on_one_thread_only(const permute_plan& plan) {
  const bool two_ways = plan.shuffle->offsets.size() == 2;
  return !far_past_the_cache(plan) &&
         plan.total_bytes < (two_ways ? min_multithread_two_way_sunk_output_bytes : min_multithread_sunk_output_bytes);
}

// Gathers build each chunk of a strip at all of its periods in turn, an order the hardware
// prefetchers do not follow; far past the cache each strip prefetches the next one's lines. Intel
// Xeon with AMX (2 vCPUs), each grid cell planned as a gather, with and without the prefetch, in
// one process (bench/plan_ab, both orders; speedup of the prefetch): AVX2 gathers (19 cells) 1.15x
// at 64 MiB, 1.13x / 1.12x at 256 MiB on one / two threads; VBMI gathers (125-128 cells) 1.05x at
// 64 MiB, 0.99x at 256 MiB on one and two threads. At 16 MiB, where the source stays in the cache,
// the prefetches cost: 0.82x / 0.79x (VBMI / AVX2). Until now GCC had deleted them (see
// kernels/prefetch.hpp), so that no earlier measurement of them measured a prefetch.
// On a Zen 5 (family 1Ah, model 2, 2 vCPUs, 32 MiB L3) they prefetch from 14 MiB on too, where
// each row is one strip of its own (not grouped, not across rows), over a program whose period
// holds 8 blocks or more (space_to_depth NHWC and channels-last K = 3 of 9-432-byte output pixels:
// b3 of 1-16 channels, b2 of 3). The grid's cells this changes, the two plans in alternate
// processes of regrid bench, twice, op throughput, geometric mean, one / two threads: 12 MiB 0.98x /
// 0.98x (20 cells), 14 MiB 1.17x / 1.03x (36; the least 0.80x), 16 MiB 1.27x / 1.08x (36; the
// least 0.94x; s2d channels-last K = 3 CRD b3 C1 of 8-byte elements 1.71x), 24 MiB 1.50x / 1.39x,
// 32 MiB 1.45x / 1.38x, 48 MiB 1.51x / 1.43x (36 each). Prefetching every gather from 12 MiB lost
// (0.97x / 0.94x over the 148 gather cells at 16 MiB, down to 0.58x, where a period holds one or
// two blocks or the rows share a strip).
constexpr std::int64_t min_zen5_strip_prefetch_output_bytes = std::int64_t{14} << 20;
constexpr std::int64_t min_zen5_strip_prefetch_period_blocks = 8;
bool gather_groups_rows(const permute_plan& plan);  // below, with the gather's description
bool gathers_prefetch_next_strip(const permute_plan& plan) {
  if (!plan.gather) return false;
  if (far_past_the_cache(plan)) return true;
  const gather_tile& tile = *plan.gather;
  return runtime::planning_core_kind() == runtime::core_kind::amd_zen5 && output_streams(plan) &&
         plan.total_bytes >= min_zen5_strip_prefetch_output_bytes && !tile.program->single_block &&
         !tile.rows_share_source && !gather_groups_rows(plan) &&
         tile.program->period_dst_bytes >= min_zen5_strip_prefetch_period_blocks * tile.block_bytes;
}

// Long rows whose strips stream go in strips of 4 KiB (see streamed_long_row_strip_bytes in
// gather_avx512vbmi.cpp), which hold only 2-7 periods of 576-1728 bytes: each strip sets every
// chunk group up again for so few. On a Zen 5 (family 1Ah, model 2, 2 vCPUs, 32 MiB L3) such rows
// go in strips of 8 KiB where the period exceeds 512 bytes and the output is under 32 MiB. The 24
// grid cells of streamed long rows with such periods (s2d NHWC b3 of 1-16 channels and b8 C3 of
// 4-byte elements, s2d channels-last K = 3 b4 / b8 C3), both strips in one process (bench/plan_ab,
// 7-21 samples, both orders), one thread: 12 MiB 1.03x (0.95-1.33x), 16 MiB 1.13x (0.99-1.23x;
// s2d NHWC CRD b3 C3 of bytes 0.48 -> 0.56 of memcpy; as chosen here, another run 1.07-1.35x),
// 32 MiB 1.04x (0.89-1.43x), 48 MiB 0.98x, 64 MiB 0.96x, 256 MiB 0.96x (0.88-1.00x); two threads,
// 16 MiB 1.06x (0.99-1.19x), 32 MiB 0.96x. Strips of 16 KiB gained more at 16 MiB (1.14x) but
// lost from 32 MiB (0.82x at 256 MiB) and at 12 MiB (0.86x for s2d NHWC DCR b3 C16 of bytes),
// and for periods of 64-512 bytes at 16 MiB (s2d NHWC CRD b4 C4, b4 C16, b8 C4: 0.82-0.89x).
constexpr std::int64_t max_zen5_narrow_strip_period_bytes = 512;
constexpr std::int64_t zen5_last_level_cache_bytes = std::int64_t{32} << 20;
bool gathers_stream_wide_strips(const permute_plan& plan) {
  return plan.gather && runtime::planning_core_kind() == runtime::core_kind::amd_zen5 && output_streams(plan) &&
         plan.total_bytes < zen5_last_level_cache_bytes &&
         plan.gather->program->period_dst_bytes > max_zen5_narrow_strip_period_bytes;
}

// gather_tile::grouped_rows_bytes. A Zen 5 groups rows of up to 8 KiB, and of up to 16 KiB where
// its strips stream, short of far past the cache: calls of 2-16 KiB of rows whose strips hold a
// period and a part-period of each of 2-3 rows (d2s channels-last K = 3 CRD b2-b3 of 3-16
// channels: 792-byte rows at 12-16 MiB, 3 rows per call) set up each chunk for 2-6 chunks. Same-run
// A/B (bench/plan_ab, 2 KiB against this), every gather cell of the grid, one / two threads, the
// cells it groups: 64 KiB 1.08x / 1.05x (38 cells; rows of 2-4 KiB 1.18x, 4-8 KiB 1.06x, 8-16 KiB
// 0.98x), 1 MiB 1.06x / 1.02x (35; 8-16 KiB 0.97x, d2s NHWC CRD b2 C3 of 4-byte elements 0.92x),
// 4 MiB 1.02x (17), 16 MiB 1.29x / 1.22x (9; d2s channels-last K = 3 CRD b3 C3 of 2-byte
// elements 1.61x, 0.18 -> 0.30 of memcpy), 32 MiB 1.37x (9), the other gather cells 1.00x; at
// 256 MiB (5 cells, two runs, one and two threads) 0.99-1.015x, bytes 0.88-0.95x, hence not there.
// regrid bench, the rule and the default in alternate processes (a temporary switch), twice, the
// cells whose plan it changes, one / two threads: 64 KiB 1.12x / 1.07x (19 cells, the least
// 0.95x), 1 MiB 1.13x / 1.13x (19, the least 0.98x), 16 MiB 1.31x / 1.30x (7, 1.13-1.83x).
// Other CPUs are not measured and keep the default.
constexpr std::int64_t zen5_grouped_gather_rows_bytes = 8 * 1024;
constexpr std::int64_t zen5_grouped_streamed_gather_rows_bytes = 16 * 1024;
std::int64_t grouped_gather_rows_bytes_of(const permute_plan& plan) {
  if (runtime::planning_core_kind() != runtime::core_kind::amd_zen5 || far_past_the_cache(plan)) {
    return default_grouped_gather_rows_bytes;
  }
  const gather_tile& tile = *plan.gather;
  const std::int64_t row_bytes = tile.stream.extent * tile.block_bytes;
  return gather_streams_strips(plan, tile.program->period_dst_bytes, row_bytes)
             ? zen5_grouped_streamed_gather_rows_bytes
             : zen5_grouped_gather_rows_bytes;
}

// Streamed de-interleaves of 2-4 ways that are not staged prefetch their source into the L2 cache
// on Intel's cores far past the cache, where one thread's single read stream otherwise falls
// short of memory's speed: a loop of non-temporal 512-bit stores copying 256 MiB on an Intel
// Xeon with AMX (2 vCPUs) ran at 17.0 GB/s (read + written) alone, 22.2 with prefetches 8 KiB ahead
// (4 and 16 KiB: 21.1 and 22.2; into L1, 17.7-18.4), glibc's memcpy, which reads 4 pages at a time,
// 21.5. There each 256 MiB grid cell this changes planned both ways in one process (bench/plan_ab,
// three alternations, both orders): 2- and 4-way ones, 248 cells, 1.12x / 1.11x on one / two
// threads (176 / 174 consistently faster, 0 / 1 slower; 2-way ones of 8-byte lanes 1.21x); 3-way
// ones, 83 cells, 1.07x / 1.08x (none consistently slower). Staged ones do not use the loops that
// prefetch. Of more ways (up to 16), those whose vector steps cost more than a plain network
// prefetch too: rows off cache lines (each vector re-cut into lines) and ways not a power of two
// (chains of two-source permutes). The 256 MiB grid's 40 such cells (34 of 8 and 16 ways off
// lines, 6 of 9 ways), same A/B: 1.08x / 1.09x on one / two threads (34 / 36 consistently faster,
// none slower; 9 ways 1.08-1.17x). Those of 8 and 16 ways whose rows are on lines, which run at
// 0.8-0.93 of memcpy without, went both ways (83 cells: 1.01x, 13 slower by over 4%, the least
// 0.84x). On Intel's cores the prefetch runs 2 KiB ahead, not 8: the same A/B over the 453 cells of
// the 256 MiB grid that prefetch there, 1.03x / 1.04x (both orders) on one thread (167 faster by
// over 3% in both, 49 slower, the least 0.93x: d2s NHWC CRD b2 C1 of 2-byte elements; d2s NHWC
// DCR b2 / b4 C1 1.2x); over 100 of them 1.04x / 1.04x, on two threads 1.03x / 1.03x, at 64 MiB
// 1.02x / 0.99x; 4 KiB ahead 1.01x / 1.02x, 1 KiB 0.99x. A Zen 5 keeps 8 KiB (not measured there).
constexpr std::int64_t streamed_deinterleave_prefetch_bytes = 8192;
constexpr std::int64_t streamed_deinterleave_prefetch_bytes_on_intel = 2048;
constexpr std::size_t max_prefetching_deinterleave_ways = 4;
constexpr std::size_t max_prefetching_costly_deinterleave_ways = 16;

// Whether an AVX2 de-interleave prefetches the next run's source as it moves each run (see
// shuffle_repeat::prefetches_next_run): the source rows of s2d NCHW and NCHW_VECT_C, every b-th row
// of the input, are runs that the hardware's prefetchers did not follow from one to the next. On a
// Zen 3 (family 19h, model 1, 2 vCPUs, no AVX-512), the grid's s2d and d2s de-interleave cells
// planned with and without it in one process (bench/plan_ab, both orders, one thread), geometric
// means at 256 KiB / 1 MiB / 4 MiB / 16 MiB:
// - s2d NCHW 2-way 1.06x / 1.11x / 1.14x / 1.13x (36-40 cells each; b2 C3 of bytes at 1 MiB 0.45 ->
//   0.60 of memcpy), 4-way 1.05x / 1.11x / 1.08x / 1.03x, 8-way 1.01x / 1.04x / 1.05x / 1.12x, 3-way
//   1.00x / 1.01x / 1.01x / 1.04x;
// - s2d NCHW_VECT_C 2-way 1.11x / 1.16x / 1.16x / 1.26x, 4-way 1.10x / 1.11x / 1.06x / 1.05x;
// - channels-first K = 3, whose rows are seldom 512 bytes, and d2s NHWC / channels-last K = 3
//   de-interleaves, whose runs continue one another: 0.98x-1.02x per family;
// - all 643-665 de-interleave cells 1.007x / 1.013x / 1.016x / 1.021x.
// At 64 KiB, where the source is in L2 already, it lost (s2d NCHW 2-way 0.99x, NCHW_VECT_C 0.97x),
// hence min_next_run_prefetch_output_bytes. Far past the cache (256 MiB, 340 cells of s2d NCHW,
// NCHW_VECT_C and channels-first K = 3) the streamed calls do not prefetch (1.00x); prefetching
// their rows of ordinary stores as well changed nothing (1.00x). Before the limits in
// next_run_distances, runs of 256 bytes whose next one starts a run later lost (s2d NCHW b2 C64
// of 4-byte elements at 1 MiB, 0.83x), and runs continued by the next (d2s NHWC) 0.98x.
// The AVX-512 de-interleaves prefetch the same way. On a Zen 4 (2 vCPUs), the grid cells whose
// plans this changes, both plans in one process (bench/plan_ab, both orders), one / two threads:
// at 1 MiB s2d NCHW 1.05x / 1.06x (114 cells), NCHW_VECT_C 1.05x / 1.05x (18), the other layouts
// 0.996-1.014x (most of their runs are under 512 bytes or continued, and prefetch nothing); at
// 16 MiB 1.00-1.02x per layout. Timed alone, the s2d NCHW / NCHW_VECT_C cells that had moved most
// went 1.03-1.22x at 1 MiB and 0.95-1.38x at 16 MiB (b8 of 2-byte elements, 0.40 -> 0.55 of
// memcpy). The AVX-512 level's prefetch is not measured on Intel's cores or a Zen 5.
constexpr std::int64_t min_next_run_prefetch_output_bytes = std::int64_t{256} << 10;
bool deinterleaves_prefetch_next_run(const permute_plan& plan) {
  if (!plan.shuffle || plan.shuffle->interleave || plan.shuffle->level < isa::avx2) return false;
  const shuffle_tile& tile = *plan.shuffle;
  return tile.segment_copy.copy == nullptr && tile.segmented == nullptr &&
         plan.total_bytes >= min_next_run_prefetch_output_bytes;
}

// How far ahead a streamed de-interleave prefetches its source (0: it does not). On a Zen 5
// (family 1Ah, model 2, 2 vCPUs) the same A/B over the 453 cells this rule would change (three
// alternations, both orders): the 391 of 2-4 ways 1.00x / 1.02x on one / two threads (0.67x the
// least), so a Zen 5 leaves them; the 62 of more ways 1.12x / 1.14x (8 ways 1.04-1.13x, 16 ways of
// 16- and 32-byte lanes 1.34-1.54x; 7 under 0.96x, the least 0.81x), which it takes.
std::int64_t streamed_deinterleave_source_prefetch_bytes(const permute_plan& plan) {
  const runtime::core_kind cores = runtime::planning_core_kind();
  const bool intel = cores == runtime::core_kind::intel;
  if (!plan.shuffle || plan.shuffle->interleave || !plan.shuffle->repeat.streaming || !far_past_the_cache(plan) ||
      plan.shuffle->level < isa::avx512 || !(intel || cores == runtime::core_kind::amd_zen5)) {
    return 0;
  }
  const shuffle_tile& tile = *plan.shuffle;
  if (tile.segment_copy.copy != nullptr) return 0;
  const std::int64_t distance =
      intel ? streamed_deinterleave_prefetch_bytes_on_intel : streamed_deinterleave_prefetch_bytes;
  const std::size_t ways = tile.offsets.size();
  if (ways <= max_prefetching_deinterleave_ways) return intel ? distance : 0;
  const bool rows_off_lines = way_row_bytes(plan) % 64 != 0;
  const bool power_of_two = (ways & (ways - 1)) == 0;
  return ways <= max_prefetching_costly_deinterleave_ways && (rows_off_lines || !power_of_two) ? distance : 0;
}

// On Intel's cores de-interleave rows from 512 bytes on whose destinations do not all start on
// cache lines are re-cut into whole lines (realigned_deinterleave_run_bytes, 1024 elsewhere, where
// rows of 256-1023 bytes went both ways), and from 256 bytes on for lanes of 4 bytes or more and up
// to 8 ways: a store split across two lines costs Intel more. Intel Xeon with AMX (2 vCPUs), the
// grid cells whose de-interleave rows are of 512-1023 bytes, process against process, three
// alternations: 1.18x / 1.27x at 1 MiB on one / two threads (32 cells; s2d NCHW DCR b2 C1 of
// 2-byte elements, 724-byte rows, 0.61 -> 0.73 of memcpy; b3 C1 of 8-byte elements 0.58 -> 0.84),
// 1.09x at 64 KiB, 1.04x at 16 MiB (59 cells, 28 faster by over 4%, none slower). Rows of
// 256-511 bytes, bench/plan_ab both orders, 512 against 256 where lanes are 4 bytes or more:
// 1.07x / 1.17x at 64 KiB on one / two threads (one thread before the 8-way limit), 1.05x / 1.06x
// at 1 MiB, 1.04x at 16 MiB (9 faster, none slower); with 1- and 2-byte lanes 3-way ones lost
// (0.82-0.93x), and with more than 8 ways d2s CRD C64's 9-, 16- and 64-way ones 0.86-0.92x.
// At 256 MiB the rule re-cuts the rows of 38 cells that do not stream: 1.08x / 1.08x on one / two
// threads, bench/plan_ab both orders (18 / 15 faster by over 4%; 8 ways of 2-byte lanes 0.92x).
constexpr std::int64_t realigned_deinterleave_run_bytes_on_intel = 512;
constexpr std::int64_t realigned_wide_lane_deinterleave_run_bytes_on_intel = 256;
constexpr std::size_t min_realigned_short_row_lane_bytes = 4;
constexpr std::size_t max_realigned_short_row_ways = 8;
std::int64_t realigned_run_bytes_of(const permute_plan& plan) {
  const shuffle_tile& tile = *plan.shuffle;
  if (tile.interleave || tile.repeat.streaming || tile.level < isa::avx512 ||
      runtime::planning_core_kind() != runtime::core_kind::intel) {
    return realigned_deinterleave_run_bytes;  // streamed rows off lines are re-cut whatever their length
  }
  const std::int64_t from =
      plan.width >= min_realigned_short_row_lane_bytes && tile.offsets.size() <= max_realigned_short_row_ways
          ? realigned_wide_lane_deinterleave_run_bytes_on_intel
          : realigned_deinterleave_run_bytes_on_intel;
  // Plans whose rows it does not change keep the default (and their description).
  const std::int64_t row = way_row_bytes(plan);
  return row >= from && row < realigned_deinterleave_run_bytes ? from : realigned_deinterleave_run_bytes;
}

// On Intel's cores streamed de-interleaves whose ways' rows continue one another off cache lines
// go row by row (each row re-cut into lines, the line two rows share written with ordinary stores)
// instead of through a line sink per way (b_way_sunk_rows, b_way_sunk_row_blocks) where the rows
// are 2 KiB or more and the output is far past the cache. Intel Xeon with AMX (2 vCPUs), each
// 256 MiB grid cell whose plan sinks its rows, bench/plan_ab both orders, three alternations, by
// row length: 1-2 KiB 1.03x, 2-4 KiB 1.03-1.11x, longer 1.08-1.13x on one thread (s2d NCHW DCR b2
// C1 of 2-byte elements 0.66 -> 0.83 of memcpy); rows of 1 KiB or more on two threads 1.09x (71 of
// 129 faster by over 4%, 1 slower). Into outputs 16 bytes off a line (--dst-offset 16), rows of
// 2 KiB or more 1.09-1.16x, but 1-2 KiB ones lost (0.86x: under
// streamed_unaligned_deinterleave_run_bytes run_permute then writes them with ordinary stores).
// Shorter rows (s2d channels-first K = 3, 37 cells) lost 0.94x for rows of 256-511 bytes. At
// 16 MiB the sinks win: the 55 cells of 1 KiB rows or more, 0.96x without them.
constexpr std::int64_t min_unsunk_deinterleave_row_bytes_on_intel = 2048;
bool sinks_streamed_deinterleave_rows(const permute_plan& plan) {
  const shuffle_tile& tile = *plan.shuffle;
  if (tile.interleave || !tile.repeat.streaming || tile.level < isa::avx512 || !far_past_the_cache(plan) ||
      runtime::planning_core_kind() != runtime::core_kind::intel) {
    return true;
  }
  // Only plans that would sink their rows (b_way) change, and with them their description.
  return !rows_fit_line_sinks(plan) || way_row_bytes(plan) < min_unsunk_deinterleave_row_bytes_on_intel;
}

}  // namespace

namespace {

permute_plan plan_permute_at_every_level(std::span<const permute_axis> axes, std::size_t element_bytes) {
  permute_plan plan = plan_permute_unsplit(axes, element_bytes);
  // The rest of the planning (the AVX2 level's plans below included) is for the cache once this
  // switches it there.
  struct cache_planning {
    ~cache_planning() { planning_for_the_cache = false; }
  } restore_streaming;
  if (plans_streamed_deinterleaves_for_the_cache(runtime::planning_core_kind()) &&
      assembles_streamed_deinterleave(plan)) {
    planning_for_the_cache = true;
    plan = plan_permute_unsplit(axes, element_bytes);
  }
  // The avx512 level without VBMI has no gather of its own (its byte permutes stay in 128-bit
  // lanes, see select_shuffle). Where the AVX2 plan gathers, it takes that plan, unless its own
  // transposes in registers (the 8 x 8 tile of 8-byte elements, or a block-transposing shuffle),
  // which the AVX2 rules never weighed: AVX2 gathers 8-byte elements one at a time where it has no
  // such transpose. Measured on a Xeon with VBMI (Emerald Rapids) under REGRID_MAX_ISA=avx512: the
  // 97 grid cells this moves (every cell where AVX2 gathers), old and new binaries alternating per
  // case, twice. 1 thread: 2.10x / 2.37x / 2.63x at 64 KiB / 1 MiB / 16 MiB (median 0.13 -> 0.26,
  // 0.18 -> 0.40, 0.28 -> 0.64 of memcpy; s2d NHWC CRD b2 C3 of bytes at 64 KiB 1.4 -> 35 GB/s);
  // 2 threads: 1.92x / 2.81x / 2.92x. 3-byte pixels (b3 C1 of bytes) lost, 0.62-0.88x, at
  // 0.07-0.23 of memcpy either way.
  auto transposes_in_registers = [&] {
    return (plan.shuffle && plan.shuffle->transposes) || plan.kernel.copy == transpose_tile_kernel_avx512().copy;
  };
  auto plan_as_avx2 = [&] {
    planning_level_override = isa::avx2;
    struct restore {
      ~restore() { planning_level_override.reset(); }
    } restore_level;
    return plan_permute_unsplit(axes, element_bytes);
  };
  if (planning_isa() == isa::avx512 && !transposes_in_registers()) {
    permute_plan avx2_plan = plan_as_avx2();
    if (avx2_plan.gather) return avx2_plan;
  }
  if (planning_isa() >= isa::avx512) {
    const runtime::core_kind cores = runtime::planning_core_kind();
    const bool intel = cores == runtime::core_kind::intel;
    const bool amd = takes_amd_rules(cores);
    if ((intel && loses_to_avx2_on_intel(plan)) || (amd && loses_to_avx2_on_amd(plan)) ||
        (cores == runtime::core_kind::amd_zen4 && loses_to_avx2_on_zen4(plan)) ||
        (cores == runtime::core_kind::amd_zen5 && loses_to_avx2_on_zen5(plan))) {
      plan = plan_as_avx2();
    } else {
      // Staged AVX-512 shuffles whose AVX2 plan, made once, walks the segments in place or
      // interleaves unstaged.
      const bool amd_staging = takes_amd_staging_rules(cores);
      const bool zen4_staging = takes_zen4_staging_rules(cores, plan);
      const bool segments_win =
          (intel && stages_where_avx2_segments_win_on_intel(plan)) ||
          (amd_staging && stages_where_avx2_segments_win_on_amd(plan) && !streams_grouped_on_amd(plan));
      const bool direct_wins = (amd_staging && stages_where_avx2_direct_wins_on_amd(plan)) ||
                               (zen4_staging && stages_where_avx2_direct_wins_on_zen4(plan));
      const bool interleave_wins = zen4_staging && stages_interleave_where_avx2_wins_on_zen4(plan);
      if (segments_win || direct_wins || interleave_wins) {
        permute_plan avx2_plan = plan_as_avx2();
        const bool segmented = avx2_plan.shuffle && avx2_plan.shuffle->segmented != nullptr;
        const bool direct = avx2_plan.shuffle && avx2_plan.shuffle->segment_copy.copy == nullptr && !segmented;
        const bool staged = avx2_plan.shuffle && avx2_plan.shuffle->segment_copy.copy != nullptr && !segmented;
        if ((segments_win && segmented) || (direct_wins && direct) ||
            (interleave_wins && (staged || (direct && avx2_plan.shuffle->repeat.by_source)))) {
          plan = std::move(avx2_plan);
        }
      }
    }
  }
  if (plan.shuffle) plan.shuffle->repeat.source_prefetch_bytes = streamed_deinterleave_source_prefetch_bytes(plan);
  if (plan.shuffle) plan.shuffle->repeat.realigned_run_bytes = realigned_run_bytes_of(plan);
  if (plan.shuffle) plan.shuffle->repeat.prefetches_next_run = deinterleaves_prefetch_next_run(plan);
  if (plan.shuffle && !sinks_streamed_deinterleave_rows(plan)) plan.shuffle->repeat.sinks_rows = false;
  if (plan.gather) plan.gather->grouped_rows_bytes = grouped_gather_rows_bytes_of(plan);
  if (plan.gather) plan.gather->prefetch_next_strip = gathers_prefetch_next_strip(plan);
  if (plan.gather) plan.gather->wide_streamed_strips = gathers_stream_wide_strips(plan);
  if (plan.shuffle) plan.shuffle->split = split_of(plan);
  return plan;
}

}  // namespace

permute_plan plan_permute(std::span<const permute_axis> axes, std::size_t element_bytes) {
  permute_plan plan = plan_permute_at_every_level(axes, element_bytes);
  if (plans_streamed_shuffle_for_the_cache(plan)) {
    planning_for_the_cache = true;  // plan_permute_at_every_level resets it
    plan = plan_permute_at_every_level(axes, element_bytes);
  } else if (takes_the_cache_plan_on_more_threads(plan)) {
    planning_for_the_cache = true;
    plan.on_more_threads = std::make_shared<const permute_plan>(plan_permute_at_every_level(axes, element_bytes));
  }
  return plan;
}

namespace {

// Whether an AVX2 run copy moves each column's run as one wider piece whose tail the next column
// overwrites (spilling_run_kernel_avx2): runs of 5-31 bytes (but 8 and 16, which take one piece
// already) that continue one another along the tile's columns in the destination, from columns
// at least a piece apart in the source. A 6-, 12- or 24-byte run took two overlapping pieces of
// half that, two loads and two stores; now one of each. Zen 3 without AVX-512, the grid cells
// whose tiles qualify (d2s NHWC and channels-last K = 3 DCR of 3 or 4 channels or blocks, s2d
// NHWC and channels-last K = 3 DCR of 3 channels, b3 C1 of both modes), planned both ways in one
// process (bench/plan_ab, both orders; 21 samples in the cache, 7 at 16 MiB, 3 at 256 MiB), one /
// two threads: 47 cells of 64 KiB 1.23x / 1.27x (1.02-1.62x; d2s channels-last K = 3 DCR b2 C3 of
// 2-byte elements 0.23 -> 0.43 of memcpy), 47 of 1 MiB 1.15x / 1.17x (0.99-1.63x). Where the output
// streams, runs under 12 bytes gained: 14 cells of 16 MiB 1.33x / 1.33x (1.08-1.51x; s2d NHWC b3
// C1 of 2-byte elements 0.37 -> 0.58 of memcpy), 11 of 256 MiB 1.24x / 1.14x (0.93-1.49x); longer
// ones went both ways (1.07x / 1.06x at 16 MiB, 1.01x / 1.00x at 256 MiB, 0.80-1.31x; d2s
// channels-last K = 3 DCR b2 C3 of 8-byte elements 0.80x at 256 MiB), so they keep their copy.
// The AVX-512 level's copy of such runs is the AVX2 level's (two overlapping pieces), and the
// AVX2 kernel spills there too. Zen 4 (2 vCPUs), the grid cells this changes at the AVX-512 level,
// both plans in one process (bench/plan_ab, both orders; 21 samples in the cache, 7 at 16 MiB,
// 3 at 256 MiB), one / two threads: 35 cells of 64 KiB 1.20x / 1.14x (0.91-1.52x; s2d NHWC CRD
// b3 C1 of 8-byte elements 0.46 -> 0.70 of memcpy), 37 of 1 MiB 1.18x / 1.17x (s2d channels-last
// K = 3 DCR b3 C3 of bytes 0.16 -> 0.25), 6 of 16 MiB 1.19x / 1.19x (1.08-1.27x), 3 of 256 MiB
// 1.13x / 1.14x. The losses are d2s channels-last K = 3 b3 of 3 or 4 channels, rows of 3-8 runs
// (0.91-0.98x at 64 KiB, 0.83-0.91x on two threads at 1 MiB); rows of few runs, whose last run
// each stays exact, gained least everywhere (0.95-1.16x for up to 8 runs, 1.25-1.53x from 14).
// The AVX-512 level's spill is not measured on Intel's cores or a Zen 5.
// Tiles whose planes continue their runs in the source (s2d channels-last K = 3 b2 / b3 of few
// channels) had walked those planes innermost at the AVX2 level in the cache (6fc27af, measured on
// a Zen 3 against the plain copy before this one existed); on a Zen 4 that walk lost to the copy
// here (or to the gather the planner then picks): the 8 grid cells it took at the AVX2 level
// (REGRID_MAX_ISA=avx2), both plans in one process (bench/plan_ab, 21 samples, both orders), one /
// two threads 1.23x / 1.22x faster without it at 64 KiB (1.04-1.54x), 1.18x / 1.19x at 1 MiB
// (0.94-1.61x); at the AVX-512 level, against this copy, the walk went 0.93x / 0.91x at 64 KiB
// (1 cell) and 0.93x / 0.99x at 1 MiB (4). It is gone.
constexpr std::int64_t max_streamed_spilled_run_bytes = 11;
bool spills_short_runs(const permute_plan& plan) {
  const auto width = static_cast<std::int64_t>(plan.width);
  if (planning_isa() < isa::avx2 || plan.kernel.copy != tile_kernel_for_isa(plan.width).copy) return false;
  if (!spills_runs_of(plan.width)) return false;
  if (output_streams(plan) && width > max_streamed_spilled_run_bytes) return false;
  return plan.col.extent > 1 && plan.col.dst_stride == width &&
         plan.col.src_stride >= static_cast<std::int64_t>(std::bit_ceil(plan.width));
}

permute_plan plan_permute_unsplit(std::span<const permute_axis> axes, std::size_t element_bytes) {
  permute_plan plan;
  plan.width = element_bytes;
  axis_list kept;
  std::int64_t count = 1;
  for (const auto& axis : axes) {
    if (axis.extent == 0) return plan;  // empty: total_bytes stays 0
    count *= axis.extent;
    if (axis.extent != 1) kept.push_back(axis);
  }
  plan.total_bytes = count * static_cast<std::int64_t>(element_bytes);
  plan.streams = plan.total_bytes >= static_cast<std::int64_t>(streaming_output_bytes) && !planning_for_the_cache;

  // Innermost = smallest destination stride, so the output is written in order.
  order_outermost_first(kept, [](const permute_axis& axis) { return axis.dst_stride; });

  axis_list fused;
  for (const auto& axis : kept) {
    if (!fused.empty()) {
      permute_axis& outer = fused.back();
      if (outer.src_stride == axis.src_stride * axis.extent && outer.dst_stride == axis.dst_stride * axis.extent) {
        outer = {outer.extent * axis.extent, axis.src_stride, axis.dst_stride};
        continue;
      }
    }
    fused.push_back(axis);
  }

  const auto width = static_cast<std::int64_t>(plan.width);
  if (!fused.empty() && fused.back().src_stride == width && fused.back().dst_stride == width) {
    plan.width *= static_cast<std::size_t>(fused.back().extent);
    fused.pop_back();
  }

  // The kernels below consume the axes; a gather, and the block-transposing shuffle of 8-byte
  // elements, are planned from them afterwards.
  const axis_list normalized = fused;
  if (choose_shuffle(plan, fused)) {
    prefer_gather(plan, normalized, plan.width);
    return plan;
  }
  if (!fused.empty()) {
    plan.col = fused.back();
    fused.pop_back();
  }
  // 8-byte elements with no contiguous run on either side (64-way shuffles of 8-byte elements
  // spill, see select_shuffle) are transposed 8 x 8 in registers; that tile's rows must be the
  // source-contiguous axis, wherever the destination order put it, and however short (runs of 3
  // or 4 elements load under a mask). Its columns are whole 64-byte stores: with 3 or 4 columns
  // the masked 24-32 byte stores ran at 0.6-0.7x of the element loop.
  const bool transpose =
      plan.width == 8 && plan.col.dst_stride == 8 && plan.col.extent >= 8 && planning_isa() >= isa::avx512;
  if (transpose) {
    const auto source_run =
        std::find_if(fused.begin(), fused.end(), [](const permute_axis& axis) { return axis.src_stride == 8; });
    if (source_run != fused.end()) {
      std::rotate(source_run, source_run + 1, fused.end());  // the others keep their order
      plan.row = fused.back();
      fused.pop_back();
    }
  }
  if (!fused.empty() && plan.row.extent == 1) {
    plan.row = fused.back();
    fused.pop_back();
  }
  // Runs of whole cache lines: the inner loop is the axis that touches fewer places at once;
  // on a tie it stays the one that writes the output in order. Shorter runs do the same where the
  // output is larger than the cache and three or more of its rows are long, so that the walk reads
  // the source in order and writes a few output rows at a time, as XNNPACK does. Each cell of the
  // 16 MiB grid alone, old and new alternating, twice: all 50 cells the rule would swap without
  // its limits, 0.54-1.49x (CL-K3 rows of 0.4-2 KiB mostly lost); those with rows of 8 KiB or
  // more, 1.18x over the 13 with three rows or more (median 0.72 -> 0.82-0.86 of memcpy; d2s NHWC
  // DCR b8 C3 of 2-byte elements 1.37-1.92x), 0.73-1.12x over the 3 with two.
  const auto run_width = static_cast<std::int64_t>(plan.width);
  const bool long_output_rows = output_streams(plan) && plan.row.extent >= 3 &&
                                magnitude(plan.row.dst_stride) >= min_source_order_output_row_bytes;
  if ((run_width >= 64 || long_output_rows) &&
      concurrent_streams(plan.row, run_width) < concurrent_streams(plan.col, run_width)) {
    std::swap(plan.row, plan.col);
  }
  // Short runs of odd lengths (12-48 bytes: three channels) walk the longer axis innermost where the
  // columns are few: a walk of 2-4 runs per row spent more on each row's set-up than on its
  // copies. Same-binary-pair A/B on a Zen 3 without AVX-512 over the 36 grid cells this swaps (all
  // in the cache), four alternations, 1 / 2 threads: 1.17x / 1.19x at 64 KiB, 1.11x / 1.05x at
  // 1 MiB. Where the output streams the order decides the memory traffic, and swapping lost
  // (0.62-0.72x at 16 MiB), as it did for 16-byte runs (now shuffles) in the cache; but not where
  // the streamed output's runs are copied with ordinary stores all the same (see
  // copies_streamed_runs_with_ordinary_stores).
  if (run_width < 64 && run_width != 16 && run_width != 32 &&
      (!output_streams(plan) || copies_streamed_runs_with_ordinary_stores(plan, run_width)) && plan.col.extent < 8 &&
      plan.row.extent > 2 * plan.col.extent) {
    std::swap(plan.row, plan.col);
  }
  // Runs under a line into an output that stays in the cache walk the axis that writes the
  // destination in order innermost, where the other one does not: s2d NHWC DCR of few channels,
  // whose columns were the output pixels (each output row written in a pass per block row, a run
  // in every pixel of it), now read the block rows' sources in turn and write each output row
  // once, from its start. On an Intel Xeon with AMX (2 vCPUs), the 11 cells of the 1 MiB grid this
  // changes (and the 13 of 64 KiB, which add d2s channels-last K = 3 DCR b8 C3), planned both ways
  // in one process (bench/plan_ab, five samples, both orders): 1.23x / 1.24x on one thread at 1 MiB
  // (1.09-1.52x; s2d NHWC DCR b4 C3 of 4-byte elements 0.61 -> 0.92 of memcpy), 1.15x / 1.12x at
  // 64 KiB (the least 0.95x), 1.25x / 1.17x at the AVX2 level; regrid bench, alternate processes,
  // two threads at 1 MiB 1.1-1.6x. The walk in source order instead, tried on the cells whose rows
  // read the source in order (d2s NHWC and channels-last K = 3 DCR), lost 0.82x. Where the output
  // streams, the order is set above for the memory traffic (at 16 MiB this order changed 10 cells
  // by 0.88-1.06x). A Zen 5 keeps the walk above (writes_short_runs_in_output_order).
  if (run_width < 64 && !output_streams(plan) && magnitude(plan.row.dst_stride) == run_width &&
      magnitude(plan.col.dst_stride) != run_width && writes_short_runs_in_output_order()) {
    std::swap(plan.row, plan.col);
  }
  // A tile of a few runs would cost a call (and an odometer step) per few dozen bytes.
  if (!fused.empty() && plan.row.extent * plan.col.extent * static_cast<std::int64_t>(plan.width) < short_call_bytes) {
    plan.plane = fused.back();
    fused.pop_back();
  }
  plan.outer = std::move(fused);
  if (walks_outer_axes_in_source_order(plan)) order_by_source_stride(plan.outer);
  // Outputs larger than the cache skip the read-for-ownership of every line they write: the 124
  // grid cells of 16 MiB that copy runs of 128 bytes or more, 1.43x (median 0.64 -> 0.88 of memcpy).
  // Runs of one line (64 bytes) stream where the tile reads the source in stretches of lines
  // (reads_source_stretches). Kernel alone, 16 MiB, alternating, 1 / 2 threads: NHWC b2-b8 (14 grid
  // cells) 1.45-1.97x / 0.89-1.07x (geo 1.61x / 0.99x), s2d channels-last K = 3 DCR b2 / b4 (4)
  // 1.29-1.71x / 0.89-1.21x, as the streaming of longer runs does (10 cells: 1.63x / 1.01x). Where
  // the tile reads part of each source row, another outer position the rest (d2s channels-last
  // K = 3 DCR, 7 cells), streaming gained 1.22-1.38x on one thread but lost 0.85-0.99x on two; where
  // no tile axis steps by a line (s2d channels-last K = 3 b8), the benchmark's ratio fell 0.85-0.93x.
  // Far past the cache both kinds stream too: at 256 MiB on an Intel Xeon with AMX (2 vCPUs), the
  // 10 such grid cells planned both ways in one process (bench/plan_ab, both orders) 1.45-1.50x on
  // one thread, 1.45-1.51x on two (each 0.46-0.51 of memcpy before, 0.64-0.87 after); at 64 MiB the
  // two that reach it 1.26-1.28x. Not measured on AMD's cores.
  const bool streams_line_runs = reads_source_stretches(plan) || far_past_the_cache(plan);
  plan.kernel = tile_kernel_for_isa(
      plan.width, output_streams(plan) && (plan.width != 64 || streams_line_runs) && !copies_runs_into_the_cache(plan),
      far_past_the_cache(plan));
  if (prefetches_next_planes(plan)) plan.kernel = plane_prefetching_run_kernel_avx512();
  if (spills_short_runs(plan)) plan.kernel = spilling_run_kernel_avx2();
  if (transpose && plan.row.src_stride == 8) {
    plan.kernel = transpose_tile_kernel_avx512();
  } else if (plan.width == 8 && planning_isa() >= isa::avx512) {
    // No tile transpose (fewer than 8 columns, e.g. s2d channels-last CRD b3 / b4 of 64 8-byte
    // channels, d2s channels-last b8 C1 uint8 at 64 KiB): a 32- or 64-way block-transposing
    // shuffle, where one fits, beats moving elements one at a time or gathering them (same-run
    // A/B of the 7 such grid cells: 2.1x, 0.91-4.1x).
    permute_plan wide;
    wide.width = plan.width;
    wide.total_bytes = plan.total_bytes;
    wide.streams = plan.streams;
    axis_list wide_axes = normalized;
    if (choose_shuffle(wide, wide_axes, true)) plan = std::move(wide);
  }
  prefer_gather(plan, normalized, plan.width);
  return plan;
}

struct cached_plan {
  axis_list axes;
  std::size_t element_bytes = 0;
  isa level = isa::scalar;
  gather_forcing gather_forced = gather_forcing::off;
  bool assembled_forced = false;
  runtime::core_kind cores = runtime::core_kind::other;
  std::optional<permute_plan> plan;  ///< empty: an empty slot
};

// A handful: a model's layers reuse a few shapes, and a miss only costs a plan.
constexpr std::size_t plan_cache_slots = 8;

}  // namespace

const permute_plan& plan_permute_cached(std::span<const permute_axis> axes, std::size_t element_bytes) {
  // Per thread, so lookups take no lock; slots are replaced round-robin.
  thread_local std::array<cached_plan, plan_cache_slots> cache;
  thread_local std::size_t next_slot = 0;
  thread_local permute_plan uncached;
  const isa level = active_isa();
  const gather_forcing forced = gather_forced.load(std::memory_order_relaxed);
  const bool assembling = assembled_forced.load(std::memory_order_relaxed);
  const runtime::core_kind cores = runtime::planning_core_kind();
  if (axes.size() > max_permute_axes) {
    uncached = plan_permute(axes, element_bytes);
    return uncached;
  }
  for (const cached_plan& entry : cache) {
    if (entry.plan && entry.element_bytes == element_bytes && entry.level == level && entry.gather_forced == forced &&
        entry.assembled_forced == assembling && entry.cores == cores &&
        std::equal(entry.axes.begin(), entry.axes.end(), axes.begin(), axes.end())) {
      return *entry.plan;
    }
  }
  permute_plan plan = plan_permute(axes, element_bytes);
  cached_plan& slot = cache[next_slot];
  next_slot = (next_slot + 1) % plan_cache_slots;
  slot.axes.assign_range(axes);
  slot.element_bytes = element_bytes;
  slot.level = level;
  slot.gather_forced = forced;
  slot.assembled_forced = assembling;
  slot.cores = cores;
  slot.plan = std::move(plan);
  return *slot.plan;
}

namespace {

// Walks work items [begin, end) of `items_per_outer` items per position of the outer axes and
// calls body(src_offset, dst_offset, item) with the byte offsets of that position; divisions
// happen once per call, then an odometer advances.
template <class Body>
void for_each_item(const axis_list& outer, std::int64_t items_per_outer, std::int64_t begin, std::int64_t end,
                   Body body) {
  const int depth = static_cast<int>(outer.size());
  // Only the first `depth` entries are used, and a walk from the first item (one thread's whole
  // range) needs no division: zeroing the whole array and dividing anyway cost a few nanoseconds a call.
  std::array<std::int64_t, max_permute_axes> index;  // NOLINT(cppcoreguidelines-pro-type-member-init)
  std::fill_n(index.begin(), depth, 0);
  std::int64_t item = 0;
  std::int64_t src_offset = 0;
  std::int64_t dst_offset = 0;
  if (begin != 0) {
    std::int64_t outer_index = begin / items_per_outer;
    item = begin % items_per_outer;
    for (int k = depth - 1; k >= 0; --k) {
      const auto& axis = outer[static_cast<std::size_t>(k)];
      index[static_cast<std::size_t>(k)] = outer_index % axis.extent;
      outer_index /= axis.extent;
      src_offset += index[static_cast<std::size_t>(k)] * axis.src_stride;
      dst_offset += index[static_cast<std::size_t>(k)] * axis.dst_stride;
    }
  }
  for (std::int64_t work = begin; work < end; ++work) {
    body(src_offset, dst_offset, item);
    if (++item < items_per_outer) continue;
    item = 0;
    for (int k = depth - 1; k >= 0; --k) {
      const auto& axis = outer[static_cast<std::size_t>(k)];
      auto& position = index[static_cast<std::size_t>(k)];
      src_offset += axis.src_stride;
      dst_offset += axis.dst_stride;
      if (++position < axis.extent) break;
      src_offset -= axis.src_stride * axis.extent;
      dst_offset -= axis.dst_stride * axis.extent;
      position = 0;
    }
  }
}

// A staging buffer's `planes` planes of rows x cols segments, one after another, copied to the
// given strides.
tile_shape from_staged_planes(std::int64_t planes, std::int64_t rows, std::int64_t cols, std::int64_t segment,
                              std::int64_t dst_plane, std::int64_t dst_row, std::int64_t dst_col) {
  return {.planes = planes,
          .rows = rows,
          .cols = cols,
          .src_plane = rows * cols * segment,
          .src_row = cols * segment,
          .src_col = segment,
          .dst_plane = dst_plane,
          .dst_row = dst_row,
          .dst_col = dst_col};
}

// The same tile walked with its planes axis innermost: (rows, cols, planes).
tile_shape planes_innermost(const tile_shape& t) {
  return {.planes = t.rows,
          .rows = t.cols,
          .cols = t.planes,
          .src_plane = t.src_row,
          .src_row = t.src_col,
          .src_col = t.src_plane,
          .dst_plane = t.dst_row,
          .dst_row = t.dst_col,
          .dst_col = t.dst_plane};
}

// One call of a staged shuffle (see shuffle_tile::segment_copy): batches of whole segments go
// through an L1 buffer. A batch is whole inner rows when they fit, else part of one inner row;
// either way its segments are consecutive on the far side, so one shuffle call covers it. With
// `group` (extent > 1), the call moves the whole repeat at each of group.extent positions of that
// axis, which must all fit the buffer at once: one segment copy and one shuffle for all of them.
// streams_short_rows: a streamed de-interleave streams its rows however few bytes of each it writes.
void run_staged(const shuffle_tile& tile, std::size_t width, const std::byte* src, std::byte* dst, std::int64_t length,
                const shuffle_repeat& repeat, const permute_axis& group, const std::byte* src_end,
                bool streams_short_rows) {
  const bool interleave = tile.interleave;
  auto near = [interleave](const permute_axis& a) { return interleave ? a.dst_stride : a.src_stride; };
  const std::int64_t far_bytes = length * static_cast<std::int64_t>(width);  // one segment's run per way
  const std::int64_t segment = far_bytes * static_cast<std::int64_t>(tile.offsets.size());
  const std::int64_t inner = repeat.inner.extent;
  const std::int64_t outer = repeat.outer.extent;
  // The buffer holds group.extent blocks of rows x cols segments, one per position of `group` (a
  // single block without one).
  const std::int64_t near_plane = interleave ? group.dst_stride : group.src_stride;
  const std::int64_t far_plane = interleave ? group.src_stride : group.dst_stride;
  if (tile.segmented != nullptr) {
    const near_segments segments{.length = length,
                                 .segment = segment,
                                 .planes = {std::max<std::int64_t>(group.extent, 1), near_plane},
                                 .rows = {outer, near(repeat.outer)},
                                 .cols = {inner, near(repeat.inner)},
                                 .far_plane = far_plane};
    tile.segmented(src, dst, segments, tile.offsets.data());
    return;
  }
  alignas(64) std::byte buffer[staging_bytes + staging_slack_bytes];
  auto stage = [&](std::int64_t o, std::int64_t i, std::int64_t rows, std::int64_t cols) {
    const std::int64_t near_offset = o * near(repeat.outer) + i * near(repeat.inner);
    const std::int64_t far_offset = (o * inner + i) * far_bytes;
    const std::int64_t run = rows * cols * length;
    const std::int64_t plane_bytes = rows * cols * segment;
    // A de-interleave streams its far-side rows where it writes 2 KiB or more of each per call
    // (b_way_run joins rows off lines into whole ones). Same-run A/B over the 132 staged
    // de-interleaves of the 16 MiB grid, twice: 1.19x over the 64 whose calls write that much
    // (median 0.30 -> 0.36 of memcpy); streaming shorter calls too was mixed (1.06x, 18 of 68
    // cells under 0.9x). Far past the cache, with streams_short_rows, it streams them however
    // short (see streams_short_staged_rows).
    const shuffle_repeat per_plane{
        .inner = interleave ? permute_axis{group.extent, far_plane, plane_bytes}
                            : permute_axis{group.extent, plane_bytes, far_plane},
        .streaming = !interleave && repeat.streaming &&
                     (streams_short_rows || far_bytes * rows * cols >= streamed_unaligned_deinterleave_run_bytes),
        // The shuffle reads the source (interleave) or the buffer.
        .readable_end = interleave ? src_end : buffer + sizeof(buffer)};
    if (interleave) {
      tile.fn(src + far_offset, buffer, run, tile.offsets.data(), per_plane);
      // Where the group's positions lie side by side within each output line (segments under a
      // line, 4 or more of them filling the inner stride), the copy walks the group innermost and
      // writes the destination in order, each line completed at once; plane by plane, every line
      // was written in 4-8 parts far apart. Same-binary-pair A/B over the grid's staged interleaves,
      // three alternations: d2s CF-K3 DCR b4 / b8 of C16-64 at 64 KiB 1.3-5.4x (b8 C16 of 2-byte
      // elements 0.07 -> 0.38 of memcpy), cells at 1 MiB within 3% (kernel-direct); groups of 2 or
      // 3 positions lost 0.85-0.90x (CF-K3 CRD b2 / b3) and stay plane by plane, as do segments of
      // a line or more (0.72-0.82x).
      const bool fills_lines =
          group.extent >= 4 && segment < 64 && near_plane == segment && group.extent * segment == near(repeat.inner);
      const tile_shape by_plane =
          from_staged_planes(group.extent, rows, cols, segment, near_plane, near(repeat.outer), near(repeat.inner));
      const tile_shape unpack = fills_lines ? planes_innermost(by_plane) : by_plane;
      tile.segment_copy.copy(buffer, dst + near_offset, unpack, static_cast<std::size_t>(segment));
    } else {
      // Buffer order: the packing kernel's whole-vector stores run past each segment's end.
      const tile_shape pack{.planes = group.extent,
                            .rows = rows,
                            .cols = cols,
                            .src_plane = near_plane,
                            .src_row = near(repeat.outer),
                            .src_col = near(repeat.inner),
                            .dst_plane = plane_bytes,
                            .dst_row = cols * segment,
                            .dst_col = segment};
      tile.segment_copy.copy(src + near_offset, buffer, pack, static_cast<std::size_t>(segment));
      if (tile.stages_far_stretch) {
        // The group's positions fill one stretch of the destination (shuffle_tile::stages_far_stretch:
        // set only where run_staged_plan groups positions, so `group` is never empty here).
        alignas(64) std::byte stretch[staging_bytes + staging_slack_bytes];
        shuffle_repeat in_cache = per_plane;
        in_cache.streaming = false;
        tile.fn(buffer, stretch, run, tile.offsets.data(), in_cache);
        kernels::stream_copy_lines_avx512(dst + far_offset, stretch,
                                          static_cast<std::size_t>(group.extent * far_plane));
        kernels::stream_fence();
      } else {
        tile.fn(buffer, dst + far_offset, run, tile.offsets.data(), per_plane);
      }
    }
  };
  if (group.extent > 1) {
    stage(0, 0, outer, inner);
    return;
  }
  const std::int64_t capacity = std::max<std::int64_t>(1, staging_bytes / segment);
  if (inner <= capacity) {
    const std::int64_t rows_per_batch = capacity / inner;
    for (std::int64_t o = 0; o < outer; o += rows_per_batch) stage(o, 0, std::min(rows_per_batch, outer - o), inner);
    return;
  }
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t i = 0; i < inner; i += capacity) stage(o, i, 1, std::min(capacity, inner - i));
  }
}

// Whether a gather plan's calls walk the innermost outer axis too, as groups of rows
// (gather_tile::grouped_rows_bytes).
bool gather_groups_rows(const permute_plan& plan) {
  const gather_tile& tile = *plan.gather;
  const std::int64_t rows_bytes = tile.rows.extent * tile.stream.extent * tile.block_bytes;
  return !plan.outer.empty() && rows_bytes < tile.grouped_rows_bytes && plan.outer.back().extent >= min_row_groups;
}

// A gather call's rows with their windows on source lines (gather_tile::lined_programs), `first`
// being the first row's index along the rows axis: the rows whose starts share an offset within a
// line go together, every line_phase_rows-th row, with their program.
void run_lined_rows(const gather_tile& tile, const gather_rows& rows, std::int64_t first, const std::byte* src,
                    std::byte* dst, const std::byte* src_end) {
  const std::int64_t cycle = tile.line_phase_rows;
  if (cycle == 1) {
    tile.fn(*tile.lined_programs.front(), rows, src, dst, src_end);
    return;
  }
  for (std::int64_t k = 0; k < std::min(cycle, rows.count); ++k) {
    gather_rows part = rows;
    part.count = (rows.count - k + cycle - 1) / cycle;
    part.src_stride = cycle * rows.src_stride;
    part.dst_stride = cycle * rows.dst_stride;
    const auto program = static_cast<std::size_t>((first + k) % cycle);
    tile.fn(*tile.lined_programs[program], part, src + k * rows.src_stride, dst + k * rows.dst_stride, src_end);
  }
}

// How a call's work is shared: at most `threads` parts, whether sleeping workers are woken, and
// about how many output bytes make one work item.
struct work_split {
  int threads = 1;
  runtime::sleeping_workers sleeping = runtime::sleeping_workers::wake;
  std::int64_t item_bytes = bytes_per_work_item;
};

// parallel_for without the pool (and its std::function) when one thread does everything.
template <class Body>
void split_items(std::int64_t items, const work_split& split, const Body& body) {
  if (split.threads <= 1 || items <= 1) {
    body(std::int64_t{0}, items);
    return;
  }
  runtime::parallel_for(items, split.threads, body, split.sleeping);
}

// A staged plan whose calls fill more than half the buffer takes blocks of its outermost repeat
// axis at each outer position as work items, ordered block-major: the outer positions usually
// interleave within the same near-side cache lines (the fine pixels of one coarse pixel), so a
// block's near-side region (about staged_block_bytes) is fetched from memory once and reused from
// the last-level cache by every outer position. Blocks of 128 KiB, sized to be reused from L2,
// cut each call's far-side rows into a few KiB per way and lost to blocks of 2 MiB. Same-binary-
// pair A/B over the grid's staged cells, 1 / 2 threads: 1.03x / 1.02x at 1 MiB (450 cells, where a
// block is now the whole axis; three alternations), 1.10x / 1.12x at 16 MiB (250 cells, two);
// 64 KiB unchanged. Blocks of 512 KiB ran 2-4% slower than 2 MiB ones, of 8 MiB 0-1.5%.
constexpr std::int64_t staged_block_bytes = std::int64_t{2} << 20;

// Far past the cache (far_past_the_cache) a staged de-interleave's calls stream their ways' rows
// however short, and its blocks give each way at least this many bytes per call. Every line goes
// to memory there anyway, and the rules they replace were measured at 16 MiB: rows of under 2 KiB
// per call went out with ordinary stores (a read for ownership each), and a block was one position
// of a repeat axis whose source stride is a plane of megabytes, so that each call wrote a line or
// less of each way (s2d channels-last K = 3 CRD b8 C64: each 32 KiB output pixel written a line in
// eight at a time, in eight passes over the output). On an Intel Xeon with AMX (2 vCPUs), the 40
// of the 51 staged de-interleaves of the 256 MiB grid whose plans this changes, planned both ways
// in one process (bench/plan_ab, three samples, both orders): 1.35x on one thread (29 faster by
// over 3%, none slower by 1%; channels-last K = 3 CRD b8 C16 / C64 and b3 C64 2.5-3.3x, 0.14-0.19
// -> 0.36-0.61 of memcpy; NHWC CRD b8 and channels-last K = 3 CRD b4 1.3-1.6x; channels-first
// K = 3 b3 / b8 of C3-C16 1.15-1.55x), 1.34-1.36x on two, 1.24x into outputs 16 bytes past a line;
// at 64 MiB the 23 it changes 1.17x (channels-first K = 3 ones within 3% either way, the rest
// 1.1-2.1x). Blocks of at least 256 or 512 bytes per way gained less, and no blocks at all lost
// 0.7-0.9x on channels-first K = 3 DCR, whose blocks already give each way hundreds of KiB. The
// calls that group outer positions (run_staged_plan: two or more per buffer) stream short rows
// only where every way's row of a position fills whole lines, and the output starts on one: rows
// of 108 and 216 bytes lost 0.78-0.86x (s2d channels-last K = 3 CRD b3 C16 of 4- and 8-byte
// elements), as did whole-line rows 16 bytes past a line, 0.75-0.88x: the lines two rows share
// went both ways. Not measured on AMD's cores.
constexpr std::int64_t min_far_staged_block_row_bytes = 1024;

// Whether run_staged_plan's calls group outer positions, two or more per buffer (where an
// interleave does not split by blocks instead).
bool groups_staged_positions(const permute_plan& plan) {
  return !plan.outer.empty() && 2 * staged_call_bytes(plan) <= staging_bytes;
}

// Each way's row at one position of the plan's outer axes: the run at every repeat position.
std::int64_t position_row_bytes(const permute_plan& plan) {
  return way_row_bytes(plan) * plan.shuffle->repeat.inner.extent * plan.shuffle->repeat.outer.extent;
}

bool streams_short_staged_rows(const permute_plan& plan) {
  const shuffle_tile& tile = *plan.shuffle;
  if (tile.interleave || tile.segment_copy.copy == nullptr || tile.segmented != nullptr || !tile.repeat.streaming ||
      tile.level < isa::avx512 || !far_past_the_cache(plan)) {
    return false;
  }
  return !groups_staged_positions(plan) || position_row_bytes(plan) % 64 == 0;
}

// Far past the cache, the staged de-interleaves whose calls group outer positions and whose ways'
// rows at each position are off lines but together fill the position's stretch of the destination
// (s2d channels-last K = 3 CRD b3: 27-element rows of each channel, side by side in the output
// pixel) de-interleave each call into a second L1 buffer and stream that stretch out as whole lines
// (shuffle_tile::stages_far_stretch). Written in place, rows of 27-216 bytes took masked ordinary
// stores for most of their lines, each line read for ownership (streamed in place they lost too:
// see min_far_staged_block_row_bytes). On an Intel Xeon with AMX (2 vCPUs), the 9 such cells of the
// 256 MiB grid (C3, C4, C16, C64 of 1- to 8-byte elements), planned both ways in one process
// (bench/plan_ab, five samples, both orders): 1.32x / 1.34x on one thread (1.17-1.55x; b3 C16 of
// 2-byte elements 0.25 -> 0.39 of memcpy), 1.36x / 1.38x on two, 1.27x / 1.30x into outputs
// 16 bytes past a line; at 64 MiB 1.16x / 1.04x (4 of 9 within 10% either way). At 16 MiB, where
// the partial lines stay in the last-level cache, the second pass lost 0.58x / 0.71x (5 cells).
// Not measured on AMD's cores.
bool stages_far_stretch(const permute_plan& plan) {
  const shuffle_tile& tile = *plan.shuffle;
  if (tile.interleave || tile.segment_copy.copy == nullptr || tile.segmented != nullptr || !tile.repeat.streaming ||
      tile.level < isa::avx512 || !far_past_the_cache(plan) || !groups_staged_positions(plan)) {
    return false;
  }
  const std::int64_t row = position_row_bytes(plan);
  const auto ways = static_cast<std::int64_t>(tile.offsets.size());
  if (row % 64 == 0 || plan.outer.back().dst_stride != ways * row) return false;
  // The ways' rows tile the position's stretch: the offsets are 0, row, ..., (ways - 1) x row in some order.
  std::uint64_t rows_taken = 0;
  for (const std::int64_t offset : tile.offsets) {
    const std::int64_t k = offset / row;
    if (offset < 0 || offset % row != 0 || k >= ways || ((rows_taken >> k) & 1) != 0) return false;
    rows_taken |= std::uint64_t{1} << k;
  }
  return true;
}

// A staged interleave with a destination group (shuffle_tile::destination_group): each work item
// shuffles the group's positions of a batch into the buffer, plane after plane, copies the
// segments into destination order in a second buffer and streams that stretch out. A batch is
// whole inner rows where they fit both buffers, else part of one. With destination_group_part, into
// an output on a line, a work item takes that many of the group's positions, streamed per inner
// position.
void run_staged_in_destination_order(const permute_plan& plan, const std::byte* src, std::byte* dst,
                                     const work_split& split, std::int64_t outer_count) {
  const shuffle_tile& tile = *plan.shuffle;
  const permute_axis& group = tile.destination_group;
  const shuffle_repeat& repeat = tile.repeat;
  const std::int64_t segment = shuffle_run_bytes(plan);
  const bool on_a_line = reinterpret_cast<std::uintptr_t>(dst) % 64 == 0;
  const std::int64_t part_extent =
      tile.destination_group_part > 0 && on_a_line ? tile.destination_group_part : group.extent;
  const std::int64_t parts = ceil_div(group.extent, part_extent);
  const std::int64_t stretch = part_extent * segment;  // one inner position's output of a part
  const std::int64_t inner = repeat.inner.extent;
  const std::int64_t cols_per_batch = std::min(inner, staging_bytes / stretch);
  const std::int64_t col_batches = (inner + cols_per_batch - 1) / cols_per_batch;
  const std::int64_t rows_per_batch =
      col_batches > 1 ? 1 : std::clamp<std::int64_t>(staging_bytes / (stretch * inner), 1, repeat.outer.extent);
  const std::int64_t row_batches = (repeat.outer.extent + rows_per_batch - 1) / rows_per_batch;
  const std::byte* const src_end = source_end(tile, src);
  // Stretches start off lines wherever rows are not whole lines: the avx512 copy streams whole
  // lines only. Same-run A/B on a Zen 5, the 110 such cells of the 16 MiB grid, four alternations:
  // 1.11x / 1.06x on one / two threads over stream_copy (0.76-1.6x); 16 of 256 MiB 1.06x / 1.03x.
  const bool whole_lines = tile.level >= isa::avx512;
  split_items(outer_count * parts * row_batches * col_batches, split, [&](std::int64_t begin, std::int64_t end) {
    alignas(64) std::byte planes[staging_bytes + staging_slack_bytes];
    alignas(64) std::byte ordered[staging_bytes + staging_slack_bytes];
    for_each_item(
        plan.outer, parts * row_batches * col_batches, begin, end,
        [&](std::int64_t src_offset, std::int64_t dst_offset, std::int64_t whole_item) {
          const std::int64_t part = whole_item / (row_batches * col_batches);
          const std::int64_t item = whole_item % (row_batches * col_batches);
          const std::int64_t first = part * part_extent;
          const std::int64_t count = std::min(part_extent, group.extent - first);
          const std::int64_t piece = count * segment;
          const std::int64_t o = item / col_batches * rows_per_batch;
          const std::int64_t i = item % col_batches * cols_per_batch;
          const std::int64_t rows = std::min(rows_per_batch, repeat.outer.extent - o);
          const std::int64_t cols = std::min(cols_per_batch, inner - i);
          const std::int64_t plane_bytes = rows * cols * segment;
          const shuffle_repeat per_plane{.inner = {count, group.src_stride, plane_bytes}, .readable_end = src_end};
          tile.fn(
              src + src_offset + first * group.src_stride + o * repeat.outer.src_stride + i * repeat.inner.src_stride,
              planes, rows * cols * tile.run.extent, tile.offsets.data(), per_plane);
          const tile_shape in_order =
              planes_innermost(from_staged_planes(count, rows, cols, segment, segment, cols * piece, piece));
          tile.segment_copy.copy(planes, ordered, in_order, static_cast<std::size_t>(segment));
          if (parts == 1) {
            for (std::int64_t r = 0; r < rows; ++r) {
              (whole_lines ? stream_copy_lines_avx512 : stream_copy)(
                  dst + dst_offset + (o + r) * repeat.outer.dst_stride + i * stretch, ordered + r * cols * stretch,
                  static_cast<std::size_t>(cols * stretch));
            }
            return;
          }
          for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t c = 0; c < cols; ++c) {
              (whole_lines ? stream_copy_lines_avx512 : stream_copy)(
                  dst + dst_offset + (o + r) * repeat.outer.dst_stride + (i + c) * repeat.inner.dst_stride +
                      first * segment,
                  ordered + (r * cols + c) * piece, static_cast<std::size_t>(piece));
            }
          }
        });
    stream_fence();
  });
}

// The staged plans that split their work by blocks of the repeat on two or more threads (see
// run_staged_plan): of this many ways, blocks of calls of at least this many bytes.
constexpr std::size_t ways_split_by_blocks = 3;
constexpr std::int64_t min_blocked_call_bytes = 512;

// Whether the outputs of an interleaving plan's outer positions interleave: every outer axis steps
// through the destination by less than the span one position's calls write, so that work items of
// different positions write bytes of the same lines.
bool outer_positions_interleave_on_destination(const permute_plan& plan) {
  const shuffle_tile& tile = *plan.shuffle;
  const auto ways = static_cast<std::int64_t>(tile.offsets.size());
  std::int64_t span = tile.run.extent * static_cast<std::int64_t>(plan.width) * ways;
  for (const permute_axis& axis : {tile.repeat.outer, tile.repeat.inner}) {
    span += magnitude(axis.dst_stride) * (axis.extent - 1);
  }
  return std::ranges::all_of(plan.outer, [&](const permute_axis& axis) { return magnitude(axis.dst_stride) < span; });
}

// A staged plan's repeat cut into blocks of `per_block` positions of its split axis (the outer
// repeat where it has two levels, else the inner), walked as the outermost axis before `outer`, so
// that the odometer goes block-major; and the repeat of block `block`, the last one clamped.
struct repeat_blocks {
  const shuffle_repeat& repeat;
  bool two_levels;
  std::int64_t per_block;

  [[nodiscard]] const permute_axis& split_axis() const { return two_levels ? repeat.outer : repeat.inner; }
  [[nodiscard]] std::int64_t count() const { return ceil_div(split_axis().extent, per_block); }
  [[nodiscard]] axis_list before(const axis_list& outer) const {
    axis_list axes;
    axes.push_back({count(), per_block * split_axis().src_stride, per_block * split_axis().dst_stride});
    for (const permute_axis& axis : outer) axes.push_back(axis);
    return axes;
  }
  [[nodiscard]] shuffle_repeat of(std::int64_t block) const {
    shuffle_repeat part = repeat;
    (two_levels ? part.outer : part.inner).extent = std::min(per_block, split_axis().extent - block * per_block);
    return part;
  }
};

void run_staged_plan(const permute_plan& plan, const std::byte* src, std::byte* dst, const work_split& split,
                     std::int64_t outer_count) {
  const shuffle_tile& tile = *plan.shuffle;
  const std::byte* const src_end = source_end(tile, src);
  // Calls that fill at most half the buffer also walk the innermost outer axis, as many positions
  // as fit the buffer at once, so that the per-call set-up (work item, batch sizes, two kernel
  // calls) is paid once per buffer. Same-run A/B over the 627 grid cells this takes, twice: 1.18x
  // at 64 KiB, 1.27x at 1 MiB, 1.04x at 16 MiB; calls of up to 1 KiB 1.3-1.9x. Walking the grouped
  // segments with the smallest near-side stride innermost lost (0.89x at 64 KiB). Such calls skip
  // the blocks, even where the repeat spans far more than staged_block_bytes on the near side
  // (CL-K3 CRD: 4 x 4 rows of 24 bytes, whole planes apart): there blocks of one plane made one
  // masked 96-byte call per work item, and block-major order one pass over the source per plane.
  // Same-run A/B over the 108 grid cells that change, twice: 1.28x at 1 MiB, 2.12x at 16 MiB
  // (median 0.19 -> 0.34 of memcpy; d2s CL-K3 CRD b4 C3 of 2-byte elements 0.03 -> 0.27).
  const std::int64_t call_bytes = staged_call_bytes(plan);
  const bool two_levels = tile.repeat.outer.extent > 1;
  const permute_axis& split_axis = two_levels ? tile.repeat.outer : tile.repeat.inner;
  const std::int64_t step_bytes = shuffle_run_bytes(plan) * (two_levels ? tile.repeat.inner.extent : 1);
  // On two or more threads, plans whose outer positions interleave on the destination split the
  // work by blocks of the repeat axis instead, one position per call, so that each thread writes
  // its own stretch of the output: work items of whole positions put both threads on the same lines
  // (d2s channels-first K = 3 DCR b3, outer destination strides of 15-225 bytes: 3-15 GB/s on two
  // threads against 25-34 on one). For 3-way interleaves where the blocks leave calls of at least
  // min_blocked_call_bytes, in the cache (outputs that stream are not measured). Measured on a Zen 4
  // (2 vCPUs), the d2s grid at 64 KiB and 1 MiB on two threads: 3-way interleaves (28 / 18 cells)
  // 1.66x / 2.13x (eight alternations of a switch, 0.84-6.2x; b3 C16 of 2-byte elements at 1 MiB
  // 30-41 -> 62 GB/s) and 1.33x / 1.50x (four alternations of the binaries before and after); one
  // thread unchanged. The same two A/Bs went both ways for 2-way (1.12x then 0.89x at 64 KiB, 19
  // cells) and 4-way interleaves (1.17x then 0.81x, 6 cells), and 8-way ones lost (0.78x / 0.92x
  // over 20 / 24 cells, d2s CF-K3 and NCHW b8), as did calls under 512 bytes (d2s CF-K3 b8 of small
  // C, one 72-byte call per block, 0.13-0.29x). De-interleaves do not take this split: none in the
  // grid has interleaved outer positions, so it is unmeasured for them.
  // Repeat positions per work item where blocks of the repeat alone are the items.
  const std::int64_t per_block_item = split_axis.extent / (min_items_per_thread * split.threads);
  const bool split_by_blocks =
      split.threads > 1 && tile.interleave && !output_streams(plan) && tile.offsets.size() == ways_split_by_blocks &&
      per_block_item * step_bytes >= min_blocked_call_bytes && outer_positions_interleave_on_destination(plan);
  if (groups_staged_positions(plan) && !split_by_blocks) {
    axis_list outer = plan.outer;
    const permute_axis group = outer.back();
    outer.pop_back();
    const std::int64_t positions = outer_count / group.extent;
    // Rows on lines only where the output starts on one (see streams_short_staged_rows).
    const bool streams_short_rows = tile.streams_short_staged_rows && reinterpret_cast<std::uintptr_t>(dst) % 64 == 0;
    // On two or more threads, where the outer positions interleave on the destination, the repeat
    // is cut into blocks as well, outermost, so that each thread writes its own stretch of the
    // output with every position of it: work items of whole positions put both threads on the same
    // lines (d2s NCHW DCR b8 C64 of 2-byte elements at 64 KiB, 48-byte rows of the 8 positions
    // interleaved: 7 GB/s on two threads against 33 on one when run alone). Measured on a Zen 4
    // (2 vCPUs), the 77 d2s cells of 64 KiB and 34 of 128 KiB this takes, two threads: 1.15x /
    // 1.22x (eight alternations of a switch; 4-way interleaves 1.26-1.91x, 8-way 1.0-1.1x, d2s
    // CF-K3 DCR b4 C64 of bytes 3.6x), 1.14x / 1.25x (the binaries before and after, five
    // alternations; no cell of 1 MiB takes it; one thread 1.00x). The 8-way ones of 256 and
    // 512 KiB (d2s CF-K3 b8) went 0.97-0.99x, about the drift of the cells it does not touch in the
    // same runs.
    const bool cut_repeat = split.threads > 1 && tile.interleave && !output_streams(plan) &&
                            outer_positions_interleave_on_destination(plan);
    const std::int64_t wanted_blocks = ceil_div(min_items_per_thread * split.threads, positions);
    const std::int64_t per_block =
        cut_repeat ? ceil_div(split_axis.extent, std::min(split_axis.extent, wanted_blocks)) : split_axis.extent;
    const repeat_blocks blocks{tile.repeat, two_levels, per_block};
    const std::int64_t block_call_bytes = call_bytes / split_axis.extent * per_block;
    const std::int64_t per_group = std::clamp<std::int64_t>(staging_bytes / block_call_bytes, 1, group.extent);
    const std::int64_t groups = ceil_div(group.extent, per_group);
    const axis_list by_block = blocks.before(outer);
    split_items(blocks.count() * positions * groups, split, [&](std::int64_t begin, std::int64_t end) {
      std::int64_t work = begin;
      for_each_item(
          by_block, groups, begin, end, [&](std::int64_t src_offset, std::int64_t dst_offset, std::int64_t item) {
            const shuffle_repeat repeat = blocks.of(work++ / (positions * groups));
            const std::int64_t first = item * per_group;
            const permute_axis part{std::min(per_group, group.extent - first), group.src_stride, group.dst_stride};
            run_staged(tile, plan.width, src + src_offset + first * group.src_stride,
                       dst + dst_offset + first * group.dst_stride, tile.run.extent, repeat, part, src_end,
                       streams_short_rows);
          });
    });
    return;
  }
  const std::int64_t near_step = magnitude(tile.interleave ? split_axis.dst_stride : split_axis.src_stride);
  const std::int64_t by_size = staged_block_bytes / std::max<std::int64_t>({near_step, step_bytes, 1});
  // With two or more threads, blocks are cut smaller where there would be fewer than
  // min_items_per_thread work items per thread (a tensor of one block gave the second thread
  // nothing to do). De-interleaves in the cache with an outer position or more per thread are not
  // cut: their threads take whole positions, which write apart (s2d NCHW DCR b4, 4 positions on 2
  // threads, had 4 blocks of half the repeat per thread, at 34 GB/s on two threads against 72 on
  // one at 64 KiB). Measured on a Zen 4 (2 vCPUs), the grid's cells this changes on two threads
  // (s2d NCHW, NCHW_VECT_C and channels-first K = 3, b2-b4), at 64 KiB / 1 MiB: a switch, six
  // alternations, 60 cells 1.44x (0.95-3.27x; b4 2.1-3.3x) / 20 cells 1.03x (0.84-1.53x); the
  // binaries before and after, six alternations, 1.28x (median 0.36 -> 0.45 of memcpy) / 1.02x.
  // Interleaves whose positions interleave on the destination lost the same way (0.50x / 0.72x
  // over 38 / 13 d2s cells: whole positions put both threads on the same lines) and keep the cut;
  // outputs that stream are not measured (no grid cell of 16 MiB changes).
  const bool whole_positions =
      split.threads > 1 && !tile.interleave && !output_streams(plan) && outer_count >= split.threads;
  const std::int64_t by_threads =
      split.threads > 1 && !whole_positions
          ? (split_by_blocks ? per_block_item
                             : split_axis.extent * outer_count / (min_items_per_thread * split.threads))
          : split_axis.extent;
  const std::int64_t fewest_positions =
      tile.streams_short_staged_rows
          ? ceil_div(min_far_staged_block_row_bytes * static_cast<std::int64_t>(tile.offsets.size()), step_bytes)
          : 1;
  const std::int64_t largest_block =
      std::clamp<std::int64_t>(std::max(fewest_positions, std::min(by_size, by_threads)), 1, split_axis.extent);
  // With two or more threads the blocks are evened out (as many, none larger): the threads take
  // equal runs of work items, ordered block-major, so a short last block left one thread the long
  // blocks and the other the short ones (8 positions cut 7 + 1: one thread did 7 / 8 of the work).
  // Measured on an Intel Xeon with AMX (2 vCPUs), the 16 cells of the 16 MiB grid whose blocks this
  // changes on two threads (s2d channels-first K = 3, channels-last K = 3 CRD b8 C64, NCHW DCR b8
  // C64; d2s channels-first K = 3), alternate processes twice: 1.07x (s2d channels-last K = 3 CRD b8
  // C64 of 2-byte elements 1.23x; one under 0.95x: s2d channels-first K = 3 DCR b8 C64 of 2-byte
  // elements, 0.89x). On one thread the 17 cells it would change went 0.99x: one thread keeps its
  // blocks.
  const std::int64_t per_item =
      split.threads > 1 ? ceil_div(split_axis.extent, ceil_div(split_axis.extent, largest_block)) : largest_block;
  const repeat_blocks blocks{tile.repeat, two_levels, per_item};
  const axis_list by_block = blocks.before(plan.outer);
  split_items(blocks.count() * outer_count, split, [&](std::int64_t begin, std::int64_t end) {
    std::int64_t item = begin;
    for_each_item(by_block, 1, begin, end, [&](std::int64_t src_offset, std::int64_t dst_offset, std::int64_t) {
      const shuffle_repeat repeat = blocks.of(item++ / outer_count);
      run_staged(tile, plan.width, src + src_offset, dst + dst_offset, tile.run.extent, repeat, permute_axis{}, src_end,
                 tile.streams_short_staged_rows);
    });
  });
}

}  // namespace

// A streamed gather strip built through the L1 buffer costs a second pass over its bytes, and the
// chunk loops wait while the buffer streams out. Where every chunk the strip builds is a whole
// cache line (the output, every row and every period on lines), the chunk loops store each chunk
// with a streaming store where it belongs: no line is read for ownership either way. On an Intel
// Xeon with AMX (2 vCPUs), each of the 54 such 256 MiB grid cells planned both ways in one process
// (bench/plan_ab, both orders): 1.13x / 1.13x on one / two threads (40 / 39 faster by over 4%,
// 1.07-1.38x; none slower; d2s NHWC CRD b4 C4 of bytes 0.50 -> 0.63 of memcpy). Lined programs
// (windows on source lines) keep the buffer: in place, those of 256-byte periods gained 1.12-1.19x
// and those of 128 and 512 lost 0.89-0.95x (4 cells each). Rows off lines would split each chunk's
// store across two lines. Gathers of one chunk per period stream so whatever their rows' length
// (the buffer's pass cost rows under min_streamed_one_chunk_row_bytes more than it saved): the 4
// such cells there (d2s channels-last K = 3 CRD b2 of rows of 4 and 6.5 KiB), process against
// process, two alternations, 1.0-1.17x on one thread (6.5 KiB 1.16x), 1.0-1.02x / 1.15x on two.
// Not measured on AMD's cores.
bool gather_streams_in_place(const permute_plan& plan, const std::byte* src, const std::byte* dst) {
  if (!plan.gather || plan.gather->fn != gather_rows_avx512vbmi) return false;
  const gather_tile& tile = *plan.gather;
  const std::int64_t period = tile.program->period_dst_bytes;
  if (!gather_strips_stream(plan) || runs_lined_programs(tile, src)) {
    return false;
  }
  auto on_lines = [](std::int64_t stride) { return stride % 64 == 0; };
  return reinterpret_cast<std::uintptr_t>(dst) % 64 == 0 && on_lines(period) && on_lines(tile.rows.dst_stride) &&
         std::all_of(plan.outer.begin(), plan.outer.end(),
                     [&](const permute_axis& axis) { return on_lines(axis.dst_stride); });
}

namespace {

// How run_permute shares a call of this plan on up to max_threads threads: one thread below
// runtime::min_shared_bytes, and items of at most 1 / (threads x min_items_per_thread) of it.
work_split work_split_for(const permute_plan& plan, int max_threads) {
  const int threads = plan.total_bytes < runtime::min_shared_bytes ? 1 : std::max(1, max_threads);
  return {.threads = threads,
          .sleeping = runtime::sleeping_workers_for_bytes(plan.total_bytes),
          .item_bytes = threads == 1 ? bytes_per_work_item
                                     : std::clamp<std::int64_t>(plan.total_bytes / (threads * min_items_per_thread),
                                                                min_work_item_bytes, bytes_per_work_item)};
}

std::int64_t outer_positions(const permute_plan& plan) {
  std::int64_t count = 1;
  for (const auto& axis : plan.outer) count *= axis.extent;
  return count;
}

// The work items of an unstaged shuffle plan's call with this split: its precomputed items where
// the split keeps them (see chunks_repeated_runs).
shuffle_split shuffle_split_of(const permute_plan& plan, const work_split& split, std::int64_t outer_count) {
  const shuffle_tile& tile = *plan.shuffle;
  const bool chunk_runs =
      tile.repeat.outer.extent == 1 && tile.repeat.inner.extent > 1 &&
      chunks_repeated_runs(shuffle_run_bytes(plan), outer_count * tile.repeat.inner.extent, split.threads);
  return split.item_bytes == bytes_per_work_item && !chunk_runs ? tile.split
                                                                : split_of(plan, split.item_bytes, chunk_runs);
}

}  // namespace

shuffle_split shuffle_work_items(const permute_plan& plan, int max_threads) {
  return shuffle_split_of(plan, work_split_for(plan, max_threads), outer_positions(plan));
}

const permute_plan& plan_run_on(const permute_plan& plan, int max_threads) {
  return plan.on_more_threads && work_split_for(plan, max_threads).threads > 1 ? *plan.on_more_threads : plan;
}

void run_permute(const permute_plan& plan, const std::byte* src, std::byte* dst, int max_threads) {
  if (plan.total_bytes == 0) return;
  if (const permute_plan& shared = plan_run_on(plan, max_threads); &shared != &plan) {
    run_permute(shared, src, dst, max_threads);
    return;
  }
  const work_split split = work_split_for(plan, max_threads);
  std::int64_t outer_count = outer_positions(plan);

  if (plan.gather) {
    // Work items are blocks of whole rows, or runs of whole periods of one row when rows are long;
    // when all of a position's rows are short, blocks of the innermost outer axis, as groups.
    const gather_tile& tile = *plan.gather;
    const bool lined = runs_lined_programs(tile, src);
    // The periods are the same in every lined program (those of the plain one, or joined).
    const gather_program& program = lined ? *tile.lined_programs.front() : *tile.program;
    const std::int64_t row_bytes = tile.stream.extent * tile.block_bytes;
    const std::int64_t period = program.period_dst_bytes;
    const std::byte* src_end = src + tile.source_span;
    const bool split_rows = row_bytes > split.item_bytes;
    const bool in_place = gather_streams_in_place(plan, src, dst);
    const bool stream = gather_streams_strips(plan, tile.program->period_dst_bytes, row_bytes);
    const std::int64_t rows_bytes = tile.rows.extent * row_bytes;
    const bool grouped = gather_groups_rows(plan);
    axis_list outer = plan.outer;
    permute_axis group_axis{1, 0, 0};
    if (grouped) {
      group_axis = outer.back();
      outer.pop_back();
      outer_count /= group_axis.extent;
    }
    const std::int64_t row_periods = (row_bytes + period - 1) / period;
    // Rows that read the same source lines go in items of every row over a stretch of periods where
    // all their rows would not fit one (see gather_rows_share_source).
    const bool across = !grouped && tile.rows_share_source && rows_bytes > split.item_bytes;
    const std::int64_t per_item =
        grouped      ? std::clamp<std::int64_t>(split.item_bytes / rows_bytes, 1, group_axis.extent)
        : across     ? std::max<std::int64_t>(1, split.item_bytes / (period * tile.rows.extent))
        : split_rows ? std::max<std::int64_t>(1, split.item_bytes / period)
                     : std::clamp<std::int64_t>(split.item_bytes / row_bytes, 1, tile.rows.extent);
    const std::int64_t items_per_row = split_rows || across ? (row_periods + per_item - 1) / per_item : 1;
    const std::int64_t row_items = grouped      ? (group_axis.extent + per_item - 1) / per_item
                                   : across     ? 1
                                   : split_rows ? tile.rows.extent
                                                : (tile.rows.extent + per_item - 1) / per_item;
    split_items(outer_count * row_items * items_per_row, split, [&](std::int64_t begin, std::int64_t end) {
      for_each_item(outer, row_items * items_per_row, begin, end,
                    [&](std::int64_t src_offset, std::int64_t dst_offset, std::int64_t item) {
                      std::int64_t first_row = 0;  // along the rows axis
                      gather_rows rows{.count = 1,
                                       .src_stride = tile.rows.src_stride,
                                       .dst_stride = tile.rows.dst_stride,
                                       .bytes = row_bytes,
                                       .prefetch = tile.prefetch_next_strip,
                                       .stream = stream && !in_place,
                                       .stream_in_place = in_place,
                                       .wide_strips = tile.wide_streamed_strips,
                                       .groups = 1,
                                       .group_src_stride = group_axis.src_stride,
                                       .group_dst_stride = group_axis.dst_stride};
                      rows.across = across;
                      if (across) {
                        const std::int64_t first = item * per_item;
                        src_offset += first * program.period_src_bytes;
                        dst_offset += first * period;
                        rows.count = tile.rows.extent;
                        rows.bytes = std::min(per_item * period, row_bytes - first * period);
                      } else if (grouped) {
                        const std::int64_t first = item * per_item;
                        src_offset += first * group_axis.src_stride;
                        dst_offset += first * group_axis.dst_stride;
                        rows.count = tile.rows.extent;
                        rows.groups = std::min(per_item, group_axis.extent - first);
                      } else if (split_rows) {
                        const std::int64_t row = item / items_per_row;
                        const std::int64_t first = (item % items_per_row) * per_item;
                        first_row = row;
                        src_offset += row * tile.rows.src_stride + first * program.period_src_bytes;
                        dst_offset += row * tile.rows.dst_stride + first * period;
                        rows.bytes = std::min(per_item * period, row_bytes - first * period);
                      } else {
                        const std::int64_t first = item * per_item;
                        src_offset += first * tile.rows.src_stride;
                        dst_offset += first * tile.rows.dst_stride;
                        rows.count = std::min(per_item, tile.rows.extent - first);
                        first_row = first;
                      }
                      if (!lined) {
                        tile.fn(program, rows, src + src_offset, dst + dst_offset, src_end);
                        return;
                      }
                      run_lined_rows(tile, rows, first_row, src + src_offset, dst + dst_offset, src_end);
                    });
    });
    return;
  }
  if (plan.shuffle && plan.shuffle->destination_group.extent > 1) {
    run_staged_in_destination_order(plan, src, dst, split, outer_count);
    return;
  }
  if (plan.shuffle && plan.shuffle->segment_copy.copy != nullptr) {
    run_staged_plan(plan, src, dst, split, outer_count);
    return;
  }
  if (plan.shuffle) {
    const shuffle_tile& tile = *plan.shuffle;
    const bool two_levels = tile.repeat.outer.extent > 1;
    const permute_axis& split_axis = two_levels ? tile.repeat.outer : tile.repeat.inner;
    const auto [chunk, per_item, run_items, items_per_outer] = shuffle_split_of(plan, split, outer_count);
    // A plan streams de-interleave rows that its strides keep on cache lines, which assumes a
    // destination that starts on a line. One that does not (numpy's buffers are 16-byte aligned)
    // would stream each row's middle lines and write its partial first and last lines with
    // ordinary stores, a line shared by two rows going both ways: s2d NCHW 16 MiB into outputs
    // 16 or 32 bytes off a line took 2.2x as long as into aligned ones (4.4 against 1.9 ms, f32
    // b2). Such rows shorter than streamed_unaligned_deinterleave_run_bytes go out with ordinary
    // stores instead: 1.4-1.6x (4.4 -> 2.7 ms; b4 f32 4.6 -> 2.9; b8 u8 6-8 -> 4.6-5.3 ms).
    // Rows that continue one another along the call's inner repeat keep streaming, each way as
    // one output through its own line sink (b_way_sunk_rows): 16 MiB grid at --dst-offset 16,
    // three alternations against ordinary stores, s2d NCHW and NCHW_VECT_C 1.07-1.16x per family
    // (f32 median 0.56 -> 0.61 of memcpy).
    const bool rows_sunk = tile.repeat.sinks_rows && rows_fit_line_sinks(plan);
    const std::byte* const src_end = source_end(tile, src);
    const bool off_lines = tile.repeat.streaming && !tile.interleave &&
                           reinterpret_cast<std::uintptr_t>(dst) % 64 != 0 &&
                           way_row_bytes(plan) < streamed_unaligned_deinterleave_run_bytes && !rows_sunk;
    const bool on_threads_without_streaming = tile.streams_on_one_thread_only && split.threads > 1;
    split_items(outer_count * items_per_outer, split, [&](std::int64_t begin, std::int64_t end) {
      for_each_item(plan.outer, items_per_outer, begin, end,
                    [&](std::int64_t src_offset, std::int64_t dst_offset, std::int64_t item) {
                      const std::int64_t first = run_items == 1 ? 0 : (item % run_items) * chunk;
                      const std::int64_t first_split = (run_items == 1 ? item : item / run_items) * per_item;
                      shuffle_repeat repeat = tile.repeat;
                      if (off_lines || on_threads_without_streaming) repeat.streaming = false;
                      repeat.readable_end = src_end;
                      permute_axis& part = two_levels ? repeat.outer : repeat.inner;
                      part.extent = std::min(per_item, split_axis.extent - first_split);
                      const std::byte* from =
                          src + src_offset + first * tile.run.src_stride + first_split * split_axis.src_stride;
                      std::byte* to =
                          dst + dst_offset + first * tile.run.dst_stride + first_split * split_axis.dst_stride;
                      tile.fn(from, to, std::min(chunk, tile.run.extent - first), tile.offsets.data(), repeat);
                    });
    });
    return;
  }

  if (plan.outer.empty() && plan.row.extent == 1 && plan.col.extent == 1) {
    // The whole tensor is one contiguous run.
    const std::int64_t chunks = std::max<std::int64_t>(1, plan.total_bytes / split.item_bytes);
    const std::int64_t parts = std::min<std::int64_t>(chunks, split.threads);
    split_items(parts, split, [&](std::int64_t begin, std::int64_t end) {
      const std::int64_t first = detail::split_point(plan.total_bytes, parts, begin);
      const std::int64_t last = detail::split_point(plan.total_bytes, parts, end);
      std::memcpy(dst + first, src + first, static_cast<std::size_t>(last - first));
    });
    return;
  }

  // Work items are blocks of planes of whole tiles, or, without a plane axis, blocks of rows of
  // whole columns.
  const bool by_plane = plan.plane.extent > 1;
  const permute_axis& split_axis = by_plane ? plan.plane : plan.row;
  const std::int64_t row_bytes = plan.col.extent * static_cast<std::int64_t>(plan.width);
  const std::int64_t unit_bytes = by_plane ? plan.row.extent * row_bytes : row_bytes;
  const std::int64_t per_item =
      std::clamp<std::int64_t>(split.item_bytes / std::max<std::int64_t>(unit_bytes, 1), 1, split_axis.extent);
  const std::int64_t items_per_outer = (split_axis.extent + per_item - 1) / per_item;
  const tile_shape whole = whole_tile_of(plan);
  split_items(outer_count * items_per_outer, split, [&](std::int64_t begin, std::int64_t end) {
    for_each_item(plan.outer, items_per_outer, begin, end,
                  [&](std::int64_t src_offset, std::int64_t dst_offset, std::int64_t item) {
                    const std::int64_t first = item * per_item;
                    tile_shape part = whole;
                    (by_plane ? part.planes : part.rows) = std::min(per_item, split_axis.extent - first);
                    plan.kernel.copy(src + src_offset + first * split_axis.src_stride,
                                     dst + dst_offset + first * split_axis.dst_stride, part, plan.width);
                  });
  });
}

std::string kernel_name(const permute_plan& plan) {
  if (plan.gather) return plan.gather->fn == gather_rows_avx2 ? "gather_avx2" : "gather_avx512vbmi";
  if (!plan.shuffle) return plan.kernel.name;
  return std::string(plan.shuffle->interleave ? "interleave" : "deinterleave") +
         std::to_string(plan.shuffle->offsets.size()) + "_x" + std::to_string(plan.width * 8) +
         (plan.shuffle->transposes ? "_transposing_" : "_") + std::string(to_string(plan.shuffle->level));
}

std::string plan_kind(const permute_plan& plan) {
  std::string kind = kernel_name(plan);
  if (plan.shuffle && plan.shuffle->segmented != nullptr) {
    kind += "+segmented";
  } else if (plan.shuffle && plan.shuffle->segment_copy.copy != nullptr) {
    kind += "+staged";
  }
  return kind;
}

std::string describe(const permute_plan& plan) {
  auto axis_text = [](const permute_axis& axis) {
    return std::to_string(axis.extent) + ":" + std::to_string(axis.src_stride) + "/" + std::to_string(axis.dst_stride);
  };
  std::string text = "outer [";
  for (std::size_t k = 0; k < plan.outer.size(); ++k) {
    if (k != 0) text += " ";
    text += axis_text(plan.outer[k]);
  }
  if (plan.gather) {
    const gather_program& program = *plan.gather->program;
    char steps[32];
    std::snprintf(steps, sizeof steps, "%.2f", program.steps_per_chunk());
    text += "] rows " + axis_text(plan.gather->rows) + " stream " + axis_text(plan.gather->stream) + " block " +
            std::to_string(plan.gather->block_bytes) + " period " + std::to_string(program.period_dst_bytes) +
            (program.single_block ? " single-block" : "") + " steps/chunk " + steps;
    if (!program.chunk_groups.empty()) {
      std::snprintf(steps, sizeof steps, "%.2f",
                    static_cast<double>(program.group_windows.size()) / static_cast<double>(program.chunk_end.size()));
      text += " (in " + std::to_string(program.chunk_groups.size()) + " groups of chunks, " + steps + " loads/chunk)";
    }
    if (!plan.gather->lined_programs.empty()) {
      double most = 0;
      for (const auto& lined : plan.gather->lined_programs) most = std::max(most, lined->steps_per_chunk());
      std::snprintf(steps, sizeof steps, "%.2f", most);
      text +=
          std::string(has_fitted_programs(*plan.gather) ? " (on source lines where they fit " : " (on source lines ") +
          steps +
          (plan.gather->line_phase_rows > 1 ? ", rows in " + std::to_string(plan.gather->line_phase_rows) + " phases"
                                            : std::string()) +
          (plan.gather->lined_programs.front()->joined_periods > 1
               ? ", periods joined by " + std::to_string(plan.gather->lined_programs.front()->joined_periods)
               : std::string()) +
          (plan.gather->lined_programs.front()->chunk_groups.empty() ? "" : ", in groups of chunks") + ")";
    }
    if (plan.gather->fn == gather_rows_avx512vbmi && gather_strips_stream(plan)) text += " streaming";
    if (plan.gather->prefetch_next_strip) text += " prefetching the next strip";
    if (plan.gather->wide_streamed_strips) text += ", long rows in 8 KiB strips";
    if (gather_groups_rows(plan)) {
      text += " in row groups";
    } else if (plan.gather->rows_share_source) {
      text += " across rows";
    }
  } else if (plan.shuffle) {
    text += "] repeat " + axis_text(plan.shuffle->repeat.outer) + " " + axis_text(plan.shuffle->repeat.inner) +
            " run " + axis_text(plan.shuffle->run) + " ways " + std::to_string(plan.shuffle->offsets.size()) +
            (plan.shuffle->segmented != nullptr           ? std::string(" segmented")
             : plan.shuffle->segment_copy.copy != nullptr ? std::string(" staged by ") + plan.shuffle->segment_copy.name
                                                          : std::string()) +
            (plan.shuffle->repeat.streaming ? " streaming" : "") +
            (plan.shuffle->streams_short_staged_rows ? " short rows too" : "") +
            (plan.shuffle->stages_far_stretch ? " through a second buffer" : "") +
            (plan.shuffle->repeat.source_prefetch_bytes > 0
                 ? " prefetching " + std::to_string(plan.shuffle->repeat.source_prefetch_bytes) + " ahead"
                 : std::string()) +
            (plan.shuffle->repeat.prefetches_next_run ? " prefetching the next run" : "") +
            (plan.shuffle->repeat.realigned_run_bytes != realigned_deinterleave_run_bytes
                 ? " realigning rows from " + std::to_string(plan.shuffle->repeat.realigned_run_bytes) + " bytes"
                 : std::string()) +
            (plan.shuffle->repeat.sinks_rows ? "" : " row by row") +
            (plan.shuffle->repeat.assembled ? " assembled" : "") +
            (plan.shuffle->destination_group.extent > 1
                 ? " in destination order across " + axis_text(plan.shuffle->destination_group)
                 : std::string()) +
            (plan.shuffle->destination_group_part > 0
                 ? " in parts of " + std::to_string(plan.shuffle->destination_group_part)
                 : std::string());
  } else {
    text += "] ";
    if (plan.plane.extent > 1) text += "plane " + axis_text(plan.plane) + " ";
    text += "row " + axis_text(plan.row) + " col " + axis_text(plan.col);
  }
  text += " width " + std::to_string(plan.width) + " (" + kernel_name(plan) + ")";
  if (plan.on_more_threads) text += "; on more threads: " + describe(*plan.on_more_threads);
  return text;
}

}  // namespace regrid::kernels
