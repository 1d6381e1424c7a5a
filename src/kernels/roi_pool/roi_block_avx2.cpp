// The ROI block kernel built for the avx2 level (flags set in CMakeLists.txt).
#define REGRID_ROI_BLOCK_NAME roi_block_avx2
#define REGRID_ROI_TRANSPOSE_NAME roi_transpose_avx2
#define REGRID_ROI_VECTOR_BYTES 32
#include "kernels/roi_pool/roi_block.inc"
