// The regrid command-line tool, run as a process: round trips, error exits and messages,
// and the rule that no output file exists after a failure.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "io/npy.hpp"
#include "regrid/regrid.hpp"
#include "space_depth_cases.hpp"

namespace regrid {
namespace {

namespace fs = std::filesystem;

struct run_result {
  int status;
  std::string out;
  std::string err;
};

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("regrid_cli_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static std::string slurp(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
  }

  run_result run(const std::string& arguments) const {
    const std::string out = path("stdout.txt");
    const std::string err = path("stderr.txt");
    const std::string command = std::string(REGRID_CLI_PATH) + " " + arguments + " >" + out + " 2>" + err;
    const int raw = std::system(command.c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err)};
  }

  fs::path dir_;
};

TEST_F(Cli, DemoRunsEverySeedExample) {
  const run_result result = run("demo");
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("All 11 examples match their documents."), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("MISMATCH"), std::string::npos);
}

TEST_F(Cli, SpaceToDepthAndBackRoundTrip) {
  std::mt19937_64 rng(8);
  tensor x(dtype::float32, {2, 6, 9, 5});
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = static_cast<float>(rng() % 1000) / 7.0f;
  io::write_npy(path("x.npy"), x.view());
  ASSERT_EQ(run(path("x.npy") + " " + path("y.npy") + " --block-size 3 --layout nhwc --mode crd").status, 2)
      << "positional files without a command must be rejected";
  const run_result forward =
      run("space-to-depth " + path("x.npy") + " " + path("y.npy") + " --block-size 3 --layout nhwc --mode crd");
  ASSERT_EQ(forward.status, 0) << forward.err;
  const io::npy_array y = io::read_npy(path("y.npy"));
  const tensor expected = space_to_depth(x, {.block_size = 3, .layout = layout::nhwc, .mode = mode::crd});
  ASSERT_EQ(y.shape, expected.shape());
  EXPECT_EQ(std::memcmp(y.storage.data(), expected.data(), expected.size_bytes()), 0);
  const run_result backward =
      run("depth-to-space " + path("y.npy") + " " + path("z.npy") + " -b 3 --layout NHWC --mode depth_first");
  ASSERT_EQ(backward.status, 0) << backward.err;
  const io::npy_array z = io::read_npy(path("z.npy"));
  EXPECT_EQ(std::memcmp(z.storage.data(), x.data(), x.size_bytes()), 0);
}

TEST_F(Cli, Bfloat16KeepsItsDescriptor) {
  tensor x(dtype::bfloat16, {1, 4, 2, 2});
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data_as<std::uint16_t>()[i] = static_cast<std::uint16_t>(0x3f80 + i);
  io::write_npy(path("x.npy"), x.view());
  const run_result result = run("depth-to-space " + path("x.npy") + " " + path("y.npy") +
                                " --block-size 2 --framework TORCH --dtype bfloat16");
  ASSERT_EQ(result.status, 0) << result.err;
  const io::npy_array y = io::read_npy(path("y.npy"), dtype::bfloat16);
  EXPECT_EQ(y.descr, "<V2");
  EXPECT_EQ(y.shape, (shape_t{1, 1, 4, 4}));
}

TEST_F(Cli, InvalidInputExitsTwoWithTheSentenceAndNoOutput) {
  io::write_npy(path("x.npy"), tensor(dtype::float32, {1, 30, 32, 3}).view());
  const run_result indivisible =
      run("space-to-depth " + path("x.npy") + " " + path("y.npy") + " --block-size 4 --framework tf");
  EXPECT_EQ(indivisible.status, 2);
  EXPECT_EQ(indivisible.err, "space_to_depth: input height 30 is not divisible by block_size 4\n");
  EXPECT_FALSE(fs::exists(path("y.npy")));

  const run_result bad_layout =
      run("space-to-depth " + path("x.npy") + " " + path("y.npy") + " --block-size 2 --layout NWHC");
  EXPECT_EQ(bad_layout.status, 2);
  EXPECT_EQ(bad_layout.err,
            "regrid: unknown layout 'NWHC' (choose one of NHWC, NCHW, NCHW_VECT_C, channels_first, channels_last)\n");
  EXPECT_FALSE(fs::exists(path("y.npy")));

  {
    std::ofstream truncated(path("truncated.npy"), std::ios::binary);
    const std::string image = io::format_npy(tensor(dtype::int16, {4, 4}).view());
    truncated << image.substr(0, image.size() - 3);
  }
  const run_result truncated = run("depth-to-space " + path("truncated.npy") + " " + path("y.npy") + " -b 2");
  EXPECT_EQ(truncated.status, 2);
  EXPECT_NE(truncated.err.find("is truncated"), std::string::npos) << truncated.err;
  EXPECT_FALSE(fs::exists(path("y.npy")));

  const run_result missing = run("space-to-depth " + path("absent.npy") + " " + path("y.npy") + " -b 2");
  EXPECT_EQ(missing.status, 2);
  EXPECT_EQ(missing.err, "npy: cannot open " + path("absent.npy") + " for reading\n");

  const run_result no_block = run("space-to-depth " + path("x.npy") + " " + path("y.npy"));
  EXPECT_EQ(no_block.status, 2);
  EXPECT_NE(no_block.err.find("--block-size is required"), std::string::npos) << no_block.err;
  EXPECT_FALSE(fs::exists(path("y.npy")));

  EXPECT_EQ(run("no-such-command").status, 2);
  EXPECT_EQ(run("").status, 2);
}

TEST_F(Cli, RoiPoolForwardAndBackward) {
  tensor x(dtype::float32, {2, 3, 6, 6});
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = static_cast<float>((i * 37) % 101);
  tensor rois(dtype::float32, {2, 5});
  const float boxes[] = {1, 0, 0, 5, 5, 0, 2, 1, 9, 7};
  std::copy(boxes, boxes + 10, rois.data_as<float>());
  io::write_npy(path("x.npy"), x.view());
  io::write_npy(path("rois.npy"), rois.view());
  const run_result forward =
      run("roi-pool " + path("x.npy") + " " + path("rois.npy") + " " + path("y.npy") +
          " --pooled-size 2 3 --spatial-scale 0.5 --framework TorchVision --argmax " + path("a.npy"));
  ASSERT_EQ(forward.status, 0) << forward.err;
  const roi_pool_options options{
      .pooled_height = 2, .pooled_width = 3, .spatial_scale = 0.5, .framework = roi_framework::torchvision};
  const roi_pool_result expected = roi_pool(x, rois, options, std::nullopt, true);
  const io::npy_array y = io::read_npy(path("y.npy"));
  const io::npy_array a = io::read_npy(path("a.npy"));
  ASSERT_EQ(y.shape, expected.output.shape());
  EXPECT_EQ(std::memcmp(y.storage.data(), expected.output.data(), expected.output.size_bytes()), 0);
  EXPECT_EQ(std::memcmp(a.storage.data(), expected.argmax.data(), expected.argmax.size_bytes()), 0);

  const tensor batch = roi_batch_indices(rois, 2, options);
  io::write_npy(path("batch.npy"), batch.view());
  const run_result backward = run("roi-pool-backward " + path("y.npy") + " " + path("a.npy") + " " + path("g.npy") +
                                  " --input-shape 2 3 6 6 --roi-batch " + path("batch.npy"));
  ASSERT_EQ(backward.status, 0) << backward.err;
  const tensor grad = roi_pool_backward(expected.output, expected.argmax, x.shape(), layout::nchw, batch.view());
  const io::npy_array g = io::read_npy(path("g.npy"));
  EXPECT_EQ(std::memcmp(g.storage.data(), grad.data(), grad.size_bytes()), 0);

  const run_result missing_batch =
      run("roi-pool-backward " + path("y.npy") + " " + path("a.npy") + " " + path("h.npy") + " --input-shape 2 3 6 6");
  EXPECT_EQ(missing_batch.status, 2);
  EXPECT_EQ(missing_batch.err,
            "roi_pool_backward: the batch index of each ROI is needed when the input batch is 2 (pass roi_batch)\n");
  EXPECT_FALSE(fs::exists(path("h.npy")));

  const run_result bad_scale = run("roi-pool " + path("x.npy") + " " + path("rois.npy") + " " + path("z.npy") +
                                   " --pooled-size 2 2 --spatial-scale -1 --argmax " + path("za.npy"));
  EXPECT_EQ(bad_scale.status, 2);
  EXPECT_EQ(bad_scale.err, "roi_pool: spatial_scale -1 must be a finite number greater than 0\n");
  EXPECT_FALSE(fs::exists(path("z.npy")));
  EXPECT_FALSE(fs::exists(path("za.npy")));
}

TEST_F(Cli, HelpListsTheCommands) {
  const run_result help = run("--help");
  EXPECT_EQ(help.status, 0);
  for (const char* command : {"space-to-depth", "depth-to-space", "roi-pool", "roi-pool-backward", "demo"}) {
    EXPECT_NE(help.out.find(command), std::string::npos) << command;
  }
  const run_result command_help = run("space-to-depth --help");
  EXPECT_EQ(command_help.status, 0);
  EXPECT_NE(command_help.out.find("--framework"), std::string::npos);
}

// `bench --dst-offset` times outputs that start off a cache line, and refuses offsets that would
// put an element off its own alignment or past a line.
TEST_F(Cli, BenchTimesOutputsOffCacheLines) {
  const run_result offset =
      run("bench --threads 1 --repetitions 1 --sizes-kib 64 --dst-offset 16 --filter s2d/NCHW/DCR/x32/b2/c1/");
  EXPECT_EQ(offset.status, 0) << offset.err;
  EXPECT_NE(offset.out.find("start 16 bytes past a 64-byte boundary"), std::string::npos) << offset.out;
  EXPECT_NE(offset.out.find("s2d/NCHW/DCR/x32/b2/c1/64KiB"), std::string::npos) << offset.out;
  for (const char* bad : {"12", "64", "-8"}) {
    const run_result refused = run(std::string("bench --quick --dst-offset ") + bad);
    EXPECT_EQ(refused.status, 2) << bad;
    EXPECT_NE(refused.err.find("is not a multiple of 8 bytes (the widest element) below 64"), std::string::npos)
        << refused.err;
    EXPECT_EQ(refused.out.find("s2d/"), std::string::npos) << refused.out;
  }
}

// `bench` refuses, in one sentence and before timing anything, what it cannot run: a thread
// count or a repetition count under 1, a size outside 1 KiB to 4 GiB, a filter no case matches.
TEST_F(Cli, BenchRefusesWhatItCannotRun) {
  const std::pair<const char*, const char*> refusals[] = {
      {"--threads 1 0", "regrid bench: thread count 0 must be at least 1\n"},
      {"--repetitions 0", "regrid bench: repetitions 0 must be at least 1\n"},
      {"--sizes-kib 64 0", "regrid bench: size 0 KiB is not between 1 and 4194304 KiB\n"},
      {"--sizes-kib 4194305", "regrid bench: size 4194305 KiB is not between 1 and 4194304 KiB\n"},
      {"--filter no/such/case",
       "regrid bench: no case of the grid matches filter 'no/such/case' at the sizes asked for\n"},
  };
  for (const auto& [arguments, message] : refusals) {
    const run_result refused = run(std::string("bench --quick ") + arguments);
    EXPECT_EQ(refused.status, 2) << arguments;
    EXPECT_EQ(refused.err, message) << arguments;
    EXPECT_EQ(refused.out, "") << arguments;
  }
}

// `bench --vector-copy` times a copy by plain vector loads and stores beside memcpy and reports
// the op's ratio to it on every line (GB/s and ratio, both positive) and in the summary.
TEST_F(Cli, BenchReportsTheRatioToAVectorCopy) {
  const run_result bench =
      run("bench --threads 1 --repetitions 1 --sizes-kib 64 --vector-copy --filter s2d/NCHW/DCR/x32/b2/c1/");
  ASSERT_EQ(bench.status, 0) << bench.err;
  EXPECT_NE(bench.out.find("vratio = vector copy time / op time"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("vmedian"), std::string::npos) << bench.out;
  const std::size_t line_start = bench.out.find("s2d/NCHW/DCR/x32/b2/c1/64KiB");
  ASSERT_NE(line_start, std::string::npos) << bench.out;
  std::istringstream line(bench.out.substr(line_start, bench.out.find('\n', line_start) - line_start));
  std::string name;
  long long bytes = 0;
  int threads = 0;
  double op_rate = 0, copy_rate = 0, ratio = 0, vector_copy_rate = 0, vector_copy_ratio = 0;
  line >> name >> bytes >> threads >> op_rate >> copy_rate >> ratio >> vector_copy_rate >> vector_copy_ratio;
  ASSERT_FALSE(line.fail()) << line.str();
  EXPECT_GT(vector_copy_rate, 0.0) << line.str();
  EXPECT_NEAR(vector_copy_ratio, op_rate / vector_copy_rate, 0.01 + 0.01 * vector_copy_ratio) << line.str();
}

// `bench` names the kind of plan each cell ran at the end of its line, and tallies the cells under
// their target (0.9 of memcpy from 1 MiB, 0.6 below) per kind of plan, thread count and size.
TEST_F(Cli, BenchTalliesTheCellsUnderTargetByKindOfPlan) {
  const run_result bench = run("bench --threads 1 2 --repetitions 1 --sizes-kib 64 1024 --filter s2d/NHWC/CRD/x16/b2/");
  ASSERT_EQ(bench.status, 0) << bench.err;
  struct expected_tally {
    int run = 0;
    int under = 0;
    bool rounding_decides = false;  // a ratio printed within rounding of its target
  };
  std::map<std::tuple<std::string, int, std::string>, expected_tally> expected;  // kind, threads, size
  std::istringstream lines(bench.out);
  int cells = 0;
  for (std::string text; std::getline(lines, text);) {
    if (!text.starts_with("s2d/NHWC/CRD/x16/b2/")) continue;
    std::istringstream words(text);
    std::string name, kind;
    long long bytes = 0;
    int threads = 0;
    double op_rate = 0, copy_rate = 0, ratio = 0;
    words >> name >> bytes >> threads >> op_rate >> copy_rate >> ratio >> kind;
    ASSERT_FALSE(words.fail()) << text;
    EXPECT_TRUE(kind.starts_with("copy") || kind.find("interleave") != std::string::npos ||
                kind.starts_with("gather") || kind.starts_with("transpose"))
        << text;
    const std::string size = name.substr(name.rfind('/') + 1);
    const double target = size == "64KiB" ? 0.6 : 0.9;
    expected_tally& tally = expected[{kind, threads, size}];
    ++tally.run;
    tally.under += ratio < target ? 1 : 0;
    tally.rounding_decides |= std::abs(ratio - target) <= 0.006;
    ++cells;
  }
  ASSERT_EQ(cells, 20) << bench.out;  // 5 channel counts, 2 sizes, 2 thread counts
  const std::size_t block = bench.out.find("\nunder target: cells under 0.90 of memcpy (0.60 below 1MiB)");
  std::map<std::pair<std::string, int>, std::vector<std::string>> listed;  // kind, threads -> per size
  if (block != std::string::npos) {
    std::istringstream rows(bench.out.substr(block + 1));
    std::string heading, columns;
    std::getline(rows, heading);
    std::getline(rows, columns);
    EXPECT_TRUE(columns.starts_with("plan")) << columns;
    for (std::string text; std::getline(rows, text) && !text.empty();) {
      std::istringstream words(text);
      std::string kind, at_64_kib, at_1_mib, least;
      int threads = 0;
      words >> kind >> threads >> at_64_kib >> at_1_mib >> least;
      ASSERT_FALSE(words.fail()) << text;
      listed[{kind, threads}] = {at_64_kib, at_1_mib};
    }
  }
  // Every kind with a cell under target is listed with its counts; the others are not.
  std::map<std::pair<std::string, int>, bool> any_under;
  for (const auto& [key, tally] : expected) {
    const auto& [kind, threads, size] = key;
    if (tally.under > 0 && !tally.rounding_decides) any_under[{kind, threads}] = true;
  }
  for (const auto& [key, tally] : expected) {
    const auto& [kind, threads, size] = key;
    const auto row = listed.find({kind, threads});
    if (row == listed.end()) {
      const bool has_under = any_under[std::make_pair(kind, threads)];
      EXPECT_FALSE(has_under) << kind << " on " << threads << " threads is not listed\n" << bench.out;
      continue;
    }
    const std::string& count = row->second[size == "64KiB" ? 0 : 1];
    const std::string run_count = "/" + std::to_string(tally.run);
    EXPECT_TRUE(count.ends_with(run_count)) << kind << " " << size << ": " << count << "\n" << bench.out;
    if (!tally.rounding_decides) {
      EXPECT_EQ(count, std::to_string(tally.under) + run_count) << kind << " " << size << "\n" << bench.out;
    }
  }
  EXPECT_EQ(block != std::string::npos, !any_under.empty()) << bench.out;
}

// `bench` ends with the grid's targets against what it measured: per size and thread count the
// cells' min / median ratio to memcpy and the target that applies (median >= 0.6 for one thread
// at 64 KiB), then the op throughput on two threads over one, cell by cell (in cache: median >= 1.6).
TEST_F(Cli, BenchReportsTheTargetsAgainstWhatItMeasured) {
  const char* cell = "s2d/NCHW/DCR/x32/b2/c1/64KiB";
  const run_result bench = run(std::string("bench --threads 1 2 --repetitions 1 --sizes-kib 64 --filter ") + cell);
  ASSERT_EQ(bench.status, 0) << bench.err;
  // The cell's two lines: name bytes threads op-GB/s memcpy-GB/s ratio.
  std::map<int, std::pair<double, double>> rate_and_ratio;
  for (std::size_t at = bench.out.find(cell); at != std::string::npos; at = bench.out.find(cell, at + 1)) {
    std::istringstream line(bench.out.substr(at, bench.out.find('\n', at) - at));
    std::string name;
    long long bytes = 0;
    int threads = 0;
    double op_rate = 0, copy_rate = 0, ratio = 0;
    line >> name >> bytes >> threads >> op_rate >> copy_rate >> ratio;
    ASSERT_FALSE(line.fail()) << line.str();
    rate_and_ratio[threads] = {op_rate, ratio};
  }
  ASSERT_EQ(rate_and_ratio.size(), 2U) << bench.out;
  // A report line after `heading` that starts with `size` and `threads`: its words.
  auto report_line = [&](const std::string& heading, int threads) {
    const std::size_t block = bench.out.find(heading);
    EXPECT_NE(block, std::string::npos) << bench.out;
    std::istringstream lines(block == std::string::npos ? "" : bench.out.substr(block));
    for (std::string text; std::getline(lines, text);) {
      std::istringstream words(text);
      std::string size;
      int thr = 0;
      if (words >> size >> thr && size == "64KiB" && thr == threads) {
        std::vector<std::string> all;
        for (std::string word; words >> word;) all.push_back(word);
        return all;
      }
    }
    return std::vector<std::string>{};
  };
  const std::vector<std::string> one = report_line("\ntargets: ratio to memcpy", 1);
  ASSERT_GE(one.size(), 8U) << bench.out;  // cases min median at-0.9 "median" ">=" 0.60 met
  const double ratio = rate_and_ratio[1].second;
  EXPECT_EQ(one[0], "1");
  EXPECT_NEAR(std::stod(one[1]), ratio, 0.006) << bench.out;
  EXPECT_NEAR(std::stod(one[2]), ratio, 0.006) << bench.out;
  // Printed values are rounded to two places: a count or verdict is checked where rounding cannot
  // have decided it.
  auto clear_of = [](double value, double threshold) { return std::abs(value - threshold) > 0.006; };
  if (clear_of(ratio, 0.9)) {
    EXPECT_EQ(one[3], ratio >= 0.9 ? "1" : "0") << bench.out;
  }
  EXPECT_EQ(one[4] + " " + one[5] + " " + one[6], "median >= 0.60") << bench.out;
  if (clear_of(ratio, 0.6)) {
    EXPECT_EQ(one[7], ratio >= 0.6 ? "yes" : "no") << bench.out;
  }
  const std::vector<std::string> scaled = report_line("\nscaling: op throughput", 2);
  ASSERT_GE(scaled.size(), 9U) << bench.out;  // cases min median bound "median" ">=" 1.60 "(in cache)" met
  // The rates are printed to two places: at the 1 to 3 GB/s of a sanitizer build each carries up
  // to half a percent of rounding into their quotient, besides the quotient's own rounding.
  const double one_thread_rate = rate_and_ratio[1].first;
  const double two_thread_rate = rate_and_ratio[2].first;
  const double expected_scaling = two_thread_rate / one_thread_rate;
  const double rates_rounding = expected_scaling * (0.005 / one_thread_rate + 0.005 / two_thread_rate);
  EXPECT_EQ(scaled[0], "1");
  EXPECT_NEAR(std::stod(scaled[2]), expected_scaling, 0.006 + rates_rounding) << bench.out;
  EXPECT_EQ(scaled[4] + " " + scaled[5] + " " + scaled[6], "median >= 1.60") << bench.out;
  if (clear_of(std::stod(scaled[2]), 1.6)) {
    EXPECT_EQ(scaled.back(), std::stod(scaled[2]) >= 1.6 ? "yes" : "no") << bench.out;
  }
  // The bound is what the measured hand-off allows the cell: its one-thread time t (the bytes read
  // and written over its one-thread rate) over t / 2 + the hand-off.
  const std::string handoff_text = "\nhand-off: a call shared by 2 threads took ";
  const std::size_t handoff_at = bench.out.find(handoff_text);
  ASSERT_NE(handoff_at, std::string::npos) << bench.out;
  const double handoff_us = std::stod(bench.out.substr(handoff_at + handoff_text.size()));
  EXPECT_GT(handoff_us, 0.0) << bench.out;
  const double one_thread_us = 2.0 * 65536 / (one_thread_rate * 1e9) * 1e6;
  const double bound = one_thread_us / (one_thread_us / 2 + handoff_us);
  // Rounding: the rate's (relative 0.005 / rate), the hand-off's (0.005 us), the bound's own.
  const double bound_rounding = bound * (0.005 / one_thread_rate + 0.005 / handoff_us) + 0.006;
  EXPECT_NEAR(std::stod(scaled[3]), bound, bound_rounding) << bench.out;
  EXPECT_LE(std::stod(scaled[3]), 2.0 + 0.005) << bench.out;
  // Beside it, the floor under the hand-off: a cache line's round trip between two threads, timed
  // where the machine has two CPUs for them.
  const std::string trip_text = "\na cache line's round trip between two threads: ";
  const std::size_t trip_at = bench.out.find(trip_text);
  if (std::thread::hardware_concurrency() < 2) {
    EXPECT_EQ(trip_at, std::string::npos) << bench.out;
  } else {
    ASSERT_NE(trip_at, std::string::npos) << bench.out;
    EXPECT_GT(std::stod(bench.out.substr(trip_at + trip_text.size())), 0.0) << bench.out;
  }
}

// The bench's vector copy copies exactly the bytes asked for, under every ISA cap the host
// allows, at every length around its vector and unrolled-loop boundaries and off alignment.
TEST(BenchVectorCopy, CopiesExactlyTheBytesAskedForUnderEveryIsa) {
  const isa saved = active_isa();
  std::vector<std::byte> source(1200);
  for (std::size_t i = 0; i < source.size(); ++i) source[i] = static_cast<std::byte>(i * 7 + 3);
  for (isa cap : {isa::scalar, isa::avx2, isa::avx512}) {
    if (cap > detected_isa()) continue;
    set_max_isa(cap);
    for (std::size_t offset : {0, 1, 13, 64}) {
      for (std::size_t bytes = 0; bytes + offset + 8 <= 1100; bytes += bytes < 300 ? 1 : 97) {
        std::vector<std::byte> destination(1200, std::byte{0xee});
        bench::vector_copy(destination.data() + offset, source.data() + 3, bytes);
        for (std::size_t i = 0; i < destination.size(); ++i) {
          const bool copied = i >= offset && i < offset + bytes;
          ASSERT_EQ(destination[i], copied ? source[3 + i - offset] : std::byte{0xee})
              << to_string(cap) << " offset " << offset << " bytes " << bytes << " at " << i;
        }
      }
    }
  }
  set_max_isa(saved);
}

}  // namespace
}  // namespace regrid
