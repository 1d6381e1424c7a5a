// Non-temporal ("streaming") stores for outputs larger than the last-level cache. A normal store
// first reads the line it writes (read-for-ownership); a write-once output that cannot stay in
// cache anyway then costs twice its size in memory traffic. Streaming stores skip that read.
#pragma once

#include <cstddef>

namespace regrid::kernels {

/// Outputs at least this large are written with streaming stores: about half the shared
/// last-level cache of the machines regrid targets, below which the consumer likely finds the
/// output still cached. A threshold from each CPU's own cache (3/8 of the L3 a core sees: 12 MiB
/// here, 112.5 MiB on an Emerald Rapids Xeon with 300 MiB) lost where it differs: on that Xeon
/// (a 16-vCPU VM, one thread moving 20-22 GB/s even at 16 MiB), the grid's 16 MiB cells written
/// with ordinary stores read 0.86x / 0.80x the ratio to memcpy of streamed ones on 1 / 16 threads
/// (all 1640 cells), and 64 MiB ones 0.68x / 0.79x (NHWC); streaming stays from 12 MiB on.
inline constexpr std::size_t streaming_output_bytes = std::size_t{12} << 20;

/// memcpy whose 16-byte-aligned body bypasses the cache. Call stream_fence() before another
/// thread may read what was written.
void stream_copy(std::byte* dst, const std::byte* src, std::size_t bytes) noexcept;

/// stream_copy writing each whole 64-byte line of the destination with one streaming store, and
/// the partial first and last lines (a copy starting or ending off a line) with masked ordinary
/// stores: stream_copy's 16-byte streaming stores write such lines in part, which write-combining
/// flushes as partial lines. Needs AVX-512 BW: callers check the active ISA (runtime::active_isa).
void stream_copy_lines_avx512(std::byte* dst, const std::byte* src, std::size_t bytes) noexcept;

/// Orders this thread's streaming stores before its later stores (an sfence on x86).
void stream_fence() noexcept;

}  // namespace regrid::kernels
