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

}  // namespace

int run_space_depth(const space_depth_request& request) {
  try {
    space_depth_options options;
    options.block_size = request.block_size;
    options.framework = parse_or_fail(parse_framework(request.framework), "framework", request.framework,
                                      "default, tf, onnx, openvino, nnapi, torch, directml");
    if (request.layout) {
      options.layout = parse_or_fail(parse_layout(*request.layout), "layout", *request.layout,
                                     "NHWC, NCHW, NCHW_VECT_C, channels_first, channels_last");
    }
    if (request.mode) {
      options.mode = parse_or_fail(parse_mode(*request.mode), "mode", *request.mode,
                                   "DCR, CRD, blocks_first, depth_first");
    }
    std::optional<dtype> as_type;
    if (request.dtype) {
      as_type = parse_or_fail(parse_dtype(*request.dtype), "dtype", *request.dtype,
                              "bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64, "
                              "complex64, complex128");
    }
    const io::npy_array input = io::read_npy(request.input, as_type);
    const tensor output = request.to_depth ? space_to_depth(input.view(), options)
                                           : depth_to_space(input.view(), options);
    io::write_npy(request.output, output.view(), input.descr);
    return 0;
  } catch (const error& failure) {
    std::cerr << failure.what() << '\n';
    return exit_invalid;
  } catch (const std::bad_alloc&) {
    std::cerr << "regrid: out of memory\n";
    return exit_invalid;
  }
}

}  // namespace regrid::cli
