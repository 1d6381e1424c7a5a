// regrid: command-line front end over the library. Arrays travel as NumPy .npy files.
#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.hpp"
#include "regrid/version.hpp"

namespace {

void add_space_depth_command(CLI::App& app, regrid::cli::space_depth_request& request, bool to_depth,
                             int& selected, int id) {
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
  command->add_option("--framework", request.framework,
                      "rule set: default | tf | onnx | openvino | nnapi | torch | directml")
      ->capture_default_str();
  command->add_option("--dtype", request.dtype,
                      "read the input's elements as this type, e.g. bfloat16 over 2-byte data");
  command->callback([&selected, id] { selected = id; });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"regrid " REGRID_VERSION_STRING
               ": SpaceToDepth / DepthToSpace exactly as TensorFlow, TFLite/NNAPI, ONNX, OpenVINO, "
               "DirectML and PyTorch define them, on NumPy .npy files."};
  app.require_subcommand(1);
  app.set_version_flag("--version", REGRID_VERSION_STRING);

  enum command_id { none, s2d, d2s, demo };
  int selected = none;
  regrid::cli::space_depth_request to_depth_request;
  regrid::cli::space_depth_request to_space_request;
  to_space_request.to_depth = false;
  add_space_depth_command(app, to_depth_request, true, selected, s2d);
  add_space_depth_command(app, to_space_request, false, selected, d2s);
  app.add_subcommand("demo", "Run the seed documents' worked examples and check them")
      ->callback([&selected] { selected = demo; });

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
    case demo: return regrid::cli::run_demo(std::cout);
    default: return regrid::cli::exit_invalid;
  }
}
