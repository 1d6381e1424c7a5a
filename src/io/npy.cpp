#include "io/npy.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "core/checked.hpp"

namespace regrid::io {
namespace {

[[noreturn]] void fail_io(std::string_view name, const std::string& message) {
  detail::fail(status::io_error, "npy: " + std::string(name) + ": " + message);
}

struct descr_entry {
  std::string_view code;  // kind + itemsize, without byte order
  dtype type;
};
constexpr std::array<descr_entry, 13> descr_table = {{
    {"b1", dtype::boolean},
    {"i1", dtype::int8},
    {"i2", dtype::int16},
    {"i4", dtype::int32},
    {"i8", dtype::int64},
    {"u1", dtype::uint8},
    {"u2", dtype::uint16},
    {"u4", dtype::uint32},
    {"u8", dtype::uint64},
    {"f2", dtype::float16},
    {"f4", dtype::float32},
    {"f8", dtype::float64},
    {"c8", dtype::complex64},
}};

// A tiny parser for the Python dict literal in the header:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class header_parser {
 public:
  header_parser(std::string_view text, std::string_view name) : text_(text), name_(name) {}

  void parse(std::string& descr, bool& fortran_order, shape_t& shape) {
    bool have_descr = false;
    bool have_order = false;
    bool have_shape = false;
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = parse_string();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"')
          fail("the 'descr' value is not a simple dtype string (structured dtypes are not supported)");
        descr = parse_string();
        have_descr = true;
      } else if (key == "fortran_order") {
        fortran_order = parse_bool();
        have_order = true;
      } else if (key == "shape") {
        shape = parse_shape();
        have_shape = true;
      } else {
        fail("the header has the unknown key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') break;
      fail("the header dictionary is malformed near offset " + std::to_string(pos_));
    }
    if (!have_descr || !have_order || !have_shape) {
      fail("the header lacks one of the keys 'descr', 'fortran_order' and 'shape'");
    }
  }

 private:
  [[noreturn]] void fail(const std::string& message) const { fail_io(name_, message); }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c)
      fail(std::string("the header dictionary is malformed: expected '") + c + "' at offset " + std::to_string(pos_));
    ++pos_;
  }
  std::string parse_string() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"')
      fail("the header dictionary is malformed: expected a quoted string at offset " + std::to_string(pos_));
    const std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail("the header has an unterminated string");
    std::string value(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return value;
  }
  bool parse_bool() {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("the 'fortran_order' value is neither True nor False");
  }
  shape_t parse_shape() {
    shape_t shape;
    expect('(');
    for (;;) {
      skip_space();
      if (peek() == ')') break;
      std::int64_t value = 0;
      bool any = false;
      while (peek() >= '0' && peek() <= '9') {
        if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, peek() - '0', &value)) {
          fail("a shape extent does not fit in 64 bits");
        }
        ++pos_;
        any = true;
      }
      if (peek() == 'L') ++pos_;  // Python 2 long suffix
      if (!any) fail("the 'shape' value is not a tuple of non-negative integers");
      shape.push_back(value);
      if (shape.size() > static_cast<std::size_t>(max_rank))
        fail("the array rank exceeds the maximum rank " + std::to_string(max_rank));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != ')') fail("the 'shape' value is not a tuple of non-negative integers");
    }
    ++pos_;
    return shape;
  }

  std::string_view text_;
  std::string_view name_;
  std::size_t pos_ = 0;
};

std::uint64_t read_le(const std::byte* p, int bytes) {
  std::uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | std::to_integer<std::uint64_t>(p[i]);
  return value;
}

void byteswap_elements(std::byte* data, std::int64_t count, std::size_t unit) {
  for (std::int64_t i = 0; i < count; ++i) std::reverse(data + i * unit, data + (i + 1) * unit);
}

}  // namespace

std::string npy_descr(dtype type) {
  switch (type) {
    case dtype::bfloat16: return "<V2";
    case dtype::quint8: return "|u1";
    case dtype::qint8: return "|i1";
    case dtype::complex128: return "<c16";
    default: break;
  }
  for (const auto& entry : descr_table) {
    if (entry.type == type) return std::string(size_of(type) == 1 ? "|" : "<") + std::string(entry.code);
  }
  return "|u1";
}

npy_array parse_npy(std::span<const std::byte> file, std::string_view name, std::optional<dtype> as_type) {
  static constexpr unsigned char magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (file.size() < 10 || std::memcmp(file.data(), magic, sizeof magic) != 0) {
    fail_io(name, "not a .npy file (the magic string \\x93NUMPY is missing)");
  }
  const int major = std::to_integer<int>(file[6]);
  if (major < 1 || major > 3)
    fail_io(name, "format version " + std::to_string(major) + " is not supported (1, 2 or 3)");
  const int length_bytes = major == 1 ? 2 : 4;
  const std::size_t prefix = 8 + static_cast<std::size_t>(length_bytes);
  if (file.size() < prefix) fail_io(name, "the file is truncated inside the header length");
  const std::uint64_t header_length = read_le(file.data() + 8, length_bytes);
  if (header_length > file.size() - prefix) {
    fail_io(name, "the file is truncated: the header declares " + std::to_string(header_length) + " bytes but " +
                      std::to_string(file.size() - prefix) + " remain");
  }
  const std::string_view header(reinterpret_cast<const char*>(file.data() + prefix), header_length);

  std::string descr;
  bool fortran_order = false;
  shape_t shape;
  header_parser(header, name).parse(descr, fortran_order, shape);

  if (descr.size() < 3) fail_io(name, "dtype descriptor '" + descr + "' is not supported");
  const char order = descr[0];
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    fail_io(name, "dtype descriptor '" + descr + "' has an unknown byte order");
  }
  const std::string code = descr.substr(1);
  std::optional<dtype> file_type;
  std::size_t item_size = 0;
  std::size_t swap_unit = 0;
  if (code == "c16") {
    file_type = dtype::complex128;
  } else if (code == "V2" || code == "V1" || code == "V4" || code == "V8") {
    item_size = static_cast<std::size_t>(code[1] - '0');
  } else {
    for (const auto& entry : descr_table) {
      if (entry.code == code) file_type = entry.type;
    }
  }
  if (file_type) item_size = size_of(*file_type);
  if (item_size == 0) fail_io(name, "dtype descriptor '" + descr + "' is not supported");
  swap_unit = (file_type == dtype::complex64 || file_type == dtype::complex128) ? item_size / 2 : item_size;

  dtype type = dtype::uint8;
  if (as_type) {
    if (size_of(*as_type) != item_size) {
      fail_io(name, "cannot read " + std::to_string(item_size) + "-byte elements ('" + descr + "') as " +
                        std::string(to_string(*as_type)) + ", which has " + std::to_string(size_of(*as_type)) +
                        " bytes per element");
    }
    type = *as_type;
    if (!file_type) swap_unit = item_size;
  } else if (file_type) {
    type = *file_type;
  } else {
    fail_io(name, "dtype descriptor '" + descr + "' is raw bytes; name the element type (e.g. --dtype bfloat16)");
  }

  std::int64_t count = 0;
  try {
    count = element_count(shape);
  } catch (const error&) {
    fail_io(name, "the element count of shape " + format_shape(shape) + " overflows 64-bit integers");
  }
  const std::int64_t data_bytes = detail::checked_mul(count, static_cast<std::int64_t>(item_size), "npy", "data size");
  const std::size_t available = file.size() - prefix - header_length;
  if (static_cast<std::uint64_t>(data_bytes) > available) {
    fail_io(name, "the file is truncated: the header declares " + std::to_string(data_bytes) + " bytes of data but " +
                      std::to_string(available) + " remain");
  }
  if (static_cast<std::uint64_t>(data_bytes) < available) {
    fail_io(name, "the file has " + std::to_string(available - data_bytes) +
                      " bytes after the array data; it is not a valid .npy file");
  }

  npy_array array;
  shape_t stored_shape = shape;
  if (fortran_order) std::reverse(stored_shape.begin(), stored_shape.end());
  array.storage = tensor(type, stored_shape);
  if (data_bytes > 0) std::memcpy(array.storage.data(), file.data() + prefix + header_length, data_bytes);
  if (order == '>' && swap_unit > 1) byteswap_elements(array.storage.data(), data_bytes / swap_unit, swap_unit);
  array.shape = shape;
  array.strides = contiguous_strides(stored_shape);
  if (fortran_order) std::reverse(array.strides.begin(), array.strides.end());
  array.descr = (item_size == 1 ? "|" : "<") + code;
  return array;
}

npy_array read_npy(const std::string& path, std::optional<dtype> as_type) {
  std::ifstream in(path, std::ios::binary);
  if (!in) detail::fail(status::io_error, "npy: cannot open " + path + " for reading");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) detail::fail(status::io_error, "npy: failed to read " + path);
  return parse_npy(std::as_bytes(std::span(bytes)), path, as_type);
}

std::string format_npy(const tensor_view& view, std::string_view descr) {
  if (!view.is_contiguous()) {
    detail::fail_invalid("npy: only C-contiguous tensors can be written; got strides " + format_shape(view.strides()));
  }
  std::string header = "{'descr': '" + (descr.empty() ? npy_descr(view.type()) : std::string(descr)) +
                       "', 'fortran_order': False, 'shape': (";
  for (std::size_t k = 0; k < view.shape().size(); ++k) {
    header += std::to_string(view.shape()[k]);
    if (view.shape().size() == 1 || k + 1 < view.shape().size()) header += view.shape().size() == 1 ? "," : ", ";
  }
  header += "), }";
  const bool version2 = header.size() + 12 >= 65535;
  const std::size_t prefix = version2 ? 12 : 10;
  const std::size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';

  std::string image = "\x93NUMPY";
  image += static_cast<char>(version2 ? 2 : 1);
  image += '\0';
  const std::uint64_t length = header.size();
  for (std::size_t i = 0; i < (version2 ? 4U : 2U); ++i) image += static_cast<char>((length >> (8 * i)) & 0xff);
  image += header;
  const std::int64_t bytes = view.numel() * static_cast<std::int64_t>(view.element_size());
  if (bytes > 0) image.append(reinterpret_cast<const char*>(view.data()), static_cast<std::size_t>(bytes));
  return image;
}

void write_npy(const std::string& path, const tensor_view& view, std::string_view descr) {
  const std::string image = format_npy(view, descr);
  const std::string temporary = path + ".regrid-partial";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) detail::fail(status::io_error, "npy: cannot open " + path + " for writing");
    out.write(image.data(), static_cast<std::streamsize>(image.size()));
    out.close();
    if (!out) {
      std::remove(temporary.c_str());
      detail::fail(status::io_error, "npy: failed to write " + path);
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    detail::fail(status::io_error, "npy: cannot move the finished file into place at " + path);
  }
}

}  // namespace regrid::io
