// Error reporting for every regrid entry point.
//
// Every failure is one `regrid::error` whose what() is a single sentence that
// names the operation, the offending values and the rule that was broken, e.g.
//
//   space_to_depth: input height 30 is not divisible by block_size 4
//
// When an operation throws, nothing has been written to its output.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace regrid {

/// Broad class of a failure; stable across releases (the C API and the CLI map it to codes).
enum class status : int {
  success = 0,
  invalid_argument = 1,  ///< the input breaks a rule of the operation or of the chosen framework
  unsupported = 2,       ///< valid in principle, but not implemented for this combination
  overflow = 3,          ///< a size computation does not fit in 64 bits
  io_error = 4,          ///< a file could not be read or written, or is malformed
  internal_error = 5,    ///< a bug in regrid
};

/// Lower-case name of a status, e.g. "invalid_argument".
std::string_view to_string(status code) noexcept;

/// The one exception type regrid throws.
class error : public std::runtime_error {
 public:
  error(status code, const std::string& message) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] status code() const noexcept { return code_; }

 private:
  status code_;
};

}  // namespace regrid
