// Validation and shape inference for SpaceToDepth / DepthToSpace, shared by the
// fast path and the reference implementation.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "regrid/space_depth.hpp"

namespace regrid::ops {

enum class space_depth_op { space_to_depth, depth_to_space };

std::string_view op_name(space_depth_op op) noexcept;

/// Everything the kernels need, resolved from a shape and the options.
struct space_depth_geometry {
  space_depth_op op = space_depth_op::space_to_depth;
  regrid::layout layout = layout::nchw;
  regrid::mode mode = mode::dcr;
  bool channels_last = false;                   ///< channel axis after the spatial axes
  bool vect_c = false;                          ///< NCHW_VECT_C: a trailing axis of 4 that never moves
  int batch_rank = 1;                           ///< leading batch axes (torch folds several)
  int spatial_rank = 2;                         ///< K
  std::int64_t block = 1;                       ///< b
  std::int64_t block_volume = 1;                ///< b^K
  std::int64_t small_channels = 0;              ///< C_s (for NCHW_VECT_C: channel groups C_s / 4)
  std::array<std::int64_t, max_rank> coarse{};  ///< O_1..O_K
  shape_t input_shape;
  shape_t output_shape;

  [[nodiscard]] const shape_t& space_shape() const {
    return op == space_depth_op::space_to_depth ? input_shape : output_shape;
  }
  [[nodiscard]] const shape_t& depth_shape() const {
    return op == space_depth_op::space_to_depth ? output_shape : input_shape;
  }
};

/// Validates the options against the input shape and infers the output shape.
/// Throws regrid::error with the op's sentence on any violation.
space_depth_geometry plan_space_depth(space_depth_op op, std::span<const std::int64_t> input_shape,
                                      const space_depth_options& options);

/// Checks a (src, dst) description beyond the shape rules: dtypes, the output shape,
/// quantization, element width for NCHW_VECT_C, and outputs whose strides alias elements.
void check_description(const space_depth_geometry& geometry, const tensor_view& src, const mutable_tensor_view& dst);
/// Checks the buffers themselves: input and output must not overlap.
void check_buffers(space_depth_op op, const void* src, std::span<const std::int64_t> src_shape,
                   std::span<const std::int64_t> src_strides, const void* dst, std::span<const std::int64_t> dst_shape,
                   std::span<const std::int64_t> dst_strides, dtype type);
/// The same for buffers whose byte extents are known (detail::byte_extent_of their shapes and strides).
void check_buffers(space_depth_op op, const void* src, const detail::byte_extent& src_extent, const void* dst,
                   const detail::byte_extent& dst_extent);
/// Both of the above.
void check_operands(const space_depth_geometry& geometry, const tensor_view& src, const mutable_tensor_view& dst);

}  // namespace regrid::ops
