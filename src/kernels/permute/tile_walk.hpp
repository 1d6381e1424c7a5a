// The loop every tile kernel shares: one run of `width` bytes per (row, column) of a tile.
// Included by each per-ISA kernel file; `static` gives every file its own copy, compiled with
// that file's flags (a shared inline template would let the linker pick one ISA's code for all).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/permute/permute.hpp"

namespace regrid::kernels {

template <class CopyRun>
static inline void for_each_tile_run(const std::byte* src, std::byte* dst, const tile_shape& shape, CopyRun copy_run) {
  // A local copy: the stores through std::byte* could alias `shape`, which would make the
  // compiler reload every extent and stride after each run.
  const tile_shape t = shape;
  for (std::int64_t p = 0; p < t.planes; ++p) {
    for (std::int64_t r = 0; r < t.rows; ++r) {
      const std::byte* s = src + p * t.src_plane + r * t.src_row;
      std::byte* d = dst + p * t.dst_plane + r * t.dst_row;
      for (std::int64_t c = 0; c < t.cols; ++c) {
        copy_run(s, d);
        s += t.src_col;
        d += t.dst_col;
      }
    }
  }
}

}  // namespace regrid::kernels
