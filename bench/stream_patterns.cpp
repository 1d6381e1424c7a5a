// The memory patterns of a streamed de-interleave, without its shuffles: one thread reads a source
// far larger than the cache once and writes it back as W way rows with streaming stores, each
// pattern timed against memcpy of the same bytes in the same run. It bounds what a de-interleave
// kernel can reach on the machine (a ratio to memcpy no kernel of that pattern beats), so that a
// cell under target can be told apart from a kernel that leaves speed unused.
//
//   build/release/bench/regrid_stream_patterns [--mib 256] [--repetitions 5]
//
// Patterns (each line of the source goes to the way it would in a W-way de-interleave of
// 64-byte vectors: source line g * W + k to way k's line g):
//   copy                   W = 1, sequential
//   copy, prefetch         W = 1, prefetcht1 4 KiB ahead
//   copy, P pages          W = 1, P adjacent 4 KiB pages read in lockstep, line by line
//   W ways                 a line to each way per step, the source read in order
//   W ways, prefetch       the same, prefetcht1 4 KiB ahead
//   W ways, P pages        P adjacent source pages in lockstep
// AVX-512 only (streaming 64-byte stores); elsewhere it says so and exits.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace {

constexpr std::size_t line_bytes = 64;
constexpr std::size_t page_bytes = 4096;
constexpr std::size_t prefetch_ahead_bytes = 4096;

// Source line g * ways + k goes to way k's line g; `pages` source pages walked in lockstep (1: in
// order), `prefetch`: prefetcht1 prefetch_ahead_bytes ahead of each line read.
__attribute__((target("avx512f"))) void write_ways(const std::byte* src, std::byte* dst, std::size_t bytes,
                                                   std::size_t ways, std::size_t pages, bool prefetch) {
  const std::size_t way_bytes = bytes / ways;
  const std::size_t block = page_bytes * pages;
  const std::size_t step = line_bytes * ways;
  for (std::size_t base = 0; base < bytes; base += block) {
    for (std::size_t in_page = 0; in_page < page_bytes; in_page += step) {
      for (std::size_t page = 0; page < pages; ++page) {
        const std::size_t at = base + page * page_bytes + in_page;
        const std::size_t line_of_way = at / step * line_bytes;
        for (std::size_t k = 0; k < ways; ++k) {
          const std::byte* from = src + at + k * line_bytes;
          if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(from + prefetch_ahead_bytes), _MM_HINT_T1);
          _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + k * way_bytes + line_of_way), _mm512_loadu_si512(from));
        }
      }
    }
  }
  _mm_sfence();
}

double seconds_of(auto&& run) {
  const auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 256;
  int repetitions = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--mib") {
      mib = static_cast<std::size_t>(std::atol(argv[i + 1]));
    } else if (arg == "--repetitions") {
      repetitions = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: regrid_stream_patterns [--mib N] [--repetitions N]\n");
      return 2;
    }
  }
  if (!__builtin_cpu_supports("avx512f")) {
    std::printf("regrid_stream_patterns: needs AVX-512 (streaming 64-byte stores); this CPU has none\n");
    return 0;
  }
  // Whole blocks of 8 pages, so that every pattern covers the same bytes.
  const std::size_t bytes = std::max<std::size_t>(mib << 20, 8 * page_bytes) / (8 * page_bytes) * (8 * page_bytes);
  auto allocate = [&] { return static_cast<std::byte*>(std::aligned_alloc(page_bytes, bytes)); };
  const std::unique_ptr<std::byte, decltype(&std::free)> src(allocate(), &std::free);
  const std::unique_ptr<std::byte, decltype(&std::free)> dst(allocate(), &std::free);
  std::memset(src.get(), 1, bytes);
  std::memset(dst.get(), 2, bytes);
  std::printf("regrid_stream_patterns: %zu MiB, one thread, best of %d; ratio = memcpy time / pattern time\n",
              bytes >> 20, repetitions);
  std::printf("%-24s %10s %10s %7s\n", "pattern", "GB/s", "memcpy", "ratio");
  auto measure = [&](const std::string& name, std::size_t ways, std::size_t pages, bool prefetch) {
    double best = 1e30;
    double best_copy = 1e30;
    for (int r = 0; r < repetitions; ++r) {
      best = std::min(best, seconds_of([&] { write_ways(src.get(), dst.get(), bytes, ways, pages, prefetch); }));
      best_copy = std::min(best_copy, seconds_of([&] { std::memcpy(dst.get(), src.get(), bytes); }));
    }
    const double moved = 2.0 * static_cast<double>(bytes) / 1e9;
    std::printf("%-24s %10.2f %10.2f %7.2f\n", name.c_str(), moved / best, moved / best_copy, best_copy / best);
    std::fflush(stdout);
  };
  measure("copy", 1, 1, false);
  measure("copy, prefetch", 1, 1, true);
  for (std::size_t pages : {2, 4, 8}) measure("copy, " + std::to_string(pages) + " pages", 1, pages, false);
  for (std::size_t ways : {2, 4, 8, 16}) {
    const std::string name = std::to_string(ways) + " ways";
    measure(name, ways, 1, false);
    measure(name + ", prefetch", ways, 1, true);
    for (std::size_t pages : {2, 4}) measure(name + ", " + std::to_string(pages) + " pages", ways, pages, false);
  }
  return 0;
}
