// Two plans of each grid case, timed against each other in one process: the A/B that decides a
// planning rule. Each named case is planned twice, under two ISA caps, or with an environment
// variable set to two values while planning and before each run (a temporary switch in the planner
// or the run), or once and run on two thread counts; then memcpy and plan A, memcpy and plan B run
// in turn on the same buffers, and the medians are compared. The buffers start on cache lines, as the grid's
// do (`regrid bench`), the output --dst-offset bytes past one (its --dst-offset): until this took
// them from std::vector, outputs of 128 KiB and more started 16 bytes past a line (glibc's mmap'd
// blocks), where a streamed 8-way de-interleave of s2d NCHW b8 C64 bytes at 256 MiB ran at 0.33 of
// memcpy, 0.80 on a line (Intel Xeon, one thread). Whole-grid runs alternated between binaries
// drift with this machine's memory bandwidth from one run to the next (memcpy at 16 MiB 26-39 GB/s
// on a 2-vCPU Zen 4); plans alternated call by call do not. Each plan starts in the cache state
// the memcpy before it leaves (the output in the caller's cache where it fits); other effects of
// the order remain, so run each A/B in both orders (swap A and B) and take the geometric mean per
// case. That state is not the grid's where the output about fits the last-level cache: do not
// decide between streaming and ordinary stores here. On a Zen 5 (32 MiB L3) at 16 MiB, the run
// copies of 64 bytes or more ran 1.2-2.3x faster with ordinary stores than streamed here, each
// plan after a memcpy that left its output cached, and 0.67x as fast in regrid bench (36 cells,
// alternate processes, twice), whose calls follow calls of their own kind. Such cases (one plan
// streaming, the other not, under 64 MiB) are marked, and counted at the end: a Zen 5 A/B of s2d
// b3 run copies against streamed gathers at 16 MiB read 1.30x here and 0.77x in regrid bench.
//
//   build/release/bench/regrid_plan_ab --cases FILE --size-kib 16384 [--threads 1] [--repetitions 11]
//       [--dst-offset 0] [--plans-only | --describe]
//       (--isa avx512vbmi avx2 | --threads-ab 1 2 | --env NAME VALUE_A VALUE_B)
//
// FILE lists case names as `regrid bench` prints them (s2d/NCHW/DCR/x8/b2/c3/16MiB), one per
// line; VALUE "-" leaves the variable unset. Prints, per case, op time A / op time B (above 1: B
// is faster), each plan's ratio to memcpy and the two plans' kernels ("same K" where the plans
// describe alike), then the geometric mean over the cases.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "regrid/regrid.hpp"
#include "space_depth_cases.hpp"

namespace {

struct options {
  std::string cases_file;
  std::int64_t size_kib = 0;
  int threads = 1;
  int repetitions = 11;
  std::int64_t dst_offset = 0;  ///< bytes past a 64-byte boundary the output starts at
  bool plans_only = false;      ///< name the two plans per case, untimed: which cases an A/B would change
  bool describe = false;        ///< --plans-only, each plan also described in full (plan.describe())
  std::string mode;             // "isa", "threads", "env"
  std::string variable;
  std::string value_a;
  std::string value_b;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "regrid_plan_ab: %s\nusage: regrid_plan_ab --cases FILE --size-kib N [--threads N] [--repetitions N] "
               "[--dst-offset N] [--plans-only | --describe] "
               "(--isa A B | --threads-ab A B | --env NAME A B)\n",
               why);
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  auto next = [&](int& i) -> std::string {
    if (i + 1 >= argc) usage("an option lacks its value");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--cases") {
      o.cases_file = next(i);
    } else if (arg == "--size-kib") {
      o.size_kib = std::atoll(next(i).c_str());
    } else if (arg == "--threads") {
      o.threads = std::atoi(next(i).c_str());
    } else if (arg == "--dst-offset") {
      o.dst_offset = std::atoll(next(i).c_str());
    } else if (arg == "--plans-only") {
      o.plans_only = true;
    } else if (arg == "--describe") {
      o.plans_only = true;
      o.describe = true;
    } else if (arg == "--repetitions") {
      o.repetitions = std::atoi(next(i).c_str());
    } else if (arg == "--isa" || arg == "--threads-ab") {
      o.mode = arg == "--isa" ? "isa" : "threads";
      o.value_a = next(i);
      o.value_b = next(i);
    } else if (arg == "--env") {
      o.mode = "env";
      o.variable = next(i);
      o.value_a = next(i);
      o.value_b = next(i);
    } else {
      usage(("unknown option " + arg).c_str());
    }
  }
  if (o.cases_file.empty() || o.size_kib <= 0 || o.mode.empty() || o.repetitions < 1 || o.threads < 1) {
    usage("--cases, --size-kib and one of --isa, --threads-ab, --env are required");
  }
  if (o.dst_offset < 0 || o.dst_offset >= 64) usage("--dst-offset takes 0 to 63 bytes");
  return o;
}

void set_variable(const std::string& name, const std::string& value) {
  if (value == "-") {
    unsetenv(name.c_str());
  } else {
    setenv(name.c_str(), value.c_str(), 1);
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Outputs from this size on no longer stay in any last-level cache the rules were measured on
// (64 MiB: where the planner's streaming rules stop asking whether the output could stay cached).
constexpr std::int64_t min_uncached_output_bytes = std::int64_t{64} << 20;

// Whether one plan writes with streaming stores and the other does not, as their descriptions say
// (each plan's own, not the one it keeps for more threads): kernels and shuffles that stream say
// "streaming".
bool streaming_differs(const std::string& a, const std::string& b) {
  auto streams = [](const std::string& text) {
    const std::string own = text.substr(0, text.find("; on more threads"));
    return own.find("streaming") != std::string::npos;
  };
  return streams(a) != streams(b);
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  std::set<std::string> wanted;
  {
    std::ifstream in(o.cases_file);
    if (!in) usage(("cannot read " + o.cases_file).c_str());
    std::string line;
    while (std::getline(in, line)) {
      const std::string name = line.substr(0, line.find(' '));
      if (!name.empty()) wanted.insert(name);
    }
  }
  auto isa_named = [](const std::string& text) {
    const std::optional<regrid::isa> level = regrid::parse_isa(text);
    if (!level) usage(("unknown ISA " + text).c_str());
    return *level;
  };
  auto prepare = [&](const std::string& value) {  // before planning plan A or B
    if (o.mode == "isa") regrid::set_max_isa(isa_named(value));
    if (o.mode == "env") set_variable(o.variable, value);
  };
  auto before_run = [&](const std::string& value) {  // before running plan A or B
    if (o.mode == "threads") regrid::set_num_threads(std::atoi(value.c_str()));
    if (o.mode == "env") set_variable(o.variable, value);
  };
  regrid::set_num_threads(o.threads);
  const regrid::isa detected = regrid::detected_isa();
  regrid::bench::grid_options grid;
  grid.sizes = {o.size_kib << 10};
  double log_sum = 0;
  int count = 0;
  int streaming_cases = 0;
  for (const regrid::bench::space_depth_case& c : regrid::bench::make_grid(grid)) {
    if (wanted.count(c.name()) == 0) continue;
    prepare(o.value_a);
    const regrid::space_depth_plan plan_a = c.plan();
    prepare(o.value_b);
    const regrid::space_depth_plan plan_b = c.plan();
    if (o.mode == "isa") regrid::set_max_isa(detected);
    // The kernels name the plans; "same" where the two describe alike (the A/B then measures noise).
    const std::string described_a = plan_a.describe();
    const std::string described_b = plan_b.describe();
    std::string kernels =
        described_a == described_b ? "same " + plan_a.kernel() : plan_a.kernel() + " -> " + plan_b.kernel();
    // One plan streaming its output and the other not, where the output could stay in the
    // last-level cache: the memcpy before each run leaves the output cached, a state regrid bench's
    // calls do not start from, so this A/B favours the ordinary stores (see the top of this file).
    if (streaming_differs(described_a, described_b) && c.bytes < min_uncached_output_bytes) {
      kernels += "  [streaming against ordinary stores: decide in regrid bench]";
      ++streaming_cases;
    }
    if (o.plans_only) {
      std::printf("%-40s %s\n", c.name().c_str(), kernels.c_str());
      if (o.describe) {
        std::printf("  A: %s\n", described_a.c_str());
        if (described_b != described_a) std::printf("  B: %s\n", described_b.c_str());
      }
      ++count;
      continue;
    }
    const auto bytes = static_cast<std::size_t>(c.bytes);
    // regrid::tensor storage starts on a 64-byte boundary.
    regrid::tensor src_storage(regrid::dtype::uint8, {static_cast<std::int64_t>(bytes)});
    regrid::tensor dst_storage(regrid::dtype::uint8, {static_cast<std::int64_t>(bytes) + o.dst_offset});
    std::memset(src_storage.data(), 1, bytes);
    const std::byte* const src = src_storage.data();
    std::byte* const dst = dst_storage.data() + o.dst_offset;
    for (int warm = 0; warm < 3; ++warm) {
      plan_a.execute(src, dst);
      plan_b.execute(src, dst);
    }
    std::vector<double> a;
    std::vector<double> b;
    std::vector<double> copy;
    // Each plan runs right after a memcpy of the same bytes, so that both start from the cache
    // state it leaves: run one after the other, on two threads the second found the first's
    // worker holding its half of the output in that core's cache, and at 64 KiB ran about 3x
    // faster than the first whichever plan it was.
    auto copy_then_run = [&](const regrid::space_depth_plan& plan, const std::string& value,
                             std::vector<double>& times) {
      auto start = std::chrono::steady_clock::now();
      std::memcpy(dst, src, bytes);
      copy.push_back(seconds_since(start));
      before_run(value);
      start = std::chrono::steady_clock::now();
      plan.execute(src, dst);
      times.push_back(seconds_since(start));
    };
    for (int r = 0; r < o.repetitions; ++r) {
      copy_then_run(plan_a, o.value_a, a);
      copy_then_run(plan_b, o.value_b, b);
    }
    if (o.mode == "threads") regrid::set_num_threads(o.threads);
    const double time_a = median(a);
    const double time_b = median(b);
    const double time_copy = median(copy);
    std::printf("%.3f %-40s A %.3f ms (%.2f of memcpy)  B %.3f ms (%.2f)  %s\n", time_a / time_b, c.name().c_str(),
                time_a * 1e3, time_copy / time_a, time_b * 1e3, time_copy / time_b, kernels.c_str());
    log_sum += std::log(time_a / time_b);
    ++count;
  }
  if (count == 0) usage("no case of the file is in the grid at that size");
  if (streaming_cases > 0) {
    std::printf(
        "note: in %d case%s one plan streams its output and the other does not, at a size the cache could "
        "hold; time those in regrid bench, the plans in alternate processes\n",
        streaming_cases, streaming_cases == 1 ? "" : "s");
  }
  if (o.plans_only) return 0;
  std::printf("geometric mean A / B: %.3f over %d cases\n", std::exp(log_sum / count), count);
  return 0;
}
