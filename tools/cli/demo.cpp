// `regrid demo`: the worked examples of the seed documents (TensorFlow, OpenVINO,
// ONNX / DirectML), run through the library and checked value by value.
#include <cstdint>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include "commands.hpp"
#include "regrid/regrid.hpp"

namespace regrid::cli {
namespace {

tensor make_tensor(const shape_t& shape, const std::vector<std::int64_t>& values) {
  tensor t(dtype::int64, shape);
  std::copy(values.begin(), values.end(), t.data_as<std::int64_t>());
  return t;
}

std::vector<std::int64_t> iota(std::int64_t count) {
  std::vector<std::int64_t> values(static_cast<std::size_t>(count));
  std::iota(values.begin(), values.end(), 0);
  return values;
}

void print_nested(std::ostream& out, const std::int64_t* data, const shape_t& shape, std::size_t axis,
                  std::int64_t& offset, int indent) {
  if (axis == shape.size()) {
    out << data[offset++];
    return;
  }
  out << '[';
  for (std::int64_t i = 0; i < shape[axis]; ++i) {
    if (i != 0) {
      out << ',';
      if (axis + 1 < shape.size())
        out << '\n' << std::string(static_cast<std::size_t>(indent + 1), ' ');
      else
        out << ' ';
    }
    print_nested(out, data, shape, axis + 1, offset, indent + 1);
  }
  out << ']';
}

void print_tensor(std::ostream& out, const char* label, const tensor& t) {
  out << "  " << label << " shape " << format_shape(t.shape()) << ":\n    ";
  std::int64_t offset = 0;
  print_nested(out, t.data_as<std::int64_t>(), t.shape(), 0, offset, 4);
  out << '\n';
}

struct demo_case {
  std::string title;
  bool to_depth;
  space_depth_options options;
  shape_t input_shape;
  std::vector<std::int64_t> input;
  shape_t expected_shape;
  std::vector<std::int64_t> expected;  // empty: print and check only the shape
  std::int64_t expected_prefix = 0;    // >0: only the first values are documented
};

bool run_case(std::ostream& out, const demo_case& example) {
  out << example.title << '\n';
  const tensor input = make_tensor(example.input_shape, example.input);
  const tensor output =
      example.to_depth ? space_to_depth(input, example.options) : depth_to_space(input, example.options);
  const bool small = input.numel() <= 64;
  if (small) {
    print_tensor(out, "input ", input);
    print_tensor(out, "output", output);
  } else {
    out << "  input shape " << format_shape(input.shape()) << " (values 0.." << input.numel() - 1 << ")\n";
    out << "  output shape " << format_shape(output.shape()) << "\n";
  }
  bool ok = output.shape() == example.expected_shape;
  const std::int64_t checked =
      example.expected_prefix > 0 ? example.expected_prefix : static_cast<std::int64_t>(example.expected.size());
  for (std::int64_t i = 0; ok && i < checked; ++i) ok = output.data_as<std::int64_t>()[i] == example.expected[i];
  if (!small && checked > 0) {
    out << "  first " << checked << " output values:";
    for (std::int64_t i = 0; i < checked; ++i) out << ' ' << output.data_as<std::int64_t>()[i];
    out << '\n';
  }
  out << (ok ? "  matches the documented result\n\n" : "  MISMATCH with the documented result\n\n");
  return ok;
}

// The DirectML ROI pooling formula on a 6x6 ramp: SpatialScale 0.5 puts the corners at 0.5 and
// 4.5, so the rounding rule decides the region.
bool run_directml_roi_example(std::ostream& out) {
  out << "DirectML DML_ROI_POOLING_OPERATOR_DESC: X = arange(36) as {1, 1, 6, 6}, ROI [0, 1, 1, 9, 9],\n"
         "  SpatialScale 0.5, PooledSize 2x2; StartY = ph * RegionHeight / 2 + y1, EndY = ((ph + 1) * "
         "RegionHeight + 1) / 2 + y1\n";
  tensor x(dtype::float32, {1, 1, 6, 6});
  std::iota(x.data_as<float>(), x.data_as<float>() + 36, 0.0f);
  tensor rois(dtype::float32, {1, 5});
  const float box[] = {0, 1, 1, 9, 9};
  std::copy(box, box + 5, rois.data_as<float>());
  bool ok = true;
  const std::pair<roi_rounding, std::vector<float>> runs[] = {
      {roi_rounding::half_away_from_zero, {21, 23, 33, 35}},  // x1 = y1 = 1, x2 = y2 = 5: bins [1,4) [3,6)
      {roi_rounding::half_to_even, {14, 16, 26, 28}},         // x1 = y1 = 0, x2 = y2 = 4: bins [0,3) [2,5)
  };
  for (const auto& [rounding, expected] : runs) {
    const roi_pool_result result =
        roi_pool(x, rois, {.pooled_height = 2, .pooled_width = 2, .spatial_scale = 0.5, .rounding = rounding},
                 std::nullopt, true);
    out << "  round = " << to_string(rounding) << ": output [";
    for (int i = 0; i < 4; ++i) out << (i ? ", " : "") << result.output.data_as<float>()[i];
    out << "], argmax [";
    for (int i = 0; i < 4; ++i) out << (i ? ", " : "") << result.argmax.data_as<std::int32_t>()[i];
    out << "]\n";
    ok = ok && std::equal(expected.begin(), expected.end(), result.output.data_as<float>());
  }
  out << (ok ? "  matches the documented formula\n\n" : "  MISMATCH with the documented formula\n\n");
  return ok;
}

}  // namespace

int run_demo(std::ostream& out) {
  const space_depth_options tf{.block_size = 2, .framework = framework::tf};
  const space_depth_options ov_blocks_first{.block_size = 2, .mode = mode::dcr, .framework = framework::openvino};
  const space_depth_options onnx_dcr{.block_size = 2, .mode = mode::dcr, .framework = framework::onnx};
  const space_depth_options onnx_crd{.block_size = 2, .mode = mode::crd, .framework = framework::onnx};
  const std::vector<std::int64_t> seq12 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const std::vector<std::int64_t> seq16 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  const std::vector<std::int64_t> spatial16 = {1, 2, 5, 6, 3, 4, 7, 8, 9, 10, 13, 14, 11, 12, 15, 16};
  std::vector<std::int64_t> onnx_input(48);
  for (int c = 0; c < 8; ++c) {
    for (int i = 0; i < 6; ++i) onnx_input[static_cast<std::size_t>(c * 6 + i)] = 9 * c + i;
  }

  const std::vector<demo_case> cases = {
      {"TensorFlow tf.nn.space_to_depth, NHWC, block_size 2: [1, 2, 2, 1] -> [1, 1, 1, 4]",
       true,
       tf,
       {1, 2, 2, 1},
       {1, 2, 3, 4},
       {1, 1, 1, 4},
       {1, 2, 3, 4}},
      {"TensorFlow tf.nn.space_to_depth, NHWC, block_size 2: [1, 2, 2, 3] -> [1, 1, 1, 12]",
       true,
       tf,
       {1, 2, 2, 3},
       seq12,
       {1, 1, 1, 12},
       seq12},
      {"TensorFlow tf.nn.space_to_depth, NHWC, block_size 2: [1, 4, 4, 1] -> [1, 2, 2, 4]",
       true,
       tf,
       {1, 4, 4, 1},
       spatial16,
       {1, 2, 2, 4},
       seq16},
      {"TensorFlow tf.nn.depth_to_space, NHWC, block_size 2: [1, 1, 1, 4] -> [1, 2, 2, 1]",
       false,
       tf,
       {1, 1, 1, 4},
       {1, 2, 3, 4},
       {1, 2, 2, 1},
       {1, 2, 3, 4}},
      {"TensorFlow tf.nn.depth_to_space, NHWC, block_size 2: [1, 1, 1, 12] -> [1, 2, 2, 3]",
       false,
       tf,
       {1, 1, 1, 12},
       seq12,
       {1, 2, 2, 3},
       seq12},
      {"TensorFlow tf.nn.depth_to_space, NHWC, block_size 2: [1, 2, 2, 4] -> [1, 4, 4, 1]",
       false,
       tf,
       {1, 2, 2, 4},
       seq16,
       {1, 4, 4, 1},
       spatial16},
      {"OpenVINO DepthToSpace-1, blocks_first, block_size 2: [5, 28, 2, 3] -> [5, 7, 4, 6]",
       false,
       ov_blocks_first,
       {5, 28, 2, 3},
       iota(5 * 28 * 2 * 3),
       {5, 7, 4, 6},
       {0, 42, 1, 43, 2, 44, 84, 126, 85, 127, 86, 128, 3, 45, 4, 46, 5, 47, 87, 129, 88, 130, 89, 131}},
      {"OpenVINO SpaceToDepth-1, blocks_first, block_size 2: [5, 7, 4, 6] -> [5, 28, 2, 3]",
       true,
       ov_blocks_first,
       {5, 7, 4, 6},
       iota(5 * 7 * 4 * 6),
       {5, 28, 2, 3},
       {}},
      {"ONNX DepthToSpace / DirectML DEPTH_TO_SPACE1, DCR, block_size 2: [1, 8, 2, 3] -> [1, 2, 4, 6]",
       false,
       onnx_dcr,
       {1, 8, 2, 3},
       onnx_input,
       {1, 2, 4, 6},
       {0, 18, 1, 19, 2, 20, 36, 54, 37, 55, 38, 56, 3, 21, 4, 22, 5, 23, 39, 57, 40, 58, 41, 59}},
      {"ONNX DepthToSpace / DirectML DEPTH_TO_SPACE1, CRD, block_size 2: [1, 8, 2, 3] -> [1, 2, 4, 6]",
       false,
       onnx_crd,
       {1, 8, 2, 3},
       onnx_input,
       {1, 2, 4, 6},
       {0, 9, 1, 10, 2, 11, 18, 27, 19, 28, 20, 29, 3, 12, 4, 13, 5, 14, 21, 30, 22, 31, 23, 32}},
  };

  int failures = 0;
  out << "regrid " << REGRID_VERSION_STRING << ": the seed documents' worked examples\n\n";
  for (const auto& example : cases) failures += run_case(out, example) ? 0 : 1;
  failures += run_directml_roi_example(out) ? 0 : 1;
  out << (failures == 0 ? "All " + std::to_string(cases.size() + 1) + " examples match their documents.\n"
                        : std::to_string(failures) + " example(s) do not match.\n");
  return failures == 0 ? 0 : 1;
}

}  // namespace regrid::cli
