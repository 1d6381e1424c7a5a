#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "core/checked.hpp"
#include "core/fixed_vector.hpp"
#include "kernels/permute/permute.hpp"
#include "ops/space_depth_plan.hpp"
#include "regrid/runtime.hpp"
#include "regrid/space_depth.hpp"

namespace regrid {

using detail::fail_invalid;
using ops::space_depth_geometry;
using ops::space_depth_op;

// ---------------------------------------------------------------------------
// Names

namespace {
constexpr std::array<std::pair<std::string_view, layout>, 5> layout_names = {{
    {"NCHW", layout::nchw},
    {"NHWC", layout::nhwc},
    {"NCHW_VECT_C", layout::nchw_vect_c},
    {"channels_first", layout::channels_first},
    {"channels_last", layout::channels_last},
}};
constexpr std::array<std::pair<std::string_view, mode>, 4> mode_names = {{
    {"DCR", mode::dcr},
    {"CRD", mode::crd},
    {"blocks_first", mode::dcr},
    {"depth_first", mode::crd},
}};
constexpr std::array<std::pair<std::string_view, framework>, 12> framework_names = {{
    {"default", framework::permissive},
    {"tf", framework::tf},
    {"onnx", framework::onnx},
    {"openvino", framework::openvino},
    {"nnapi", framework::nnapi},
    {"torch", framework::torch},
    {"directml", framework::directml},
    {"permissive", framework::permissive},
    {"tensorflow", framework::tf},
    {"tflite", framework::nnapi},
    {"pytorch", framework::torch},
    {"dml", framework::directml},
}};

template <class Value, std::size_t N>
std::string_view name_of(const std::array<std::pair<std::string_view, Value>, N>& names, Value value) {
  for (const auto& [name, candidate] : names) {
    if (candidate == value) return name;
  }
  return "?";
}

template <class Value, std::size_t N>
std::optional<Value> parse_name(const std::array<std::pair<std::string_view, Value>, N>& names, std::string_view text) {
  for (const auto& [name, value] : names) {
    if (detail::iequals(name, text)) return value;
  }
  return std::nullopt;
}
}  // namespace

std::string_view to_string(layout value) noexcept { return name_of(layout_names, value); }
std::string_view to_string(mode value) noexcept { return name_of(mode_names, value); }
std::string_view to_string(framework value) noexcept { return name_of(framework_names, value); }
std::optional<layout> parse_layout(std::string_view text) noexcept { return parse_name(layout_names, text); }
std::optional<mode> parse_mode(std::string_view text) noexcept { return parse_name(mode_names, text); }
std::optional<framework> parse_framework(std::string_view text) noexcept { return parse_name(framework_names, text); }

// ---------------------------------------------------------------------------
// Rules

namespace ops {

std::string_view op_name(space_depth_op op) noexcept {
  return op == space_depth_op::space_to_depth ? "space_to_depth" : "depth_to_space";
}

namespace {

constexpr unsigned bit(layout value) { return 1U << static_cast<unsigned>(value); }
constexpr unsigned bit(mode value) { return 1U << static_cast<unsigned>(value); }
constexpr unsigned any_value = ~0U;

struct framework_rules {
  layout default_layout;
  mode default_mode;
  std::int64_t min_block;
  unsigned layouts;  // bit set of allowed layouts
  unsigned modes;    // bit set of allowed modes
  int exact_rank;    // 0: as the layout requires
};

framework_rules rules_for(framework value, space_depth_op op) {
  constexpr unsigned channels_first_family = bit(layout::nchw) | bit(layout::channels_first);
  constexpr unsigned both_modes = bit(mode::dcr) | bit(mode::crd);
  switch (value) {
    case framework::tf:
      return {layout::nhwc,   mode::dcr, 2, bit(layout::nhwc) | bit(layout::nchw) | bit(layout::nchw_vect_c),
              bit(mode::dcr), 0};
    case framework::onnx:
      return {layout::nchw,
              mode::dcr,
              1,
              channels_first_family,
              op == space_depth_op::space_to_depth ? bit(mode::dcr) : both_modes,
              4};
    case framework::openvino: return {layout::channels_first, mode::dcr, 1, channels_first_family, both_modes, 0};
    case framework::nnapi:
      return {layout::nhwc, mode::dcr, 1, bit(layout::nhwc) | bit(layout::nchw), bit(mode::dcr), 4};
    case framework::torch: return {layout::channels_first, mode::crd, 1, channels_first_family, bit(mode::crd), 0};
    case framework::directml: return {layout::nchw, mode::dcr, 1, channels_first_family, both_modes, 4};
    case framework::permissive: break;
  }
  return {layout::channels_first, mode::dcr, 1, any_value, any_value, 0};
}

template <class Value, std::size_t N>
std::string list_allowed(const std::array<std::pair<std::string_view, Value>, N>& names, unsigned allowed) {
  std::string text;
  unsigned listed = 0;
  for (const auto& [name, value] : names) {
    if ((allowed & bit(value)) == 0 || (listed & bit(value)) != 0) continue;
    listed |= bit(value);
    if (!text.empty()) text += ", ";
    text += name;
  }
  return text;
}

std::string spatial_name(int k, int spatial_rank) {
  if (spatial_rank == 2) return k == 0 ? "height" : "width";
  return "spatial dimension D" + std::to_string(k + 1);
}

}  // namespace

space_depth_geometry plan_space_depth(space_depth_op op, std::span<const std::int64_t> input_shape,
                                      const space_depth_options& options) {
  const std::string name(op_name(op));
  const framework_rules rules = rules_for(options.framework, op);
  // Message pieces are built only on failure: this runs on every call.
  auto under = [&] { return " under framework " + std::string(to_string(options.framework)); };

  space_depth_geometry g;
  g.op = op;
  g.layout = options.layout.value_or(rules.default_layout);
  g.mode = options.mode.value_or(rules.default_mode);
  g.block = options.block_size;

  if ((rules.layouts & bit(g.layout)) == 0) {
    fail_invalid(name + ": layout " + std::string(to_string(g.layout)) + " is not supported" + under() +
                 " (supported: " + list_allowed(layout_names, rules.layouts) + ")");
  }
  if ((rules.modes & bit(g.mode)) == 0) {
    fail_invalid(name + ": mode " + std::string(to_string(g.mode)) + " is not supported" + under() +
                 " (supported: " + list_allowed(mode_names, rules.modes) + ")");
  }
  if (g.layout == layout::nchw_vect_c && g.mode != mode::dcr) {
    fail_invalid(name + ": layout NCHW_VECT_C supports only mode DCR, got " + std::string(to_string(g.mode)));
  }
  if (g.block < rules.min_block) {
    fail_invalid(name + ": block_size " + std::to_string(g.block) + " must be at least " +
                 std::to_string(rules.min_block) +
                 (options.framework == framework::permissive ? std::string() : under()));
  }

  const int rank = static_cast<int>(input_shape.size());
  if (rank > max_rank) {
    fail_invalid(name + ": input rank " + std::to_string(rank) + " exceeds the maximum rank " +
                 std::to_string(max_rank));
  }
  for (int k = 0; k < rank; ++k) {
    if (input_shape[k] < 0) {
      fail_invalid(name + ": input extent " + std::to_string(input_shape[k]) + " of dimension " + std::to_string(k) +
                   " is negative");
    }
  }
  if (rules.exact_rank != 0 && rank != rules.exact_rank) {
    fail_invalid(name + ": framework " + std::string(to_string(options.framework)) + " requires a rank-" +
                 std::to_string(rules.exact_rank) + " input, got rank " + std::to_string(rank));
  }
  switch (g.layout) {
    case layout::nchw:
    case layout::nhwc:
      if (rank != 4) {
        fail_invalid(name + ": layout " + std::string(to_string(g.layout)) + " requires a rank-4 input, got rank " +
                     std::to_string(rank) + " (shape " + format_shape(input_shape) + ")");
      }
      break;
    case layout::nchw_vect_c:
      if (rank != 5) {
        fail_invalid(name + ": layout NCHW_VECT_C requires a rank-5 input [N, C/4, H, W, 4], got rank " +
                     std::to_string(rank) + " (shape " + format_shape(input_shape) + ")");
      }
      if (input_shape[4] != 4) {
        fail_invalid(name + ": layout NCHW_VECT_C requires the last dimension to be 4, got " +
                     std::to_string(input_shape[4]));
      }
      break;
    case layout::channels_first:
    case layout::channels_last:
      if (rank < 3) {
        fail_invalid(name + ": layout " + std::string(to_string(g.layout)) +
                     " requires rank >= 3 (batch, channels and at least one spatial dimension), got rank " +
                     std::to_string(rank));
      }
      break;
  }

  g.vect_c = g.layout == layout::nchw_vect_c;
  g.channels_last = g.layout == layout::nhwc || g.layout == layout::channels_last;
  if (options.framework == framework::torch) {
    g.spatial_rank = 2;  // [*, C, H, W]: every leading dim is a batch dim
    g.batch_rank = rank - 3;
  } else {
    g.spatial_rank = g.vect_c ? 2 : rank - 2;
    g.batch_rank = 1;
  }
  const int K = g.spatial_rank;
  const int channel_axis = g.channels_last ? rank - 1 : g.batch_rank;
  const int first_spatial = g.channels_last ? g.batch_rank : g.batch_rank + 1;

  g.block_volume = detail::checked_pow(g.block, K, name, "block volume (block_size^K)");
  g.input_shape.assign(input_shape.begin(), input_shape.end());
  g.output_shape = g.input_shape;
  auto block_power = [&] { return "block_size^" + std::to_string(K) + " = " + std::to_string(g.block_volume); };

  if (op == space_depth_op::space_to_depth) {
    for (int k = 0; k < K; ++k) {
      const std::int64_t extent = input_shape[first_spatial + k];
      if (extent % g.block != 0) {
        fail_invalid(name + ": input " + spatial_name(k, K) + " " + std::to_string(extent) +
                     " is not divisible by block_size " + std::to_string(g.block));
      }
      g.coarse[k] = extent / g.block;
      g.output_shape[first_spatial + k] = g.coarse[k];
    }
    g.small_channels = input_shape[channel_axis];
    g.output_shape[channel_axis] = detail::checked_mul(g.small_channels, g.block_volume, name, "output channels");
  } else {
    const std::int64_t channels = input_shape[channel_axis];
    if (channels % g.block_volume != 0) {
      if (g.vect_c) {
        fail_invalid(name + ": input channel groups " + std::to_string(channels) +
                     " (NCHW_VECT_C channels / 4) are not divisible by " + block_power());
      }
      fail_invalid(name + ": input channels " + std::to_string(channels) + " are not divisible by " + block_power());
    }
    g.small_channels = channels / g.block_volume;
    g.output_shape[channel_axis] = g.small_channels;
    for (int k = 0; k < K; ++k) {
      g.coarse[k] = input_shape[first_spatial + k];
      g.output_shape[first_spatial + k] =
          detail::checked_mul(g.coarse[k], g.block, name, "output " + spatial_name(k, K));
    }
  }
  element_count(g.output_shape);  // overflow check of the output's element count
  return g;
}

void check_description(const space_depth_geometry& g, const tensor_view& src, const mutable_tensor_view& dst) {
  const std::string name(op_name(g.op));
  if (src.type() != dst.type()) {
    fail_invalid(name + ": output dtype " + std::string(to_string(dst.type())) + " differs from input dtype " +
                 std::string(to_string(src.type())));
  }
  if (dst.shape() != g.output_shape) {
    fail_invalid(name + ": output shape " + format_shape(dst.shape()) + " differs from the expected " +
                 format_shape(g.output_shape) + " for input shape " + format_shape(src.shape()));
  }
  if (g.vect_c && size_of(src.type()) != 1) {
    fail_invalid(name + ": layout NCHW_VECT_C requires a 1-byte element type, got " +
                 std::string(to_string(src.type())));
  }
  if (src.quant() && dst.quant() && *src.quant() != *dst.quant()) {
    fail_invalid(name + ": output quantization (scale " + std::to_string(dst.quant()->scale) + ", zero point " +
                 std::to_string(dst.quant()->zero_point) + ") differs from the input's (scale " +
                 std::to_string(src.quant()->scale) + ", zero point " + std::to_string(src.quant()->zero_point) +
                 "); quantized data passes through unchanged");
  }
  if (src.numel() == 0) return;
  // Every output element needs its own address: with axes sorted by stride, each stride must
  // step past everything the smaller axes can reach.
  struct strided_axis {
    std::int64_t stride;  // magnitude
    std::int64_t extent;
  };
  detail::fixed_vector<strided_axis, max_rank> axes;  // inline: this runs on every call
  for (int k = 0; k < dst.rank(); ++k) {
    if (dst.shape()[k] > 1) axes.push_back({std::abs(dst.strides()[k]), dst.shape()[k]});
  }
  std::sort(axes.begin(), axes.end(), [](const strided_axis& a, const strided_axis& b) {
    return a.stride != b.stride ? a.stride < b.stride : a.extent < b.extent;
  });
  std::int64_t reach = 0;
  for (const auto& [stride, extent] : axes) {
    if (stride <= reach) {
      fail_invalid(name + ": output strides " + format_shape(dst.strides()) + " for shape " +
                   format_shape(dst.shape()) + " make distinct elements share memory");
    }
    reach += stride * (extent - 1);
  }
}

void check_buffers(space_depth_op op, const void* src, std::span<const std::int64_t> src_shape,
                   std::span<const std::int64_t> src_strides, const void* dst, std::span<const std::int64_t> dst_shape,
                   std::span<const std::int64_t> dst_strides, dtype type) {
  check_buffers(op, src, detail::byte_extent_of(size_of(type), src_shape, src_strides), dst,
                detail::byte_extent_of(size_of(type), dst_shape, dst_strides));
}

void check_buffers(space_depth_op op, const void* src, const detail::byte_extent& src_extent, const void* dst,
                   const detail::byte_extent& dst_extent) {
  if (detail::extents_overlap(src, src_extent, dst, dst_extent)) {
    fail_invalid(std::string(op_name(op)) + ": input and output memory overlap; the output must be a separate buffer");
  }
}

void check_operands(const space_depth_geometry& g, const tensor_view& src, const mutable_tensor_view& dst) {
  check_description(g, src, dst);
  check_buffers(g.op, src.data(), g.input_shape, src.strides(), dst.data(), g.output_shape, dst.strides(), src.type());
}

// Canonical axes of the (2K+2)-D view: batch axes, C, O_1..O_K, B_1..B_K, and V for
// NCHW_VECT_C. Each gets its stride (elements) in the space-side and depth-side tensor.
struct canonical_strides {
  std::array<std::int64_t, max_rank> batch{};
  std::int64_t channel = 0;
  std::array<std::int64_t, max_rank> coarse{};
  std::array<std::int64_t, max_rank> block{};
  std::int64_t vector = 0;
};

namespace {

canonical_strides space_side_strides(const space_depth_geometry& g, const shape_t& strides) {
  canonical_strides s;
  const int rank = static_cast<int>(strides.size());
  const int first_spatial = g.channels_last ? g.batch_rank : g.batch_rank + 1;
  for (int i = 0; i < g.batch_rank; ++i) s.batch[i] = strides[i];
  s.channel = strides[g.channels_last ? rank - 1 : g.batch_rank];
  for (int k = 0; k < g.spatial_rank; ++k) {
    s.block[k] = strides[first_spatial + k];
    s.coarse[k] = s.block[k] * g.block;
  }
  if (g.vect_c) s.vector = strides[4];
  return s;
}

canonical_strides depth_side_strides(const space_depth_geometry& g, const shape_t& strides) {
  canonical_strides s;
  const int rank = static_cast<int>(strides.size());
  const int K = g.spatial_rank;
  const int first_spatial = g.channels_last ? g.batch_rank : g.batch_rank + 1;
  for (int i = 0; i < g.batch_rank; ++i) s.batch[i] = strides[i];
  for (int k = 0; k < K; ++k) s.coarse[k] = strides[first_spatial + k];
  const std::int64_t channel_stride = strides[g.channels_last ? rank - 1 : g.batch_rank];
  // DCR: c_d = off * C_s + c_s.  CRD: c_d = c_s * b^K + off.  off's last digit is B_K.
  std::int64_t step = g.mode == mode::dcr ? channel_stride * g.small_channels : channel_stride;
  for (int k = K - 1; k >= 0; --k) {
    s.block[k] = step;
    step *= g.block;
  }
  s.channel = g.mode == mode::dcr ? channel_stride : step;
  if (g.vect_c) s.vector = strides[4];
  return s;
}

// The axes in the destination's memory order, each with its source and destination stride.
detail::fixed_vector<kernels::permute_axis, kernels::max_permute_axes> permute_axes(const space_depth_geometry& g,
                                                                                    const tensor_view& src,
                                                                                    const mutable_tensor_view& dst) {
  const bool to_depth = g.op == space_depth_op::space_to_depth;
  const canonical_strides s = to_depth ? space_side_strides(g, src.strides()) : depth_side_strides(g, src.strides());
  const canonical_strides d = to_depth ? depth_side_strides(g, dst.strides()) : space_side_strides(g, dst.strides());
  const auto bytes = static_cast<std::int64_t>(size_of(src.type()));
  const int K = g.spatial_rank;

  detail::fixed_vector<kernels::permute_axis, kernels::max_permute_axes> axes;
  auto add = [&](std::int64_t extent, std::int64_t src_stride, std::int64_t dst_stride) {
    axes.push_back({extent, src_stride * bytes, dst_stride * bytes});
  };
  auto add_channel = [&] { add(g.small_channels, s.channel, d.channel); };
  auto add_coarse = [&] {
    for (int k = 0; k < K; ++k) add(g.coarse[k], s.coarse[k], d.coarse[k]);
  };
  auto add_blocks = [&] {
    for (int k = 0; k < K; ++k) add(g.block, s.block[k], d.block[k]);
  };

  for (int i = 0; i < g.batch_rank; ++i) add(dst.shape()[i], s.batch[i], d.batch[i]);
  if (!to_depth) {
    // Space-side order: C (first or last) and interleaved (O_k, B_k) pairs.
    if (!g.channels_last) add_channel();
    for (int k = 0; k < K; ++k) {
      add(g.coarse[k], s.coarse[k], d.coarse[k]);
      add(g.block, s.block[k], d.block[k]);
    }
    if (g.channels_last) add_channel();
  } else if (!g.channels_last) {
    if (g.mode == mode::dcr) {
      add_blocks();
      add_channel();
    } else {
      add_channel();
      add_blocks();
    }
    add_coarse();
  } else {
    add_coarse();
    if (g.mode == mode::dcr) {
      add_blocks();
      add_channel();
    } else {
      add_channel();
      add_blocks();
    }
  }
  if (g.vect_c) add(4, s.vector, d.vector);
  return axes;
}

// REGRID_VERBOSE=dispatch prints each call's plan and kernel on one line.
bool verbose_dispatch() {
  static const bool enabled = [] {
    const char* value = std::getenv("REGRID_VERBOSE");
    return value != nullptr && std::string_view(value).find("dispatch") != std::string_view::npos;
  }();
  return enabled;
}

using axis_list = detail::fixed_vector<kernels::permute_axis, kernels::max_permute_axes>;

// A description of a call (op, options, dtypes, shapes, strides, quantization) that passed every
// check on this thread, with its permute axes and both tensors' byte extents. Validating a
// description and building its axes took about 0.1 us per call, a sixth of copying 64 KiB, and a
// runtime calls each layer's op with the same description every time. Everything the checks and
// the axes depend on is in the key, so a match would pass them again; the buffers (their overlap)
// are checked on every call, from the kept extents.
struct validated_call {
  using dims = detail::fixed_vector<std::int64_t, max_rank>;
  space_depth_op op = space_depth_op::space_to_depth;
  space_depth_options options;
  dtype src_type = dtype::uint8;
  dtype dst_type = dtype::uint8;
  dims src_shape, src_strides, dst_shape, dst_strides;
  std::optional<quantization> src_quant, dst_quant;
  axis_list axes;
  detail::byte_extent src_extent, dst_extent;

  [[nodiscard]] bool matches(space_depth_op call_op, const tensor_view& src, const mutable_tensor_view& dst,
                             const space_depth_options& call_options) const {
    auto same = [](const dims& kept, const shape_t& given) { return std::ranges::equal(kept, given); };
    return op == call_op && options.block_size == call_options.block_size && options.layout == call_options.layout &&
           options.mode == call_options.mode && options.framework == call_options.framework && src_type == src.type() &&
           dst_type == dst.type() && same(src_shape, src.shape()) && same(src_strides, src.strides()) &&
           same(dst_shape, dst.shape()) && same(dst_strides, dst.strides()) && src_quant == src.quant() &&
           dst_quant == dst.quant();
  }
};

// A call's description: from this thread's last few validated ones, or validated and built
// (throwing regrid::error on a bad description) and kept.
const validated_call& validated(space_depth_op op, const tensor_view& src, const mutable_tensor_view& dst,
                                const space_depth_options& options) {
  constexpr std::size_t kept = 4;
  thread_local std::array<validated_call, kept> calls;
  thread_local std::size_t filled = 0;
  thread_local std::size_t next = 0;
  for (std::size_t i = 0; i < filled; ++i) {
    if (calls[i].matches(op, src, dst, options)) return calls[i];
  }
  const space_depth_geometry g = plan_space_depth(op, src.shape(), options);
  check_description(g, src, dst);
  const axis_list axes = permute_axes(g, src, dst);
  validated_call& call = calls[next];
  next = (next + 1) % kept;
  filled = std::min(filled + 1, kept);
  call.op = op;
  call.options = options;
  call.src_type = src.type();
  call.dst_type = dst.type();
  call.src_shape.assign_range(src.shape());
  call.src_strides.assign_range(src.strides());
  call.dst_shape.assign_range(dst.shape());
  call.dst_strides.assign_range(dst.strides());
  call.src_quant = src.quant();
  call.dst_quant = dst.quant();
  call.axes = axes;
  call.src_extent = detail::byte_extent_of(src.element_size(), src.shape(), src.strides());
  call.dst_extent = detail::byte_extent_of(dst.element_size(), dst.shape(), dst.strides());
  return call;
}

void run(space_depth_op op, const tensor_view& src, const mutable_tensor_view& dst,
         const space_depth_options& options) {
  const validated_call& call = validated(op, src, dst, options);
  check_buffers(op, src.data(), call.src_extent, dst.data(), call.dst_extent);
  const kernels::permute_plan& plan = kernels::plan_permute_cached(call.axes, src.element_size());
  if (verbose_dispatch()) {
    std::fprintf(stderr, "regrid: %s %s -> %s: %s\n", std::string(op_name(op)).c_str(),
                 format_shape(src.shape()).c_str(), format_shape(dst.shape()).c_str(), kernels::describe(plan).c_str());
  }
  kernels::run_permute(plan, src.data(), dst.data(), num_threads());
}

tensor run_allocating(space_depth_op op, const tensor_view& src, const space_depth_options& options) {
  const space_depth_geometry g = plan_space_depth(op, src.shape(), options);
  tensor result(uninitialized, src.type(), g.output_shape, src.quant());
  run(op, src, result.mutable_view(), options);
  return result;
}

}  // namespace
}  // namespace ops

struct space_depth_plan::impl {
  dtype type;
  shape_t input_strides;
  shape_t output_strides;
  ops::space_depth_geometry geometry;
  kernels::permute_plan plan;
  detail::byte_extent input_extent, output_extent;
};

shape_t space_to_depth_shape(std::span<const std::int64_t> input_shape, const space_depth_options& options) {
  return ops::plan_space_depth(space_depth_op::space_to_depth, input_shape, options).output_shape;
}
shape_t depth_to_space_shape(std::span<const std::int64_t> input_shape, const space_depth_options& options) {
  return ops::plan_space_depth(space_depth_op::depth_to_space, input_shape, options).output_shape;
}
void space_to_depth(const tensor_view& src, const mutable_tensor_view& dst, const space_depth_options& options) {
  ops::run(space_depth_op::space_to_depth, src, dst, options);
}
void depth_to_space(const tensor_view& src, const mutable_tensor_view& dst, const space_depth_options& options) {
  ops::run(space_depth_op::depth_to_space, src, dst, options);
}
tensor space_to_depth(const tensor_view& src, const space_depth_options& options) {
  return ops::run_allocating(space_depth_op::space_to_depth, src, options);
}
tensor depth_to_space(const tensor_view& src, const space_depth_options& options) {
  return ops::run_allocating(space_depth_op::depth_to_space, src, options);
}

space_depth_plan space_depth_plan::make(bool to_depth, dtype type, std::span<const std::int64_t> input_shape,
                                        const space_depth_options& options, std::span<const std::int64_t> input_strides,
                                        std::span<const std::int64_t> output_strides) {
  const space_depth_op op = to_depth ? space_depth_op::space_to_depth : space_depth_op::depth_to_space;
  ops::space_depth_geometry g = ops::plan_space_depth(op, input_shape, options);
  // The plan is made before any buffer exists: these views only carry shapes and strides for
  // validation and planning, and are never read or written; execute() supplies the buffers.
  const std::byte* anchor = detail::description_anchor();
  const tensor_view src(anchor, type, g.input_shape, shape_t(input_strides.begin(), input_strides.end()));
  const mutable_tensor_view dst(const_cast<std::byte*>(anchor), type, g.output_shape,
                                shape_t(output_strides.begin(), output_strides.end()));
  ops::check_description(g, src, dst);
  kernels::permute_plan plan = kernels::plan_permute(ops::permute_axes(g, src, dst), size_of(type));
  const detail::byte_extent input_extent = detail::byte_extent_of(size_of(type), g.input_shape, src.strides());
  const detail::byte_extent output_extent = detail::byte_extent_of(size_of(type), g.output_shape, dst.strides());
  return space_depth_plan(std::make_shared<const impl>(
      impl{type, src.strides(), dst.strides(), std::move(g), std::move(plan), input_extent, output_extent}));
}

space_depth_plan space_depth_plan::space_to_depth(dtype type, std::span<const std::int64_t> input_shape,
                                                  const space_depth_options& options,
                                                  std::span<const std::int64_t> input_strides,
                                                  std::span<const std::int64_t> output_strides) {
  return make(true, type, input_shape, options, input_strides, output_strides);
}

space_depth_plan space_depth_plan::depth_to_space(dtype type, std::span<const std::int64_t> input_shape,
                                                  const space_depth_options& options,
                                                  std::span<const std::int64_t> input_strides,
                                                  std::span<const std::int64_t> output_strides) {
  return make(false, type, input_shape, options, input_strides, output_strides);
}

const shape_t& space_depth_plan::input_shape() const noexcept { return impl_->geometry.input_shape; }
const shape_t& space_depth_plan::output_shape() const noexcept { return impl_->geometry.output_shape; }
std::string space_depth_plan::describe() const { return kernels::describe(impl_->plan); }
std::string space_depth_plan::kernel() const {
  return kernels::plan_kind(kernels::plan_run_on(impl_->plan, num_threads()));
}

void space_depth_plan::execute(const void* src, void* dst) const {
  const impl& p = *impl_;
  // Shapes and strides were validated when the plan was made; only the pointers are new. A null
  // pointer for a non-empty tensor gets the sentence a view's constructor gives.
  if (src == nullptr && !p.input_extent.empty)
    detail::validate_view(src, p.type, p.geometry.input_shape, p.input_strides);
  if (dst == nullptr && !p.output_extent.empty) {
    detail::validate_view(dst, p.type, p.geometry.output_shape, p.output_strides);
  }
  ops::check_buffers(p.geometry.op, src, p.input_extent, dst, p.output_extent);
  kernels::run_permute(p.plan, static_cast<const std::byte*>(src), static_cast<std::byte*>(dst), num_threads());
}

}  // namespace regrid
