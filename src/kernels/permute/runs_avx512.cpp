// The run-copy tile kernel built for the avx512 level (flags set in CMakeLists.txt).
#define REGRID_RUNS_ISA_NAME run_tile_kernel_avx512
#define REGRID_RUNS_VECTOR_BYTES 64
#include "kernels/permute/runs.inc"
