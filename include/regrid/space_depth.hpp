// SpaceToDepth and DepthToSpace, every framework's variant.
//
// Notation: b = block_size, K = number of spatial dims, C_s = channels of the
// space side (large spatial dims D_k = O_k * b), C_d = C_s * b^K channels of the
// depth side (spatial dims O_k). A fine coordinate is y_k = o_k * b + beta_k and
// the block offset is off = ((beta_1 * b + beta_2) * b + ...) * b + beta_K
// (outer spatial dim first: for K = 2, off = beta_h * b + beta_w).
//
//   space_to_depth:  dst[n, c_d, o_1..o_K] = src[n, c_s, o_1*b+beta_1, ..., o_K*b+beta_K]
//   depth_to_space:  dst[n, c_s, y_1..y_K] = src[n, c_d, y_1/b, ..., y_K/b]
//   with  c_d = off * C_s + c_s      (mode DCR, = OpenVINO blocks_first, TF, NNAPI, ONNX default)
//         c_d = c_s * b^K + off      (mode CRD, = OpenVINO depth_first, PyTorch pixel_shuffle)
//
// Layouts (written here in channels-first index order above; memory order below):
//   NCHW            [N, C, H, W]                     (K = 2)
//   NHWC            [N, H, W, C]                     (K = 2)
//   channels_first  [N, C, D_1, ..., D_K]            (any K >= 1, rank K + 2)
//   channels_last   [N, D_1, ..., D_K, C]            (any K >= 1, rank K + 2)
//   NCHW_VECT_C     [N, C/4, H, W, 4], 1-byte types; logical channel c = 4 * c_v + v,
//                   the groups of 4 never split (TensorFlow), DCR only.
//
// Framework rule sets (`framework`), each with its default layout and mode;
// explicit `layout` / `mode` win, but must be ones that framework has:
//   permissive  block >= 1; every layout and mode          default NCHW, DCR
//   tf          block >= 2; NHWC, NCHW (rank 4), NCHW_VECT_C (rank 5); DCR     default NHWC
//   onnx        block >= 1; NCHW rank 4; DCR or CRD (SpaceToDepth: DCR only)   default NCHW, DCR
//   openvino    block >= 1; channels_first, rank >= 3; DCR or CRD              default channels_first, DCR
//   nnapi       block >= 1 (1 = identity, as TFLite); NHWC or NCHW rank 4; DCR default NHWC
//   torch       factor >= 1; [*, C, H, W] rank >= 3, leading dims fold into the batch; CRD
//   directml    block >= 1; NCHW rank 4; DCR or CRD                          default NCHW, DCR
// Divisibility is always enforced: D_k % b == 0 for space_to_depth, C_d % b^K == 0 for
// depth_to_space (for NCHW_VECT_C, C/4 % b^2 == 0). Sizes are overflow-checked in 64 bits.
//
// Inputs and outputs may have any strides; overlapping input and output are rejected.
// Zero-size tensors give an empty output. On any error a regrid::error is thrown and
// nothing is written to the output.
//
// Example:
//   regrid::tensor x(regrid::dtype::float32, {1, 4, 4, 1});
//   auto y = regrid::space_to_depth(x, {.block_size = 2, .framework = regrid::framework::tf});
//   // y.shape() == {1, 2, 2, 4}
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "regrid/tensor.hpp"

namespace regrid {

enum class layout { nchw, nhwc, nchw_vect_c, channels_first, channels_last };
enum class mode { dcr, crd };
enum class framework { permissive, tf, onnx, openvino, nnapi, torch, directml };

/// "NCHW", "NHWC", "NCHW_VECT_C", "channels_first", "channels_last".
std::string_view to_string(layout value) noexcept;
/// "DCR", "CRD".
std::string_view to_string(mode value) noexcept;
/// "default", "tf", "onnx", "openvino", "nnapi", "torch", "directml".
std::string_view to_string(framework value) noexcept;

/// Case-insensitive parsers. Modes also accept "blocks_first" (DCR) and "depth_first" (CRD);
/// frameworks also accept "permissive", "tensorflow", "tflite", "pytorch", "dml".
std::optional<layout> parse_layout(std::string_view text) noexcept;
std::optional<mode> parse_mode(std::string_view text) noexcept;
std::optional<framework> parse_framework(std::string_view text) noexcept;

struct space_depth_options {
  std::int64_t block_size = 0;
  std::optional<regrid::layout> layout;  ///< nullopt: the framework's default
  std::optional<regrid::mode> mode;      ///< nullopt: the framework's default
  regrid::framework framework = framework::permissive;
};

/// Output shape of space_to_depth for an input shape, without data. Throws regrid::error
/// exactly as space_to_depth would for that shape.
shape_t space_to_depth_shape(std::span<const std::int64_t> input_shape, const space_depth_options& options);
/// Output shape of depth_to_space for an input shape, without data.
shape_t depth_to_space_shape(std::span<const std::int64_t> input_shape, const space_depth_options& options);

/// Writes space_to_depth(src) into dst, whose dtype must equal src's and whose shape must
/// equal space_to_depth_shape(src.shape()).
void space_to_depth(const tensor_view& src, const mutable_tensor_view& dst, const space_depth_options& options);
void depth_to_space(const tensor_view& src, const mutable_tensor_view& dst, const space_depth_options& options);

/// Allocating forms: return a new C-contiguous tensor carrying src's dtype and quantization.
tensor space_to_depth(const tensor_view& src, const space_depth_options& options);
tensor depth_to_space(const tensor_view& src, const space_depth_options& options);

/// A SpaceToDepth or DepthToSpace planned once for a fixed dtype, shapes and strides, then run on
/// any buffers of that description (the create / setup split of XNNPACK-style runtimes):
/// validation, shape inference and the permute plan are paid once, execute() only checks the
/// pointers. Copyable and thread-safe to execute concurrently on different buffers.
///
/// Example:
///   auto plan = regrid::space_depth_plan::depth_to_space(regrid::dtype::float32, {1, 12, 64, 64},
///                                                        {.block_size = 2, .framework = regrid::framework::torch});
///   for (auto& frame : frames) plan.execute(frame.input, frame.output);  // output shape: plan.output_shape()
class space_depth_plan {
 public:
  /// Empty strides mean C-contiguous. Throws regrid::error exactly as the one-shot calls do.
  static space_depth_plan space_to_depth(dtype type, std::span<const std::int64_t> input_shape,
                                         const space_depth_options& options,
                                         std::span<const std::int64_t> input_strides = {},
                                         std::span<const std::int64_t> output_strides = {});
  static space_depth_plan depth_to_space(dtype type, std::span<const std::int64_t> input_shape,
                                         const space_depth_options& options,
                                         std::span<const std::int64_t> input_strides = {},
                                         std::span<const std::int64_t> output_strides = {});

  [[nodiscard]] const shape_t& input_shape() const noexcept;
  [[nodiscard]] const shape_t& output_shape() const noexcept;
  /// The kernel and the normalized loop nest, as REGRID_VERBOSE=dispatch prints them.
  [[nodiscard]] std::string describe() const;
  /// The kind of plan, as benchmark reports group cells: the kernel's name (describe()'s last
  /// word), with "+staged" where a shuffle goes through a scratch tile and "+segmented" where it
  /// runs segment by segment, e.g. "deinterleave4_x32_avx512+staged" or "copy_runs_avx2". Names
  /// follow the kernels, which change between versions; do not branch on them. It is the plan
  /// execute() runs with num_threads() threads: for outputs that could stay in the cache, some
  /// CPUs run another plan when two or more threads share the work than on one thread.
  [[nodiscard]] std::string kernel() const;

  /// Runs on `src` / `dst` laid out as planned. Throws regrid::error (nothing written) when a
  /// pointer is null for a non-empty tensor or the two buffers overlap.
  void execute(const void* src, void* dst) const;

 private:
  struct impl;
  explicit space_depth_plan(std::shared_ptr<const impl> state) : impl_(std::move(state)) {}
  static space_depth_plan make(bool to_depth, dtype type, std::span<const std::int64_t> input_shape,
                               const space_depth_options& options, std::span<const std::int64_t> input_strides,
                               std::span<const std::int64_t> output_strides);
  std::shared_ptr<const impl> impl_;
};

namespace reference {
/// The spec of record: a direct, per-element transcription of the index formulas above.
/// Same contract as the fast versions; slow; used to check them bit for bit.
void space_to_depth(const tensor_view& src, const mutable_tensor_view& dst, const space_depth_options& options);
void depth_to_space(const tensor_view& src, const mutable_tensor_view& dst, const space_depth_options& options);
}  // namespace reference

}  // namespace regrid
