#include "kernels/permute/permute.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/checked.hpp"
#include "runtime/thread_pool.hpp"

namespace regrid::kernels {
namespace {

// Below this many bytes a thread hand-off costs more than it saves.
constexpr std::int64_t min_parallel_bytes = 256 * 1024;
// Rows handed to the tile kernel at once: about this many bytes of output.
constexpr std::int64_t bytes_per_work_item = 64 * 1024;

std::int64_t magnitude(std::int64_t stride) { return stride < 0 ? -stride : stride; }

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

  const std::int64_t rows = plan.row.extent;
  const std::int64_t row_bytes = plan.col.extent * static_cast<std::int64_t>(plan.width);
  const std::int64_t rows_per_item =
      std::clamp<std::int64_t>(bytes_per_work_item / std::max<std::int64_t>(row_bytes, 1), 1, rows);
  const std::int64_t items_per_outer = (rows + rows_per_item - 1) / rows_per_item;
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
      const std::int64_t first_row = item * rows_per_item;
      const std::int64_t row_count = std::min(rows_per_item, rows - first_row);
      plan.kernel.copy(src + src_offset + first_row * plan.row.src_stride,
                       dst + dst_offset + first_row * plan.row.dst_stride, row_count,
                       plan.col.extent, plan.row.src_stride, plan.col.src_stride,
                       plan.row.dst_stride, plan.col.dst_stride, plan.width);
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
