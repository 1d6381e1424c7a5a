// Periodic byte gathers: the permute kernel for short runs on AVX512-VBMI and AVX2.
//
// When the innermost axes of the output form a dense block of D bytes and the next output axis
// continues it (destination stride D) with a source stride S, the output is periodic: byte p of
// an output row comes from
//
//   src[(p / D) * S + map[p % D]]
//
// and the pattern of output chunks repeats every lcm(D, chunk) bytes. A gather program holds, for
// each chunk of one period, the source windows its bytes lie in and the byte index of each output
// byte in them, in one of two layouts (gather_layout):
//
//   pairs_of_64 (VBMI):   64-byte chunks; each step is one vpermt2b over two 64-byte windows (or
//                         vpermb over one), blended into the chunk by its take mask.
//   halves_of_16 (AVX2):  32-byte chunks whose 16-byte halves are built apart; each step is one
//                         vpshufb over a 16-byte window per half (the two loaded into the halves
//                         of one register), ORed into the chunk (bytes a step does not supply
//                         have index 0x80, which vpshufb turns into zero).
//
// Each chunk is then built with a few instructions and one store, whatever the run lengths: a
// C = 3 pixel shuffle costs a few instructions per chunk, where per-run kernels moved 2-3 bytes per
// step.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/permute/permute.hpp"
#include "kernels/prefetch.hpp"

namespace regrid::kernels {

/// How a program's steps build a chunk: the kernel it is for (see the top of this file).
enum class gather_layout : std::uint8_t { pairs_of_64, halves_of_16 };

/// The chunk and window sizes of a layout.
[[nodiscard]] constexpr std::int64_t chunk_bytes_of(gather_layout layout) {
  return layout == gather_layout::pairs_of_64 ? 64 : 32;
}
[[nodiscard]] constexpr std::int64_t window_bytes_of(gather_layout layout) {
  return layout == gather_layout::pairs_of_64 ? 64 : 16;
}

/// One step building part of an output chunk.
///
///   pairs_of_64:  index 0-63 window a, 64-127 window b (one vpermt2b; vpermb with one window).
///   halves_of_16: index[0, 32) only: 0-15 within window a (output bytes 0-15) or window b
///                 (bytes 16-31), 0x80 for a byte this step does not supply. A half with fewer
///                 windows than the other repeats one of its own (or, if empty, the other half's)
///                 with no byte taken, so every window a step loads is one the chunk needs.
struct alignas(64) gather_step {
  std::array<std::uint8_t, 64> index{};
  std::int64_t window_a = 0;  ///< source bytes, from the period's source start
  std::int64_t window_b = 0;
  std::uint64_t load_a = 0;  ///< the bytes of each window the chunk needs
  std::uint64_t load_b = 0;  ///< 0: no second window (pairs_of_64), or none taken from it
  std::uint64_t take = 0;    ///< the output bytes of the chunk this step supplies
};

/// A program's line_phase where its windows start at their first byte (see gather_program_for).
inline constexpr std::int64_t unlined = -1;

/// Consecutive chunks of a period built together (see grouped_gather_program_for): the union of
/// their source bytes is covered by `windows` 64-byte windows, each loaded once per period, and
/// every chunk of the group takes (windows + 1) / 2 steps, step s permuting windows 2s and 2s + 1
/// (or window 2s alone, the last of an odd count).
struct gather_chunk_group {
  std::uint32_t first_chunk = 0;
  std::uint32_t chunks = 0;
  std::uint32_t first_window = 0;  ///< into gather_program::group_windows
  std::uint32_t windows = 0;
  std::uint32_t first_step = 0;  ///< into gather_program::group_steps, chunk after chunk
};
inline constexpr int max_group_chunks = 4;
/// The most windows a group may have (the kernel's limit), and the most groups take by default
/// (see grouped_gather_program_for).
inline constexpr int max_group_windows = 10;
inline constexpr int max_near_group_windows = 6;

struct gather_program {
  std::vector<gather_step> steps;        ///< chunk after chunk
  std::vector<std::uint32_t> chunk_end;  ///< steps [chunk_end[c - 1], chunk_end[c]) build chunk c
  std::int64_t period_dst_bytes = 0;     ///< lcm(D, chunk); a single block: D rounded up to chunks
  std::int64_t period_src_bytes = 0;     ///< (period_dst_bytes / D) * S
  bool single_block = false;             ///< from gather_block_program_for
  std::int64_t line_phase = unlined;     ///< see gather_program_for
  bool lines_where_they_fit = false;     ///< see gather_program_for
  std::int64_t joined_periods = 1;       ///< see gather_program_for
  std::int64_t reach = 0;                ///< the furthest byte past a period's source start any window reaches
  /// One byte in every source cache line a period's windows cover, from the period's source start
  /// (the union of the windows, every 64 bytes and its last byte).
  std::vector<std::int64_t> prefetch_offsets;
  gather_layout layout = gather_layout::pairs_of_64;
  std::int64_t chunk_bytes = 64;  ///< chunk_bytes_of(layout)
  /// Whole periods built by groups of chunks (empty: chunk by chunk, with `steps`); the part-period
  /// ending a row, and strips whose windows near the source's end, still take `steps`. Their steps'
  /// window_a / window_b are unused: the group's windows are implied by the step's place.
  std::vector<gather_chunk_group> chunk_groups;
  std::vector<std::int64_t> group_windows;  ///< source bytes, from the period's source start
  std::vector<gather_step> group_steps;

  [[nodiscard]] double steps_per_chunk() const {
    return static_cast<double>(steps.size()) / static_cast<double>(chunk_end.size());
  }
};

/// The program, in `layout`, for a block of `inner` axes (outermost first, destination-dense,
/// element `width` bytes) repeated along a stream axis of source stride `stream_src_stride`; null
/// if a period would exceed max_gather_period_bytes. Programs are cached by their key: plans are made on
/// every call, and building one costs microseconds.
///
/// Windows start at the first byte they hold (line_phase = unlined), or, with a line_phase in
/// [0, 64), where the source cache line holding that byte starts, for periods whose source starts
/// line_phase bytes past a line (pairs_of_64 only): each window is then exactly one line, and may start up to
/// line_phase bytes before the period's source. A 64-byte load across two lines costs about as much
/// as two (d2s NCHW CRD b2 of bytes at 64 KiB, modelled alone: 0.41 of memcpy with windows at the
/// first byte, 0.61-0.66 on lines), which outweighs the extra steps of bytes that straddle lines.
/// With `lines_where_they_fit` (and a line_phase), the windows are instead those of the unlined
/// program, each moved back to the start of its first byte's line where every byte it supplies
/// lies in that line: the same steps, and a load across two lines only where the bytes it
/// supplies straddle them. With `joined_periods` of k, each period of the program is k of the
/// plain one's, so that lined windows can serve sources whose plain periods start at different
/// offsets within a line (k periods' source bytes a multiple of 64); null past
/// max_gather_period_bytes.
inline constexpr std::int64_t max_gather_period_bytes = 2048;
std::shared_ptr<const gather_program> gather_program_for(std::span<const permute_axis> inner, std::size_t width,
                                                         std::int64_t stream_src_stride,
                                                         std::int64_t line_phase = unlined,
                                                         gather_layout layout = gather_layout::pairs_of_64,
                                                         bool lines_where_they_fit = false,
                                                         std::int64_t joined_periods = 1);

/// The program for one block of `inner` axes, when no stream continues it within that period (a
/// row of 1023 bytes, a channel of 9 x 9 x 9): its period is the block rounded up to whole chunks,
/// and the bytes past the block have no step. Run as rows of block_bytes each, every chunk goes
/// through the kernel's row-end path (whole chunks stored whole, the last one byte-masked), and the
/// blocks' rows may lie anywhere. Null if the rounded block exceeds max_gather_period_bytes.
std::shared_ptr<const gather_program> gather_block_program_for(std::span<const permute_axis> inner, std::size_t width,
                                                               std::int64_t line_phase = unlined,
                                                               gather_layout layout = gather_layout::pairs_of_64,
                                                               bool lines_where_they_fit = false);

/// gather_program_for's pairs_of_64 program with its chunks in groups that share their windows
/// (gather_program::chunk_groups) where that saves loads, else the plain program (null where that
/// is null); cached like it. A chunk's steps load one or two 64-byte windows each, which mostly
/// cross a source line: on a Zen 4 such a load takes as long as 1.8 two-source byte permutes (one
/// within a line 1.1), so a gather of short runs is bound by its loads. Consecutive chunks of a
/// period read neighbouring source bytes (a C = 3 pixel shuffle's chunks each take 21 bytes of the
/// same three rows), so a group of up to max_group_chunks loads the windows covering all of their
/// bytes once per period. For programs of whole periods (not single blocks); for lined programs the
/// windows are lines. A group has at most `most_windows` windows (max_near_group_windows up to
/// max_group_windows): a chunk of a channels-last K = 3 s2d b3 takes bytes from 9 source rows, so
/// only groups of 9 windows or more save its loads, but in cache such groups mostly lose (see
/// most_group_windows in permute.cpp).
std::shared_ptr<const gather_program> grouped_gather_program_for(std::span<const permute_axis> inner, std::size_t width,
                                                                 std::int64_t stream_src_stride,
                                                                 std::int64_t line_phase = unlined,
                                                                 int most_windows = max_near_group_windows,
                                                                 std::int64_t joined_periods = 1);

/// Prefetches one period's source lines (the program's prefetch_offsets past `source`) and its
/// destination lines (from `destination`, every 64 bytes of period_dst_bytes), into L1. The
/// addresses are integers: a period ahead may lie past the end of either tensor, where a pointer
/// may not point (a prefetch of such an address does nothing).
inline void prefetch_period(const gather_program& program, std::uintptr_t source, std::uintptr_t destination) {
  for (std::int64_t offset : program.prefetch_offsets) {
    prefetch_into_l1(source + static_cast<std::uintptr_t>(offset));
  }
  for (std::int64_t offset = 0; offset < program.period_dst_bytes; offset += 64) {
    prefetch_into_l1(destination + static_cast<std::uintptr_t>(offset));
  }
}

/// The gather_fn of the avx512vbmi level (pairs_of_64 programs).
void gather_rows_avx512vbmi(const gather_program& program, const gather_rows& rows, const std::byte* src,
                            std::byte* dst, const std::byte* src_end);

/// The gather_fn of the avx2 level (halves_of_16 programs). Its sources must span at least
/// min_avx2_gather_source_bytes: a window reaching past src_end is read as the 16 bytes ending
/// there instead.
inline constexpr std::int64_t min_avx2_gather_source_bytes = 16;
void gather_rows_avx2(const gather_program& program, const gather_rows& rows, const std::byte* src, std::byte* dst,
                      const std::byte* src_end);

}  // namespace regrid::kernels
