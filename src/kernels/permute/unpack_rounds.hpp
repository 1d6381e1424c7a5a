// The rounds of unpacks that register transposes are made of, shared by the block transposes
// (transpose.inc) and the AVX2 de-interleaves that run as transposes (interleave.inc). `low` and
// `high` are one unpack width's two halves (vpunpckl* / vpunpckh*, or lane shuffles), so each
// round is written once for every element size and vector width. `static`, as in tile_walk.hpp:
// each per-ISA file compiles its own copy with its own flags.
#pragma once

namespace regrid::kernels {

// The first round: neighbours' low and high elements interleaved (v[i] with v[i + 1]).
template <int Count, class Vector, class Low, class High>
static inline void interleave_neighbours(const Vector (&v)[Count], Vector (&pairs)[Count], Low low, High high) {
  for (int i = 0; i < Count; i += 2) {
    pairs[i] = low(v[i], v[i + 1]);
    pairs[i + 1] = high(v[i], v[i + 1]);
  }
}

// The second round: the first pair of each four with the third, the second with the fourth.
template <int Count, class Vector, class Low, class High>
static inline void interleave_pairs(const Vector (&pairs)[Count], Vector (&quads)[Count], Low low, High high) {
  for (int h = 0; h < Count; h += 4) {
    quads[h] = low(pairs[h], pairs[h + 2]);
    quads[h + 1] = high(pairs[h], pairs[h + 2]);
    quads[h + 2] = low(pairs[h + 1], pairs[h + 3]);
    quads[h + 3] = high(pairs[h + 1], pairs[h + 3]);
  }
}

// The third round of an 8 x 8 transpose whose last unpack stays within each vector: quads j and
// j + 4 (the two halves of the block) into outputs 2j and 2j + 1.
template <class Vector, class Low, class High>
static inline void interleave_halves(const Vector (&quads)[8], Vector (&out)[8], Low low, High high) {
  for (int j = 0; j < 4; ++j) {
    out[2 * j] = low(quads[j], quads[j + 4]);
    out[2 * j + 1] = high(quads[j], quads[j + 4]);
  }
}

}  // namespace regrid::kernels
