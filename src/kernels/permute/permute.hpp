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
#include <span>
#include <string>
#include <vector>

namespace regrid::kernels {

struct permute_axis {
  std::int64_t extent = 1;
  std::int64_t src_stride = 0;  ///< bytes
  std::int64_t dst_stride = 0;  ///< bytes
};

/// Copies a rows x cols tile of `width`-byte elements between strided layouts.
using tile_copy_fn = void (*)(const std::byte* src, std::byte* dst, std::int64_t rows,
                              std::int64_t cols, std::int64_t src_row, std::int64_t src_col,
                              std::int64_t dst_row, std::int64_t dst_col, std::size_t width);

struct tile_kernel {
  tile_copy_fn copy = nullptr;
  std::string name;
};

/// Returns the scalar tile kernel for elements of `width` bytes.
tile_kernel select_tile_kernel(std::size_t width) noexcept;

/// b-way interleave (dst[r * b + j] = src_j[r]) or de-interleave (dst_j[r] = src[r * b + j]) of
/// width-byte elements, b in {2, 3, 4, 8}, width in {1, 2, 4, 8}; null otherwise. One per ISA.
tile_copy_fn interleave_kernel_scalar(std::size_t width, std::int64_t b, bool interleave);
tile_copy_fn interleave_kernel_avx2(std::size_t width, std::int64_t b, bool interleave);
tile_copy_fn interleave_kernel_avx512(std::size_t width, std::int64_t b, bool interleave);

struct permute_plan {
  std::vector<permute_axis> outer;  ///< iterated outermost first
  permute_axis row;                 ///< second-innermost axis (extent 1 if absent)
  permute_axis col;                 ///< innermost axis (extent 1 if absent)
  std::size_t width = 0;            ///< bytes per element after folding
  std::int64_t total_bytes = 0;     ///< bytes moved (0: nothing to do)
  tile_kernel kernel;
  bool whole_rows = false;          ///< the kernel needs every row of a tile: split columns instead
};

/// Normalizes the problem and selects a kernel. Requires element_bytes > 0.
permute_plan plan_permute(std::span<const permute_axis> axes, std::size_t element_bytes);

/// Executes a plan with up to max_threads threads. The plan must describe valid,
/// non-overlapping memory for src and dst.
void run_permute(const permute_plan& plan, const std::byte* src, std::byte* dst, int max_threads);

/// Human-readable form for diagnostics, e.g. "outer [4:+96/+8] tile 3x4 width 8 (copy_x64)".
std::string describe(const permute_plan& plan);

}  // namespace regrid::kernels
