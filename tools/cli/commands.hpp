// The regrid command-line tool's commands. Each returns the process exit status:
// 0 on success, 2 for any invalid input or file (the sentence goes to stderr).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

namespace regrid::cli {

inline constexpr int exit_invalid = 2;

struct space_depth_request {
  bool to_depth = true;
  std::string input;
  std::string output;
  std::int64_t block_size = 0;
  std::optional<std::string> layout;
  std::optional<std::string> mode;
  std::string framework = "default";
  std::optional<std::string> dtype;
};

int run_space_depth(const space_depth_request& request);

/// Runs the seed documents' worked examples through the library, prints inputs and outputs,
/// and checks each against the documented result (exit 1 on a mismatch).
int run_demo(std::ostream& out);

}  // namespace regrid::cli
