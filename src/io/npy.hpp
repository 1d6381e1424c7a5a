// NumPy .npy files (format versions 1.0, 2.0 and 3.0).
//
// Reading validates everything (magic, header dictionary, dtype, shape, exact data
// size) before allocating, so a malformed or truncated file is a regrid::error with
// status io_error, never a crash. Fortran-order arrays are returned as strided views;
// big-endian data is converted to native order.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "regrid/tensor.hpp"

namespace regrid::io {

struct npy_array {
  tensor storage;     ///< the data as stored in the file (native byte order)
  shape_t shape;      ///< logical shape
  shape_t strides;    ///< logical strides in elements (C order unless the file was Fortran order)
  std::string descr;  ///< the file's dtype descriptor, little-endian form (e.g. "<f4", "|b1", "<V2")

  [[nodiscard]] tensor_view view() const { return {storage.data(), storage.type(), shape, strides, storage.quant()}; }
};

/// Parses a whole .npy file image. `name` is used in error messages. `as_type` reinterprets
/// the data as that dtype when the descriptor has the same width (e.g. bfloat16 over "<V2").
npy_array parse_npy(std::span<const std::byte> file, std::string_view name,
                    std::optional<dtype> as_type = std::nullopt);

/// Reads and parses a .npy file.
npy_array read_npy(const std::string& path, std::optional<dtype> as_type = std::nullopt);

/// The little-endian descriptor NumPy uses for a dtype ("<f4", "|u1", ...). bfloat16 maps to
/// "<V2" and the quantized types to their storage types.
std::string npy_descr(dtype type);

/// Serializes a C-contiguous view as a .npy image with the given descriptor (default:
/// npy_descr(view.type())).
std::string format_npy(const tensor_view& view, std::string_view descr = {});

/// Writes a .npy file atomically: a temporary file is renamed over `path` only after it
/// was written completely, so a failure never leaves a partial or stale output behind.
void write_npy(const std::string& path, const tensor_view& view, std::string_view descr = {});

}  // namespace regrid::io
