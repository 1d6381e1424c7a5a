// Scalar tile kernels keyed by element width. A fixed-size memcpy compiles to plain
// loads and stores, so no element costs a function call.
#include <cstring>

#include "kernels/permute/permute.hpp"
#include "kernels/permute/tile_walk.hpp"

namespace regrid::kernels {
namespace {

template <std::size_t Width>
void copy_fixed(const std::byte* src, std::byte* dst, const tile_shape& shape, std::size_t /*width*/) {
  for_each_tile_run(src, dst, shape, [](const std::byte* s, std::byte* d) { std::memcpy(d, s, Width); });
}

// Widths without a specialization move in Unit-sized pieces (Unit divides width).
template <std::size_t Unit>
void copy_units(const std::byte* src, std::byte* dst, const tile_shape& shape, std::size_t width) {
  for_each_tile_run(src, dst, shape, [width](const std::byte* s, std::byte* d) {
    for (std::size_t offset = 0; offset < width; offset += Unit) std::memcpy(d + offset, s + offset, Unit);
  });
}

// Long runs: one libc memcpy per run is already at memory speed.
void copy_long_runs(const std::byte* src, std::byte* dst, const tile_shape& shape, std::size_t width) {
  for_each_tile_run(src, dst, shape, [width](const std::byte* s, std::byte* d) { std::memcpy(d, s, width); });
}

}  // namespace

tile_kernel select_tile_kernel(std::size_t width) noexcept {
  switch (width) {
    case 1: return {copy_fixed<1>, "copy_x8_scalar"};
    case 2: return {copy_fixed<2>, "copy_x16_scalar"};
    case 4: return {copy_fixed<4>, "copy_x32_scalar"};
    case 8: return {copy_fixed<8>, "copy_x64_scalar"};
    case 16: return {copy_fixed<16>, "copy_x128_scalar"};
    case 32: return {copy_fixed<32>, "copy_x256_scalar"};
    case 64: return {copy_fixed<64>, "copy_x512_scalar"};
    default: break;
  }
  if (width >= 256) return {copy_long_runs, "copy_runs_memcpy"};
  if (width % 8 == 0) return {copy_units<8>, "copy_runs_u64_scalar"};
  if (width % 4 == 0) return {copy_units<4>, "copy_runs_u32_scalar"};
  if (width % 2 == 0) return {copy_units<2>, "copy_runs_u16_scalar"};
  return {copy_units<1>, "copy_runs_u8_scalar"};
}

}  // namespace regrid::kernels
