// ROI max pooling kernels. The forward pass stages the input as channels-last (NHWC)
// in its lane type, then pools blocks of channels with the rule vectorized across
// channels; the inner block is compiled once per ISA (roi_block_*.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ops/roi_pool_plan.hpp"
#include "regrid/runtime.hpp"

namespace regrid::kernels {

/// Value types the kernels compare in: float (float32/16, bfloat16), double, and raw 8-bit ints.
enum class roi_lane { f32, f64, u8, i8 };

struct roi_block_args {
  const void* image = nullptr;  ///< NHWC plane of one batch, lane type
  std::int64_t width = 0;       ///< W
  std::int64_t channels = 0;    ///< C (row stride of a pixel)
  std::int64_t first_channel = 0;
  std::int64_t block_channels = 0;
  const std::int64_t* hstart = nullptr;
  const std::int64_t* hend = nullptr;
  const std::int64_t* wstart = nullptr;
  const std::int64_t* wend = nullptr;
  std::int64_t pooled_height = 0;
  std::int64_t pooled_width = 0;
  void* cells = nullptr;           ///< out: [PH * PW][block_channels] lane values
  std::int32_t* argmax = nullptr;  ///< out: [PH * PW][block_channels], or null
  const void* seed = nullptr;      ///< one lane value (strict_from_flt_max / std_max_from_lowest)
  const void* empty = nullptr;     ///< one lane value for an empty bin
};

using roi_block_fn = void (*)(const roi_block_args& args);

/// The block kernel for a lane type, rule and argmax tracking on one ISA.
roi_block_fn roi_block_scalar(roi_lane lane, roi_max_rule rule, bool track_argmax);
roi_block_fn roi_block_avx2(roi_lane lane, roi_max_rule rule, bool track_argmax);
roi_block_fn roi_block_avx512(roi_lane lane, roi_max_rule rule, bool track_argmax);

/// dst[c * dst_stride + k] = src[k * src_stride + c] for k < rows, c < columns (32-bit values):
/// turns NCHW planes into NHWC pixels and a block's [cells][channels] results into NCHW runs.
using roi_transpose_fn = void (*)(const std::uint32_t* src, std::int64_t rows, std::int64_t columns,
                                  std::int64_t src_stride, std::uint32_t* dst, std::int64_t dst_stride);
void roi_transpose_scalar(const std::uint32_t*, std::int64_t, std::int64_t, std::int64_t, std::uint32_t*, std::int64_t);
void roi_transpose_avx2(const std::uint32_t*, std::int64_t, std::int64_t, std::int64_t, std::uint32_t*, std::int64_t);
void roi_transpose_avx512(const std::uint32_t*, std::int64_t, std::int64_t, std::int64_t, std::uint32_t*, std::int64_t);

void roi_pool_forward(const ops::roi_problem& problem, const std::vector<ops::roi_box>& boxes, const tensor_view& input,
                      const mutable_tensor_view& output, const std::optional<mutable_tensor_view>& argmax);

/// Adds grad_output into the zero-filled grad_input at the argmax positions. grad_input must be
/// the caller's own fresh tensor: on an invalid argmax this throws with grad_input partly written.
void roi_pool_backward(const tensor_view& grad_output, const tensor_view& argmax,
                       const std::optional<tensor_view>& roi_batch, const mutable_tensor_view& grad_input,
                       regrid::layout layout);

}  // namespace regrid::kernels
