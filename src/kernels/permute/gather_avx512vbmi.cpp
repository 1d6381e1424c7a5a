// The gather program interpreter, built for x86-64-v4 plus AVX512-VBMI (flags in CMakeLists.txt).
#include <immintrin.h>

#include <algorithm>

#include "kernels/permute/gather.hpp"

namespace regrid::kernels {
namespace {

// Output handled together: each step of the program runs over all of a strip's periods (of
// several rows when they are short) with its index, windows and masks in registers; an
// interpreter reloading them per chunk ran at half speed. 4 KiB keeps the strip's output lines
// in L1 between the steps of one chunk.
constexpr std::int64_t strip_bytes = 4096;
static_assert(2 * max_gather_period_bytes <= strip_bytes, "a long row must hold whole periods");

// Byte-masked loads read nothing outside their mask (and cannot fault there), so a window may
// start anywhere a needed byte is.
inline __m512i permuted(__m512i index, const std::byte* a_at, std::uint64_t load_a, const std::byte* b_at,
                        std::uint64_t load_b, bool two) {
  const __m512i a = _mm512_maskz_loadu_epi8(load_a, a_at);
  // The zero-masked form: GCC 12 warns about the plain one's undefined pass-through.
  if (!two) return _mm512_maskz_permutexvar_epi8(~__mmask64{0}, index, a);
  return _mm512_permutex2var_epi8(a, index, _mm512_maskz_loadu_epi8(load_b, b_at));
}

// The bytes from p up to src_end, as a load mask.
inline std::uint64_t readable(const std::byte* p, const std::byte* src_end) {
  const std::int64_t left = src_end - p;
  if (left >= 64) return ~std::uint64_t{0};
  return left <= 0 ? 0 : (std::uint64_t{1} << left) - 1;
}

struct strip {
  const std::byte* src;
  std::byte* dst;
  std::int64_t rows;
  std::int64_t first_period;
  std::int64_t end_period;  ///< whole periods [first, end) of each row
  std::int64_t tail_bytes;  ///< then this part of the next period (0: none)
};

void run_strip(const gather_program& program, const gather_rows& row_walk, const strip& strip_walk, const std::byte* src_end) {
  // Local copies: stores through std::byte* may alias anything, which would make the compiler
  // reload every bound and stride after each store.
  const gather_rows rows = row_walk;
  const strip part = strip_walk;
  const gather_step* steps = program.steps.data();
  const std::uint32_t* chunk_end = program.chunk_end.data();
  const auto chunks = static_cast<std::int64_t>(program.chunk_end.size());
  const std::int64_t period_dst = program.period_dst_bytes;
  const std::int64_t period_src = program.period_src_bytes;
  const std::int64_t tail_chunks = (part.tail_bytes + 63) / 64;
  // The part of a period ending each row reads windows that may reach past the last source byte
  // the row needs; only near the end of the source must those loads be clipped (strides are
  // non-negative, so the strip's last row reaches furthest).
  const std::byte* last_tail = part.src + (part.rows - 1) * rows.src_stride + part.end_period * period_src;
  const bool clip = tail_chunks > 0 && src_end - last_tail < program.reach;
  std::uint32_t s = 0;
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t left = std::clamp<std::int64_t>(part.tail_bytes - c * 64, 0, 64);
    const std::uint64_t written = left == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << left) - 1;
    // The first step of a chunk stores all of it; the others overwrite their bytes.
    for (const std::uint32_t first = s; s < chunk_end[c]; ++s) {
      const gather_step& step = steps[s];
      const __m512i index = _mm512_load_si512(step.index.data());
      const std::int64_t window_a = step.window_a;
      const std::int64_t window_b = step.window_b;
      const std::uint64_t load_a = step.load_a;
      const std::uint64_t load_b = step.load_b;
      const std::uint64_t take = s == first ? ~std::uint64_t{0} : step.take;
      const bool two = load_b != 0;
      for (std::int64_t r = 0; r < part.rows; ++r) {
        const std::byte* from = part.src + r * rows.src_stride;
        std::byte* to = part.dst + r * rows.dst_stride + c * 64;
        for (std::int64_t p = part.first_period; p < part.end_period; ++p) {
          const std::byte* base = from + p * period_src;
          const __m512i value = permuted(index, base + window_a, load_a, base + window_b, load_b, two);
          if (s == first) _mm512_storeu_si512(to + p * period_dst, value);
          else _mm512_mask_storeu_epi8(to + p * period_dst, take, value);
        }
        if (c < tail_chunks) {
          const std::byte* base = from + part.end_period * period_src;
          const __m512i value =
              clip ? permuted(index, base + window_a, load_a & readable(base + window_a, src_end), base + window_b,
                              load_b & readable(base + window_b, src_end), two)
                   : permuted(index, base + window_a, load_a, base + window_b, load_b, two);
          _mm512_mask_storeu_epi8(to + part.end_period * period_dst, written & take, value);
        }
      }
    }
  }
}

}  // namespace

void gather_rows_avx512vbmi(const gather_program& program, const gather_rows& rows, const std::byte* src, std::byte* dst,
                            const std::byte* src_end) {
  const std::int64_t period_dst = program.period_dst_bytes;
  const std::int64_t whole = rows.bytes / period_dst;
  const std::int64_t tail = rows.bytes - whole * period_dst;
  if (rows.bytes >= strip_bytes) {
    // Long rows: strips of periods of one row (periods are at most half a strip, so every long
    // row has whole periods and its tail goes with the last strip).
    const std::int64_t per_strip = std::max<std::int64_t>(1, strip_bytes / period_dst);
    for (std::int64_t r = 0; r < rows.count; ++r) {
      const std::byte* from = src + r * rows.src_stride;
      std::byte* to = dst + r * rows.dst_stride;
      for (std::int64_t p = 0; p < whole; p += per_strip) {
        const std::int64_t end = std::min(whole, p + per_strip);
        run_strip(program, rows, {from, to, 1, p, end, end == whole ? tail : 0}, src_end);
      }
    }
    return;
  }
  const std::int64_t per_strip = std::max<std::int64_t>(1, strip_bytes / std::max<std::int64_t>(rows.bytes, 1));
  for (std::int64_t r = 0; r < rows.count; r += per_strip) {
    run_strip(program, rows,
              {src + r * rows.src_stride, dst + r * rows.dst_stride, std::min(per_strip, rows.count - r), 0, whole, tail},
              src_end);
  }
}

}  // namespace regrid::kernels
