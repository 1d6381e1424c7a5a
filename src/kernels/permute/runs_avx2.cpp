// The run-copy tile kernel built for the avx2 level (flags set in CMakeLists.txt).
#define REGRID_RUNS_ISA_NAME run_tile_kernel_avx2
#define REGRID_RUNS_VECTOR_BYTES 32
#include "kernels/permute/runs.inc"
