// The worked examples of the seed documents and of the semantics reference, value by value.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "regrid/regrid.hpp"

namespace regrid {
namespace {

tensor int_tensor(const shape_t& shape, const std::vector<std::int64_t>& values) {
  tensor t(dtype::int64, shape);
  EXPECT_EQ(static_cast<std::size_t>(t.numel()), values.size());
  std::copy(values.begin(), values.end(), t.data_as<std::int64_t>());
  return t;
}

tensor arange(const shape_t& shape) {
  tensor t(dtype::int64, shape);
  std::iota(t.data_as<std::int64_t>(), t.data_as<std::int64_t>() + t.numel(), 0);
  return t;
}

std::vector<std::int64_t> values(const tensor& t, std::int64_t count = -1) {
  const std::int64_t n = count < 0 ? t.numel() : count;
  return {t.data_as<std::int64_t>(), t.data_as<std::int64_t>() + n};
}

const space_depth_options tf_options{.block_size = 2, .framework = framework::tf};

struct tf_example {
  shape_t space_shape;
  std::vector<std::int64_t> space_values;
  shape_t depth_shape;
  std::vector<std::int64_t> depth_values;
};

const tf_example tf_examples[] = {
    {{1, 2, 2, 1}, {1, 2, 3, 4}, {1, 1, 1, 4}, {1, 2, 3, 4}},
    {{1, 2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {1, 1, 1, 12}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
    {{1, 4, 4, 1},
     {1, 2, 5, 6, 3, 4, 7, 8, 9, 10, 13, 14, 11, 12, 15, 16},
     {1, 2, 2, 4},
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
};

TEST(SeedExamples, TensorFlowSpaceToDepth) {
  for (const auto& example : tf_examples) {
    const tensor y = space_to_depth(int_tensor(example.space_shape, example.space_values), tf_options);
    EXPECT_EQ(y.shape(), example.depth_shape);
    EXPECT_EQ(values(y), example.depth_values);
  }
}

TEST(SeedExamples, TensorFlowDepthToSpace) {
  for (const auto& example : tf_examples) {
    const tensor x = depth_to_space(int_tensor(example.depth_shape, example.depth_values), tf_options);
    EXPECT_EQ(x.shape(), example.space_shape);
    EXPECT_EQ(values(x), example.space_values);
  }
}

// TF's NCHW is the same DCR mapping in another memory order: NHWC op on a transposed input.
TEST(SeedExamples, TensorFlowNchwIsNhwcTransposed) {
  const tensor nhwc = int_tensor({1, 4, 4, 1}, tf_examples[2].space_values);
  const tensor nchw = int_tensor({1, 1, 4, 4}, tf_examples[2].space_values);  // C = 1: same bytes
  const tensor y = space_to_depth(nchw, {.block_size = 2, .layout = layout::nchw, .framework = framework::tf});
  EXPECT_EQ(y.shape(), (shape_t{1, 4, 2, 2}));
  // NHWC result [1,2,2,4] transposed to NCHW [1,4,2,2].
  const tensor reference = space_to_depth(nhwc, tf_options);
  for (int c = 0; c < 4; ++c) {
    for (int h = 0; h < 2; ++h) {
      for (int w = 0; w < 2; ++w) {
        EXPECT_EQ(y.data_as<std::int64_t>()[(c * 2 + h) * 2 + w],
                  reference.data_as<std::int64_t>()[(h * 2 + w) * 4 + c]);
      }
    }
  }
}

// Semantics reference, section 1.3: value 100c + 10h + w, [1,1,2,2,4] -> [1,4,1,1,4].
TEST(SeedExamples, TensorFlowNchwVectC) {
  tensor x(dtype::int8, {1, 1, 2, 2, 4});
  auto* in = x.data_as<std::int8_t>();
  // Values mod 128 keep them in int8; the pattern stays unique.
  for (int c = 0; c < 4; ++c) {
    for (int h = 0; h < 2; ++h) {
      for (int w = 0; w < 2; ++w) in[(h * 2 + w) * 4 + c] = static_cast<std::int8_t>(c * 20 + h * 10 + w);
    }
  }
  const space_depth_options options{.block_size = 2, .layout = layout::nchw_vect_c, .framework = framework::tf};
  const tensor y = space_to_depth(x, options);
  ASSERT_EQ(y.shape(), (shape_t{1, 4, 1, 1, 4}));
  // Output channel group j holds the pixel (βh, βw) = (j / 2, j % 2) of all four channels.
  const std::int8_t expected[4][4] = {{0, 20, 40, 60}, {1, 21, 41, 61}, {10, 30, 50, 70}, {11, 31, 51, 71}};
  for (int j = 0; j < 4; ++j) {
    for (int v = 0; v < 4; ++v) EXPECT_EQ(y.data_as<std::int8_t>()[j * 4 + v], expected[j][v]);
  }
  const tensor back = depth_to_space(y, options);
  EXPECT_EQ(std::memcmp(back.data(), x.data(), 16), 0);
}

TEST(SeedExamples, OpenVinoDepthToSpaceShapeExample) {
  const tensor x = arange({5, 28, 2, 3});
  const space_depth_options blocks_first{.block_size = 2, .mode = mode::dcr, .framework = framework::openvino};
  EXPECT_EQ(depth_to_space_shape(x.shape(), blocks_first), (shape_t{5, 7, 4, 6}));
  const tensor y = depth_to_space(x, blocks_first);
  EXPECT_EQ(values(y, 24), (std::vector<std::int64_t>{0, 42, 1, 43, 2, 44, 84, 126, 85, 127, 86, 128,
                                                      3, 45, 4, 46, 5, 47, 87, 129, 88, 130, 89, 131}));
  // The SpaceToDepth-1 spec example is the inverse: [5, 7, 4, 6] -> [5, 28, 2, 3].
  const tensor back = space_to_depth(y, blocks_first);
  EXPECT_EQ(back.shape(), (shape_t{5, 28, 2, 3}));
  EXPECT_EQ(values(back), values(x));

  const space_depth_options depth_first{.block_size = 2, .mode = mode::crd, .framework = framework::openvino};
  EXPECT_EQ(values(depth_to_space(x, depth_first), 24),
            (std::vector<std::int64_t>{0, 6, 1, 7,  2, 8,  12, 18, 13, 19, 14, 20,
                                       3, 9, 4, 10, 5, 11, 15, 21, 16, 22, 17, 23}));
}

TEST(SeedExamples, OnnxAndDirectMlDepthToSpace) {
  std::vector<std::int64_t> input;
  for (int c = 0; c < 8; ++c) {
    for (int i = 0; i < 6; ++i) input.push_back(9 * c + i);
  }
  const tensor x = int_tensor({1, 8, 2, 3}, input);
  for (framework rules : {framework::onnx, framework::directml}) {
    const tensor dcr = depth_to_space(x, {.block_size = 2, .mode = mode::dcr, .framework = rules});
    EXPECT_EQ(values(dcr), (std::vector<std::int64_t>{0,  18, 1,  19, 2,  20, 36, 54, 37, 55, 38, 56, 3,  21, 4,  22,
                                                      5,  23, 39, 57, 40, 58, 41, 59, 9,  27, 10, 28, 11, 29, 45, 63,
                                                      46, 64, 47, 65, 12, 30, 13, 31, 14, 32, 48, 66, 49, 67, 50, 68}));
    const tensor crd = depth_to_space(x, {.block_size = 2, .mode = mode::crd, .framework = rules});
    EXPECT_EQ(values(crd, 12), (std::vector<std::int64_t>{0, 9, 1, 10, 2, 11, 18, 27, 19, 28, 20, 29}));
  }
}

TEST(SeedExamples, OnnxSpaceToDepthExample) {
  const tensor x =
      int_tensor({1, 1, 4, 6}, {0, 6, 1, 7, 2, 8, 12, 18, 13, 19, 14, 20, 3, 9, 4, 10, 5, 11, 15, 21, 16, 22, 17, 23});
  const tensor y = space_to_depth(x, {.block_size = 2, .framework = framework::onnx});
  EXPECT_EQ(y.shape(), (shape_t{1, 4, 2, 3}));
  EXPECT_EQ(values(y), values(arange({1, 4, 2, 3})));
}

// PyTorch: pixel_shuffle is CRD over the last three dims; leading dims fold into the batch.
TEST(SeedExamples, TorchPixelShuffleFoldsLeadingDims) {
  const tensor x = arange({2, 3, 8, 2, 3});
  const space_depth_options torch{.block_size = 2, .framework = framework::torch};
  const tensor y = depth_to_space(x, torch);
  EXPECT_EQ(y.shape(), (shape_t{2, 3, 2, 4, 6}));
  // Each [8, 2, 3] slab is an independent ONNX CRD DepthToSpace.
  for (std::int64_t slab = 0; slab < 6; ++slab) {
    tensor part(dtype::int64, {1, 8, 2, 3});
    std::copy_n(x.data_as<std::int64_t>() + slab * 48, 48, part.data_as<std::int64_t>());
    const tensor expected = depth_to_space(part, {.block_size = 2, .mode = mode::crd, .framework = framework::onnx});
    EXPECT_TRUE(std::equal(expected.data_as<std::int64_t>(), expected.data_as<std::int64_t>() + 48,
                           y.data_as<std::int64_t>() + slab * 48));
  }
  const tensor chw = arange({4, 2, 2});  // rank 3: no batch dim at all
  EXPECT_EQ(depth_to_space(chw, torch).shape(), (shape_t{1, 4, 4}));
  EXPECT_EQ(values(space_to_depth(depth_to_space(chw, torch), torch)), values(chw));
}

TEST(SeedExamples, DefaultsComeFromTheFramework) {
  const shape_t shape{1, 4, 6, 8};
  EXPECT_EQ(space_to_depth_shape(shape, {.block_size = 2, .framework = framework::tf}), (shape_t{1, 2, 3, 32}));
  EXPECT_EQ(space_to_depth_shape(shape, {.block_size = 2, .framework = framework::nnapi}), (shape_t{1, 2, 3, 32}));
  EXPECT_EQ(space_to_depth_shape(shape, {.block_size = 2, .framework = framework::onnx}), (shape_t{1, 16, 3, 4}));
  EXPECT_EQ(space_to_depth_shape(shape, {.block_size = 2}), (shape_t{1, 16, 3, 4}));
  // Explicit arguments win over the framework's defaults.
  EXPECT_EQ(space_to_depth_shape(shape, {.block_size = 2, .layout = layout::nchw, .framework = framework::tf}),
            (shape_t{1, 16, 3, 4}));
  // OpenVINO N-D: [N, C, D1, D2, D3].
  EXPECT_EQ(depth_to_space_shape(shape_t{2, 16, 3, 5, 7}, {.block_size = 2, .framework = framework::openvino}),
            (shape_t{2, 2, 6, 10, 14}));
}

}  // namespace
}  // namespace regrid
