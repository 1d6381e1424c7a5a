// SpaceToDepth / DepthToSpace under Google Benchmark: every case of the grid (--quick subset by
// default; REGRID_BENCH_FULL=1 for the full grid), with counters for GB/s (read + written) and
// the ratios to a memcpy and to a plain vector copy (bench::vector_copy) of the same bytes, measured
// interleaved in the same process.
//
//   build/release/bench/regrid_space_depth_bench [--threads=N] [--benchmark_filter=NHWC]
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "regrid/regrid.hpp"
#include "space_depth_cases.hpp"

namespace {

void run_case(benchmark::State& state, const regrid::bench::space_depth_case& c, int threads) {
  const regrid::space_depth_options options{.block_size = c.block, .layout = c.variant.layout, .mode = c.mode};
  regrid::tensor src(c.type, c.input_shape);
  const regrid::shape_t out_shape = c.to_depth ? regrid::space_to_depth_shape(c.input_shape, options)
                                               : regrid::depth_to_space_shape(c.input_shape, options);
  regrid::tensor dst(c.type, out_shape);
  regrid::set_num_threads(threads);
  const regrid::tensor_view src_view = src.view();
  const regrid::mutable_tensor_view dst_view = dst.mutable_view();
  for (auto _ : state) {
    if (c.to_depth)
      regrid::space_to_depth(src_view, dst_view, options);
    else
      regrid::depth_to_space(src_view, dst_view, options);
    benchmark::DoNotOptimize(dst.data());
  }
  const regrid::bench::timing t = regrid::bench::measure(c, threads, 5, 0, true);
  state.counters["GB/s"] = t.gigabytes_per_second(c.bytes);
  state.counters["memcpy_GB/s"] = regrid::bench::timing::gigabytes_per_second(c.bytes, t.memcpy_seconds);
  state.counters["ratio"] = t.ratio();
  state.counters["vector_copy_ratio"] = t.vector_copy_ratio();
  state.SetBytesProcessed(state.iterations() * 2 * c.bytes);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = regrid::bench::take_threads_flag(argc, argv);
  const char* full = std::getenv("REGRID_BENCH_FULL");
  regrid::bench::grid_options options;
  options.quick = full == nullptr || std::string(full) != "1";
  for (const auto& c : regrid::bench::make_grid(options)) {
    benchmark::RegisterBenchmark(c.name().c_str(), run_case, c, threads)->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
