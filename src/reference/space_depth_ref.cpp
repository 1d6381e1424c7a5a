// The spec of record for SpaceToDepth / DepthToSpace: for every output element,
// compute its source element from the index formula in space_depth.hpp, using
// logical channel numbers (NCHW_VECT_C: c = 4 * c_v + v). Deliberately naive and
// independent of the permute engine's stride algebra.
#include <cstring>
#include <vector>

#include "ops/space_depth_plan.hpp"
#include "regrid/space_depth.hpp"

namespace regrid::reference {
namespace {

using ops::space_depth_geometry;
using ops::space_depth_op;

struct logical_index {
  std::vector<std::int64_t> batch;
  std::int64_t channel = 0;
  std::vector<std::int64_t> spatial;
};

int channel_axis(const space_depth_geometry& g, int rank) { return g.channels_last ? rank - 1 : g.batch_rank; }
int first_spatial_axis(const space_depth_geometry& g) { return g.channels_last ? g.batch_rank : g.batch_rank + 1; }

logical_index to_logical(const space_depth_geometry& g, const std::vector<std::int64_t>& index) {
  const int rank = static_cast<int>(index.size());
  logical_index out;
  out.batch.assign(index.begin(), index.begin() + g.batch_rank);
  out.channel = g.vect_c ? 4 * index[1] + index[4] : index[channel_axis(g, rank)];
  for (int k = 0; k < g.spatial_rank; ++k) out.spatial.push_back(index[first_spatial_axis(g) + k]);
  return out;
}

std::vector<std::int64_t> to_physical(const space_depth_geometry& g, const logical_index& logical, int rank) {
  std::vector<std::int64_t> index(static_cast<std::size_t>(rank), 0);
  for (int i = 0; i < g.batch_rank; ++i) index[i] = logical.batch[i];
  if (g.vect_c) {
    index[1] = logical.channel / 4;
    index[4] = logical.channel % 4;
  } else {
    index[channel_axis(g, rank)] = logical.channel;
  }
  for (int k = 0; k < g.spatial_rank; ++k) index[first_spatial_axis(g) + k] = logical.spatial[k];
  return index;
}

// Maps an output element's logical index to its input element's logical index.
logical_index source_of(const space_depth_geometry& g, const logical_index& out) {
  const std::int64_t b = g.block;
  const std::int64_t volume = g.block_volume;
  const std::int64_t small_channels = g.vect_c ? 4 * g.small_channels : g.small_channels;
  const int K = g.spatial_rank;
  logical_index in;
  in.batch = out.batch;
  in.spatial.resize(static_cast<std::size_t>(K));
  if (g.op == space_depth_op::depth_to_space) {
    // out = space side [c_s, y_k]; in = depth side [c_d, y_k / b].
    std::int64_t off = 0;
    for (int k = 0; k < K; ++k) {
      off = off * b + out.spatial[k] % b;
      in.spatial[k] = out.spatial[k] / b;
    }
    in.channel = g.mode == mode::dcr ? off * small_channels + out.channel : out.channel * volume + off;
  } else {
    // out = depth side [c_d, o_k]; in = space side [c_s, o_k * b + beta_k].
    std::int64_t off = 0;
    if (g.mode == mode::dcr) {
      off = out.channel / small_channels;
      in.channel = out.channel % small_channels;
    } else {
      off = out.channel % volume;
      in.channel = out.channel / volume;
    }
    for (int k = K - 1; k >= 0; --k) {
      in.spatial[k] = out.spatial[k] * b + off % b;
      off /= b;
    }
  }
  return in;
}

void run_reference(space_depth_op op, const tensor_view& src, const mutable_tensor_view& dst,
                   const space_depth_options& options) {
  const space_depth_geometry g = ops::plan_space_depth(op, src.shape(), options);
  ops::check_operands(g, src, dst);
  const std::int64_t count = dst.numel();
  if (count == 0) return;
  const int rank = dst.rank();
  const std::size_t width = size_of(src.type());
  std::vector<std::int64_t> index(static_cast<std::size_t>(rank), 0);
  for (std::int64_t n = 0; n < count; ++n) {
    const std::vector<std::int64_t> from = to_physical(g, source_of(g, to_logical(g, index)), rank);
    std::int64_t src_offset = 0;
    std::int64_t dst_offset = 0;
    for (int k = 0; k < rank; ++k) {
      src_offset += from[k] * src.strides()[k];
      dst_offset += index[k] * dst.strides()[k];
    }
    std::memcpy(dst.data() + dst_offset * static_cast<std::int64_t>(width),
                src.data() + src_offset * static_cast<std::int64_t>(width), width);
    for (int k = rank - 1; k >= 0; --k) {
      if (++index[k] < dst.shape()[k]) break;
      index[k] = 0;
    }
  }
}

}  // namespace

void space_to_depth(const tensor_view& src, const mutable_tensor_view& dst, const space_depth_options& options) {
  run_reference(space_depth_op::space_to_depth, src, dst, options);
}

void depth_to_space(const tensor_view& src, const mutable_tensor_view& dst, const space_depth_options& options) {
  run_reference(space_depth_op::depth_to_space, src, dst, options);
}

}  // namespace regrid::reference
