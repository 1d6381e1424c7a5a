// .npy reading and writing: round trips, every dtype, Fortran order, big-endian data,
// and malformed or truncated files rejected with a sentence, never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "io/npy.hpp"
#include "regrid/regrid.hpp"

namespace regrid::io {
namespace {

std::span<const std::byte> bytes_of(const std::string& image) {
  return {reinterpret_cast<const std::byte*>(image.data()), image.size()};
}

std::string header_image(const std::string& dict, const std::string& payload, int version = 1) {
  std::string header = dict;
  const std::size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string image = "\x93NUMPY";
  image += static_cast<char>(version);
  image += '\0';
  for (std::size_t i = 0; i < (version == 1 ? 2U : 4U); ++i)
    image += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return image + header + payload;
}

TEST(Npy, RoundTripsEveryDtype) {
  std::mt19937_64 rng(3);
  for (dtype type : all_dtypes) {
    tensor t(type, {2, 3, 5});
    for (std::size_t i = 0; i < t.size_bytes(); ++i) t.data()[i] = static_cast<std::byte>(rng());
    const std::string image = format_npy(t.view());
    EXPECT_EQ((image.size() - t.size_bytes()) % 64, 0U);
    const npy_array back = parse_npy(bytes_of(image), "round-trip", type);
    EXPECT_EQ(back.shape, t.shape());
    EXPECT_EQ(back.storage.type(), type);
    EXPECT_EQ(std::memcmp(back.storage.data(), t.data(), t.size_bytes()), 0) << to_string(type);
  }
}

TEST(Npy, ReadsNumpyDescriptorsAndShapes) {
  const npy_array scalar =
      parse_npy(bytes_of(header_image("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", std::string(8, '\0'))),
                "scalar");
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.storage.type(), dtype::float64);
  const npy_array vector = parse_npy(
      bytes_of(header_image("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\1\0\1", 3))),
      "vector");
  EXPECT_EQ(vector.shape, (shape_t{3}));
  EXPECT_EQ(vector.storage.type(), dtype::boolean);
  EXPECT_EQ(vector.descr, "|b1");
  const npy_array v2 =
      parse_npy(bytes_of(header_image("{\"descr\": \"<u2\", \"fortran_order\": False, \"shape\": (1, 2)}",
                                      std::string(4, '\0'), 2)),
                "version-2");
  EXPECT_EQ(v2.storage.type(), dtype::uint16);
  EXPECT_EQ(
      format_npy(tensor(dtype::float32, {5}).view()).find("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }"),
      10U);
}

TEST(Npy, FortranOrderBecomesAStridedView) {
  // 2x3 array [[0,1,2],[3,4,5]] stored column-major.
  const std::int32_t column_major[] = {0, 3, 1, 4, 2, 5};
  const npy_array array =
      parse_npy(bytes_of(header_image("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                                      std::string(reinterpret_cast<const char*>(column_major), sizeof column_major))),
                "fortran");
  EXPECT_EQ(array.shape, (shape_t{2, 3}));
  EXPECT_EQ(array.strides, (shape_t{1, 2}));
  const tensor_view view = array.view();
  const auto* data = reinterpret_cast<const std::int32_t*>(view.data());
  EXPECT_EQ(data[1 * view.strides()[0] + 2 * view.strides()[1]], 5);
}

TEST(Npy, BigEndianIsConvertedToNative) {
  const unsigned char big[] = {0x00, 0x00, 0x01, 0x02, 0x3f, 0x80, 0x00, 0x00};  // int32 258, float32 1.0f
  const npy_array ints = parse_npy(bytes_of(header_image("{'descr': '>i4', 'fortran_order': False, 'shape': (1,), }",
                                                         std::string(reinterpret_cast<const char*>(big), 4))),
                                   "be");
  EXPECT_EQ(*ints.storage.data_as<std::int32_t>(), 258);
  EXPECT_EQ(ints.descr, "<i4");
  const npy_array floats = parse_npy(bytes_of(header_image("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
                                                           std::string(reinterpret_cast<const char*>(big + 4), 4))),
                                     "be");
  EXPECT_EQ(*floats.storage.data_as<float>(), 1.0f);
}

TEST(Npy, RawTwoByteDataReadsAsBfloat16OnRequest) {
  const std::string image =
      header_image("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }", std::string(4, '\1'));
  EXPECT_EQ(parse_npy(bytes_of(image), "bf16", dtype::bfloat16).storage.type(), dtype::bfloat16);
  try {
    (void)parse_npy(bytes_of(image), "bf16.npy");
    FAIL();
  } catch (const error& failure) {
    EXPECT_STREQ(failure.what(),
                 "npy: bf16.npy: dtype descriptor '<V2' is raw bytes; name the element type (e.g. --dtype bfloat16)");
  }
}

struct malformed_case {
  std::string image;
  std::string message;
};

TEST(Npy, MalformedFilesAreErrorsNotCrashes) {
  const std::string good =
      header_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", std::string(24, '\0'));
  const malformed_case cases[] = {
      {"", "npy: bad.npy: not a .npy file (the magic string \\x93NUMPY is missing)"},
      {"PK\3\4 not numpy at all", "npy: bad.npy: not a .npy file (the magic string \\x93NUMPY is missing)"},
      {good.substr(0, 9), "npy: bad.npy: not a .npy file (the magic string \\x93NUMPY is missing)"},
      {good.substr(0, 40), "npy: bad.npy: the file is truncated: the header declares 118 bytes but 30 remain"},
      {good.substr(0, good.size() - 1),
       "npy: bad.npy: the file is truncated: the header declares 24 bytes of data but 23 remain"},
      {good + "x", "npy: bad.npy: the file has 1 bytes after the array data; it is not a valid .npy file"},
      {std::string(good).replace(6, 1, "\x07"), "npy: bad.npy: format version 7 is not supported (1, 2 or 3)"},
      {header_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", ""),
       "npy: bad.npy: the 'shape' value is not a tuple of non-negative integers"},
      {header_image("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", ""),
       "npy: bad.npy: a shape extent does not fit in 64 bits"},
      {header_image("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", ""),
       "npy: bad.npy: the element count of shape [4294967296, 4294967296] overflows 64-bit integers"},
      {header_image("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 1000), }", ""),
       "npy: bad.npy: the file is truncated: the header declares 4000000000000 bytes of data but 0 remain"},
      {header_image("{'descr': '<U8', 'fortran_order': False, 'shape': (1,), }", std::string(32, 'a')),
       "npy: bad.npy: dtype descriptor '<U8' is not supported"},
      {header_image("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "abcd"),
       "npy: bad.npy: the 'descr' value is not a simple dtype string (structured dtypes are not supported)"},
      {header_image("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", "abcd"),
       "npy: bad.npy: the 'fortran_order' value is neither True nor False"},
      {header_image("{'descr': '<f4', 'shape': (1,), }", "abcd"),
       "npy: bad.npy: the header lacks one of the keys 'descr', 'fortran_order' and 'shape'"},
      {header_image("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "abcd"),
       "npy: bad.npy: the header has the unknown key 'extra'"},
      {header_image("{'descr: '<f4'}", ""),
       "npy: bad.npy: the header dictionary is malformed: expected ':' at offset 10"},
      {header_image("{'descr': '!f4', 'fortran_order': False, 'shape': (1,), }", "abcd"),
       "npy: bad.npy: dtype descriptor '!f4' has an unknown byte order"},
  };
  for (const auto& c : cases) {
    try {
      (void)parse_npy(bytes_of(c.image), "bad.npy");
      ADD_FAILURE() << "accepted: " << c.message;
    } catch (const error& failure) {
      EXPECT_EQ(std::string(failure.what()), c.message);
    }
  }
}

// Every truncation and every single-byte corruption of a valid file: an error or a valid
// array, never a crash (run under the sanitizers too).
TEST(Npy, EveryTruncationAndByteFlipIsSafe) {
  const std::string good =
      header_image("{'descr': '<i2', 'fortran_order': False, 'shape': (3, 2), }", std::string(12, '\7'));
  for (std::size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_THROW((void)parse_npy(bytes_of(good.substr(0, cut)), "cut"), error) << cut;
  }
  for (std::size_t at = 0; at < good.size(); ++at) {
    for (int value : {0, 32, 40, 41, 44, 57, 39, 255}) {
      std::string corrupt = good;
      corrupt[at] = static_cast<char>(value);
      try {
        (void)parse_npy(bytes_of(corrupt), "flip");
      } catch (const error&) {
      }
    }
  }
}

}  // namespace
}  // namespace regrid::io
