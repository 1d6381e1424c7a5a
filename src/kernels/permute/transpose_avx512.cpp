// Transposes of 8-byte elements, built for the avx512 level (flags set in CMakeLists.txt): the
// channels-last CRD and channels-first DCR tensors of 64 channels of 8 bytes, whose b^K block
// offsets and channels swap places, are 2-D transposes with no contiguous run on either side.
// Moved an element at a time they ran at 0.04-0.2 of memcpy.
//
//   for p < planes, r < rows, c < cols:
//     dst[p * dst_plane + r * dst_row + c * 8] = src[p * src_plane + r * 8 + c * src_col]
//
// 8 x 8 blocks: eight 64-byte loads along the source rows, a transpose in registers (unpacks,
// then two rounds of 128-bit lane shuffles), eight 64-byte stores along the destination rows.
// Blocks at the tile's edges load and store under element masks.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/permute/permute.hpp"

namespace regrid::kernels {
namespace {

constexpr std::int64_t element_bytes = 8;
constexpr std::int64_t block = 8;

// The zero-masked forms under an all-ones mask: GCC 12 warns about the plain ones' undefined
// pass-through operand.
constexpr __mmask8 all = 0xFF;
inline __m512i low_halves(__m512i a, __m512i b) { return _mm512_maskz_unpacklo_epi64(all, a, b); }
inline __m512i high_halves(__m512i a, __m512i b) { return _mm512_maskz_unpackhi_epi64(all, a, b); }
template <int Lanes>
inline __m512i lanes(__m512i a, __m512i b) { return _mm512_maskz_shuffle_i64x2(all, a, b, Lanes); }

inline void transpose_8x8(__m512i (&v)[block]) {
  __m512i pairs[block];
  for (int i = 0; i < block; i += 2) {
    pairs[i] = low_halves(v[i], v[i + 1]);
    pairs[i + 1] = high_halves(v[i], v[i + 1]);
  }
  // Lanes 0 and 2 of each, or 1 and 3 (imm 0x88, 0xDD), of two vectors.
  __m512i quads[block];
  for (int i = 0; i < block; i += 4) {
    quads[i] = lanes<0x88>(pairs[i], pairs[i + 2]);
    quads[i + 1] = lanes<0xDD>(pairs[i], pairs[i + 2]);
    quads[i + 2] = lanes<0x88>(pairs[i + 1], pairs[i + 3]);
    quads[i + 3] = lanes<0xDD>(pairs[i + 1], pairs[i + 3]);
  }
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

// One block of `rows` x `cols` elements (each at most 8) from s (columns at src_col) to d (rows
// at dst_row).
template <bool Whole>
inline void transpose_block(const std::byte* s, std::byte* d, std::int64_t src_col, std::int64_t dst_row, std::int64_t rows,
                            std::int64_t cols) {
  __m512i v[block];
  if constexpr (Whole) {
    for (int i = 0; i < block; ++i) v[i] = _mm512_loadu_si512(s + i * src_col);
    transpose_8x8(v);
    for (int i = 0; i < block; ++i) _mm512_storeu_si512(d + i * dst_row, v[i]);
  } else {
    const auto row_mask = static_cast<__mmask8>((1U << rows) - 1);
    const auto col_mask = static_cast<__mmask8>((1U << cols) - 1);
    for (int i = 0; i < block; ++i) {
      v[i] = i < cols ? _mm512_maskz_loadu_epi64(row_mask, s + i * src_col) : _mm512_setzero_si512();
    }
    transpose_8x8(v);
    for (int i = 0; i < rows; ++i) _mm512_mask_storeu_epi64(d + i * dst_row, col_mask, v[i]);
  }
}

void transpose_x64(const std::byte* src, std::byte* dst, const tile_shape& shape, std::size_t /*width*/) {
  const std::int64_t whole_rows = shape.rows / block * block;
  const std::int64_t whole_cols = shape.cols / block * block;
  for (std::int64_t p = 0; p < shape.planes; ++p) {
    const std::byte* plane_src = src + p * shape.src_plane;
    std::byte* plane_dst = dst + p * shape.dst_plane;
    for (std::int64_t r = 0; r < shape.rows; r += block) {
      const std::int64_t rows = std::min(block, shape.rows - r);
      const std::byte* s = plane_src + r * element_bytes;
      std::byte* d = plane_dst + r * shape.dst_row;
      std::int64_t c = 0;
      if (r < whole_rows) {
        for (; c < whole_cols; c += block) {
          transpose_block<true>(s + c * shape.src_col, d + c * element_bytes, shape.src_col, shape.dst_row, block, block);
        }
      }
      for (; c < shape.cols; c += block) {
        transpose_block<false>(s + c * shape.src_col, d + c * element_bytes, shape.src_col, shape.dst_row, rows,
                               std::min(block, shape.cols - c));
      }
    }
  }
}

}  // namespace

tile_kernel transpose_tile_kernel_avx512() noexcept { return {transpose_x64, "transpose_x64_avx512"}; }

}  // namespace regrid::kernels
