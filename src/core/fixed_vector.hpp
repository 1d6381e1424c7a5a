// A vector with its capacity inline: planning runs on every call, and a heap allocation per
// temporary list cost as much as moving a small tensor.
#pragma once

#include <cassert>
#include <cstddef>
#include <type_traits>

namespace regrid::detail {

template <class T, std::size_t Capacity>
class fixed_vector {
 public:
  fixed_vector() = default;
  fixed_vector(std::size_t count, const T& value) { assign(count, value); }
  // Copies move only the items in use: the implicit copy moved the whole capacity (864 bytes for
  // a plan's axis list), which showed up as a third of planning time.
  fixed_vector(const fixed_vector& other) noexcept : size_(other.size_) { copy_items(other); }
  fixed_vector& operator=(const fixed_vector& other) noexcept {
    size_ = other.size_;
    copy_items(other);
    return *this;
  }
  ~fixed_vector() = default;

  void assign(std::size_t count, const T& value) {
    assert(count <= Capacity);
    for (std::size_t i = 0; i < count; ++i) storage_.items[i] = value;
    size_ = count;
  }
  /// The items of `range` (which must fit), in its order.
  template <class Range>
  void assign_range(const Range& range) {
    clear();
    for (const T& value : range) push_back(value);
  }
  void push_back(const T& value) {
    assert(size_ < Capacity);
    storage_.items[size_++] = value;
  }
  void pop_back() {
    assert(size_ > 0);
    --size_;
  }
  void clear() { size_ = 0; }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] T* data() noexcept { return storage_.items; }
  [[nodiscard]] const T* data() const noexcept { return storage_.items; }
  [[nodiscard]] T* begin() noexcept { return storage_.items; }
  [[nodiscard]] T* end() noexcept { return storage_.items + size_; }
  [[nodiscard]] const T* begin() const noexcept { return storage_.items; }
  [[nodiscard]] const T* end() const noexcept { return storage_.items + size_; }
  [[nodiscard]] T& operator[](std::size_t i) noexcept { return storage_.items[i]; }
  [[nodiscard]] const T& operator[](std::size_t i) const noexcept { return storage_.items[i]; }
  [[nodiscard]] T& back() noexcept { return storage_.items[size_ - 1]; }
  [[nodiscard]] const T& back() const noexcept { return storage_.items[size_ - 1]; }

 private:
  void copy_items(const fixed_vector& other) noexcept {
    for (std::size_t i = 0; i < size_; ++i) storage_.items[i] = other.storage_.items[i];
  }

  // Left uninitialized: zeroing the whole capacity on every plan cost more than the planning.
  union storage {
    storage() {}  // NOLINT(modernize-use-equals-default): `= default` would initialize the array
    T items[Capacity];
  };
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);
  storage storage_;
  std::size_t size_ = 0;
};

}  // namespace regrid::detail
