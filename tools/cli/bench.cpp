// `regrid bench`: SpaceToDepth / DepthToSpace against memcpy of the same bytes, measured in the
// same process and interleaved, over the benchmark grid; prints every cell, the min / median
// ratio per layout x element width, the grid's targets against what was measured, and the cells
// under target by the kind of plan they ran.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "commands.hpp"
#include "regrid/regrid.hpp"
#include "space_depth_cases.hpp"

namespace regrid::cli {
namespace {

// The targets the grid is measured against (README, "Benchmark"), as medians over the cells run:
//   one thread:   ratio to memcpy median >= 0.9 and min >= 0.75 from 1 MiB, median >= 0.6 below;
//   more threads: op throughput >= 1.6x one thread's for tensors that stay in cache, ratio to
//                 (as many threads') memcpy median >= 0.9 from 256 MiB.
// In cache: under 16 MiB, whose input and output together fill a 32 MiB last-level cache.
constexpr double one_thread_median = 0.9;
constexpr double one_thread_min = 0.75;
constexpr double small_one_thread_median = 0.6;
constexpr std::int64_t small_bytes = std::int64_t{1} << 20;
constexpr double in_cache_scaling = 1.6;
constexpr std::int64_t in_cache_bytes = std::int64_t{16} << 20;
constexpr double beyond_cache_median = 0.9;
constexpr std::int64_t beyond_cache_bytes = std::int64_t{256} << 20;
// Cells at or above this ratio are counted.
constexpr double near_memcpy_ratio = 0.9;
// The largest tensor --sizes-kib takes (4 GiB: input, output and their copies must fit in memory).
constexpr std::int64_t max_size_kib = std::int64_t{4} << 20;
// How long each part of the hand-off measurement's jobs keeps its thread busy: about one part of a
// 64 KiB cell's call on two threads.
constexpr double handoff_part_seconds = 2e-6;

struct cell_result {
  std::string name;
  std::string kernel;     // the kind of plan (space_depth_plan::kernel())
  std::int64_t size = 0;  // the grid size it was made for
  int threads = 1;
  double ratio = 0;
  double op_rate = 0;  // GB/s
  double op_seconds = 0;
};

// min and median (the upper one) of `values`, sorted here.
std::pair<double, double> min_and_median(std::vector<double>& values) {
  std::sort(values.begin(), values.end());
  return {values.front(), values[values.size() / 2]};
}

// `handoff_seconds`: per thread count above one, what sharing a call costs beyond its work
// (bench::pool_handoff_seconds), which bounds each cell's scaling; `round_trip_seconds`: the floor
// under it (bench::cache_line_round_trip_seconds), 0 where it was not measured.
void print_targets(const std::vector<cell_result>& cells, const std::map<int, double>& handoff_seconds,
                   double round_trip_seconds) {
  std::map<std::tuple<int, std::int64_t>, std::vector<double>> ratios;
  std::map<std::string, const cell_result*> one_thread;
  for (const cell_result& cell : cells) {
    ratios[{cell.threads, cell.size}].push_back(cell.ratio);
    if (cell.threads == 1) one_thread[cell.name] = &cell;
  }
  std::printf("\ntargets: ratio to memcpy over the cells run (min / median; \"at %.1f\": cells at or above %.1f)\n",
              near_memcpy_ratio, near_memcpy_ratio);
  std::printf("%-8s %3s %6s %6s %6s %6s  %-28s %s\n", "size", "thr", "cases", "min", "median", "at 0.9", "target",
              "met");
  for (auto& [key, values] : ratios) {
    const auto [threads, size] = key;
    const auto at_target = std::count_if(values.begin(), values.end(), [](double r) { return r >= near_memcpy_ratio; });
    const auto [least, median] = min_and_median(values);
    char target[64] = "-";
    const char* met = "-";
    if (threads == 1 && size >= small_bytes) {
      std::snprintf(target, sizeof target, "median >= %.2f, min >= %.2f", one_thread_median, one_thread_min);
      met = median >= one_thread_median && least >= one_thread_min ? "yes" : "no";
    } else if (threads == 1) {
      std::snprintf(target, sizeof target, "median >= %.2f", small_one_thread_median);
      met = median >= small_one_thread_median ? "yes" : "no";
    } else if (size >= beyond_cache_bytes) {
      std::snprintf(target, sizeof target, "median >= %.2f", beyond_cache_median);
      met = median >= beyond_cache_median ? "yes" : "no";
    }
    std::printf("%-8s %3d %6zu %6.2f %6.2f %6td  %-28s %s\n", bench::size_text(size).c_str(), threads, values.size(),
                least, median, at_target, target, met);
  }
  // Op throughput on more threads over one thread's, cell by cell, and the most the hand-off
  // allows it: a cell of one-thread time t takes at least t / threads + the hand-off.
  std::map<std::tuple<int, std::int64_t>, std::vector<double>> scaling;
  std::map<std::tuple<int, std::int64_t>, std::vector<double>> bounds;
  for (const cell_result& cell : cells) {
    const auto one = one_thread.find(cell.name);
    if (cell.threads > 1 && one != one_thread.end()) {
      scaling[{cell.threads, cell.size}].push_back(cell.op_rate / one->second->op_rate);
      const auto handoff = handoff_seconds.find(cell.threads);
      const double t = one->second->op_seconds;
      const double cost = handoff == handoff_seconds.end() ? 0.0 : handoff->second;
      bounds[{cell.threads, cell.size}].push_back(t / (t / cell.threads + cost));
    }
  }
  if (scaling.empty()) return;
  std::printf(
      "\nscaling: op throughput on thr threads / on one thread, cells run on both (min / median; bound: the "
      "median of what the hand-off below allows each cell, its threads as fast as one alone)\n");
  std::printf("%-8s %3s %6s %6s %6s %7s  %-28s %s\n", "size", "thr", "cases", "min", "median", "bound", "target",
              "met");
  for (auto& [key, values] : scaling) {
    const auto [threads, size] = key;
    const auto [least, median] = min_and_median(values);
    const double bound = min_and_median(bounds[key]).second;
    char target[64] = "-";
    const char* met = "-";
    if (size < in_cache_bytes) {
      std::snprintf(target, sizeof target, "median >= %.2f (in cache)", in_cache_scaling);
      met = median >= in_cache_scaling ? "yes" : "no";
    }
    std::printf("%-8s %3d %6zu %6.2f %6.2f %7.2f  %-28s %s\n", bench::size_text(size).c_str(), threads, values.size(),
                least, median, bound, target, met);
  }
  for (const auto& [threads, seconds] : handoff_seconds) {
    std::printf(
        "hand-off: a call shared by %d threads took %.2f us longer than its parts (jobs of %d parts, each busy for "
        "%.0f us, back to back); a cell of one-thread time t takes at least t / %d + %.2f us\n",
        threads, seconds * 1e6, threads, handoff_part_seconds * 1e6, threads, seconds * 1e6);
  }
  if (round_trip_seconds > 0) {
    std::printf(
        "a cache line's round trip between two threads: %.2f us; a hand-off's critical path makes about two (the job's "
        "start reaches a worker, which claims its part; its end reaches the caller)\n",
        round_trip_seconds * 1e6);
  }
}

// The ratio a cell of `size` falls short of: the one-thread median targets, read per cell.
double cell_target(std::int64_t size) { return size >= small_bytes ? one_thread_median : small_one_thread_median; }

// Every cell under its target, counted per kind of plan and thread count against the cells of that
// kind run, per grid size: which kernels the shortfall is made of. The README's "Where the grid
// falls short" gives the reason per kind.
void print_under_target(const std::vector<cell_result>& cells) {
  std::vector<std::int64_t> sizes;
  for (const cell_result& cell : cells) sizes.push_back(cell.size);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  struct tally {
    std::map<std::int64_t, std::pair<int, int>> per_size;  // size -> (under, run)
    int under = 0;
    double least = 0;
  };
  std::map<std::pair<std::string, int>, tally> kinds;
  for (const cell_result& cell : cells) {
    tally& t = kinds[{cell.kernel, cell.threads}];
    auto& [under, run] = t.per_size[cell.size];
    ++run;
    if (cell.ratio < cell_target(cell.size)) {
      t.least = t.under == 0 ? cell.ratio : std::min(t.least, cell.ratio);
      ++under;
      ++t.under;
    }
  }
  std::vector<std::pair<std::pair<std::string, int>, const tally*>> rows;
  for (const auto& [key, t] : kinds) {
    if (t.under > 0) rows.emplace_back(key, &t);
  }
  if (rows.empty()) return;
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    // One thread count after the other, the kinds with the most cells under target first.
    if (a.first.second != b.first.second) return a.first.second < b.first.second;
    return a.second->under > b.second->under;
  });
  std::printf(
      "\nunder target: cells under %.2f of memcpy (%.2f below %s), by kind of plan (under / run; least "
      "ratio)\n",
      one_thread_median, small_one_thread_median, bench::size_text(small_bytes).c_str());
  std::printf("%-44s %3s", "plan", "thr");
  for (std::int64_t size : sizes) std::printf(" %9s", bench::size_text(size).c_str());
  std::printf(" %6s\n", "least");
  for (const auto& [key, t] : rows) {
    std::printf("%-44s %3d", key.first.c_str(), key.second);
    for (std::int64_t size : sizes) {
      const auto found = t->per_size.find(size);
      if (found == t->per_size.end()) {
        std::printf(" %9s", "-");
      } else {
        const std::string text = std::to_string(found->second.first) + "/" + std::to_string(found->second.second);
        std::printf(" %9s", text.c_str());
      }
    }
    std::printf(" %6.2f\n", t->least);
  }
}

}  // namespace

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
  for (int threads : request.threads) {
    if (threads < 1) {
      std::fprintf(stderr, "regrid bench: thread count %d must be at least 1\n", threads);
      return exit_invalid;
    }
  }
  if (request.repetitions < 1) {
    std::fprintf(stderr, "regrid bench: repetitions %d must be at least 1\n", request.repetitions);
    return exit_invalid;
  }
  for (std::int64_t kib : request.sizes_kib) {
    if (kib < 1 || kib > max_size_kib) {
      std::fprintf(stderr, "regrid bench: size %lld KiB is not between 1 and %lld KiB\n", static_cast<long long>(kib),
                   static_cast<long long>(max_size_kib));
      return exit_invalid;
    }
  }
  bench::grid_options grid_options;
  grid_options.quick = request.quick;
  for (std::int64_t kib : request.sizes_kib) grid_options.sizes.push_back(kib << 10);
  std::vector<bench::space_depth_case> grid = bench::make_grid(grid_options);
  if (!request.filter.empty()) {
    std::erase_if(grid, [&](const auto& c) { return c.name().find(request.filter) == std::string::npos; });
  }
  if (grid.empty()) {
    if (request.filter.empty()) {
      std::fprintf(stderr, "regrid bench: no case of the grid exists at the sizes asked for\n");
    } else {
      std::fprintf(stderr, "regrid bench: no case of the grid matches filter '%s' at the sizes asked for\n",
                   request.filter.c_str());
    }
    return exit_invalid;
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
    std::printf("%-44s %10s %3s %9s %9s %6s %9s %6s  %s\n", "case", "bytes", "thr", "op GB/s", "cpy GB/s", "ratio",
                "vcp GB/s", "vratio", "plan");
  } else {
    std::printf("%-44s %10s %3s %9s %9s %6s  %s\n", "case", "bytes", "thr", "op GB/s", "cpy GB/s", "ratio", "plan");
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
  std::vector<cell_result> cells;
  for (const auto& c : grid) {
    for (int threads : thread_counts) {
      const std::string kernel = c.kernel(threads);
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
      std::printf("  %s\n", kernel.c_str());
      std::fflush(stdout);
      const group_key key{c.group(), threads, c.target_bytes < (1 << 20)};
      ratios[key].push_back(t.ratio());
      cells.push_back(
          {c.name(), kernel, c.target_bytes, threads, t.ratio(), t.gigabytes_per_second(c.bytes), t.op_seconds});
      if (request.vector_copy) vector_copy_ratios[key].push_back(t.vector_copy_ratio());
    }
  }
  std::printf("\nsummary: ratio to memcpy per layout x element width (min / median over cases)%s\n",
              request.vector_copy ? ", then to the vector copy" : "");
  std::printf("%-16s %3s %-8s %6s %6s %6s", "group", "thr", "sizes", "cases", "min", "median");
  std::printf(request.vector_copy ? " %6s %6s\n" : "\n", "vmin", "vmedian");
  for (auto& [key, values] : ratios) {
    const auto [least, median] = min_and_median(values);
    std::printf("%-16s %3d %-8s %6zu %6.2f %6.2f", key.group.c_str(), key.threads, key.small ? "64KiB" : ">=1MiB",
                values.size(), least, median);
    if (request.vector_copy) {
      const auto [vector_least, vector_median] = min_and_median(vector_copy_ratios[key]);
      std::printf(" %6.2f %6.2f", vector_least, vector_median);
    }
    std::printf("\n");
  }
  std::map<int, double> handoff_seconds;
  for (int threads : thread_counts) {
    if (threads > 1) handoff_seconds[threads] = bench::pool_handoff_seconds(threads, handoff_part_seconds);
  }
  const double round_trip_seconds = handoff_seconds.empty() ? 0.0 : bench::cache_line_round_trip_seconds();
  print_targets(cells, handoff_seconds, round_trip_seconds);
  print_under_target(cells);
  return 0;
}

}  // namespace regrid::cli
