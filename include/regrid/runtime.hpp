// Runtime controls: threading and the instruction sets kernels may use.
#pragma once

#include <optional>
#include <string_view>

namespace regrid {

/// Threads used by regrid's operators. Starts as REGRID_NUM_THREADS from the
/// environment, else the number of hardware threads.
int num_threads() noexcept;

/// Sets the number of threads (>= 1); 1 runs everything on the calling thread.
void set_num_threads(int count);

/// Instruction-set levels of the x86-64 kernels, in increasing order.
/// avx2 = x86-64-v3 (AVX2, BMI2, F16C); avx512 = x86-64-v4 (AVX-512 F/BW/DQ/VL).
enum class isa { scalar, avx2, avx512 };

std::string_view to_string(isa value) noexcept;
std::optional<isa> parse_isa(std::string_view text) noexcept;

/// The best ISA this CPU supports.
isa detected_isa() noexcept;

/// The ISA kernels use now: min(detected_isa(), cap). The cap starts as
/// REGRID_MAX_ISA=scalar|avx2|avx512 from the environment, else unlimited.
isa active_isa() noexcept;

/// Caps kernel selection (tests use it to run every kernel the host has).
void set_max_isa(isa cap) noexcept;

}  // namespace regrid
