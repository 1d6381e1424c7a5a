// Periodic byte gathers: the permute kernel for short runs on AVX512-VBMI.
//
// When the innermost axes of the output form a dense block of D bytes and the next output axis
// continues it (destination stride D) with a source stride S, the output is periodic: byte p of
// an output row comes from
//
//   src[(p / D) * S + map[p % D]]
//
// and the pattern of 64-byte output chunks repeats every lcm(D, 64) bytes. A gather program holds,
// for each chunk of one period, the 64-byte source windows its bytes lie in and the byte index of
// each output byte in them. Each chunk is then built with one vpermt2b per pair of windows and a
// store (byte-masked for every pair after the first), whatever the run lengths: a C = 3 pixel
// shuffle costs a few instructions per 64 bytes, where per-run kernels moved 2-3 bytes per step.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/permute/permute.hpp"

namespace regrid::kernels {

/// One vpermt2b (or vpermb, with one window) building part of an output chunk.
struct alignas(64) gather_step {
  std::array<std::uint8_t, 64> index{};  ///< per output byte: 0-63 window a, 64-127 window b
  std::int64_t window_a = 0;             ///< source bytes, from the period's source start
  std::int64_t window_b = 0;
  std::uint64_t load_a = 0;  ///< the bytes of each window the chunk needs
  std::uint64_t load_b = 0;  ///< 0: no second window
  std::uint64_t take = 0;    ///< the output bytes of the chunk this step supplies
};

/// A program's line_phase where its windows start at their first byte (see gather_program_for).
inline constexpr std::int64_t unlined = -1;

struct gather_program {
  std::vector<gather_step> steps;        ///< chunk after chunk
  std::vector<std::uint32_t> chunk_end;  ///< steps [chunk_end[c - 1], chunk_end[c]) build chunk c
  std::int64_t period_dst_bytes = 0;     ///< lcm(D, 64); a single block: D rounded up to 64
  std::int64_t period_src_bytes = 0;     ///< (period_dst_bytes / D) * S
  bool single_block = false;             ///< from gather_block_program_for
  std::int64_t line_phase = unlined;     ///< see gather_program_for
  std::int64_t reach = 0;                ///< the furthest byte past a period's source start any window reaches
  /// One byte in every source cache line a period's windows cover, from the period's source start
  /// (the union of the windows, every 64 bytes and its last byte).
  std::vector<std::int64_t> prefetch_offsets;

  [[nodiscard]] double steps_per_chunk() const {
    return static_cast<double>(steps.size()) / static_cast<double>(chunk_end.size());
  }
};

/// The program for a block of `inner` axes (outermost first, destination-dense, element `width`
/// bytes) repeated along a stream axis of source stride `stream_src_stride`; null if a period
/// would exceed max_gather_period_bytes. Programs are cached by their key: plans are made on
/// every call, and building one costs microseconds.
///
/// Windows start at the first byte they hold (line_phase = unlined), or, with a line_phase in
/// [0, 64), where the source cache line holding that byte starts, for periods whose source starts
/// line_phase bytes past a line: each window is then exactly one line, and may start up to
/// line_phase bytes before the period's source. A 64-byte load across two lines costs about as much
/// as two (d2s NCHW CRD b2 of bytes at 64 KiB, modelled alone: 0.41 of memcpy with windows at the
/// first byte, 0.61-0.66 on lines), which outweighs the extra steps of bytes that straddle lines.
inline constexpr std::int64_t max_gather_period_bytes = 2048;
std::shared_ptr<const gather_program> gather_program_for(std::span<const permute_axis> inner, std::size_t width,
                                                         std::int64_t stream_src_stride,
                                                         std::int64_t line_phase = unlined);

/// The program for one block of `inner` axes, when no stream continues it within that period (a
/// row of 1023 bytes, a channel of 9 x 9 x 9): its period is the block rounded up to whole chunks,
/// and the bytes past the block have no step. Run as rows of block_bytes each, every chunk goes
/// through the kernel's row-end path (whole chunks stored whole, the last one byte-masked), and the
/// blocks' rows may lie anywhere. Null if the rounded block exceeds max_gather_period_bytes.
std::shared_ptr<const gather_program> gather_block_program_for(std::span<const permute_axis> inner, std::size_t width,
                                                               std::int64_t line_phase = unlined);

/// The gather_fn of the avx512vbmi level.
void gather_rows_avx512vbmi(const gather_program& program, const gather_rows& rows, const std::byte* src,
                            std::byte* dst, const std::byte* src_end);

}  // namespace regrid::kernels
