// The worked examples of the ROI pooling semantics reference (its section (b)), under each
// preset it names, plus the batch-index, sentinel and layout rules.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/float16.hpp"
#include "regrid/regrid.hpp"

namespace regrid {
namespace {

// A float tensor of the given dtype from double values (exactly representable ones).
tensor make(dtype type, const shape_t& shape, const std::vector<double>& values) {
  tensor t(type, shape);
  for (std::size_t i = 0; i < values.size(); ++i) {
    switch (type) {
      case dtype::float32: t.data_as<float>()[i] = static_cast<float>(values[i]); break;
      case dtype::float64: t.data_as<double>()[i] = values[i]; break;
      case dtype::float16: t.data_as<std::uint16_t>()[i] = detail::float_to_half(static_cast<float>(values[i])); break;
      case dtype::bfloat16:
        t.data_as<std::uint16_t>()[i] = detail::float_to_bfloat16(static_cast<float>(values[i]));
        break;
      default: ADD_FAILURE() << "unsupported dtype";
    }
  }
  return t;
}

std::vector<double> read(const tensor& t) {
  std::vector<double> values(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < values.size(); ++i) {
    switch (t.type()) {
      case dtype::float32: values[i] = t.data_as<float>()[i]; break;
      case dtype::float64: values[i] = t.data_as<double>()[i]; break;
      case dtype::float16: values[i] = detail::half_to_float(t.data_as<std::uint16_t>()[i]); break;
      case dtype::bfloat16: values[i] = detail::bfloat16_to_float(t.data_as<std::uint16_t>()[i]); break;
      case dtype::int32: values[i] = t.data_as<std::int32_t>()[i]; break;
      default: break;
    }
  }
  return values;
}

std::vector<double> arange(std::int64_t count, double start = 0, double step = 1) {
  std::vector<double> values(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = start + step * static_cast<double>(i);
  return values;
}

// Pools with a [b, x1, y1, x2, y2] ROI, or the [x1, y1, x2, y2] + batch form under nnapi.
roi_pool_result pool(roi_framework framework, const tensor& input, std::vector<double> roi, std::int64_t ph,
                     std::int64_t pw, double scale = 1.0, std::optional<roi_rounding> rounding = std::nullopt) {
  roi_pool_options options{.pooled_height = ph,
                           .pooled_width = pw,
                           .spatial_scale = scale,
                           .layout = layout::nchw,
                           .framework = framework,
                           .rounding = rounding};
  if (framework == roi_framework::nnapi) {
    const auto batch = static_cast<std::int32_t>(roi[0]);
    roi.erase(roi.begin());
    tensor indices(dtype::int32, {1});
    indices.data_as<std::int32_t>()[0] = batch;
    return roi_pool(input, make(input.type(), {1, 4}, roi), options, indices.view(), true);
  }
  return roi_pool(input, make(input.type(), {1, 5}, roi), options, std::nullopt, framework != roi_framework::nnapi);
}

// Example 1: X[h] = h, ROI rows 0..56 pooled to 7 bins; float32 bins overshoot into row 57.
TEST(RoiExamples, BinEdgeArithmetic) {
  const std::vector<double> integer_bins = {8, 16, 24, 32, 40, 48, 56};
  const std::vector<double> float32_bins = {8, 16, 24, 32, 40, 48, 57};
  struct expectation {
    roi_framework framework;
    dtype type;
    std::vector<double> values;
  };
  const expectation cases[] = {
      {roi_framework::directml, dtype::float32, integer_bins},
      {roi_framework::openvino, dtype::float32, integer_bins},
      {roi_framework::onnx, dtype::float32, float32_bins},
      {roi_framework::torchvision, dtype::float32, float32_bins},
      {roi_framework::torchvision, dtype::float64, integer_bins},
      {roi_framework::torchvision, dtype::float16, integer_bins},
      {roi_framework::caffe, dtype::float32, float32_bins},
      {roi_framework::nnapi, dtype::float32, float32_bins},
  };
  for (const auto& c : cases) {
    const tensor x = make(c.type, {1, 1, 64, 1}, arange(64));
    EXPECT_EQ(read(pool(c.framework, x, {0, 0, 0, 0, 56}, 7, 1).output), c.values)
        << to_string(c.framework) << " " << to_string(c.type);
  }
  // Example 1b: shifted by 10 rows. NNAPI adds the offset before floor/ceil and lands on 66.
  const tensor tall = make(dtype::float32, {1, 1, 80, 1}, arange(80));
  EXPECT_EQ(read(pool(roi_framework::directml, tall, {0, 0, 10, 0, 66}, 7, 1).output).back(), 66);
  EXPECT_EQ(read(pool(roi_framework::onnx, tall, {0, 0, 10, 0, 66}, 7, 1).output).back(), 67);
  EXPECT_EQ(read(pool(roi_framework::torchvision, tall, {0, 0, 10, 0, 66}, 7, 1).output).back(), 67);
  EXPECT_EQ(read(pool(roi_framework::nnapi, tall, {0, 0, 10, 0, 66}, 7, 1).output).back(), 66);
}

TEST(RoiExamples, TinyVectors) {
  // X = [0..4], ROI rows 0..2 pooled to 21: the last cell is 3 with float32 bins, 2 otherwise.
  const std::vector<double> five = arange(5);
  EXPECT_EQ(
      read(pool(roi_framework::torchvision, make(dtype::float32, {1, 1, 5, 1}, five), {0, 0, 0, 0, 2}, 21, 1).output)
          .back(),
      3);
  EXPECT_EQ(
      read(pool(roi_framework::torchvision, make(dtype::float64, {1, 1, 5, 1}, five), {0, 0, 0, 0, 2}, 21, 1).output)
          .back(),
      2);
  EXPECT_EQ(read(pool(roi_framework::directml, make(dtype::float32, {1, 1, 5, 1}, five), {0, 0, 0, 0, 2}, 21, 1).output)
                .back(),
            2);
  // RH = 62, PH = 14, decreasing data: float32 bin 7 starts at row 30, the integer bin at 31.
  const std::vector<double> decreasing = arange(64, 100, -1);
  EXPECT_EQ(
      read(pool(roi_framework::torchvision, make(dtype::float32, {1, 1, 64, 1}, decreasing), {0, 0, 0, 0, 61}, 14, 1)
               .output)[7],
      70);
  EXPECT_EQ(read(pool(roi_framework::directml, make(dtype::float32, {1, 1, 64, 1}, decreasing), {0, 0, 0, 0, 61}, 14, 1)
                     .output)[7],
            69);
}

// Example 2: 40 * 0.0625 = 2.5 exactly; half away from zero gives X[3,3], half to even X[2,2].
TEST(RoiExamples, CoordinateRounding) {
  const tensor x = make(dtype::float32, {1, 1, 6, 6}, arange(36));
  for (roi_framework framework : {roi_framework::directml, roi_framework::onnx, roi_framework::torchvision,
                                  roi_framework::caffe, roi_framework::openvino}) {
    EXPECT_EQ(read(pool(framework, x, {0, 40, 40, 40, 40}, 1, 1, 0.0625).output)[0], 21) << to_string(framework);
    EXPECT_EQ(read(pool(framework, x, {0, 0.5, 0.5, 2.5, 2.5}, 1, 1).output)[0], 21) << to_string(framework);
  }
  EXPECT_EQ(
      read(pool(roi_framework::directml, x, {0, 40, 40, 40, 40}, 1, 1, 0.0625, roi_rounding::half_to_even).output)[0],
      14);
  EXPECT_EQ(
      read(pool(roi_framework::directml, x, {0, 0.5, 0.5, 2.5, 2.5}, 1, 1, 1.0, roi_rounding::half_to_even).output)[0],
      14);
  const tensor half = make(dtype::float16, {1, 1, 6, 6}, arange(36));
  EXPECT_EQ(read(pool(roi_framework::torchvision, half, {0, 0.5, 0.5, 2.5, 2.5}, 1, 1).output)[0], 21);
}

// Example 3: partly outside the image; clamped bins can be empty.
TEST(RoiExamples, PartlyOutsideTheImage) {
  const tensor x = make(dtype::float32, {1, 1, 6, 6}, arange(36));
  for (roi_framework framework : {roi_framework::directml, roi_framework::onnx, roi_framework::torchvision,
                                  roi_framework::caffe, roi_framework::openvino}) {
    const roi_pool_result result = pool(framework, x, {0, -3, -3, 2, 2}, 2, 2);
    EXPECT_EQ(read(result.output), (std::vector<double>{0, 0, 0, 14})) << to_string(framework);
    EXPECT_EQ(read(result.argmax), (std::vector<double>{-1, -1, -1, 14})) << to_string(framework);
  }
  EXPECT_THROW(pool(roi_framework::nnapi, x, {0, -3, -3, 2, 2}, 2, 2), error);
}

// Example 4: x2 < x1. Forced to the single pixel (4, 4) by the Caffe family; rejected by
// DirectML (a documented precondition) and NNAPI.
TEST(RoiExamples, MalformedBox) {
  const tensor x = make(dtype::float32, {1, 1, 6, 6}, arange(36));
  for (roi_framework framework :
       {roi_framework::onnx, roi_framework::torchvision, roi_framework::caffe, roi_framework::openvino}) {
    EXPECT_EQ(read(pool(framework, x, {0, 4, 4, 1, 1}, 2, 2).output), (std::vector<double>{28, 28, 28, 28}))
        << to_string(framework);
  }
  EXPECT_THROW(pool(roi_framework::directml, x, {0, 4, 4, 1, 1}, 2, 2), error);
  EXPECT_THROW(pool(roi_framework::nnapi, x, {0, 4, 4, 1, 1}, 2, 2), error);
}

// Example 5: the value rules inside one 2x2 bin.
TEST(RoiExamples, MaxSeedsNanAndInfinity) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const double flt_max = FLT_MAX;
  struct row {
    std::vector<double> bin;
    double onnx, torchvision, caffe, nnapi, openvino, directml;
    double torchvision_argmax;
  };
  const row rows[] = {
      {{-inf, -inf, -inf, -inf}, -flt_max, -flt_max, -flt_max, -inf, -inf, -inf, -1},
      {{nan, 1, 2, nan}, nan, 2, 2, nan, nan, 2, 2},
      {{1, nan, 2, 3}, 3, 3, 3, 3, 3, 3, 3},
      {{nan, nan, nan, nan}, nan, -flt_max, -flt_max, nan, nan, nan, -1},
      {{-4, -1, -3, -2}, -1, -1, -1, -1, -1, -1, 1},
  };
  auto same = [](double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; };
  for (const auto& r : rows) {
    const tensor x = make(dtype::float32, {1, 1, 2, 2}, r.bin);
    const std::pair<roi_framework, double> expectations[] = {
        {roi_framework::onnx, r.onnx},         {roi_framework::torchvision, r.torchvision},
        {roi_framework::caffe, r.caffe},       {roi_framework::nnapi, r.nnapi},
        {roi_framework::openvino, r.openvino}, {roi_framework::directml, r.directml}};
    for (const auto& [framework, expected] : expectations) {
      const double actual = read(pool(framework, x, {0, 0, 0, 1, 1}, 1, 1).output)[0];
      EXPECT_TRUE(same(actual, expected))
          << to_string(framework) << ": got " << actual << ", expected " << expected << " for bin " << r.bin[0] << ","
          << r.bin[1] << "," << r.bin[2] << "," << r.bin[3];
    }
    EXPECT_EQ(read(pool(roi_framework::torchvision, x, {0, 0, 0, 1, 1}, 1, 1).argmax)[0], r.torchvision_argmax);
  }
  // float16 torchvision seeds with half(-FLT_MAX) = -inf.
  const tensor half = make(dtype::float16, {1, 1, 2, 2}, {-inf, -inf, -inf, -inf});
  EXPECT_EQ(read(pool(roi_framework::torchvision, half, {0, 0, 0, 1, 1}, 1, 1).output)[0], -inf);
}

TEST(RoiExamples, BatchIndexTruncatesTowardZero) {
  std::vector<double> values = arange(2 * 4);
  const tensor x = make(dtype::float32, {2, 1, 2, 2}, values);
  EXPECT_EQ(read(pool(roi_framework::torchvision, x, {-0.5, 0, 0, 1, 1}, 1, 1).output)[0], 3);
  EXPECT_EQ(read(pool(roi_framework::torchvision, x, {1.9, 0, 0, 1, 1}, 1, 1).output)[0], 7);
  EXPECT_THROW(pool(roi_framework::onnx, x, {2, 0, 0, 1, 1}, 1, 1), error);
  EXPECT_THROW(pool(roi_framework::directml, x, {-1.5, 0, 0, 1, 1}, 1, 1), error);
}

// OpenVINO's CPU plugin stops at the first ROI whose batch index is -1: it and all later
// ROIs give zeros.
TEST(RoiExamples, OpenVinoMinusOneSentinel) {
  const tensor x = make(dtype::float32, {1, 1, 2, 2}, {1, 2, 3, 4});
  const tensor rois = make(dtype::float32, {3, 5}, {0, 0, 0, 1, 1, -1, 0, 0, 1, 1, 0, 0, 0, 1, 1});
  const roi_pool_result result =
      roi_pool(x, rois, {.pooled_height = 1, .pooled_width = 1, .framework = roi_framework::openvino});
  EXPECT_EQ(read(result.output), (std::vector<double>{4, 0, 0}));
  EXPECT_THROW(roi_pool(x, rois, {.pooled_height = 1, .pooled_width = 1, .framework = roi_framework::onnx}), error);
}

TEST(RoiExamples, NhwcEqualsNchwAndDirectMlRoiForm) {
  std::vector<double> nchw_values = arange(2 * 3 * 5 * 4);
  const tensor nchw = make(dtype::float32, {2, 3, 5, 4}, nchw_values);
  tensor nhwc(dtype::float32, {2, 5, 4, 3});
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < 5; ++h)
        for (int w = 0; w < 4; ++w)
          nhwc.data_as<float>()[((n * 5 + h) * 4 + w) * 3 + c] = nchw.data_as<float>()[((n * 3 + c) * 5 + h) * 4 + w];
  const tensor rois = make(dtype::float32, {1, 1, 2, 5}, {1, 0, 1, 3, 4, 0, 1, 0, 2, 2});
  const roi_pool_result a = roi_pool(nchw, rois, {.pooled_height = 2, .pooled_width = 3}, std::nullopt, true);
  const roi_pool_result b =
      roi_pool(nhwc, rois, {.pooled_height = 2, .pooled_width = 3, .layout = layout::nhwc}, std::nullopt, true);
  ASSERT_EQ(b.output.shape(), (shape_t{2, 2, 3, 3}));
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c)
      for (int cell = 0; cell < 6; ++cell) {
        EXPECT_EQ(a.output.data_as<float>()[(r * 3 + c) * 6 + cell], b.output.data_as<float>()[(r * 6 + cell) * 3 + c]);
        EXPECT_EQ(a.argmax.data_as<std::int32_t>()[(r * 3 + c) * 6 + cell],
                  b.argmax.data_as<std::int32_t>()[(r * 6 + cell) * 3 + c]);
      }
}

// NNAPI quant8: raw values compared, the zero point for empty bins, ROIs as quant16 (scale 1/8).
TEST(RoiExamples, NnapiQuantized) {
  tensor x(dtype::quint8, {1, 2, 2, 1}, quantization{0.5f, 100});
  const std::uint8_t pixels[] = {7, 200, 3, 150};
  std::copy(pixels, pixels + 4, x.data_as<std::uint8_t>());
  tensor rois(dtype::uint16, {2, 4});
  const std::uint16_t boxes[] = {0, 0, 8, 8, 16, 0, 16, 0};  // [0,0,1,1] and [2,0,2,0] in eighths
  std::copy(boxes, boxes + 8, rois.data_as<std::uint16_t>());
  tensor batch(dtype::int32, {2});
  const roi_pool_result result =
      roi_pool(x, rois, {.pooled_height = 1, .pooled_width = 2, .framework = roi_framework::nnapi}, batch.view());
  ASSERT_EQ(result.output.shape(), (shape_t{2, 1, 2, 1}));
  const std::uint8_t* out = result.output.data_as<std::uint8_t>();
  EXPECT_EQ(out[0], 7);    // column 0: max(7, 3)
  EXPECT_EQ(out[1], 200);  // column 1: max(200, 150)
  EXPECT_EQ(out[2], 100);  // x = 2 = W: both bins are clamped away, giving the zero point
  EXPECT_EQ(out[3], 100);
  ASSERT_TRUE(result.output.quant().has_value());
  EXPECT_EQ(result.output.quant()->zero_point, 100);
}

}  // namespace
}  // namespace regrid
