// Register transposes of 1-, 2-, 4- and 8-byte elements, built for the avx512 level (flags set
// in CMakeLists.txt). The channels-last CRD and channels-first DCR tensors of 64 channels, whose
// b^K block offsets and channels swap places, are 2-D transposes with no contiguous run on
// either side. Moved an element at a time, 8-byte ones ran at 0.04-0.2 of memcpy; the others,
// through 64-way shuffles whose 64 vectors spill, at 0.03-0.3.
//
// Two entry points: the tile kernel for 8-byte elements,
//
//   for p < planes, r < rows, c < cols:
//     dst[p * dst_plane + r * dst_row + c * 8] = src[p * src_plane + r * 8 + c * src_col]
//
// and 32- and 64-way (de-)interleaves (shuffle_fn), whose ways are the columns. Both work in
// 8 x 8 blocks: eight loads along the source rows (64, 32 or 16 bytes: on Zen 4 a 512-bit shuffle
// costs two 256-bit ones, so 16 x 16 blocks of 4-byte elements would save nothing and need 16
// columns), a transpose in registers, eight stores along the destination rows. Bytes take 16 x 16
// blocks, two per 256-bit register (see shuffle_block<1>). Blocks at the edges load and store
// under element masks.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>

#include "kernels/permute/permute.hpp"
#include "kernels/stream_store.hpp"

namespace regrid::kernels {
namespace {

constexpr std::int64_t block = 8;

// The zero-masked forms under an all-ones mask: GCC 12 warns about the plain ones' undefined
// pass-through operand.
constexpr __mmask8 all = 0xFF;
inline __m512i low_halves(__m512i a, __m512i b) { return _mm512_maskz_unpacklo_epi64(all, a, b); }
inline __m512i high_halves(__m512i a, __m512i b) { return _mm512_maskz_unpackhi_epi64(all, a, b); }
template <int Lanes>
inline __m512i lanes(__m512i a, __m512i b) {
  return _mm512_maskz_shuffle_i64x2(all, a, b, Lanes);
}

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
inline void transpose_block(const std::byte* s, std::byte* d, std::int64_t src_col, std::int64_t dst_row,
                            std::int64_t rows, std::int64_t cols) {
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
          transpose_block<Width, true>(s + c * shape.src_col, d + c * Width, shape.src_col, shape.dst_row, block,
                                       block);
        }
      }
      for (; c < shape.cols; c += block) {
        transpose_block<Width, false>(s + c * shape.src_col, d + c * Width, shape.src_col, shape.dst_row, rows,
                                      std::min(block, shape.cols - c));
      }
    }
  }
}

// The byte form: sixteen rows of 16 bytes in each 128-bit lane, four rounds of unpacks (8-, 16-,
// 32- and 64-bit pairs), each pairing neighbours and putting the low halves first. Four perfect
// shuffles reverse the column index's bits: v[k] ends up holding column reversed_column[k].
constexpr std::array<int, 16> reversed_column = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};

// Unpacks of `Bits`-bit pairs in each 128-bit lane: the low (or high) halves of a and b, interleaved.
template <int Bits>
inline __m256i unpack(__m256i a, __m256i b, bool high) {
  if constexpr (Bits == 8)
    return high ? _mm256_unpackhi_epi8(a, b) : _mm256_unpacklo_epi8(a, b);
  else if constexpr (Bits == 16)
    return high ? _mm256_unpackhi_epi16(a, b) : _mm256_unpacklo_epi16(a, b);
  else if constexpr (Bits == 32)
    return high ? _mm256_unpackhi_epi32(a, b) : _mm256_unpacklo_epi32(a, b);
  else
    return high ? _mm256_unpackhi_epi64(a, b) : _mm256_unpacklo_epi64(a, b);
}

template <int Bits>
inline void perfect_shuffle(__m256i (&v)[16]) {
  __m256i halves[16];
  for (int i = 0; i < 8; ++i) {
    halves[i] = unpack<Bits>(v[2 * i], v[2 * i + 1], false);
    halves[i + 8] = unpack<Bits>(v[2 * i], v[2 * i + 1], true);
  }
  std::copy(std::begin(halves), std::end(halves), std::begin(v));
}

inline void transpose_16x16_lanes(__m256i (&v)[16]) {
  perfect_shuffle<8>(v);
  perfect_shuffle<16>(v);
  perfect_shuffle<32>(v);
  perfect_shuffle<64>(v);
}

// One block of a B-way shuffle (see transposing_run): `ways` ways from the block's first on,
// `positions` positions from r on, of which the first `rows` exist. Arguments: the far side at
// position r (the offsets are the block's, relative to it) and the near side at position r and
// the block's first way; `stride` = B * Width bytes, one position of the near side.
template <std::int64_t Width>
struct shuffle_block {
  static constexpr std::int64_t ways = block;
  static constexpr std::int64_t positions = block;
  using lanes = lanes_of<Width>;

  static void interleave(const std::byte* far, const std::int64_t* offsets, std::byte* near, std::int64_t stride,
                         std::int64_t rows) {
    const auto row_mask = static_cast<__mmask8>((1U << rows) - 1);
    typename lanes::vector v[block];
    for (int i = 0; i < block; ++i)
      v[i] = rows == block ? lanes::load(far + offsets[i]) : lanes::load(far + offsets[i], row_mask);
    transpose_8x8(v);
    for (int i = 0; i < rows; ++i) lanes::store(near + i * stride, v[i]);
  }

  static void deinterleave(const std::byte* near, std::byte* far, const std::int64_t* offsets, std::int64_t stride,
                           std::int64_t rows) {
    const auto row_mask = static_cast<__mmask8>((1U << rows) - 1);
    typename lanes::vector v[block];
    for (int i = 0; i < block; ++i) v[i] = i < rows ? lanes::load(near + i * stride) : lanes::zero();
    transpose_8x8(v);
    for (int i = 0; i < block; ++i) {
      if (rows == block)
        lanes::store(far + offsets[i], v[i]);
      else
        lanes::store(far + offsets[i], row_mask, v[i]);
    }
  }
};

// Bytes: 16 ways by 32 positions, the far side's 32-byte rows split into two 16 x 16 transposes
// in the 128-bit lanes. An 8 x 8 block of bytes would move 8-byte pieces; a 32 x 32 one would
// need 32 registers for its rows alone.
template <>
struct shuffle_block<1> {
  static constexpr std::int64_t ways = 16;
  static constexpr std::int64_t positions = 32;
  static constexpr std::int64_t lane = 16;

  static __mmask32 position_mask(std::int64_t rows) { return rows == positions ? ~__mmask32{0} : (1U << rows) - 1; }

  // Lane h of v[k] holds positions h * 16 + reversed_column[k] of the 16 ways.
  static void interleave(const std::byte* far, const std::int64_t* offsets, std::byte* near, std::int64_t stride,
                         std::int64_t rows) {
    const __mmask32 mask = position_mask(rows);
    __m256i v[ways];
    for (int i = 0; i < ways; ++i) v[i] = _mm256_maskz_loadu_epi8(mask, far + offsets[i]);
    transpose_16x16_lanes(v);
    for (int k = 0; k < ways; ++k) {
      const int c = reversed_column[k];
      if (c < rows) _mm_storeu_si128(reinterpret_cast<__m128i*>(near + c * stride), _mm256_castsi256_si128(v[k]));
      if (lane + c < rows) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(near + (lane + c) * stride), _mm256_extracti128_si256(v[k], 1));
      }
    }
  }

  // Lane h of v[i] holds the 16 ways at position h * 16 + i; v[k] then holds way
  // reversed_column[k]'s 32 positions.
  static void deinterleave(const std::byte* near, std::byte* far, const std::int64_t* offsets, std::int64_t stride,
                           std::int64_t rows) {
    const __mmask32 mask = position_mask(rows);
    __m256i v[ways];
    for (int i = 0; i < ways; ++i) {
      const __m128i low = i < rows ? load(near + i * stride) : _mm_setzero_si128();
      const __m128i high = lane + i < rows ? load(near + (lane + i) * stride) : _mm_setzero_si128();
      v[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(low), high, 1);
    }
    transpose_16x16_lanes(v);
    for (int k = 0; k < ways; ++k) _mm256_mask_storeu_epi8(far + offsets[reversed_column[k]], mask, v[k]);
  }

  static __m128i load(const std::byte* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
};

// B-way shuffles of B = 32 or 64 ways (see shuffle_fn) as block transposes: the ways are the
// columns, positions along the run the rows. The shuffle networks of that many ways keep 64
// vectors in flight and spill.
//
// Interleave: each block loads its positions of its ways' source rows and stores them into the
// destination; de-interleave: the reverse. A run's last positions are masked. The run goes in
// pieces of about 16 KiB of contiguous side, and each piece way-block by way-block: one block's
// rows on the side the offsets address are in flight at once, not B (offsets 2 KiB apart put
// all B in one or two L1 sets).
// The bytes of contiguous side a piece of the run covers (see transposing_run), and of the
// buffer a streaming call stages it in.
constexpr std::int64_t piece_bytes = 16384;

template <std::int64_t Width, int B>
struct transposing_geometry {
  using shape = shuffle_block<Width>;
  static_assert(B % shape::ways == 0);
  static constexpr std::int64_t stride = B * Width;  // one position of the near side
  static constexpr std::int64_t piece =
      std::max<std::int64_t>(shape::positions, piece_bytes / stride / shape::positions * shape::positions);
  static_assert(piece * stride <= piece_bytes);
};

// `count` positions from src and dst on (see shuffle_fn), way-block by way-block.
template <std::int64_t Width, bool Interleave, int B>
void transposing_piece(const std::byte* src, std::byte* dst, const std::int64_t* offsets, std::int64_t count) {
  using geometry = transposing_geometry<Width, B>;
  using shape = typename geometry::shape;
  for (int j = 0; j < B; j += shape::ways) {
    for (std::int64_t r = 0; r < count; r += shape::positions) {
      const std::int64_t rows = std::min(shape::positions, count - r);
      if constexpr (Interleave) {
        shape::interleave(src + r * Width, offsets + j, dst + r * geometry::stride + j * Width, geometry::stride, rows);
      } else {
        shape::deinterleave(src + r * geometry::stride + j * Width, dst + r * Width, offsets + j, geometry::stride,
                            rows);
      }
    }
  }
}

// B-way shuffles of B = 32 or 64 ways (see shuffle_fn) as block transposes: the ways are the
// columns, positions along the run the rows. The shuffle networks of that many ways keep 64
// vectors in flight and spill.
//
// Interleave: each block loads its positions of its ways' source rows and stores them into the
// destination; de-interleave: the reverse. A run's last positions are masked. The run goes in
// pieces of about 16 KiB of contiguous side, and each piece way-block by way-block: one block's
// rows on the side the offsets address are in flight at once, not B (offsets 2 KiB apart put
// all B in one or two L1 sets).
//
// `staging` (interleaves whose output is larger than the cache, see shuffle_repeat::streaming):
// each piece, 16 KiB of contiguous destination, is transposed into that L1 buffer and copied out
// with streaming stores. The blocks themselves write partial lines (16 to 64 bytes of a
// destination row per way-block), which streaming stores would send to memory one at a time.
template <std::int64_t Width, bool Interleave, int B>
void transposing_run(const std::byte* src, std::byte* dst, std::int64_t length, const std::int64_t* offsets,
                     std::byte* staging) {
  using geometry = transposing_geometry<Width, B>;
  constexpr std::int64_t stride = geometry::stride;
  for (std::int64_t start = 0; start < length; start += geometry::piece) {
    const std::int64_t count = std::min(geometry::piece, length - start);
    if constexpr (Interleave) {
      std::byte* near = dst + start * stride;
      transposing_piece<Width, true, B>(src + start * Width, staging != nullptr ? staging : near, offsets, count);
      if (staging != nullptr) stream_copy(near, staging, static_cast<std::size_t>(count * stride));
    } else {
      transposing_piece<Width, false, B>(src + start * stride, dst + start * Width, offsets, count);
    }
  }
}

template <std::int64_t Width, bool Interleave, int B>
void transposing_shuffle(const std::byte* src, std::byte* dst, std::int64_t length, const std::int64_t* offsets,
                         const shuffle_repeat& repeat) {
  alignas(64) std::byte staging[piece_bytes];
  std::byte* const staged = Interleave && repeat.streaming ? staging : nullptr;
  for (std::int64_t o = 0; o < repeat.outer.extent; ++o) {
    for (std::int64_t i = 0; i < repeat.inner.extent; ++i) {
      transposing_run<Width, Interleave, B>(src + o * repeat.outer.src_stride + i * repeat.inner.src_stride,
                                            dst + o * repeat.outer.dst_stride + i * repeat.inner.dst_stride, length,
                                            offsets, staged);
    }
  }
  if (staged != nullptr) stream_fence();
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
    case 1: return interleave ? transposing_for_ways<1, true>(ways) : transposing_for_ways<1, false>(ways);
    case 2: return interleave ? transposing_for_ways<2, true>(ways) : transposing_for_ways<2, false>(ways);
    case 4: return interleave ? transposing_for_ways<4, true>(ways) : transposing_for_ways<4, false>(ways);
    case 8: return interleave ? transposing_for_ways<8, true>(ways) : transposing_for_ways<8, false>(ways);
    default: return nullptr;
  }
}
}  // namespace regrid::kernels
