// What regrid knows of the CPU beyond its instruction sets (regrid/runtime.hpp has those).
#pragma once

#include <optional>

namespace regrid::runtime {

/// Whose cores these are. Kernel choices whose speed was measured to differ between vendors with
/// the same instruction sets key on it (see plan_permute).
enum class cpu_vendor { intel, amd, other };

/// The vendor kernel choices are made for: this CPU's (from cpuid), unless tests set another.
cpu_vendor planning_vendor() noexcept;

/// Tests: make kernel choices as for this vendor's CPUs (nullopt: this CPU's own again), so that
/// the rules of either vendor can be checked on one machine.
void plan_for_vendor_for_testing(std::optional<cpu_vendor> vendor) noexcept;

}  // namespace regrid::runtime
