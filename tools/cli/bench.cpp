// `regrid bench`: SpaceToDepth / DepthToSpace against memcpy of the same bytes, measured in the
// same process and interleaved, over the benchmark grid; prints every cell and the min / median
// ratio per layout x element width.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "regrid/regrid.hpp"
#include "space_depth_cases.hpp"

namespace regrid::cli {

int run_bench(const bench_request& request) {
  if (request.dst_offset_bytes < 0 || request.dst_offset_bytes >= 64 ||
      request.dst_offset_bytes % bench::max_grid_element_bytes != 0) {
    std::fprintf(stderr,
                 "regrid bench: destination offset %lld is not a multiple of %lld bytes (the widest element) "
                 "below 64\n",
                 static_cast<long long>(request.dst_offset_bytes),
                 static_cast<long long>(bench::max_grid_element_bytes));
    return exit_invalid;
  }
  bench::grid_options grid_options;
  grid_options.quick = request.quick;
  for (std::int64_t kib : request.sizes_kib) grid_options.sizes.push_back(kib << 10);
  std::vector<bench::space_depth_case> grid = bench::make_grid(grid_options);
  if (!request.filter.empty()) {
    std::erase_if(grid, [&](const auto& c) { return c.name().find(request.filter) == std::string::npos; });
  }
  const int all = std::max(1U, std::thread::hardware_concurrency());
  std::vector<int> thread_counts = request.threads.empty() ? std::vector<int>{1, all} : request.threads;
  std::sort(thread_counts.begin(), thread_counts.end());
  thread_counts.erase(std::unique(thread_counts.begin(), thread_counts.end()), thread_counts.end());

  std::printf("regrid %s bench: ratio = memcpy time / op time (1.0 = memcpy speed), GB/s = (read + written) / time\n",
              REGRID_VERSION_STRING);
  if (request.dst_offset_bytes != 0) {
    std::printf("outputs (and memcpy's destinations) start %lld bytes past a 64-byte boundary\n",
                static_cast<long long>(request.dst_offset_bytes));
  }
  if (request.vector_copy) {
    std::printf("vratio = vector copy time / op time: the same bytes copied by plain %s vector loads and stores\n",
                std::string(to_string(active_isa())).c_str());
    std::printf("%-44s %10s %3s %9s %9s %6s %9s %6s\n", "case", "bytes", "thr", "op GB/s", "cpy GB/s", "ratio",
                "vcp GB/s", "vratio");
  } else {
    std::printf("%-44s %10s %3s %9s %9s %6s\n", "case", "bytes", "thr", "op GB/s", "cpy GB/s", "ratio");
  }
  struct group_key {
    std::string group;
    int threads;
    bool small;
    bool operator<(const group_key& o) const {
      return std::tie(group, threads, small) < std::tie(o.group, o.threads, o.small);
    }
  };
  std::map<group_key, std::vector<double>> ratios;
  std::map<group_key, std::vector<double>> vector_copy_ratios;
  for (const auto& c : grid) {
    for (int threads : thread_counts) {
      const int repetitions = c.bytes >= (64 << 20) ? 3 : request.repetitions;
      const bench::timing t = bench::measure(c, threads, repetitions, request.dst_offset_bytes, request.vector_copy);
      const auto gigabytes_per_second = [&](double seconds) {
        return bench::timing::gigabytes_per_second(c.bytes, seconds);
      };
      std::printf("%-44s %10lld %3d %9.2f %9.2f %6.2f", c.name().c_str(), static_cast<long long>(c.bytes), threads,
                  t.gigabytes_per_second(c.bytes), gigabytes_per_second(t.memcpy_seconds), t.ratio());
      if (request.vector_copy) {
        std::printf(" %9.2f %6.2f", gigabytes_per_second(t.vector_copy_seconds), t.vector_copy_ratio());
      }
      std::printf("\n");
      std::fflush(stdout);
      const group_key key{c.group(), threads, c.target_bytes < (1 << 20)};
      ratios[key].push_back(t.ratio());
      if (request.vector_copy) vector_copy_ratios[key].push_back(t.vector_copy_ratio());
    }
  }
  std::printf("\nsummary: ratio to memcpy per layout x element width (min / median over cases)%s\n",
              request.vector_copy ? ", then to the vector copy" : "");
  std::printf("%-16s %3s %-8s %6s %6s %6s", "group", "thr", "sizes", "cases", "min", "median");
  std::printf(request.vector_copy ? " %6s %6s\n" : "\n", "vmin", "vmedian");
  for (auto& [key, values] : ratios) {
    std::sort(values.begin(), values.end());
    std::printf("%-16s %3d %-8s %6zu %6.2f %6.2f", key.group.c_str(), key.threads, key.small ? "64KiB" : ">=1MiB",
                values.size(), values.front(), values[values.size() / 2]);
    if (request.vector_copy) {
      std::vector<double>& vector_values = vector_copy_ratios[key];
      std::sort(vector_values.begin(), vector_values.end());
      std::printf(" %6.2f %6.2f", vector_values.front(), vector_values[vector_values.size() / 2]);
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace regrid::cli
