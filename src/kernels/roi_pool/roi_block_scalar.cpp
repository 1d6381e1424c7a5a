// The ROI block kernel built for the scalar level (flags set in CMakeLists.txt).
#define REGRID_ROI_BLOCK_NAME roi_block_scalar
#define REGRID_ROI_TRANSPOSE_NAME roi_transpose_scalar
#define REGRID_ROI_VECTOR_BYTES 16
#include "kernels/roi_pool/roi_block.inc"
