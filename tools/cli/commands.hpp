// The regrid command-line tool's commands. Each returns the process exit status:
// 0 on success, 2 for any invalid input or file (the sentence goes to stderr).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

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

struct roi_pool_request {
  std::string input;
  std::string rois;
  std::string output;
  std::vector<std::int64_t> pooled_size;  // PH PW
  double spatial_scale = 1.0;
  std::optional<std::string> layout;
  std::string framework = "directml";
  std::optional<std::string> rounding;
  std::optional<std::string> batch_indices;
  std::optional<double> height_stride;
  std::optional<double> width_stride;
  std::optional<std::int32_t> zero_point;
  std::optional<std::string> argmax;
  std::optional<std::string> dtype;
};

int run_roi_pool(const roi_pool_request& request);

struct roi_pool_backward_request {
  std::string grad_output;
  std::string argmax;
  std::string grad_input;
  std::vector<std::int64_t> input_shape;  // N C H W (or N H W C for NHWC)
  std::optional<std::string> layout;
  std::optional<std::string> roi_batch;  // int32/int64 [R] batch index of each ROI
  std::optional<std::string> dtype;
};

int run_roi_pool_backward(const roi_pool_backward_request& request);

struct bench_request {
  bool quick = false;
  std::vector<int> threads;             // empty: 1 and all hardware threads
  std::vector<std::int64_t> sizes_kib;  // empty: the grid's sizes
  std::string filter;                   // substring of the case names
  int repetitions = 7;
  std::int64_t dst_offset_bytes = 0;  // outputs start this far past a 64-byte boundary
  bool vector_copy = false;           // also time bench::vector_copy and report the ratio to it
};

/// SpaceToDepth / DepthToSpace against memcpy over the benchmark grid (see bench/).
int run_bench(const bench_request& request);

/// Runs the seed documents' worked examples through the library, prints inputs and outputs,
/// and checks each against the documented result (exit 1 on a mismatch).
int run_demo(std::ostream& out);

}  // namespace regrid::cli
