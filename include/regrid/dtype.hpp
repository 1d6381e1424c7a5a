// Element types. Data movement is exact for every type because it copies bytes;
// the type matters for its width, for rule checks and for file/array interop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace regrid {

enum class dtype : std::uint8_t {
  boolean,
  int8,
  int16,
  int32,
  int64,
  uint8,
  uint16,
  uint32,
  uint64,
  float16,
  bfloat16,
  float32,
  float64,
  complex64,
  complex128,
  quint8,  ///< asymmetric quantized uint8 (NNAPI TENSOR_QUANT8_ASYMM, TF quint8)
  qint8,   ///< asymmetric quantized int8 (NNAPI TENSOR_QUANT8_ASYMM_SIGNED, TF qint8)
};

/// Every dtype, in declaration order.
inline constexpr dtype all_dtypes[] = {
    dtype::boolean, dtype::int8,      dtype::int16,      dtype::int32,   dtype::int64,    dtype::uint8,
    dtype::uint16,  dtype::uint32,    dtype::uint64,     dtype::float16, dtype::bfloat16, dtype::float32,
    dtype::float64, dtype::complex64, dtype::complex128, dtype::quint8,  dtype::qint8};

/// Size of one element in bytes.
std::size_t size_of(dtype type) noexcept;

/// Canonical lower-case name: "bool", "int8", ..., "bfloat16", "complex64", "quint8".
std::string_view to_string(dtype type) noexcept;

/// Parses a name case-insensitively; also accepts the aliases "float"/"f32", "half"/"f16",
/// "double"/"f64", "bf16", "i8".."u64". Returns nullopt for an unknown name.
std::optional<dtype> parse_dtype(std::string_view name) noexcept;

/// True for quint8 and qint8, whose tensors carry a scale and zero point.
constexpr bool is_quantized(dtype type) noexcept { return type == dtype::quint8 || type == dtype::qint8; }

/// True for float16, bfloat16, float32 and float64.
constexpr bool is_floating_point(dtype type) noexcept {
  return type == dtype::float16 || type == dtype::bfloat16 || type == dtype::float32 || type == dtype::float64;
}

/// Affine quantization: real = scale * (q - zero_point). regrid's data-movement
/// operators pass it through unchanged.
struct quantization {
  float scale = 1.0f;
  std::int32_t zero_point = 0;
  friend bool operator==(const quantization&, const quantization&) = default;
};

}  // namespace regrid
