// The ROI block kernel built for the avx512 level (flags set in CMakeLists.txt).
#define REGRID_ROI_BLOCK_NAME roi_block_avx512
#define REGRID_ROI_TRANSPOSE_NAME roi_transpose_avx512
#define REGRID_ROI_VECTOR_BYTES 64
#include "kernels/roi_pool/roi_block.inc"
