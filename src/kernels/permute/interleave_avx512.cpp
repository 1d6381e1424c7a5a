// The interleave kernels built for the avx512 level (flags set in CMakeLists.txt).
#define REGRID_PERMUTE_ISA_NAME shuffle_kernel_avx512
#define REGRID_PERMUTE_VECTOR_BYTES 64
#include "kernels/permute/interleave.inc"
