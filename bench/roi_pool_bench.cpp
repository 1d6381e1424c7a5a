// ROI max pooling benchmark: the three detection-head cases, both layouts, forward
// (with argmax, as torchvision computes it) and backward. Boxes are random inside the image.
// Single-threaded unless --threads=N is given (before the Google Benchmark flags).
//
//   build/release/bench/regrid_roi_bench [--threads=N] [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "io/npy.hpp"
#include "regrid/regrid.hpp"
#include "space_depth_cases.hpp"

namespace {

struct roi_case {
  const char* name;
  regrid::shape_t nchw;  // N, C, H, W
  std::int64_t rois;
  std::int64_t pooled;
  double scale;
};

const roi_case cases[] = {
    {"2x256x64x64_r512_7x7_s1/8", {2, 256, 64, 64}, 512, 7, 0.125},
    {"1x512x38x50_r300_7x7_s1/16", {1, 512, 38, 50}, 300, 7, 0.0625},
    {"4x64x128x128_r1000_14x14_s1/8", {4, 64, 128, 128}, 1000, 14, 0.125},
};

struct prepared {
  regrid::tensor input;
  regrid::tensor rois;
  regrid::roi_pool_options options;
};

// With REGRID_ROI_INPUTS=DIR, case i reads DIR/case<i>_input.npy (NCHW float32) and
// DIR/case<i>_rois.npy instead of generating them, so a peer can be timed on identical data.
std::optional<prepared> load_prepared(const roi_case& c, regrid::layout memory_layout) {
  const char* dir = std::getenv("REGRID_ROI_INPUTS");
  if (dir == nullptr || *dir == '\0') return std::nullopt;
  std::size_t index = 0;  // benchmarks hold copies of the case: find it by name
  while (std::strcmp(cases[index].name, c.name) != 0) ++index;
  const std::string base = std::string(dir) + "/case" + std::to_string(index);
  const regrid::io::npy_array input = regrid::io::read_npy(base + "_input.npy");
  const regrid::io::npy_array rois = regrid::io::read_npy(base + "_rois.npy");
  prepared p;
  const regrid::shape_t& s = input.shape;
  p.input = regrid::tensor(regrid::dtype::float32,
                           memory_layout == regrid::layout::nchw ? s : regrid::shape_t{s[0], s[2], s[3], s[1]});
  const float* from = reinterpret_cast<const float*>(input.storage.data());
  float* to = p.input.data_as<float>();
  for (std::int64_t n = 0; n < s[0]; ++n)
    for (std::int64_t ch = 0; ch < s[1]; ++ch)
      for (std::int64_t i = 0; i < s[2] * s[3]; ++i) {
        const float value = from[(n * s[1] + ch) * s[2] * s[3] + i];
        if (memory_layout == regrid::layout::nchw)
          to[(n * s[1] + ch) * s[2] * s[3] + i] = value;
        else
          to[(n * s[2] * s[3] + i) * s[1] + ch] = value;
      }
  p.rois = regrid::tensor(regrid::dtype::float32, rois.shape);
  std::memcpy(p.rois.data(), rois.storage.data(), p.rois.size_bytes());
  p.options = {.pooled_height = c.pooled,
               .pooled_width = c.pooled,
               .spatial_scale = c.scale,
               .layout = memory_layout,
               .framework = regrid::roi_framework::torchvision};
  return p;
}

prepared prepare(const roi_case& c, regrid::layout memory_layout) {
  if (auto loaded = load_prepared(c, memory_layout)) return std::move(*loaded);
  std::mt19937_64 rng(42);
  const auto [n, ch, h, w] = std::array{c.nchw[0], c.nchw[1], c.nchw[2], c.nchw[3]};
  prepared p;
  p.input =
      regrid::tensor(regrid::dtype::float32, memory_layout == regrid::layout::nchw ? regrid::shape_t{n, ch, h, w}
                                                                                   : regrid::shape_t{n, h, w, ch});
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (std::int64_t i = 0; i < p.input.numel(); ++i) p.input.data_as<float>()[i] = value(rng);
  // Boxes in image coordinates (feature size / scale), random inside the image.
  const double image_w = static_cast<double>(w) / c.scale;
  const double image_h = static_cast<double>(h) / c.scale;
  p.rois = regrid::tensor(regrid::dtype::float32, {c.rois, 5});
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (std::int64_t r = 0; r < c.rois; ++r) {
    float* row = p.rois.data_as<float>() + r * 5;
    const double x1 = unit(rng) * image_w, x2 = unit(rng) * image_w;
    const double y1 = unit(rng) * image_h, y2 = unit(rng) * image_h;
    row[0] = static_cast<float>(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n)));
    row[1] = static_cast<float>(std::min(x1, x2));
    row[2] = static_cast<float>(std::min(y1, y2));
    row[3] = static_cast<float>(std::max(x1, x2));
    row[4] = static_cast<float>(std::max(y1, y2));
  }
  p.options = {.pooled_height = c.pooled,
               .pooled_width = c.pooled,
               .spatial_scale = c.scale,
               .layout = memory_layout,
               .framework = regrid::roi_framework::torchvision};
  return p;
}

// Fresh outputs every call, as torchvision returns them; with `cached` false the memory cache is
// off, so every call also pays for the system zeroing its fresh pages.
void forward(benchmark::State& state, const roi_case& c, regrid::layout memory_layout, bool cached) {
  const prepared p = prepare(c, memory_layout);
  const std::size_t limit = regrid::memory_cache_limit();
  if (!cached) regrid::set_memory_cache_limit(0);
  for (auto _ : state) {
    regrid::roi_pool_result result = regrid::roi_pool(p.input, p.rois, p.options, std::nullopt, true);
    benchmark::DoNotOptimize(result.output.data());
  }
  regrid::set_memory_cache_limit(limit);
  state.counters["threads"] = regrid::num_threads();
}

// Into preallocated buffers, as an inference runtime calls it.
void forward_into(benchmark::State& state, const roi_case& c, regrid::layout memory_layout) {
  const prepared p = prepare(c, memory_layout);
  const regrid::shape_t shape = regrid::roi_pool_shape(p.input.shape(), c.rois, p.options);
  regrid::tensor output(regrid::dtype::float32, shape);
  regrid::tensor argmax(regrid::dtype::int32, shape);
  for (auto _ : state) {
    regrid::roi_pool(p.input, p.rois, output.mutable_view(), p.options, std::nullopt, argmax.mutable_view());
    benchmark::DoNotOptimize(output.data());
  }
  state.counters["threads"] = regrid::num_threads();
}

void backward(benchmark::State& state, const roi_case& c, regrid::layout memory_layout) {
  const prepared p = prepare(c, memory_layout);
  const regrid::roi_pool_result result = regrid::roi_pool(p.input, p.rois, p.options, std::nullopt, true);
  const regrid::tensor batch = regrid::roi_batch_indices(p.rois, c.nchw[0], p.options);
  for (auto _ : state) {
    regrid::tensor grad =
        regrid::roi_pool_backward(result.output, result.argmax, p.input.shape(), memory_layout, batch.view());
    benchmark::DoNotOptimize(grad.data());
  }
  state.counters["threads"] = regrid::num_threads();
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = regrid::bench::take_threads_flag(argc, argv);
  regrid::set_num_threads(threads);
  for (const auto& c : cases) {
    for (regrid::layout memory_layout : {regrid::layout::nchw, regrid::layout::nhwc}) {
      const std::string suffix = std::string(c.name) + "/" + std::string(regrid::to_string(memory_layout));
      benchmark::RegisterBenchmark(("roi_pool_forward/" + suffix).c_str(), forward, c, memory_layout, true)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("roi_pool_forward_uncached/" + suffix).c_str(), forward, c, memory_layout, false)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("roi_pool_forward_into/" + suffix).c_str(), forward_into, c, memory_layout)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("roi_pool_backward/" + suffix).c_str(), backward, c, memory_layout)
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
