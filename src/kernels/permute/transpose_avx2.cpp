// The block-transposing shuffles built for the avx2 level (flags set in CMakeLists.txt).
#define REGRID_TRANSPOSE_ISA_NAME transposing_shuffle_kernel_avx2
#define REGRID_TRANSPOSE_VECTOR_BYTES 32
#include "kernels/permute/transpose.inc"
