#include "regrid/tensor.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/checked.hpp"
#include "core/scratch.hpp"

namespace regrid {

std::int64_t element_count(std::span<const std::int64_t> shape) {
  std::int64_t count = 1;
  for (std::int64_t extent : shape) count = detail::checked_mul(count, extent, "tensor", "element count");
  return count;
}

shape_t contiguous_strides(std::span<const std::int64_t> shape) {
  shape_t strides(shape.size());
  std::int64_t stride = 1;
  for (std::size_t k = shape.size(); k-- > 0;) {
    strides[k] = stride;
    // An empty tensor has no addressable element; keep strides finite regardless.
    stride = detail::checked_mul(stride, shape[k] > 0 ? shape[k] : 1, "tensor", "stride");
  }
  return strides;
}

std::string format_shape(std::span<const std::int64_t> shape) {
  std::string text = "[";
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (k != 0) text += ", ";
    text += std::to_string(shape[k]);
  }
  return text + "]";
}

namespace detail {
void validate_view(const void* data, dtype type, std::span<const std::int64_t> shape,
                   std::span<const std::int64_t> strides) {
  if (static_cast<std::size_t>(type) >= std::size(all_dtypes)) {
    fail_invalid("tensor: dtype code " + std::to_string(static_cast<int>(type)) + " is not a regrid dtype");
  }
  if (shape.size() > static_cast<std::size_t>(max_rank)) {
    fail_invalid("tensor: rank " + std::to_string(shape.size()) + " exceeds the maximum rank " +
                 std::to_string(max_rank));
  }
  if (strides.size() != shape.size()) {
    fail_invalid("tensor: " + std::to_string(strides.size()) + " strides were given for rank " +
                 std::to_string(shape.size()));
  }
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] < 0) {
      fail_invalid("tensor: extent " + std::to_string(shape[k]) + " of dimension " + std::to_string(k) + " in shape " +
                   format_shape(shape) + " is negative");
    }
  }
  const std::int64_t count = element_count(shape);
  if (count > 0) {
    if (data == nullptr)
      fail_invalid("tensor: data pointer is null for a non-empty tensor of shape " + format_shape(shape));
    // The byte span must be addressable: every offset has to fit in 64 bits.
    std::int64_t span = 0;
    for (std::size_t k = 0; k < shape.size(); ++k) {
      std::int64_t reach =
          checked_mul(shape[k] - 1, strides[k] < 0 ? -strides[k] : strides[k], "tensor", "stride span");
      if (__builtin_add_overflow(span, reach, &span))
        fail(status::overflow, "tensor: the stride span overflows 64-bit integers");
    }
    checked_mul(span + 1, static_cast<std::int64_t>(size_of(type)), "tensor", "byte span");
  }
}
const std::byte* description_anchor() noexcept {
  alignas(std::max_align_t) static const std::byte anchor[1]{};
  return anchor;
}

byte_extent byte_extent_of(std::size_t width, std::span<const std::int64_t> shape,
                           std::span<const std::int64_t> strides) {
  if (element_count(shape) == 0) return {};
  std::int64_t low = 0;
  std::int64_t high = 0;
  for (std::size_t k = 0; k < shape.size(); ++k) (strides[k] < 0 ? low : high) += (shape[k] - 1) * strides[k];
  const auto size = static_cast<std::int64_t>(width);
  return {low * size, (high + 1) * size, false};
}

bool extents_overlap(const void* a_data, const byte_extent& a, const void* b_data, const byte_extent& b) noexcept {
  if (a.empty || b.empty) return false;
  const auto a_base = reinterpret_cast<std::intptr_t>(a_data);
  const auto b_base = reinterpret_cast<std::intptr_t>(b_data);
  return a_base + a.low < b_base + b.high && b_base + b.low < a_base + a.high;
}

bool memory_overlaps(const void* a_data, std::size_t a_width, std::span<const std::int64_t> a_shape,
                     std::span<const std::int64_t> a_strides, const void* b_data, std::size_t b_width,
                     std::span<const std::int64_t> b_shape, std::span<const std::int64_t> b_strides) {
  return extents_overlap(a_data, byte_extent_of(a_width, a_shape, a_strides), b_data,
                         byte_extent_of(b_width, b_shape, b_strides));
}

}  // namespace detail

void tensor::storage_release::operator()(std::byte* p) const noexcept { detail::release_storage(p, capacity); }

tensor::tensor(dtype type, shape_t shape, std::optional<quantization> quant)
    : tensor(uninitialized, type, std::move(shape), quant) {
  std::memset(storage_.get(), 0, size_bytes());
}

tensor::tensor(uninitialized_t, dtype type, shape_t shape, std::optional<quantization> quant)
    : type_(type), shape_(std::move(shape)), quant_(quant) {
  // Validate the description before sizing the allocation from it.
  detail::validate_view(detail::description_anchor(), type_, shape_, contiguous_strides(shape_));
  numel_ = element_count(shape_);
  const std::int64_t bytes =
      detail::checked_mul(numel_, static_cast<std::int64_t>(size_of(type_)), "tensor", "size in bytes");
  const auto size = static_cast<std::size_t>(bytes);
  storage_ = std::unique_ptr<std::byte[], storage_release>(detail::allocate_storage(size),
                                                           storage_release{detail::storage_capacity(size)});
}

}  // namespace regrid
