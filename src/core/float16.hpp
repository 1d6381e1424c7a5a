// Exact conversions between float and the 16-bit float formats (IEEE binary16 and
// bfloat16), with round-to-nearest-even, in portable code; and the value of a stored element of
// any floating-point dtype.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "regrid/dtype.hpp"

namespace regrid::detail {

inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000U) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1FU;
  std::uint32_t mantissa = h & 0x3FFU;
  std::uint32_t bits = 0;
  if (exponent == 0x1F) {
    bits = sign | 0x7F800000U | (mantissa << 13);  // inf / NaN (payload kept)
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {  // subnormal: normalize
    int shift = 0;
    while ((mantissa & 0x400U) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | (static_cast<std::uint32_t>(113 - shift) << 23) | ((mantissa & 0x3FFU) << 13);
  } else {
    bits = sign;
  }
  return std::bit_cast<float>(bits);
}

inline std::uint16_t float_to_half(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000U);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFU;
  if (magnitude >= 0x7F800000U) {  // inf, or NaN keeping its top payload bits (never becoming inf)
    std::uint32_t payload = (magnitude >> 13) & 0x3FFU;
    if (magnitude > 0x7F800000U && payload == 0) payload = 0x200U;
    return static_cast<std::uint16_t>(sign | 0x7C00U | payload);
  }
  if (magnitude >= 0x477FF000U) return static_cast<std::uint16_t>(sign | 0x7C00U);  // rounds to inf
  if (magnitude < 0x38800000U) {                                                    // subnormal or zero in half
    if (magnitude < 0x33000000U) return sign;                                       // below half the smallest subnormal
    const std::uint32_t mantissa = (magnitude & 0x7FFFFFU) | 0x800000U;
    const int shift = 126 - static_cast<int>(magnitude >> 23);  // 14..24
    std::uint32_t result = mantissa >> shift;
    const std::uint32_t remainder = mantissa & ((1U << shift) - 1);
    const std::uint32_t halfway = 1U << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (result & 1U) != 0)) ++result;
    return static_cast<std::uint16_t>(sign | result);
  }
  std::uint32_t result = ((magnitude - 0x38000000U) >> 13);
  const std::uint32_t remainder = magnitude & 0x1FFFU;
  if (remainder > 0x1000U || (remainder == 0x1000U && (result & 1U) != 0)) ++result;
  return static_cast<std::uint16_t>(sign | result);
}

inline float bfloat16_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t float_to_bfloat16(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7FFFFFFFU) > 0x7F800000U) {  // NaN: keep the top payload bits, never become inf
    const auto top = static_cast<std::uint16_t>(bits >> 16);
    return (top & 0x7FU) != 0 ? top : static_cast<std::uint16_t>(top | 0x40U);
  }
  const std::uint32_t rounding = 0x7FFFU + ((bits >> 16) & 1U);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

/// The value of the element of `type` stored at `at`, widened exactly to double, for float32,
/// float64, float16 and bfloat16; 0 for any other type.
inline double floating_value(dtype type, const std::byte* at) noexcept {
  switch (type) {
    case dtype::float32: {
      float v;
      std::memcpy(&v, at, 4);
      return v;
    }
    case dtype::float64: {
      double v;
      std::memcpy(&v, at, 8);
      return v;
    }
    case dtype::float16: {
      std::uint16_t v;
      std::memcpy(&v, at, 2);
      return half_to_float(v);
    }
    case dtype::bfloat16: {
      std::uint16_t v;
      std::memcpy(&v, at, 2);
      return bfloat16_to_float(v);
    }
    default: return 0;
  }
}

}  // namespace regrid::detail
