// Non-temporal ("streaming") stores for outputs larger than the last-level cache. A normal store
// first reads the line it writes (read-for-ownership); a write-once output that cannot stay in
// cache anyway then costs twice its size in memory traffic. Streaming stores skip that read.
#pragma once

#include <cstddef>

namespace regrid::kernels {

/// Outputs at least this large are written with streaming stores: about half the shared
/// last-level cache of the machines regrid targets, below which the consumer likely finds the
/// output still cached.
inline constexpr std::size_t streaming_output_bytes = std::size_t{12} << 20;

/// memcpy whose 16-byte-aligned body bypasses the cache. Call stream_fence() before another
/// thread may read what was written.
void stream_copy(std::byte* dst, const std::byte* src, std::size_t bytes) noexcept;

/// Orders this thread's streaming stores before its later stores (an sfence on x86).
void stream_fence() noexcept;

}  // namespace regrid::kernels
