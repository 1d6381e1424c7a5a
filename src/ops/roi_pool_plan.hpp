// Validation and per-ROI geometry for ROI max pooling, shared by the fast kernels and
// the reference implementation.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "regrid/roi_pool.hpp"

namespace regrid::ops {

/// The floating-point format in which coordinates and floating bins are computed.
enum class arithmetic { f16, bf16, f32, f64 };

struct roi_problem {
  roi_pool_semantics semantics;
  regrid::layout layout = layout::nchw;
  dtype type = dtype::float32;
  arithmetic math = arithmetic::f32;
  std::int64_t batch = 0, channels = 0, height = 0, width = 0;
  std::int64_t roi_count = 0, pooled_height = 0, pooled_width = 0;
  double scale_y = 1.0, scale_x = 1.0;  // representable in `math`
  std::int32_t zero_point = 0;          // quantized inputs: the empty-bin value
  shape_t output_shape;
};

/// The bins of one ROI, computed once. batch == -1: the ROI (and every later one) is
/// terminated and produces zeros (OpenVINO's sentinel).
struct roi_box {
  std::int64_t batch = 0;
  std::vector<std::int64_t> hstart, hend, wstart, wend;
};

/// Validates everything except ROI contents and the outputs.
roi_problem plan_roi_pool(std::span<const std::int64_t> input_shape, dtype input_type, const tensor_view& rois,
                          const std::optional<tensor_view>& batch_indices, const roi_pool_options& options);

/// Reads, validates and converts every ROI into bins (throws before anything is written).
std::vector<roi_box> compute_boxes(const roi_problem& problem, const tensor_view& rois,
                                   const std::optional<tensor_view>& batch_indices);

/// Checks output and argmax views against the problem (dtype, shape, overlap with the input).
void check_roi_outputs(const roi_problem& problem, const tensor_view& input, const mutable_tensor_view& output,
                       const std::optional<mutable_tensor_view>& argmax);

}  // namespace regrid::ops
