// Register transposes of 2-, 4- and 8-byte elements, built for the avx512 level (flags set in
// CMakeLists.txt). The channels-last CRD and channels-first DCR tensors of 64 channels, whose b^K
// block offsets and channels swap places, are 2-D transposes with no contiguous run on either
// side. Moved an element at a time, 8-byte ones ran at 0.04-0.2 of memcpy; 2- and 4-byte ones,
// through 64-way shuffles whose 64 vectors spill, at 0.05-0.3.
//
// Two entry points: the tile kernel for 8-byte elements,
//
//   for p < planes, r < rows, c < cols:
//     dst[p * dst_plane + r * dst_row + c * 8] = src[p * src_plane + r * 8 + c * src_col]
//
// and 32- and 64-way (de-)interleaves of 2-, 4- and 8-byte elements (shuffle_fn), whose ways are
// the columns. Both work in 8 x 8 blocks: eight loads along the source rows (64, 32 or 16 bytes:
// on Zen 4 a 512-bit shuffle costs two 256-bit ones, so 16 x 16 blocks of 4-byte elements would
// save nothing and need 16 columns), a transpose in registers,
// eight stores along the destination rows. Blocks at the edges load and store under element
// masks.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/permute/permute.hpp"

namespace regrid::kernels {
namespace {

constexpr std::int64_t block = 8;

// The zero-masked forms under an all-ones mask: GCC 12 warns about the plain ones' undefined
// pass-through operand.
constexpr __mmask8 all = 0xFF;
inline __m512i low_halves(__m512i a, __m512i b) { return _mm512_maskz_unpacklo_epi64(all, a, b); }
inline __m512i high_halves(__m512i a, __m512i b) { return _mm512_maskz_unpackhi_epi64(all, a, b); }
template <int Lanes>
inline __m512i lanes(__m512i a, __m512i b) { return _mm512_maskz_shuffle_i64x2(all, a, b, Lanes); }

// The first round of either transpose: neighbours' low and high elements interleaved.
template <class Vector, class Low, class High>
inline void interleave_neighbours(const Vector (&v)[block], Vector (&pairs)[block], Low low, High high) {
  for (int i = 0; i < block; i += 2) {
    pairs[i] = low(v[i], v[i + 1]);
    pairs[i + 1] = high(v[i], v[i + 1]);
  }
}

// The second round: the first pair of each four with the third, the second with the fourth.
template <class Vector, class Low, class High>
inline void interleave_pairs(const Vector (&pairs)[block], Vector (&quads)[block], Low low, High high) {
  for (int h = 0; h < block; h += 4) {
    quads[h] = low(pairs[h], pairs[h + 2]);
    quads[h + 1] = high(pairs[h], pairs[h + 2]);
    quads[h + 2] = low(pairs[h + 1], pairs[h + 3]);
    quads[h + 3] = high(pairs[h + 1], pairs[h + 3]);
  }
}

inline void transpose_8x8(__m512i (&v)[block]) {
  __m512i pairs[block];
  interleave_neighbours(v, pairs, low_halves, high_halves);
  // Lanes 0 and 2 of each, or 1 and 3 (imm 0x88, 0xDD), of two vectors.
  __m512i quads[block];
  interleave_pairs(pairs, quads, lanes<0x88>, lanes<0xDD>);
  // quads[0..3] hold elements (0, 2, 1, 3) and (4, 6, 5, 7) of sources 0-3; quads[4..7] of 4-7.
  v[0] = lanes<0x88>(quads[0], quads[4]);
  v[4] = lanes<0xDD>(quads[0], quads[4]);
  v[2] = lanes<0x88>(quads[1], quads[5]);
  v[6] = lanes<0xDD>(quads[1], quads[5]);
  v[1] = lanes<0x88>(quads[2], quads[6]);
  v[5] = lanes<0xDD>(quads[2], quads[6]);
  v[3] = lanes<0x88>(quads[3], quads[7]);
  v[7] = lanes<0xDD>(quads[3], quads[7]);
}

// The 4-byte form: unpacks of 32-bit and then 64-bit pairs, then 128-bit halves.
inline void transpose_8x8(__m256i (&v)[block]) {
  __m256i pairs[block];
  interleave_neighbours(
      v, pairs, [](__m256i a, __m256i b) { return _mm256_unpacklo_epi32(a, b); },
      [](__m256i a, __m256i b) { return _mm256_unpackhi_epi32(a, b); });
  // quads[4 * h + j] holds elements j and j + 4 of sources 4h to 4h + 3.
  __m256i quads[block];
  interleave_pairs(
      pairs, quads, [](__m256i a, __m256i b) { return _mm256_unpacklo_epi64(a, b); },
      [](__m256i a, __m256i b) { return _mm256_unpackhi_epi64(a, b); });
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_permute2x128_si256(quads[j], quads[j + 4], 0x20);
    v[j + 4] = _mm256_permute2x128_si256(quads[j], quads[j + 4], 0x31);
  }
}

// The 2-byte form: unpacks of 16-, 32- and then 64-bit pairs.
inline void transpose_8x8(__m128i (&v)[block]) {
  __m128i pairs[block];
  interleave_neighbours(
      v, pairs, [](__m128i a, __m128i b) { return _mm_unpacklo_epi16(a, b); },
      [](__m128i a, __m128i b) { return _mm_unpackhi_epi16(a, b); });
  // quads[4 * h + j] holds elements 2j and 2j + 1 of sources 4h to 4h + 3.
  __m128i quads[block];
  interleave_pairs(
      pairs, quads, [](__m128i a, __m128i b) { return _mm_unpacklo_epi32(a, b); },
      [](__m128i a, __m128i b) { return _mm_unpackhi_epi32(a, b); });
  for (int j = 0; j < 4; ++j) {
    v[2 * j] = _mm_unpacklo_epi64(quads[j], quads[j + 4]);
    v[2 * j + 1] = _mm_unpackhi_epi64(quads[j], quads[j + 4]);
  }
}

// Loads, stores and the register of eight elements of `Width` bytes.
template <std::int64_t Width>
struct lanes_of;

template <>
struct lanes_of<8> {
  using vector = __m512i;
  static vector load(const std::byte* p) { return _mm512_loadu_si512(p); }
  static void store(std::byte* p, vector v) { _mm512_storeu_si512(p, v); }
  static vector load(const std::byte* p, __mmask8 mask) { return _mm512_maskz_loadu_epi64(mask, p); }
  static void store(std::byte* p, __mmask8 mask, vector v) { _mm512_mask_storeu_epi64(p, mask, v); }
  static vector zero() { return _mm512_setzero_si512(); }
};

template <>
struct lanes_of<2> {
  using vector = __m128i;
  static vector load(const std::byte* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
  static void store(std::byte* p, vector v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }
  static vector load(const std::byte* p, __mmask8 mask) { return _mm_maskz_loadu_epi16(mask, p); }
  static void store(std::byte* p, __mmask8 mask, vector v) { _mm_mask_storeu_epi16(p, mask, v); }
  static vector zero() { return _mm_setzero_si128(); }
};

template <>
struct lanes_of<4> {
  using vector = __m256i;
  static vector load(const std::byte* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static void store(std::byte* p, vector v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  static vector load(const std::byte* p, __mmask8 mask) { return _mm256_maskz_loadu_epi32(mask, p); }
  static void store(std::byte* p, __mmask8 mask, vector v) { _mm256_mask_storeu_epi32(p, mask, v); }
  static vector zero() { return _mm256_setzero_si256(); }
};

// One block of `rows` x `cols` elements (each at most 8) from s (columns at src_col) to d (rows
// at dst_row).
template <std::int64_t Width, bool Whole>
inline void transpose_block(const std::byte* s, std::byte* d, std::int64_t src_col, std::int64_t dst_row, std::int64_t rows,
                            std::int64_t cols) {
  using lanes = lanes_of<Width>;
  typename lanes::vector v[block];
  if constexpr (Whole) {
    for (int i = 0; i < block; ++i) v[i] = lanes::load(s + i * src_col);
    transpose_8x8(v);
    for (int i = 0; i < block; ++i) lanes::store(d + i * dst_row, v[i]);
  } else {
    const auto row_mask = static_cast<__mmask8>((1U << rows) - 1);
    const auto col_mask = static_cast<__mmask8>((1U << cols) - 1);
    for (int i = 0; i < block; ++i) v[i] = i < cols ? lanes::load(s + i * src_col, row_mask) : lanes::zero();
    transpose_8x8(v);
    for (int i = 0; i < rows; ++i) lanes::store(d + i * dst_row, col_mask, v[i]);
  }
}

template <std::int64_t Width>
void transpose(const std::byte* src, std::byte* dst, const tile_shape& shape, std::size_t /*width*/) {
  const std::int64_t whole_rows = shape.rows / block * block;
  const std::int64_t whole_cols = shape.cols / block * block;
  for (std::int64_t p = 0; p < shape.planes; ++p) {
    const std::byte* plane_src = src + p * shape.src_plane;
    std::byte* plane_dst = dst + p * shape.dst_plane;
    for (std::int64_t r = 0; r < shape.rows; r += block) {
      const std::int64_t rows = std::min(block, shape.rows - r);
      const std::byte* s = plane_src + r * Width;
      std::byte* d = plane_dst + r * shape.dst_row;
      std::int64_t c = 0;
      if (r < whole_rows) {
        for (; c < whole_cols; c += block) {
          transpose_block<Width, true>(s + c * shape.src_col, d + c * Width, shape.src_col, shape.dst_row, block, block);
        }
      }
      for (; c < shape.cols; c += block) {
        transpose_block<Width, false>(s + c * shape.src_col, d + c * Width, shape.src_col, shape.dst_row, rows,
                                      std::min(block, shape.cols - c));
      }
    }
  }
}

// B-way shuffles of B = 32 or 64 ways (see shuffle_fn) as 8 x 8 block transposes: the ways are
// the columns, positions along the run the rows. The shuffle networks of that many ways keep 64
// vectors in flight and spill.
//
// Interleave: each block loads 8 positions of 8 source rows and stores 8 positions' worth of 8
// ways into the destination; de-interleave: the reverse. A run's last positions are masked. The
// run goes in pieces of about 16 KiB of contiguous side, and each piece way-block by way-block:
// 8 rows on the side the offsets address are in flight at once, not B (offsets 2 KiB apart put
// all B in one or two L1 sets).
template <std::int64_t Width, bool Interleave, int B>
void transposing_run(const std::byte* src, std::byte* dst, std::int64_t length, const std::int64_t* offsets) {
  static_assert(B % block == 0);
  using lanes = lanes_of<Width>;
  constexpr std::int64_t piece = std::max<std::int64_t>(block, 16384 / (B * Width) / block * block);
  for (std::int64_t start = 0; start < length; start += piece) {
    const std::int64_t end = std::min(length, start + piece);
    for (int j = 0; j < B; j += block) {
      for (std::int64_t r = start; r < end; r += block) {
        const std::int64_t rows = std::min(block, end - r);
        const auto row_mask = static_cast<__mmask8>((1U << rows) - 1);
        typename lanes::vector v[block];
        if constexpr (Interleave) {
          for (int i = 0; i < block; ++i) {
            const std::byte* from = src + offsets[j + i] + r * Width;
            v[i] = rows == block ? lanes::load(from) : lanes::load(from, row_mask);
          }
          transpose_8x8(v);
          for (int i = 0; i < rows; ++i) lanes::store(dst + ((r + i) * B + j) * Width, v[i]);
        } else {
          for (int i = 0; i < block; ++i) v[i] = i < rows ? lanes::load(src + ((r + i) * B + j) * Width) : lanes::zero();
          transpose_8x8(v);
          for (int i = 0; i < block; ++i) {
            std::byte* to = dst + offsets[j + i] + r * Width;
            if (rows == block) lanes::store(to, v[i]);
            else lanes::store(to, row_mask, v[i]);
          }
        }
      }
    }
  }
}

template <std::int64_t Width, bool Interleave, int B>
void transposing_shuffle(const std::byte* src, std::byte* dst, std::int64_t length, const std::int64_t* offsets,
                         const shuffle_repeat& repeat) {
  for (std::int64_t o = 0; o < repeat.outer.extent; ++o) {
    for (std::int64_t i = 0; i < repeat.inner.extent; ++i) {
      transposing_run<Width, Interleave, B>(src + o * repeat.outer.src_stride + i * repeat.inner.src_stride,
                                            dst + o * repeat.outer.dst_stride + i * repeat.inner.dst_stride, length,
                                            offsets);
    }
  }
}

template <std::int64_t Width, bool Interleave>
shuffle_fn transposing_for_ways(std::int64_t ways) {
  switch (ways) {
    case 32: return transposing_shuffle<Width, Interleave, 32>;
    case 64: return transposing_shuffle<Width, Interleave, 64>;
    default: return nullptr;
  }
}

}  // namespace

tile_kernel transpose_tile_kernel_avx512() noexcept { return {transpose<8>, "transpose_x64_avx512"}; }

}  // namespace regrid::kernels

namespace regrid::kernels {
shuffle_fn transposing_shuffle_kernel_avx512(std::size_t width, std::int64_t ways, bool interleave) noexcept {
  switch (width) {
    case 2: return interleave ? transposing_for_ways<2, true>(ways) : transposing_for_ways<2, false>(ways);
    case 4: return interleave ? transposing_for_ways<4, true>(ways) : transposing_for_ways<4, false>(ways);
    case 8: return interleave ? transposing_for_ways<8, true>(ways) : transposing_for_ways<8, false>(ways);
    default: return nullptr;
  }
}
}  // namespace regrid::kernels
