#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "core/checked.hpp"
#include "core/float16.hpp"
#include "kernels/roi_pool/roi_pool_kernel.hpp"
#include "ops/roi_pool_plan.hpp"
#include "regrid/roi_pool.hpp"
#include "regrid/runtime.hpp"

namespace regrid {

using detail::fail_invalid;

namespace {
constexpr std::array<std::pair<std::string_view, roi_framework>, 7> roi_framework_names = {{
    {"directml", roi_framework::directml},
    {"onnx", roi_framework::onnx},
    {"caffe", roi_framework::caffe},
    {"torchvision", roi_framework::torchvision},
    {"nnapi", roi_framework::nnapi},
    {"openvino", roi_framework::openvino},
    {"dml", roi_framework::directml},
}};
constexpr std::array<std::pair<std::string_view, roi_rounding>, 2> rounding_names = {{
    {"half_away_from_zero", roi_rounding::half_away_from_zero},
    {"half_to_even", roi_rounding::half_to_even},
}};

std::string number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}
}  // namespace

roi_pool_semantics roi_pool_preset(roi_framework framework) noexcept {
  using b = roi_bin_arithmetic;
  using p = roi_precision;
  using m = roi_max_rule;
  constexpr auto away = roi_rounding::half_away_from_zero;
  constexpr auto reject = roi_malformed_policy::reject;
  constexpr auto force = roi_malformed_policy::force_1x1;
  constexpr auto range = roi_batch_policy::reject_out_of_range;
  switch (framework) {
    case roi_framework::directml: return {away, b::exact_integer, p::compute_type, reject, m::fmax, range};
    case roi_framework::onnx: return {away, b::floating, p::float32, force, m::std_max_from_lowest, range};
    case roi_framework::caffe: return {away, b::floating, p::compute_type, force, m::strict_from_flt_max, range};
    case roi_framework::torchvision: return {away, b::floating, p::input_type, force, m::strict_from_flt_max, range};
    case roi_framework::nnapi:
      return {away, b::floating_with_offset, p::input_type, reject, m::strict_from_first, range, true, true, true};
    case roi_framework::openvino:
      return {away, b::exact_integer, p::float32, force, m::strict_from_first, roi_batch_policy::minus_one_terminates};
  }
  return {};
}

std::string_view to_string(roi_framework value) noexcept {
  for (const auto& [name, candidate] : roi_framework_names) {
    if (candidate == value) return name;
  }
  return "?";
}
std::string_view to_string(roi_rounding value) noexcept {
  return value == roi_rounding::half_to_even ? "half_to_even" : "half_away_from_zero";
}
std::optional<roi_framework> parse_roi_framework(std::string_view text) noexcept {
  for (const auto& [name, value] : roi_framework_names) {
    if (detail::iequals(name, text)) return value;
  }
  return std::nullopt;
}
std::optional<roi_rounding> parse_roi_rounding(std::string_view text) noexcept {
  for (const auto& [name, value] : rounding_names) {
    if (detail::iequals(name, text)) return value;
  }
  return std::nullopt;
}

namespace ops {
namespace {

constexpr double max_coordinate = 1073741824.0;  // 2^30: keeps every bin product inside int64

double round_to(arithmetic math, double value) {
  switch (math) {
    case arithmetic::f64: return value;
    case arithmetic::f32: return static_cast<double>(static_cast<float>(value));
    case arithmetic::f16: return detail::half_to_float(detail::float_to_half(static_cast<float>(value)));
    case arithmetic::bf16: return detail::bfloat16_to_float(detail::float_to_bfloat16(static_cast<float>(value)));
  }
  return value;
}

double round_coordinate(roi_rounding rounding, double value) {
  if (rounding == roi_rounding::half_away_from_zero) return std::round(value);
  const double below = std::floor(value);
  const double fraction = value - below;
  if (fraction != 0.5) return fraction < 0.5 ? below : below + 1;
  return std::fmod(below, 2.0) == 0 ? below : below + 1;
}

bool is_float_type(dtype type) {
  return type == dtype::float32 || type == dtype::float16 || type == dtype::bfloat16 || type == dtype::float64;
}

arithmetic arithmetic_of(dtype type) {
  switch (type) {
    case dtype::float16: return arithmetic::f16;
    case dtype::bfloat16: return arithmetic::bf16;
    case dtype::float64: return arithmetic::f64;
    default: return arithmetic::f32;
  }
}

// One ROI coordinate (or batch) value, exactly as stored.
double read_roi_value(const tensor_view& rois, std::int64_t r, std::int64_t k) {
  const int rank = rois.rank();
  const std::int64_t offset = r * rois.strides()[rank - 2] + k * rois.strides()[rank - 1];
  const std::byte* at = rois.data() + offset * static_cast<std::int64_t>(rois.element_size());
  if (rois.type() == dtype::uint16) {  // NNAPI TENSOR_QUANT16_ASYMM, scale 0.125, zero point 0, dequantized in float
    std::uint16_t v;
    std::memcpy(&v, at, 2);
    return static_cast<double>(0.125f * static_cast<float>(v));
  }
  return detail::floating_value(rois.type(), at);
}

std::int64_t read_index(const tensor_view& indices, std::int64_t r) {
  const std::byte* at = indices.data() + r * indices.strides()[0] * static_cast<std::int64_t>(indices.element_size());
  if (indices.type() == dtype::int32) {
    std::int32_t v;
    std::memcpy(&v, at, 4);
    return v;
  }
  std::int64_t v;
  std::memcpy(&v, at, 8);
  return v;
}

void compute_bins(const roi_problem& p, std::int64_t start, std::int64_t end, std::int64_t pooled, std::int64_t limit,
                  std::vector<std::int64_t>& bin_start, std::vector<std::int64_t>& bin_end) {
  const roi_pool_semantics& s = p.semantics;
  std::int64_t extent = end - start + 1;
  if (s.malformed == roi_malformed_policy::force_1x1) extent = std::max<std::int64_t>(extent, 1);
  bin_start.resize(static_cast<std::size_t>(pooled));
  bin_end.resize(static_cast<std::size_t>(pooled));
  const arithmetic math = p.math;
  const double step =
      round_to(math, round_to(math, static_cast<double>(extent)) / round_to(math, static_cast<double>(pooled)));
  for (std::int64_t i = 0; i < pooled; ++i) {
    std::int64_t first = 0;
    std::int64_t last = 0;
    switch (s.bins) {
      case roi_bin_arithmetic::exact_integer:
        first = start + (i * extent) / pooled;
        last = start + ((i + 1) * extent + pooled - 1) / pooled;
        break;
      case roi_bin_arithmetic::floating:
        first = start +
                static_cast<std::int64_t>(std::floor(round_to(math, round_to(math, static_cast<double>(i)) * step)));
        last = start +
               static_cast<std::int64_t>(std::ceil(round_to(math, round_to(math, static_cast<double>(i + 1)) * step)));
        break;
      case roi_bin_arithmetic::floating_with_offset: {
        const double offset = round_to(math, static_cast<double>(start));
        first = static_cast<std::int64_t>(
            std::floor(round_to(math, round_to(math, step * round_to(math, static_cast<double>(i))) + offset)));
        last = static_cast<std::int64_t>(
            std::ceil(round_to(math, round_to(math, step * round_to(math, static_cast<double>(i + 1))) + offset)));
        break;
      }
    }
    bin_start[static_cast<std::size_t>(i)] = std::clamp<std::int64_t>(first, 0, limit);
    bin_end[static_cast<std::size_t>(i)] = std::clamp<std::int64_t>(last, 0, limit);
  }
}

}  // namespace

roi_problem plan_roi_pool(std::span<const std::int64_t> input_shape, dtype input_type, const tensor_view& rois,
                          const std::optional<tensor_view>& batch_indices, const roi_pool_options& options) {
  roi_problem p;
  p.semantics = options.resolved();
  const roi_pool_semantics& s = p.semantics;
  const std::string under = " under framework " + std::string(to_string(options.framework));
  p.layout = options.layout.value_or(options.framework == roi_framework::nnapi ? layout::nhwc : layout::nchw);
  p.type = input_type;
  if (p.layout != layout::nchw && p.layout != layout::nhwc) {
    fail_invalid("roi_pool: layout " + std::string(to_string(p.layout)) + " is not supported (use NCHW or NHWC)");
  }
  const bool quantized = is_quantized(input_type);
  if (quantized && !s.separate_batch_indices) {
    fail_invalid("roi_pool: quantized input " + std::string(to_string(input_type)) +
                 " is supported only under framework nnapi");
  }
  if (!quantized && !is_float_type(input_type)) {
    fail_invalid("roi_pool: input dtype " + std::string(to_string(input_type)) +
                 " is not supported (float32, float16, bfloat16, float64, or quint8 / qint8 under nnapi)");
  }
  if (input_shape.size() != 4) {
    fail_invalid("roi_pool: input must have rank 4 (" +
                 std::string(p.layout == layout::nchw ? "[N, C, H, W]" : "[N, H, W, C]") + "), got rank " +
                 std::to_string(input_shape.size()));
  }
  for (std::int64_t extent : input_shape) {
    if (extent < 0) fail_invalid("roi_pool: input shape " + format_shape(input_shape) + " has a negative extent");
  }
  p.batch = input_shape[0];
  p.channels = p.layout == layout::nchw ? input_shape[1] : input_shape[3];
  p.height = p.layout == layout::nchw ? input_shape[2] : input_shape[1];
  p.width = p.layout == layout::nchw ? input_shape[3] : input_shape[2];
  if (options.pooled_height < 1 || options.pooled_width < 1) {
    fail_invalid("roi_pool: pooled size " + std::to_string(options.pooled_height) + "x" +
                 std::to_string(options.pooled_width) + " must be at least 1x1");
  }
  p.pooled_height = options.pooled_height;
  p.pooled_width = options.pooled_width;

  // ROI tensor: [R, 5] / {1, 1, R, 5} with a batch column, or [R, 4] with batch_indices.
  const std::int64_t columns = s.separate_batch_indices ? 4 : 5;
  const shape_t& rs = rois.shape();
  const bool plain = rois.rank() == 2 && rs[1] == columns;
  const bool directml_form = !s.separate_batch_indices && rois.rank() == 4 && rs[0] == 1 && rs[1] == 1 && rs[3] == 5;
  if (!plain && !directml_form) {
    fail_invalid("roi_pool: rois must have shape " +
                 std::string(s.separate_batch_indices ? "[R, 4] ([x1, y1, x2, y2], with batch_indices [R])"
                                                      : "[R, 5] or [1, 1, R, 5] ([batch, x1, y1, x2, y2])") +
                 ", got " + format_shape(rs));
  }
  p.roi_count = rs[rois.rank() - 2];
  const dtype expected_roi_type = quantized ? dtype::uint16 : input_type;
  if (rois.type() != expected_roi_type) {
    fail_invalid(
        "roi_pool: rois dtype " + std::string(to_string(rois.type())) + " must be " +
        std::string(to_string(expected_roi_type)) +
        (quantized ? " (quant16 asymm with scale 0.125 and zero point 0) for quantized input" : ", the input's dtype"));
  }
  if (s.separate_batch_indices) {
    if (!batch_indices) fail_invalid("roi_pool: batch_indices [R] (int32) are required" + under);
    if (batch_indices->rank() != 1 || batch_indices->shape()[0] != p.roi_count) {
      fail_invalid("roi_pool: batch_indices must have shape [" + std::to_string(p.roi_count) + "], got " +
                   format_shape(batch_indices->shape()));
    }
    if (batch_indices->type() != dtype::int32 && batch_indices->type() != dtype::int64) {
      fail_invalid("roi_pool: batch_indices dtype " + std::string(to_string(batch_indices->type())) +
                   " must be int32 or int64");
    }
  } else if (batch_indices) {
    fail_invalid("roi_pool: batch_indices are not used" + under + "; the batch index is column 0 of rois");
  }

  switch (s.precision) {
    case roi_precision::float32: p.math = arithmetic::f32; break;
    case roi_precision::compute_type: p.math = input_type == dtype::float64 ? arithmetic::f64 : arithmetic::f32; break;
    case roi_precision::input_type: p.math = quantized ? arithmetic::f32 : arithmetic_of(input_type); break;
  }

  if (s.scale_from_strides) {
    auto stride_of = [&](const std::optional<double>& stride, const char* name) {
      const double value = stride.value_or(1.0 / options.spatial_scale);
      if (!std::isfinite(value) || value <= 0) {
        fail_invalid("roi_pool: " + std::string(name) + " " + number(value) +
                     " must be a finite number greater than 0");
      }
      // NNAPI: scale = T_Roi(1.0f / stride), the stride being float16 for float16 models.
      const double stored = round_to(input_type == dtype::float16 ? arithmetic::f16 : arithmetic::f32, value);
      return round_to(p.math, static_cast<double>(1.0f / static_cast<float>(stored)));
    };
    p.scale_y = stride_of(options.height_stride, "height_stride");
    p.scale_x = stride_of(options.width_stride, "width_stride");
  } else {
    if (!std::isfinite(options.spatial_scale) || options.spatial_scale <= 0) {
      fail_invalid("roi_pool: spatial_scale " + number(options.spatial_scale) +
                   " must be a finite number greater than 0");
    }
    p.scale_y = p.scale_x = round_to(p.math, options.spatial_scale);
  }
  if (quantized) p.zero_point = 0;  // set from the input view by the caller

  p.output_shape = p.layout == layout::nchw ? shape_t{p.roi_count, p.channels, p.pooled_height, p.pooled_width}
                                            : shape_t{p.roi_count, p.pooled_height, p.pooled_width, p.channels};
  element_count(p.output_shape);
  return p;
}

std::vector<roi_box> compute_boxes(const roi_problem& p, const tensor_view& rois,
                                   const std::optional<tensor_view>& batch_indices) {
  const roi_pool_semantics& s = p.semantics;
  std::vector<roi_box> boxes(static_cast<std::size_t>(p.roi_count));
  const std::int64_t first_coordinate = s.separate_batch_indices ? 0 : 1;
  static constexpr const char* names[4] = {"x1", "y1", "x2", "y2"};
  bool terminated = false;
  for (std::int64_t r = 0; r < p.roi_count; ++r) {
    roi_box& box = boxes[static_cast<std::size_t>(r)];
    const std::string which = "roi_pool: ROI " + std::to_string(r);
    if (terminated) {
      box.batch = -1;
      continue;
    }
    std::int64_t batch = 0;
    if (s.separate_batch_indices) {
      batch = read_index(*batch_indices, r);
    } else {
      const double raw = read_roi_value(rois, r, 0);
      if (!std::isfinite(raw) || std::fabs(raw) > max_coordinate) {
        fail_invalid(which + " has batch index " + number(raw) + ", which is not a finite number");
      }
      batch = static_cast<std::int64_t>(std::trunc(raw));
    }
    if (s.batch_policy == roi_batch_policy::minus_one_terminates && batch == -1) {
      terminated = true;
      box.batch = -1;
      continue;
    }
    if (batch < 0 || batch >= p.batch) {
      fail_invalid(which + " has batch index " + std::to_string(batch) + ", outside [0, " + std::to_string(p.batch) +
                   ")");
    }
    box.batch = batch;

    std::array<double, 4> raw{};
    std::array<std::int64_t, 4> corner{};
    for (int k = 0; k < 4; ++k) {
      raw[k] = read_roi_value(rois, r, first_coordinate + k);
      if (!std::isfinite(raw[k]))
        fail_invalid(which + " has a non-finite coordinate " + names[k] + " = " + number(raw[k]));
      const double value = round_to(p.math, raw[k]);
      const double scaled = round_to(p.math, value * (k % 2 == 0 ? p.scale_x : p.scale_y));
      if (s.reject_outside_image) {
        const std::int64_t limit = k % 2 == 0 ? p.width : p.height;
        if (raw[k] < 0 || scaled > static_cast<double>(limit)) {
          fail_invalid(which + " coordinate " + names[k] + " = " + number(raw[k]) + " scales to " + number(scaled) +
                       ", outside the image [0, " + std::to_string(limit) + "]; framework nnapi rejects it");
        }
      }
      if (std::fabs(scaled) > max_coordinate) {
        fail_invalid(which + " coordinate " + names[k] + " = " + number(raw[k]) + " scales to " + number(scaled) +
                     ", beyond the supported magnitude 2^30");
      }
      corner[k] = static_cast<std::int64_t>(round_coordinate(s.rounding, scaled));
    }
    if (s.malformed == roi_malformed_policy::reject && (raw[2] < raw[0] || raw[3] < raw[1])) {
      fail_invalid(which + " is malformed: x2 = " + number(raw[2]) + ", y2 = " + number(raw[3]) +
                   " must not be less than x1 = " + number(raw[0]) + ", y1 = " + number(raw[1]));
    }
    compute_bins(p, corner[1], corner[3], p.pooled_height, p.height, box.hstart, box.hend);
    compute_bins(p, corner[0], corner[2], p.pooled_width, p.width, box.wstart, box.wend);
  }
  return boxes;
}

void check_roi_outputs(const roi_problem& p, const tensor_view& input, const mutable_tensor_view& output,
                       const std::optional<mutable_tensor_view>& argmax) {
  if (output.type() != p.type) {
    fail_invalid("roi_pool: output dtype " + std::string(to_string(output.type())) + " differs from input dtype " +
                 std::string(to_string(p.type)));
  }
  if (output.shape() != p.output_shape) {
    fail_invalid("roi_pool: output shape " + format_shape(output.shape()) + " differs from the expected " +
                 format_shape(p.output_shape));
  }
  if (argmax) {
    if (argmax->type() != dtype::int32) {
      fail_invalid("roi_pool: argmax dtype " + std::string(to_string(argmax->type())) + " must be int32");
    }
    if (argmax->shape() != p.output_shape) {
      fail_invalid("roi_pool: argmax shape " + format_shape(argmax->shape()) + " differs from the expected " +
                   format_shape(p.output_shape));
    }
    if (p.height * p.width > INT32_MAX) {
      fail_invalid("roi_pool: argmax cannot index a plane of " + std::to_string(p.height) + "x" +
                   std::to_string(p.width) + " elements in int32");
    }
  }
  if (overlaps(input, output))
    fail_invalid("roi_pool: input and output memory overlap; the output must be a separate buffer");
  if (argmax && (overlaps(input, *argmax) || overlaps(output, *argmax))) {
    fail_invalid("roi_pool: argmax memory overlaps the input or the output");
  }
}

}  // namespace ops

shape_t roi_pool_shape(std::span<const std::int64_t> input_shape, std::int64_t roi_count,
                       const roi_pool_options& options) {
  const roi_pool_semantics s = options.resolved();
  const shape_t roi_shape{std::max<std::int64_t>(roi_count, 0), s.separate_batch_indices ? 4 : 5};
  // Shape inference has no data: the ROI views only describe shapes and are never read.
  const std::byte* anchor = detail::description_anchor();
  std::optional<tensor_view> indices;
  if (s.separate_batch_indices) indices = tensor_view(anchor, dtype::int32, {roi_shape[0]}, shape_t{0});
  // Shape inference treats the ROI tensor as having the input's dtype.
  roi_pool_options probe = options;
  probe.semantics = s;
  const tensor_view typed(anchor, dtype::float32, roi_shape, shape_t{0, 0});
  return ops::plan_roi_pool(input_shape, dtype::float32, typed, indices, probe).output_shape;
}

namespace {

ops::roi_problem plan_with_zero_point(const tensor_view& input, const tensor_view& rois,
                                      const std::optional<tensor_view>& batch_indices,
                                      const roi_pool_options& options) {
  ops::roi_problem p = ops::plan_roi_pool(input.shape(), input.type(), rois, batch_indices, options);
  if (is_quantized(input.type()) && input.quant()) p.zero_point = input.quant()->zero_point;
  return p;
}

}  // namespace

void roi_pool(const tensor_view& input, const tensor_view& rois, const mutable_tensor_view& output,
              const roi_pool_options& options, const std::optional<tensor_view>& batch_indices,
              const std::optional<mutable_tensor_view>& argmax) {
  const ops::roi_problem p = plan_with_zero_point(input, rois, batch_indices, options);
  ops::check_roi_outputs(p, input, output, argmax);
  if (is_quantized(input.type()) && input.quant() && output.quant() && *input.quant() != *output.quant()) {
    fail_invalid(
        "roi_pool: output quantization differs from the input's; NNAPI requires the same scale and zero point");
  }
  const std::vector<ops::roi_box> boxes = ops::compute_boxes(p, rois, batch_indices);
  kernels::roi_pool_forward(p, boxes, input, output, argmax);
}

roi_pool_result roi_pool(const tensor_view& input, const tensor_view& rois, const roi_pool_options& options,
                         const std::optional<tensor_view>& batch_indices, bool return_argmax) {
  const ops::roi_problem p = plan_with_zero_point(input, rois, batch_indices, options);
  roi_pool_result result;
  result.output = tensor(uninitialized, input.type(), p.output_shape, input.quant());
  std::optional<mutable_tensor_view> argmax;
  if (return_argmax) {
    result.argmax = tensor(uninitialized, dtype::int32, p.output_shape);
    argmax = result.argmax.mutable_view();
  }
  roi_pool(input, rois, result.output.mutable_view(), options, batch_indices, argmax);
  return result;
}

tensor roi_batch_indices(const tensor_view& rois, std::int64_t batch, const roi_pool_options& options,
                         const std::optional<tensor_view>& batch_indices) {
  const ops::roi_problem p = ops::plan_roi_pool(
      shape_t{batch, 1, 1, 1}, rois.type() == dtype::uint16 ? dtype::quint8 : rois.type(), rois, batch_indices, [&] {
        roi_pool_options probe = options;
        probe.layout = layout::nchw;
        probe.pooled_height = probe.pooled_width = 1;
        return probe;
      }());
  const std::vector<ops::roi_box> boxes = ops::compute_boxes(p, rois, batch_indices);
  tensor result(dtype::int32, {p.roi_count});
  for (std::int64_t r = 0; r < p.roi_count; ++r) {
    result.data_as<std::int32_t>()[r] = static_cast<std::int32_t>(boxes[static_cast<std::size_t>(r)].batch);
  }
  return result;
}

tensor roi_pool_backward(const tensor_view& grad_output, const tensor_view& argmax,
                         std::span<const std::int64_t> input_shape, regrid::layout layout,
                         const std::optional<tensor_view>& roi_batch) {
  const std::string name = "roi_pool_backward";
  if (!is_floating_point(grad_output.type())) {
    fail_invalid(name + ": grad_output dtype " + std::string(to_string(grad_output.type())) +
                 " must be float32, float16, bfloat16 or float64");
  }
  if (layout != layout::nchw && layout != layout::nhwc) {
    fail_invalid(name + ": layout " + std::string(to_string(layout)) + " is not supported (use NCHW or NHWC)");
  }
  if (input_shape.size() != 4)
    fail_invalid(name + ": input shape must have rank 4, got rank " + std::to_string(input_shape.size()));
  for (std::int64_t extent : input_shape) {
    if (extent < 0) fail_invalid(name + ": input shape " + format_shape(input_shape) + " has a negative extent");
  }
  if (grad_output.rank() != 4)
    fail_invalid(name + ": grad_output must have rank 4, got rank " + std::to_string(grad_output.rank()));
  if (argmax.type() != dtype::int32 && argmax.type() != dtype::int64) {
    fail_invalid(name + ": argmax dtype " + std::string(to_string(argmax.type())) + " must be int32 or int64");
  }
  if (argmax.shape() != grad_output.shape()) {
    fail_invalid(name + ": argmax shape " + format_shape(argmax.shape()) + " differs from grad_output shape " +
                 format_shape(grad_output.shape()));
  }
  const bool nchw = layout == layout::nchw;
  const std::int64_t channels = nchw ? input_shape[1] : input_shape[3];
  const std::int64_t grad_channels = nchw ? grad_output.shape()[1] : grad_output.shape()[3];
  if (grad_channels != channels) {
    fail_invalid(name + ": grad_output has " + std::to_string(grad_channels) + " channels but the input shape " +
                 format_shape(input_shape) + " has " + std::to_string(channels));
  }
  const std::int64_t rois = grad_output.shape()[0];
  if (roi_batch) {
    if (roi_batch->rank() != 1 || roi_batch->shape()[0] != rois ||
        (roi_batch->type() != dtype::int32 && roi_batch->type() != dtype::int64)) {
      fail_invalid(name + ": roi_batch must be int32 or int64 of shape [" + std::to_string(rois) + "], got " +
                   std::string(to_string(roi_batch->type())) + " " + format_shape(roi_batch->shape()));
    }
  } else if (input_shape[0] != 1 && rois > 0) {
    fail_invalid(name + ": the batch index of each ROI is needed when the input batch is " +
                 std::to_string(input_shape[0]) + " (pass roi_batch)");
  }
  tensor grad_input(grad_output.type(), shape_t(input_shape.begin(), input_shape.end()));
  kernels::roi_pool_backward(grad_output, argmax, roi_batch, grad_input.mutable_view(), layout);
  return grad_input;
}

}  // namespace regrid
