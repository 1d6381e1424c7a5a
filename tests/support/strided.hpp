// Test buffers in unusual memory layouts: misaligned bases, padded (sliced) strides,
// Fortran order and negative strides, with guard bytes around the view so writes
// outside the view's elements are caught.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "regrid/tensor.hpp"

namespace regrid::testing {

enum class memory_style {
  contiguous,  ///< C order, 64-byte aligned base
  misaligned,  ///< C order, base offset by 1 byte
  padded,      ///< every dimension padded by one (a slice of a larger array), misaligned
  fortran,     ///< reversed dimension order, padded
  reversed,    ///< C order with the outermost non-trivial axis walking backwards
};
inline constexpr memory_style all_memory_styles[] = {memory_style::contiguous, memory_style::misaligned,
                                                     memory_style::padded, memory_style::fortran,
                                                     memory_style::reversed};
inline constexpr std::int64_t guard_bytes = 64;
inline constexpr std::byte fill_byte{0xA5};

/// Visits every element's byte offset (relative to the view's data pointer) in C order.
template <class Visit>
void for_each_offset(const shape_t& shape, const shape_t& strides, std::size_t width, Visit visit) {
  const std::int64_t count = element_count(shape);
  std::vector<std::int64_t> index(shape.size(), 0);
  for (std::int64_t n = 0; n < count; ++n) {
    std::int64_t offset = 0;
    for (std::size_t k = 0; k < shape.size(); ++k) offset += index[k] * strides[k];
    visit(offset * static_cast<std::int64_t>(width));
    for (std::size_t k = shape.size(); k-- > 0;) {
      if (++index[k] < shape[k]) break;
      index[k] = 0;
    }
  }
}

class strided_buffer {
 public:
  strided_buffer(dtype type, shape_t shape, memory_style style) : type_(type), shape_(std::move(shape)) {
    const std::size_t rank = shape_.size();
    const auto width = static_cast<std::int64_t>(size_of(type_));
    const bool pad = style == memory_style::padded || style == memory_style::fortran;
    shape_t physical(rank);
    for (std::size_t k = 0; k < rank; ++k) physical[k] = shape_[k] + (pad ? 1 : 0);
    strides_.assign(rank, 0);
    std::int64_t stride = 1;
    auto assign = [&](std::size_t k) {
      strides_[k] = stride;
      stride *= std::max<std::int64_t>(physical[k], 1);
    };
    if (style == memory_style::fortran) {
      for (std::size_t k = 0; k < rank; ++k) assign(k);
    } else {
      for (std::size_t k = rank; k-- > 0;) assign(k);
    }
    std::int64_t start = guard_bytes + (style == memory_style::contiguous ? 0 : 1);
    if (style == memory_style::reversed) {
      for (std::size_t k = 0; k < rank; ++k) {
        if (shape_[k] > 1) {
          start += (shape_[k] - 1) * strides_[k] * width;
          strides_[k] = -strides_[k];
          break;
        }
      }
    }
    // 64-byte aligned storage so "contiguous" really is aligned.
    storage_.assign(static_cast<std::size_t>(stride * width + 2 * guard_bytes + 64), fill_byte);
    const auto base = reinterpret_cast<std::uintptr_t>(storage_.data());
    start += static_cast<std::int64_t>((64 - base % 64) % 64);
    data_ = storage_.data() + start;
  }

  [[nodiscard]] mutable_tensor_view view(std::optional<quantization> quant = std::nullopt) {
    return {data_, type_, shape_, strides_, quant};
  }
  [[nodiscard]] tensor_view const_view(std::optional<quantization> quant = std::nullopt) const {
    return {data_, type_, shape_, strides_, quant};
  }

  /// The logical contents as a C-contiguous tensor.
  [[nodiscard]] tensor gather() const {
    tensor out(type_, shape_);
    std::byte* next = out.data();
    const std::size_t width = size_of(type_);
    for_each_offset(shape_, strides_, width, [&](std::int64_t offset) {
      std::memcpy(next, data_ + offset, width);
      next += width;
    });
    return out;
  }

  /// Writes a C-contiguous tensor's contents into the view's elements.
  void scatter(const tensor& from) {
    const std::byte* next = from.data();
    const std::size_t width = size_of(type_);
    for_each_offset(shape_, strides_, width, [&](std::int64_t offset) {
      std::memcpy(data_ + offset, next, width);
      next += width;
    });
  }

  /// True when every byte that is not part of an element still holds fill_byte.
  [[nodiscard]] bool only_elements_written() const {
    std::vector<bool> owned(storage_.size(), false);
    const std::size_t width = size_of(type_);
    const auto start = data_ - storage_.data();
    for_each_offset(shape_, strides_, width, [&](std::int64_t offset) {
      for (std::size_t i = 0; i < width; ++i) owned[static_cast<std::size_t>(start + offset) + i] = true;
    });
    for (std::size_t i = 0; i < storage_.size(); ++i) {
      if (!owned[i] && storage_[i] != fill_byte) return false;
    }
    return true;
  }

 private:
  dtype type_;
  shape_t shape_;
  shape_t strides_;
  std::vector<std::byte> storage_;
  std::byte* data_ = nullptr;
};

/// A C-contiguous tensor of random bytes (every bit pattern: NaN payloads, -0.0, ...).
inline tensor random_tensor(dtype type, const shape_t& shape, std::mt19937_64& rng) {
  tensor t(type, shape);
  for (std::size_t i = 0; i < t.size_bytes(); ++i) t.data()[i] = static_cast<std::byte>(rng() & 0xff);
  return t;
}

/// A tensor of the given shape whose every byte is `value`.
inline tensor filled_tensor(dtype type, const shape_t& shape, std::byte value) {
  tensor t(type, shape);
  std::memset(t.data(), std::to_integer<int>(value), t.size_bytes());
  return t;
}

inline bool same_bytes(const tensor& a, const tensor& b) {
  return a.shape() == b.shape() && a.type() == b.type() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

}  // namespace regrid::testing
