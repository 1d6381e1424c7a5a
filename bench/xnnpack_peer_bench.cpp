// regrid next to XNNPACK (Debian's libxnnpack-dev) on identical inputs: DepthToSpace NHWC DCR
// float32 (xnn_create_depth_to_space_nhwc_x32, the packaged version's offer) over the grid's
// NHWC x32 cells, single thread, both planned once (regrid::space_depth_plan, XNNPACK's
// create + setup) and then run. Each benchmark times regrid; the counters give XNNPACK's time,
// measured interleaved in the same process, and speedup = XNNPACK time / regrid time. Outputs
// are compared before timing.
//
//   build/release/bench/regrid_xnnpack_peer_bench [--benchmark_filter=b2/]
#include <benchmark/benchmark.h>
#include <xnnpack.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "regrid/regrid.hpp"
#include "space_depth_cases.hpp"

namespace {

template <class Body>
double median_seconds(Body body, int repetitions) {
  std::vector<double> times;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    body();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void run_case(benchmark::State& state, const regrid::bench::space_depth_case& c) {
  const regrid::space_depth_options options{
      .block_size = c.block, .layout = regrid::layout::nhwc, .mode = regrid::mode::dcr};
  regrid::tensor src(regrid::dtype::float32, c.input_shape);
  for (std::int64_t i = 0; i < src.numel(); ++i) src.data_as<float>()[i] = static_cast<float>(i % 1000);
  const regrid::shape_t out_shape = regrid::depth_to_space_shape(c.input_shape, options);
  regrid::tensor ours(regrid::dtype::float32, out_shape);
  regrid::tensor theirs(regrid::dtype::float32, out_shape);
  const auto& s = c.input_shape;  // [N, H, W, C * b * b]
  xnn_operator_t op = nullptr;
  const std::size_t out_channels = static_cast<std::size_t>(out_shape[3]);
  if (xnn_create_depth_to_space_nhwc_x32(out_channels, static_cast<std::size_t>(s[3]), out_channels,
                                         static_cast<std::uint32_t>(c.block), 0, &op) != xnn_status_success ||
      xnn_setup_depth_to_space_nhwc_x32(op, static_cast<std::size_t>(s[0]), static_cast<std::size_t>(s[1]),
                                        static_cast<std::size_t>(s[2]), src.data(), theirs.data(),
                                        nullptr) != xnn_status_success) {
    state.SkipWithError("XNNPACK refused the case");
    return;
  }
  regrid::set_num_threads(1);
  // Both sides planned once, as an inference runtime uses them.
  const regrid::space_depth_plan plan =
      regrid::space_depth_plan::depth_to_space(regrid::dtype::float32, c.input_shape, options);
  auto run_ours = [&] { plan.execute(src.data(), ours.data()); };
  auto run_theirs = [&] { xnn_run_operator(op, nullptr); };
  run_ours();
  run_theirs();
  if (std::memcmp(ours.data(), theirs.data(), ours.size_bytes()) != 0) {
    state.SkipWithError("outputs differ");
    xnn_delete_operator(op);
    return;
  }
  for (auto _ : state) {
    run_ours();
    benchmark::DoNotOptimize(ours.data());
  }
  const int inner = static_cast<int>(std::clamp<std::int64_t>((256 << 10) / std::max<std::int64_t>(c.bytes, 1), 1, 64));
  double regrid_seconds = 0;
  double xnnpack_seconds = 0;
  std::vector<double> ratios;
  for (int r = 0; r < 7; ++r) {  // interleaved pairs
    xnnpack_seconds = median_seconds(
                          [&] {
                            for (int i = 0; i < inner; ++i) run_theirs();
                          },
                          1) /
                      inner;
    regrid_seconds = median_seconds(
                         [&] {
                           for (int i = 0; i < inner; ++i) run_ours();
                         },
                         1) /
                     inner;
    ratios.push_back(xnnpack_seconds / regrid_seconds);
  }
  std::sort(ratios.begin(), ratios.end());
  state.counters["xnnpack_us"] = xnnpack_seconds * 1e6;
  state.counters["speedup"] = ratios[ratios.size() / 2];
  xnn_delete_operator(op);
}

}  // namespace

int main(int argc, char** argv) {
  if (xnn_initialize(nullptr) != xnn_status_success) {
    std::fprintf(stderr, "XNNPACK failed to initialize\n");
    return 1;
  }
  regrid::bench::grid_options options;
  options.sizes = {64 << 10, 1 << 20, 16 << 20};
  for (const auto& c : regrid::bench::make_grid(options)) {
    if (c.to_depth || c.variant.layout != regrid::layout::nhwc || c.mode != regrid::mode::dcr ||
        c.type != regrid::dtype::float32) {
      continue;
    }
    benchmark::RegisterBenchmark(("d2s_vs_xnnpack/" + c.name()).c_str(), run_case, c)->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
