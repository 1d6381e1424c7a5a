// The byte interleave kernels built for the avx512vbmi level (flags set in CMakeLists.txt): with
// AVX512-VBMI, GCC lowers the 64-byte two-source byte shuffles to one vpermt2b each, where
// x86-64-v4 alone needs several element moves. Wider elements gain nothing from VBMI, so only
// bytes are built here.
#define REGRID_PERMUTE_ISA_NAME shuffle_kernel_avx512vbmi
#define REGRID_PERMUTE_VECTOR_BYTES 64
#define REGRID_PERMUTE_BYTES_ONLY 1
#include "kernels/permute/interleave.inc"
