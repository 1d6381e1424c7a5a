// Every validation rule, with its exact sentence, and nothing written on error.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "regrid/regrid.hpp"
#include "support/strided.hpp"

namespace regrid {
namespace {

enum class direction { to_depth, to_space };

struct error_case {
  direction op;
  shape_t shape;
  space_depth_options options;
  std::string message;
};

const error_case shape_rules[] = {
    {direction::to_depth,
     {1, 30, 32, 3},
     {.block_size = 4, .layout = layout::nhwc},
     "space_to_depth: input height 30 is not divisible by block_size 4"},
    {direction::to_depth,
     {1, 3, 32, 30},
     {.block_size = 4},
     "space_to_depth: input width 30 is not divisible by block_size 4"},
    {direction::to_depth,
     {1, 3, 4, 4, 7},
     {.block_size = 2, .framework = framework::openvino},
     "space_to_depth: input spatial dimension D3 7 is not divisible by block_size 2"},
    {direction::to_space,
     {1, 12, 2, 2},
     {.block_size = 3},
     "depth_to_space: input channels 12 are not divisible by block_size^2 = 9"},
    {direction::to_space,
     {1, 12, 2, 2, 2},
     {.block_size = 2, .layout = layout::channels_first},
     "depth_to_space: input channels 12 are not divisible by block_size^3 = 8"},
    {direction::to_space,
     {1, 6, 2, 2, 4},
     {.block_size = 2, .layout = layout::nchw_vect_c},
     "depth_to_space: input channel groups 6 (NCHW_VECT_C channels / 4) are not divisible by block_size^2 = 4"},
    {direction::to_depth, {1, 4, 4, 4}, {.block_size = 0}, "space_to_depth: block_size 0 must be at least 1"},
    {direction::to_depth,
     {1, 4, 4, 4},
     {.block_size = -2, .framework = framework::onnx},
     "space_to_depth: block_size -2 must be at least 1 under framework onnx"},
    {direction::to_space,
     {1, 4, 4, 4},
     {.block_size = 1, .framework = framework::tf},
     "depth_to_space: block_size 1 must be at least 2 under framework tf"},
    {direction::to_depth,
     {4, 4, 4},
     {.block_size = 2, .layout = layout::nhwc},
     "space_to_depth: layout NHWC requires a rank-4 input, got rank 3 (shape [4, 4, 4])"},
    {direction::to_depth,
     {1, 1, 4, 4},
     {.block_size = 2, .layout = layout::nchw_vect_c},
     "space_to_depth: layout NCHW_VECT_C requires a rank-5 input [N, C/4, H, W, 4], got rank 4 (shape [1, 1, 4, 4])"},
    {direction::to_depth,
     {1, 1, 4, 4, 3},
     {.block_size = 2, .layout = layout::nchw_vect_c},
     "space_to_depth: layout NCHW_VECT_C requires the last dimension to be 4, got 3"},
    {direction::to_depth,
     {1, 4},
     {.block_size = 2, .layout = layout::channels_last},
     "space_to_depth: layout channels_last requires rank >= 3 (batch, channels and at least one spatial "
     "dimension), got rank 2"},
    {direction::to_depth,
     {1, 2, 4, 4, 4},
     {.block_size = 2, .framework = framework::onnx},
     "space_to_depth: framework onnx requires a rank-4 input, got rank 5"},
    {direction::to_space,
     {2, 8, 4},
     {.block_size = 2, .framework = framework::directml},
     "depth_to_space: framework directml requires a rank-4 input, got rank 3"},
    {direction::to_depth,
     {1, 4, 4, 4},
     {.block_size = 2, .layout = layout::nhwc, .framework = framework::onnx},
     "space_to_depth: layout NHWC is not supported under framework onnx (supported: NCHW, channels_first)"},
    {direction::to_depth,
     {1, 4, 4, 4},
     {.block_size = 2, .layout = layout::channels_last, .framework = framework::tf},
     "space_to_depth: layout channels_last is not supported under framework tf (supported: NCHW, NHWC, NCHW_VECT_C)"},
    {direction::to_depth,
     {1, 4, 4, 4},
     {.block_size = 2, .mode = mode::crd, .framework = framework::onnx},
     "space_to_depth: mode CRD is not supported under framework onnx (supported: DCR)"},
    {direction::to_space,
     {1, 4, 4, 4},
     {.block_size = 2, .mode = mode::crd, .framework = framework::tf},
     "depth_to_space: mode CRD is not supported under framework tf (supported: DCR)"},
    {direction::to_space,
     {1, 4, 4, 4},
     {.block_size = 2, .mode = mode::dcr, .framework = framework::torch},
     "depth_to_space: mode DCR is not supported under framework torch (supported: CRD)"},
    {direction::to_space,
     {1, 4, 4, 4},
     {.block_size = 2, .mode = mode::crd, .framework = framework::nnapi},
     "depth_to_space: mode CRD is not supported under framework nnapi (supported: DCR)"},
    {direction::to_depth,
     {1, 1, 4, 4, 4},
     {.block_size = 2, .layout = layout::nchw_vect_c, .mode = mode::crd},
     "space_to_depth: layout NCHW_VECT_C supports only mode DCR, got CRD"},
    {direction::to_depth,
     {1, -3, 4, 4},
     {.block_size = 2},
     "space_to_depth: input extent -3 of dimension 1 is negative"},
    {direction::to_depth,
     {1, 1LL << 40, 2, 2},
     {.block_size = 1LL << 20},
     "space_to_depth: input height 2 is not divisible by block_size 1048576"},
    {direction::to_depth,
     {1, 1LL << 40, 1LL << 21, 1LL << 21},
     {.block_size = 1LL << 20},
     "space_to_depth: output channels 1099511627776 * 1099511627776 overflows 64-bit integers"},
    {direction::to_space,
     {1, 1, 2, 2, 2},
     {.block_size = 1LL << 30, .layout = layout::channels_first},
     "depth_to_space: block volume (block_size^K) 1152921504606846976 * 1073741824 overflows 64-bit integers"},
    {direction::to_space,
     {1, 4, 1LL << 62, 1},
     {.block_size = 2},
     "depth_to_space: output height 4611686018427387904 * 2 overflows 64-bit integers"},
};

class SpaceDepthShapeRules : public ::testing::TestWithParam<error_case> {};

TEST_P(SpaceDepthShapeRules, RejectsWithTheExactSentence) {
  const error_case& c = GetParam();
  try {
    if (c.op == direction::to_depth) {
      (void)space_to_depth_shape(c.shape, c.options);
    } else {
      (void)depth_to_space_shape(c.shape, c.options);
    }
    FAIL() << "expected: " << c.message;
  } catch (const error& failure) {
    EXPECT_EQ(std::string(failure.what()), c.message);
    EXPECT_TRUE(failure.code() == status::invalid_argument || failure.code() == status::overflow);
  }
}

INSTANTIATE_TEST_SUITE_P(AllRules, SpaceDepthShapeRules, ::testing::ValuesIn(shape_rules),
                         [](const ::testing::TestParamInfo<error_case>& param) {
                           return "rule" + std::to_string(param.index);
                         });

// Runs `call`, expects `message`, and checks that the output buffer was not touched.
template <class Call>
void expect_rejected_untouched(testing::strided_buffer& dst, Call call, const std::string& message) {
  try {
    call();
    ADD_FAILURE() << "expected: " << message;
  } catch (const error& failure) {
    EXPECT_EQ(std::string(failure.what()), message);
  }
  const tensor contents = dst.gather();
  for (std::size_t i = 0; i < contents.size_bytes(); ++i) {
    ASSERT_EQ(contents.data()[i], testing::fill_byte) << "the output was written at byte " << i;
  }
  EXPECT_TRUE(dst.only_elements_written());
}

TEST(SpaceDepthOperands, MismatchedOutputsAreRejectedWithoutWriting) {
  const tensor x(dtype::float32, {1, 2, 4, 4});
  const space_depth_options options{.block_size = 2};
  testing::strided_buffer wrong_type(dtype::float16, {1, 8, 2, 2}, testing::memory_style::contiguous);
  expect_rejected_untouched(
      wrong_type, [&] { space_to_depth(x, wrong_type.view(), options); },
      "space_to_depth: output dtype float16 differs from input dtype float32");
  testing::strided_buffer wrong_shape(dtype::float32, {1, 8, 2, 3}, testing::memory_style::padded);
  expect_rejected_untouched(
      wrong_shape, [&] { space_to_depth(x, wrong_shape.view(), options); },
      "space_to_depth: output shape [1, 8, 2, 3] differs from the expected [1, 8, 2, 2] "
      "for input shape [1, 2, 4, 4]");
  testing::strided_buffer wide(dtype::int16, {1, 4, 2, 2, 4}, testing::memory_style::contiguous);
  const tensor wide_input(dtype::int16, {1, 1, 4, 4, 4});
  expect_rejected_untouched(
      wide, [&] { space_to_depth(wide_input, wide.view(), {.block_size = 2, .layout = layout::nchw_vect_c}); },
      "space_to_depth: layout NCHW_VECT_C requires a 1-byte element type, got int16");
  const tensor quantized(dtype::qint8, {1, 2, 2, 8}, quantization{0.25f, 3});
  testing::strided_buffer requantized(dtype::qint8, {1, 4, 4, 2}, testing::memory_style::misaligned);
  expect_rejected_untouched(
      requantized,
      [&] {
        depth_to_space(quantized, requantized.view(quantization{0.5f, 3}),
                       {
                           .block_size = 2,
                           .framework = framework::nnapi,
                       });
      },
      "depth_to_space: output quantization (scale 0.500000, zero point 3) differs from the input's "
      "(scale 0.250000, zero point 3); quantized data passes through unchanged");
  testing::strided_buffer bad_rule(dtype::float32, {1, 8, 2, 2}, testing::memory_style::contiguous);
  expect_rejected_untouched(
      bad_rule, [&] { space_to_depth(x, bad_rule.view(), {.block_size = 3}); },
      "space_to_depth: input height 4 is not divisible by block_size 3");
}

// A repeated call reuses its validated description, buffer extents included: only the pointers are
// new, and the overlap check must still see them. The input here runs backwards (negative strides),
// so its memory lies below its data pointer: an output placed just below that pointer overlaps it,
// one just above does not. Nothing is written when the call is rejected.
TEST(SpaceDepthOperands, RepeatedCallsCheckOverlapFromTheirPointers) {
  tensor buffer(dtype::float32, {3, 64});
  auto* base = buffer.data_as<float>();
  for (int i = 0; i < 3 * 64; ++i) base[i] = static_cast<float>(i);
  // Input elements at data - 15 .. data (strides all negative), output 16 contiguous elements.
  const shape_t in_shape{1, 1, 4, 4};
  const shape_t in_strides{-16, -16, -4, -1};
  const shape_t out_shape{1, 4, 2, 2};
  const tensor_view input(buffer.data() + 79 * 4, dtype::float32, in_shape, in_strides);  // elements 64..79
  for (int offset : {80, 96, 100}) {  // each just above the input: separate buffers
    const mutable_tensor_view output(buffer.data() + offset * 4, dtype::float32, out_shape);
    EXPECT_NO_THROW(space_to_depth(input, output, {.block_size = 2})) << offset;
  }
  const std::vector<float> before(base, base + 3 * 64);
  for (int offset : {50, 64, 70}) {  // below or inside the input's elements
    const mutable_tensor_view output(buffer.data() + offset * 4, dtype::float32, out_shape);
    try {
      space_to_depth(input, output, {.block_size = 2});
      ADD_FAILURE() << "output at element " << offset << " was accepted";
    } catch (const error& failure) {
      EXPECT_STREQ(failure.what(),
                   "space_to_depth: input and output memory overlap; the output must be a separate buffer");
    }
    EXPECT_TRUE(std::equal(before.begin(), before.end(), base)) << "written at element " << offset;
  }
}

TEST(SpaceDepthOperands, OverlappingMemoryIsRejected) {
  tensor buffer(dtype::float32, {2, 64});
  const tensor_view input(buffer.data(), dtype::float32, {1, 1, 4, 4});
  const mutable_tensor_view output(buffer.data() + 32 * 4, dtype::float32, {1, 4, 2, 2});
  const mutable_tensor_view overlapping(buffer.data() + 8 * 4, dtype::float32, {1, 4, 2, 2});
  EXPECT_NO_THROW(space_to_depth(input, output, {.block_size = 2}));
  try {
    space_to_depth(input, overlapping, {.block_size = 2});
    FAIL();
  } catch (const error& failure) {
    EXPECT_STREQ(failure.what(),
                 "space_to_depth: input and output memory overlap; the output must be a separate buffer");
  }
  // An output whose strides alias its own elements.
  const mutable_tensor_view aliased(buffer.data() + 32 * 4, dtype::float32, {1, 4, 2, 2}, {16, 1, 2, 1});
  try {
    space_to_depth(input, aliased, {.block_size = 2});
    FAIL();
  } catch (const error& failure) {
    EXPECT_STREQ(
        failure.what(),
        "space_to_depth: output strides [16, 1, 2, 1] for shape [1, 4, 2, 2] make distinct elements share memory");
  }
}

// The one-shot calls keep the last few descriptions that passed their checks (shapes, strides,
// dtypes, quantization, options): a description differing from a kept one in any single part
// is checked anew, and gets its own sentence.
TEST(SpaceDepthOperands, CallsLikeAnEarlierValidOneAreCheckedAnew) {
  const tensor x(dtype::float32, {1, 2, 4, 4});
  tensor y(dtype::float32, {1, 8, 2, 2});
  const space_depth_options options{.block_size = 2, .mode = mode::crd};
  ASSERT_NO_THROW(space_to_depth(x, y.mutable_view(), options));
  testing::strided_buffer wrong_type(dtype::float16, {1, 8, 2, 2}, testing::memory_style::contiguous);
  expect_rejected_untouched(
      wrong_type, [&] { space_to_depth(x, wrong_type.view(), options); },
      "space_to_depth: output dtype float16 differs from input dtype float32");
  const tensor half_input(dtype::float16, {1, 2, 4, 4});
  testing::strided_buffer for_half(dtype::float32, {1, 8, 2, 2}, testing::memory_style::contiguous);
  expect_rejected_untouched(
      for_half, [&] { space_to_depth(half_input, for_half.view(), options); },
      "space_to_depth: output dtype float32 differs from input dtype float16");
  testing::strided_buffer aliased(dtype::float32, {1, 8, 2, 2}, testing::memory_style::contiguous);
  const mutable_tensor_view aliased_view(aliased.view().data(), dtype::float32, {1, 8, 2, 2}, {4, 1, 2, 1});
  expect_rejected_untouched(
      aliased, [&] { space_to_depth(x, aliased_view, options); },
      "space_to_depth: output strides [4, 1, 2, 1] for shape [1, 8, 2, 2] make distinct elements share memory");
  testing::strided_buffer same(dtype::float32, {1, 8, 2, 2}, testing::memory_style::contiguous);
  expect_rejected_untouched(
      same, [&] { space_to_depth(x, same.view(), {.block_size = 3, .mode = mode::crd}); },
      "space_to_depth: input height 4 is not divisible by block_size 3");
  expect_rejected_untouched(
      same, [&] { space_to_depth(x, same.view(), {.block_size = 2, .mode = mode::crd, .framework = framework::onnx}); },
      "space_to_depth: mode CRD is not supported under framework onnx (supported: DCR)");

  const tensor quantized(dtype::qint8, {1, 2, 2, 8}, quantization{0.25f, 3});
  testing::strided_buffer requantized(dtype::qint8, {1, 4, 4, 2}, testing::memory_style::contiguous);
  const space_depth_options nnapi{.block_size = 2, .framework = framework::nnapi};
  ASSERT_NO_THROW(depth_to_space(quantized, requantized.view(quantization{0.25f, 3}), nnapi));
  testing::strided_buffer untouched(dtype::qint8, {1, 4, 4, 2}, testing::memory_style::contiguous);
  expect_rejected_untouched(
      untouched,
      [&] {
        depth_to_space(quantized, untouched.view(quantization{0.5f, 3}), nnapi);
      },
      "depth_to_space: output quantization (scale 0.500000, zero point 3) differs from the input's "
      "(scale 0.250000, zero point 3); quantized data passes through unchanged");
}

// Descriptions alike but for their mode, layout, strides or dtype, called in turn, more of them
// than the calls keep: each output equals the reference's.
TEST(SpaceDepthOperands, CallsAlternatingDescriptionsMatchTheReference) {
  std::mt19937_64 rng(11);
  struct variant {
    dtype type;
    space_depth_options options;
    testing::memory_style style;
  };
  const variant variants[] = {
      {dtype::uint8, {.block_size = 2, .mode = mode::dcr}, testing::memory_style::contiguous},
      {dtype::uint8, {.block_size = 2, .mode = mode::crd}, testing::memory_style::contiguous},
      {dtype::uint8, {.block_size = 2, .layout = layout::nhwc, .mode = mode::dcr}, testing::memory_style::contiguous},
      {dtype::uint8, {.block_size = 2, .mode = mode::dcr}, testing::memory_style::padded},
      {dtype::int16, {.block_size = 2, .mode = mode::dcr}, testing::memory_style::contiguous},
      {dtype::uint8, {.block_size = 2, .mode = mode::dcr}, testing::memory_style::fortran},
  };
  for (int round = 0; round < 3; ++round) {
    for (const variant& v : variants) {
      const tensor x = testing::random_tensor(v.type, {1, 8, 4, 4}, rng);
      const shape_t out_shape = depth_to_space_shape(x.shape(), v.options);
      tensor expected(v.type, out_shape);
      reference::depth_to_space(x, expected.mutable_view(), v.options);
      testing::strided_buffer actual(v.type, out_shape, v.style);
      depth_to_space(x, actual.view(), v.options);
      EXPECT_TRUE(testing::same_bytes(actual.gather(), expected))
          << "variant " << (&v - variants) << " round " << round;
      EXPECT_TRUE(actual.only_elements_written());
    }
  }
}

TEST(SpaceDepthOperands, InvalidViewsAreRejected) {
  std::byte storage[64]{};
  EXPECT_THROW((tensor_view{storage, dtype::float32, {2, 2}, {1}}), error);
  EXPECT_THROW((tensor_view{nullptr, dtype::float32, {2, 2}}), error);
  EXPECT_NO_THROW((tensor_view{nullptr, dtype::float32, {0, 2}}));
  try {
    tensor_view view(storage, dtype::float32, shape_t(17, 1));
    FAIL();
  } catch (const error& failure) {
    EXPECT_STREQ(failure.what(), "tensor: rank 17 exceeds the maximum rank 16");
  }
}

TEST(SpaceDepthNames, ParsersAreCaseInsensitive) {
  EXPECT_EQ(parse_layout("nhwc"), layout::nhwc);
  EXPECT_EQ(parse_layout("Nchw_Vect_C"), layout::nchw_vect_c);
  EXPECT_EQ(parse_layout("CHANNELS_LAST"), layout::channels_last);
  EXPECT_EQ(parse_mode("blocks_first"), mode::dcr);
  EXPECT_EQ(parse_mode("DEPTH_FIRST"), mode::crd);
  EXPECT_EQ(parse_mode("crd"), mode::crd);
  EXPECT_EQ(parse_framework("Default"), framework::permissive);
  EXPECT_EQ(parse_framework("OpenVINO"), framework::openvino);
  EXPECT_EQ(parse_framework("pytorch"), framework::torch);
  EXPECT_FALSE(parse_layout("NCWH").has_value());
  EXPECT_FALSE(parse_mode("RDC").has_value());
  EXPECT_EQ(parse_dtype("BFloat16"), dtype::bfloat16);
  EXPECT_EQ(parse_dtype("complex128"), dtype::complex128);
  EXPECT_FALSE(parse_dtype("float8").has_value());
  for (dtype type : all_dtypes) EXPECT_EQ(parse_dtype(to_string(type)), type);
}

}  // namespace
}  // namespace regrid
