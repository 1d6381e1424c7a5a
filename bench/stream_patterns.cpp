// The memory patterns of a streamed de-interleave, without its shuffles: one thread reads a source
// far larger than the cache once and writes it back as W way rows with streaming stores, each
// pattern timed against memcpy of the same bytes in the same run. It bounds what a de-interleave
// kernel can reach on the machine (a ratio to memcpy no kernel of that pattern beats), so that a
// cell under target can be told apart from a kernel that leaves speed unused.
//
//   build/release/bench/regrid_stream_patterns [--mib 256] [--repetitions 5] [--stores]
//
// Patterns (each line of the source goes to the way it would in a W-way de-interleave of
// 64-byte vectors: source line g * W + k to way k's line g):
//   copy                   W = 1, sequential
//   copy, prefetch         W = 1, prefetcht1 4 KiB ahead
//   copy, P pages          W = 1, P adjacent 4 KiB pages read in lockstep, line by line
//   W ways                 a line to each way per step, the source read in order
//   W ways, prefetch       the same, prefetcht1 4 KiB ahead
//   W ways, P pages        P adjacent source pages in lockstep
// --stores instead times the ways' stores, the source read in order (W = 1 to 16):
//   W ways, streaming      _mm512_stream_si512, as above
//   W ways, ordinary       plain 64-byte stores, each line read for ownership
//   W ways, movdir64b      MOVDIR64B, a whole-line direct store (where the CPU has it)
//   W ways, rep movsb      each way's lines packed into a 4 KiB L1 buffer, then copied by rep movsb
// On the Intel Xeon with AMX of sessions 55-69 (2 vCPUs), 256 MiB, best of 3: streaming 0.81-0.88
// of memcpy, movdir64b the same, ordinary 0.53-0.64, rep movsb 0.42-0.51: no store kind lifts the
// de-interleave's ceiling there.
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

// How a pattern writes each way's lines.
enum class way_store {
  streaming,  // _mm512_stream_si512, one line at a time
  ordinary,   // _mm512_storeu_si512: each line read for ownership first
  movdir64b,  // MOVDIR64B from the source line: a whole-line direct store
  rep_movsb,  // each way's lines gathered into a 4 KiB L1 buffer, then copied out by rep movsb
};

// Source line g * ways + k to way k's line g, in order, storing as `store` says.
__attribute__((target("avx512f,movdir64b"))) void write_ways_by(const std::byte* src, std::byte* dst, std::size_t bytes,
                                                                std::size_t ways, way_store store) {
  const std::size_t way_bytes = bytes / ways;
  const std::size_t step = line_bytes * ways;
  if (store == way_store::rep_movsb) {
    // A block of ways x 4 KiB of source: each way's 64 lines into its own buffer, then out.
    alignas(64) static std::byte buffers[16][page_bytes];
    const std::size_t block = page_bytes * ways;
    for (std::size_t base = 0; base < bytes; base += block) {
      for (std::size_t at = base; at < base + block; at += step) {
        for (std::size_t k = 0; k < ways; ++k) {
          _mm512_store_si512(reinterpret_cast<__m512i*>(buffers[k] + (at - base) / ways),
                             _mm512_loadu_si512(src + at + k * line_bytes));
        }
      }
      for (std::size_t k = 0; k < ways; ++k) {
        void* to = dst + k * way_bytes + base / ways;
        const void* from = buffers[k];
        std::size_t count = page_bytes;
        asm volatile("rep movsb" : "+D"(to), "+S"(from), "+c"(count) : : "memory");
      }
    }
    return;
  }
  for (std::size_t at = 0; at < bytes; at += step) {
    const std::size_t line_of_way = at / step * line_bytes;
    for (std::size_t k = 0; k < ways; ++k) {
      const std::byte* from = src + at + k * line_bytes;
      std::byte* to = dst + k * way_bytes + line_of_way;
      if (store == way_store::movdir64b) {
        _movdir64b(to, from);
      } else if (store == way_store::ordinary) {
        _mm512_store_si512(reinterpret_cast<__m512i*>(to), _mm512_loadu_si512(from));
      } else {
        _mm512_stream_si512(reinterpret_cast<__m512i*>(to), _mm512_loadu_si512(from));
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
  bool stores = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--stores") {
      stores = true;
    } else if (i + 1 == argc) {
      std::fprintf(stderr, "usage: regrid_stream_patterns [--mib N] [--repetitions N] [--stores]\n");
      return 2;
    } else if (arg == "--mib") {
      mib = static_cast<std::size_t>(std::atol(argv[++i]));
    } else if (arg == "--repetitions") {
      repetitions = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: regrid_stream_patterns [--mib N] [--repetitions N] [--stores]\n");
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
  auto measure_run = [&](const std::string& name, auto&& run) {
    double best = 1e30;
    double best_copy = 1e30;
    for (int r = 0; r < repetitions; ++r) {
      best = std::min(best, seconds_of(run));
      best_copy = std::min(best_copy, seconds_of([&] { std::memcpy(dst.get(), src.get(), bytes); }));
    }
    const double moved = 2.0 * static_cast<double>(bytes) / 1e9;
    std::printf("%-24s %10.2f %10.2f %7.2f\n", name.c_str(), moved / best, moved / best_copy, best_copy / best);
    std::fflush(stdout);
  };
  auto measure = [&](const std::string& name, std::size_t ways, std::size_t pages, bool prefetch) {
    measure_run(name, [&] { write_ways(src.get(), dst.get(), bytes, ways, pages, prefetch); });
  };
  auto measure_stores = [&](const std::string& name, std::size_t ways, way_store store) {
    measure_run(name, [&] { write_ways_by(src.get(), dst.get(), bytes, ways, store); });
  };
  if (stores) {
    const bool movdir = __builtin_cpu_supports("movdir64b");
    for (std::size_t ways : {1, 2, 4, 8, 16}) {
      const std::string name = std::to_string(ways) + " ways";
      measure_stores(name + ", streaming", ways, way_store::streaming);
      measure_stores(name + ", ordinary", ways, way_store::ordinary);
      if (movdir) measure_stores(name + ", movdir64b", ways, way_store::movdir64b);
      measure_stores(name + ", rep movsb", ways, way_store::rep_movsb);
    }
    return 0;
  }
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
