// The interleave kernels built for the scalar level (flags set in CMakeLists.txt).
#define REGRID_PERMUTE_ISA_NAME shuffle_kernel_scalar
#define REGRID_PERMUTE_VECTOR_BYTES 16
#include "kernels/permute/interleave.inc"
