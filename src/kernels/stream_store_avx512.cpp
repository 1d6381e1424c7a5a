// The streaming copy built for the avx512 level (flags set in CMakeLists.txt).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/stream_store.hpp"

namespace regrid::kernels {

void stream_copy_lines_avx512(std::byte* dst, const std::byte* src, std::size_t bytes) noexcept {
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
