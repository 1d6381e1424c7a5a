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

// Polls `ready` for up to spin_duration; true when it became true.
template <class Ready>
bool spin_until(const Ready& ready) {
  const auto deadline = std::chrono::steady_clock::now() + spin_duration;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    cpu_relax();
    // The clock is read every 64 polls: often enough, and cheap next to a pause each.
    if ((i & 63) == 63 && std::chrono::steady_clock::now() >= deadline) return false;
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
    const std::uint64_t generation = generation_of(ticket_.load()) + 1;
    move_workers_off(current_cpu(), generation);
    job_ = &part;
    failure_ = nullptr;
    pending_.store(parts - 1);
    // Publishing the ticket starts the job: its generation tells workers which job a part
    // number belongs to, so a worker still finishing the previous job cannot claim this one's.
    ticket_.store(make_ticket(generation, parts, 1));
    if (wake_sleepers && sleepers_.load() > 0) {
      { std::lock_guard lock(mutex_); }  // a worker between its check and its wait sees the ticket
      wake_.notify_all();
    }
    run_one(0, part);
    // Parts no worker has claimed yet run here too: a worker that went to sleep can take longer to
    // wake (a futex wake and, in a VM, a halted vCPU's IPI: 50-200 us) than a small job takes.
    run_claimed_parts(generation);
    if (!spin_until([&] { return pending_.load() == 0; })) {
      std::unique_lock lock(mutex_);
      done_.wait(lock, [&] { return pending_.load() == 0; });
    }
    job_ = nullptr;
    note_job_end();
    if (failure_) std::rethrow_exception(failure_);
    return true;
  }

  // Whether the last job, with the pool or on its caller alone, ended less than the workers' spin
  // time ago: calls that come that close are a stream, for which waking the workers pays.
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
      slot.cpu.store(current_cpu(), std::memory_order_relaxed);
      run_claimed_parts(seen);
      slot.cpu.store(current_cpu(), std::memory_order_relaxed);
    }
  }

  // Claims part numbers of job `generation` until none are left, running each; the caller and the
  // workers both do this, so whoever is free takes the next part.
  void run_claimed_parts(std::uint64_t generation) {
    for (std::uint64_t ticket = ticket_.load();;) {
      if (generation_of(ticket) != generation || index_of(ticket) >= parts_of(ticket)) return;
      if (!ticket_.compare_exchange_weak(ticket, ticket + 1)) continue;
      run_one(index_of(ticket), *job_);
      if (pending_.fetch_sub(1) == 1) {
        { std::lock_guard lock(mutex_); }  // the caller between its check and its wait sees it
        done_.notify_one();
      }
      ticket = ticket_.load();
    }
  }

  std::mutex run_mutex_;
  std::mutex mutex_;  // guards the wake_ and done_ waits and failure_
  std::condition_variable wake_;
  std::condition_variable done_;
  std::vector<std::unique_ptr<worker_slot>> workers_;
  const std::function<void(int)>* job_ = nullptr;
  std::exception_ptr failure_;
  // generation << 32 | parts << 16 | next part number to claim. The part count lives in the same
  // word as the number: a worker holding the previous job's last ticket once compared its number
  // with the next job's count, published just before the next ticket, claimed a part of the next
  // job through the old ticket, and that part ran twice (and the job never finished).
  std::atomic<std::uint64_t> ticket_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<std::int64_t> last_job_end_{0};  ///< steady_nanoseconds() when the last job ended
  std::atomic<bool> stopping_{false};
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

void parallel_for(std::int64_t count, int max_parts, const std::function<void(std::int64_t, std::int64_t)>& body,
                  sleeping_workers sleeping) {
  if (count <= 0) return;
  const int parts = static_cast<int>(std::min<std::int64_t>(std::max(1, max_parts), count));
  run_parts(
      parts,
      [&](int index) {
        const std::int64_t begin = detail::split_point(count, parts, index);
        const std::int64_t end = detail::split_point(count, parts, index + 1);
        if (begin < end) body(begin, end);
      },
      sleeping);
}

}  // namespace runtime
}  // namespace regrid
