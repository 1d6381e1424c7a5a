// The _regrid extension: a thin shell over the C++ library. Arrays arrive as NumPy arrays or
// any DLPack producer (torch, jax) and become regrid tensor views without copying, strides
// included; outputs are allocated by the Python layer and written in place. The GIL is released
// while the library computes; regrid::error surfaces as ValueError with the library's sentence.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <vector>

#include "regrid/regrid.hpp"

namespace nb = nanobind;

namespace {

using input_array = nb::ndarray<nb::ro, nb::device::cpu>;
using output_array = nb::ndarray<nb::device::cpu>;

[[noreturn]] void fail(const std::string& message) { throw regrid::error(regrid::status::invalid_argument, message); }

// The regrid dtype of a DLPack dtype; `hint` names it when the bits alone are ambiguous
// (bfloat16 carried as uint16 by NumPy + ml_dtypes, quantized 8-bit data).
regrid::dtype dtype_of(nb::dlpack::dtype type, const std::optional<std::string>& hint, const char* what) {
  if (hint) {
    const auto parsed = regrid::parse_dtype(*hint);
    if (!parsed) fail(std::string(what) + ": unknown dtype '" + *hint + "'");
    if (regrid::size_of(*parsed) * 8 != type.bits) {
      fail(std::string(what) + ": dtype " + *hint + " needs " + std::to_string(regrid::size_of(*parsed) * 8) +
           "-bit elements, the array has " + std::to_string(type.bits) + "-bit ones");
    }
    return *parsed;
  }
  if (type.lanes != 1) fail(std::string(what) + ": vector dtypes (lanes != 1) are not supported");
  using code = nb::dlpack::dtype_code;
  switch (static_cast<code>(type.code)) {
    case code::Bool:
      if (type.bits == 8) return regrid::dtype::boolean;
      break;
    case code::Int:
      switch (type.bits) {
        case 8: return regrid::dtype::int8;
        case 16: return regrid::dtype::int16;
        case 32: return regrid::dtype::int32;
        case 64: return regrid::dtype::int64;
        default: break;
      }
      break;
    case code::UInt:
      switch (type.bits) {
        case 8: return regrid::dtype::uint8;
        case 16: return regrid::dtype::uint16;
        case 32: return regrid::dtype::uint32;
        case 64: return regrid::dtype::uint64;
        default: break;
      }
      break;
    case code::Float:
      switch (type.bits) {
        case 16: return regrid::dtype::float16;
        case 32: return regrid::dtype::float32;
        case 64: return regrid::dtype::float64;
        default: break;
      }
      break;
    case code::Bfloat:
      if (type.bits == 16) return regrid::dtype::bfloat16;
      break;
    case code::Complex:
      if (type.bits == 64) return regrid::dtype::complex64;
      if (type.bits == 128) return regrid::dtype::complex128;
      break;
    default: break;
  }
  fail(std::string(what) + ": DLPack dtype (code " + std::to_string(type.code) + ", " + std::to_string(type.bits) +
       " bits) is not supported");
}

template <class Array>
regrid::shape_t shape_of(const Array& a) {
  regrid::shape_t shape(a.ndim());
  for (std::size_t k = 0; k < a.ndim(); ++k) shape[k] = static_cast<std::int64_t>(a.shape(k));
  return shape;
}

template <class Array>
regrid::shape_t strides_of(const Array& a) {
  regrid::shape_t strides(a.ndim());
  for (std::size_t k = 0; k < a.ndim(); ++k) strides[k] = a.stride(k);
  return strides;
}

std::optional<regrid::quantization> quant_of(std::optional<float> scale, std::optional<int> zero_point) {
  if (!scale && !zero_point) return std::nullopt;
  return regrid::quantization{scale.value_or(1.0f), zero_point.value_or(0)};
}

regrid::tensor_view view_in(const input_array& a, const std::optional<std::string>& hint, const char* what,
                            std::optional<regrid::quantization> quant = std::nullopt) {
  return {static_cast<const std::byte*>(a.data()), dtype_of(a.dtype(), hint, what), shape_of(a), strides_of(a), quant};
}

regrid::mutable_tensor_view view_out(const output_array& a, const std::optional<std::string>& hint, const char* what,
                                     std::optional<regrid::quantization> quant = std::nullopt) {
  return {static_cast<std::byte*>(a.data()), dtype_of(a.dtype(), hint, what), shape_of(a), strides_of(a), quant};
}

template <class Value>
Value parse_or_fail(std::optional<Value> parsed, const std::string& text, const char* what, const char* choices) {
  if (!parsed) fail(std::string(what) + " '" + text + "' is unknown (choose one of " + choices + ")");
  return *parsed;
}

regrid::space_depth_options space_depth_options(std::int64_t block_size, const std::optional<std::string>& layout,
                                                const std::optional<std::string>& mode, const std::string& framework) {
  regrid::space_depth_options options;
  options.block_size = block_size;
  options.framework = parse_or_fail(regrid::parse_framework(framework), framework, "framework",
                                    "default, tf, onnx, openvino, nnapi, torch, directml");
  if (layout) {
    options.layout = parse_or_fail(regrid::parse_layout(*layout), *layout, "layout",
                                   "NHWC, NCHW, NCHW_VECT_C, channels_first, channels_last");
  }
  if (mode)
    options.mode = parse_or_fail(regrid::parse_mode(*mode), *mode, "mode", "DCR, CRD, blocks_first, depth_first");
  return options;
}

regrid::roi_pool_options roi_options(std::int64_t pooled_height, std::int64_t pooled_width, double spatial_scale,
                                     const std::optional<std::string>& layout, const std::string& framework,
                                     const std::optional<std::string>& rounding, std::optional<double> height_stride,
                                     std::optional<double> width_stride) {
  regrid::roi_pool_options options;
  options.pooled_height = pooled_height;
  options.pooled_width = pooled_width;
  options.spatial_scale = spatial_scale;
  options.height_stride = height_stride;
  options.width_stride = width_stride;
  options.framework = parse_or_fail(regrid::parse_roi_framework(framework), framework, "framework",
                                    "directml, onnx, caffe, torchvision, nnapi, openvino");
  if (layout) options.layout = parse_or_fail(regrid::parse_layout(*layout), *layout, "layout", "NCHW, NHWC");
  if (rounding) {
    options.rounding = parse_or_fail(regrid::parse_roi_rounding(*rounding), *rounding, "rounding",
                                     "half_away_from_zero, half_to_even");
  }
  return options;
}

// A NumPy array owning a regrid tensor (no copy). bfloat16 travels as uint16; the Python layer
// views it as ml_dtypes.bfloat16.
nb::ndarray<nb::numpy> to_numpy(regrid::tensor&& result) {
  auto* owned = new regrid::tensor(std::move(result));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<regrid::tensor*>(p); });
  nb::dlpack::dtype type{};
  type.lanes = 1;
  type.bits = static_cast<std::uint8_t>(regrid::size_of(owned->type()) * 8);
  switch (owned->type()) {
    case regrid::dtype::float16:
    case regrid::dtype::float32:
    case regrid::dtype::float64: type.code = static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float); break;
    default: type.code = static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt); break;
  }
  std::vector<std::size_t> shape(owned->shape().begin(), owned->shape().end());
  return nb::ndarray<nb::numpy>(owned->data(), shape.size(), shape.data(), owner, nullptr, type);
}

}  // namespace

NB_MODULE(_regrid, m) {
  m.doc() = "regrid's C++ core; use the functions of the regrid package.";
  nb::register_exception_translator([](const std::exception_ptr& failure, void*) {
    try {
      std::rethrow_exception(failure);
    } catch (const regrid::error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  m.def(
      "space_depth_shape",
      [](bool to_depth, std::vector<std::int64_t> shape, std::int64_t block_size, std::optional<std::string> layout,
         std::optional<std::string> mode, std::string framework) {
        const auto options = space_depth_options(block_size, layout, mode, framework);
        return to_depth ? regrid::space_to_depth_shape(shape, options) : regrid::depth_to_space_shape(shape, options);
      },
      nb::arg("to_depth"), nb::arg("shape"), nb::arg("block_size"), nb::arg("layout").none(), nb::arg("mode").none(),
      nb::arg("framework"));

  m.def(
      "space_depth",
      [](bool to_depth, input_array x, output_array out, std::int64_t block_size, std::optional<std::string> layout,
         std::optional<std::string> mode, std::string framework, std::optional<std::string> dtype) {
        const auto options = space_depth_options(block_size, layout, mode, framework);
        const regrid::tensor_view src = view_in(x, dtype, to_depth ? "space_to_depth" : "depth_to_space");
        const regrid::mutable_tensor_view dst = view_out(out, dtype, to_depth ? "space_to_depth" : "depth_to_space");
        nb::gil_scoped_release released;
        if (to_depth)
          regrid::space_to_depth(src, dst, options);
        else
          regrid::depth_to_space(src, dst, options);
      },
      nb::arg("to_depth"), nb::arg("x"), nb::arg("out"), nb::arg("block_size"), nb::arg("layout").none(),
      nb::arg("mode").none(), nb::arg("framework"), nb::arg("dtype").none());

  m.def(
      "roi_pool_shape",
      [](std::vector<std::int64_t> shape, std::int64_t rois, std::int64_t pooled_height, std::int64_t pooled_width,
         std::optional<std::string> layout, std::string framework) {
        return regrid::roi_pool_shape(shape, rois,
                                      roi_options(pooled_height, pooled_width, 1.0, layout, framework, {}, {}, {}));
      },
      nb::arg("shape"), nb::arg("rois"), nb::arg("pooled_height"), nb::arg("pooled_width"), nb::arg("layout").none(),
      nb::arg("framework"));

  m.def(
      "roi_pool",
      [](input_array x, input_array rois, output_array out, std::optional<output_array> argmax,
         std::optional<input_array> batch_indices, std::int64_t pooled_height, std::int64_t pooled_width,
         double spatial_scale, std::optional<std::string> layout, std::string framework,
         std::optional<std::string> rounding, std::optional<double> height_stride, std::optional<double> width_stride,
         std::optional<std::string> dtype, std::optional<float> scale, std::optional<int> zero_point) {
        const auto options = roi_options(pooled_height, pooled_width, spatial_scale, layout, framework, rounding,
                                         height_stride, width_stride);
        const auto quant = quant_of(scale, zero_point);
        const regrid::tensor_view input = view_in(x, dtype, "roi_pool", quant);
        const regrid::tensor_view boxes = view_in(
            rois, dtype && regrid::parse_dtype(*dtype) == regrid::dtype::bfloat16 ? dtype : std::nullopt, "roi_pool");
        const regrid::mutable_tensor_view output = view_out(out, dtype, "roi_pool", quant);
        std::optional<regrid::mutable_tensor_view> argmax_view;
        if (argmax) argmax_view = view_out(*argmax, std::nullopt, "roi_pool");
        std::optional<regrid::tensor_view> indices;
        if (batch_indices) indices = view_in(*batch_indices, std::nullopt, "roi_pool");
        nb::gil_scoped_release released;
        regrid::roi_pool(input, boxes, output, options, indices, argmax_view);
      },
      nb::arg("x"), nb::arg("rois"), nb::arg("out"), nb::arg("argmax").none(), nb::arg("batch_indices").none(),
      nb::arg("pooled_height"), nb::arg("pooled_width"), nb::arg("spatial_scale"), nb::arg("layout").none(),
      nb::arg("framework"), nb::arg("rounding").none(), nb::arg("height_stride").none(), nb::arg("width_stride").none(),
      nb::arg("dtype").none(), nb::arg("scale").none(), nb::arg("zero_point").none());

  m.def(
      "roi_batch_indices",
      [](input_array rois, std::int64_t batch, std::optional<input_array> batch_indices, std::string framework,
         std::optional<std::string> dtype) {
        const auto options = roi_options(1, 1, 1.0, std::nullopt, framework, {}, {}, {});
        std::optional<regrid::tensor_view> indices;
        if (batch_indices) indices = view_in(*batch_indices, std::nullopt, "roi_pool");
        const regrid::tensor result =
            regrid::roi_batch_indices(view_in(rois, dtype, "roi_pool"), batch, options, indices);
        return std::vector<std::int64_t>(result.data_as<std::int32_t>(),
                                         result.data_as<std::int32_t>() + result.numel());
      },
      nb::arg("rois"), nb::arg("batch"), nb::arg("batch_indices").none(), nb::arg("framework"),
      nb::arg("dtype").none());

  m.def(
      "roi_pool_backward",
      [](input_array grad_output, input_array argmax, std::vector<std::int64_t> input_shape,
         std::optional<input_array> roi_batch, std::optional<std::string> layout, std::optional<std::string> dtype) {
        const regrid::layout memory_layout =
            layout ? parse_or_fail(regrid::parse_layout(*layout), *layout, "layout", "NCHW, NHWC")
                   : regrid::layout::nchw;
        const regrid::tensor_view grad = view_in(grad_output, dtype, "roi_pool_backward");
        const regrid::tensor_view indices = view_in(argmax, std::nullopt, "roi_pool_backward");
        std::optional<regrid::tensor_view> batch;
        if (roi_batch) batch = view_in(*roi_batch, std::nullopt, "roi_pool_backward");
        regrid::tensor result;
        {
          nb::gil_scoped_release released;
          result = regrid::roi_pool_backward(grad, indices, input_shape, memory_layout, batch);
        }
        return to_numpy(std::move(result));
      },
      nb::arg("grad_output"), nb::arg("argmax"), nb::arg("input_shape"), nb::arg("roi_batch").none(),
      nb::arg("layout").none(), nb::arg("dtype").none());

  // Result storage for the Python layer: regrid's allocator, so large results go through the
  // memory cache instead of fresh pages from NumPy's allocator.
  m.def(
      "empty_bytes",
      [](std::int64_t bytes) { return to_numpy(regrid::tensor(regrid::uninitialized, regrid::dtype::uint8, {bytes})); },
      nb::arg("bytes"));
  m.def("version", [] { return std::string(REGRID_VERSION_STRING); });
  m.def("num_threads", [] { return regrid::num_threads(); });
  m.def(
      "set_num_threads", [](int count) { regrid::set_num_threads(count); }, nb::arg("count"));
  m.def("memory_cache_limit", [] { return regrid::memory_cache_limit(); });
  m.def(
      "set_memory_cache_limit", [](std::size_t bytes) { regrid::set_memory_cache_limit(bytes); }, nb::arg("bytes"));
  m.def("cached_memory_bytes", [] { return regrid::cached_memory_bytes(); });
  m.def("release_cached_memory", [] { regrid::release_cached_memory(); });
}
