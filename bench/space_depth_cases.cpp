#include "space_depth_cases.hpp"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <type_traits>

#include "runtime/thread_pool.hpp"

namespace regrid::bench {
namespace {

const layout_variant variants[] = {
    {"NHWC", layout::nhwc, 2},
    {"NCHW", layout::nchw, 2},
    {"NCHW_VECT_C", layout::nchw_vect_c, 2},
    {"CF-K1", layout::channels_first, 1},
    {"CF-K3", layout::channels_first, 3},
    {"CL-K3", layout::channels_last, 3},
};

dtype type_of_width(std::size_t width) {
  switch (width) {
    case 1: return dtype::uint8;
    case 2: return dtype::float16;
    case 4: return dtype::float32;
    default: return dtype::float64;
  }
}

// Chooses coarse extents so that the space-side tensor holds about target_bytes.
shape_t shape_for(const space_depth_case& c) {
  const auto width = static_cast<double>(size_of(c.type));
  const int K = c.variant.spatial_rank;
  const double vector = c.variant.layout == layout::nchw_vect_c ? 4.0 : 1.0;
  const double block_volume = std::pow(static_cast<double>(c.block), K);
  const double coarse_volume =
      static_cast<double>(c.target_bytes) / (width * vector * static_cast<double>(c.channels) * block_volume);
  const auto coarse = std::max<std::int64_t>(1, std::llround(std::pow(std::max(coarse_volume, 1.0), 1.0 / K)));
  shape_t space{1};
  const bool last = c.variant.layout == layout::nhwc || c.variant.layout == layout::channels_last;
  if (!last) space.push_back(c.channels);
  for (int k = 0; k < K; ++k) space.push_back(coarse * c.block);
  if (last) space.push_back(c.channels);
  if (c.variant.layout == layout::nchw_vect_c) space.push_back(4);
  return space;
}

space_depth_options options_of(const space_depth_case& c) {
  return {.block_size = c.block, .layout = c.variant.layout, .mode = c.mode};
}

}  // namespace

std::string size_text(std::int64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  return std::to_string(bytes >> 10) + "KiB";
}

space_depth_plan space_depth_case::plan() const {
  return to_depth ? space_depth_plan::space_to_depth(type, input_shape, options_of(*this))
                  : space_depth_plan::depth_to_space(type, input_shape, options_of(*this));
}

std::string space_depth_case::kernel(int threads) const {
  const int saved = num_threads();
  set_num_threads(threads);
  std::string kind = plan().kernel();
  set_num_threads(saved);
  return kind;
}

std::string space_depth_case::name() const {
  return std::string(to_depth ? "s2d" : "d2s") + "/" + variant.name + "/" + std::string(to_string(mode)) + "/x" +
         std::to_string(size_of(type) * 8) + "/b" + std::to_string(block) + "/c" + std::to_string(channels) + "/" +
         size_text(target_bytes);
}

std::string space_depth_case::group() const {
  return std::string(variant.name) + " x" + std::to_string(size_of(type) * 8);
}

std::vector<space_depth_case> make_grid(const grid_options& options) {
  std::vector<std::int64_t> sizes = options.sizes;
  if (sizes.empty()) {
    sizes = options.quick ? std::vector<std::int64_t>{64 << 10, 1 << 20}
                          : std::vector<std::int64_t>{64 << 10, 1 << 20, 16 << 20, 256 << 20};
  }
  const std::size_t widths[] = {1, 2, 4, 8};
  const std::int64_t blocks_full[] = {2, 3, 4, 8};
  const std::int64_t blocks_quick[] = {2, 4};
  const std::int64_t channels_full[] = {1, 3, 4, 16, 64};
  const std::int64_t channels_quick[] = {1, 3, 16};  // 3: RGB, the most common pixel shuffle
  std::vector<space_depth_case> grid;
  for (bool to_depth : {true, false}) {
    for (const auto& variant : variants) {
      for (mode order : {mode::dcr, mode::crd}) {
        if (variant.layout == layout::nchw_vect_c && order == mode::crd) continue;
        for (std::size_t width : widths) {
          if (variant.layout == layout::nchw_vect_c && width != 1) continue;
          for (std::int64_t block : options.quick ? std::span<const std::int64_t>(blocks_quick)
                                                  : std::span<const std::int64_t>(blocks_full)) {
            if (variant.spatial_rank == 3 && block == 8 && !options.quick) {
              // b^3 = 512 channels per small channel: keep it, the run lengths are what matter.
            }
            for (std::int64_t channels : options.quick ? std::span<const std::int64_t>(channels_quick)
                                                       : std::span<const std::int64_t>(channels_full)) {
              for (std::int64_t size : sizes) {
                space_depth_case c;
                c.to_depth = to_depth;
                c.variant = variant;
                c.mode = order;
                c.type = type_of_width(width);
                c.block = block;
                c.channels = channels;
                c.target_bytes = size;
                const shape_t space = shape_for(c);
                // A case "cannot exist" when even one coarse pixel overshoots the size fourfold.
                const std::int64_t bytes = element_count(space) * static_cast<std::int64_t>(width);
                if (bytes > 4 * size) continue;
                c.input_shape = to_depth ? space : space_to_depth_shape(space, options_of(c));
                c.bytes = bytes;
                grid.push_back(std::move(c));
              }
            }
          }
        }
      }
    }
  }
  return grid;
}

namespace {

// Four vectors per iteration (all loaded, then all stored), then single vectors, then the last
// vector ending the copy (overlapping the one before): the shape of regrid's run copies, unrolled
// like glibc's loop. `move<N>(dst, src)` copies N vectors of V bytes.
template <std::size_t V, class Move>
inline __attribute__((always_inline)) void copy_by_vectors(std::byte* dst, const std::byte* src, std::size_t bytes,
                                                           Move move) {
  if (bytes < V) {
    std::memcpy(dst, src, bytes);
    return;
  }
  std::size_t offset = 0;
  for (; offset + 4 * V <= bytes; offset += 4 * V) move(std::integral_constant<int, 4>{}, dst + offset, src + offset);
  for (; offset + V <= bytes; offset += V) move(std::integral_constant<int, 1>{}, dst + offset, src + offset);
  if (offset < bytes) move(std::integral_constant<int, 1>{}, dst + bytes - V, src + bytes - V);
}

// The vector widths' loops, compiled for their ISAs (with their lambdas) whatever the file's flags.
#pragma GCC push_options
#pragma GCC target("avx512f")
void copy_avx512(std::byte* dst, const std::byte* src, std::size_t bytes) {
  copy_by_vectors<64>(dst, src, bytes, [](auto count, std::byte* d, const std::byte* s) {
    __m512i v[count()];
    for (int i = 0; i < count(); ++i) v[i] = _mm512_loadu_si512(s + 64 * i);
    for (int i = 0; i < count(); ++i) _mm512_storeu_si512(d + 64 * i, v[i]);
  });
}
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2")
void copy_avx2(std::byte* dst, const std::byte* src, std::size_t bytes) {
  copy_by_vectors<32>(dst, src, bytes, [](auto count, std::byte* d, const std::byte* s) {
    __m256i v[count()];
    for (int i = 0; i < count(); ++i) v[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32 * i));
    for (int i = 0; i < count(); ++i) _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 32 * i), v[i]);
  });
}
#pragma GCC pop_options

void copy_words(std::byte* dst, const std::byte* src, std::size_t bytes) {
  copy_by_vectors<8>(dst, src, bytes, [](auto count, std::byte* d, const std::byte* s) {
    std::uint64_t v[count()];
    std::memcpy(v, s, sizeof v);
    std::memcpy(d, v, sizeof v);
  });
}

}  // namespace

void vector_copy(std::byte* dst, const std::byte* src, std::size_t bytes) noexcept {
  switch (active_isa()) {
    case isa::avx512:
    case isa::avx512vbmi: copy_avx512(dst, src, bytes); break;
    case isa::avx2: copy_avx2(dst, src, bytes); break;
    case isa::scalar: copy_words(dst, src, bytes); break;
  }
}

int take_threads_flag(int& argc, char** argv) {
  if (argc < 2 || std::strncmp(argv[1], "--threads=", 10) != 0) return 1;
  const int threads = std::max(1, std::atoi(argv[1] + 10));
  for (int i = 1; i + 1 < argc; ++i) argv[i] = argv[i + 1];
  --argc;
  return threads;
}

timing measure(const space_depth_case& c, int threads, int repetitions, std::int64_t dst_offset_bytes,
               bool with_vector_copy) {
  const space_depth_options options = options_of(c);
  tensor src(c.type, c.input_shape);
  const shape_t out_shape =
      c.to_depth ? space_to_depth_shape(c.input_shape, options) : depth_to_space_shape(c.input_shape, options);
  // The output lives inside a larger, 64-byte aligned byte buffer, `dst_offset_bytes` in.
  tensor dst_storage(dtype::uint8, {static_cast<std::int64_t>(src.size_bytes()) + dst_offset_bytes});
  std::byte* const dst_data = dst_storage.data() + dst_offset_bytes;
  std::memset(src.data(), 1, src.size_bytes());
  const int saved = num_threads();
  set_num_threads(threads);
  const auto bytes = static_cast<std::size_t>(src.size_bytes());
  // memcpy split over the same thread pool the operators use, under the same rules: no threads
  // below runtime::min_shared_bytes, where a hand-off costs more than it saves, and sleeping
  // workers left be below runtime::min_waking_bytes.
  const int copy_threads = static_cast<std::int64_t>(bytes) < runtime::min_shared_bytes ? 1 : threads;
  const runtime::sleeping_workers sleeping = runtime::sleeping_workers_for_bytes(static_cast<std::int64_t>(bytes));
  auto split = [&](auto copy_part) {
    runtime::parallel_for(
        static_cast<std::int64_t>(bytes), copy_threads,
        [&](std::int64_t begin, std::int64_t end) {
          copy_part(dst_data + begin, src.data() + begin, static_cast<std::size_t>(end - begin));
        },
        sleeping);
  };
  auto copy = [&] { split([](std::byte* d, const std::byte* s, std::size_t n) { std::memcpy(d, s, n); }); };
  auto copy_with_vectors = [&] { split(vector_copy); };
  // Views are built once, as a runtime holding its tensors' views would: building one copies its
  // shape and strides, which is the caller's cost, not the operator's.
  const tensor_view src_view = src.view();
  const mutable_tensor_view dst_view(dst_data, c.type, out_shape);
  auto run = [&] {
    if (c.to_depth)
      space_to_depth(src_view, dst_view, options);
    else
      depth_to_space(src_view, dst_view, options);
  };
  auto seconds = [](auto body) {
    const auto start = std::chrono::steady_clock::now();
    body();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  // Warm both (page faults, caches), then interleave so drift hits both equally. Calls come back
  // to back for at least warm_up_seconds first: a pool worker that went to sleep while the last
  // case ran takes 50-200 us to wake in a VM, longer than a whole case of 64 KiB lasts, so that
  // without this such cases on two threads timed the calling thread alone.
  const auto warm_start = std::chrono::steady_clock::now();
  do {
    copy();
    run();
    if (with_vector_copy) copy_with_vectors();
  } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - warm_start).count() < warm_up_seconds);
  // Small cases repeat inside each sample so that a sample lasts at least ~0.2 ms.
  const int inner = static_cast<int>(std::clamp<std::int64_t>((256 << 10) / std::max<std::int64_t>(c.bytes, 1), 1, 64));
  // Each sample follows untimed calls of its own kind, so that it finds the caches as its own
  // previous call left them, not as the other's did: the op and memcpy share the buffers, and one
  // call after the other's showed each side the other's footprint. At 16 MiB (input and output
  // fill this Zen 5's 32 MiB L3) memcpy right after an op that kept its output in cache ran 1.4x
  // faster on two threads than after one that streamed it to memory (so the ratios favoured
  // streaming kernels), and a single untimed call did not undo it (1.2x). Outputs far larger
  // than any cache keep no such state, and one more call there costs tens of milliseconds.
  const int settling_calls = c.bytes >= warm_state_free_bytes ? 0 : settling_calls_per_sample;
  // One sample: the mean time of `inner` calls.
  auto sample = [&](auto body) {
    for (int i = 0; i < settling_calls; ++i) body();
    return seconds([&] {
             for (int i = 0; i < inner; ++i) body();
           }) /
           inner;
  };
  std::vector<double> op_times;
  std::vector<double> copy_times;
  std::vector<double> vector_copy_times;
  for (int r = 0; r < repetitions; ++r) {
    if (with_vector_copy) vector_copy_times.push_back(sample(copy_with_vectors));
    copy_times.push_back(sample(copy));
    op_times.push_back(sample(run));
  }
  set_num_threads(saved);
  auto median = [](std::vector<double>& times) {
    if (times.empty()) return 0.0;
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  };
  return {median(op_times), median(copy_times), median(vector_copy_times)};
}

double pool_handoff_seconds(int threads, double part_seconds) {
  if (threads <= 1) return 0;
  using clock = std::chrono::steady_clock;
  const auto part_duration = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(part_seconds));
  auto job = [&] {
    runtime::run_parts(threads, [&](int) {
      const auto end = clock::now() + part_duration;
      while (clock::now() < end) {
      }
    });
  };
  const int saved = num_threads();
  set_num_threads(threads);
  // Back to back first, as the grid's warm-up does, so that the workers are awake and polling.
  const auto warm_start = clock::now();
  do {
    job();
  } while (std::chrono::duration<double>(clock::now() - warm_start).count() < warm_up_seconds);
  constexpr int samples = 21;
  constexpr int jobs_per_sample = 100;
  std::vector<double> costs;
  for (int s = 0; s < samples; ++s) {
    const auto start = clock::now();
    for (int j = 0; j < jobs_per_sample; ++j) job();
    const double per_job = std::chrono::duration<double>(clock::now() - start).count() / jobs_per_sample;
    costs.push_back(per_job - part_seconds);
  }
  set_num_threads(saved);
  std::nth_element(costs.begin(), costs.begin() + samples / 2, costs.end());
  return std::max(0.0, costs[samples / 2]);
}

double cache_line_round_trip_seconds() {
  struct alignas(64) line {
    std::atomic<std::int64_t> value{0};
  };
  if (std::thread::hardware_concurrency() < 2) return 0;
  line ping;
  line pong;
  // Waits that outlast a few thousand polls give the CPU away: where the two threads share one
  // (a loaded machine), each trip then costs a switch, not a time slice.
  auto wait_for = [](const line& l, std::int64_t value) {
    for (int polls = 0; l.value.load(std::memory_order_acquire) != value; ++polls) {
      if (polls < 4096) {
        _mm_pause();
      } else {
        std::this_thread::yield();
      }
    }
  };
  constexpr int samples = 21;
  constexpr std::int64_t trips_per_sample = 500;
  constexpr std::int64_t trips = samples * trips_per_sample;
  std::thread answerer([&] {
    for (std::int64_t i = 1; i <= trips; ++i) {
      wait_for(ping, i);
      pong.value.store(i, std::memory_order_release);
    }
  });
  using clock = std::chrono::steady_clock;
  std::vector<double> times;
  std::int64_t trip = 0;
  for (int s = 0; s < samples; ++s) {
    const auto start = clock::now();
    for (std::int64_t k = 0; k < trips_per_sample; ++k) {
      ++trip;
      ping.value.store(trip, std::memory_order_release);
      wait_for(pong, trip);
    }
    times.push_back(std::chrono::duration<double>(clock::now() - start).count() / trips_per_sample);
  }
  answerer.join();
  std::nth_element(times.begin(), times.begin() + samples / 2, times.end());
  return times[samples / 2];
}

}  // namespace regrid::bench
