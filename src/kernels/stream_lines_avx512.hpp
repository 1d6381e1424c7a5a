// stream_copy for translation units built for AVX-512 (BW): whole 64-byte lines.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#if !defined(__AVX512BW__)
#error "stream_lines_avx512.hpp is for translation units built with AVX-512 BW"
#endif

namespace regrid::kernels {

/// memcpy whose whole destination cache lines are written with one 64-byte streaming store each;
/// the partial first and last lines (a copy starting or ending off a line) go out with masked
/// ordinary stores. stream_copy writes 16-byte streaming stores from the first 16-byte boundary
/// on, so where a copy starts off a line its first and last lines are each streamed in part,
/// which write-combining flushes as partial lines. Call stream_fence() before another thread may
/// read what was written.
inline void stream_copy_lines(std::byte* dst, const std::byte* src, std::size_t bytes) noexcept {
  const auto n = static_cast<std::int64_t>(bytes);
  const auto off_line = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(dst) % 64);
  const std::int64_t head = off_line == 0 ? 0 : std::min<std::int64_t>(n, 64 - off_line);
  auto copy_part = [&](std::int64_t at, std::int64_t count) {
    const __mmask64 mask = _bzhi_u64(~std::uint64_t{0}, static_cast<unsigned>(count));
    _mm512_mask_storeu_epi8(dst + at, mask, _mm512_maskz_loadu_epi8(mask, src + at));
  };
  if (head > 0) copy_part(0, head);
  std::int64_t at = head;
  for (; at + 64 <= n; at += 64) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + at), _mm512_loadu_si512(src + at));
  }
  if (at < n) copy_part(at, n - at);
}

}  // namespace regrid::kernels
