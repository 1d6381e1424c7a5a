// The SpaceToDepth / DepthToSpace benchmark grid, shared by `regrid bench` and the Google
// Benchmark binary: op x layout x mode x element width x block x small-side channels x size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "regrid/regrid.hpp"

namespace regrid::bench {

struct layout_variant {
  const char* name;  // "NHWC", "NCHW", "NCHW_VECT_C", "CF-K1", "CF-K3", "CL-K3"
  regrid::layout layout;
  int spatial_rank;
};

struct space_depth_case {
  bool to_depth = true;
  layout_variant variant{};
  regrid::mode mode = regrid::mode::dcr;
  regrid::dtype type = regrid::dtype::float32;
  std::int64_t block = 2;
  std::int64_t channels = 1;      // small-side channels (channel groups for NCHW_VECT_C)
  std::int64_t target_bytes = 0;  // requested tensor size
  shape_t input_shape;            // chosen to come close to target_bytes
  std::int64_t bytes = 0;         // actual tensor size
  [[nodiscard]] std::string name() const;
  [[nodiscard]] std::string group() const;  // layout x width, for the summary
  /// The case planned under the active ISA cap, as the one-shot calls would plan it.
  [[nodiscard]] space_depth_plan plan() const;
  /// The kind of plan it runs under the active ISA cap on `threads` threads (space_depth_plan::kernel()).
  [[nodiscard]] std::string kernel(int threads) const;
};

struct grid_options {
  bool quick = false;
  std::vector<std::int64_t> sizes;  // empty: 64 KiB, 1 MiB, 16 MiB, 256 MiB (quick: 64 KiB, 1 MiB)
};

/// A size as case names write it: whole MiB where it is some ("16MiB"), else whole KiB ("64KiB", "1100KiB").
[[nodiscard]] std::string size_text(std::int64_t bytes);

/// Every case of the grid that can exist (NCHW_VECT_C: 1-byte, DCR only).
std::vector<space_depth_case> make_grid(const grid_options& options);

struct timing {
  double op_seconds = 0;      // median
  double memcpy_seconds = 0;  // median, same bytes, same buffers, interleaved with the op
  // Median of vector_copy (see below) likewise; 0 where not measured.
  double vector_copy_seconds = 0;
  [[nodiscard]] double ratio() const { return memcpy_seconds / op_seconds; }
  [[nodiscard]] double vector_copy_ratio() const { return vector_copy_seconds / op_seconds; }
  /// GB/s (read + written) of moving `bytes` in `seconds`.
  [[nodiscard]] static double gigabytes_per_second(std::int64_t bytes, double seconds) {
    return 2.0 * static_cast<double>(bytes) / seconds / 1e9;
  }
  [[nodiscard]] double gigabytes_per_second(std::int64_t bytes) const {
    return gigabytes_per_second(bytes, op_seconds);
  }
};

/// Removes a leading --threads=N from the command line (before Google Benchmark's flags) and
/// returns N, or 1 when absent.
int take_threads_flag(int& argc, char** argv);

/// The widest element of the grid: a destination offset must be a multiple of it.
inline constexpr std::int64_t max_grid_element_bytes = 8;

/// A copy of `bytes` by plain loads and stores of the widest vectors active_isa() allows (64 bytes
/// under AVX-512, 32 under AVX2, 8 otherwise), the way every kernel of regrid stores its output.
/// A second reference beside memcpy: glibc's memcpy copies with `rep movsb` below its threshold
/// (the L2 size on AMD CPUs), which on some CPUs (Zen 5) moves in-cache data about 1.3x faster
/// than any vector loop can, so there a ratio to memcpy near 0.75 is a kernel at the vector
/// copy's speed. Above the threshold both copies run vector loops.
void vector_copy(std::byte* dst, const std::byte* src, std::size_t bytes) noexcept;

/// Untimed calls of the same kind before each timed sample (of the op, of memcpy), so that each is
/// timed in the cache state its own calls leave; none for tensors of warm_state_free_bytes or more.
inline constexpr int settling_calls_per_sample = 2;
inline constexpr std::int64_t warm_state_free_bytes = std::int64_t{64} << 20;

/// Before its samples, a case calls memcpy and the op alternately for at least this long (at
/// least once each), so that the thread pool's workers are awake and polling, as they are for
/// calls that come back to back.
inline constexpr double warm_up_seconds = 0.002;

/// Times one case with `threads` threads (memcpy runs split over as many threads). The output,
/// and memcpy's destination, start `dst_offset_bytes` past a 64-byte boundary, as the 16-byte
/// aligned buffers of numpy's `out=` arrays do (a multiple of max_grid_element_bytes below 64).
/// With `with_vector_copy`, vector_copy is timed too, interleaved and split the same way.
timing measure(const space_depth_case& c, int threads, int repetitions, std::int64_t dst_offset_bytes = 0,
               bool with_vector_copy = false);

/// What sharing one call among `threads` threads of the pool costs beyond its work: the median
/// time a job of `threads` parts, each busy for `part_seconds`, takes beyond `part_seconds`, jobs
/// back to back (workers polling, as in the grid's samples). It is the start of the late parts
/// plus the caller's wait to hear they ended: two trips of cache lines between cores per worker.
/// A call whose work takes t on one thread then takes at least t / threads + the cost on
/// `threads`, which bounds its scaling; 0 for one thread.
double pool_handoff_seconds(int threads, double part_seconds = 2e-6);

/// The time a cache line takes to go from one thread to another and back: the median, over
/// samples of many round trips, of two threads answering each other through a pair of atomics on
/// lines of their own (the OS places the threads); 0 on a machine of one CPU. A hand-off
/// (pool_handoff_seconds) makes about two such trips on its critical path: the job's start
/// reaches the worker, which claims its part, and its end reaches the caller.
double cache_line_round_trip_seconds();

}  // namespace regrid::bench
