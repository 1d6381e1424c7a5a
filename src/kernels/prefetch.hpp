// Software prefetches the optimizer keeps. GCC (12 here) counts _mm_prefetch and
// __builtin_prefetch as free of side effects, and C++ lets it assume that every loop ends
// (-ffinite-loops), so it deletes a loop that does nothing but prefetch, without a warning: the
// gather kernels' strip prefetches and the de-interleaves' source prefetches never reached the
// binary that way. An asm volatile statement is a side effect the optimizer must keep.
#pragma once

#include <cstdint>

namespace regrid::kernels {

/// Prefetches the line holding `address` into every cache level (prefetcht0). An integer: the
/// line ahead of a copy may lie past the end of its tensor, where a pointer may not point, and a
/// prefetch of any address, mapped or not, does nothing but warm a cache.
inline void prefetch_into_l1(std::uintptr_t address) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*reinterpret_cast<const char*>(address)));
#else
  __builtin_prefetch(reinterpret_cast<const char*>(address), 0, 3);
#endif
}

/// prefetch_into_l1 into the L2 cache and below (prefetcht1): for lines far enough ahead that
/// they would leave L1 before they are read.
inline void prefetch_into_l2(std::uintptr_t address) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht1 %0" : : "m"(*reinterpret_cast<const char*>(address)));
#else
  __builtin_prefetch(reinterpret_cast<const char*>(address), 0, 2);
#endif
}

}  // namespace regrid::kernels
