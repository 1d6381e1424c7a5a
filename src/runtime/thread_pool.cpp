#include "runtime/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include "core/checked.hpp"
#include "regrid/runtime.hpp"

namespace regrid {
namespace {

int initial_thread_count() {
  if (const char* env = std::getenv("REGRID_NUM_THREADS")) {
    char* end = nullptr;
    const long value = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && value >= 1 && value <= 1024) return static_cast<int>(value);
  }
  return std::max(1U, std::thread::hardware_concurrency());
}

std::atomic<int>& thread_setting() {
  static std::atomic<int> setting{initial_thread_count()};
  return setting;
}

thread_local bool inside_part = false;

// Hand-offs spin before they sleep. A condition variable alone costs a futex wake and a
// reschedule per job, 20-50 us on the 2-vCPU VMs regrid is measured on, which made a 1 MiB
// permute (15-20 us of copying) three times slower on two threads than on one. Operators are
// usually called back to back, so a worker that keeps polling for a short while after its job
// catches the next one without a system call; after that it sleeps and costs nothing.
constexpr auto spin_duration = std::chrono::microseconds(100);
constexpr std::int64_t spin_nanoseconds = std::chrono::nanoseconds(spin_duration).count();

std::int64_t steady_nanoseconds() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// The CPU the calling thread runs on, or -1 where that cannot be told.
inline int current_cpu() noexcept {
#if defined(__linux__)
  return sched_getcpu();
#else
  return -1;
#endif
}

// Polls `ready` for up to spin_duration; true when it became true. The clock is first read after
// 64 polls (a read costs about 20 ns, as much as the rest of a short wait), then every 64.
template <class Ready>
bool spin_until(const Ready& ready) {
  std::int64_t deadline = 0;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if ((i & 63) == 63) {
      const std::int64_t now = steady_nanoseconds();
      if (deadline == 0) {
        deadline = now + spin_nanoseconds;
      } else if (now >= deadline) {
        return false;
      }
    }
  }
}

constexpr int max_ticket_parts = 0xFFFF;
constexpr std::uint64_t make_ticket(std::uint64_t generation, int parts, int index) {
  return generation << 32 | static_cast<std::uint64_t>(parts) << 16 | static_cast<std::uint64_t>(index);
}
constexpr std::uint64_t generation_of(std::uint64_t ticket) { return ticket >> 32; }
constexpr int parts_of(std::uint64_t ticket) { return static_cast<int>(ticket >> 16 & 0xFFFF); }
constexpr int index_of(std::uint64_t ticket) { return static_cast<int>(ticket & 0xFFFF); }

class pool {
 public:
  static pool& instance() {
    static pool shared;
    return shared;
  }

  ~pool() {
    {
      std::lock_guard lock(mutex_);
      stopping_.store(true);
    }
    wake_.notify_all();
    for (auto& slot : workers_) slot->thread.join();
  }

  // Returns false when the pool is busy (or `parts` does not fit a ticket, or a worker sleeps
  // and the job leaves sleepers be); the caller then runs the parts itself.
  bool try_run(int parts, const std::function<void(int)>& part, runtime::sleeping_workers sleeping) {
    if (parts > max_ticket_parts) return false;
    // A worker may fall asleep right after this check; the caller runs every part nobody claims.
    bool wake_sleepers = sleeping == runtime::sleeping_workers::wake;
    if (!wake_sleepers && sleepers_.load() > 0) {
      if (!follows_a_recent_job()) return false;
      wake_sleepers = true;
    }
    std::unique_lock busy(run_mutex_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    ensure_workers(parts - 1);
    const std::uint64_t generation = generation_of(ticket_.load(std::memory_order_relaxed)) + 1;
    move_workers_off(current_cpu(), generation);
    job_ = &part;
    failure_ = nullptr;
    // Publishing the ticket starts the job: its generation tells workers which job a part
    // number belongs to, so a worker still finishing the previous job cannot claim this one's.
    // A release store does not wait for the line to reach this core (a sequentially consistent one
    // did, 20-40 ns); the sleepers_ check below may then come first and miss a worker falling
    // asleep, which only costs that worker this job: the caller runs every part nobody claims.
    ticket_.store(make_ticket(generation, parts, 1), std::memory_order_release);
    if (wake_sleepers && sleepers_.load() > 0) {
      { std::lock_guard lock(mutex_); }  // a worker between its check and its wait sees the ticket
      wake_.notify_all();
    }
    run_one(0, part);
    // Parts no worker has claimed yet run here too: a worker that went to sleep can take longer to
    // wake (a futex wake and, in a VM, a halted vCPU's IPI: 50-200 us) than a small job takes.
    // Once the caller finds none left, the count of parts the workers run is fixed.
    const int run_here = 1 + run_claimed_parts(generation);
    worker_parts_expected_ += static_cast<std::uint64_t>(parts - run_here);
    auto all_done = [&] { return worker_parts_done_.load() == worker_parts_expected_; };
    if (!spin_until(all_done)) {
      std::unique_lock lock(mutex_);
      caller_waits_.store(true);
      done_.wait(lock, all_done);
      caller_waits_.store(false);
    }
    // A worker that ran a part polls for the next job for spin_duration after it: the end of a
    // job is noted (follows_a_recent_job) only where no worker joined it or some worker still
    // sleeps, so that a job shared among awake workers skips the clock read.
    if (run_here == parts || sleepers_.load(std::memory_order_relaxed) > 0) note_job_end();
    if (failure_) std::rethrow_exception(failure_);
    return true;
  }

  // Whether a worker sleeps after a pause in calls: a job that leaves sleepers be runs on its
  // caller alone now.
  [[nodiscard]] bool sleeps_after_pause() const { return sleepers_.load() > 0 && !follows_a_recent_job(); }

  // Whether the last job ended less than the workers' spin time ago (of those whose end is noted:
  // see try_run): calls that come that close are a stream, for which waking the workers pays.
  [[nodiscard]] bool follows_a_recent_job() const {
    return steady_nanoseconds() - last_job_end_.load(std::memory_order_relaxed) < spin_nanoseconds;
  }
  void note_job_end() { last_job_end_.store(steady_nanoseconds(), std::memory_order_relaxed); }

 private:
  void run_one(int index, const std::function<void(int)>& part) {
    inside_part = true;
    try {
      part(index);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!failure_) failure_ = std::current_exception();
    }
    inside_part = false;
  }

  // Called before the job's ticket is published: a new worker starts from the generation before
  // it, so it takes part in the job it was created for.
  void ensure_workers(int count) {
    const std::uint64_t current = generation_of(ticket_.load());
    while (static_cast<int>(workers_.size()) < count) {
      auto& slot = *workers_.emplace_back(std::make_unique<worker_slot>());
#if defined(__linux__)
      // A new thread inherits its creator's affinity (none known: no CPUs, so never moved).
      if (sched_getaffinity(0, sizeof slot.allowed, &slot.allowed) != 0) CPU_ZERO(&slot.allowed);
#endif
      slot.thread = std::thread([this, &slot, current] { worker_loop(slot, current); });
    }
  }

  // Moves off the caller's CPU the workers that last ran there, and those that have not run for
  // the last two jobs (woken, but waiting for a CPU). Linux wakes a thread on the CPU it last ran
  // on or on the waker's, and looks for an idle one in the cache domain only while the domain is
  // not busy, which a caller busy with a job makes it look: a worker that once landed on the
  // caller's CPU (in a 2-vCPU VM, for tens of milliseconds at a time) then waits there for the
  // caller's time slice, so that the caller ran every part itself (1 MiB s2d on 2 threads at one
  // thread's speed) or, having had one claimed, waited a slice for it (6x one thread's time).
  // The worker takes back its affinity when it next runs, on the CPU it was moved to.
  void move_workers_off(int cpu, std::uint64_t generation) {
#if defined(__linux__)
    if (cpu < 0 || cpu >= CPU_SETSIZE) return;
    for (auto& slot : workers_) {
      if (slot->moved.load(std::memory_order_relaxed)) continue;
      const bool stalled = slot->generation.load(std::memory_order_relaxed) + 2 < generation;
      if (slot->cpu.load(std::memory_order_relaxed) != cpu && !stalled) continue;
      if (!CPU_ISSET(cpu, &slot->allowed) || CPU_COUNT(&slot->allowed) < 2) continue;
      cpu_set_t elsewhere = slot->allowed;
      CPU_CLR(cpu, &elsewhere);
      std::lock_guard lock(slot->affinity_mutex);
      if (pthread_setaffinity_np(slot->thread.native_handle(), sizeof elsewhere, &elsewhere) == 0) {
        slot->moved.store(true);
      }
    }
#else
    (void)cpu;
#endif
  }

  struct worker_slot {
    std::thread thread;
    std::atomic<int> cpu{-1};                  ///< where the worker last ran
    std::atomic<bool> moved{false};            ///< move_workers_off narrowed its affinity
    std::mutex affinity_mutex;                 ///< held while `moved` and the affinity change
    std::atomic<std::uint64_t> generation{0};  ///< the last job it saw
#if defined(__linux__)
    cpu_set_t allowed{};  ///< its affinity as created
#endif
  };

  // Written only when it changed: the caller reads it before every job (move_workers_off), and a
  // store would move the line back to the worker's cache each time.
  static void note_cpu(worker_slot& slot) {
    const int cpu = current_cpu();
    if (slot.cpu.load(std::memory_order_relaxed) != cpu) slot.cpu.store(cpu, std::memory_order_relaxed);
  }

  void worker_loop(worker_slot& slot, std::uint64_t seen) {
    for (;;) {
      auto new_job = [&] { return stopping_.load() || generation_of(ticket_.load()) != seen; };
      if (!spin_until(new_job)) {
        std::unique_lock lock(mutex_);
        sleepers_.fetch_add(1);
        wake_.wait(lock, new_job);
        sleepers_.fetch_sub(1);
      }
      if (stopping_.load()) return;
      // The job is read before `moved`: the caller narrows a worker's affinity before it publishes
      // the job, so a worker that sees the job also sees the narrowing, and widens it again before
      // it runs any part of the job.
      seen = generation_of(ticket_.load());
      slot.generation.store(seen, std::memory_order_relaxed);
#if defined(__linux__)
      if (slot.moved.load()) {
        // Running elsewhere now: widening the affinity again does not move it back.
        std::lock_guard lock(slot.affinity_mutex);
        sched_setaffinity(0, sizeof slot.allowed, &slot.allowed);
        slot.moved.store(false);
      }
#endif
      note_cpu(slot);
      run_claimed_parts(seen, true);
      note_cpu(slot);
    }
  }

  // Claims part numbers of job `generation` until none are left, running each; the caller and the
  // workers both do this, so whoever is free takes the next part. Returns how many it ran. A worker
  // counts each part it finishes in worker_parts_done_, which the caller waits on.
  int run_claimed_parts(std::uint64_t generation, bool worker = false) {
    int ran = 0;
    for (std::uint64_t ticket = ticket_.load();;) {
      if (generation_of(ticket) != generation || index_of(ticket) >= parts_of(ticket)) return ran;
      if (!ticket_.compare_exchange_weak(ticket, ticket + 1)) continue;
      run_one(index_of(ticket), *job_);
      ++ran;
      if (worker) {
        worker_parts_done_.fetch_add(1);
        // The caller sets caller_waits_ before it checks the count under the mutex (both
        // sequentially consistent), so either it sees this part or this sees it waiting.
        if (caller_waits_.load()) {
          { std::lock_guard lock(mutex_); }  // the caller between its check and its wait sees it
          done_.notify_one();
        }
      }
      ticket = ticket_.load();
    }
  }

  // A hand-off costs a few transfers of cache lines between the caller's core and a worker's
  // (tens of nanoseconds each); the members are laid out so that a job moves each line no more
  // often than it must. The line the workers poll holds what they read to start a job and is
  // written by the caller once per job; what the workers write per job has a line of its own;
  // the caller's own bookkeeping and the rarely used mutexes and condition variables lie apart.
  // With everything on shared lines (the caller's end-of-job stores invalidating the polled line,
  // each worker locking a mutex beside the caller's), a two-part job cost 0.34 us more than its
  // parts on the 2-vCPU Zen 5 VM regrid is measured on, where a spin hand-off took 0.08 us.

  // generation << 32 | parts << 16 | next part number to claim. The part count lives in the same
  // word as the number: a worker holding the previous job's last ticket once compared its number
  // with the next job's count, published just before the next ticket, claimed a part of the next
  // job through the old ticket, and that part ran twice (and the job never finished).
  alignas(64) std::atomic<std::uint64_t> ticket_{0};
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<bool> stopping_{false};

  alignas(64) std::atomic<std::uint64_t> worker_parts_done_{0};  ///< parts the workers finished, ever
  std::atomic<bool> caller_waits_{false};                        ///< the caller sleeps on done_

  alignas(64) std::uint64_t worker_parts_expected_ = 0;  ///< the caller's count of the parts they claimed
  std::atomic<std::int64_t> last_job_end_{0};            ///< steady_nanoseconds() when the last job ended
  std::exception_ptr failure_;
  std::atomic<int> sleepers_{0};
  std::vector<std::unique_ptr<worker_slot>> workers_;

  alignas(64) std::mutex run_mutex_;
  std::mutex mutex_;  // guards the wake_ and done_ waits and failure_
  std::condition_variable wake_;
  std::condition_variable done_;
};

}  // namespace

int num_threads() noexcept { return thread_setting().load(std::memory_order_relaxed); }

void set_num_threads(int count) {
  if (count < 1) {
    detail::fail_invalid("set_num_threads: thread count " + std::to_string(count) + " must be at least 1");
  }
  thread_setting().store(count, std::memory_order_relaxed);
}

namespace runtime {

void run_parts(int parts, const std::function<void(int)>& part, sleeping_workers sleeping) {
  if (parts <= 1 || inside_part) {
    for (int i = 0; i < parts; ++i) part(i);
    return;
  }
  pool& shared = pool::instance();
  if (!shared.try_run(parts, part, sleeping)) {
    for (int i = 0; i < parts; ++i) part(i);
    shared.note_job_end();
  }
}

call_threads::call_threads(std::int64_t bytes)
    : count_(num_threads()),
      on_caller_(count_ > 1 && sleeping_workers_for_bytes(bytes) == sleeping_workers::leave &&
                 pool::instance().sleeps_after_pause()) {
  if (on_caller_) count_ = 1;
}

call_threads::~call_threads() {
  if (on_caller_) pool::instance().note_job_end();
}

void parallel_for(std::int64_t count, int max_parts, const std::function<void(std::int64_t, std::int64_t)>& body,
                  sleeping_workers sleeping) {
  if (count <= 0) return;
  // The part function captures one pointer, which std::function keeps without allocating.
  const struct {
    std::int64_t count;
    int parts;
    const std::function<void(std::int64_t, std::int64_t)>* body;
  } job{count, static_cast<int>(std::min<std::int64_t>(std::max(1, max_parts), count)), &body};
  run_parts(
      job.parts,
      [&job](int index) {
        const std::int64_t begin = detail::split_point(job.count, job.parts, index);
        const std::int64_t end = detail::split_point(job.count, job.parts, index + 1);
        if (begin < end) (*job.body)(begin, end);
      },
      sleeping);
}

}  // namespace runtime
}  // namespace regrid
