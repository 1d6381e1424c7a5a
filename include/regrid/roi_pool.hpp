// ROI max pooling (Fast R-CNN RoIPool), DirectML semantics by default, with presets that
// reproduce ONNX Runtime, Caffe, torchvision, NNAPI and OpenVINO bit for bit.
//
// For each ROI r, channel c and output cell (ph, pw):
//
//   b            = batch index of r      (ROI column 0 truncated toward zero, or batch_indices[r])
//   x1,y1,x2,y2  = round(coordinate * scale)         scale = spatial_scale, or 1 / stride (nnapi)
//   RH = y2 - y1 + 1,  RW = x2 - x1 + 1              (x2 < x1: rejected, or forced to 1)
//   exact_integer bins:          hstart = y1 + floor(ph * RH / PH), hend = y1 + ceil((ph + 1) * RH / PH)
//   floating bins:               bin = RH / PH;  hstart = y1 + floor(ph * bin), hend = y1 + ceil((ph + 1) * bin)
//   floating_with_offset bins:   hstart = floor(ph * bin + y1),   hend = ceil((ph + 1) * bin + y1)
//   (likewise w), clamped to [0, H] and [0, W]; hend is exclusive.
//   out[r, c, ph, pw] = max over input[b, c, hstart:hend, wstart:wend] under max_rule
//   an empty bin gives 0 (the zero point for quantized data) and argmax -1.
//
// argmax[r, c, ph, pw] is the plane-local index h * W + w of the selected element (torchvision
// convention), -1 when no element was selected. Ties go to the first maximum in row-major order.
//
// Input [N, C, H, W] (NCHW) or [N, H, W, C] (NHWC); ROIs [R, 5] = [batch, x1, y1, x2, y2] (or
// DirectML's {1, 1, R, 5}) in the input's dtype, or [R, 4] = [x1, y1, x2, y2] plus int32
// batch_indices [R] (nnapi). Output [R, C, PH, PW] (NCHW) or [R, PH, PW, C] (NHWC).
// Dtypes: float32, float16, bfloat16, float64; quint8 / qint8 under the nnapi preset with
// uint16 ROIs (quant16 asymm, scale 0.125, zero point 0).
//
// Decisions where DirectML's documentation is silent (framework::directml):
//   rounding half away from zero (roi_rounding::half_to_even is an option); empty bin -> 0;
//   NaN ignored unless every element of the bin is NaN (fmax); the batch index is truncated toward
//   zero and must lie in [0, N); x2 < x1 or y2 < y1 is rejected; coordinate * scale is computed
//   in float32 (float64 for float64 data) and bins in exact 64-bit integers.
//
// Rejected everywhere, with a sentence and nothing written: batch index out of range, non-finite
// coordinates or coordinates beyond +-2^30 after scaling, pooled size < 1, spatial scale (or
// stride) <= 0 or non-finite, wrong ROI shape or dtype, wrong ranks.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "regrid/space_depth.hpp"
#include "regrid/tensor.hpp"

namespace regrid {

enum class roi_framework { directml, onnx, caffe, torchvision, nnapi, openvino };

enum class roi_rounding { half_away_from_zero, half_to_even };
enum class roi_bin_arithmetic { exact_integer, floating, floating_with_offset };
/// Precision of coordinate * scale and of floating bins.
enum class roi_precision {
  float32,       ///< always float32 (ONNX Runtime, OpenVINO CPU)
  compute_type,  ///< float64 for float64 data, else float32 (Caffe's Dtype, DirectML)
  input_type,    ///< the input's own type, rounding after every operation (torchvision, NNAPI)
};
enum class roi_malformed_policy { reject, force_1x1 };
enum class roi_max_rule {
  fmax,                 ///< seed with the first element; NaN ignored unless all NaN; -inf kept
  strict_from_flt_max,  ///< seed T(-FLT_MAX), take v > max: NaN never selected (Caffe, torchvision)
  std_max_from_lowest,  ///< seed lowest(T), max = (v < max) ? max : v: NaN position-dependent (ORT)
  strict_from_first,    ///< seed with the first element, take v > max: NaN only if first (NNAPI, OV)
};
enum class roi_batch_policy { reject_out_of_range, minus_one_terminates };

/// Every way the frameworks differ, one field each. A preset is a named value of it.
struct roi_pool_semantics {
  roi_rounding rounding = roi_rounding::half_away_from_zero;
  roi_bin_arithmetic bins = roi_bin_arithmetic::exact_integer;
  roi_precision precision = roi_precision::compute_type;
  roi_malformed_policy malformed = roi_malformed_policy::reject;
  roi_max_rule max_rule = roi_max_rule::fmax;
  roi_batch_policy batch_policy = roi_batch_policy::reject_out_of_range;
  bool reject_outside_image = false;    ///< nnapi: coordinates must lie in [0, W * stride]
  bool separate_batch_indices = false;  ///< nnapi: ROIs [R, 4] plus int32 batch_indices [R]
  bool scale_from_strides = false;      ///< nnapi: scale = 1 / stride, per axis
  friend bool operator==(const roi_pool_semantics&, const roi_pool_semantics&) = default;
};

roi_pool_semantics roi_pool_preset(roi_framework framework) noexcept;

std::string_view to_string(roi_framework value) noexcept;
std::string_view to_string(roi_rounding value) noexcept;
std::optional<roi_framework> parse_roi_framework(std::string_view text) noexcept;
std::optional<roi_rounding> parse_roi_rounding(std::string_view text) noexcept;

struct roi_pool_options {
  std::int64_t pooled_height = 0;
  std::int64_t pooled_width = 0;
  double spatial_scale = 1.0;
  std::optional<double> height_stride;   ///< nnapi; default 1 / spatial_scale
  std::optional<double> width_stride;    ///< nnapi; default 1 / spatial_scale
  std::optional<regrid::layout> layout;  ///< NCHW or NHWC; default NHWC under nnapi, else NCHW
  roi_framework framework = roi_framework::directml;
  std::optional<roi_rounding> rounding;         ///< overrides the preset's rounding
  std::optional<roi_pool_semantics> semantics;  ///< replaces the preset entirely
  /// The effective semantics: `semantics`, else the framework's preset with `rounding` applied.
  [[nodiscard]] roi_pool_semantics resolved() const {
    roi_pool_semantics result = semantics.value_or(roi_pool_preset(framework));
    if (rounding) result.rounding = *rounding;
    return result;
  }
};

/// Output shape for an input shape and a ROI count.
shape_t roi_pool_shape(std::span<const std::int64_t> input_shape, std::int64_t roi_count,
                       const roi_pool_options& options);

/// Forward into caller-owned memory. argmax, if given, is int32 of the output's shape.
void roi_pool(const tensor_view& input, const tensor_view& rois, const mutable_tensor_view& output,
              const roi_pool_options& options, const std::optional<tensor_view>& batch_indices = std::nullopt,
              const std::optional<mutable_tensor_view>& argmax = std::nullopt);

struct roi_pool_result {
  tensor output;
  tensor argmax;  ///< int32, empty unless requested
};

/// Allocating forward.
roi_pool_result roi_pool(const tensor_view& input, const tensor_view& rois, const roi_pool_options& options,
                         const std::optional<tensor_view>& batch_indices = std::nullopt, bool return_argmax = false);

/// The validated batch index of every ROI as int32 [R] (what the backward pass needs).
/// Under batch_policy minus_one_terminates, the ROIs from the first -1 on get -1.
tensor roi_batch_indices(const tensor_view& rois, std::int64_t batch, const roi_pool_options& options,
                         const std::optional<tensor_view>& batch_indices = std::nullopt);

/// Gradient with respect to the input: grad_input[b_r, c].flat[argmax] += grad_output, accumulated
/// in the gradient's dtype in the fixed order ROI, channel, ph, pw (torchvision's CPU order).
/// roi_batch is int32/int64 [R] (from roi_batch_indices); it may be omitted when N == 1.
/// Entries with argmax -1 or ROI batch -1 contribute nothing.
tensor roi_pool_backward(const tensor_view& grad_output, const tensor_view& argmax,
                         std::span<const std::int64_t> input_shape, regrid::layout layout = layout::nchw,
                         const std::optional<tensor_view>& roi_batch = std::nullopt);

namespace reference {
/// The spec of record for roi_pool: a direct scan of each bin in row-major order.
void roi_pool(const tensor_view& input, const tensor_view& rois, const mutable_tensor_view& output,
              const roi_pool_options& options, const std::optional<tensor_view>& batch_indices = std::nullopt,
              const std::optional<mutable_tensor_view>& argmax = std::nullopt);
}  // namespace reference

}  // namespace regrid
