// A small persistent thread pool. Operators split their work into at most
// num_threads() contiguous parts; the calling thread runs part 0.
#pragma once

#include <cstdint>
#include <functional>

namespace regrid::runtime {

/// What a job does with workers that have gone to sleep (no job for a while):
///   wake:  wakes them to take part (a futex wake: microseconds of the caller's time, and more
///          before the worker runs);
///   leave: for jobs shorter than a wake costs: where a worker sleeps, runs on the caller alone,
///          unless the previous job ended within the workers' polling time (calls in a stream,
///          for which a wake pays). Workers still polling for a job take part either way.
enum class sleeping_workers { wake, leave };

/// Tensors smaller than this are copied or permuted on the calling thread alone: a hand-off costs
/// more than it saves. Two threads over one on a 2-vCPU Zen 5, every grid cell of each size shared
/// against none, three alternations, median of op throughput per kind of plan (run copies /
/// gathers / shuffles / staged shuffles): 32 KiB 0.96 / 1.04 / 0.92 / 1.09, 40 KiB 1.01 / 1.13 /
/// 1.04 / 1.14, 48 KiB 1.07 / 1.21 / 1.12 / 1.19, 56 KiB 1.10 / 1.25 / 1.11 / 1.19. (With the
/// pool's hand-off at 0.35 us, the limit was 64 KiB: 1.02x there, 1.26x at 128 KiB.)
inline constexpr std::int64_t min_shared_bytes = std::int64_t{48} << 10;

/// Tensors smaller than this leave sleeping workers be when they are copied or permuted: where
/// calls come a millisecond apart (the workers asleep), s2d of 64 KiB to 2 MiB took 7-13 us longer
/// on two threads than on one (64 KiB 8.9 against 1.0 us, 1 MiB 29 against 18.4, 2 MiB 48 against
/// 35: a woken worker joins late, and the wake costs the caller), and 4 MiB the same on both.
/// Measured on a 2-vCPU Zen 5 VM.
inline constexpr std::int64_t min_waking_bytes = std::int64_t{4} << 20;

/// The policy for copying or permuting a tensor of `bytes`: leave under min_waking_bytes, else wake.
[[nodiscard]] constexpr sleeping_workers sleeping_workers_for_bytes(std::int64_t bytes) {
  return bytes < min_waking_bytes ? sleeping_workers::leave : sleeping_workers::wake;
}

/// The thread count of a call made of several pool jobs (ROI pooling stages its input, then
/// pools it), decided once at its start as one job of `bytes` would decide for itself: a call
/// under min_waking_bytes that finds a worker asleep after a pause in calls (no job ended within
/// the workers' polling time) runs every job on its caller (count() == 1) and notes its end when
/// it ends, so that a call right after it, as in a stream of calls, wakes the workers; any other
/// call shares its jobs (count() == num_threads()). Deciding per job instead took the second job
/// of such a call for a stream and woke the workers for it.
class call_threads {
 public:
  explicit call_threads(std::int64_t bytes);
  ~call_threads();
  call_threads(const call_threads&) = delete;
  call_threads& operator=(const call_threads&) = delete;
  [[nodiscard]] int count() const noexcept { return count_; }

 private:
  int count_;
  bool on_caller_;
};

/// Calls part(i) for i in [0, parts) concurrently, parts <= num_threads(), and returns when
/// all have finished. Runs serially on the caller when parts == 1, when called from inside a
/// part, while another thread is using the pool, or (`leave`) while a worker sleeps after a pause
/// in calls. The first exception thrown by a part is rethrown on the caller.
void run_parts(int parts, const std::function<void(int)>& part, sleeping_workers sleeping = sleeping_workers::wake);

/// Splits [0, count) into at most `max_parts` near-equal contiguous ranges and runs
/// body(begin, end) on each through run_parts.
void parallel_for(std::int64_t count, int max_parts, const std::function<void(std::int64_t, std::int64_t)>& body,
                  sleeping_workers sleeping = sleeping_workers::wake);

}  // namespace regrid::runtime
