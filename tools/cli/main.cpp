// regrid: command-line front end over the library. Arrays travel as NumPy .npy files.
#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.hpp"
#include "regrid/version.hpp"

namespace {

void add_space_depth_command(CLI::App& app, regrid::cli::space_depth_request& request, bool to_depth, int& selected,
                             int id) {
  const char* name = to_depth ? "space-to-depth" : "depth-to-space";
  const char* summary = to_depth ? "Move spatial blocks into channels (SpaceToDepth, pixel_unshuffle)"
                                 : "Move channels into spatial blocks (DepthToSpace, pixel_shuffle)";
  auto* command = app.add_subcommand(name, summary);
  command->add_option("input", request.input, "input .npy file")->required();
  command->add_option("output", request.output, "output .npy file (written only on success)")->required();
  command->add_option("-b,--block-size", request.block_size, "block size (upscale/downscale factor)")->required();
  command->add_option("--layout", request.layout,
                      "NHWC | NCHW | NCHW_VECT_C | channels_first | channels_last (default: the framework's)");
  command->add_option("--mode", request.mode, "DCR | CRD | blocks_first | depth_first (default: the framework's)");
  command
      ->add_option("--framework", request.framework,
                   "rule set: default | tf | onnx | openvino | nnapi | torch | directml")
      ->capture_default_str();
  command->add_option("--dtype", request.dtype,
                      "read the input's elements as this type, e.g. bfloat16 over 2-byte data");
  command->callback([&selected, id] { selected = id; });
}

void add_roi_commands(CLI::App& app, regrid::cli::roi_pool_request& forward,
                      regrid::cli::roi_pool_backward_request& backward, int& selected, int forward_id,
                      int backward_id) {
  auto* pool = app.add_subcommand("roi-pool", "ROI max pooling (Fast R-CNN RoIPool), DirectML semantics by default");
  pool->add_option("input", forward.input, "feature map .npy, [N, C, H, W] (or NHWC)")->required();
  pool->add_option("rois", forward.rois, "ROIs .npy, [R, 5] = [batch, x1, y1, x2, y2] ([R, 4] for nnapi)")->required();
  pool->add_option("output", forward.output, "output .npy (written only on success)")->required();
  pool->add_option("--pooled-size", forward.pooled_size, "PH PW")->expected(2)->required();
  pool->add_option("--spatial-scale", forward.spatial_scale, "multiplier from ROI to feature coordinates")
      ->capture_default_str();
  pool->add_option("--layout", forward.layout, "NCHW | NHWC (default: NHWC for nnapi, else NCHW)");
  pool->add_option("--framework", forward.framework, "directml | onnx | caffe | torchvision | nnapi | openvino")
      ->capture_default_str();
  pool->add_option("--rounding", forward.rounding, "half_away_from_zero | half_to_even (default: the framework's)");
  pool->add_option("--batch-indices", forward.batch_indices, "int32 [R] batch index per ROI (nnapi)");
  pool->add_option("--height-stride", forward.height_stride, "nnapi: image height / feature height");
  pool->add_option("--width-stride", forward.width_stride, "nnapi: image width / feature width");
  pool->add_option("--zero-point", forward.zero_point,
                   "nnapi quant8: read uint8/int8 input as quantized with this zero point");
  pool->add_option("--argmax", forward.argmax, "also write the int32 argmax (h * W + w, -1 for empty bins)");
  pool->add_option("--dtype", forward.dtype, "read the input's elements as this type, e.g. bfloat16");
  pool->callback([&selected, forward_id] { selected = forward_id; });

  auto* grad =
      app.add_subcommand("roi-pool-backward", "Gradient of ROI max pooling from the output gradient and argmax");
  grad->add_option("grad_output", backward.grad_output, "output gradient .npy")->required();
  grad->add_option("argmax", backward.argmax, "argmax .npy from roi-pool --argmax")->required();
  grad->add_option("grad_input", backward.grad_input, "input gradient .npy to write")->required();
  grad->add_option("--input-shape", backward.input_shape, "N C H W (N H W C for NHWC)")->expected(4)->required();
  grad->add_option("--layout", backward.layout, "NCHW | NHWC");
  grad->add_option("--roi-batch", backward.roi_batch, "int32/int64 [R] batch index of each ROI (needed when N > 1)");
  grad->add_option("--dtype", backward.dtype, "read the gradient as this type, e.g. bfloat16");
  grad->callback([&selected, backward_id] { selected = backward_id; });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"regrid " REGRID_VERSION_STRING
               ": SpaceToDepth, DepthToSpace and ROI max pooling exactly as TensorFlow, TFLite/NNAPI, "
               "ONNX, OpenVINO, DirectML and PyTorch define them, on NumPy .npy files."};
  app.require_subcommand(1);
  app.set_version_flag("--version", REGRID_VERSION_STRING);

  enum command_id { none, s2d, d2s, roi, roi_backward, demo, bench };
  int selected = none;
  regrid::cli::space_depth_request to_depth_request;
  regrid::cli::space_depth_request to_space_request;
  to_space_request.to_depth = false;
  add_space_depth_command(app, to_depth_request, true, selected, s2d);
  add_space_depth_command(app, to_space_request, false, selected, d2s);
  regrid::cli::roi_pool_request roi_request;
  regrid::cli::roi_pool_backward_request roi_backward_request;
  add_roi_commands(app, roi_request, roi_backward_request, selected, roi, roi_backward);
  regrid::cli::bench_request bench_request;
  auto* bench_command = app.add_subcommand("bench", "Time SpaceToDepth / DepthToSpace against memcpy over the grid");
  bench_command->add_flag("--quick", bench_request.quick,
                          "a small subset (64 KiB and 1 MiB, blocks 2 and 4, channels 1, 3 and 16)");
  bench_command->add_option("--threads", bench_request.threads, "thread counts to run (default: 1 and all)");
  bench_command->add_option("--sizes-kib", bench_request.sizes_kib,
                            "tensor sizes in KiB (default: 64 1024 16384 262144)");
  bench_command->add_option("--filter", bench_request.filter,
                            "only cases whose name contains this text, e.g. s2d/NCHW/");
  bench_command->add_option("--repetitions", bench_request.repetitions, "samples per cell (median taken)")
      ->capture_default_str();
  bench_command
      ->add_option("--dst-offset", bench_request.dst_offset_bytes,
                   "start every output (and memcpy's destination) this many bytes past a 64-byte boundary, "
                   "as numpy's 16-byte aligned out= arrays do: 0, 8, 16, ..., 56")
      ->capture_default_str();
  bench_command->add_flag("--vector-copy", bench_request.vector_copy,
                          "also time a copy by plain vector loads and stores (regrid's store path) and report "
                          "the ratio to it: below 1 MiB glibc's memcpy uses rep movsb, faster than any vector "
                          "loop on some CPUs");
  bench_command->callback([&selected] { selected = bench; });
  app.add_subcommand("demo", "Run the seed documents' worked examples and check them")->callback([&selected] {
    selected = demo;
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForAllHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ParseError& failure) {
    std::cerr << "regrid: " << failure.what() << " (run 'regrid --help' for usage)\n";
    return regrid::cli::exit_invalid;
  }

  switch (selected) {
    case s2d: return regrid::cli::run_space_depth(to_depth_request);
    case d2s: return regrid::cli::run_space_depth(to_space_request);
    case roi: return regrid::cli::run_roi_pool(roi_request);
    case roi_backward: return regrid::cli::run_roi_pool_backward(roi_backward_request);
    case demo: return regrid::cli::run_demo(std::cout);
    case bench: return regrid::cli::run_bench(bench_request);
    default: return regrid::cli::exit_invalid;
  }
}
