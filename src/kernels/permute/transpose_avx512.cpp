// The block-transposing shuffles and the 8-byte tile transpose built for the avx512 level (flags
// set in CMakeLists.txt).
#define REGRID_TRANSPOSE_ISA_NAME transposing_shuffle_kernel_avx512
#define REGRID_TRANSPOSE_VECTOR_BYTES 64
#include "kernels/permute/transpose.inc"
