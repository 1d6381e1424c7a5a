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

}  // namespace

std::byte* thread_scratch(scratch_slot slot, std::size_t bytes) {
  scratch_buffer& buffer = buffers[static_cast<int>(slot)];
  if (buffer.capacity >= bytes && buffer.memory) return buffer.memory.get();
  buffer.memory.reset();
  buffer.capacity = 0;
  // Same placement as tensor storage: 2 MiB aligned and on transparent huge pages when large.
  constexpr std::size_t huge_page = std::size_t{2} << 20;
  const std::size_t alignment = bytes >= 2 * huge_page ? huge_page : 64;
  const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* memory = std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
  if (memory == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (alignment == huge_page) ::madvise(memory, rounded, MADV_HUGEPAGE);  // advisory
#endif
  buffer.memory.reset(static_cast<std::byte*>(memory));
  buffer.capacity = rounded;
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
