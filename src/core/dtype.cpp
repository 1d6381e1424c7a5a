#include "regrid/dtype.hpp"

#include <array>
#include <utility>

#include "core/checked.hpp"

namespace regrid {

namespace {
struct dtype_info {
  dtype type;
  std::size_t size;
  std::string_view name;
};
constexpr std::array<dtype_info, 17> infos = {{
    {dtype::boolean, 1, "bool"},
    {dtype::int8, 1, "int8"},
    {dtype::int16, 2, "int16"},
    {dtype::int32, 4, "int32"},
    {dtype::int64, 8, "int64"},
    {dtype::uint8, 1, "uint8"},
    {dtype::uint16, 2, "uint16"},
    {dtype::uint32, 4, "uint32"},
    {dtype::uint64, 8, "uint64"},
    {dtype::float16, 2, "float16"},
    {dtype::bfloat16, 2, "bfloat16"},
    {dtype::float32, 4, "float32"},
    {dtype::float64, 8, "float64"},
    {dtype::complex64, 8, "complex64"},
    {dtype::complex128, 16, "complex128"},
    {dtype::quint8, 1, "quint8"},
    {dtype::qint8, 1, "qint8"},
}};

constexpr std::array<std::pair<std::string_view, dtype>, 12> aliases = {{
    {"boolean", dtype::boolean},
    {"float", dtype::float32},
    {"f32", dtype::float32},
    {"half", dtype::float16},
    {"f16", dtype::float16},
    {"double", dtype::float64},
    {"f64", dtype::float64},
    {"bf16", dtype::bfloat16},
    {"i8", dtype::int8},
    {"u8", dtype::uint8},
    {"i32", dtype::int32},
    {"u16", dtype::uint16},
}};
}  // namespace

std::size_t size_of(dtype type) noexcept { return infos[static_cast<std::size_t>(type)].size; }

std::string_view to_string(dtype type) noexcept { return infos[static_cast<std::size_t>(type)].name; }

std::optional<dtype> parse_dtype(std::string_view name) noexcept {
  for (const auto& info : infos) {
    if (detail::iequals(info.name, name)) return info.type;
  }
  for (const auto& [alias, type] : aliases) {
    if (detail::iequals(alias, name)) return type;
  }
  return std::nullopt;
}

}  // namespace regrid
