#include "commands.hpp"

#include <iostream>

#include "core/checked.hpp"
#include "io/npy.hpp"
#include "regrid/regrid.hpp"

namespace regrid::cli {
namespace {

template <class Value>
Value parse_or_fail(std::optional<Value> parsed, std::string_view what, const std::string& text,
                    std::string_view choices) {
  if (!parsed) {
    detail::fail_invalid("regrid: unknown " + std::string(what) + " '" + text + "' (choose one of " +
                         std::string(choices) + ")");
  }
  return *parsed;
}

// Runs a command body: any regrid::error becomes its sentence on stderr and exit status 2.
template <class Body>
int guarded(Body body) {
  try {
    body();
    return 0;
  } catch (const error& failure) {
    std::cerr << failure.what() << '\n';
    return exit_invalid;
  } catch (const std::bad_alloc&) {
    std::cerr << "regrid: out of memory\n";
    return exit_invalid;
  }
}

}  // namespace

int run_space_depth(const space_depth_request& request) {
  return guarded([&] {
    space_depth_options options;
    options.block_size = request.block_size;
    options.framework = parse_or_fail(parse_framework(request.framework), "framework", request.framework,
                                      "default, tf, onnx, openvino, nnapi, torch, directml");
    if (request.layout) {
      options.layout = parse_or_fail(parse_layout(*request.layout), "layout", *request.layout,
                                     "NHWC, NCHW, NCHW_VECT_C, channels_first, channels_last");
    }
    if (request.mode) {
      options.mode =
          parse_or_fail(parse_mode(*request.mode), "mode", *request.mode, "DCR, CRD, blocks_first, depth_first");
    }
    std::optional<dtype> as_type;
    if (request.dtype) {
      as_type = parse_or_fail(parse_dtype(*request.dtype), "dtype", *request.dtype,
                              "bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64, "
                              "complex64, complex128");
    }
    const io::npy_array input = io::read_npy(request.input, as_type);
    const tensor output =
        request.to_depth ? space_to_depth(input.view(), options) : depth_to_space(input.view(), options);
    io::write_npy(request.output, output.view(), input.descr);
  });
}

namespace {

std::optional<dtype> parse_dtype_option(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  return parse_or_fail(parse_dtype(*text), "dtype", *text,
                       "bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64, complex64, complex128");
}

std::optional<layout> parse_roi_layout(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  const layout value = parse_or_fail(parse_layout(*text), "layout", *text, "NCHW, NHWC");
  if (value != layout::nchw && value != layout::nhwc) {
    detail::fail_invalid("regrid: roi pooling takes layout NCHW or NHWC, got '" + *text + "'");
  }
  return value;
}

}  // namespace

int run_roi_pool(const roi_pool_request& request) {
  return guarded([&] {
    roi_pool_options options;
    options.framework = parse_or_fail(parse_roi_framework(request.framework), "framework", request.framework,
                                      "directml, onnx, caffe, torchvision, nnapi, openvino");
    if (request.pooled_size.size() != 2) detail::fail_invalid("regrid: --pooled-size takes two values, PH and PW");
    options.pooled_height = request.pooled_size[0];
    options.pooled_width = request.pooled_size[1];
    options.spatial_scale = request.spatial_scale;
    options.height_stride = request.height_stride;
    options.width_stride = request.width_stride;
    options.layout = parse_roi_layout(request.layout);
    if (request.rounding) {
      options.rounding = parse_or_fail(parse_roi_rounding(*request.rounding), "rounding", *request.rounding,
                                       "half_away_from_zero, half_to_even");
    }
    io::npy_array input = io::read_npy(request.input, parse_dtype_option(request.dtype));
    tensor_view input_view = input.view();
    if (request.zero_point) {
      const dtype stored = input_view.type();
      if (stored != dtype::uint8 && stored != dtype::int8 && !is_quantized(stored)) {
        detail::fail_invalid("regrid: --zero-point needs uint8 or int8 input data, got " +
                             std::string(to_string(stored)));
      }
      const dtype quantized = (stored == dtype::uint8 || stored == dtype::quint8) ? dtype::quint8 : dtype::qint8;
      input_view = tensor_view(input_view.data(), quantized, input_view.shape(), input_view.strides(),
                               quantization{1.0f, *request.zero_point});
    }
    const io::npy_array rois = io::read_npy(
        request.rois, input.storage.type() == dtype::bfloat16 ? std::optional(dtype::bfloat16) : std::nullopt);
    std::optional<io::npy_array> indices;
    std::optional<tensor_view> indices_view;
    if (request.batch_indices) {
      indices = io::read_npy(*request.batch_indices);
      indices_view = indices->view();
    }
    const roi_pool_result result = roi_pool(input_view, rois.view(), options, indices_view, request.argmax.has_value());
    io::write_npy(request.output, result.output.view(), input.descr);
    if (request.argmax) io::write_npy(*request.argmax, result.argmax.view());
  });
}

int run_roi_pool_backward(const roi_pool_backward_request& request) {
  return guarded([&] {
    const io::npy_array grad = io::read_npy(request.grad_output, parse_dtype_option(request.dtype));
    const io::npy_array argmax = io::read_npy(request.argmax);
    std::optional<io::npy_array> batch;
    std::optional<tensor_view> batch_view;
    if (request.roi_batch) {
      batch = io::read_npy(*request.roi_batch);
      batch_view = batch->view();
    }
    if (request.input_shape.size() != 4) detail::fail_invalid("regrid: --input-shape takes four values");
    const tensor grad_input = roi_pool_backward(grad.view(), argmax.view(), request.input_shape,
                                                parse_roi_layout(request.layout).value_or(layout::nchw), batch_view);
    io::write_npy(request.grad_input, grad_input.view(), grad.descr);
  });
}

}  // namespace regrid::cli
