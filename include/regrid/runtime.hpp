// Runtime controls: threading and the instruction sets kernels may use.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace regrid {

/// Threads used by regrid's operators. Starts as REGRID_NUM_THREADS from the
/// environment, else the number of hardware threads.
int num_threads() noexcept;

/// Sets the number of threads (>= 1); 1 runs everything on the calling thread.
void set_num_threads(int count);

/// Instruction-set levels of the x86-64 kernels, in increasing order.
/// avx2 = x86-64-v3 (AVX2, BMI2, F16C); avx512 = x86-64-v4 (AVX-512 F/BW/DQ/VL);
/// avx512vbmi = avx512 plus AVX512-VBMI (byte permutes across a whole vector: Ice Lake, Zen 4).
enum class isa { scalar, avx2, avx512, avx512vbmi };

std::string_view to_string(isa value) noexcept;
std::optional<isa> parse_isa(std::string_view text) noexcept;

/// The best ISA this CPU supports.
isa detected_isa() noexcept;

/// The ISA kernels use now: min(detected_isa(), cap). The cap starts as
/// REGRID_MAX_ISA=scalar|avx2|avx512|avx512vbmi from the environment, else unlimited.
isa active_isa() noexcept;

/// Caps kernel selection (tests use it to run every kernel the host has).
void set_max_isa(isa cap) noexcept;

/// Memory cache. Tensors and working buffers of 4 MiB or more are not returned to the system
/// when freed but kept, up to memory_cache_limit() bytes in all, and handed out again to the next
/// allocation of the same size: the system zeroes every fresh page it maps, which for an
/// operator returning 100 MB costs a third of the call, on every call.
///
///   release(block):  if block.size >= 4 MiB and block.size <= limit:
///                      cache.push(block); while cache.bytes > limit: free(cache.oldest)
///                    else free(block)
///   allocate(size):  cache.take(a block of exactly that size) or a fresh one
///
/// Starts as REGRID_MEMORY_CACHE_MIB from the environment, else default_memory_cache_bytes;
/// 0 under AddressSanitizer, which must see every free.
inline constexpr std::size_t default_memory_cache_bytes = std::size_t{256} << 20;
std::size_t memory_cache_limit() noexcept;

/// Sets the limit; blocks over it are freed now, oldest first. 0 turns the cache off.
void set_memory_cache_limit(std::size_t bytes) noexcept;

/// Bytes the cache holds now.
std::size_t cached_memory_bytes() noexcept;

/// Frees every cached block (the limit stays).
void release_cached_memory() noexcept;

}  // namespace regrid
