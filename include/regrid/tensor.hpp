// Tensor vocabulary: non-owning strided views and an owning tensor.
//
// A view is (data pointer, dtype, shape, strides, optional quantization).
// Strides count elements, not bytes, and may be any int64 (negative and zero
// included), so slices, transposes and broadcasts of NumPy / DLPack arrays are
// described without copying. Leaving the strides empty means "C-contiguous".
//
//   element address of index (i_0, ..., i_{r-1}) = data + size_of(dtype) * sum_k i_k * strides[k]
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "regrid/dtype.hpp"

namespace regrid {

/// Highest tensor rank accepted anywhere in regrid.
inline constexpr int max_rank = 16;

using shape_t = std::vector<std::int64_t>;

/// Product of the extents, checked for 64-bit overflow (throws regrid::error(overflow)).
std::int64_t element_count(std::span<const std::int64_t> shape);

/// C-contiguous strides (in elements) for a shape.
shape_t contiguous_strides(std::span<const std::int64_t> shape);

/// "[1, 2, 3]".
std::string format_shape(std::span<const std::int64_t> shape);

namespace detail {
/// Shared checks of a view's metadata; throws regrid::error naming `what`.
void validate_view(const void* data, dtype type, std::span<const std::int64_t> shape,
                   std::span<const std::int64_t> strides);

/// A valid, never-dereferenced address for views that only describe a shape and strides (for
/// validation and planning before any buffer exists).
const std::byte* description_anchor() noexcept;

/// The bytes a view's elements cover, [low, high) from its data pointer; `empty` when it has none.
struct byte_extent {
  std::int64_t low = 0;
  std::int64_t high = 0;
  bool empty = true;
};
byte_extent byte_extent_of(std::size_t width, std::span<const std::int64_t> shape,
                           std::span<const std::int64_t> strides);
/// True when two non-empty extents, placed at their data pointers, intersect.
bool extents_overlap(const void* a_data, const byte_extent& a, const void* b_data, const byte_extent& b) noexcept;

/// True when two non-empty views' byte ranges [lowest, highest element end) intersect.
bool memory_overlaps(const void* a_data, std::size_t a_width, std::span<const std::int64_t> a_shape,
                     std::span<const std::int64_t> a_strides, const void* b_data, std::size_t b_width,
                     std::span<const std::int64_t> b_shape, std::span<const std::int64_t> b_strides);
}  // namespace detail

/// True when the memory of two views (input or output) intersects.
template <class A, class B>
bool overlaps(const A& a, const B& b) {
  return detail::memory_overlaps(a.data(), a.element_size(), a.shape(), a.strides(), b.data(), b.element_size(),
                                 b.shape(), b.strides());
}

/// A strided view over memory it does not own. `Byte` is `const std::byte` for
/// inputs and `std::byte` for outputs.
template <class Byte>
class basic_tensor_view {
 public:
  basic_tensor_view() = default;

  /// Throws regrid::error if the rank exceeds max_rank, an extent is negative, the strides
  /// do not match the rank, or data is null for a non-empty tensor.
  basic_tensor_view(Byte* data, dtype type, shape_t shape, shape_t strides = {},
                    std::optional<quantization> quant = std::nullopt)
      : data_(data), type_(type), shape_(std::move(shape)), strides_(std::move(strides)), quant_(quant) {
    if (strides_.empty()) strides_ = contiguous_strides(shape_);
    detail::validate_view(data_, type_, shape_, strides_);
  }

  /// A mutable view converts to a const one.
  template <class Other>
  requires(!std::is_same_v<Other, Byte> && std::is_same_v<Byte, const Other>)
      basic_tensor_view(const basic_tensor_view<Other>& other)  // NOLINT(google-explicit-constructor)
      : data_(other.data()),
        type_(other.type()),
        shape_(other.shape()),
        strides_(other.strides()),
        quant_(other.quant()) {}

  [[nodiscard]] Byte* data() const noexcept { return data_; }
  [[nodiscard]] dtype type() const noexcept { return type_; }
  [[nodiscard]] const shape_t& shape() const noexcept { return shape_; }
  [[nodiscard]] const shape_t& strides() const noexcept { return strides_; }
  [[nodiscard]] const std::optional<quantization>& quant() const noexcept { return quant_; }
  [[nodiscard]] int rank() const noexcept { return static_cast<int>(shape_.size()); }
  [[nodiscard]] std::int64_t numel() const { return element_count(shape_); }
  [[nodiscard]] std::size_t element_size() const noexcept { return size_of(type_); }
  /// True when the strides are the C-contiguous strides of the shape (size-1 axes ignored).
  [[nodiscard]] bool is_contiguous() const noexcept {
    std::int64_t expected = 1;
    for (int k = rank() - 1; k >= 0; --k) {
      if (shape_[k] != 1 && strides_[k] != expected) return false;
      expected *= shape_[k];
    }
    return true;
  }

 private:
  Byte* data_ = nullptr;
  dtype type_ = dtype::uint8;
  shape_t shape_;
  shape_t strides_;
  std::optional<quantization> quant_;
};

using tensor_view = basic_tensor_view<const std::byte>;
using mutable_tensor_view = basic_tensor_view<std::byte>;

/// Tag for tensor's constructor: leave the storage uninitialized (the caller writes every element).
struct uninitialized_t {
  explicit uninitialized_t() = default;
};
inline constexpr uninitialized_t uninitialized{};

/// An owning, C-contiguous tensor with 64-byte aligned storage, zero-initialized unless
/// constructed with `uninitialized`.
class tensor {
 public:
  tensor() = default;
  tensor(dtype type, shape_t shape, std::optional<quantization> quant = std::nullopt);
  tensor(uninitialized_t, dtype type, shape_t shape, std::optional<quantization> quant = std::nullopt);

  [[nodiscard]] dtype type() const noexcept { return type_; }
  [[nodiscard]] const shape_t& shape() const noexcept { return shape_; }
  [[nodiscard]] const std::optional<quantization>& quant() const noexcept { return quant_; }
  [[nodiscard]] std::int64_t numel() const noexcept { return numel_; }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return numel_ * size_of(type_); }
  [[nodiscard]] std::byte* data() noexcept { return storage_.get(); }
  [[nodiscard]] const std::byte* data() const noexcept { return storage_.get(); }
  template <class T>
  [[nodiscard]] T* data_as() noexcept {
    return reinterpret_cast<T*>(storage_.get());
  }
  template <class T>
  [[nodiscard]] const T* data_as() const noexcept {
    return reinterpret_cast<const T*>(storage_.get());
  }

  [[nodiscard]] tensor_view view() const { return {data(), type_, shape_, {}, quant_}; }
  [[nodiscard]] mutable_tensor_view mutable_view() { return {data(), type_, shape_, {}, quant_}; }
  operator tensor_view() const { return view(); }  // NOLINT(google-explicit-constructor)

 private:
  struct storage_release {
    std::size_t capacity;  // value-initialized by unique_ptr; no initializer, as the class is incomplete here
    void operator()(std::byte* p) const noexcept;
  };
  dtype type_ = dtype::uint8;
  shape_t shape_;
  std::optional<quantization> quant_;
  std::int64_t numel_ = 0;
  std::unique_ptr<std::byte[], storage_release> storage_;
};

}  // namespace regrid
