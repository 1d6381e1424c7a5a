#include "kernels/permute/permute.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/checked.hpp"
#include "regrid/runtime.hpp"
#include "runtime/thread_pool.hpp"

namespace regrid::kernels {
namespace {

// Below this many bytes a thread hand-off costs more than it saves.
constexpr std::int64_t min_parallel_bytes = 256 * 1024;
// Rows handed to the tile kernel at once: about this many bytes of output.
constexpr std::int64_t bytes_per_work_item = 64 * 1024;

std::int64_t magnitude(std::int64_t stride) { return stride < 0 ? -stride : stride; }

tile_copy_fn interleave_for_isa(std::size_t width, std::int64_t b, bool interleave) {
  switch (active_isa()) {
    case isa::avx512: return interleave_kernel_avx512(width, b, interleave);
    case isa::avx2: return interleave_kernel_avx2(width, b, interleave);
    case isa::scalar: break;
  }
  return interleave_kernel_scalar(width, b, interleave);
}

// Short runs whose two inner axes form a b-way (de-)interleave get the shuffle kernels.
void choose_shuffle_kernel(permute_plan& plan) {
  const auto w = static_cast<std::int64_t>(plan.width);
  const permute_axis& row = plan.row;
  const permute_axis& col = plan.col;
  // interleave: col = the b source rows (dst contiguous), row = position r (src contiguous).
  if (col.extent <= 8 && col.dst_stride == w && row.src_stride == w && row.dst_stride == col.extent * w) {
    if (tile_copy_fn fn = interleave_for_isa(plan.width, col.extent, true)) {
      plan.kernel = {fn, "interleave" + std::to_string(col.extent) + "_x" + std::to_string(w * 8) + "_" +
                             std::string(to_string(active_isa()))};
      return;
    }
  }
  // de-interleave: row = the b destination rows (src contiguous), col = position r. The b-axis may
  // sit among the outer axes (NCHW SpaceToDepth orders a coarse axis between): the order in
  // which outer axes are walked does not change the result, so swap it into the row slot.
  if (col.dst_stride == w) {
    for (auto& axis : plan.outer) {
      if (axis.extent <= 8 && axis.src_stride == w && col.src_stride == axis.extent * w && row.src_stride != w) {
        std::swap(axis, plan.row);
        break;
      }
    }
  }
  if (row.extent <= 8 && row.src_stride == w && col.src_stride == row.extent * w && col.dst_stride == w) {
    if (tile_copy_fn fn = interleave_for_isa(plan.width, row.extent, false)) {
      plan.kernel = {fn, "deinterleave" + std::to_string(row.extent) + "_x" + std::to_string(w * 8) + "_" +
                             std::string(to_string(active_isa()))};
      plan.whole_rows = true;
    }
  }
}

}  // namespace

permute_plan plan_permute(std::span<const permute_axis> axes, std::size_t element_bytes) {
  permute_plan plan;
  plan.width = element_bytes;
  std::vector<permute_axis> kept;
  std::int64_t count = 1;
  for (const auto& axis : axes) {
    if (axis.extent == 0) return plan;  // empty: total_bytes stays 0
    count *= axis.extent;
    if (axis.extent != 1) kept.push_back(axis);
  }
  plan.total_bytes = count * static_cast<std::int64_t>(element_bytes);

  // Innermost = smallest destination stride, so the output is written in order.
  std::stable_sort(kept.begin(), kept.end(), [](const permute_axis& a, const permute_axis& b) {
    return magnitude(a.dst_stride) > magnitude(b.dst_stride);
  });

  std::vector<permute_axis> fused;
  for (const auto& axis : kept) {
    if (!fused.empty()) {
      permute_axis& outer = fused.back();
      if (outer.src_stride == axis.src_stride * axis.extent &&
          outer.dst_stride == axis.dst_stride * axis.extent) {
        outer = {outer.extent * axis.extent, axis.src_stride, axis.dst_stride};
        continue;
      }
    }
    fused.push_back(axis);
  }

  const auto width = static_cast<std::int64_t>(plan.width);
  if (!fused.empty() && fused.back().src_stride == width && fused.back().dst_stride == width) {
    plan.width *= static_cast<std::size_t>(fused.back().extent);
    fused.pop_back();
  }

  if (!fused.empty()) {
    plan.col = fused.back();
    fused.pop_back();
  }
  if (!fused.empty()) {
    plan.row = fused.back();
    fused.pop_back();
  }
  plan.outer = std::move(fused);
  plan.kernel = select_tile_kernel(plan.width);
  choose_shuffle_kernel(plan);
  return plan;
}

void run_permute(const permute_plan& plan, const std::byte* src, std::byte* dst, int max_threads) {
  if (plan.total_bytes == 0) return;
  const int threads = plan.total_bytes < min_parallel_bytes ? 1 : std::max(1, max_threads);

  if (plan.outer.empty() && plan.row.extent == 1 && plan.col.extent == 1) {
    // The whole tensor is one contiguous run.
    const std::int64_t chunks = std::max<std::int64_t>(1, plan.total_bytes / bytes_per_work_item);
    runtime::parallel_for(std::min<std::int64_t>(chunks, threads), threads,
                          [&](std::int64_t begin, std::int64_t end) {
                            const std::int64_t parts = std::min<std::int64_t>(chunks, threads);
                            const std::int64_t first = detail::split_point(plan.total_bytes, parts, begin);
                            const std::int64_t last = detail::split_point(plan.total_bytes, parts, end);
                            std::memcpy(dst + first, src + first, static_cast<std::size_t>(last - first));
                          });
    return;
  }

  // Work items are blocks of rows (each a full run of columns), or, for kernels that need every
  // row at once, blocks of columns.
  const std::int64_t rows = plan.row.extent;
  const std::int64_t cols = plan.col.extent;
  const auto width = static_cast<std::int64_t>(plan.width);
  const std::int64_t split_extent = plan.whole_rows ? cols : rows;
  const std::int64_t unit_bytes = (plan.whole_rows ? rows : cols) * width;
  const std::int64_t units_per_item =
      std::clamp<std::int64_t>(bytes_per_work_item / std::max<std::int64_t>(unit_bytes, 1), 1, split_extent);
  const std::int64_t items_per_outer = (split_extent + units_per_item - 1) / units_per_item;
  std::int64_t outer_count = 1;
  for (const auto& axis : plan.outer) outer_count *= axis.extent;
  const std::int64_t items = outer_count * items_per_outer;
  const int depth = static_cast<int>(plan.outer.size());

  runtime::parallel_for(items, threads, [&](std::int64_t begin, std::int64_t end) {
    // Position an odometer over the outer axes at `begin`; divisions happen once per range.
    std::vector<std::int64_t> index(static_cast<std::size_t>(depth), 0);
    std::int64_t outer_index = begin / items_per_outer;
    std::int64_t item = begin % items_per_outer;
    std::int64_t src_offset = 0;
    std::int64_t dst_offset = 0;
    for (int k = depth - 1; k >= 0; --k) {
      const auto& axis = plan.outer[static_cast<std::size_t>(k)];
      index[static_cast<std::size_t>(k)] = outer_index % axis.extent;
      outer_index /= axis.extent;
      src_offset += index[static_cast<std::size_t>(k)] * axis.src_stride;
      dst_offset += index[static_cast<std::size_t>(k)] * axis.dst_stride;
    }
    for (std::int64_t work = begin; work < end; ++work) {
      const std::int64_t first = item * units_per_item;
      const std::int64_t count = std::min(units_per_item, split_extent - first);
      const permute_axis& split = plan.whole_rows ? plan.col : plan.row;
      plan.kernel.copy(src + src_offset + first * split.src_stride, dst + dst_offset + first * split.dst_stride,
                       plan.whole_rows ? rows : count, plan.whole_rows ? count : cols, plan.row.src_stride,
                       plan.col.src_stride, plan.row.dst_stride, plan.col.dst_stride, plan.width);
      if (++item < items_per_outer) continue;
      item = 0;
      for (int k = depth - 1; k >= 0; --k) {
        const auto& axis = plan.outer[static_cast<std::size_t>(k)];
        auto& position = index[static_cast<std::size_t>(k)];
        src_offset += axis.src_stride;
        dst_offset += axis.dst_stride;
        if (++position < axis.extent) break;
        src_offset -= axis.src_stride * axis.extent;
        dst_offset -= axis.dst_stride * axis.extent;
        position = 0;
      }
    }
  });
}

std::string describe(const permute_plan& plan) {
  auto axis_text = [](const permute_axis& axis) {
    return std::to_string(axis.extent) + ":" + std::to_string(axis.src_stride) + "/" +
           std::to_string(axis.dst_stride);
  };
  std::string text = "outer [";
  for (std::size_t k = 0; k < plan.outer.size(); ++k) {
    if (k != 0) text += " ";
    text += axis_text(plan.outer[k]);
  }
  text += "] row " + axis_text(plan.row) + " col " + axis_text(plan.col) + " width " +
          std::to_string(plan.width) + " (" + plan.kernel.name + ")";
  return text;
}

}  // namespace regrid::kernels
