// ROI pooling: fast kernels == reference bit for bit (values and argmax) on random inputs and
// ROIs under every preset, dtype, layout and ISA cap; the backward pass against a direct
// scatter; every validation sentence, with nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "core/float16.hpp"
#include "regrid/regrid.hpp"
#include "support/strided.hpp"

namespace regrid {
namespace {

const roi_framework all_frameworks[] = {roi_framework::directml,    roi_framework::onnx,  roi_framework::caffe,
                                        roi_framework::torchvision, roi_framework::nnapi, roi_framework::openvino};

void put(dtype type, std::byte* at, double value) {
  switch (type) {
    case dtype::float32: {
      const auto v = static_cast<float>(value);
      std::memcpy(at, &v, 4);
      break;
    }
    case dtype::float64: std::memcpy(at, &value, 8); break;
    case dtype::float16: {
      const auto v = detail::float_to_half(static_cast<float>(value));
      std::memcpy(at, &v, 2);
      break;
    }
    case dtype::bfloat16: {
      const auto v = detail::float_to_bfloat16(static_cast<float>(value));
      std::memcpy(at, &v, 2);
      break;
    }
    case dtype::quint8: *at = static_cast<std::byte>(static_cast<int>(value) & 0xff); break;
    case dtype::qint8: *at = static_cast<std::byte>(static_cast<int>(value) & 0xff); break;
    default: break;
  }
}

struct random_problem {
  tensor input;
  tensor rois;
  std::optional<tensor> batch_indices;
  roi_pool_options options;
};

// Values drawn from a small set so ties are common, with NaN, -inf, +inf and -0.0 mixed in.
random_problem make_problem(std::mt19937_64& rng, roi_framework framework, dtype type, layout memory_layout) {
  random_problem p;
  const bool nnapi = framework == roi_framework::nnapi;
  const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 2);
  const std::int64_t c = 1 + static_cast<std::int64_t>(rng() % 70);
  const std::int64_t h = 1 + static_cast<std::int64_t>(rng() % 12);
  const std::int64_t w = 1 + static_cast<std::int64_t>(rng() % 12);
  const shape_t shape = memory_layout == layout::nchw ? shape_t{n, c, h, w} : shape_t{n, h, w, c};
  p.input =
      tensor(type, shape, is_quantized(type) ? std::optional<quantization>(quantization{0.5f, 17}) : std::nullopt);
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::infinity(), -0.0, 0.0};
  for (std::int64_t i = 0; i < p.input.numel(); ++i) {
    const std::uint64_t draw = rng() % 100;
    double value = static_cast<double>(static_cast<int>(rng() % 9) - 4);
    if (is_quantized(type))
      value = static_cast<double>(rng() % 256);
    else if (draw < 8)
      value = specials[draw % 5];
    put(type, p.input.data() + i * static_cast<std::int64_t>(size_of(type)), value);
  }
  const std::int64_t roi_count = 1 + static_cast<std::int64_t>(rng() % 6);
  const dtype roi_type = is_quantized(type) ? dtype::uint16 : type;
  p.rois = tensor(roi_type, {roi_count, nnapi ? 4 : 5});
  p.options.pooled_height = 1 + static_cast<std::int64_t>(rng() % 7);
  p.options.pooled_width = 1 + static_cast<std::int64_t>(rng() % 7);
  const double scales[] = {1.0, 0.5, 0.25, 0.0625, 1.5};
  p.options.spatial_scale = nnapi && is_quantized(type) ? 1.0 : scales[rng() % 5];
  p.options.framework = framework;
  p.options.layout = memory_layout;
  if (nnapi) p.batch_indices = tensor(dtype::int32, {roi_count});
  for (std::int64_t r = 0; r < roi_count; ++r) {
    const double scale = p.options.spatial_scale;
    // NNAPI wants boxes inside the image; the others also get boxes hanging off the edges.
    const double lo = nnapi ? 0 : -4;
    auto coordinate = [&](std::int64_t extent) {
      const double span = nnapi ? static_cast<double>(extent) : static_cast<double>(extent) + 8;
      return (lo + span * static_cast<double>(rng() % 1000) / 1000.0) / scale;
    };
    double x1 = coordinate(w), y1 = coordinate(h), x2 = coordinate(w), y2 = coordinate(h);
    const bool keep_malformed = framework != roi_framework::directml && !nnapi && rng() % 5 == 0;
    if (!keep_malformed) {
      if (x2 < x1) std::swap(x1, x2);
      if (y2 < y1) std::swap(y1, y2);
    }
    if (is_quantized(type)) {  // quant16 ROIs in eighths
      const double box[4] = {x1, y1, x2, y2};
      for (int k = 0; k < 4; ++k) {
        p.rois.data_as<std::uint16_t>()[r * 4 + k] = static_cast<std::uint16_t>(std::floor(box[k] * 8));
      }
      auto* q = p.rois.data_as<std::uint16_t>() + r * 4;
      if (q[2] < q[0]) std::swap(q[0], q[2]);
      if (q[3] < q[1]) std::swap(q[1], q[3]);
    } else {
      const double batch = static_cast<double>(rng() % static_cast<std::uint64_t>(n)) + (rng() % 2 ? 0.5 : 0.0);
      const double row[5] = {batch, x1, y1, x2, y2};
      for (int k = nnapi ? 1 : 0; k < 5; ++k) {
        put(roi_type,
            p.rois.data() + (r * (nnapi ? 4 : 5) + k - (nnapi ? 1 : 0)) * static_cast<std::int64_t>(size_of(roi_type)),
            row[k]);
      }
    }
    if (nnapi)
      p.batch_indices->data_as<std::int32_t>()[r] = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(n));
  }
  return p;
}

class RoiDifferential : public ::testing::TestWithParam<std::tuple<roi_framework, dtype, layout>> {};

TEST_P(RoiDifferential, FastEqualsReferenceUnderEveryIsaCap) {
  const auto [framework, type, memory_layout] = GetParam();
  std::mt19937_64 rng(static_cast<std::uint64_t>(framework) * 1000 + static_cast<std::uint64_t>(type) * 10 +
                      static_cast<std::uint64_t>(memory_layout));
  const isa saved = active_isa();
  int checked = 0;
  for (int trial = 0; trial < 25; ++trial) {
    random_problem p = make_problem(rng, framework, type, memory_layout);
    std::optional<tensor_view> indices;
    if (p.batch_indices) indices = p.batch_indices->view();
    const shape_t out_shape = roi_pool_shape(p.input.shape(), p.rois.shape()[0], p.options);
    tensor expected = testing::filled_tensor(type, out_shape, std::byte{0x11});
    tensor expected_argmax = testing::filled_tensor(dtype::int32, out_shape, std::byte{0x11});
    reference::roi_pool(p.input, p.rois, expected.mutable_view(), p.options, indices, expected_argmax.mutable_view());
    for (isa cap : {isa::scalar, isa::avx2, isa::avx512, isa::avx512vbmi}) {
      if (cap > detected_isa()) continue;  // not on this CPU; the lower caps still run
      set_max_isa(cap);
      for (bool with_argmax : {true, false}) {
        tensor actual = testing::filled_tensor(type, out_shape, std::byte{0x22});
        tensor actual_argmax = testing::filled_tensor(dtype::int32, out_shape, std::byte{0x22});
        std::optional<mutable_tensor_view> argmax;
        if (with_argmax) argmax = actual_argmax.mutable_view();
        roi_pool(p.input, p.rois, actual.mutable_view(), p.options, indices, argmax);
        ASSERT_TRUE(testing::same_bytes(actual, expected))
            << to_string(framework) << " " << to_string(type) << " trial " << trial << " isa " << to_string(cap);
        if (with_argmax) {
          ASSERT_TRUE(testing::same_bytes(actual_argmax, expected_argmax)) << "argmax, trial " << trial;
        }
        ++checked;
      }
    }
  }
  set_max_isa(saved);
  EXPECT_GT(checked, 0);
}

std::vector<std::tuple<roi_framework, dtype, layout>> differential_cases() {
  std::vector<std::tuple<roi_framework, dtype, layout>> cases;
  for (roi_framework framework : all_frameworks) {
    for (dtype type : {dtype::float32, dtype::float16, dtype::bfloat16, dtype::float64, dtype::quint8, dtype::qint8}) {
      if (is_quantized(type) && framework != roi_framework::nnapi) continue;
      for (layout memory_layout : {layout::nchw, layout::nhwc}) cases.emplace_back(framework, type, memory_layout);
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllPresets, RoiDifferential, ::testing::ValuesIn(differential_cases()), [](const auto& param) {
  return std::string(to_string(std::get<0>(param.param))) + "_" + std::string(to_string(std::get<1>(param.param))) +
         "_" + std::string(to_string(std::get<2>(param.param)));
});

TEST(RoiStrided, StridedInputsAndOutputsMatchContiguous) {
  std::mt19937_64 rng(77);
  for (int trial = 0; trial < 20; ++trial) {
    random_problem p =
        make_problem(rng, roi_framework::torchvision, dtype::float32, trial % 2 ? layout::nchw : layout::nhwc);
    const roi_pool_result expected = roi_pool(p.input, p.rois, p.options, std::nullopt, true);
    testing::strided_buffer input(dtype::float32, p.input.shape(), testing::all_memory_styles[trial % 5]);
    input.scatter(p.input);
    testing::strided_buffer output(dtype::float32, expected.output.shape(),
                                   testing::all_memory_styles[(trial + 2) % 5]);
    testing::strided_buffer argmax(dtype::int32, expected.output.shape(), testing::all_memory_styles[(trial + 3) % 5]);
    roi_pool(input.const_view(), p.rois, output.view(), p.options, std::nullopt, argmax.view());
    EXPECT_TRUE(testing::same_bytes(output.gather(), expected.output)) << trial;
    EXPECT_TRUE(testing::same_bytes(argmax.gather(), expected.argmax)) << trial;
    EXPECT_TRUE(output.only_elements_written());
  }
}

// Large enough for the thread pool and several channel blocks.
TEST(RoiThreads, ThreadCountsAgree) {
  std::mt19937_64 rng(5);
  tensor input(dtype::float32, {2, 130, 40, 40});
  for (std::int64_t i = 0; i < input.numel(); ++i) input.data_as<float>()[i] = static_cast<float>(rng() % 1000);
  tensor rois(dtype::float32, {64, 5});
  for (int r = 0; r < 64; ++r) {
    float* row = rois.data_as<float>() + r * 5;
    row[0] = static_cast<float>(r % 2);
    row[1] = static_cast<float>(rng() % 300);
    row[2] = static_cast<float>(rng() % 300);
    row[3] = row[1] + static_cast<float>(rng() % 100);
    row[4] = row[2] + static_cast<float>(rng() % 100);
  }
  const roi_pool_options options{.pooled_height = 7, .pooled_width = 7, .spatial_scale = 0.125};
  const int saved = num_threads();
  set_num_threads(1);
  const roi_pool_result single = roi_pool(input, rois, options, std::nullopt, true);
  set_num_threads(2);
  const roi_pool_result dual = roi_pool(input, rois, options, std::nullopt, true);
  set_num_threads(saved);
  EXPECT_TRUE(testing::same_bytes(single.output, dual.output));
  EXPECT_TRUE(testing::same_bytes(single.argmax, dual.argmax));
  // The backward splits NCHW by channels and NHWC by images; both must equal one thread's sums.
  const tensor batch = roi_batch_indices(rois, 2, options);
  for (layout memory_layout : {layout::nchw, layout::nhwc}) {
    const bool nchw = memory_layout == layout::nchw;
    const shape_t grad_shape = nchw ? input.shape() : shape_t{2, 40, 40, 130};
    const shape_t out_shape = nchw ? single.output.shape() : shape_t{64, 7, 7, 130};
    tensor grad_out(dtype::float32, out_shape);
    for (std::int64_t i = 0; i < grad_out.numel(); ++i)
      grad_out.data_as<float>()[i] = 0.1f * static_cast<float>(rng() % 97);
    // The forward's indices, laid out as this layout's argmax: any index in [-1, 1600) is valid.
    tensor indices(dtype::int32, out_shape);
    std::memcpy(indices.data(), single.argmax.data(), indices.size_bytes());
    set_num_threads(1);
    const tensor grad_single = roi_pool_backward(grad_out, indices, grad_shape, memory_layout, batch.view());
    set_num_threads(2);
    const tensor grad_dual = roi_pool_backward(grad_out, indices, grad_shape, memory_layout, batch.view());
    set_num_threads(saved);
    EXPECT_TRUE(testing::same_bytes(grad_single, grad_dual)) << to_string(memory_layout);
  }
}

// Outputs past kernels::streaming_output_bytes (12 MiB) are written with streaming stores, in
// whole-block runs for NCHW and per-cell runs for NHWC; 70 channels leave runs that start and
// end off 16-byte boundaries.
TEST(RoiLargeOutput, StreamedOutputsEqualReference) {
  for (const std::int64_t channels : {std::int64_t{64}, std::int64_t{70}}) {
    for (layout memory_layout : {layout::nchw, layout::nhwc}) {
      std::mt19937_64 rng(static_cast<std::uint64_t>(channels) * 3 + static_cast<std::uint64_t>(memory_layout));
      const shape_t shape = memory_layout == layout::nchw ? shape_t{2, channels, 24, 24} : shape_t{2, 24, 24, channels};
      tensor input(dtype::float32, shape);
      for (std::int64_t i = 0; i < input.numel(); ++i) {
        const std::uint64_t draw = rng() % 100;
        input.data_as<float>()[i] = draw == 0 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(rng() % 9);
      }
      const std::int64_t roi_count = 1100;
      tensor rois(dtype::float32, {roi_count, 5});
      for (std::int64_t r = 0; r < roi_count; ++r) {
        float* row = rois.data_as<float>() + r * 5;
        row[0] = static_cast<float>(r % 2);
        row[1] = static_cast<float>(rng() % 200) - 8;
        row[2] = static_cast<float>(rng() % 200) - 8;
        row[3] = row[1] + static_cast<float>(rng() % 120);
        row[4] = row[2] + static_cast<float>(rng() % 120);
      }
      for (roi_framework framework : {roi_framework::torchvision, roi_framework::directml}) {
        const roi_pool_options options{.pooled_height = 7,
                                       .pooled_width = 7,
                                       .spatial_scale = 0.125,
                                       .layout = memory_layout,
                                       .framework = framework};
        const shape_t out_shape = roi_pool_shape(input.shape(), roi_count, options);
        tensor expected = testing::filled_tensor(dtype::float32, out_shape, std::byte{0x11});
        tensor expected_argmax = testing::filled_tensor(dtype::int32, out_shape, std::byte{0x11});
        reference::roi_pool(input, rois, expected.mutable_view(), options, std::nullopt,
                            expected_argmax.mutable_view());
        ASSERT_GE(expected.size_bytes(), std::size_t{12} << 20);
        for (bool with_argmax : {true, false}) {
          tensor actual = testing::filled_tensor(dtype::float32, out_shape, std::byte{0x22});
          tensor actual_argmax = testing::filled_tensor(dtype::int32, out_shape, std::byte{0x22});
          std::optional<mutable_tensor_view> argmax;
          if (with_argmax) argmax = actual_argmax.mutable_view();
          roi_pool(input, rois, actual.mutable_view(), options, std::nullopt, argmax);
          EXPECT_TRUE(testing::same_bytes(actual, expected)) << channels << " " << to_string(framework);
          if (with_argmax) {
            EXPECT_TRUE(testing::same_bytes(actual_argmax, expected_argmax)) << channels;
          }
        }
      }
    }
  }
}

// Backward against a direct scatter in torchvision's order, in the gradient's own dtype.
TEST(RoiBackward, MatchesDirectScatter) {
  std::mt19937_64 rng(21);
  for (dtype type : {dtype::float32, dtype::float64, dtype::float16, dtype::bfloat16}) {
    for (layout memory_layout : {layout::nchw, layout::nhwc}) {
      random_problem p = make_problem(rng, roi_framework::torchvision, type, memory_layout);
      const roi_pool_result forward = roi_pool(p.input, p.rois, p.options, std::nullopt, true);
      tensor grad_out(type, forward.output.shape());
      for (std::int64_t i = 0; i < grad_out.numel(); ++i) {
        put(type, grad_out.data() + i * static_cast<std::int64_t>(size_of(type)),
            static_cast<double>(rng() % 17) / 4.0 - 2.0);
      }
      const tensor batch = roi_batch_indices(p.rois, p.input.shape()[0], p.options);
      const tensor grad = roi_pool_backward(grad_out, forward.argmax, p.input.shape(), memory_layout, batch.view());
      // Direct scatter.
      const bool nchw = memory_layout == layout::nchw;
      const shape_t& in = p.input.shape();
      const std::int64_t C = nchw ? in[1] : in[3], HW = nchw ? in[2] * in[3] : in[1] * in[2];
      const shape_t& os = forward.output.shape();
      const std::int64_t PH = nchw ? os[2] : os[1], PW = nchw ? os[3] : os[2];
      std::vector<double> expected(static_cast<std::size_t>(p.input.numel()), 0.0);
      auto round_like = [&](double v) {
        switch (type) {
          case dtype::float32: return static_cast<double>(static_cast<float>(v));
          case dtype::float16:
            return static_cast<double>(detail::half_to_float(detail::float_to_half(static_cast<float>(v))));
          case dtype::bfloat16:
            return static_cast<double>(detail::bfloat16_to_float(detail::float_to_bfloat16(static_cast<float>(v))));
          default: return v;
        }
      };
      auto value = [&](const tensor& t, std::int64_t i) {
        double v = 0;
        switch (type) {
          case dtype::float32: v = t.data_as<float>()[i]; break;
          case dtype::float64: v = t.data_as<double>()[i]; break;
          case dtype::float16: v = detail::half_to_float(t.data_as<std::uint16_t>()[i]); break;
          default: v = detail::bfloat16_to_float(t.data_as<std::uint16_t>()[i]); break;
        }
        return v;
      };
      for (std::int64_t r = 0; r < os[0]; ++r) {
        const std::int64_t b = batch.data_as<std::int32_t>()[r];
        for (std::int64_t c = 0; c < C; ++c) {
          for (std::int64_t ph = 0; ph < PH; ++ph) {
            for (std::int64_t pw = 0; pw < PW; ++pw) {
              const std::int64_t o = nchw ? ((r * C + c) * PH + ph) * PW + pw : ((r * PH + ph) * PW + pw) * C + c;
              const std::int32_t index = forward.argmax.data_as<std::int32_t>()[o];
              if (index < 0) continue;
              const std::int64_t target = nchw ? (b * C + c) * HW + index : (b * HW + index) * C + c;
              expected[static_cast<std::size_t>(target)] =
                  round_like(expected[static_cast<std::size_t>(target)] + value(grad_out, o));
            }
          }
        }
      }
      for (std::int64_t i = 0; i < grad.numel(); ++i) {
        ASSERT_EQ(value(grad, i), expected[static_cast<std::size_t>(i)]) << to_string(type) << " element " << i;
      }
    }
  }
}

// torchvision's documented case: a 2x2 region pooled to 3x3 sends 4 gradients of each
// overlapping cell to the same input element; overlapping bins accumulate.
TEST(RoiBackward, OverlappingBinsAccumulate) {
  tensor x(dtype::float32, {1, 1, 2, 2});
  const float pixels[] = {1, 2, 3, 4};
  std::copy(pixels, pixels + 4, x.data_as<float>());
  tensor rois(dtype::float32, {1, 5});
  const float box[] = {0, 0, 0, 1, 1};
  std::copy(box, box + 5, rois.data_as<float>());
  const roi_pool_options options{.pooled_height = 3, .pooled_width = 3, .framework = roi_framework::torchvision};
  const roi_pool_result forward = roi_pool(x, rois, options, std::nullopt, true);
  tensor ones(dtype::float32, {1, 1, 3, 3});
  std::fill(ones.data_as<float>(), ones.data_as<float>() + 9, 1.0f);
  const tensor grad = roi_pool_backward(ones, forward.argmax, x.shape());
  float total = 0;
  for (int i = 0; i < 4; ++i) total += grad.data_as<float>()[i];
  EXPECT_EQ(total, 9.0f);
  EXPECT_EQ(grad.data_as<float>()[3], 4.0f);  // (1,1) is the max of the four bins that reach it
}

struct roi_error_case {
  std::string name;
  std::function<void()> call;
  std::string message;
};

TEST(RoiValidation, EveryRuleHasItsSentenceAndNothingIsWritten) {
  const tensor x(dtype::float32, {2, 3, 8, 8});
  auto rois_of = [](std::vector<float> values, shape_t shape) {
    tensor t(dtype::float32, std::move(shape));
    std::copy(values.begin(), values.end(), t.data_as<float>());
    return t;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const roi_pool_options base{.pooled_height = 2, .pooled_width = 2};
  testing::strided_buffer out(dtype::float32, {1, 3, 2, 2}, testing::memory_style::misaligned);
  auto run = [&](const tensor& rois, roi_pool_options options) {
    return [&, rois_copy = rois.view(), options] { roi_pool(x, rois_copy, out.view(), options); };
  };
  const tensor good = rois_of({0, 0, 0, 4, 4}, {1, 5});
  const tensor bad_batch = rois_of({2, 0, 0, 4, 4}, {1, 5});
  const tensor negative_batch = rois_of({-1, 0, 0, 4, 4}, {1, 5});
  const tensor nan_coordinate = rois_of({0, nan, 0, 4, 4}, {1, 5});
  const tensor inf_coordinate = rois_of({0, 0, 0, inf, 4}, {1, 5});
  const tensor nan_batch = rois_of({nan, 0, 0, 4, 4}, {1, 5});
  const tensor huge = rois_of({0, 0, 0, 4e12f, 4}, {1, 5});
  const tensor malformed = rois_of({0, 4, 0, 1, 4}, {1, 5});
  const tensor wrong_shape = rois_of({0, 0, 0, 4}, {1, 4});
  const tensor wrong_rank = rois_of({0, 0, 0, 4, 4}, {5});
  tensor wrong_type(dtype::float64, {1, 5});
  const roi_error_case cases[] = {
      {"batch", run(bad_batch, base), "roi_pool: ROI 0 has batch index 2, outside [0, 2)"},
      {"negative batch", run(negative_batch, base), "roi_pool: ROI 0 has batch index -1, outside [0, 2)"},
      {"nan batch", run(nan_batch, base), "roi_pool: ROI 0 has batch index nan, which is not a finite number"},
      {"nan", run(nan_coordinate, base), "roi_pool: ROI 0 has a non-finite coordinate x1 = nan"},
      {"inf", run(inf_coordinate, base), "roi_pool: ROI 0 has a non-finite coordinate x2 = inf"},
      {"huge", run(huge, base),
       "roi_pool: ROI 0 coordinate x2 = 3.99999998e+12 scales to 3.99999998e+12, beyond the supported magnitude 2^30"},
      {"malformed", run(malformed, base),
       "roi_pool: ROI 0 is malformed: x2 = 1, y2 = 4 must not be less than x1 = 4, y1 = 0"},
      {"pooled", run(good, {.pooled_height = 0, .pooled_width = 2}), "roi_pool: pooled size 0x2 must be at least 1x1"},
      {"scale", run(good, {.pooled_height = 2, .pooled_width = 2, .spatial_scale = 0}),
       "roi_pool: spatial_scale 0 must be a finite number greater than 0"},
      {"scale nan", run(good, {.pooled_height = 2, .pooled_width = 2, .spatial_scale = std::nan("")}),
       "roi_pool: spatial_scale nan must be a finite number greater than 0"},
      {"shape", run(wrong_shape, base),
       "roi_pool: rois must have shape [R, 5] or [1, 1, R, 5] ([batch, x1, y1, x2, y2]), got [1, 4]"},
      {"rank", run(wrong_rank, base),
       "roi_pool: rois must have shape [R, 5] or [1, 1, R, 5] ([batch, x1, y1, x2, y2]), got [5]"},
      {"dtype", run(wrong_type, base), "roi_pool: rois dtype float64 must be float32, the input's dtype"},
      {"nnapi indices", run(good, {.pooled_height = 2, .pooled_width = 2, .framework = roi_framework::nnapi}),
       "roi_pool: rois must have shape [R, 4] ([x1, y1, x2, y2], with batch_indices [R]), got [1, 5]"},
      {"stride",
       run(wrong_shape,
           {.pooled_height = 2, .pooled_width = 2, .height_stride = -1.0, .framework = roi_framework::nnapi}),
       "roi_pool: batch_indices [R] (int32) are required under framework nnapi"},
  };
  for (const auto& c : cases) {
    try {
      c.call();
      ADD_FAILURE() << c.name << ": expected " << c.message;
    } catch (const error& failure) {
      EXPECT_EQ(std::string(failure.what()), c.message) << c.name;
    }
    const tensor written = out.gather();
    for (std::size_t i = 0; i < written.size_bytes(); ++i) ASSERT_EQ(written.data()[i], testing::fill_byte) << c.name;
  }
  try {
    roi_pool(tensor(dtype::float32, {3, 8, 8}), good, base);
    FAIL();
  } catch (const error& failure) {
    EXPECT_STREQ(failure.what(), "roi_pool: input must have rank 4 ([N, C, H, W]), got rank 3");
  }
  try {
    roi_pool(tensor(dtype::int32, {1, 1, 2, 2}), good, base);
    FAIL();
  } catch (const error& failure) {
    EXPECT_STREQ(failure.what(),
                 "roi_pool: input dtype int32 is not supported (float32, float16, bfloat16, float64, or quint8 / qint8 "
                 "under nnapi)");
  }
  tensor indices(dtype::int32, {1});
  try {
    roi_pool(x, wrong_shape,
             {.pooled_height = 2,
              .pooled_width = 2,
              .height_stride = -1.0,
              .layout = layout::nchw,
              .framework = roi_framework::nnapi},
             indices.view());
    FAIL();
  } catch (const error& failure) {
    EXPECT_STREQ(failure.what(), "roi_pool: height_stride -1 must be a finite number greater than 0");
  }
  const tensor outside = rois_of({0, 0, 9, 4}, {1, 4});
  try {
    roi_pool(x, outside,
             {.pooled_height = 2, .pooled_width = 2, .layout = layout::nchw, .framework = roi_framework::nnapi},
             indices.view());
    FAIL();
  } catch (const error& failure) {
    EXPECT_STREQ(failure.what(),
                 "roi_pool: ROI 0 coordinate x2 = 9 scales to 9, outside the image [0, 8]; framework nnapi rejects it");
  }
  tensor argmax(dtype::int32, {1, 1, 1, 1});
  tensor grad(dtype::float32, {1, 1, 1, 1});
  argmax.data_as<std::int32_t>()[0] = 64;
  try {
    roi_pool_backward(grad, argmax, shape_t{1, 1, 8, 8});
    FAIL();
  } catch (const error& failure) {
    EXPECT_STREQ(failure.what(), "roi_pool_backward: argmax 64 at [0, 0, 0, 0] is outside [-1, 64) for a 8x8 plane");
  }
  try {
    roi_pool_backward(grad, argmax, shape_t{2, 1, 8, 8});
    FAIL();
  } catch (const error& failure) {
    EXPECT_STREQ(failure.what(),
                 "roi_pool_backward: the batch index of each ROI is needed when the input batch is 2 (pass roi_batch)");
  }
}

// The packed scatter finds bad indices while it runs (on two threads, in either layout); the
// sentence still names the first one in (r, c, ph, pw) order.
TEST(RoiValidation, BackwardNamesTheFirstBadArgmaxInOrder) {
  const int saved = num_threads();
  set_num_threads(2);
  for (layout memory_layout : {layout::nchw, layout::nhwc}) {
    const shape_t out_shape = memory_layout == layout::nchw ? shape_t{40, 64, 7, 7} : shape_t{40, 7, 7, 64};
    tensor grad(dtype::float32, out_shape);
    tensor argmax(dtype::int32, out_shape);
    for (std::int64_t i = 0; i < argmax.numel(); ++i)
      argmax.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(i % 101) - 1;
    auto at = [&](std::int64_t r, std::int64_t c, std::int64_t ph, std::int64_t pw) -> std::int32_t& {
      const std::int64_t offset =
          memory_layout == layout::nchw ? ((r * 64 + c) * 7 + ph) * 7 + pw : ((r * 7 + ph) * 7 + pw) * 64 + c;
      return argmax.data_as<std::int32_t>()[offset];
    };
    at(30, 2, 0, 0) = 100;  // a later ROI in a channel the first thread scatters first
    at(12, 60, 3, 5) = -2;  // the first offender in (r, c, ph, pw) order
    const shape_t input_shape = memory_layout == layout::nchw ? shape_t{1, 64, 10, 10} : shape_t{1, 10, 10, 64};
    try {
      roi_pool_backward(grad, argmax, input_shape, memory_layout);
      FAIL();
    } catch (const error& failure) {
      EXPECT_STREQ(failure.what(),
                   "roi_pool_backward: argmax -2 at [12, 60, 3, 5] is outside [-1, 100) for a 10x10 plane");
    }
  }
  set_num_threads(saved);
}

}  // namespace
}  // namespace regrid
