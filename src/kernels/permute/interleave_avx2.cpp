// The interleave kernels built for the avx2 level (flags set in CMakeLists.txt).
#define REGRID_PERMUTE_ISA_NAME shuffle_kernel_avx2
#define REGRID_PERMUTE_VECTOR_BYTES 32
#include "kernels/permute/interleave.inc"
