// Overflow-checked 64-bit arithmetic and error helpers shared by the ops.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "regrid/status.hpp"

namespace regrid::detail {

[[noreturn]] inline void fail(status code, const std::string& message) { throw error(code, message); }

[[noreturn]] inline void fail_invalid(const std::string& message) { fail(status::invalid_argument, message); }

/// a * b, or throws status::overflow with "<op>: <what> a * b overflows 64-bit integers".
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view op, std::string_view what) {
  std::int64_t result = 0;
  if (__builtin_mul_overflow(a, b, &result)) {
    fail(status::overflow, std::string(op) + ": " + std::string(what) + " " + std::to_string(a) + " * " +
                               std::to_string(b) + " overflows 64-bit integers");
  }
  return result;
}

/// b^k with overflow checking.
inline std::int64_t checked_pow(std::int64_t base, int exponent, std::string_view op, std::string_view what) {
  std::int64_t result = 1;
  for (int i = 0; i < exponent; ++i) result = checked_mul(result, base, op, what);
  return result;
}

/// Start of part `index` when [0, count) is split into `parts` near-equal contiguous ranges
/// (the first count % parts ranges are one longer). Never overflows.
constexpr std::int64_t split_point(std::int64_t count, std::int64_t parts, std::int64_t index) noexcept {
  const std::int64_t base = count / parts;
  const std::int64_t extra = count % parts;
  return base * index + (index < extra ? index : extra);
}

/// ASCII case-insensitive equality.
inline bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace regrid::detail
