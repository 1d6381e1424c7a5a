#include "regrid/status.hpp"

namespace regrid {

std::string_view to_string(status code) noexcept {
  switch (code) {
    case status::success: return "success";
    case status::invalid_argument: return "invalid_argument";
    case status::unsupported: return "unsupported";
    case status::overflow: return "overflow";
    case status::io_error: return "io_error";
    case status::internal_error: return "internal_error";
  }
  return "unknown";
}

}  // namespace regrid
