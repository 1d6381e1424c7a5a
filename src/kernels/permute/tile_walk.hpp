// The loop every tile kernel shares: one run of `width` bytes per (row, column) of a tile.
// Included by each per-ISA kernel file; `static` gives every file its own copy, compiled with
// that file's flags (a shared inline template would let the linker pick one ISA's code for all).
#pragma once

#include <cstddef>
#include <cstdint>

namespace regrid::kernels {

template <class CopyRun>
static inline void for_each_tile_run(const std::byte* src, std::byte* dst, std::int64_t rows, std::int64_t cols,
                                     std::int64_t src_row, std::int64_t src_col, std::int64_t dst_row,
                                     std::int64_t dst_col, CopyRun copy_run) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::byte* s = src + r * src_row;
    std::byte* d = dst + r * dst_row;
    for (std::int64_t c = 0; c < cols; ++c) {
      copy_run(s, d);
      s += src_col;
      d += dst_col;
    }
  }
}

}  // namespace regrid::kernels
