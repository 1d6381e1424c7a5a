#include "core/scratch.hpp"

#include <cstdlib>
#include <memory>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace regrid::detail {
namespace {

struct free_deleter {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};

struct scratch_buffer {
  std::unique_ptr<std::byte[], free_deleter> memory;
  std::size_t capacity = 0;
};

thread_local scratch_buffer buffers[2];

constexpr std::size_t huge_page = std::size_t{2} << 20;

std::size_t storage_alignment(std::size_t bytes) noexcept { return bytes >= 2 * huge_page ? huge_page : 64; }

}  // namespace

std::size_t storage_capacity(std::size_t bytes) noexcept {
  const std::size_t alignment = storage_alignment(bytes);
  const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  return rounded == 0 ? alignment : rounded;
}

std::byte* allocate_storage(std::size_t bytes) {
  const std::size_t alignment = storage_alignment(bytes);
  const std::size_t rounded = storage_capacity(bytes);
  void* memory = std::aligned_alloc(alignment, rounded);
  if (memory == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (alignment == huge_page) ::madvise(memory, rounded, MADV_HUGEPAGE);  // advisory: failure is harmless
#endif
  return static_cast<std::byte*>(memory);
}

std::byte* thread_scratch(scratch_slot slot, std::size_t bytes) {
  scratch_buffer& buffer = buffers[static_cast<int>(slot)];
  if (buffer.capacity >= bytes && buffer.memory) return buffer.memory.get();
  buffer.memory.reset();
  buffer.capacity = 0;
  buffer.memory.reset(allocate_storage(bytes));
  buffer.capacity = storage_capacity(bytes);
  return buffer.memory.get();
}

void release_large_scratch() noexcept {
  for (scratch_buffer& buffer : buffers) {
    if (buffer.capacity > retained_scratch_bytes) {
      buffer.memory.reset();
      buffer.capacity = 0;
    }
  }
}

}  // namespace regrid::detail
