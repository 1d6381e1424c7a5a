#include "core/scratch.hpp"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "regrid/runtime.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace regrid::detail {
namespace {

constexpr std::size_t huge_page = std::size_t{2} << 20;

std::size_t storage_alignment(std::size_t bytes) noexcept { return bytes >= 2 * huge_page ? huge_page : 64; }

#if defined(__SANITIZE_ADDRESS__)
constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif
#else
constexpr bool sanitized = false;
#endif

std::size_t initial_cache_limit() {
  // AddressSanitizer must see every free, or a use after free of a cached block would go unseen.
  if (sanitized) return 0;
  if (const char* env = std::getenv("REGRID_MEMORY_CACHE_MIB")) {
    char* end = nullptr;
    const unsigned long long value = std::strtoull(env, &end, 10);
    if (end != env && *end == '\0' && value <= (std::size_t{1} << 24)) return static_cast<std::size_t>(value) << 20;
  }
  return default_memory_cache_bytes;
}

// Freed blocks of at least cached_storage_min_bytes, most recent last. The kernel zeroes every
// fresh page it maps, so an operator returning 100 MB would otherwise spend a third of its time
// in page faults on every call; repeated calls of one shape reuse the previous call's blocks.
class storage_cache {
 public:
  std::byte* take(std::size_t capacity) {
    const std::lock_guard lock(mutex_);
    for (auto entry = blocks_.rbegin(); entry != blocks_.rend(); ++entry) {
      if (entry->capacity != capacity) continue;
      std::byte* memory = entry->memory;
      held_ -= capacity;
      blocks_.erase(std::next(entry).base());
      return memory;
    }
    return nullptr;
  }

  void give(std::byte* memory, std::size_t capacity) noexcept {
    {
      const std::lock_guard lock(mutex_);
      if (capacity <= limit_) {
        try {
          blocks_.push_back({memory, capacity});
          held_ += capacity;
          memory = nullptr;
        } catch (...) {  // no room to remember it: free it below
        }
      }
      evict_to(limit_);
    }
    std::free(memory);
  }

  void set_limit(std::size_t bytes) noexcept {
    const std::lock_guard lock(mutex_);
    limit_ = bytes;
    evict_to(limit_);
  }

  void clear() noexcept {
    const std::lock_guard lock(mutex_);
    evict_to(0);
  }

  std::size_t limit() noexcept {
    const std::lock_guard lock(mutex_);
    return limit_;
  }

  std::size_t held() noexcept {
    const std::lock_guard lock(mutex_);
    return held_;
  }

 private:
  struct block {
    std::byte* memory;
    std::size_t capacity;
  };

  // Oldest first. Called with mutex_ held.
  void evict_to(std::size_t bytes) noexcept {
    std::size_t drop = 0;
    while (held_ > bytes && drop < blocks_.size()) {
      held_ -= blocks_[drop].capacity;
      std::free(blocks_[drop].memory);
      ++drop;
    }
    blocks_.erase(blocks_.begin(), blocks_.begin() + static_cast<std::ptrdiff_t>(drop));
  }

  std::mutex mutex_;
  std::vector<block> blocks_;
  std::size_t held_ = 0;
  std::size_t limit_ = initial_cache_limit();
};

// Never destroyed: tensors in static storage may release their blocks during exit.
storage_cache& cache() {
  static auto* instance = new storage_cache;
  return *instance;
}

struct storage_deleter {
  std::size_t capacity = 0;
  void operator()(std::byte* p) const noexcept { release_storage(p, capacity); }
};

// Each buffer's capacity is its deleter's (0 when empty).
using scratch_buffer = std::unique_ptr<std::byte[], storage_deleter>;

thread_local scratch_buffer buffers[2];

}  // namespace

std::size_t storage_capacity(std::size_t bytes) noexcept {
  const std::size_t alignment = storage_alignment(bytes);
  const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  return rounded == 0 ? alignment : rounded;
}

std::byte* allocate_storage(std::size_t bytes) {
  const std::size_t alignment = storage_alignment(bytes);
  const std::size_t rounded = storage_capacity(bytes);
  if (rounded >= cached_storage_min_bytes) {
    if (std::byte* reused = cache().take(rounded)) return reused;
  }
  void* memory = std::aligned_alloc(alignment, rounded);
  if (memory == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (alignment == huge_page) ::madvise(memory, rounded, MADV_HUGEPAGE);  // advisory: failure is harmless
#endif
  return static_cast<std::byte*>(memory);
}

void release_storage(std::byte* memory, std::size_t capacity) noexcept {
  if (memory == nullptr) return;
  if (capacity >= cached_storage_min_bytes) {
    cache().give(memory, capacity);
  } else {
    std::free(memory);
  }
}

std::byte* thread_scratch(scratch_slot slot, std::size_t bytes) {
  scratch_buffer& buffer = buffers[static_cast<int>(slot)];
  if (buffer && buffer.get_deleter().capacity >= bytes) return buffer.get();
  buffer.reset();
  buffer = scratch_buffer(allocate_storage(bytes), storage_deleter{storage_capacity(bytes)});
  return buffer.get();
}

void release_large_scratch() noexcept {
  for (scratch_buffer& buffer : buffers) {
    if (buffer && buffer.get_deleter().capacity > retained_scratch_bytes) buffer.reset();
  }
}

}  // namespace regrid::detail

namespace regrid {

std::size_t memory_cache_limit() noexcept { return detail::cache().limit(); }

void set_memory_cache_limit(std::size_t bytes) noexcept { detail::cache().set_limit(bytes); }

std::size_t cached_memory_bytes() noexcept { return detail::cache().held(); }

void release_cached_memory() noexcept { detail::cache().clear(); }

}  // namespace regrid
