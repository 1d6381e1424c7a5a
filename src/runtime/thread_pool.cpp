#include "runtime/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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

class pool {
 public:
  static pool& instance() {
    static pool shared;
    return shared;
  }

  ~pool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
  }

  // Returns false when the pool is busy; the caller then runs the parts itself.
  bool try_run(int parts, const std::function<void(int)>& part) {
    std::unique_lock busy(run_mutex_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    ensure_workers(parts - 1);
    {
      std::lock_guard lock(mutex_);
      job_ = &part;
      pending_ = parts - 1;
      next_part_ = 1;
      parts_ = parts;
      failure_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    run_one(0, part);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
    if (failure_) std::rethrow_exception(failure_);
    return true;
  }

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

  void ensure_workers(int count) {
    while (static_cast<int>(workers_.size()) < count) {
      workers_.emplace_back([this] { worker_loop(); });
    }
  }

  void worker_loop() {
    std::uint64_t seen = 0;
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || (generation_ != seen && next_part_ < parts_); });
      if (stopping_) return;
      seen = generation_;
      const int index = next_part_++;
      const auto* job = job_;
      lock.unlock();
      run_one(index, *job);
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex run_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  std::exception_ptr failure_;
  std::uint64_t generation_ = 0;
  int pending_ = 0;
  int next_part_ = 0;
  int parts_ = 0;
  bool stopping_ = false;
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

void run_parts(int parts, const std::function<void(int)>& part) {
  if (parts <= 1 || inside_part || !pool::instance().try_run(parts, part)) {
    for (int i = 0; i < parts; ++i) part(i);
  }
}

void parallel_for(std::int64_t count, int max_parts,
                  const std::function<void(std::int64_t, std::int64_t)>& body) {
  if (count <= 0) return;
  const int parts = static_cast<int>(std::min<std::int64_t>(std::max(1, max_parts), count));
  run_parts(parts, [&](int index) {
    const std::int64_t begin = detail::split_point(count, parts, index);
    const std::int64_t end = detail::split_point(count, parts, index + 1);
    if (begin < end) body(begin, end);
  });
}

}  // namespace runtime
}  // namespace regrid
