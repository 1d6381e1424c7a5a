// The permute engine behind every SpaceToDepth / DepthToSpace variant.
//
// A problem is a list of axes, each with an extent and a source and destination
// stride in bytes, plus an element width. Iterating all axes and copying one element
// per index is the whole semantics. plan_permute normalizes the problem (drops size-1
// axes, orders by destination stride, fuses axes that stay adjacent in both tensors,
// folds a contiguous innermost axis into a wider element) and picks a tile kernel by
// the resulting element width: the length of the contiguous run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/fixed_vector.hpp"
#include "kernels/stream_store.hpp"
#include "regrid/runtime.hpp"
#include "regrid/tensor.hpp"
#include "runtime/cpu_features.hpp"

namespace regrid::kernels {

/// The most axes a problem has: batch, channel, K coarse and K block axes, a vector axis.
inline constexpr std::size_t max_permute_axes = 2 * max_rank + 4;

struct permute_axis {
  std::int64_t extent = 1;
  std::int64_t src_stride = 0;  ///< bytes
  std::int64_t dst_stride = 0;  ///< bytes

  friend bool operator==(const permute_axis&, const permute_axis&) = default;
};

/// A planes x rows x cols block of elements; strides in bytes.
struct tile_shape {
  std::int64_t planes = 1;
  std::int64_t rows = 1;
  std::int64_t cols = 1;
  std::int64_t src_plane = 0;
  std::int64_t src_row = 0;
  std::int64_t src_col = 0;
  std::int64_t dst_plane = 0;
  std::int64_t dst_row = 0;
  std::int64_t dst_col = 0;
};

/// Copies a tile of `width`-byte elements between strided layouts.
using tile_copy_fn = void (*)(const std::byte* src, std::byte* dst, const tile_shape& shape, std::size_t width);

struct tile_kernel {
  tile_copy_fn copy = nullptr;
  const char* name = "";
};

/// Returns the scalar tile kernel for elements of `width` bytes.
tile_kernel select_tile_kernel(std::size_t width) noexcept;
/// Vector tile kernels for runs of any width (the element is a contiguous run, not a number).
/// `streaming`: the output is larger than the cache; the avx512 kernel then writes the whole
/// cache lines of runs of 128 bytes or more with non-temporal stores, and those of runs of 65-127
/// bytes in tiles that read several source streams in turn (which it also prefetches) or whose
/// rows continue long destination columns, and joins runs of 12-63 bytes into whole lines where
/// they continue the destination. `far_past_cache`: the output is far larger than the cache
/// (64 MiB or more); runs of 12-63 bytes are then joined in tiles that read several source
/// streams in turn too. `joins_source_stretches` false: tiles that read the source in one stretch
/// are not joined (copied the ordinary way), so below far_past_cache no tile is.
/// The shortest runs (under a line) the streaming avx512 kernel joins into whole lines (see
/// runs.inc).
inline constexpr std::size_t min_joined_run_bytes = 12;
tile_kernel run_tile_kernel_avx2(std::size_t width, bool streaming, bool far_past_cache = false,
                                 bool joins_source_stretches = true) noexcept;
tile_kernel run_tile_kernel_avx512(std::size_t width, bool streaming, bool far_past_cache = false,
                                   bool joins_source_stretches = true) noexcept;

/// The source bytes one column of a tile spans over its rows, where each column's rows lie within
/// max_prefetched_column_bytes and step forward by less than the columns do, in tiles of two or
/// more planes and columns: what plane_prefetching_run_kernel_avx512 fetches a plane ahead per
/// column. 0 for other tiles.
inline constexpr std::int64_t max_prefetched_column_bytes = 256;
[[nodiscard]] inline std::int64_t prefetched_column_bytes(const tile_shape& t, std::size_t width) noexcept {
  const std::int64_t span = (t.rows - 1) * t.src_row + static_cast<std::int64_t>(width);
  const std::int64_t column_step = t.src_col < 0 ? -t.src_col : t.src_col;
  const bool rows_within_columns = t.rows == 1 || (t.src_row > 0 && span <= column_step);
  if (t.planes < 2 || t.cols < 2 || !rows_within_columns || span > max_prefetched_column_bytes) return 0;
  return span;
}
/// Run copies (as run_tile_kernel_avx512 makes them, ordinary stores) that, during each plane's
/// first row, fetch every column's prefetched_column_bytes of the next plane into L1.
tile_kernel plane_prefetching_run_kernel_avx512() noexcept;
/// AVX2 run copies of 5-31 bytes (other than 8 and 16) whose columns continue one another in the
/// destination (dst_col == width) and lie a power of two past the run or more apart in the source:
/// each column but a row's last moves as one wider piece whose tail the next column overwrites.
/// Other tiles take the plain copy.
tile_kernel spilling_run_kernel_avx2() noexcept;

/// Bytes a staging buffer holds past the segments a staging tile kernel copies to or from it.
inline constexpr std::size_t staging_slack_bytes = 64;
/// Segment copies of `width` bytes for staged shuffles (shuffle_tile::segment_copy), where one side
/// is a staging buffer with staging_slack_bytes past the tile: `pack` copies strided segments into
/// the buffer (dst), else out of it (src). They may write (pack) or read (unpack) buffer bytes past
/// a segment's end, so a packing tile must visit the buffer in increasing address order; the
/// strided side is touched exactly. The avx512 level.
tile_kernel staging_tile_kernel_avx512(std::size_t width, bool pack) noexcept;

/// 2-D transposes of 8-byte elements, for tiles whose rows are contiguous in the source and whose
/// columns are contiguous in the destination (row.src_stride = col.dst_stride = 8): 8 x 8 blocks
/// transposed in registers.
tile_kernel transpose_tile_kernel_avx512() noexcept;

/// De-interleaves whose destination rows do not all start on cache lines re-cut each row's output
/// vectors into whole, aligned lines (one two-input permute per vector) where a row is at least this
/// long, so that no store splits across two lines; shorter rows keep the plain unaligned stores.
/// The default of shuffle_repeat::realigned_run_bytes; the planner lowers it on Intel's cores.
inline constexpr std::int64_t realigned_deinterleave_run_bytes = 1024;

/// Streamed de-interleaves of at most this many ways whose rows continue one another along the
/// inner repeat (each way's output one contiguous row after another) but do not start on cache
/// lines stream each way as one output through its own line sink.
inline constexpr std::int64_t max_sunk_deinterleave_ways = 8;
/// Rows shorter than a line have no sinks.
inline constexpr std::int64_t min_sunk_deinterleave_row_bytes = 64;

/// The same for rows that continue along the outer repeat, the inner positions apart: one sink
/// per inner position and way, at most this many.
inline constexpr std::int64_t max_sunk_deinterleave_rows = 16;
/// ... and at most this many where the planner allows it (shuffle_repeat::most_sunk_rows): the
/// 8 x 8 rows of s2d channels-first K = 3 b8 far past the cache.
inline constexpr std::int64_t max_far_sunk_deinterleave_rows = 64;

/// The axes a shuffle call walks besides its run: every inner position at every outer one
/// (extent 1: absent).
struct shuffle_repeat {
  permute_axis outer;
  permute_axis inner;
  /// The output is larger than the cache: the avx512 kernels write whole output vectors of runs
  /// whose destination rows start on cache lines with non-temporal stores, the avx2 interleaves
  /// of 2, 4, 8 and 16 ways from the first position whose output starts a line.
  bool streaming = false;
  /// The output is far past the cache (64 MiB or more): with `streaming`, the avx2 kernels'
  /// unstaged de-interleaves of 2 and 4 ways whose rows all reach a line at the same position,
  /// 2-way ones and 3-way ones of 4-byte elements or wider, rows of 4 KiB or more, whose rows reach
  /// lines at different positions (3-way ones at any; shifted into lines in registers), and
  /// their 3- and 9-way interleaves of output rows of streamed_unaligned_interleave_bytes or more,
  /// stream too.
  bool far_past_cache = false;
  /// Short runs moved in one pass instead of staging them through a buffer (avx512 kernels; where,
  /// see permute.cpp). With P = 64 / B bytes per piece:
  ///   interleave:    for each 64-byte output vector k: piece j = row j's bytes [k*P, k*P + P);
  ///                  vector = permute(concat(pieces)), stored whole
  ///   de-interleave: vector = permute(input bytes [64k, 64k + 64)); piece j stored to row j
  /// with masked accesses for the run's last partial vector.
  bool assembled = false;
  /// The repeat's axes are walked in the source's order (the nearest-strided ones in the call),
  /// not the destination's (see source_order_repeat in permute.cpp).
  bool by_source = false;
  /// A streamed de-interleave's vector steps prefetch the source this many bytes ahead into the
  /// L2 cache (0: none; see streamed_deinterleave_source_prefetch_bytes in permute.cpp).
  std::int64_t source_prefetch_bytes = 0;
  /// The avx2 kernels' unstaged de-interleaves of elements of up to 8 bytes prefetch into L1, step
  /// by step, the source of the run after each one where it does not continue that run (runs of
  /// 512 bytes or more, in calls that do not stream; see deinterleaves_prefetch_next_run in
  /// permute.cpp).
  bool prefetches_next_run = false;
  /// De-interleave rows of at least this many bytes whose destinations do not all start on cache
  /// lines are re-cut into whole lines (see realigned_deinterleave_run_bytes); the avx512 kernels.
  std::int64_t realigned_run_bytes = realigned_deinterleave_run_bytes;
  /// A streamed de-interleave whose ways' rows continue one another but do not start on cache
  /// lines streams each way as one output through a line sink (b_way_sunk_rows); false: row by
  /// row, each re-cut into lines, the lines two rows share written with ordinary stores.
  bool sinks_rows = true;
  /// The most sinks a de-interleave whose rows continue along the outer repeat takes (inner
  /// positions x ways; b_way_sunk_row_blocks): max_sunk_deinterleave_rows, or up to
  /// max_far_sunk_deinterleave_rows where the planner says so.
  std::int64_t most_sunk_rows = max_sunk_deinterleave_rows;
  /// Loads may read bytes of the source that no run of the call holds, never at or past this (null:
  /// none). The AVX2 kernels' run tails load whole vectors up to it (b_way_step::padded_tail).
  const std::byte* readable_end = nullptr;
};

/// Interleaves whose output rows do not all start on cache lines stream from each row's first
/// line on when a row is at least this long; shorter rows stream where they continue one another
/// (the inner repeat's destination stride is one row), as one output.
inline constexpr std::int64_t streamed_unaligned_interleave_bytes = 4096;

/// The most ways a shuffle takes.
inline constexpr std::int64_t max_shuffle_ways = 64;
/// Shuffles of up to this many ways keep their vectors in registers; wider ones (32, 64) spill.
inline constexpr std::int64_t max_register_ways = 16;

/// B-way interleave (dst[r * B + j] = src[offsets[j] + r]) or de-interleave
/// (dst[offsets[j] + r] = src[r * B + j]) of `length` positions of width-byte elements; offsets
/// in bytes. One per ISA, for B in {2, 3, 4, 8, 9, 16} and width in {1, 2, 4, 8}, and at the avx2
/// and avx512 levels also for B in {2, 4, 8, 16} and width in {16, 32} (the
/// transposing_shuffle_kernel_* have B in {32, 64}); null otherwise.
/// The run is repeated at every position of `repeat`.
using shuffle_fn = void (*)(const std::byte* src, std::byte* dst, std::int64_t length, const std::int64_t* offsets,
                            const shuffle_repeat& repeat);
shuffle_fn shuffle_kernel_scalar(std::size_t width, std::int64_t ways, bool interleave);
shuffle_fn shuffle_kernel_avx2(std::size_t width, std::int64_t ways, bool interleave);
shuffle_fn shuffle_kernel_avx512(std::size_t width, std::int64_t ways, bool interleave);
/// Width 1 only (null otherwise): the avx512 kernels built with AVX512-VBMI byte permutes.
shuffle_fn shuffle_kernel_avx512vbmi(std::size_t width, std::int64_t ways, bool interleave);
/// Widths 1, 2, 4 and 8, 32 or 64 ways, and the 16-way de-interleave of 2-byte elements (null
/// otherwise): the shuffle as block transposes in
/// registers (8 x 8 elements, 4 x 4 for 8-byte ones at the avx2 level; bytes 16 x 16 in each
/// 128-bit lane). With repeat.streaming an interleave writes its output with streaming stores; a
/// de-interleave ignores it.
shuffle_fn transposing_shuffle_kernel_avx2(std::size_t width, std::int64_t ways, bool interleave) noexcept;
shuffle_fn transposing_shuffle_kernel_avx512(std::size_t width, std::int64_t ways, bool interleave) noexcept;

/// The near side of a segmented shuffle (see shuffle_tile::segmented): planes of rows x cols
/// segments of `segment` bytes each (B ways of `length` elements), contiguous within a segment
/// only, while the far side continues across a plane's segments (row-major) and moves `far_plane`
/// bytes from one plane to the next:
///
///   for plane p, segment (r, c), position q < length, way j, with n = (r * cols + c) * length + q:
///     near: p * planes.stride + r * rows.stride + c * cols.stride + (q * B + j) * width
///     far:  p * far_plane + offsets[j] + n * width
struct near_segments {
  struct axis {
    std::int64_t extent = 1;
    std::int64_t stride = 0;  ///< near side, bytes
  };
  std::int64_t length = 0;
  std::int64_t segment = 0;
  axis planes;
  axis rows;
  axis cols;
  std::int64_t far_plane = 0;
};
/// Interleave: far = src, near = dst; de-interleave: near = src, far = dst.
using segmented_shuffle_fn = void (*)(const std::byte* src, std::byte* dst, const near_segments& near,
                                      const std::int64_t* offsets);
/// The B-way shuffles of shuffle_kernel_avx2 (width 1, 2, 4, 8; B in {2, 3, 4, 8, 9, 16}) reading or
/// writing their near side in place, for segments of a multiple of 16 bytes (null otherwise).
segmented_shuffle_fn segmented_shuffle_kernel_avx2(std::size_t width, std::int64_t ways, bool interleave,
                                                   std::int64_t segment_bytes) noexcept;

/// How run_permute cuts an unstaged shuffle plan into work items: blocks of `per_item` positions of
/// the outermost repeat axis the call walks (the split axis), each with whole runs, or chunks of
/// `chunk` positions of one long run when nothing repeats. Worked out when the plan is made: its
/// three divisions cost 10-15 ns on every call.
struct shuffle_split {
  std::int64_t chunk = 1;
  std::int64_t per_item = 1;
  std::int64_t run_items = 1;        ///< chunks per run
  std::int64_t items_per_outer = 1;  ///< work items per position of the plan's outer axes
};

/// A B-way shuffle over a run axis whose one side is contiguous, chosen instead of a tile.
struct shuffle_tile {
  shuffle_fn fn = nullptr;
  bool interleave = true;
  isa level = isa::scalar;  ///< the ISA the kernel was built for
  bool transposes = false;  ///< the kernel is a transposing_shuffle_kernel_*'s
  detail::fixed_vector<std::int64_t, max_shuffle_ways>
      offsets;            ///< bytes: source rows (interleave) or destination rows
  permute_axis run;       ///< the run: src stride = width (interleave) or dst stride = width
  shuffle_repeat repeat;  ///< outer axes each call walks too (extent 1 if none)
  /// Set for short runs whose rows continue across the repeat axes on the side the offsets
  /// address (the far side: src for interleave, dst for de-interleave), i.e. far stride of
  /// repeat.inner = run bytes and, unless its extent is 1, far stride of repeat.outer =
  /// inner extent * run bytes. Each call then stages batches of near-side segments (all B ways
  /// of one run, B * run bytes) in an L1 buffer with this run copy, so the shuffle sees one long
  /// run per batch instead of one short run per repeat position.
  tile_kernel segment_copy;
  /// Set (AVX2; segments of whole 32-byte vectors, or of 16 bytes, or 48 for de-interleaves; see
  /// choose_shuffle) where the shuffle walks the near side's segments in place instead: no buffer,
  /// one pass (segment_copy stays set, for the rules that ask whether the plan stages).
  segmented_shuffle_fn segmented = nullptr;
  /// Set (staged de-interleaves far past the cache; see streams_short_staged_rows in permute.cpp)
  /// where each call streams its ways' rows however few bytes of each it writes, and the blocks
  /// the staged run cuts the repeat into give each way min_far_staged_block_row_bytes or more per
  /// call; else a call streams rows of 2 KiB or more only, and blocks are cut by the source's span.
  bool streams_short_staged_rows = false;
  /// Set (staged de-interleaves whose output streams and whose calls group outer positions; see
  /// stages_far_stretch in permute.cpp) where the ways' rows at each grouped position, off cache
  /// lines, together fill one stretch of the destination: each call de-interleaves into a second
  /// L1 buffer, which then streams out as whole lines.
  bool stages_far_stretch = false;
  /// Set (extent > 1; staged interleaves whose output streams) where the segments continue one
  /// another on the destination across this axis and then across repeat.inner (dst stride = the
  /// segment's bytes, extent * segment = repeat.inner's dst stride): d2s channels-first K = 3, whose
  /// output rows h * b + bh are b calls apart. Each call then shuffles every position of it, lays
  /// the segments out in destination order and streams that stretch of output. Not among the
  /// plan's outer axes.
  permute_axis destination_group;
  /// Set (far past the cache, groups of source pixels; see destination_group_part in permute.cpp)
  /// where each work item takes this many of the group's positions, not all of them, so that one
  /// batch holds every position of repeat.inner; each position's part of the stretch is then
  /// streamed on its own. Taken only into outputs that start on a cache line. 0: the whole group.
  std::int64_t destination_group_part = 0;
  /// Set (a Zen 5's de-interleaves whose short rows stream through line sinks into outputs under
  /// 16 MiB; see sinks_short_rows_into_cache_sized_outputs in permute.cpp) where only a call on one
  /// thread streams: on more threads the rows go out with ordinary stores, and the output stays in
  /// the last-level cache.
  bool streams_on_one_thread_only = false;
  shuffle_split split;  ///< set by plan_permute; run_permute uses it for unstaged plans
  /// Bytes from the source's first byte to one past its last (0: strides run backwards, unknown):
  /// everything in between belongs to the caller's source buffer, so kernels may read it.
  std::int64_t source_span = 0;
};

struct gather_program;  // kernels/permute/gather.hpp
/// Rows a gather call writes: `groups` groups of `count` rows of `bytes` output bytes each, every
/// row starting at the start of a period; row r of group g starts at g * group_stride + r * stride.
struct gather_rows {
  std::int64_t count = 1;
  std::int64_t src_stride = 0;
  std::int64_t dst_stride = 0;
  std::int64_t bytes = 0;
  /// Each strip of rows prefetches the next one's lines (gather_tile::prefetch_next_strip).
  bool prefetch = false;
  /// Long rows go in strips of periods across every row (gather_tile::rows_share_source) rather
  /// than of one row.
  bool across = false;
  /// Each strip is built in an L1 buffer and then written out with streaming stores (the
  /// avx512vbmi gather; set for outputs of streamed_gather_output_bytes or more whose period spans
  /// more than one 64-byte chunk or whose rows are long, by gather_streams_strips in permute.cpp,
  /// wherever stream_in_place is not).
  bool stream = false;
  /// Each strip's whole periods are built in place, each chunk a whole cache line written with a
  /// streaming store (their part-periods with ordinary stores), for outputs past the cache whose
  /// every row starts on a line and whose periods are whole lines (gather_streams_in_place); the
  /// avx512vbmi gather. Not with `stream`.
  bool stream_in_place = false;
  /// Long rows whose strips stream (`stream`) go in strips of 8 KiB rather than 4 KiB
  /// (gather_tile::wide_streamed_strips).
  bool wide_strips = false;
  std::int64_t groups = 1;
  std::int64_t group_src_stride = 0;
  std::int64_t group_dst_stride = 0;
};
/// The smallest output whose gather strips stream (gather_rows::stream): well past the last-level
/// cache, unlike streaming_output_bytes. On an Emerald Rapids Xeon (300 MiB L3) the gather cells of
/// 16 MiB ran 0.85x streamed; at 256 MiB streaming won everywhere it was measured: 1.06x / 1.05x
/// (Zen 5, one / two threads), 1.42x (Emerald Rapids, one thread).
inline constexpr std::int64_t streamed_gather_output_bytes = std::int64_t{64} << 20;
/// ... on CPUs of `cores`: a Zen 5 (32 MiB L3 per core complex) streams from streaming_output_bytes
/// on. Same-run A/B there, every 16 MiB gather cell of the grid (140), two alternations: 1.18x /
/// 1.15x on one / two threads (median 0.43 -> 0.53 and 0.46 -> 0.55 of memcpy over the 91 of
/// s2d NHWC and channels-last K = 3 CRD, d2s NHWC CRD and s2d NHWC DCR of bytes; 1.13x / 1.10x over
/// the other 49), 12 cells losing 0.7-0.9x (d2s channels-last K = 3 CRD of 2-byte elements, some
/// two-thread d2s NHWC CRD). An earlier A/B there had two threads at 0.91x (hence 64 MiB on every
/// CPU until then); this one did not reproduce it. On a Zen 4 (family 19h, model 11h, 2 vCPUs)
/// too: each of the 123 gather cells of the 16 MiB grid run both ways in one process, alternating,
/// 11 times, then again in the other order: 1.25x / 1.19x on one / two threads (per family
/// 1.09-1.37x; 3 / 7 cells under 0.95x, the least s2d channels-last K = 3 CRD b3 C3 of bytes at
/// 0.78x / 0.75x). (Planning for a Zen 4 keeps the run copies that gathers streaming into cache-sized
/// outputs replace on a Zen 5: see gather_beats.)
[[nodiscard]] inline std::int64_t streamed_gather_output_bytes_on(runtime::core_kind cores) {
  return runtime::takes_amd_rules(cores) ? static_cast<std::int64_t>(streaming_output_bytes)
                                         : streamed_gather_output_bytes;
}
/// Writes the rows from dst on, reading src; never reads at or past src_end.
using gather_fn = void (*)(const gather_program& program, const gather_rows& rows, const std::byte* src, std::byte* dst,
                           const std::byte* src_end);

/// The default of gather_tile::grouped_rows_bytes. Same-run A/B against one call per outer
/// position, the 86 grid cells whose rows held under 8 KiB: 2-8 KiB 0.6-1.5x, no better on the
/// whole; under 2 KiB (19 cells) 1.17x at 64 KiB, 1.27x at 1 MiB, 1.21x at 16 MiB (d2s NHWC CRD,
/// 2-3 rows of 444-720 bytes: 1.3-1.45x).
inline constexpr std::int64_t default_grouped_gather_rows_bytes = 2 * 1024;

/// A periodic byte gather (see gather.hpp), chosen instead of a tile or shuffle for short runs.
struct gather_tile {
  gather_fn fn = nullptr;
  std::shared_ptr<const gather_program> program;
  /// The same gather with its windows on source cache lines (gather_program_for's line_phase), run
  /// instead where the source starts on a line (empty: none). Every source stride the walk steps by
  /// but the rows' is a multiple of 64 bytes, so a row's periods all start at its offset within a
  /// line, and rows r and r + line_phase_rows at the same one: lined_programs[j] serves rows j,
  /// j + line_phase_rows, ... (one program per row there is, up to line_phase_rows).
  std::vector<std::shared_ptr<const gather_program>> lined_programs;
  std::int64_t line_phase_rows = 1;
  permute_axis stream;           ///< the axis continuing the destination blocks: dst stride = block_bytes
                                 ///< (extent 1 for a single-block program: rows of one block)
  permute_axis rows;             ///< the next axis out, walked inside a call (extent 1 if none)
  std::int64_t block_bytes = 0;  ///< D: the destination block the inner axes form
  std::int64_t source_span = 0;  ///< bytes from the source's first byte past its last
  /// Each strip prefetches the next one's source lines (and its destination lines where the strip
  /// is not streamed), an order the hardware prefetchers do not follow; set far past the cache.
  bool prefetch_next_strip = false;
  /// Long rows whose strips stream go in strips of 8 KiB rather than 4 KiB (gather_rows::
  /// wide_strips): set on a Zen 5 for outputs in its last-level cache whose periods are long, where
  /// a strip of 4 KiB holds too few periods to repay each chunk group's set-up.
  bool wide_streamed_strips = false;
  /// A call whose rows hold fewer bytes than this in all, over an innermost outer axis of several
  /// positions, walks that axis too, as groups of rows (gather_rows::groups): each chunk's set-up
  /// then serves more rows. plan_permute sets it per CPU (see grouped_gather_rows_bytes_of in
  /// permute.cpp).
  std::int64_t grouped_rows_bytes = default_grouped_gather_rows_bytes;
  /// The rows read the same source lines (the rows axis steps less than a period's source), so
  /// that calls take every row for a stretch of periods, and strips every row (gather_rows::across).
  bool rows_share_source = false;
};

struct permute_plan {
  detail::fixed_vector<permute_axis, max_permute_axes> outer;  ///< iterated outermost first
  permute_axis plane;     ///< third-innermost axis, walked inside a tile call when tiles are small (extent 1 if not)
  permute_axis row;       ///< second-innermost axis (extent 1 if absent)
  permute_axis col;       ///< innermost axis (extent 1 if absent)
  std::size_t width = 0;  ///< bytes per element after folding
  std::int64_t total_bytes = 0;  ///< bytes moved (0: nothing to do)
  /// The output is written with streaming stores where the kernel has them: it is at least
  /// streaming_output_bytes (kernels/stream_store.hpp), unless plan_permute chose the plan for an
  /// output kept in the cache where that was measured to be faster.
  bool streams = false;
  tile_kernel kernel;
  std::optional<shuffle_tile> shuffle;  ///< set: `outer` plus the shuffle's run cover every axis
  std::optional<gather_tile> gather;    ///< set: `outer`, the stream axis and the program's block cover every axis
  /// Set: run_permute runs this plan instead wherever it shares the work between two or more
  /// threads (the same problem planned for an output kept in the cache; see plan_permute).
  std::shared_ptr<const permute_plan> on_more_threads;
};

/// Normalizes the problem and selects a kernel. Requires element_bytes > 0.
permute_plan plan_permute(std::span<const permute_axis> axes, std::size_t element_bytes);

/// plan_permute through a per-thread cache of the last few problems, keyed by the axes, the element
/// width, the active ISA and gather forcing. The one-shot API plans on every call, and planning
/// (0.3-1 us, more where it builds a gather) is as long as copying 64 KiB. The plan stays valid until
/// this thread's next call (a shared pointer's two atomic count updates cost 5-10 ns a call).
const permute_plan& plan_permute_cached(std::span<const permute_axis> axes, std::size_t element_bytes);

/// Tests: plan a gather wherever one exists on this CPU, not only where it is the faster kernel;
/// single_block: only single-block ones (gather_block_program_for), even where a periodic one exists.
enum class gather_forcing : std::uint8_t { off, any, single_block };
void force_gather_for_testing(gather_forcing forcing) noexcept;
/// Tests: let every 2-, 4- and 8-way shuffle that would stage, and whose ISA has the permute,
/// take the assembling kernel (shuffle_repeat::assembled).
void force_assembled_for_testing(bool forced) noexcept;

/// Executes a plan with up to max_threads threads. The plan must describe valid,
/// non-overlapping memory for src and dst.
void run_permute(const permute_plan& plan, const std::byte* src, std::byte* dst, int max_threads);
/// The plan run_permute runs with up to max_threads threads: plan.on_more_threads where it is set
/// and the call shares its work, else `plan`.
const permute_plan& plan_run_on(const permute_plan& plan, int max_threads);
/// The work items run_permute cuts an unstaged shuffle plan (plan.shuffle without segment_copy)
/// into on up to max_threads threads: the plan's own split (shuffle_tile::split), or with the runs
/// of a one-level repeat cut into chunks where its whole runs would not share out evenly.
shuffle_split shuffle_work_items(const permute_plan& plan, int max_threads);

/// Whether run_permute builds a VBMI gather's streamed strips in place with streaming stores
/// (gather_rows::stream_in_place) for this source and destination, rather than through the L1
/// buffer: outputs past the cache whose every chunk is a whole cache line, unlined programs.
bool gather_streams_in_place(const permute_plan& plan, const std::byte* src, const std::byte* dst);

/// The kernel's name, e.g. "interleave2_x32_avx512" or "copy_x64_scalar".
std::string kernel_name(const permute_plan& plan);

/// The kind of plan, for reports: the kernel's name, with "+segmented" where a shuffle runs
/// segment by segment and "+staged" where it goes through a scratch tile, e.g.
/// "deinterleave4_x32_avx512+staged".
std::string plan_kind(const permute_plan& plan);

/// Human-readable form for diagnostics, e.g. "outer [4:+96/+8] tile 3x4 width 8 (copy_x64)".
std::string describe(const permute_plan& plan);

}  // namespace regrid::kernels
