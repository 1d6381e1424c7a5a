// The thread pool's hand-offs: every part of every job runs exactly once, whether the workers
// are still spinning from the previous job or asleep, with failures, nesting and two callers;
// who runs the parts of jobs that leave sleeping workers be.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include "regrid/runtime.hpp"
#include "runtime/thread_pool.hpp"

namespace regrid::runtime {
namespace {

// Runs `jobs` jobs of `parts` parts back to back and checks that each part ran once per job.
void expect_each_part_once(int parts, int jobs, std::chrono::microseconds pause = {}) {
  std::vector<std::atomic<int>> runs(static_cast<std::size_t>(parts));
  for (int job = 0; job < jobs; ++job) {
    for (auto& count : runs) count.store(0);
    run_parts(parts, [&](int index) { runs[static_cast<std::size_t>(index)].fetch_add(1); });
    for (int index = 0; index < parts; ++index) {
      ASSERT_EQ(runs[static_cast<std::size_t>(index)].load(), 1) << "part " << index << " of job " << job;
    }
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }
}

TEST(ThreadPool, BackToBackJobsRunEveryPartOnce) {
  for (int parts : {2, 3, 4, 2, 1, 4}) expect_each_part_once(parts, 3000);
}

// Part counts that change from job to job while the workers still poll: a worker holding the
// previous job's last ticket must not claim a part of the next one (it used to, when the next job
// had more parts: that part ran twice and the job never finished). Runs on a helper thread, so
// that a job that never finishes fails the test instead of hanging it.
TEST(ThreadPool, JobsOfChangingPartCountsRunEveryPartOnce) {
  auto finished = std::make_shared<std::promise<void>>();
  std::future<void> done = finished->get_future();
  std::thread([finished] {
    for (int round = 0; round < 40000; ++round) {
      for (int parts : {2, 3, 4, 5, 6, 3}) expect_each_part_once(parts, 1);
    }
    finished->set_value();
  }).detach();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(120)), std::future_status::ready) << "a job never finished";
}

// Pauses longer than the workers spin: each job has to wake sleeping workers.
TEST(ThreadPool, JobsAfterIdlePeriodsWakeTheWorkers) {
  expect_each_part_once(2, 20, std::chrono::microseconds(2000));
  expect_each_part_once(4, 20, std::chrono::microseconds(2000));
}

// A worker's part that outlasts the caller's polling (0.1 ms): the caller sleeps until the worker
// wakes it. Part 0 waits (up to 50 ms) for a worker to start part 1, so that the caller does not
// claim it itself; part 1 takes 3 ms.
TEST(ThreadPool, ACallerOutwaitedByAWorkerSleepsUntilItIsDone) {
  for (int job = 0; job < 20; ++job) {
    std::atomic<bool> started{false};
    std::atomic<int> runs{0};
    run_parts(2, [&](int index) {
      runs.fetch_add(1);
      if (index == 1) {
        started.store(true);
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        return;
      }
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
      while (!started.load() && std::chrono::steady_clock::now() < give_up) {
      }
    });
    EXPECT_EQ(runs.load(), 2) << "job " << job;
  }
}

TEST(ThreadPool, FailureIsRethrownAndThePoolStillWorks) {
  for (int job = 0; job < 100; ++job) {
    EXPECT_THROW(run_parts(2,
                           [](int index) {
                             if (index == 1) throw std::runtime_error("part 1 failed");
                           }),
                 std::runtime_error);
  }
  expect_each_part_once(2, 100);
}

// A part that splits its own work runs it serially instead of waiting on the pool it is in.
TEST(ThreadPool, NestedCallsRunSerially) {
  std::atomic<std::int64_t> total{0};
  parallel_for(4, 2, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      parallel_for(10, 2, [&](std::int64_t b, std::int64_t e) { total.fetch_add(e - b); });
    }
  });
  EXPECT_EQ(total.load(), 40);
}

// Two callers at once: one gets the pool, the other runs its parts itself; both complete.
TEST(ThreadPool, ConcurrentCallersBothComplete) {
  std::thread other([] { expect_each_part_once(2, 2000); });
  expect_each_part_once(3, 2000);
  other.join();
}

#if defined(__linux__)
void busy_for(std::chrono::microseconds duration) {
  const auto until = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < until) {
  }
}

// A worker that ran on the caller's CPU is moved off it before the next job, and runs its parts
// with its own affinity again: here the test pins the worker to the caller's CPU, where the
// kernel can also leave it (a worker woken onto the busy caller's CPU waits there for a time
// slice; the caller then runs every part itself, or waits for the one the worker claimed).
TEST(ThreadPool, WorkersOnTheCallersCpuAreMovedOffIt) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "needs two CPUs to run on; this process may use one";
  const std::thread::id caller = std::this_thread::get_id();
  run_parts(2, [](int) {});  // workers are created with this thread's affinity
  const int cpu = sched_getcpu();
  ASSERT_GE(cpu, 0);
  cpu_set_t only_here;
  CPU_ZERO(&only_here);
  CPU_SET(cpu, &only_here);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof only_here, &only_here), 0);
  // Pin whichever worker runs part 1 of a job to this CPU, as the kernel can.
  bool pinned = false;
  for (int job = 0; job < 1000 && !pinned; ++job) {
    run_parts(2, [&](int index) {
      if (index == 1 && std::this_thread::get_id() != caller) {
        pinned = sched_setaffinity(0, sizeof only_here, &only_here) == 0;
      }
      busy_for(std::chrono::microseconds(50));
    });
  }
  int parts_elsewhere = 0;
  int parts_with_narrowed_affinity = 0;
  std::atomic<int> worker_parts{0};
  // Until the workers have run 50 parts: where the other CPUs are busy (ctest -j2 runs another
  // test beside this one) the worker may take a while to get one.
  for (int job = 0; job < 5000 && pinned && worker_parts.load() < 50; ++job) {
    run_parts(2, [&](int index) {
      busy_for(std::chrono::microseconds(50));
      if (index != 1 || std::this_thread::get_id() == caller) return;
      // The first part a worker runs after pinning itself can come before the caller sees where it
      // is: the worker records its CPU after the part that pinned it, and the caller may publish
      // the next job (moving the workers it knows to be on its CPU) first. That part ran there with
      // the worker's own narrowed affinity (1 of 50 parts, once in a CI run under ASan). The
      // worker records its CPU before it runs a job's parts, so from the next job on it is moved.
      if (worker_parts.fetch_add(1) == 0) return;
      cpu_set_t mine;
      if (sched_getaffinity(0, sizeof mine, &mine) != 0 || !CPU_EQUAL(&mine, &allowed)) ++parts_with_narrowed_affinity;
      if (sched_getcpu() != cpu) ++parts_elsewhere;
    });
  }
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof allowed, &allowed), 0);
  ASSERT_TRUE(pinned) << "no worker ran part 1 of 1000 jobs";
  EXPECT_GT(parts_elsewhere, 0) << "of " << worker_parts.load() << " parts the workers ran, all on CPU " << cpu;
  EXPECT_EQ(parts_with_narrowed_affinity, 0) << "of " << worker_parts.load();
}

// Jobs that leave sleeping workers be run on the caller alone once the workers sleep (20 ms idle:
// they spin for 0.1 ms), wake them when they follow such a job at once, and are shared while the
// workers still poll after a job; jobs that wake them are shared after the same idle time. Parts
// of 300 us: a woken worker (tens of us) claims part 1 long before the caller is done with part 0.
TEST(ThreadPool, JobsThatLeaveSleepingWorkersRunOnTheCallerWhileTheySleep) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "needs two CPUs to run on; this process may use one";
  const std::thread::id caller = std::this_thread::get_id();
  // The thread that ran part 1 of a two-part job.
  auto part_one_thread = [](sleeping_workers sleeping) {
    std::thread::id ran_on;
    run_parts(
        2,
        [&](int index) {
          busy_for(std::chrono::microseconds(300));
          if (index == 1) ran_on = std::this_thread::get_id();
        },
        sleeping);
    return ran_on;
  };
  part_one_thread(sleeping_workers::wake);  // the worker exists
  const auto idle = std::chrono::milliseconds(20);
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::this_thread::sleep_for(idle);
    EXPECT_EQ(part_one_thread(sleeping_workers::leave), caller) << "attempt " << attempt;
  }
  // The rest need the woken worker on a CPU while the caller runs part 0; a busy machine (ctest
  // -j2 runs another test beside this one) may keep it off for a while, so each is tried up to
  // 50 times.
  auto at_least_once = [](const auto& shared) {
    for (int attempt = 0; attempt < 50; ++attempt) {
      if (shared()) return true;
    }
    return false;
  };
  EXPECT_TRUE(at_least_once([&] {
    std::this_thread::sleep_for(idle);
    return part_one_thread(sleeping_workers::wake) != caller;
  })) << "a job that wakes the workers was never shared after a pause";
  // A second call right after one left on the caller is a stream: it wakes the workers.
  EXPECT_TRUE(at_least_once([&] {
    std::this_thread::sleep_for(idle);
    part_one_thread(sleeping_workers::leave);
    return part_one_thread(sleeping_workers::leave) != caller;
  })) << "a job right after one left on the caller was never shared";
  EXPECT_TRUE(at_least_once([&] {
    part_one_thread(sleeping_workers::wake);
    return part_one_thread(sleeping_workers::leave) != caller;
  })) << "a job that leaves sleepers be was never shared while the workers polled";
}
#endif

// A call of several jobs decides once: after a pause (the workers asleep) a small call runs on its
// caller alone, and one right after it (a stream of calls) is shared; a large one always is.
TEST(ThreadPool, CallsDecideOnceWhetherToShareTheirJobs) {
  const int saved = regrid::num_threads();
  regrid::set_num_threads(2);
  run_parts(2, [](int) {});  // the worker exists
  const std::int64_t small = min_waking_bytes / 2;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // it sleeps: it polls for 0.1 ms
  {
    const call_threads first(small);
    EXPECT_EQ(first.count(), 1);
    // Its jobs run on the caller, and do not count as a stream for the next one in the call.
    run_parts(first.count(), [](int) {});
    const call_threads nested_decision(small);
    EXPECT_EQ(nested_decision.count(), 1);
  }
  const call_threads next(small);
  EXPECT_EQ(next.count(), 2) << "a call right after one that ran alone was not shared";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const call_threads large(min_waking_bytes);
  EXPECT_EQ(large.count(), 2);
  regrid::set_num_threads(1);
  EXPECT_EQ(call_threads(min_waking_bytes).count(), 1);
  regrid::set_num_threads(saved);
}

TEST(ThreadPool, ParallelForCoversTheRangeOnce) {
  for (std::int64_t count : {1, 2, 3, 7, 1000}) {
    for (int parts : {1, 2, 4}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(count));
      parallel_for(count, parts, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
      });
      for (std::int64_t i = 0; i < count; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << i;
    }
  }
}

}  // namespace
}  // namespace regrid::runtime
