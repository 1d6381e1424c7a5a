#include "runtime/cpu_features.hpp"

#include <atomic>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "core/checked.hpp"
#include "regrid/runtime.hpp"

namespace regrid {
namespace {

isa detect() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl")) {
    return __builtin_cpu_supports("avx512vbmi") ? isa::avx512vbmi : isa::avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("f16c")) {
    return isa::avx2;
  }
#endif
  return isa::scalar;
}

std::atomic<int>& cap_setting() {
  static std::atomic<int> cap{[] {
    if (const char* env = std::getenv("REGRID_MAX_ISA")) {
      if (auto parsed = parse_isa(env)) return static_cast<int>(*parsed);
    }
    return static_cast<int>(isa::avx512vbmi);
  }()};
  return cap;
}

}  // namespace

std::string_view to_string(isa value) noexcept {
  switch (value) {
    case isa::scalar: return "scalar";
    case isa::avx2: return "avx2";
    case isa::avx512: return "avx512";
    case isa::avx512vbmi: return "avx512vbmi";
  }
  return "?";
}

std::optional<isa> parse_isa(std::string_view text) noexcept {
  for (isa value : {isa::scalar, isa::avx2, isa::avx512, isa::avx512vbmi}) {
    if (detail::iequals(to_string(value), text)) return value;
  }
  return std::nullopt;
}

isa detected_isa() noexcept {
  static const isa detected = detect();
  return detected;
}

isa active_isa() noexcept {
  const int cap = cap_setting().load(std::memory_order_relaxed);
  const auto best = static_cast<int>(detected_isa());
  return static_cast<isa>(cap < best ? cap : best);
}

void set_max_isa(isa cap) noexcept { cap_setting().store(static_cast<int>(cap), std::memory_order_relaxed); }

namespace runtime {
namespace {

core_kind detect_core_kind() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_is("intel")) return core_kind::intel;
  if (__builtin_cpu_is("amd")) {
    // The family as cpuid leaf 1 gives it: base family, plus the extended family where the base
    // is 0Fh (GCC 12's __builtin_cpu_is has no name for family 1Ah).
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return core_kind::amd_zen4;
    unsigned family = (eax >> 8) & 0xfu;
    if (family == 0xfu) family += (eax >> 20) & 0xffu;
    return family >= 0x1au ? core_kind::amd_zen5 : core_kind::amd_zen4;
  }
#endif
  return core_kind::other;
}

std::atomic<std::optional<core_kind>> core_kind_for_testing{std::nullopt};

}  // namespace

core_kind planning_core_kind() noexcept {
  static const core_kind detected = detect_core_kind();
  return core_kind_for_testing.load(std::memory_order_relaxed).value_or(detected);
}

void plan_for_core_kind_for_testing(std::optional<core_kind> kind) noexcept {
  core_kind_for_testing.store(kind, std::memory_order_relaxed);
}

}  // namespace runtime
}  // namespace regrid
