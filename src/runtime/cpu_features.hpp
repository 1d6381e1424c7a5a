// What regrid knows of the CPU beyond its instruction sets (regrid/runtime.hpp has those).
#pragma once

#include <optional>

namespace regrid::runtime {

/// Whose cores these are, as far as kernel choices go: choices whose speed was measured to differ
/// between cores with the same instruction sets key on it (see plan_permute).
///   intel:    Intel's cores;
///   amd_zen4: AMD's before family 1Ah (Zen 4, the first with AVX-512, and older);
///   amd_zen5: AMD's of family 1Ah and later (Zen 5 on);
///   other:    anything else.
enum class core_kind { intel, amd_zen4, amd_zen5, other };

/// AMD's cores with AVX-512 (Zen 4 and Zen 5), which share the *_on_amd planning rules: measured on
/// a Zen 5 first and held on a Zen 4 (see plan_permute).
[[nodiscard]] constexpr bool takes_amd_rules(core_kind cores) noexcept {
  return cores == core_kind::amd_zen4 || cores == core_kind::amd_zen5;
}

/// The cores kernel choices are made for: this CPU's (from cpuid), unless tests set others.
core_kind planning_core_kind() noexcept;

/// Tests: make kernel choices as for these cores (nullopt: this CPU's own again), so that the
/// rules of each can be checked on one machine.
void plan_for_core_kind_for_testing(std::optional<core_kind> kind) noexcept;

}  // namespace regrid::runtime
