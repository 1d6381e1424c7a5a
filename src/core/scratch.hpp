// Storage for large buffers, and per-thread working memory reused across calls. Kernels that stage an operand (the ROI
// pooling of NCHW input goes through a channels-last copy) would otherwise fault in and zero fresh pages on every call,
// which for a few MB costs as much as the copy itself.
#pragma once

#include <cstddef>

namespace regrid::detail {

/// Uninitialized memory for `bytes`, released with release_storage(p, storage_capacity(bytes)):
/// 64-byte aligned, and for 4 MiB or more 2 MiB aligned and advised onto transparent huge pages,
/// since a fresh 100 MB buffer otherwise costs ~25,000 page faults, more than an operator's own
/// work. Blocks of cached_storage_min_bytes or more are first looked up, by exact capacity, in
/// the process-wide cache of released blocks (regrid::memory_cache_limit()). Throws std::bad_alloc.
std::byte* allocate_storage(std::size_t bytes);

/// The usable size of allocate_storage(bytes): bytes rounded up to its alignment.
std::size_t storage_capacity(std::size_t bytes) noexcept;

/// Frees allocate_storage's memory, or keeps a large block in the cache for the next allocation
/// of the same capacity (oldest blocks are freed first when the cache is over its limit).
void release_storage(std::byte* memory, std::size_t capacity) noexcept;

inline constexpr std::size_t cached_storage_min_bytes = std::size_t{4} << 20;

/// Slots a kernel may hold at once on one thread.
enum class scratch_slot { first, second };

/// At least `bytes` of uninitialized, 64-byte aligned memory owned by the calling thread, valid
/// until the next call for the same slot on this thread. Buffers up to `retained_scratch_bytes`
/// are kept for the next call; larger ones are released by release_large_scratch().
std::byte* thread_scratch(scratch_slot slot, std::size_t bytes);

/// Frees this thread's buffers larger than retained_scratch_bytes (call when done with them).
void release_large_scratch() noexcept;

inline constexpr std::size_t retained_scratch_bytes = std::size_t{64} << 20;

}  // namespace regrid::detail
