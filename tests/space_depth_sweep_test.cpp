// Fast path == reference, bit for bit, over layouts x modes x element widths x block sizes x
// shapes (K = 1, 2, 3), in both directions; round trips; pre-filled outputs; strided,
// misaligned, Fortran-order and reversed inputs and outputs with guard bytes.
#include <gtest/gtest.h>

#include <random>
#include <span>
#include <string>
#include <vector>

#include "regrid/regrid.hpp"
#include "support/strided.hpp"

namespace regrid {
namespace {

using testing::all_memory_styles;
using testing::filled_tensor;
using testing::random_tensor;
using testing::same_bytes;
using testing::strided_buffer;

struct sweep_case {
  layout memory_layout;
  mode order;
  int spatial_rank;
  dtype type;
  std::int64_t block;
  std::int64_t batch;
  std::int64_t channels;  // space-side channels (channel groups for NCHW_VECT_C)
  shape_t coarse;         // O_1..O_K
  int index;              // position in the sweep, picks the strided memory styles
};

shape_t space_shape_of(const sweep_case& c) {
  shape_t spatial;
  for (std::int64_t o : c.coarse) spatial.push_back(o * c.block);
  shape_t shape{c.batch};
  const bool last = c.memory_layout == layout::nhwc || c.memory_layout == layout::channels_last;
  if (!last) shape.push_back(c.channels);
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  if (last) shape.push_back(c.channels);
  if (c.memory_layout == layout::nchw_vect_c) shape.push_back(4);
  return shape;
}

std::vector<sweep_case> make_sweep() {
  struct layout_config {
    layout memory_layout;
    int spatial_rank;
  };
  const layout_config layouts[] = {{layout::nchw, 2},           {layout::nhwc, 2},           {layout::nchw_vect_c, 2},
                                   {layout::channels_first, 1}, {layout::channels_first, 3}, {layout::channels_last, 1},
                                   {layout::channels_last, 3}};
  const dtype types[] = {dtype::uint8, dtype::float16, dtype::float32, dtype::float64, dtype::complex128};
  const std::int64_t blocks[] = {1, 2, 3, 4, 8};
  struct shape_config {
    std::int64_t batch;
    std::int64_t channels;
    shape_t coarse;
  };
  auto shapes_for = [](int spatial_rank) -> std::vector<shape_config> {
    switch (spatial_rank) {
      case 1: return {{2, 3, {5}}, {1, 1, {7}}, {3, 4, {1}}};
      case 2: return {{2, 3, {3, 2}}, {1, 1, {5, 7}}, {1, 16, {2, 3}}};
      default: return {{1, 2, {2, 1, 3}}, {2, 1, {1, 2, 2}}};
    }
  };
  std::vector<sweep_case> cases;
  for (const auto& config : layouts) {
    const bool vect_c = config.memory_layout == layout::nchw_vect_c;
    for (mode order : {mode::dcr, mode::crd}) {
      if (vect_c && order == mode::crd) continue;
      for (dtype type : types) {
        if (vect_c && size_of(type) != 1) continue;
        for (std::int64_t block : blocks) {
          for (const auto& shape : shapes_for(config.spatial_rank)) {
            const std::int64_t channels = vect_c ? (shape.channels + 1) / 2 : shape.channels;
            cases.push_back({config.memory_layout, order, config.spatial_rank, vect_c ? dtype::qint8 : type, block,
                             shape.batch, channels, shape.coarse, static_cast<int>(cases.size())});
          }
        }
      }
    }
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<sweep_case>& info) {
  const sweep_case& c = info.param;
  std::string name = std::string(to_string(c.memory_layout)) + "_K" + std::to_string(c.spatial_rank) + "_" +
                     std::string(to_string(c.order)) + "_" + std::string(to_string(c.type)) + "_b" +
                     std::to_string(c.block) + "_shape";
  for (std::int64_t extent : space_shape_of(c)) name += "x" + std::to_string(extent);
  return name;
}

class SpaceDepthSweep : public ::testing::TestWithParam<sweep_case> {};

TEST_P(SpaceDepthSweep, FastEqualsReferenceInBothDirections) {
  const sweep_case& c = GetParam();
  const space_depth_options options{.block_size = c.block, .layout = c.memory_layout, .mode = c.order};
  const shape_t space_shape = space_shape_of(c);
  const shape_t depth_shape = space_to_depth_shape(space_shape, options);
  ASSERT_EQ(depth_to_space_shape(depth_shape, options), space_shape);
  std::mt19937_64 rng(static_cast<std::uint64_t>(c.index) * 7919 + 17);

  // The references, outputs pre-filled with a pattern the fast path's outputs do not share.
  const tensor x = random_tensor(c.type, space_shape, rng);
  tensor expected = filled_tensor(c.type, depth_shape, std::byte{0x11});
  reference::space_to_depth(x, expected.mutable_view(), options);
  const tensor y = random_tensor(c.type, depth_shape, rng);
  tensor expected_space = filled_tensor(c.type, space_shape, std::byte{0x11});
  reference::depth_to_space(y, expected_space.mutable_view(), options);

  // The fast path under every ISA cap the host supports.
  for (isa cap : {isa::scalar, isa::avx2, isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;  // not on this CPU; the lower levels still run
    set_max_isa(cap);
    tensor actual = filled_tensor(c.type, depth_shape, std::byte{0x22});
    space_to_depth(x, actual.mutable_view(), options);
    EXPECT_TRUE(same_bytes(actual, expected)) << "space_to_depth differs from the reference under " << to_string(cap);
    EXPECT_TRUE(same_bytes(depth_to_space(actual, options), x))
        << "depth_to_space(space_to_depth(x)) != x under " << to_string(cap);
    tensor actual_space = filled_tensor(c.type, space_shape, std::byte{0x22});
    depth_to_space(y, actual_space.mutable_view(), options);
    EXPECT_TRUE(same_bytes(actual_space, expected_space))
        << "depth_to_space differs from the reference under " << to_string(cap);
    EXPECT_TRUE(same_bytes(space_to_depth(actual_space, options), y))
        << "space_to_depth(depth_to_space(y)) != y under " << to_string(cap);
  }
  set_max_isa(isa::avx512vbmi);
}

TEST_P(SpaceDepthSweep, StridedAndMisalignedOperands) {
  const sweep_case& c = GetParam();
  const space_depth_options options{.block_size = c.block, .layout = c.memory_layout, .mode = c.order};
  const shape_t space_shape = space_shape_of(c);
  const shape_t depth_shape = space_to_depth_shape(space_shape, options);
  const auto src_style = all_memory_styles[static_cast<std::size_t>(c.index) % 5];
  const auto dst_style = all_memory_styles[static_cast<std::size_t>(c.index + 2) % 5];
  std::mt19937_64 rng(static_cast<std::uint64_t>(c.index) * 104729 + 3);

  const tensor x = random_tensor(c.type, space_shape, rng);
  strided_buffer src(c.type, space_shape, src_style);
  src.scatter(x);
  strided_buffer dst(c.type, depth_shape, dst_style);
  space_to_depth(src.const_view(), dst.view(), options);
  EXPECT_TRUE(same_bytes(dst.gather(), space_to_depth(x, options)));
  EXPECT_TRUE(dst.only_elements_written()) << "space_to_depth wrote outside the output's elements";
  EXPECT_TRUE(same_bytes(src.gather(), x)) << "space_to_depth modified its input";
  strided_buffer dst_reference(c.type, depth_shape, dst_style);
  reference::space_to_depth(src.const_view(), dst_reference.view(), options);
  EXPECT_TRUE(same_bytes(dst_reference.gather(), dst.gather()));

  const tensor y = random_tensor(c.type, depth_shape, rng);
  strided_buffer depth_src(c.type, depth_shape, dst_style);
  depth_src.scatter(y);
  strided_buffer space_dst(c.type, space_shape, src_style);
  depth_to_space(depth_src.const_view(), space_dst.view(), options);
  EXPECT_TRUE(same_bytes(space_dst.gather(), depth_to_space(y, options)));
  EXPECT_TRUE(space_dst.only_elements_written()) << "depth_to_space wrote outside the output's elements";
}

INSTANTIATE_TEST_SUITE_P(AllVariants, SpaceDepthSweep, ::testing::ValuesIn(make_sweep()), case_name);

// A tensor run through the thread pool's split: space_to_depth and depth_to_space on 1, 2 and 3
// threads into pre-filled outputs, == reference.
struct threaded_case {
  layout memory_layout;
  mode order;
  dtype type;
  shape_t space_shape;
  std::int64_t block;
};

void expect_same_on_one_two_and_three_threads(std::span<const threaded_case> cases, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int saved = num_threads();
  for (const auto& c : cases) {
    const space_depth_options options{.block_size = c.block, .layout = c.memory_layout, .mode = c.order};
    const tensor x = random_tensor(c.type, c.space_shape, rng);
    const shape_t depth_shape = space_to_depth_shape(c.space_shape, options);
    tensor expected(c.type, depth_shape);
    reference::space_to_depth(x, expected.mutable_view(), options);
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      tensor depth = filled_tensor(c.type, depth_shape, std::byte{0x5a});
      space_to_depth(x, depth.mutable_view(), options);
      EXPECT_TRUE(same_bytes(depth, expected)) << to_string(c.memory_layout) << " threads " << threads;
      tensor space = filled_tensor(c.type, c.space_shape, std::byte{0xa5});
      depth_to_space(expected, space.mutable_view(), options);
      EXPECT_TRUE(same_bytes(space, x)) << to_string(c.memory_layout) << " threads " << threads;
    }
  }
  set_num_threads(saved);
}

// Tensors large enough for the thread pool: multi-threaded == single-threaded == reference.
TEST(SpaceDepthThreads, LargeTensorsMatchAcrossThreadCounts) {
  const threaded_case cases[] = {
      {layout::nchw, mode::crd, dtype::float32, {2, 3, 96, 128}, 2},
      {layout::nhwc, mode::dcr, dtype::uint8, {1, 192, 160, 16}, 4},
      {layout::nhwc, mode::crd, dtype::float16, {3, 64, 96, 5}, 2},
      {layout::channels_first, mode::dcr, dtype::float64, {1, 2, 24, 24, 24}, 3},
      {layout::channels_last, mode::dcr, dtype::int32, {1, 300000, 1}, 1},
  };
  expect_same_on_one_two_and_three_threads(cases, 99);
}

// Tensors of 64-80 KiB, over the size from which work is shared (runtime::min_shared_bytes): cut
// into work items of an eighth of the tensor on two threads (a twelfth on three), for each kind of
// plan: run copies, shuffles, staged shuffles, the byte gather, one contiguous run.
TEST(SpaceDepthThreads, TensorsJustOverTheSharingSizeMatchAcrossThreadCounts) {
  const threaded_case cases[] = {
      {layout::nhwc, mode::dcr, dtype::uint8, {1, 32, 40, 64}, 2},                 // run copies
      {layout::nhwc, mode::dcr, dtype::uint8, {1, 64, 64, 16}, 2},                 // interleaves
      {layout::nchw, mode::crd, dtype::float32, {1, 4, 64, 64}, 2},                // de-interleaves
      {layout::nhwc, mode::crd, dtype::uint8, {1, 150, 150, 3}, 3},                // byte gather
      {layout::channels_first, mode::dcr, dtype::float16, {1, 4, 24, 24, 24}, 2},  // staged
      {layout::channels_last, mode::crd, dtype::int32, {1, 16, 16, 16, 4}, 2},
      {layout::channels_last, mode::dcr, dtype::int32, {1, 20000, 1}, 1},  // one contiguous run
  };
  expect_same_on_one_two_and_three_threads(cases, 64);
}

// Small channels-first K = 3 DCR depth_to_space tensors (the benchmark grid's 64 KiB cells of
// blocks 4 and 8): staged interleaves whose groups of 4-8 positions share each output line, the
// segments copied out group-innermost (permute.cpp, run_staged), == reference on 1 and 2 threads.
TEST(SpaceDepthStaged, InterleavesWhoseGroupsShareLinesMatchTheReference) {
  std::mt19937_64 rng(31);
  const int saved = num_threads();
  const struct {
    shape_t depth_shape;
    std::int64_t block;
  } cases[] = {{{1, 1024, 4, 4, 4}, 4}, {{1, 4096, 3, 3, 3}, 4}, {{1, 8192, 2, 2, 2}, 8}, {{1, 4096, 2, 2, 2}, 4},
               {{2, 1024, 3, 3, 3}, 4}, {{1, 8192, 1, 1, 1}, 8}, {{1, 512, 2, 3, 4}, 8}};
  for (const auto& c : cases) {
    for (dtype type : {dtype::uint8, dtype::float16, dtype::float32, dtype::float64}) {
      const space_depth_options options{.block_size = c.block, .layout = layout::channels_first, .mode = mode::dcr};
      const tensor y = random_tensor(type, c.depth_shape, rng);
      const shape_t space_shape = depth_to_space_shape(c.depth_shape, options);
      tensor expected(type, space_shape);
      reference::depth_to_space(y, expected.mutable_view(), options);
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        tensor out = filled_tensor(type, space_shape, std::byte{0x5a});
        depth_to_space(y, out.mutable_view(), options);
        EXPECT_TRUE(same_bytes(out, expected)) << to_string(type) << " block " << c.block << " threads " << threads;
      }
    }
  }
  set_num_threads(saved);
}

// Every dtype moves bit for bit, quantized ones with their parameters passed through.
TEST(SpaceDepthTypes, EveryDtypeRoundTripsAndKeepsQuantization) {
  std::mt19937_64 rng(5);
  for (dtype type : all_dtypes) {
    const tensor x = random_tensor(type, {2, 4, 6, 3}, rng);
    const space_depth_options options{.block_size = 2, .layout = layout::nhwc};
    tensor expected(type, {2, 2, 3, 12});
    reference::space_to_depth(x, expected.mutable_view(), options);
    const tensor depth = space_to_depth(x, options);
    EXPECT_TRUE(same_bytes(depth, expected)) << to_string(type);
    EXPECT_TRUE(same_bytes(depth_to_space(depth, options), x)) << to_string(type);
  }
  const quantization q{0.125f, 7};
  tensor quantized(dtype::quint8, {1, 2, 2, 4}, q);
  const tensor moved = depth_to_space(quantized, {.block_size = 2, .framework = framework::nnapi});
  ASSERT_TRUE(moved.quant().has_value());
  EXPECT_EQ(*moved.quant(), q);
}

TEST(SpaceDepthEmpty, ZeroSizeTensorsGiveEmptyOutputs) {
  const space_depth_options options{.block_size = 2, .layout = layout::nchw};
  tensor x(dtype::float32, {0, 3, 4, 6});
  const tensor y = space_to_depth(x, options);
  EXPECT_EQ(y.shape(), (shape_t{0, 12, 2, 3}));
  EXPECT_EQ(y.numel(), 0);
  tensor no_channels(dtype::float32, {2, 0, 4, 4});
  EXPECT_EQ(depth_to_space(no_channels, options).shape(), (shape_t{2, 0, 8, 8}));
  tensor no_width(dtype::uint8, {1, 4, 0, 2});
  EXPECT_EQ(space_to_depth(no_width, {.block_size = 2, .layout = layout::nhwc}).shape(), (shape_t{1, 2, 0, 8}));
}

// Block size 1 is the identity for every framework that allows it.
TEST(SpaceDepthIdentity, BlockSizeOneCopies) {
  std::mt19937_64 rng(11);
  const tensor x = random_tensor(dtype::float32, {1, 5, 7, 3}, rng);
  for (framework rules : {framework::nnapi, framework::onnx, framework::openvino, framework::torch, framework::directml,
                          framework::permissive}) {
    const space_depth_options options{.block_size = 1, .framework = rules};
    EXPECT_TRUE(same_bytes(space_to_depth(x, options), x)) << to_string(rules);
    EXPECT_TRUE(same_bytes(depth_to_space(x, options), x)) << to_string(rules);
  }
}

}  // namespace
}  // namespace regrid

namespace regrid {
namespace {

// A plan made once runs on many buffers of its description, strided ones included, and gives
// exactly the one-shot result.
TEST(SpaceDepthPlan, ExecutesLikeTheOneShotCallsOnManyBuffers) {
  std::mt19937_64 rng(314);
  for (const sweep_case& c : make_sweep()) {
    if (c.index % 17 != 0) continue;  // a spread of layouts, modes, widths and blocks
    const space_depth_options options{.block_size = c.block, .layout = c.memory_layout, .mode = c.order};
    const shape_t space_shape = space_shape_of(c);
    const shape_t depth_shape = space_to_depth_shape(space_shape, options);
    const auto src_style = all_memory_styles[static_cast<std::size_t>(c.index) % 5];
    const auto dst_style = all_memory_styles[static_cast<std::size_t>(c.index + 1) % 5];
    strided_buffer probe_src(c.type, space_shape, src_style);
    strided_buffer probe_dst(c.type, depth_shape, dst_style);
    const space_depth_plan plan = space_depth_plan::space_to_depth(
        c.type, space_shape, options, probe_src.const_view().strides(), probe_dst.view().strides());
    EXPECT_EQ(plan.output_shape(), depth_shape);
    // kernel() names describe()'s kernel and says whether the shuffle is staged or segmented.
    const std::string description = plan.describe();
    const std::string kind = plan.kernel();
    const std::string kernel_name = kind.substr(0, kind.find('+'));
    EXPECT_TRUE(description.ends_with(" (" + kernel_name + ")")) << description << " / " << kind;
    EXPECT_EQ(kind.ends_with("+staged"), description.find(" staged by ") != std::string::npos) << description;
    EXPECT_EQ(kind.ends_with("+segmented"), description.find(" segmented") != std::string::npos) << description;
    for (int round = 0; round < 3; ++round) {
      const tensor x = random_tensor(c.type, space_shape, rng);
      strided_buffer src(c.type, space_shape, src_style);
      src.scatter(x);
      strided_buffer dst(c.type, depth_shape, dst_style);
      plan.execute(src.const_view().data(), dst.view().data());
      EXPECT_TRUE(same_bytes(dst.gather(), space_to_depth(x, options))) << case_name({c, 0}) << " round " << round;
      EXPECT_TRUE(dst.only_elements_written());
    }
    const space_depth_plan back = space_depth_plan::depth_to_space(c.type, depth_shape, options);
    const tensor y = random_tensor(c.type, depth_shape, rng);
    tensor out(c.type, space_shape);
    back.execute(y.data(), out.data());
    EXPECT_TRUE(same_bytes(out, depth_to_space(y, options)));
  }
}

TEST(SpaceDepthPlan, RejectsLikeTheOneShotCallsAndChecksBuffers) {
  try {
    (void)space_depth_plan::space_to_depth(dtype::float32, shape_t{1, 30, 32, 3},
                                           {.block_size = 4, .framework = framework::tf});
    FAIL();
  } catch (const error& failure) {
    EXPECT_STREQ(failure.what(), "space_to_depth: input height 30 is not divisible by block_size 4");
  }
  const space_depth_plan plan =
      space_depth_plan::depth_to_space(dtype::float32, shape_t{1, 8, 2, 2}, {.block_size = 2});
  tensor buffer(dtype::float32, {64});
  std::fill(buffer.data_as<float>(), buffer.data_as<float>() + 64, 7.0f);
  try {
    plan.execute(buffer.data(), buffer.data() + 16);  // the output starts inside the input
    FAIL();
  } catch (const error& failure) {
    EXPECT_STREQ(failure.what(),
                 "depth_to_space: input and output memory overlap; the output must be a separate buffer");
  }
  // A plan checks its shapes once; on each call only the pointers are new.
  auto null_sentence = [&](const void* src, void* dst) {
    try {
      plan.execute(src, dst);
    } catch (const error& failure) {
      return std::string(failure.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(null_sentence(nullptr, buffer.data()),
            "tensor: data pointer is null for a non-empty tensor of shape [1, 8, 2, 2]");
  EXPECT_EQ(null_sentence(buffer.data(), nullptr),
            "tensor: data pointer is null for a non-empty tensor of shape [1, 2, 4, 4]");
  for (int i = 0; i < 64; ++i) ASSERT_EQ(buffer.data_as<float>()[i], 7.0f);
  // An empty tensor has no memory to point at.
  const space_depth_plan empty =
      space_depth_plan::depth_to_space(dtype::float32, shape_t{0, 8, 2, 2}, {.block_size = 2});
  EXPECT_NO_THROW(empty.execute(nullptr, nullptr));
}

}  // namespace
}  // namespace regrid
