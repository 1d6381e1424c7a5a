// The permute engine on its own: normalization, kernel choice by run length, and random
// permutations of random shapes against a naive element loop.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/permute/gather.hpp"
#include "kernels/permute/permute.hpp"
#include "kernels/stream_store.hpp"
#include "regrid/runtime.hpp"
#include "runtime/cpu_features.hpp"
#include "runtime/thread_pool.hpp"

namespace regrid {
// Parameterized tests print the ISA by name.
void PrintTo(isa value, std::ostream* os) { *os << to_string(value); }
}  // namespace regrid

namespace regrid::kernels {
namespace {

// The kernels and staging this file expects each cap to plan are the common rules, those of cores
// with no rules of their own: plans are made as for such cores here, on any CPU. Those of Intel's
// and AMD's cores (some AVX-512 shuffles take the AVX2 plan) have tests of their own:
// IntelTakesTheAvx2PlanWhereItsAvx512ShufflesLose and AmdTakesTheAvx2SegmentsWhereItsStagingLoses.
class PlansByTheCommonRules : public testing::Environment {
 public:
  void SetUp() override { runtime::plan_for_core_kind_for_testing(runtime::core_kind::other); }
  void TearDown() override { runtime::plan_for_core_kind_for_testing(std::nullopt); }
};
[[maybe_unused]] testing::Environment* const plans_by_the_common_rules =
    testing::AddGlobalTestEnvironment(new PlansByTheCommonRules);

// Tests that plan for other cores or cap the ISA put both back at their end, but a failed ASSERT
// returns before that: this puts back what each test started with, so that a failure cannot change
// the plans of the tests after it.
class RestoresPlanningStateAfterEachTest : public testing::EmptyTestEventListener {
 public:
  void OnTestStart(const testing::TestInfo& /*test*/) override {
    cores_at_start_ = runtime::planning_core_kind();
    isa_at_start_ = active_isa();
  }
  void OnTestEnd(const testing::TestInfo& /*test*/) override {
    runtime::plan_for_core_kind_for_testing(cores_at_start_);
    set_max_isa(isa_at_start_);
  }

 private:
  runtime::core_kind cores_at_start_ = runtime::core_kind::other;
  isa isa_at_start_ = isa::scalar;
};
[[maybe_unused]] const bool restores_planning_state_after_each_test = [] {
  testing::UnitTest::GetInstance()->listeners().Append(new RestoresPlanningStateAfterEachTest);
  return true;
}();

// Both kinds of AMD's cores with AVX-512, which share the *_on_amd rules of plan_permute.
constexpr std::array amd_core_kinds{runtime::core_kind::amd_zen4, runtime::core_kind::amd_zen5};
// The cores that take the staging rules measured on AMD's (takes_amd_staging_rules) and on a
// Zen 4 (takes_zen4_staging_rules).
constexpr std::array amd_staging_core_kinds{runtime::core_kind::amd_zen4, runtime::core_kind::amd_zen5,
                                            runtime::core_kind::intel};
constexpr std::array zen4_staging_core_kinds{runtime::core_kind::amd_zen4, runtime::core_kind::intel};
// Every kind of core plan_permute tells apart.
constexpr std::array every_core_kind{runtime::core_kind::other, runtime::core_kind::amd_zen4,
                                     runtime::core_kind::amd_zen5, runtime::core_kind::intel};

std::vector<permute_axis> packed_transpose(const std::vector<std::int64_t>& shape, const std::vector<int>& perm,
                                           std::int64_t width) {
  // Source is C-contiguous in `shape`; destination is C-contiguous in the permuted shape.
  std::vector<std::int64_t> src_strides(shape.size());
  std::int64_t stride = width;
  for (std::size_t k = shape.size(); k-- > 0;) {
    src_strides[k] = stride;
    stride *= shape[k];
  }
  std::vector<permute_axis> axes(shape.size());
  stride = width;
  for (std::size_t i = perm.size(); i-- > 0;) {
    const auto from = static_cast<std::size_t>(perm[i]);
    axes[i] = {shape[from], src_strides[from], stride};
    stride *= shape[from];
  }
  return axes;
}

TEST(PermutePlan, FusesAdjacentAxesAndFoldsContiguousRuns) {
  // The shuffle and tile plans; with VBMI some of these become gathers (PermuteGather below).
  set_max_isa(std::min(detected_isa(), isa::avx512));
  // NHWC DCR space_to_depth, b = 2, C = 16 float32: runs of b * C * 4 = 128 bytes.
  const auto axes = packed_transpose({1, 4, 2, 6, 2, 16}, {0, 1, 3, 2, 4, 5}, 4);
  const permute_plan plan = plan_permute(axes, 4);
  EXPECT_EQ(plan.width, 128U);
  EXPECT_EQ(plan.total_bytes, 1 * 4 * 2 * 6 * 2 * 16 * 4);
  EXPECT_EQ(kernel_name(plan), active_isa() == isa::scalar ? "copy_runs_u64_scalar"
                                                           : "copy_x1024_" + std::string(to_string(active_isa())));
  // The tile (6 x 2 runs, 1.5 KiB) is small, so each call walks the remaining axis as well.
  EXPECT_TRUE(plan.outer.empty()) << describe(plan);
  EXPECT_EQ(plan.plane.extent, 4) << describe(plan);

  // NCHW CRD depth_to_space keeps single elements and interleaves b = 2 source rows.
  const auto interleave = plan_permute(packed_transpose({1, 3, 2, 2, 5, 7}, {0, 1, 4, 2, 5, 3}, 4), 4);
  EXPECT_EQ(interleave.width, 4U);
  EXPECT_EQ(kernel_name(interleave), "interleave2_x32_" + std::string(to_string(active_isa())));
  // ... and its inverse de-interleaves one row into 2.
  const auto deinterleave = plan_permute(packed_transpose({1, 3, 5, 2, 7, 2}, {0, 1, 3, 5, 2, 4}, 4), 4);
  EXPECT_EQ(kernel_name(deinterleave), "deinterleave2_x32_" + std::string(to_string(active_isa())));

  // An identity permutation is one contiguous run.
  const auto identity = plan_permute(packed_transpose({3, 5, 7}, {0, 1, 2}, 2), 2);
  EXPECT_EQ(identity.width, 210U);
  EXPECT_TRUE(identity.outer.empty());
  EXPECT_EQ(identity.col.extent, 1);

  // Size-1 axes vanish; a zero extent means nothing to do.
  EXPECT_EQ(plan_permute(packed_transpose({1, 5, 1, 3}, {2, 3, 0, 1}, 8), 8).outer.size(), 0U);
  EXPECT_EQ(plan_permute(packed_transpose({4, 0, 3}, {2, 1, 0}, 8), 8).total_bytes, 0);
  set_max_isa(isa::avx512vbmi);
}

// The one-shot API's plan cache hands back the same plan for the same problem, a fresh one when
// the axes, the element width or the ISA cap differ, and stays right when more problems pass
// through it than it has slots.
TEST(PermutePlan, CacheKeysOnAxesWidthAndIsa) {
  const auto axes = packed_transpose({1, 3, 2, 2, 5, 7}, {0, 1, 4, 2, 5, 3}, 4);
  const permute_plan* first = &plan_permute_cached(axes, 4);
  const std::string first_text = describe(*first);
  EXPECT_EQ(&plan_permute_cached(axes, 4), first);
  EXPECT_EQ(first_text, describe(plan_permute(axes, 4)));
  auto other = axes;
  other[2].src_stride += 4;  // a padded source row
  EXPECT_NE(&plan_permute_cached(other, 4), first);
  EXPECT_EQ(describe(plan_permute_cached(other, 4)), describe(plan_permute(other, 4)));
  const auto halves = packed_transpose({1, 3, 2, 2, 5, 7}, {0, 1, 4, 2, 5, 3}, 2);
  EXPECT_EQ(describe(plan_permute_cached(halves, 2)), describe(plan_permute(halves, 2)));
  for (isa cap : {isa::scalar, isa::avx2, isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    set_max_isa(cap);
    EXPECT_EQ(kernel_name(plan_permute_cached(axes, 4)), kernel_name(plan_permute(axes, 4))) << to_string(cap);
  }
  set_max_isa(isa::avx512vbmi);
  // Twenty problems through eight slots, twice: every plan matches a fresh one.
  for (int pass = 0; pass < 2; ++pass) {
    for (std::int64_t rows = 1; rows <= 20; ++rows) {
      const auto sized = packed_transpose({rows, 2, 2, 5, 7}, {0, 3, 1, 4, 2}, 4);
      EXPECT_EQ(describe(plan_permute_cached(sized, 4)), describe(plan_permute(sized, 4))) << rows;
    }
  }
  EXPECT_EQ(describe(plan_permute_cached(axes, 4)), first_text);
}

TEST(PermuteRun, RandomPermutationsMatchNaiveCopy) {
  std::mt19937_64 rng(1234);
  const int saved = num_threads();
  for (int trial = 0; trial < 300; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % (trial % 10 == 0 ? 3 : 6));
    std::vector<std::int64_t> shape(static_cast<std::size_t>(rank));
    for (auto& extent : shape) extent = 1 + static_cast<std::int64_t>(rng() % (trial % 10 == 0 ? 40 : 6));
    std::vector<int> perm(static_cast<std::size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    const std::int64_t widths[] = {1, 2, 3, 4, 8, 12, 16};
    const std::int64_t width = widths[rng() % 7];
    const auto axes = packed_transpose(shape, perm, width);
    std::int64_t count = 1;
    for (auto extent : shape) count *= extent;
    std::vector<std::byte> src(static_cast<std::size_t>(count * width));
    for (auto& b : src) b = static_cast<std::byte>(rng());
    std::vector<std::byte> expected(src.size(), std::byte{0x5A});
    // Naive: walk destination indices in order.
    std::vector<std::int64_t> index(axes.size(), 0);
    for (std::int64_t n = 0; n < count; ++n) {
      std::int64_t s = 0;
      std::int64_t d = 0;
      for (std::size_t k = 0; k < axes.size(); ++k) {
        s += index[k] * axes[k].src_stride;
        d += index[k] * axes[k].dst_stride;
      }
      std::memcpy(expected.data() + d, src.data() + s, static_cast<std::size_t>(width));
      for (std::size_t k = axes.size(); k-- > 0;) {
        if (++index[k] < axes[k].extent) break;
        index[k] = 0;
      }
    }
    for (isa cap : {isa::scalar, isa::avx2, isa::avx512, isa::avx512vbmi}) {
      if (cap > detected_isa()) continue;  // this CPU lacks it; the lower levels still run
      set_max_isa(cap);
      for (int threads : {1, 2}) {
        std::vector<std::byte> actual(src.size(), std::byte{0xC3});
        run_permute(plan_permute(axes, static_cast<std::size_t>(width)), src.data(), actual.data(), threads);
        ASSERT_EQ(actual, expected) << "trial " << trial << " threads " << threads << ": "
                                    << describe(plan_permute(axes, static_cast<std::size_t>(width)));
      }
    }
    set_max_isa(isa::avx512vbmi);
  }
  set_num_threads(saved);
}

// Every (de-)interleave kernel: b in {2, 3, 4, 8, 9, 16, 32, 64}, widths 1..32, lengths around the
// vector sizes (and the 8 x 8 blocks of the transposing kernels), padded source rows, on every ISA
// the host has; compared with the plain strided copy.
TEST(PermuteRun, InterleaveKernelsMatchOnEveryIsa) {
  std::mt19937_64 rng(99);
  for (std::int64_t b : {2, 3, 4, 8, 9, 16, 32, 64}) {
    const bool wide = b > 16;
    // 16- and 32-byte elements: the channels-last runs of 4 or 8 four-byte elements.
    for (std::int64_t width : {1, 2, 4, 8, 16, 32}) {
      const bool lanes_wide = width > 8;
      for (std::int64_t length :
           {1, 7, 8, 15, 16, 17, 31, 32, 33, 64, 65, 127, 130, wide || lanes_wide ? 3000 : 40000}) {
        for (bool interleave : {true, false}) {
          const std::int64_t pad = 3 * width;  // distance between the b rows is not b * length
          std::vector<permute_axis> axes;
          if (interleave) {  // dst[r * b + j] = src[j * (length * w + pad) + r * w]
            axes = {{length, width, b * width}, {b, length * width + pad, width}};
          } else {  // dst[j * (length * w + pad) + r * w] = src[r * b * w + j * w]
            axes = {{b, width, length * width + pad}, {length, b * width, width}};
          }
          const std::int64_t span = b * (length * width + pad);
          std::vector<std::byte> src(static_cast<std::size_t>(span));
          for (auto& v : src) v = static_cast<std::byte>(rng());
          std::vector<std::byte> expected(static_cast<std::size_t>(span), std::byte{0x5A});
          for (std::int64_t i = 0; i < axes[0].extent; ++i) {
            for (std::int64_t j = 0; j < axes[1].extent; ++j) {
              std::memcpy(expected.data() + i * axes[0].dst_stride + j * axes[1].dst_stride,
                          src.data() + i * axes[0].src_stride + j * axes[1].src_stride,
                          static_cast<std::size_t>(width));
            }
          }
          for (isa cap : {isa::scalar, isa::avx2, isa::avx512, isa::avx512vbmi}) {
            if (cap > detected_isa()) continue;
            set_max_isa(cap);
            const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
            const bool power_of_two = (b & (b - 1)) == 0;
            if (lanes_wide) {
              // AVX2 and AVX-512, powers of two up to 16 ways.
              const bool shuffles = cap >= isa::avx2 && power_of_two && !wide && length >= 4;
              if (shuffles) {
                EXPECT_EQ(kernel_name(plan), std::string(interleave ? "interleave" : "deinterleave") +
                                                 std::to_string(b) + "_x" + std::to_string(8 * width) +
                                                 (cap == isa::avx2 ? "_avx2" : "_avx512"))
                    << describe(plan);
              } else if (!power_of_two || wide || cap < isa::avx2) {
                EXPECT_EQ(kernel_name(plan).find("interleave"), std::string::npos) << describe(plan);
              }
            } else if (plan.gather) {
              // Short runs of 2-4 ways: with VBMI or AVX2 a periodic gather beats the shuffle; the
              // avx512 level without VBMI takes the AVX2 level's.
              EXPECT_NE(cap, isa::scalar) << describe(plan);
              if (cap == isa::avx512) {
                EXPECT_EQ(kernel_name(plan), "gather_avx2") << describe(plan);
              }
            } else if (wide && cap == isa::scalar) {  // 32 and 64 ways: AVX2 and AVX-512 only
              EXPECT_EQ(kernel_name(plan).find("interleave"), std::string::npos) << describe(plan);
            } else if (wide && width == 8 && cap >= isa::avx512 && length >= (interleave ? 2 : 8)) {
              // 8-byte elements: the tile transpose, wherever its columns (the destination's
              // contiguous axis) number 8 or more.
              EXPECT_EQ(kernel_name(plan), "transpose_x64_avx512") << describe(plan);
            } else if (length >= 4 && cap == isa::scalar && !power_of_two) {
              // SSE2 has no general two-source permutes: the scalar level copies elements.
              EXPECT_EQ(kernel_name(plan).find("interleave"), std::string::npos) << describe(plan);
            } else if (length >= 4) {  // shorter runs are not worth a shuffle
              EXPECT_NE(kernel_name(plan).find("interleave"), std::string::npos) << describe(plan);
              // Byte permutes: with VBMI one vpermt2b each (all but the power-of-two interleaves,
              // whose lane-local network is as fast); without it, B = 3 and 9 stay in 128-bit lanes
              // (vpshufb), so AVX-512 takes AVX2's.
              if (wide) {  // block transposes instead of a network that spills
                EXPECT_NE(kernel_name(plan).find(cap >= isa::avx512 ? "_transposing_avx512" : "_transposing_avx2"),
                          std::string::npos)
                    << describe(plan);
              } else if (b == 16 && width == 2 && !interleave) {
                // AVX2's 16-way network spills there too; AVX-512 has 32 registers for it.
                EXPECT_EQ(kernel_name(plan).find("_transposing_") != std::string::npos, cap == isa::avx2)
                    << describe(plan);
              } else if (width == 1 && cap == isa::avx512vbmi &&
                         (!(interleave && power_of_two && !wide) || plan.shuffle->repeat.assembled)) {
                // The assembling 4-way interleaves (AssembledInterleavesMatchOnEveryIsa) permute
                // bytes with VBMI too.
                EXPECT_NE(kernel_name(plan).find("_avx512vbmi"), std::string::npos) << describe(plan);
              } else if (width == 1 && !power_of_two) {
                EXPECT_NE(kernel_name(plan).find("_avx2"), std::string::npos) << describe(plan);
              } else {
                EXPECT_EQ(kernel_name(plan).find("vbmi"), std::string::npos) << describe(plan);
              }
            }
            for (int threads : {1, 2}) {  // long rows are split into work items, across threads too
              std::vector<std::byte> actual(static_cast<std::size_t>(span), std::byte{0x5A});
              run_permute(plan, src.data(), actual.data(), threads);
              ASSERT_EQ(actual, expected) << describe(plan) << " b=" << b << " w=" << width << " n=" << length;
            }
          }
          set_max_isa(isa::avx512vbmi);
        }
      }
    }
  }
}

// The first cache-line boundary in `buffer` (tests leave 64 bytes of slack for it), so that an
// offset from it is the offset within a line.
std::byte* line_start(std::vector<std::byte>& buffer) {
  return buffer.data() + (64 - reinterpret_cast<std::uintptr_t>(buffer.data()) % 64) % 64;
}

// The AVX-512 and AVX2 shuffles with streaming stores (outputs larger than the cache): straight
// through each kernel, destination rows on cache lines (streamed) and off them (AVX-512
// interleaves stream from the first whole line, or through a line_sink where no position's
// output starts one; AVX2 ones of 2-16 ways from the first position whose output starts a line,
// the positions before it with ordinary stores; AVX2 de-interleaves of 2 and 4 ways each row's
// whole lines where all rows start at one offset into a line, and 2-way ones and 3-way ones of
// 4-byte elements or wider, rows of 4 KiB or more, shifted into them in registers where rows
// start at different offsets, the positions before and after with ordinary stores), runs of half a
// vector, whole vectors plus masked tails, runs past a block-transposing kernel's 16 KiB pieces,
// two repeat positions; compared with the element-by-element copy. The AVX-512 kernels need a
// CPU with AVX-512.
TEST(PermuteRun, StreamingShufflesMatch) {
  if (detected_isa() < isa::avx2) GTEST_SKIP() << "needs AVX2; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(31);
  auto round_up = [](std::int64_t bytes) { return (bytes + 63) / 64 * 64; };
  for (std::int64_t b : {2, 3, 4, 8, 9, 16, 32, 64}) {
    for (std::int64_t width : {1, 2, 4, 8, 16, 32}) {
      const std::int64_t lanes = 64 / width;
      const std::int64_t piece = 16384 / (b * width);
      for (std::int64_t length : {lanes / 2, lanes, lanes + 1, 3 * lanes + 5, 9 * lanes + 7, piece + 35}) {
        for (bool interleave : {true, false}) {
          const auto w = static_cast<std::size_t>(width);
          // B = 3 for bytes: built from AVX2 and VBMI only; B = 32, 64: block transposes only.
          // Bytes run the VBMI build too where the CPU has it: its de-interleaves re-cut rows at
          // odd offsets into lines, the other builds at even offsets only.
          std::vector<shuffle_fn> kernels{b > max_register_ways ? transposing_shuffle_kernel_avx2(w, b, interleave)
                                                                : shuffle_kernel_avx2(w, b, interleave)};
          if (detected_isa() >= isa::avx512) {
            kernels.push_back(b > max_register_ways ? transposing_shuffle_kernel_avx512(w, b, interleave)
                                                    : shuffle_kernel_avx512(w, b, interleave));
          }
          if (width == 1 && b <= max_register_ways && detected_isa() >= isa::avx512vbmi)
            kernels.push_back(shuffle_kernel_avx512vbmi(w, b, interleave));
          // Rows off lines: interleaves stream from their first whole line (8 and 16 never reach
          // one for 16- and 32-byte elements, nor for B x width a multiple of 32 below them: those
          // of lane-wide elements shift every vector into lines instead); de-interleaves join
          // each row's vectors into lines where every row starts at an even offset (1: odd rows
          // do not stream below VBMI).
          // Unshifted, way j's row starts j x `misalign` bytes into a line. The AVX2 de-interleaves
          // that shift each way's vectors into its lines (rows of piece + 35) find a way's first
          // whole line at each of the 16-byte chunks 0-3 of its first two vectors across these
          // misaligns (chunk 1 at 40 only).
          // Shifted: every row (and the near side) of whole lines, the destination `misalign` bytes
          // past a line, so that all rows start at one offset into their lines (AVX2
          // de-interleaves of 2 and 4 ways stream each row's whole lines from there).
          constexpr std::array<std::int64_t, 7> misaligns{0, 1, 2, 8, 16, 32, 40};
          for (std::size_t run_case = 0; run_case < kernels.size() * misaligns.size() * 2; ++run_case) {
            const shuffle_fn fn = kernels[run_case / (misaligns.size() * 2)];
            const std::int64_t misalign = misaligns[run_case / 2 % misaligns.size()];
            const bool shifted = run_case % 2 == 1;
            if (fn == nullptr || (shifted && misalign == 0)) continue;
            // One far-side row per way, padded to whole lines (plus `misalign` unless shifted); near
            // side: all b ways of the run; the call repeats at two positions.
            const std::int64_t run_bytes = length * width;
            const std::int64_t pad = shifted ? 0 : misalign;
            const std::int64_t row = round_up(run_bytes) + pad;
            const std::int64_t far_span = b * row;
            const std::int64_t near_span = round_up(b * run_bytes) + pad;
            const std::int64_t dst_shift = shifted ? misalign : 0;
            std::vector<std::int64_t> offsets(static_cast<std::size_t>(b));
            for (std::int64_t j = 0; j < b; ++j) offsets[static_cast<std::size_t>(j)] = j * row;
            shuffle_repeat repeat;
            repeat.inner = {2, interleave ? far_span : near_span, interleave ? near_span : far_span};
            repeat.streaming = true;
            repeat.far_past_cache = true;  // the AVX2 de-interleaves stream only then
            const std::int64_t src_span = 2 * (interleave ? far_span : near_span);
            const std::int64_t dst_span = 2 * (interleave ? near_span : far_span);
            std::vector<std::byte> src(static_cast<std::size_t>(src_span));
            for (auto& v : src) v = static_cast<std::byte>(rng());
            // Line-aligned destinations, then shifted: `misalign` alone decides whether rows start
            // on lines.
            std::vector<std::byte> expected_storage(static_cast<std::size_t>(dst_span + 192), std::byte{0x5A});
            std::vector<std::byte> actual_storage(expected_storage);
            std::byte* expected = line_start(expected_storage) + dst_shift;
            std::byte* actual = line_start(actual_storage) + dst_shift;
            for (std::int64_t i = 0; i < 2; ++i) {
              for (std::int64_t r = 0; r < length; ++r) {
                for (std::int64_t j = 0; j < b; ++j) {
                  const std::int64_t near_at = i * near_span + (r * b + j) * width;
                  const std::int64_t far_at = i * far_span + j * row + r * width;
                  std::memcpy(expected + (interleave ? near_at : far_at), src.data() + (interleave ? far_at : near_at),
                              static_cast<std::size_t>(width));
                }
              }
            }
            fn(src.data(), actual, length, offsets.data(), repeat);
            // From the line the destination starts in to a line past its end: the bytes around
            // it stay untouched too.
            const auto window = [&](std::vector<std::byte>& storage) {
              return std::vector<std::byte>(line_start(storage), line_start(storage) + dst_shift + dst_span + 64);
            };
            ASSERT_EQ(window(actual_storage), window(expected_storage))
                << "b=" << b << " w=" << width << " n=" << length << " interleave=" << interleave
                << " misalign=" << misalign << " shifted=" << shifted;
          }
        }
      }
    }
  }
}

// Calls check(kernel, B, width) for every register shuffle kernel of the AVX-512 builds in one
// direction (the VBMI build too for bytes, where the CPU has it): B = 2, 3, 4, 8, 9, 16, widths
// of 1 to 8 bytes.
template <class Check>
void for_each_register_shuffle(bool interleave, Check check) {
  for (std::int64_t b : {2, 3, 4, 8, 9, 16}) {
    for (std::int64_t width : {1, 2, 4, 8}) {
      const auto w = static_cast<std::size_t>(width);
      std::vector<shuffle_fn> kernels{shuffle_kernel_avx512(w, b, interleave)};
      if (width == 1 && detected_isa() >= isa::avx512vbmi) {
        kernels.push_back(shuffle_kernel_avx512vbmi(w, b, interleave));
      }
      for (const shuffle_fn fn : kernels) {
        if (fn != nullptr) check(fn, b, width);
      }
    }
  }
}

// De-interleaves in the cache whose rows reach the repeat's realigned_run_bytes re-cut each row's
// vectors into whole lines where the rows do not all start on lines: the threshold lowered to
// 64 bytes, so that rows of one to 16 vectors (and masked tails) take that path, and left at its
// default, destinations on lines and 1 to 32 bytes off them, two repeat positions; compared with
// the element-by-element copy, the bytes around every row guarded.
TEST(PermuteRun, RealignedDeinterleaveRowsMatch) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(53);
  for_each_register_shuffle(false, [&](shuffle_fn fn, std::int64_t b, std::int64_t width) {
    for (std::int64_t run_bytes :
         {std::int64_t{64}, std::int64_t{200}, std::int64_t{296}, std::int64_t{724}, std::int64_t{1000}}) {
      const std::int64_t length = run_bytes / width;
      for (std::int64_t realigned : {std::int64_t{64}, realigned_deinterleave_run_bytes}) {
        for (std::int64_t misalign : {0, 1, 2, 8, 16, 32}) {
          // Way rows apart by whole lines plus `misalign`, so that each way's row starts at a
          // different offset within its line; the near side is all b ways of the run.
          const std::int64_t row = (length * width + 63) / 64 * 64 + misalign;
          const std::int64_t far_span = b * row;
          const std::int64_t near_span = b * length * width + 3 * width;
          std::vector<std::int64_t> offsets(static_cast<std::size_t>(b));
          for (std::int64_t j = 0; j < b; ++j) offsets[static_cast<std::size_t>(j)] = j * row;
          shuffle_repeat repeat;
          repeat.inner = {2, near_span, far_span};
          repeat.realigned_run_bytes = realigned;
          std::vector<std::byte> src(static_cast<std::size_t>(2 * near_span));
          for (auto& v : src) v = static_cast<std::byte>(rng());
          std::vector<std::byte> expected_storage(static_cast<std::size_t>(2 * far_span + 128), std::byte{0x5A});
          std::vector<std::byte> actual_storage(expected_storage);
          std::byte* expected = line_start(expected_storage) + misalign;
          for (std::int64_t i = 0; i < 2; ++i) {
            for (std::int64_t r = 0; r < length; ++r) {
              for (std::int64_t j = 0; j < b; ++j) {
                std::memcpy(expected + i * far_span + j * row + r * width,
                            src.data() + i * near_span + (r * b + j) * width, static_cast<std::size_t>(width));
              }
            }
          }
          fn(src.data(), line_start(actual_storage) + misalign, length, offsets.data(), repeat);
          const std::int64_t checked = 2 * far_span + 64;  // from the line before the output
          const std::vector<std::byte> want(line_start(expected_storage), line_start(expected_storage) + checked);
          const std::vector<std::byte> got(line_start(actual_storage), line_start(actual_storage) + checked);
          ASSERT_TRUE(got == want) << "b=" << b << " w=" << width << " n=" << length << " realigned from " << realigned
                                   << " misalign=" << misalign;
        }
      }
    }
  });
}

// De-interleaves in the cache whose rows hold one vector or more and stay under a limit run every
// row in one loop and end each on a whole step that overlaps the one before
// (b_way_short_rows_in_cache): 3-way ones in the AVX2 and AVX-512 builds up to realigned_run_bytes,
// and in the AVX2 build every other number of ways up to max_avx2_short_loop_row_bytes (4-way ones
// of 4-byte lanes keep the call per row, compared all the same). Rows of
// exactly one and two vectors, one element past and short of them, and the longest under the
// limit; three outer by two inner repeat positions, each way's row a gap apart from the next and
// the outputs pre-filled, compared with the element-by-element copy over the whole destination,
// gaps included.
TEST(PermuteRun, ShortInCacheDeinterleaveRowsEndOnAWholeStep) {
  if (detected_isa() < isa::avx2) GTEST_SKIP() << "needs AVX2; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(59);
  for (std::int64_t b : {2, 3, 4, 8, 9, 16}) {
    for (std::int64_t width : {1, 2, 4, 8}) {
      const auto w = static_cast<std::size_t>(width);
      // (kernel, its vector bytes, the longest row it loops over)
      struct kernel_case {
        shuffle_fn fn;
        std::int64_t vector_bytes;
        std::int64_t row_limit;
      };
      const std::int64_t avx2_limit = b == 3 ? realigned_deinterleave_run_bytes : 128;
      std::vector<kernel_case> kernels{{shuffle_kernel_avx2(w, b, false), 32, avx2_limit}};
      if (b == 3 && detected_isa() >= isa::avx512) {
        kernels.push_back({shuffle_kernel_avx512(w, b, false), 64, realigned_deinterleave_run_bytes});
        if (width == 1 && detected_isa() >= isa::avx512vbmi) {
          kernels.push_back({shuffle_kernel_avx512vbmi(w, b, false), 64, realigned_deinterleave_run_bytes});
        }
      }
      for (const kernel_case& k : kernels) {
        if (k.fn == nullptr) continue;
        const std::int64_t lanes = k.vector_bytes / width;
        const std::int64_t longest = (k.row_limit - 1) / width;
        for (std::int64_t length : {lanes, lanes + 1, 2 * lanes - 1, 2 * lanes, 2 * lanes + 1, longest}) {
          if (length > longest) continue;
          const std::int64_t row = length * width + width + 5;  // a gap after each way's row
          const std::int64_t near_span = b * length * width + 2 * width;
          const std::int64_t inner_far = b * row;
          const std::int64_t outer_far = 2 * inner_far + 3;
          std::vector<std::int64_t> offsets(static_cast<std::size_t>(b));
          for (std::int64_t j = 0; j < b; ++j) offsets[static_cast<std::size_t>(j)] = j * row;
          shuffle_repeat repeat;
          repeat.outer = {3, 2 * near_span, outer_far};
          repeat.inner = {2, near_span, inner_far};
          std::vector<std::byte> src(static_cast<std::size_t>(6 * near_span));
          for (auto& v : src) v = static_cast<std::byte>(rng());
          std::vector<std::byte> expected(static_cast<std::size_t>(3 * outer_far), std::byte{0x5A});
          std::vector<std::byte> actual(expected);
          for (std::int64_t o = 0; o < 3; ++o) {
            for (std::int64_t i = 0; i < 2; ++i) {
              for (std::int64_t r = 0; r < length; ++r) {
                for (std::int64_t j = 0; j < b; ++j) {
                  std::memcpy(expected.data() + o * outer_far + i * inner_far + j * row + r * width,
                              src.data() + (2 * o + i) * near_span + (r * b + j) * width, w);
                }
              }
            }
          }
          k.fn(src.data(), actual.data(), length, offsets.data(), repeat);
          ASSERT_TRUE(actual == expected)
              << "b=" << b << " w=" << width << " n=" << length << " vector bytes " << k.vector_bytes;
        }
      }
    }
  }
}

// One streamed shuffle call whose destination rows continue one another along the inner repeat
// (its destination stride is one row: the interleaved row, or each way's row of a de-interleave),
// `rows` of them at each of two outer positions, the outputs apart by a gap, the source rows
// padded, the destination `misalign` bytes past a line; checked against the element-by-element copy.
void check_continuing_rows(bool interleave, shuffle_fn fn, std::int64_t b, std::int64_t width, std::int64_t length,
                           std::int64_t rows, std::int64_t misalign, std::mt19937_64& rng, bool sinks_rows = true) {
  const std::int64_t run = length * width;  // one way's row
  const std::int64_t src_row = (interleave ? run : b * run) + 3 * width;
  const std::int64_t dst_row = interleave ? b * run : run;
  const std::int64_t src_output = rows * src_row;
  const std::int64_t dst_output = rows * dst_row + 2 * width;
  // The far side's ways, apart by an odd amount past whole lines on the destination.
  const std::int64_t way_bytes = interleave ? 2 * src_output : 2 * dst_output + 64 + width;
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(b));
  for (std::int64_t j = 0; j < b; ++j) offsets[static_cast<std::size_t>(j)] = j * way_bytes;
  shuffle_repeat repeat;
  repeat.outer = {2, src_output, dst_output};
  repeat.inner = {rows, src_row, dst_row};
  repeat.streaming = true;
  repeat.sinks_rows = sinks_rows;
  std::vector<std::byte> src(static_cast<std::size_t>(interleave ? b * way_bytes : 2 * src_output));
  for (auto& v : src) v = static_cast<std::byte>(rng());
  const std::int64_t dst_span = (interleave ? 2 * dst_output : b * way_bytes) + misalign + 128;
  std::vector<std::byte> expected_storage(static_cast<std::size_t>(dst_span + 64), std::byte{0x5A});
  std::vector<std::byte> actual_storage(expected_storage);
  std::byte* expected = line_start(expected_storage) + misalign;
  const std::int64_t near_output = interleave ? dst_output : src_output;
  const std::int64_t near_row = interleave ? dst_row : src_row;
  const std::int64_t far_output = interleave ? src_output : dst_output;
  const std::int64_t far_row = interleave ? src_row : dst_row;
  for (std::int64_t o = 0; o < 2; ++o) {
    for (std::int64_t i = 0; i < rows; ++i) {
      for (std::int64_t r = 0; r < length; ++r) {
        for (std::int64_t j = 0; j < b; ++j) {
          const std::int64_t near_at = o * near_output + i * near_row + (r * b + j) * width;
          const std::int64_t far_at = j * way_bytes + o * far_output + i * far_row + r * width;
          std::memcpy(expected + (interleave ? near_at : far_at), src.data() + (interleave ? far_at : near_at),
                      static_cast<std::size_t>(width));
        }
      }
    }
  }
  fn(src.data(), line_start(actual_storage) + misalign, length, offsets.data(), repeat);
  const std::vector<std::byte> want(line_start(expected_storage), line_start(expected_storage) + dst_span);
  const std::vector<std::byte> got(line_start(actual_storage), line_start(actual_storage) + dst_span);
  ASSERT_TRUE(got == want) << "interleave=" << interleave << " b=" << b << " w=" << width << " n=" << length
                           << " rows=" << rows << " misalign=" << misalign << " sinks_rows=" << sinks_rows;
}

// Interleaves whose output rows continue one another stream them as one output (line_sink):
// rows from under a line to several lines and of 4-8 KiB, outputs starting at line, even and odd
// offsets, 2 and 5 rows per call at each of two outer positions, the avx512 build and, for bytes,
// the VBMI one (the avx512 build's byte kernels and odd offsets at other widths take ordinary
// stores).
TEST(PermuteRun, StreamingContinuingRowsMatch) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(37);
  for_each_register_shuffle(true, [&](shuffle_fn fn, std::int64_t b, std::int64_t width) {
    for (std::int64_t length :
         {std::int64_t{1}, std::int64_t{5}, 64 / width - 1, 64 / width + 3, 300 / width, 4320 / (b * width) + 1}) {
      for (std::int64_t rows : {2, 5}) {
        for (std::int64_t misalign : {0, 1, 2, 8, 32})
          check_continuing_rows(true, fn, b, width, length, rows, misalign, rng);
      }
    }
  });
}

// The mirror for de-interleaves: each way's output rows continue one another along the inner
// repeat and stream through their own line_sink where they do not start on lines (up to
// max_sunk_deinterleave_ways ways; more, and odd offsets below VBMI, take the other paths), and
// row by row where the plan says so (shuffle_repeat::sinks_rows). Rows from under a line to
// several lines, 1, 2 and 5 rows per call.
TEST(PermuteRun, StreamingContinuingDeinterleaveRowsMatch) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(41);
  for_each_register_shuffle(false, [&](shuffle_fn fn, std::int64_t b, std::int64_t width) {
    for (std::int64_t length : {64 / width, 64 / width + 3, 300 / width, 1000 / width}) {
      for (std::int64_t rows : {1, 2, 5}) {
        for (std::int64_t misalign : {0, 1, 2, 8, 16, 32}) {
          for (bool sinks_rows : {true, false})
            check_continuing_rows(false, fn, b, width, length, rows, misalign, rng, sinks_rows);
        }
      }
    }
  });
}

// De-interleaves whose ways' rows continue along the outer repeat, the inner positions apart
// (s2d NCHW in the source's order): one line sink per inner position and way, up to 16 (64 where
// the repeat allows it: 8 positions of 8 ways), where the rows do not start on lines, and row by
// row where the plan says so (shuffle_repeat::sinks_rows). P inner positions of B ways, rows of
// under a line to several, at destinations whose planes sit at every offset within a line.
TEST(PermuteRun, StreamingDeinterleaveRowBlocksMatch) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(43);
  for_each_register_shuffle(false, [&](shuffle_fn fn, std::int64_t b, std::int64_t width) {
    for (std::int64_t positions : {1, 2, 4, 8}) {
      for (std::int64_t length : {64 / width, 300 / width + 1}) {
        for (std::int64_t variant = 0; variant < 8; ++variant) {
          const std::int64_t misalign = std::array<std::int64_t, 4>{0, 2, 16, 48}[variant % 4];
          const bool sinks_rows = variant < 4;
          constexpr std::int64_t outer = 3;
          const std::int64_t row = length * width;
          const std::int64_t src_inner = b * row + 2 * width;
          const std::int64_t src_outer = positions * src_inner + 4 * width;
          const std::int64_t plane = outer * row + 6 * width;  // one (position, way) output, padded
          std::vector<std::int64_t> offsets(static_cast<std::size_t>(b));
          for (std::int64_t k = 0; k < b; ++k) offsets[static_cast<std::size_t>(k)] = k * positions * plane;
          shuffle_repeat repeat;
          repeat.outer = {outer, src_outer, row};
          repeat.inner = {positions, src_inner, plane};
          repeat.streaming = true;
          repeat.sinks_rows = sinks_rows;
          if (positions * b > max_sunk_deinterleave_rows) repeat.most_sunk_rows = max_far_sunk_deinterleave_rows;
          std::vector<std::byte> src(static_cast<std::size_t>(outer * src_outer));
          for (auto& v : src) v = static_cast<std::byte>(rng());
          const std::int64_t dst_span = b * positions * plane + misalign + 128;
          std::vector<std::byte> expected_storage(static_cast<std::size_t>(dst_span + 64), std::byte{0x5A});
          std::vector<std::byte> actual_storage(expected_storage);
          std::byte* expected = line_start(expected_storage) + misalign;
          for (std::int64_t o = 0; o < outer; ++o) {
            for (std::int64_t i = 0; i < positions; ++i) {
              for (std::int64_t r = 0; r < length; ++r) {
                for (std::int64_t k = 0; k < b; ++k) {
                  std::memcpy(expected + offsets[static_cast<std::size_t>(k)] + i * plane + o * row + r * width,
                              src.data() + o * src_outer + i * src_inner + (r * b + k) * width,
                              static_cast<std::size_t>(width));
                }
              }
            }
          }
          fn(src.data(), line_start(actual_storage) + misalign, length, offsets.data(), repeat);
          const std::vector<std::byte> want(line_start(expected_storage), line_start(expected_storage) + dst_span);
          const std::vector<std::byte> got(line_start(actual_storage), line_start(actual_storage) + dst_span);
          ASSERT_TRUE(got == want) << "b=" << b << " w=" << width << " n=" << length << " positions=" << positions
                                   << " misalign=" << misalign << " sinks_rows=" << sinks_rows;
        }
      }
    }
  });
}

// The plan a call on one thread runs, described: without the plan kept for calls on more threads
// (permute_plan::on_more_threads), which a Zen 5 adds for outputs that could stay in its cache.
std::string describe_one_thread(const permute_plan& plan) {
  permute_plan alone = plan;
  alone.on_more_threads.reset();
  return describe(alone);
}

// The plan made as for `cores`, which stay the planning core kind afterwards.
permute_plan plan_for(runtime::core_kind cores, const std::vector<permute_axis>& axes, std::size_t width) {
  runtime::plan_for_core_kind_for_testing(cores);
  return plan_permute(axes, width);
}

// Every element of `axes` copied one at a time: the spec the kernels are checked against.
void permute_naive(const std::vector<permute_axis>& axes, const std::byte* src, std::byte* dst, std::int64_t width) {
  std::vector<std::int64_t> index(axes.size(), 0);
  while (true) {
    std::int64_t from = 0;
    std::int64_t to = 0;
    for (std::size_t k = 0; k < axes.size(); ++k) {
      from += index[k] * axes[k].src_stride;
      to += index[k] * axes[k].dst_stride;
    }
    std::memcpy(dst + to, src + from, static_cast<std::size_t>(width));
    std::size_t k = axes.size();
    while (k > 0 && ++index[k - 1] == axes[k - 1].extent) index[--k] = 0;
    if (k == 0) return;
  }
}

// The axes of a B-way shuffle with two repeat axes, from its two sides: the far side holds the B
// rows (`row` bytes apart), the near side the interleaved run (B * width bytes per position).
// Interleave reads the far side and writes the near one; de-interleave the reverse.
struct two_sided_axis {
  std::int64_t extent;
  std::int64_t far_stride;
  std::int64_t near_stride;
};

std::vector<permute_axis> shuffle_axes(bool interleave, two_sided_axis outer, two_sided_axis inner, std::int64_t length,
                                       std::int64_t b, std::int64_t row, std::int64_t width) {
  auto axis = [&](two_sided_axis a) {
    return interleave ? permute_axis{a.extent, a.far_stride, a.near_stride}
                      : permute_axis{a.extent, a.near_stride, a.far_stride};
  };
  const permute_axis run = axis({length, width, b * width});
  const permute_axis ways = axis({b, row, width});
  if (interleave) return {axis(outer), axis(inner), run, ways};
  return {axis(outer), axis(inner), ways, run};
}

// Which plans must stage their short runs, per ISA cap: true (stage, or be a gather or an
// assembling kernel), false (a direct shuffle), nullopt (either).
using staging_rule = std::function<std::optional<bool>(isa)>;

// Plans `axes` under every ISA cap the host has and runs each plan from `src` on one and two
// threads into a buffer pre-filled with 0x5A, which must then equal `expected`; `staging` says
// which plans must stage.
void expect_every_isa_matches(const std::vector<permute_axis>& axes, std::int64_t width, const std::byte* src,
                              const std::vector<std::byte>& expected, const std::string& context,
                              const staging_rule& staging = nullptr) {
  for (isa cap : {isa::scalar, isa::avx2, isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    set_max_isa(cap);
    const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
    const std::optional<bool> must_stage = staging ? staging(cap) : std::nullopt;
    if (plan.gather) {
      // Gathers need VBMI or AVX2; the avx512 level without VBMI takes the AVX2 level's.
      EXPECT_NE(cap, isa::scalar) << describe(plan);
      if (cap == isa::avx512) {
        EXPECT_EQ(kernel_name(plan), "gather_avx2") << describe(plan);
      }
    } else if (must_stage == true && !(plan.shuffle && plan.shuffle->repeat.assembled)) {
      // The assembling interleaves replace staging where their ISA is there.
      ASSERT_TRUE(plan.shuffle && plan.shuffle->segment_copy.copy != nullptr) << describe(plan) << context;
    } else if (must_stage == false) {
      ASSERT_TRUE(plan.shuffle && plan.shuffle->segment_copy.copy == nullptr) << describe(plan) << context;
    }
    for (int threads : {1, 2}) {
      std::vector<std::byte> actual(expected.size(), std::byte{0x5A});
      run_permute(plan, src, actual.data(), threads);
      ASSERT_EQ(actual, expected) << describe(plan) << context << " threads=" << threads;
    }
  }
  set_max_isa(isa::avx512vbmi);
}

// expect_every_isa_matches on a random source of src_bytes, the destination (dst_bytes) expected
// from the element loop.
void random_source_matches_on_every_isa(const std::vector<permute_axis>& axes, std::int64_t width,
                                        std::int64_t src_bytes, std::int64_t dst_bytes, std::mt19937_64& rng,
                                        const std::string& context, const staging_rule& staging = nullptr) {
  std::vector<std::byte> src(static_cast<std::size_t>(src_bytes));
  for (auto& v : src) v = static_cast<std::byte>(rng());
  std::vector<std::byte> expected(static_cast<std::size_t>(dst_bytes), std::byte{0x5A});
  permute_naive(axes, src.data(), expected.data(), width);
  expect_every_isa_matches(axes, width, src.data(), expected, context, staging);
}

// Runs of whole cache lines: the tile's inner loop is the axis that touches fewer places at once.
// NHWC DCR depth_to_space, b = 8, C = 16 float32 (runs of 512 bytes): walking the output in order
// reads 1/8 of every source pixel per pass (64 places at once); walking the 8 block rows inside
// reads each source pixel once and writes 8 output rows. Its inverse already reads and writes
// in order (8 source rows, one output stream) and keeps the output order.
TEST(PermutePlan, LongRunsWalkTheOrientationWithFewerStreams) {
  const std::int64_t width = 4;
  for (const bool to_space : {true, false}) {
    // depth_to_space: [N, H, W, bh, bw, C] -> [N, H, bh, W, bw, C]; space_to_depth the reverse.
    const std::vector<std::int64_t> shape =
        to_space ? std::vector<std::int64_t>{1, 3, 64, 8, 8, 16} : std::vector<std::int64_t>{1, 3, 8, 64, 8, 16};
    const auto axes = packed_transpose(shape, {0, 1, 3, 2, 4, 5}, width);
    std::vector<std::byte> src(static_cast<std::size_t>(3 * 64 * 8 * 8 * 16 * width));
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 131 + i / 251);
    std::vector<std::byte> expected(src.size(), std::byte{0x5A});
    permute_naive(axes, src.data(), expected.data(), width);
    for (isa cap : {isa::scalar, isa::avx2, isa::avx512, isa::avx512vbmi}) {
      if (cap > detected_isa()) continue;
      set_max_isa(cap);
      const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
      EXPECT_EQ(plan.width, 512U);
      // Inner loop: the 8 block rows for depth_to_space, the 64 output pixels' block rows for
      // space_to_depth (whose source rows are 8 x 64 runs apart).
      EXPECT_EQ(plan.col.extent, 8) << describe(plan);
      EXPECT_EQ(plan.row.extent, 64) << describe(plan);
      EXPECT_EQ(plan.col.src_stride, to_space ? 512 : 64 * 512) << describe(plan);
      EXPECT_EQ(plan.col.dst_stride, to_space ? 64 * 512 : 512) << describe(plan);
    }
    set_max_isa(isa::avx512vbmi);
    ASSERT_NO_FATAL_FAILURE(expect_every_isa_matches(axes, width, src.data(), expected, to_space ? " d2s" : " s2d"));
  }
}

// Short runs with one and two repeat axes around them (the four-runs-at-once path walks the
// flattened repeats, so counts that are not multiples of four leave partial groups), padded
// strides on both sides, on every ISA the host has.
TEST(PermuteRun, ShortRunsWithRepeatsMatchOnEveryIsa) {
  std::mt19937_64 rng(7);
  for (std::int64_t b : {2, 3, 4, 9, 16, 64}) {
    for (std::int64_t width : {1, 2, 4, 8}) {
      for (std::int64_t length : {4, 5, 8, 15, 16, 17, 20, 33}) {
        for (std::int64_t inner : {1, 2, 3, 5}) {
          for (std::int64_t outer : {1, 3}) {
            for (bool interleave : {true, false}) {
              // The run side is contiguous over (run, ways); the other side keeps b rows apart.
              const std::int64_t row = length * width + 2 * width;  // padded far-side row
              const std::int64_t near_block = b * length * width;
              const std::int64_t far_block = b * row + width;
              const std::int64_t near_inner = near_block + 3 * width;
              const std::int64_t far_outer = inner * far_block + 5 * width;
              const std::int64_t near_outer = inner * near_inner + width;
              const auto axes = shuffle_axes(interleave, {outer, far_outer, near_outer}, {inner, far_block, near_inner},
                                             length, b, row, width);
              const std::int64_t span = outer * std::max(far_outer, near_outer) + 64;
              ASSERT_NO_FATAL_FAILURE(random_source_matches_on_every_isa(
                  axes, width, span, span, rng,
                  " b=" + std::to_string(b) + " w=" + std::to_string(width) + " n=" + std::to_string(length) +
                      " inner=" + std::to_string(inner) + " outer=" + std::to_string(outer)));
            }
          }
        }
      }
    }
  }
}

// The run-copy tile kernels: run widths around every vector size and odd ones, padded and
// misaligned rows and columns, every ISA the host has; compared with per-run memcpy.
TEST(PermuteRun, RunCopiesMatchOnEveryIsa) {
  std::mt19937_64 rng(21);
  for (std::int64_t width :
       {3, 5, 6, 12, 15, 16, 17, 24, 31, 32, 33, 48, 63, 64, 65, 96, 127, 128, 129, 200, 256, 257, 1000}) {
    for (std::int64_t misalign : {0, 1, 7}) {
      const std::int64_t rows = 3;
      const std::int64_t cols = 5;
      // Columns are runs `width + 3` bytes apart in the source, rows reversed in the destination.
      const std::int64_t src_col = width + 3;
      const std::int64_t src_row = cols * src_col + 11;
      const std::int64_t dst_col = width;
      const std::int64_t dst_row = cols * width + 5;
      const std::vector<permute_axis> axes = {{rows, src_row, dst_row}, {cols, src_col, dst_col}};
      std::vector<std::byte> src(static_cast<std::size_t>(rows * src_row + misalign));
      for (auto& v : src) v = static_cast<std::byte>(rng());
      const std::size_t span = static_cast<std::size_t>(rows * dst_row + misalign + 64);
      std::vector<std::byte> expected(span, std::byte{0x5A});
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) {
          std::memcpy(expected.data() + misalign + r * dst_row + c * dst_col,
                      src.data() + misalign + r * src_row + c * src_col, static_cast<std::size_t>(width));
        }
      }
      for (isa cap : {isa::scalar, isa::avx2, isa::avx512, isa::avx512vbmi}) {
        if (cap > detected_isa()) continue;
        set_max_isa(cap);
        const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
        std::vector<std::byte> actual(span, std::byte{0x5A});
        run_permute(plan, src.data() + misalign, actual.data() + misalign, 1);
        ASSERT_EQ(actual, expected) << describe(plan) << " width=" << width << " misalign=" << misalign;
      }
      set_max_isa(isa::avx512vbmi);
    }
  }
}

// Runs the permute of packed 8-byte elements `axes` under every ISA cap against the element
// loop, source and destination misaligned by `misalign` bytes, destination guarded; on AVX-512 a
// plan for which `transpose_expected(plan)` holds must take the register transpose.
template <class Expectation>
void check_eight_byte_permute(const std::vector<permute_axis>& axes, std::int64_t misalign, std::mt19937_64& rng,
                              const Expectation& transpose_expected) {
  constexpr std::int64_t width = 8;
  std::int64_t bytes = width;
  for (const permute_axis& axis : axes) bytes *= axis.extent;
  std::vector<std::byte> src(static_cast<std::size_t>(bytes + misalign));
  for (auto& v : src) v = static_cast<std::byte>(rng());
  std::vector<std::byte> expected(static_cast<std::size_t>(bytes + misalign + 64), std::byte{0x5A});
  permute_naive(axes, src.data() + misalign, expected.data() + misalign, width);
  for (isa cap : {isa::scalar, isa::avx2, isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    set_max_isa(cap);
    const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
    if (cap >= isa::avx512 && transpose_expected(plan)) {
      EXPECT_EQ(kernel_name(plan), "transpose_x64_avx512") << describe(plan);
    }
    std::vector<std::byte> actual(expected.size(), std::byte{0x5A});
    run_permute(plan, src.data() + misalign, actual.data() + misalign, 1);
    ASSERT_EQ(actual, expected) << describe(plan) << " misalign=" << misalign << " cap=" << to_string(cap);
  }
  set_max_isa(isa::avx512vbmi);
}

// Transposes of 8-byte elements ([P, R, C] -> [P, C, R]: no contiguous run on either side), whole
// 8 x 8 blocks and every kind of edge block, misaligned by 0, 1 or 7 bytes; on AVX-512 the plan
// takes the register transpose where no shuffle does (over 16 ways either way).
TEST(PermuteRun, TransposesOfEightByteElementsMatchOnEveryIsa) {
  std::mt19937_64 rng(29);
  for (std::int64_t planes : {1, 3}) {
    for (std::int64_t rows : {8, 9, 13, 19, 67}) {
      for (std::int64_t cols : {8, 11, 24, 64, 70}) {
        for (std::int64_t misalign : {0, 1, 7}) {
          const auto axes = packed_transpose({planes, rows, cols}, {0, 2, 1}, 8);
          const bool over_shuffle_ways = std::min(rows, cols) > max_register_ways;
          check_eight_byte_permute(axes, misalign, rng, [&](const permute_plan&) { return over_shuffle_ways; });
        }
      }
    }
  }
}

// Transposes of 8-byte elements whose source-contiguous axis is not the destination's second
// ([P, C, Q, R] -> [P, R, Q, C]: s2d NHWC CRD and channels-last K = 3 of 64 channels of 8 bytes;
// d2s channels-last CRD, with source runs of 3 or 4 elements): the register transpose takes the
// source-contiguous axis as its rows, wherever it lies and however short, unless a shuffle or a
// gather takes the plan.
TEST(PermuteRun, TransposesTakeTheSourceContiguousAxisWhereverItLies) {
  std::mt19937_64 rng(31);
  for (std::int64_t between : {2, 5}) {
    for (std::int64_t rows : {2, 3, 8, 13}) {
      for (std::int64_t cols : {8, 11, 64}) {
        for (std::int64_t misalign : {0, 7}) {
          const auto axes = packed_transpose({2, cols, between, rows}, {0, 3, 2, 1}, 8);
          check_eight_byte_permute(axes, misalign, rng,
                                   [](const permute_plan& plan) { return !plan.shuffle && !plan.gather; });
        }
      }
    }
  }
}

// Runs `kernel` over tile `t` of `width`-byte runs from random bytes into a destination `misalign`
// bytes past a cache line; true when it equals the plain run-by-run copy, the bytes between runs
// untouched.
bool tile_copy_matches(const tile_kernel& kernel, const tile_shape& t, std::int64_t width, std::int64_t misalign,
                       std::mt19937_64& rng) {
  // The source ends with the last run (strides are positive; the plane's need not be the largest).
  std::vector<std::byte> src(static_cast<std::size_t>((t.planes - 1) * t.src_plane + (t.rows - 1) * t.src_row +
                                                      (t.cols - 1) * t.src_col + width));
  for (auto& v : src) v = static_cast<std::byte>(rng());
  // 64-byte aligned storage, so that `misalign` is the offset within a cache line.
  const std::size_t span = static_cast<std::size_t>(
      std::max(t.planes * t.dst_plane,
               (t.planes - 1) * t.dst_plane + (t.rows - 1) * t.dst_row + (t.cols - 1) * t.dst_col + width) +
      128);
  std::vector<std::byte> expected(span + 64, std::byte{0x5A});
  std::vector<std::byte> actual(span + 64, std::byte{0x5A});
  std::byte* expected_at = line_start(expected) + misalign;
  for (std::int64_t p = 0; p < t.planes; ++p) {
    for (std::int64_t r = 0; r < t.rows; ++r) {
      for (std::int64_t c = 0; c < t.cols; ++c) {
        std::memcpy(expected_at + p * t.dst_plane + r * t.dst_row + c * t.dst_col,
                    src.data() + p * t.src_plane + r * t.src_row + c * t.src_col, static_cast<std::size_t>(width));
      }
    }
  }
  kernel.copy(src.data(), line_start(actual) + misalign, t, static_cast<std::size_t>(width));
  return std::equal(line_start(actual), line_start(actual) + span, line_start(expected));
}

// A 2 x 3 x 5 tile of `width`-byte runs, padded source strides at every level, and the given
// destination strides.
tile_shape padded_source_tile(std::int64_t width, std::int64_t dst_col, std::int64_t dst_row, std::int64_t dst_plane) {
  const std::int64_t src_row = 5 * (width + 3) + 11;
  return {.planes = 2,
          .rows = 3,
          .cols = 5,
          .src_plane = 3 * src_row + 5,
          .src_row = src_row,
          .src_col = width + 3,
          .dst_plane = dst_plane,
          .dst_row = dst_row,
          .dst_col = dst_col};
}

// AVX2 copies of runs of 4 vectors or more into outputs larger than the cache stream each run's
// whole lines and write its partial first and last lines with ordinary stores; shorter runs keep
// their ordinary copies. Every head and tail length (0-63 bytes) against per-run memcpy, in tiles
// whose runs continue one another in the destination (streamed) and tiles with gaps between them
// (whose bytes must stay untouched; copied the ordinary way), and a tile whose runs continue
// down each column (streamed) and one whose columns are too short for that.
TEST(PermuteRun, Avx2RunCopiesOfLargeOutputsStreamTheirWholeLines) {
  if (detected_isa() < isa::avx2) GTEST_SKIP() << "needs AVX2, which this CPU lacks";
  std::mt19937_64 rng(47);
  for (std::int64_t width : {63, 64, 65, 127, 128, 129, 200, 1000}) {
    for (bool large_output : {false, true}) {
      const tile_kernel kernel = run_tile_kernel_avx2(static_cast<std::size_t>(width), large_output);
      const bool streams = large_output && width >= 128;
      EXPECT_STREQ(kernel.name, streams        ? "copy_runs_streaming_avx2"
                                : width == 64  ? "copy_x512_avx2"
                                : width == 128 ? "copy_x1024_avx2"
                                               : "copy_runs_avx2");
      for (std::int64_t gap : {0, 7}) {
        const std::int64_t col = width + gap;
        const tile_shape t = padded_source_tile(width, col, 5 * col + gap, 15 * col + 64);
        for (std::int64_t misalign = 0; misalign < 64; misalign += large_output ? 1 : 17) {
          ASSERT_TRUE(tile_copy_matches(kernel, t, width, misalign, rng))
              << "width=" << width << " gap=" << gap << " misalign=" << misalign;
        }
      }
      for (std::int64_t rows : {8, 100}) {
        const tile_shape down{.planes = 2,
                              .rows = rows,
                              .cols = 3,
                              .src_plane = 3 * rows * width + 64,
                              .src_row = 3 * width,
                              .src_col = width,
                              .dst_plane = 3 * rows * width + 5,
                              .dst_row = width,
                              .dst_col = rows * width};
        for (std::int64_t misalign : {0, 1, 31, 63}) {
          ASSERT_TRUE(tile_copy_matches(kernel, down, width, misalign, rng))
              << "width=" << width << " rows=" << rows << " misalign=" << misalign;
        }
      }
    }
  }
}

// The AVX2 copy of short runs that continue one another along the columns in the destination
// (spilling_run_kernel_avx2): every run length it takes (5-31 bytes but 8 and 16), source columns
// exactly a piece apart and farther, one column to many, rows and planes apart in the destination
// (the bytes between them must stay untouched), on and off a line; and a tile it does not take
// (columns apart in the destination) copied the ordinary way.
TEST(PermuteRun, Avx2SpillingRunCopiesMatchTheRunByRunCopy) {
  if (detected_isa() < isa::avx2) GTEST_SKIP() << "needs AVX2, which this CPU lacks";
  std::mt19937_64 rng(173);
  const tile_kernel kernel = spilling_run_kernel_avx2();
  EXPECT_STREQ(kernel.name, "copy_runs_spilling_avx2");
  for (std::int64_t width = 5; width < 32; ++width) {
    if (width == 8 || width == 16) continue;
    const auto piece = static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(width)));
    for (const std::int64_t src_col : {piece, piece + 3, 5 * width}) {
      for (const std::int64_t cols : {1, 2, 3, 17}) {
        const std::int64_t dst_row = cols * width + 5;
        const tile_shape t{.planes = 2,
                           .rows = 3,
                           .cols = cols,
                           .src_plane = 3 * cols * src_col + 7,
                           .src_row = cols * src_col + 1,
                           .src_col = src_col,
                           .dst_plane = 3 * dst_row + 9,
                           .dst_row = dst_row,
                           .dst_col = width};
        for (const std::int64_t misalign : {0, 13, 63}) {
          ASSERT_TRUE(tile_copy_matches(kernel, t, width, misalign, rng))
              << "width=" << width << " src_col=" << src_col << " cols=" << cols << " misalign=" << misalign;
        }
      }
    }
    const tile_shape apart = padded_source_tile(width, width + 2, 5 * (width + 2) + 3, 15 * (width + 2) + 64);
    ASSERT_TRUE(tile_copy_matches(kernel, apart, width, 5, rng)) << "width=" << width;
  }
}

// A tile that reads interleaved source streams (the kernel prefetches them): 2 x 20 x 3 runs of
// `width` bytes whose columns lie 20 runs and 600 bytes apart and whose rows step by a run and 3
// bytes (s2d NHWC DCR); or, `along_planes`, 20 x 2 x 3 runs whose planes step so and whose rows and
// columns lie far apart (s2d channels-last K = 3 DCR).
tile_shape interleaved_source_tile(std::int64_t width, bool along_planes, std::int64_t dst_col, std::int64_t dst_row,
                                   std::int64_t dst_plane) {
  const std::int64_t step = width + 3;
  if (along_planes) {
    return {.planes = 20,
            .rows = 2,
            .cols = 3,
            .src_plane = step,
            .src_row = 3 * (20 * step + 600),
            .src_col = 20 * step + 600,
            .dst_plane = dst_plane,
            .dst_row = dst_row,
            .dst_col = dst_col};
  }
  return {.planes = 2,
          .rows = 20,
          .cols = 3,
          .src_plane = 3 * (20 * step + 600),
          .src_row = step,
          .src_col = 20 * step + 600,
          .dst_plane = dst_plane,
          .dst_row = dst_row,
          .dst_col = dst_col};
}

// The streaming run copy that outputs larger than the cache take: straight through the kernel,
// every start within a cache line (partial first and last lines), planes, rows and columns, with
// the columns continuing the destination (and the rows continuing the columns, and the planes
// the rows), the rows continuing it (the lines between runs joined from both runs' sources), or
// neither; tiles of one source stream per row and tiles of interleaved ones (prefetched; runs of
// 65-127 bytes stream only there, and take the ordinary copy in the others).
TEST(PermuteRun, StreamingRunCopiesMatch) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(23);
  for (std::int64_t width : {65, 72, 96, 127, 128, 129, 191, 200, 256, 1000, 4096}) {
    const tile_kernel kernel = run_tile_kernel_avx512(static_cast<std::size_t>(width), true);
    ASSERT_STREQ(kernel.name, (width >= 128 ? "copy_runs_streaming_avx512" : "copy_short_runs_streaming_avx512"))
        << width;
    // Destination strides (column, row, plane) for `planes` x `rows` x `cols` runs: padded except
    // along the continuing axes.
    struct destination {
      const char* continuing;
      std::int64_t col, row, plane;
    };
    for (const auto [planes, rows, cols] : {std::array<std::int64_t, 3>{2, 3, 5}, {2, 20, 3}, {20, 2, 3}}) {
      const std::int64_t padded_row = cols * width + 7;
      const std::int64_t padded_col = width + 5;
      const destination destinations[] = {
          {"columns", width, padded_row, rows * padded_row + 64},
          {"columns and rows", width, cols * width, rows * cols * width + 64},
          {"columns, rows and planes", width, cols * width, rows * cols * width},
          {"rows", rows * width + 7, width, cols * (rows * width + 7) + 64},
          {"nothing", padded_col, cols * padded_col + 7, rows * (cols * padded_col + 7) + 64},
      };
      for (const destination& along : destinations) {
        const tile_shape t = rows == 3
                                 ? padded_source_tile(width, along.col, along.row, along.plane)
                                 : interleaved_source_tile(width, planes == 20, along.col, along.row, along.plane);
        for (std::int64_t misalign : {0, 1, 16, 17, 63}) {
          ASSERT_TRUE(tile_copy_matches(kernel, t, width, misalign, rng))
              << "width=" << width << " misalign=" << misalign << " continuing: " << along.continuing
              << " tile: " << planes << " x " << rows << " x " << cols;
        }
      }
    }
  }
  // Runs of 65-127 bytes from one source stream (each pixel's runs in turn, d2s NHWC) whose rows
  // continue each column's destination for 4 KiB or more stream too (columns of 16 KiB here);
  // shorter columns (20 rows, under 2.6 KiB) do not.
  for (std::int64_t width : {65, 72, 96, 127}) {
    const tile_kernel kernel = run_tile_kernel_avx512(static_cast<std::size_t>(width), true);
    for (std::int64_t rows : {16 * 1024 / width + 1, std::int64_t{20}}) {
      for (std::int64_t column_padding : {0, 7}) {
        const std::int64_t dst_col = rows * width + column_padding;
        const tile_shape t{.planes = 1,
                           .rows = rows,
                           .cols = 3,
                           .src_plane = 0,
                           .src_row = 3 * width + 5,
                           .src_col = width,
                           .dst_plane = 0,
                           .dst_row = width,
                           .dst_col = dst_col};
        for (std::int64_t misalign : {0, 1, 16, 17, 63}) {
          ASSERT_TRUE(tile_copy_matches(kernel, t, width, misalign, rng))
              << "width=" << width << " rows=" << rows << " column padding=" << column_padding
              << " misalign=" << misalign;
        }
      }
    }
  }
  // An output in the cache keeps ordinary stores.
  EXPECT_STREQ(run_tile_kernel_avx512(96, false).name, "copy_runs_avx512");
  EXPECT_STREQ(run_tile_kernel_avx512(200, false).name, "copy_runs_avx512");
}

// Runs of 12-63 bytes into outputs larger than the cache, joined into whole lines where a tile's
// columns continue the destination for 256 bytes or more and it reads the source in one stretch:
// straight through the kernel, every start within a line. Each row a stretch, or the rows and the
// planes continuing it too (the line between two rows or planes joined across them). Tiles that
// read columns or rows far apart in the source are joined too by the kernel for outputs far past
// the cache (columns far apart and a run's step short: each source stream prefetched) and take the
// ordinary copy otherwise; where tiles in one source stretch are not joined (a Zen 5's plans), the
// kernel far past the cache joins only the others, and below that the ordinary copy takes every
// tile. Shorter stretches, rows continuing each column's destination and destinations that
// continue along no axis take the ordinary copy, as do shorter runs and outputs in the cache.
TEST(PermuteRun, StreamingJoinedRunCopiesMatch) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(37);
  for (std::int64_t width : {12, 18, 24, 33, 48, 63}) {
    // `planes` x `rows` x `cols` runs read as d2s channels-last reads them: each column's rows a
    // run and a byte apart, the columns a few rows' span apart (under 512 bytes), or `far` apart.
    auto tile = [width](std::int64_t planes, std::int64_t rows, std::int64_t cols, std::int64_t dst_col,
                        std::int64_t dst_row, std::int64_t dst_plane, std::int64_t far_col = 0,
                        std::int64_t far_row = 0) {
      const std::int64_t src_row = far_row != 0 ? far_row : width + 1;
      const std::int64_t src_col = far_col != 0 ? far_col : 3 * (width + 1) + 3;
      return tile_shape{.planes = planes,
                        .rows = rows,
                        .cols = cols,
                        .src_plane = cols * src_col + rows * src_row + 7,
                        .src_row = src_row,
                        .src_col = src_col,
                        .dst_plane = dst_plane,
                        .dst_row = dst_row,
                        .dst_col = dst_col};
    };
    const std::int64_t row = 24 * width;  // 24 columns' runs
    struct named_tile {
      const char* what;
      tile_shape shape;
    };
    const named_tile tiles[] = {
        {"columns, each row a stretch", tile(2, 3, 24, width, row + 7, 3 * (row + 7) + 64)},
        {"columns and rows", tile(2, 3, 24, width, row, 3 * row + 64)},
        {"columns, rows and planes", tile(2, 3, 24, width, row, 3 * row)},
        {"columns, rows and planes, 2 x 2 runs per plane", tile(20, 2, 2, width, 2 * width, 4 * width)},
        {"columns far apart (joined far past the cache, prefetched)", tile(2, 3, 24, width, row, 3 * row, 600)},
        {"columns far apart, each row a stretch (far past the cache)",
         tile(2, 3, 24, width, row + 7, 3 * (row + 7) + 64, 600)},
        {"rows far apart (joined far past the cache)", tile(2, 3, 24, width, row, 3 * row, 0, 24 * 160)},
        {"columns, short stretches (ordinary copy)", tile(2, 3, 3, width, 3 * width + 7, 3 * (3 * width + 7) + 64)},
        {"rows (ordinary copy)", tile(2, 24, 3, 24 * width + 7, width, 3 * (24 * width + 7) + 64)},
        {"nothing (ordinary copy)", tile(2, 3, 24, width + 5, 24 * (width + 5) + 7, 3 * (24 * (width + 5) + 7) + 64)},
    };
    struct kernel_choice {
      bool far_past_cache;
      bool joins_source_stretches;
      const char* name;
    };
    const kernel_choice choices[] = {
        {false, true, "copy_joined_runs_streaming_avx512"},
        {true, true, "copy_joined_runs_streaming_far_avx512"},
        {true, false, "copy_joined_interleaved_runs_streaming_far_avx512"},
        {false, false, "copy_runs_avx512"},
    };
    for (const kernel_choice& choice : choices) {
      const tile_kernel kernel = run_tile_kernel_avx512(static_cast<std::size_t>(width), true, choice.far_past_cache,
                                                        choice.joins_source_stretches);
      ASSERT_STREQ(kernel.name, choice.name) << width;
      for (const named_tile& t : tiles) {
        for (std::int64_t misalign : {0, 1, 16, 17, 63}) {
          ASSERT_TRUE(tile_copy_matches(kernel, t.shape, width, misalign, rng))
              << "width=" << width << " misalign=" << misalign << " continuing: " << t.what
              << " kernel: " << choice.name;
        }
      }
    }
  }
  EXPECT_STREQ(run_tile_kernel_avx512(11, true).name, "copy_runs_avx512");
  EXPECT_STREQ(run_tile_kernel_avx512(11, true, true).name, "copy_runs_avx512");
  EXPECT_STREQ(run_tile_kernel_avx512(18, false).name, "copy_runs_avx512");
  EXPECT_STREQ(run_tile_kernel_avx512(48, false, true).name, "copy_runs_avx512");
}

// The run copy that fetches each plane's columns a plane ahead, straight through the kernel, on
// tiles it prefetches (d2s channels-last K = 3's: each column's rows a run apart, the columns a
// few rows' span apart, the planes further) and on tiles it copies without (one plane, rows
// stepping back or wider than the columns' step, columns spanning over 256 bytes), every start
// within a line; prefetched_column_bytes tells the two apart.
TEST(PermuteRun, PlanePrefetchingRunCopiesMatch) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  const tile_kernel kernel = plane_prefetching_run_kernel_avx512();
  ASSERT_STREQ(kernel.name, "copy_runs_prefetching_planes_avx512");
  std::mt19937_64 rng(61);
  for (std::int64_t width : {12, 16, 24, 32, 48, 63}) {
    const std::int64_t rows = 4;
    const std::int64_t column = 3 * width + width;  // a column's rows: 4 runs, back to back
    auto tile = [&](std::int64_t planes, std::int64_t src_row, std::int64_t src_col) {
      const std::int64_t cols = 7;
      const std::int64_t row = cols * width;
      return tile_shape{.planes = planes,
                        .rows = rows,
                        .cols = cols,
                        .src_plane = cols * src_col + 5,
                        .src_row = src_row,
                        .src_col = src_col,
                        .dst_plane = rows * row,
                        .dst_row = row,
                        .dst_col = width};
    };
    struct case_of {
      const char* what;
      tile_shape shape;
      std::int64_t prefetched;
    };
    const case_of cases[] = {
        {"prefetched", tile(5, width, column + 8), column},
        {"prefetched, columns just apart", tile(3, width, column), column},
        {"one plane", tile(1, width, column + 8), 0},
        {"rows past the columns' step", tile(5, width, column - 1), 0},
        {"rows stepping back", tile(5, -width, column + 8), 0},
    };
    for (const case_of& c : cases) {
      EXPECT_EQ(prefetched_column_bytes(c.shape, static_cast<std::size_t>(width)), c.prefetched)
          << c.what << " width=" << width;
      if (c.shape.src_row < 0) continue;  // tile_copy_matches reads forward strides only
      for (std::int64_t misalign : {0, 1, 16, 17, 63}) {
        ASSERT_TRUE(tile_copy_matches(kernel, c.shape, width, misalign, rng))
            << c.what << " width=" << width << " misalign=" << misalign;
      }
    }
  }
  // Columns of 8 rows of 40 bytes span 320 bytes, over max_prefetched_column_bytes.
  const tile_shape wide{.planes = 3, .rows = 8, .cols = 4, .src_plane = 4096, .src_row = 40, .src_col = 1024};
  EXPECT_EQ(prefetched_column_bytes(wide, 40), 0);
  EXPECT_EQ(prefetched_column_bytes(
                tile_shape{.planes = 3, .rows = 6, .cols = 4, .src_plane = 4096, .src_row = 40, .src_col = 1024}, 40),
            240);
}

// The streaming copy of one-line (64-byte) runs: straight through the kernel, into destinations on
// cache lines and off them, with strides of whole lines (every run streams, or none does) and of
// parts of lines (some do, some take ordinary stores); the bytes between runs are untouched.
TEST(PermuteRun, StreamingLineCopiesMatch) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  const tile_kernel kernel = run_tile_kernel_avx512(64, true);
  ASSERT_STREQ(kernel.name, "copy_x512_streaming_avx512");
  EXPECT_STREQ(run_tile_kernel_avx512(64, false).name, "copy_x512_avx512");
  std::mt19937_64 rng(31);
  struct destination {
    const char* kind;
    std::int64_t col, row, plane;
  };
  const destination destinations[] = {
      {"continuing lines", 64, 5 * 64, 15 * 64 + 128},
      {"lines apart", 3 * 64, 17 * 64, 3 * 17 * 64 + 64},
      {"parts of lines apart", 80, 5 * 80 + 16, 3 * (5 * 80 + 16) + 48},
  };
  for (const destination& along : destinations) {
    for (std::int64_t misalign : {0, 16, 48}) {
      const tile_shape t{.planes = 2,
                         .rows = 3,
                         .cols = 5,
                         .src_plane = 3 * 400 + 8,
                         .src_row = 400,
                         .src_col = 72,
                         .dst_plane = along.plane,
                         .dst_row = along.row,
                         .dst_col = along.col};
      EXPECT_TRUE(tile_copy_matches(kernel, t, 64, misalign, rng))
          << "misalign=" << misalign << " destination: " << along.kind;
    }
  }
}

// 8-way de-interleaves into rows a multiple of 4 KiB apart, whose runs of four steps or more are
// written a pair of rows at a time, pair g g steps late (run_staggered): every run length around
// that limit and past it, every element width, rows 4 KiB and 12 KiB apart and 64 bytes off such
// multiples (the plain loop), destinations on lines and 16 bytes off them, several runs per call;
// every row matches the naive copy and nothing between the rows is written.
TEST(PermuteRun, StaggeredDeinterleavesOfRowsSharingCacheSetsMatch) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(41);
  for (std::int64_t width : {1, 2, 4, 8}) {
    const std::int64_t step = 64 / width;  // positions per vector
    for (std::int64_t length : {3 * step, 4 * step - 1, 4 * step, 4 * step + 1, 5 * step + 3, 7 * step, 9 * step + 5,
                                64 * step, 100 * step + 7}) {
      for (std::int64_t row_gap : {std::int64_t{0}, std::int64_t{64}}) {
        for (std::int64_t misalign : {0, 16}) {
          const std::int64_t row_bytes = (length * width + 4095) / 4096 * 4096 + row_gap;
          const std::int64_t runs = 3;  // along an outer axis: a run's 8 rows after the last's
          const std::vector<permute_axis> axes = {
              {runs, 8 * length * width, 8 * row_bytes}, {8, width, row_bytes}, {length, 8 * width, width}};
          const permute_plan& plan = plan_permute_cached(axes, static_cast<std::size_t>(width));
          ASSERT_TRUE(kernel_name(plan).starts_with("deinterleave8_x")) << describe(plan);
          std::vector<std::byte> src(static_cast<std::size_t>(runs * 8 * length * width));
          for (auto& v : src) v = static_cast<std::byte>(rng());
          // Destinations from a line on, then `misalign` bytes past it.
          const auto dst_bytes = static_cast<std::size_t>(runs * 8 * row_bytes + misalign + 64);
          std::vector<std::byte> expected(dst_bytes, std::byte{0x5A});
          permute_naive(axes, src.data(), line_start(expected) + misalign, width);
          std::vector<std::byte> actual(dst_bytes, std::byte{0x5A});
          run_permute(plan, src.data(), line_start(actual) + misalign, 1);
          const std::int64_t span = runs * 8 * row_bytes + misalign;
          ASSERT_TRUE(std::equal(line_start(actual), line_start(actual) + span, line_start(expected)))
              << "width=" << width << " length=" << length << " row_bytes=" << row_bytes << " misalign=" << misalign
              << ": " << describe(plan);
        }
      }
    }
  }
}

// ... and short runs of whole steps whose rows continue along the repeat (each run one step or a
// few of its rows, the next run the rows' next bytes), which b_way_runs_in_cache staggers as one
// long run per call.
TEST(PermuteRun, StaggeredDeinterleavesOfContinuingRowsMatch) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(43);
  for (std::int64_t width : {1, 2, 4, 8}) {
    const std::int64_t step = 64 / width;
    for (std::int64_t length : {step, 2 * step, 3 * step}) {
      for (std::int64_t runs : {1, 2, 3, 4, 5, 37}) {
        for (std::int64_t row_gap : {std::int64_t{0}, std::int64_t{64}}) {
          const std::int64_t row_bytes = (runs * length * width + 4095) / 4096 * 4096 + row_gap;
          const std::int64_t source_run = 8 * length * width + 64;  // runs 64 bytes apart: no fusing
          const std::vector<permute_axis> axes = {
              {runs, source_run, length * width}, {8, width, row_bytes}, {length, 8 * width, width}};
          const permute_plan& plan = plan_permute_cached(axes, static_cast<std::size_t>(width));
          ASSERT_TRUE(kernel_name(plan).starts_with("deinterleave8_x")) << describe(plan);
          // Unstaged, with the runs along the repeat.
          ASSERT_EQ(describe(plan).find(" staged by "), std::string::npos) << describe(plan);
          ASSERT_EQ(describe(plan).find(" segmented"), std::string::npos) << describe(plan);
          std::vector<std::byte> src(static_cast<std::size_t>(runs * source_run));
          for (auto& v : src) v = static_cast<std::byte>(rng());
          const auto dst_bytes = static_cast<std::size_t>(8 * row_bytes + 64);
          std::vector<std::byte> expected(dst_bytes, std::byte{0x5A});
          permute_naive(axes, src.data(), line_start(expected), width);
          std::vector<std::byte> actual(dst_bytes, std::byte{0x5A});
          run_permute(plan, src.data(), line_start(actual), 1);
          ASSERT_TRUE(std::equal(line_start(actual), line_start(actual) + 8 * row_bytes, line_start(expected)))
              << "width=" << width << " length=" << length << " runs=" << runs << " row_bytes=" << row_bytes << ": "
              << describe(plan);
        }
      }
    }
  }
}

// Runs `plan` of `axes` on random bytes with each thread count from one to `most_threads`, into an
// output that starts on a cache line: every output matches the naive copy.
void expect_matches_naive_on_thread_counts(const std::vector<permute_axis>& axes, const permute_plan& plan,
                                           std::int64_t width, std::mt19937_64& rng, int most_threads) {
  std::vector<std::byte> src(static_cast<std::size_t>(plan.total_bytes));
  for (auto& v : src) v = static_cast<std::byte>(rng());
  std::vector<std::byte> expected(src.size(), std::byte{0x5A});
  permute_naive(axes, src.data(), expected.data(), width);
  for (int threads = 1; threads <= most_threads; ++threads) {
    // On a cache line, as the plans assume (a vector's own data is 16 bytes past one where malloc
    // maps it), the line's bytes past the output untouched.
    std::vector<std::byte> storage(src.size() + 128, std::byte{0x5A});
    std::byte* const actual = line_start(storage);
    run_permute(plan, src.data(), actual, threads);
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), actual)) << threads << " threads: " << describe(plan);
    EXPECT_TRUE(
        std::all_of(actual + src.size(), actual + src.size() + 64, [](std::byte v) { return v == std::byte{0x5A}; }))
        << threads << " threads: " << describe(plan);
  }
}

void expect_matches_naive_on_one_and_two_threads(const std::vector<permute_axis>& axes, const permute_plan& plan,
                                                 std::int64_t width, std::mt19937_64& rng) {
  expect_matches_naive_on_thread_counts(axes, plan, width, rng, 2);
}

// The plan run on one thread into an output 16 bytes past a cache line (numpy's alignment), the
// bytes around it untouched.
void expect_matches_naive_off_a_line(const std::vector<permute_axis>& axes, const permute_plan& plan,
                                     std::int64_t width, std::mt19937_64& rng) {
  std::vector<std::byte> src(static_cast<std::size_t>(plan.total_bytes));
  for (auto& v : src) v = static_cast<std::byte>(rng());
  std::vector<std::byte> expected(src.size(), std::byte{0x5A});
  permute_naive(axes, src.data(), expected.data(), width);
  std::vector<std::byte> storage(src.size() + 128, std::byte{0x5A});
  std::byte* const off_line = line_start(storage) + 16;
  run_permute(plan, src.data(), off_line, 1);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), off_line)) << describe(plan);
  auto untouched = [](std::byte v) { return v == std::byte{0x5A}; };
  EXPECT_TRUE(std::all_of(line_start(storage), off_line, untouched));
  EXPECT_TRUE(std::all_of(off_line + src.size(), line_start(storage) + src.size() + 64, untouched));
}

// Both: on one and two threads on a line, then on one thread 16 bytes past one.
void expect_matches_naive_on_and_off_a_line(const std::vector<permute_axis>& axes, const permute_plan& plan,
                                            std::int64_t width, std::mt19937_64& rng) {
  expect_matches_naive_on_one_and_two_threads(axes, plan, width, rng);
  expect_matches_naive_off_a_line(axes, plan, width, rng);
}

// Outputs of 12 MiB or more plan the streaming copy or shuffle, smaller ones the ordinary one; the
// copy runs on two threads (each fences its own streaming stores).
// A shuffle plan says whether its output lies far past the cache (64 MiB or more), where the AVX2
// de-interleaves of 2 and 4 ways stream: NCHW DCR space_to_depth, b = 2, C = 1 of float32 at
// 16 MiB (no) and 64 MiB (yes).
TEST(PermutePlan, ShufflesSayWhetherTheirOutputIsFarPastTheCache) {
  if (detected_isa() < isa::avx2) GTEST_SKIP() << "needs AVX2; this CPU has " << to_string(detected_isa());
  set_max_isa(isa::avx2);
  for (const auto& [side, far] : {std::pair{std::int64_t{2048}, false}, std::pair{std::int64_t{4096}, true}}) {
    const auto axes = packed_transpose({1, 1, side / 2, 2, side / 2, 2}, {0, 3, 5, 1, 2, 4}, 4);
    const permute_plan plan = plan_permute(axes, 4);
    ASSERT_TRUE(plan.shuffle.has_value()) << describe(plan);
    EXPECT_EQ(plan.shuffle->repeat.far_past_cache, far) << describe(plan);
  }
  set_max_isa(isa::avx512vbmi);
}

TEST(PermutePlan, OutputsLargerThanTheCacheStream) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  set_max_isa(isa::avx512);
  // The plan of one tensor, whose run copy is `kernel`.
  auto plan_copying_with = [](const std::vector<permute_axis>& axes, std::size_t width, const char* kernel) {
    const permute_plan plan_of_axes = plan_permute(axes, width);
    EXPECT_EQ(kernel_name(plan_of_axes), kernel) << describe(plan_of_axes);
    return plan_of_axes;
  };
  // NHWC DCR space_to_depth, b = 2, C = 64 float32 (runs of 512 bytes): 16 MiB, then 1 MiB.
  const auto large = packed_transpose({1, 128, 2, 128, 2, 64}, {0, 1, 3, 2, 4, 5}, 4);
  const permute_plan plan = plan_copying_with(large, 4, "copy_runs_streaming_avx512");
  plan_copying_with(packed_transpose({1, 32, 2, 32, 2, 64}, {0, 1, 3, 2, 4, 5}, 4), 4, "copy_runs_avx512");
  std::vector<std::byte> src(static_cast<std::size_t>(plan.total_bytes));
  std::mt19937_64 rng(29);
  for (auto& v : src) v = static_cast<std::byte>(rng());
  std::vector<std::byte> expected(src.size(), std::byte{0x5A});
  permute_naive(large, src.data(), expected.data(), 4);
  std::vector<std::byte> actual(src.size(), std::byte{0x5A});
  run_permute(plan, src.data(), actual.data(), 2);
  EXPECT_TRUE(actual == expected);
  // Runs of one line stream where the tile reads the source in stretches of lines: NHWC DCR
  // depth_to_space, b = 4, C = 16 of bytes (16 MiB). Not where it reads part of each source row
  // (channels-last K = 3 DCR depth_to_space, b = 2, C = 16 of 2-byte elements: the other half of
  // each row belongs to another outer position), nor where no tile axis steps by a line (the
  // space_to_depth of it, b = 8, C = 1 of 8-byte elements).
  const auto line_runs = packed_transpose({1, 256, 256, 4, 4, 16}, {0, 1, 3, 2, 4, 5}, 1);
  const permute_plan line_plan = plan_copying_with(line_runs, 1, "copy_x512_streaming_avx512");
  expect_matches_naive_on_one_and_two_threads(line_runs, line_plan, 1, rng);
  plan_copying_with(packed_transpose({1, 40, 40, 40, 2, 2, 2, 16}, {0, 1, 4, 2, 5, 3, 6, 7}, 2), 2, "copy_x512_avx512");
  plan_copying_with(packed_transpose({1, 16, 8, 16, 8, 16, 8, 1}, {0, 1, 3, 5, 2, 4, 6, 7}, 8), 8, "copy_x512_avx512");
  // Far past the cache (64 MiB) both stream: the second as the space_to_depth of b = 8, C = 1 of
  // 8-byte elements with twice the depth and width.
  plan_copying_with(packed_transpose({1, 64, 64, 64, 2, 2, 2, 16}, {0, 1, 4, 2, 5, 3, 6, 7}, 2), 2,
                    "copy_x512_streaming_avx512");
  const auto far_scattered_runs = packed_transpose({1, 32, 8, 16, 8, 32, 8, 1}, {0, 1, 3, 5, 2, 4, 6, 7}, 8);
  const permute_plan far_scattered_plan = plan_copying_with(far_scattered_runs, 8, "copy_x512_streaming_avx512");
  expect_matches_naive_on_one_and_two_threads(far_scattered_runs, far_scattered_plan, 8, rng);
  // Whether a plan is a shuffle that streams (a fatal failure where it is no shuffle).
  auto expect_shuffle_streaming = [](const std::vector<permute_axis>& axes, std::int64_t width, bool streams) {
    const permute_plan shuffle_plan = plan_permute(axes, static_cast<std::size_t>(width));
    ASSERT_TRUE(shuffle_plan.shuffle.has_value()) << describe(shuffle_plan);
    EXPECT_EQ(shuffle_plan.shuffle->repeat.streaming, streams) << describe(shuffle_plan);
  };
  // NCHW CRD depth_to_space, b = 2, float32: a 2-way interleave, streaming at 16 MiB only.
  ASSERT_NO_FATAL_FAILURE(
      expect_shuffle_streaming(packed_transpose({1, 4, 2, 2, 512, 512}, {0, 1, 4, 2, 5, 3}, 4), 4, true));
  ASSERT_NO_FATAL_FAILURE(
      expect_shuffle_streaming(packed_transpose({1, 4, 2, 2, 128, 128}, {0, 1, 4, 2, 5, 3}, 4), 4, false));
  // b = 3 of bytes: output rows of 3 x 1366 bytes, off cache lines, stream from their first whole
  // line; rows of 3 x 1000 bytes, which continue one another, stream as one output (line_sink);
  // runs of 20 bytes do not stream.
  ASSERT_NO_FATAL_FAILURE(
      expect_shuffle_streaming(packed_transpose({1, 1, 3, 3, 1366, 1366}, {0, 1, 4, 2, 5, 3}, 1), 1, true));
  ASSERT_NO_FATAL_FAILURE(
      expect_shuffle_streaming(packed_transpose({1, 1, 3, 3, 2000, 1000}, {0, 1, 4, 2, 5, 3}, 1), 1, true));
  ASSERT_NO_FATAL_FAILURE(
      expect_shuffle_streaming(packed_transpose({1, 1, 3, 3, 70000, 20}, {0, 1, 4, 2, 5, 3}, 1), 1, false));
  // The inverse, NCHW CRD space_to_depth: 3-way de-interleaves of bytes into rows off cache lines
  // stream runs of 2050 bytes; runs of 2000 are too short to.
  const permute_plan long_runs = plan_permute(packed_transpose({1, 1, 700, 3, 2050, 3}, {0, 1, 3, 5, 2, 4}, 1), 1);
  ASSERT_TRUE(long_runs.shuffle.has_value()) << describe(long_runs);
  EXPECT_FALSE(long_runs.shuffle->interleave) << describe(long_runs);
  EXPECT_TRUE(long_runs.shuffle->repeat.streaming) << describe(long_runs);
  ASSERT_NO_FATAL_FAILURE(
      expect_shuffle_streaming(packed_transpose({1, 1, 720, 3, 2000, 3}, {0, 1, 3, 5, 2, 4}, 1), 1, false));
  // CF-K3 CRD space_to_depth, b = 2, C = 28 of 2-byte elements: a staged 2-way de-interleave of
  // 31-element runs whose far-side rows (output planes of 31^3 elements, off cache lines) stream,
  // 4 x 31 x 31 elements of each per call.
  const auto staged_axes = packed_transpose({28, 31, 2, 31, 2, 31, 2}, {0, 2, 4, 6, 1, 3, 5}, 2);
  const permute_plan staged = plan_permute(staged_axes, 2);
  ASSERT_TRUE(staged.shuffle.has_value()) << describe(staged);
  EXPECT_NE(staged.shuffle->segment_copy.copy, nullptr) << describe(staged);
  EXPECT_TRUE(staged.shuffle->repeat.streaming) << describe(staged);
  expect_matches_naive_on_one_and_two_threads(staged_axes, staged, 2, rng);
  set_max_isa(isa::avx512vbmi);
}

// s2d channels-last K = 3 CRD of a cube of side x block elements per spatial axis:
// [d, b, h, b, w, b, c] -> [d, h, w, c, b, b, b].
std::vector<permute_axis> s2d_channels_last_k3_crd(std::int64_t side, std::int64_t block, std::int64_t channels,
                                                   std::int64_t width) {
  return packed_transpose({side, block, side, block, side, block, channels}, {0, 2, 4, 6, 1, 3, 5}, width);
}

// Whether the plan, a staged de-interleave (checked), has `flag` set.
bool staged_deinterleave_sets(const std::vector<permute_axis>& axes, std::int64_t width, bool shuffle_tile::*flag) {
  const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
  const bool staged = plan.shuffle && !plan.shuffle->interleave && plan.shuffle->segment_copy.copy != nullptr;
  EXPECT_TRUE(staged) << describe(plan);
  return staged && (*plan.shuffle).*flag;
}

// Far past the cache a staged de-interleave streams its short rows (streams_short_staged_rows):
// s2d channels-last K = 3 CRD b8 C16 of 2-byte elements at 64 MiB, whose blocks of the repeat were
// one source plane each (one line of each way per call), and b4 C16 of 4-byte elements, whose calls
// group outer positions with each way's row on whole lines. Not at 16 MiB, nor below AVX-512, nor
// where grouped rows are off lines (b3 C16 of 4-byte elements: rows of 108 bytes). Both match the
// element loop on one and two threads, and 16 bytes past a line.
TEST(PermutePlan, StagedDeinterleavesFarPastTheCacheStreamShortRows) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(113);
  const auto s2d = s2d_channels_last_k3_crd;
  auto streams_short_rows = [](const std::vector<permute_axis>& axes, std::int64_t width) {
    return staged_deinterleave_sets(axes, width, &shuffle_tile::streams_short_staged_rows);
  };
  const auto blocked = s2d(16, 8, 16, 2);
  const auto grouped = s2d(32, 4, 16, 4);
  set_max_isa(isa::avx512);
  EXPECT_TRUE(streams_short_rows(blocked, 2));
  EXPECT_TRUE(streams_short_rows(grouped, 4));
  EXPECT_FALSE(streams_short_rows(s2d(8, 8, 16, 2), 2));   // 16 MiB
  EXPECT_FALSE(streams_short_rows(s2d(34, 3, 16, 4), 4));  // 68 MB, rows of 108 bytes
  const permute_plan plan = plan_permute(blocked, 2);
  EXPECT_NE(describe(plan).find(" short rows too"), std::string::npos) << describe(plan);
  expect_matches_naive_on_and_off_a_line(blocked, plan, 2, rng);
  const permute_plan grouped_plan = plan_permute(grouped, 4);
  expect_matches_naive_on_and_off_a_line(grouped, grouped_plan, 4, rng);
  set_max_isa(isa::avx2);
  const permute_plan avx2_plan = plan_permute(blocked, 2);
  EXPECT_FALSE(avx2_plan.shuffle && avx2_plan.shuffle->streams_short_staged_rows) << describe(avx2_plan);
  set_max_isa(isa::avx512vbmi);
}

// Far past the cache, s2d channels-last K = 3 CRD b3 C16 of 4-byte elements (68 MB), whose staged
// calls group output pixels and whose channels' rows of 108 bytes fill each pixel side by side,
// de-interleaves each call into a second buffer and streams it out; it matches the element loop
// on one and two threads, and 16 bytes past a line. Not at 18 MB, nor below AVX-512, nor where
// each channel's row is whole lines (b4 C16: 256 bytes), nor for a staged plan whose calls do not
// group positions (b8 C16 of 2-byte elements).
TEST(PermutePlan, FarStagedDeinterleavesOfShortRowsStreamTheirStretch) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(127);
  constexpr auto stretch = &shuffle_tile::stages_far_stretch;
  const auto far = s2d_channels_last_k3_crd(34, 3, 16, 4);
  set_max_isa(isa::avx512);
  EXPECT_TRUE(staged_deinterleave_sets(far, 4, stretch));
  EXPECT_FALSE(staged_deinterleave_sets(s2d_channels_last_k3_crd(22, 3, 16, 4), 4, stretch));  // 18.4 MB
  EXPECT_FALSE(staged_deinterleave_sets(s2d_channels_last_k3_crd(32, 4, 16, 4), 4, stretch));  // 256-byte rows
  // Calls of one position each.
  EXPECT_FALSE(staged_deinterleave_sets(s2d_channels_last_k3_crd(16, 8, 16, 2), 2, stretch));
  const permute_plan plan = plan_permute(far, 4);
  EXPECT_NE(describe(plan).find(" through a second buffer"), std::string::npos) << describe(plan);
  expect_matches_naive_on_and_off_a_line(far, plan, 4, rng);
  set_max_isa(isa::avx2);
  const permute_plan avx2_plan = plan_permute(far, 4);
  EXPECT_FALSE(avx2_plan.shuffle && avx2_plan.shuffle->stages_far_stretch) << describe(avx2_plan);
  set_max_isa(isa::avx512vbmi);
}

// Run copies of short runs whose output is larger than the cache and whose output rows are long
// walk the source in order, three or more output rows at a time; in cache, or with two output
// rows, they keep writing each output row in order.
TEST(PermutePlan, LongOutputRowsOfShortRunsWalkTheSourceInOrder) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  set_max_isa(isa::avx512);
  // NHWC DCR depth_to_space of float32 C = 3: [1, H, W, b, b, 3] -> [1, H, b, W, b, 3], runs of
  // b x 12 bytes.
  auto depth_to_space = [](std::int64_t size, std::int64_t b) {
    return packed_transpose({1, size, size, b, b, 3}, {0, 1, 3, 2, 4, 5}, 4);
  };
  const auto large = depth_to_space(394, 3);  // 16.8 MB, 14184-byte output rows
  const permute_plan plan = plan_permute(large, 4);
  // The streaming kernel of runs under a line, which copies these tiles (whose rows continue each
  // column's destination) the ordinary way.
  EXPECT_EQ(kernel_name(plan), "copy_joined_runs_streaming_avx512") << describe(plan);
  EXPECT_EQ(plan.col.extent, 3) << describe(plan);
  EXPECT_EQ(plan.col.src_stride, 36) << describe(plan);
  EXPECT_EQ(plan.plane.extent, 1) << describe(plan);
  EXPECT_EQ(plan_permute(depth_to_space(99, 3), 4).col.extent, 99);    // 1 MiB
  EXPECT_EQ(plan_permute(depth_to_space(591, 2), 4).col.extent, 591);  // two output rows
  std::mt19937_64 rng(37);
  expect_matches_naive_on_one_and_two_threads(large, plan, 4, rng);
  set_max_isa(isa::avx512vbmi);
}

// The avx512 level without VBMI has no gather of its own: where the AVX2 plan gathers, it takes
// that plan (the RGB pixel shuffle, the 6-byte runs of s2d NHWC CRD b2 C3 of bytes), except where
// its own plan transposes in registers (8-byte elements, which AVX2 gathers one at a time).
TEST(PermutePlan, Avx512WithoutVbmiTakesTheAvx2PlansGather) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(41);
  const auto rgb = packed_transpose({64, 64, 3, 2, 2}, {0, 3, 1, 4, 2}, 1);        // d2s [64, 64, 12]
  const auto rgb_pairs = packed_transpose({74, 2, 74, 2, 3}, {0, 2, 4, 1, 3}, 1);  // s2d NHWC CRD b2 C3
  for (const auto& axes : {rgb, rgb_pairs}) {
    set_max_isa(isa::avx2);
    const permute_plan avx2_plan = plan_permute(axes, 1);
    set_max_isa(isa::avx512);
    const permute_plan plan = plan_permute(axes, 1);
    EXPECT_EQ(kernel_name(avx2_plan), "gather_avx2") << describe(avx2_plan);
    EXPECT_EQ(describe(plan), describe(avx2_plan));
    expect_matches_naive_on_one_and_two_threads(axes, plan, 1, rng);
  }
  const auto eight_byte_transpose = packed_transpose({1, 19, 67}, {0, 2, 1}, 8);
  set_max_isa(isa::avx2);
  EXPECT_EQ(kernel_name(plan_permute(eight_byte_transpose, 8)), "gather_avx2");
  set_max_isa(isa::avx512);
  const permute_plan transpose = plan_permute(eight_byte_transpose, 8);
  EXPECT_EQ(kernel_name(transpose), "transpose_x64_avx512") << describe(transpose);
  expect_matches_naive_on_one_and_two_threads(eight_byte_transpose, transpose, 8, rng);
  set_max_isa(isa::avx512vbmi);
}

// The AVX2 level's plan of `axes`, checked to walk its segments in place (shuffle_tile::segmented).
permute_plan segmented_avx2_plan(const std::vector<permute_axis>& axes, std::size_t width) {
  set_max_isa(isa::avx2);
  permute_plan plan = plan_permute(axes, width);
  EXPECT_NE(describe(plan).find(" segmented "), std::string::npos) << describe(plan);
  return plan;
}

// On Intel's cores the AVX-512 levels take the AVX2 level's plan where their own 3-, 9- and 16-way
// interleaves lose to it there, and where they stage what AVX2 walks in place (plan_permute);
// by the common rules they keep their own. Checked for both on any CPU with AVX-512
// (runtime::plan_for_core_kind_for_testing).
TEST(PermutePlan, IntelTakesTheAvx2PlanWhereItsAvx512ShufflesLose) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(43);
  // d2s channels-first CRD b3 C1 of 8-byte elements, [9, 40, 64] -> [120, 192]: 3-way interleaves
  // of 512-byte runs, in the cache.
  const auto three_ways = packed_transpose({3, 3, 40, 64}, {2, 0, 3, 1}, 8);
  set_max_isa(isa::avx2);
  const permute_plan avx2_plan = plan_permute(three_ways, 8);
  EXPECT_EQ(kernel_name(avx2_plan), "interleave3_x64_avx2") << describe(avx2_plan);
  for (isa cap : {isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    set_max_isa(cap);
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);
    const permute_plan own = plan_permute(three_ways, 8);
    EXPECT_EQ(kernel_name(own), "interleave3_x64_avx512") << describe(own);
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::intel);
    const permute_plan intel = plan_permute(three_ways, 8);
    EXPECT_EQ(describe(intel), describe(avx2_plan)) << to_string(cap);
    // The cache keys on the cores too.
    EXPECT_EQ(describe(plan_permute_cached(three_ways, 8)), describe(intel)) << to_string(cap);
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);
    EXPECT_EQ(describe(plan_permute_cached(three_ways, 8)), describe(own)) << to_string(cap);
    expect_matches_naive_on_one_and_two_threads(three_ways, intel, 8, rng);
    // 3-way interleaves of 4-byte lanes keep their own on Intel too.
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::intel);
    const permute_plan words = plan_permute(packed_transpose({3, 3, 40, 64}, {2, 0, 3, 1}, 4), 4);
    EXPECT_EQ(kernel_name(words), "interleave3_x32_avx512") << describe(words);
  }
  // d2s NCHW DCR b8 C16 of 2-byte elements, [1024, 6, 6] -> [16, 48, 48]: 8-way interleaves of
  // 12-byte runs, which AVX-512 stages and AVX2 walks in place.
  const auto staged = packed_transpose({8, 8, 16, 6, 6}, {2, 3, 0, 4, 1}, 2);
  const permute_plan segmented = segmented_avx2_plan(staged, 2);
  for (isa cap : {isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    set_max_isa(cap);
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);
    const permute_plan own = plan_permute(staged, 2);
    EXPECT_NE(describe(own).find(" staged by "), std::string::npos) << describe(own);
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::intel);
    const permute_plan intel = plan_permute(staged, 2);
    EXPECT_EQ(describe(intel), describe(segmented)) << to_string(cap);
    expect_matches_naive_on_one_and_two_threads(staged, intel, 2, rng);
  }
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  set_max_isa(isa::avx512vbmi);
}

// A packed transpose (packed_transpose's arguments) whose plans the per-core tests compare.
struct transpose_problem {
  std::vector<std::int64_t> shape;
  std::vector<int> perm;
  std::int64_t width;
  std::vector<permute_axis> axes() const { return packed_transpose(shape, perm, width); }
  std::size_t element_bytes() const { return static_cast<std::size_t>(width); }
};

// The problem's plan at the AVX2 level (described), and at `cap` by the common rules; planning
// stays at `cap` for the common rules.
std::pair<std::string, permute_plan> avx2_and_common_plans(const transpose_problem& p, isa cap) {
  const auto axes = p.axes();
  set_max_isa(isa::avx2);
  std::string avx2 = describe(plan_permute(axes, p.element_bytes()));
  set_max_isa(cap);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);
  return {std::move(avx2), plan_permute(axes, p.element_bytes())};
}

// On Intel's cores the AVX-512 levels also take the AVX2 level's plan, whatever its form, for
// staged 4-way interleaves of bytes (d2s channels-first K = 3 DCR b4 C1) and staged 8-way
// de-interleaves of 1- and 2-byte lanes (s2d channels-first K = 3 CRD b8 C3 of about 1 MiB, where
// VBMI does not gather) up to 1.5 MiB; the common rules keep their own. Staged 4-way
// de-interleaves of bytes (s2d channels-first K = 3 DCR b4 C1 at 1 MiB), unstaged 16-way
// interleaves of 4-byte lanes (s2d NHWC CRD b4 C16) and the 8-way de-interleaves at 16 MiB keep
// theirs on Intel too.
TEST(PermutePlan, IntelTakesTheAvx2PlanForStagedByteInterleavesAndEightWayDeinterleaves) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(89);
  const transpose_problem taken[] = {{{4, 4, 4, 10, 10, 10}, {3, 0, 4, 1, 5, 2}, 1},
                                     {{3, 9, 8, 9, 8, 9, 8}, {0, 2, 4, 6, 1, 3, 5}, 1},
                                     {{3, 7, 8, 7, 8, 7, 8}, {0, 2, 4, 6, 1, 3, 5}, 2}};
  const transpose_problem kept[] = {{{25, 4, 25, 4, 25, 4}, {1, 3, 5, 0, 2, 4}, 1},
                                    {{8, 4, 8, 4, 16}, {0, 2, 4, 1, 3}, 4}};
  const auto sixteen_mib = packed_transpose({3, 22, 8, 22, 8, 22, 8}, {0, 2, 4, 6, 1, 3, 5}, 1);
  for (isa cap : {isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    for (const transpose_problem& p : taken) {
      const auto axes = p.axes();
      const std::size_t width = p.element_bytes();
      // By the common rules a staged shuffle, or a VBMI gather.
      const auto [avx2, common] = avx2_and_common_plans(p, cap);
      runtime::plan_for_core_kind_for_testing(runtime::core_kind::intel);
      const permute_plan intel = plan_permute(axes, width);
      EXPECT_EQ(describe(intel), avx2) << to_string(cap);
      ASSERT_TRUE(intel.shuffle) << describe(intel);
      EXPECT_EQ(intel.shuffle->level, isa::avx2) << describe(intel);
      EXPECT_NE(describe(intel), describe(common)) << to_string(cap);
      EXPECT_EQ(describe(plan_permute_cached(axes, width)), describe(intel)) << to_string(cap);
      expect_matches_naive_on_one_and_two_threads(axes, intel, width, rng);
    }
    for (const transpose_problem& p : kept) {
      const permute_plan common = avx2_and_common_plans(p, cap).second;
      ASSERT_TRUE(common.shuffle) << describe(common);
      EXPECT_GE(common.shuffle->level, isa::avx512) << describe(common);
      runtime::plan_for_core_kind_for_testing(runtime::core_kind::intel);
      EXPECT_EQ(describe(plan_permute(p.axes(), p.element_bytes())), describe(common)) << to_string(cap);
    }
    // (With VBMI Intel plans it for the cache, see
    // AmdAndIntelPlanStreamedAssembledDeinterleavesForTheCache.)
    const permute_plan large = plan_permute(sixteen_mib, 1);
    ASSERT_TRUE(large.shuffle) << describe(large);
    EXPECT_GE(large.shuffle->level, isa::avx512) << describe(large);
    EXPECT_NE(describe(large).find(" staged by "), std::string::npos) << describe(large);
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  }
  set_max_isa(isa::avx512vbmi);
}

// On a Zen 4 the AVX-512 levels take the AVX2 level's in-place walk of segments for 2-, 4- and
// 8-way de-interleaves of 4-byte lanes too (s2d channels-first K = 3 DCR b4 C16, b8 C3 and b2 C4
// of 4-byte elements, [C, 4b, 4b, 4b] -> [b^3 C, 4, 4, 4]), and, where the output streams, for
// 4-way ones of any lanes; a Zen 5 keeps them staged, as Intel's cores do in the cache.
// The Zen 4 plans against the element loop on one and two threads.
TEST(PermutePlan, Zen4TakesTheAvx2SegmentsForDeinterleavesOfFourByteLanes) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(193);
  struct problem {
    std::vector<permute_axis> axes;
    std::size_t width;
    bool streams;
  };
  auto s2d_channels_first = [](std::int64_t channels, std::int64_t b, std::int64_t coarse, std::size_t width) {
    return packed_transpose({channels, coarse, b, coarse, b, coarse, b}, {2, 4, 6, 0, 1, 3, 5}, width);
  };
  // The last, 16 MB of bytes, streams: a Zen 4 takes the segments of 4-way de-interleaves of any
  // lanes there (Intel's cores by their own rule, stages_where_avx2_segments_win_on_intel).
  const problem problems[] = {{s2d_channels_first(16, 4, 4, 4), 4, false},
                              {s2d_channels_first(3, 8, 4, 4), 4, false},
                              {s2d_channels_first(4, 2, 4, 4), 4, false},
                              {s2d_channels_first(4, 4, 40, 1), 1, true}};
  for (const problem& p : problems) {
    const permute_plan avx2_plan = segmented_avx2_plan(p.axes, p.width);
    for (isa cap : {isa::avx512, isa::avx512vbmi}) {
      if (cap > detected_isa()) continue;
      set_max_isa(cap);
      for (runtime::core_kind cores : every_core_kind) {
        runtime::plan_for_core_kind_for_testing(cores);
        const permute_plan plan = plan_permute(p.axes, p.width);
        EXPECT_EQ(plan.streams, p.streams) << describe(plan);
        const bool segments =
            cores == runtime::core_kind::amd_zen4 || (p.streams && cores == runtime::core_kind::intel);
        if (segments) {
          EXPECT_EQ(describe(plan), describe(avx2_plan)) << static_cast<int>(cores) << " " << to_string(cap);
        } else {
          EXPECT_NE(describe(plan).find(" staged by "), std::string::npos)
              << static_cast<int>(cores) << " " << to_string(cap) << " " << describe(plan);
        }
        if (cores == runtime::core_kind::amd_zen4 && cap == isa::avx512) {
          expect_matches_naive_on_one_and_two_threads(p.axes, plan, static_cast<std::int64_t>(p.width), rng);
        }
      }
    }
  }
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  set_max_isa(isa::avx512vbmi);
}

// On AMD's Zen 4 and Zen 5 (and Intel's cores) the AVX-512 levels take the AVX2 level's in-place
// walk of segments where they would stage them through the L1 buffer, for the ways and lanes
// stages_where_avx2_segments_win_on_amd lists and pieces of 8 bytes or more per way, and the AVX2
// plan for unstaged 3- and 9-way shuffles of 8-byte lanes, also where a VBMI gather would replace
// the shuffle, and the AVX2 level's in-place 2-way interleaves where the staged ones' output
// streams.
TEST(PermutePlan, AmdAndIntelTakeTheAvx2SegmentsWhereTheirStagingLoses) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(47);
  // d2s channels-first K = 3 DCR b8 C16 of 2-byte elements, [8192, D, D, D] -> [16, 8D, 8D, 8D]:
  // 8-way interleaves of runs of D elements (pieces of 8 bytes at D = 4, 4 bytes at D = 2); and
  // s2d channels-first K = 3 DCR b3 C16 of 4-byte elements, [16, 24, 24, 24] -> [432, 8, 8, 8]:
  // 3-way de-interleaves of 8-element runs.
  struct problem {
    std::vector<permute_axis> axes;
    std::size_t width;
    bool amd_segments;
  };
  const problem problems[] = {
      {packed_transpose({8, 8, 8, 16, 4, 4, 4}, {3, 4, 0, 5, 1, 6, 2}, 2), 2, true},
      {packed_transpose({8, 8, 8, 16, 2, 2, 2}, {3, 4, 0, 5, 1, 6, 2}, 2), 2, false},
      {packed_transpose({16, 8, 3, 8, 3, 8, 3}, {2, 4, 6, 0, 1, 3, 5}, 4), 4, true},
  };
  for (const problem& p : problems) {
    set_max_isa(isa::avx2);
    const permute_plan avx2_plan = plan_permute(p.axes, p.width);
    EXPECT_NE(describe(avx2_plan).find(" segmented "), std::string::npos) << describe(avx2_plan);
    for (isa cap : {isa::avx512, isa::avx512vbmi}) {
      if (cap > detected_isa()) continue;
      set_max_isa(cap);
      runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);
      const permute_plan common = plan_permute(p.axes, p.width);
      EXPECT_NE(describe(common).find(" staged by "), std::string::npos) << describe(common);
      for (runtime::core_kind cores : amd_staging_core_kinds) {
        runtime::plan_for_core_kind_for_testing(cores);
        const permute_plan amd = plan_permute(p.axes, p.width);
        if (p.amd_segments) {
          EXPECT_EQ(describe(amd), describe(avx2_plan)) << to_string(cap);
          EXPECT_EQ(describe(plan_permute_cached(p.axes, p.width)), describe(amd)) << to_string(cap);
          expect_matches_naive_on_one_and_two_threads(p.axes, amd, p.width, rng);
        } else if (cores != runtime::core_kind::intel) {
          // (Intel's own rule, stages_where_avx2_segments_win_on_intel, takes the segments of 8-way
          // interleaves of 2-byte lanes whatever their pieces: see
          // IntelTakesTheAvx2PlanWhereItsAvx512ShufflesLose.)
          EXPECT_EQ(describe(amd), describe(common)) << to_string(cap);
        }
      }
    }
  }
  // The plan made as for a Zen 5 at the detected level, checked to be the AVX2 level's plan and
  // the plan made as for a Zen 4.
  auto zen5_plan_is_avx2 = [](const std::vector<permute_axis>& axes, std::size_t width) {
    set_max_isa(isa::avx2);
    const permute_plan avx2 = plan_permute(axes, width);
    set_max_isa(detected_isa());
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen4);
    const permute_plan zen4 = plan_permute(axes, width);
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen5);
    permute_plan zen5 = plan_permute(axes, width);
    EXPECT_EQ(describe_one_thread(zen5), describe_one_thread(avx2));
    EXPECT_EQ(describe(zen4), describe_one_thread(zen5));
    return zen5;
  };
  // Unstaged 3-way interleaves of 8-byte lanes (d2s channels-first CRD b3 C1, [9, 40, 64] ->
  // [120, 192]) take the AVX2 plan too (loses_to_avx2_on_amd); those of 4-byte lanes keep theirs.
  const auto three_ways = packed_transpose({3, 3, 40, 64}, {2, 0, 3, 1}, 8);
  expect_matches_naive_on_one_and_two_threads(three_ways, zen5_plan_is_avx2(three_ways, 8), 8, rng);
  const permute_plan words = plan_permute(packed_transpose({3, 3, 40, 64}, {2, 0, 3, 1}, 4), 4);
  EXPECT_EQ(kernel_name(words), "interleave3_x32_avx512") << describe(words);
  // 9-way de-interleaves of 8-byte lanes (d2s NHWC CRD b3 C4, [16, 16, 36] -> [48, 48, 4]) take the
  // AVX2 plan on AMD's cores where a VBMI gather would replace the shuffle by the common rules.
  const auto nine_ways = packed_transpose({16, 16, 4, 3, 3}, {0, 3, 1, 4, 2}, 8);
  const permute_plan zen5_nine_ways = zen5_plan_is_avx2(nine_ways, 8);
  EXPECT_EQ(kernel_name(zen5_nine_ways), "deinterleave9_x64_avx2") << describe(zen5_nine_ways);
  expect_matches_naive_on_one_and_two_threads(nine_ways, zen5_nine_ways, 8, rng);
  // So do 8-way de-interleaves of 8-byte lanes in runs of 4 elements (d2s channels-last K = 3 CRD b2
  // C4, [6, 6, 6, 32] -> [12, 12, 12, 4]), and of 2-byte lanes in runs of 16 (C16, [6, 6, 6, 128] ->
  // [12, 12, 12, 16]): a 32-byte AVX2 vector per way.
  const auto eight_ways = packed_transpose({6, 6, 6, 4, 2, 2, 2}, {0, 4, 1, 5, 2, 6, 3}, 8);
  const permute_plan zen5_eight_ways = zen5_plan_is_avx2(eight_ways, 8);
  EXPECT_EQ(kernel_name(zen5_eight_ways), "deinterleave8_x64_avx2") << describe(zen5_eight_ways);
  expect_matches_naive_on_one_and_two_threads(eight_ways, zen5_eight_ways, 8, rng);
  const auto eight_ways_of_words = packed_transpose({6, 6, 6, 16, 2, 2, 2}, {0, 4, 1, 5, 2, 6, 3}, 2);
  const permute_plan zen5_eight_ways_of_words = zen5_plan_is_avx2(eight_ways_of_words, 2);
  EXPECT_EQ(kernel_name(zen5_eight_ways_of_words), "deinterleave8_x16_avx2") << describe(zen5_eight_ways_of_words);
  expect_matches_naive_on_one_and_two_threads(eight_ways_of_words, zen5_eight_ways_of_words, 2, rng);
  // Where the output streams too (C16 of 2-byte elements, 16 MB).
  const auto streamed_eight_ways = packed_transpose({40, 40, 40, 16, 2, 2, 2}, {0, 4, 1, 5, 2, 6, 3}, 2);
  const permute_plan zen5_streamed_eight_ways = zen5_plan_is_avx2(streamed_eight_ways, 2);
  EXPECT_TRUE(zen5_streamed_eight_ways.streams) << describe(zen5_streamed_eight_ways);
  EXPECT_EQ(kernel_name(zen5_streamed_eight_ways), "deinterleave8_x16_avx2") << describe(zen5_streamed_eight_ways);
  // Staged 2-way interleaves whose output streams past 64 MiB (d2s channels-first K = 3 CRD b2 C64
  // of bytes, 262 MB, planned only) take the AVX2 level's in-place interleave
  // (stages_where_avx2_direct_wins_on_amd); below it (C16, 17 MB) they keep their destination
  // group.
  const auto streamed_pairs = packed_transpose({64, 2, 2, 2, 80, 80, 80}, {0, 4, 1, 5, 2, 6, 3}, 1);
  const permute_plan zen5_pairs = zen5_plan_is_avx2(streamed_pairs, 1);
  EXPECT_EQ(kernel_name(zen5_pairs), "interleave2_x8_avx2") << describe(zen5_pairs);
  const auto grouped_pairs = packed_transpose({16, 2, 2, 2, 51, 51, 51}, {0, 4, 1, 5, 2, 6, 3}, 1);
  const permute_plan zen5_grouped_pairs = plan_permute(grouped_pairs, 1);
  ASSERT_TRUE(zen5_grouped_pairs.shuffle) << describe(zen5_grouped_pairs);
  EXPECT_EQ(zen5_grouped_pairs.shuffle->destination_group.extent, 2) << describe(zen5_grouped_pairs);
  expect_matches_naive_on_one_and_two_threads(grouped_pairs, zen5_grouped_pairs, 1, rng);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  const permute_plan common_pairs = plan_permute(streamed_pairs, 1);
  ASSERT_TRUE(common_pairs.shuffle) << describe(common_pairs);
  EXPECT_NE(common_pairs.shuffle->segment_copy.copy, nullptr) << describe(common_pairs);
  if (detected_isa() >= isa::avx512vbmi) {
    EXPECT_EQ(kernel_name(plan_permute(nine_ways, 8)), "gather_avx512vbmi") << describe(plan_permute(nine_ways, 8));
    EXPECT_EQ(kernel_name(plan_permute(eight_ways_of_words, 2)), "gather_avx512vbmi")
        << describe(plan_permute(eight_ways_of_words, 2));
  }
  set_max_isa(isa::avx512vbmi);
}

// On a Zen 4 and Intel's cores staged AVX-512 shuffles of up to 4 ways take the AVX2 level's plan
// where that shuffles in place, unstaged and unsegmented (stages_where_avx2_direct_wins_on_zen4),
// below 64 MiB; a Zen 5 only below 512 KiB. d2s channels-first K = 3 DCR b2 C1 of 8-byte elements,
// [8, 10, 10, 10] -> [1, 20, 20, 20]: 2-way interleaves of 10-element runs, which AVX-512 stages
// and AVX2 shuffles directly; the same of 8 ways (d2s NCHW DCR b8 C4 of 4-byte elements,
// [256, 8, 8] -> [4, 64, 64]) keeps its staging; and b2 C1 past 64 MiB (planned only) too. At
// 1 MB ([8, 40, 40, 10]) a Zen 5 keeps the staging, as the common rules do.
TEST(PermutePlan, Zen4IntelAndSmallZen5OutputsTakeTheAvx2DirectShuffleOverStagingOfUpToFourWays) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(59);
  const std::vector<int> d2s_dcr_channels_first{3, 4, 0, 5, 1, 6, 2};
  const auto pairs = packed_transpose({2, 2, 2, 1, 10, 10, 10}, d2s_dcr_channels_first, 8);
  const auto eights = packed_transpose({8, 8, 4, 8, 8}, {2, 3, 0, 4, 1}, 4);
  const auto far_pairs = packed_transpose({2, 2, 2, 1, 210, 210, 210}, d2s_dcr_channels_first, 8);
  const auto megabyte_pairs = packed_transpose({2, 2, 2, 1, 40, 40, 10}, d2s_dcr_channels_first, 8);
  set_max_isa(isa::avx2);
  const permute_plan avx2_pairs = plan_permute(pairs, 8);
  ASSERT_TRUE(avx2_pairs.shuffle) << describe(avx2_pairs);
  EXPECT_EQ(avx2_pairs.shuffle->segment_copy.copy, nullptr) << describe(avx2_pairs);
  EXPECT_EQ(avx2_pairs.shuffle->segmented, nullptr) << describe(avx2_pairs);
  const permute_plan avx2_eights = plan_permute(eights, 4);
  ASSERT_TRUE(avx2_eights.shuffle) << describe(avx2_eights);
  EXPECT_EQ(avx2_eights.shuffle->segment_copy.copy, nullptr) << describe(avx2_eights);
  EXPECT_EQ(avx2_eights.shuffle->segmented, nullptr) << describe(avx2_eights);
  for (isa cap : {isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    set_max_isa(cap);
    const permute_plan common = plan_permute(pairs, 8);
    EXPECT_NE(describe(common).find(" staged by "), std::string::npos) << describe(common);
    const permute_plan common_megabyte = plan_permute(megabyte_pairs, 8);
    EXPECT_NE(describe(common_megabyte).find(" staged by "), std::string::npos) << describe(common_megabyte);
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen5);
    EXPECT_EQ(describe(plan_permute(megabyte_pairs, 8)), describe(common_megabyte)) << to_string(cap);
    for (runtime::core_kind cores :
         {runtime::core_kind::amd_zen4, runtime::core_kind::intel, runtime::core_kind::amd_zen5}) {
      runtime::plan_for_core_kind_for_testing(cores);
      const permute_plan zen4 = plan_permute(pairs, 8);
      EXPECT_EQ(describe(zen4), describe(avx2_pairs)) << to_string(cap);
      EXPECT_EQ(describe(plan_permute_cached(pairs, 8)), describe(zen4)) << to_string(cap);
      expect_matches_naive_on_one_and_two_threads(pairs, zen4, 8, rng);
      const permute_plan zen4_eights = plan_permute(eights, 4);
      EXPECT_NE(describe(zen4_eights).find(" staged by "), std::string::npos) << describe(zen4_eights);
      EXPECT_EQ(zen4_eights.shuffle->level, isa::avx512) << describe(zen4_eights);
      const permute_plan zen4_far = plan_permute(far_pairs, 8);
      ASSERT_GE(zen4_far.total_bytes, std::int64_t{64} << 20);
      ASSERT_TRUE(zen4_far.shuffle) << describe(zen4_far);
      EXPECT_EQ(zen4_far.shuffle->level, isa::avx512) << describe(zen4_far);
    }
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  }
  set_max_isa(isa::avx512vbmi);
}

// On a Zen 4 the AVX-512 levels take the AVX2 level's plan, whatever its form, for the shuffles
// loses_to_avx2_on_zen4 lists, in the cache: an unstaged 8-way interleave of bytes (d2s
// channels-first K = 1 CRD b8 C1), a staged 16-way interleave of 2-byte lanes (d2s channels-last
// K = 3 CRD b3 C16), a staged 8-way de-interleave of 2-byte lanes (s2d channels-first K = 3 CRD
// b8 C3), an unstaged 3-way interleave of 4-byte lanes (d2s NCHW b3 C4), an unstaged 8-way
// interleave of 4-byte lanes (d2s NCHW b8 C3), an unstaged 4-way de-interleave of 8-byte lanes
// in runs of 256 bytes (s2d NCHW b4 C3) and an unstaged 4-way interleave of 8-byte lanes (d2s
// NCHW b4 C1). Zen 5 and the common
// rules keep the AVX-512 plans (but for the staged 16-way interleave, 55 KB, which a Zen 5 plans by
// the Zen 4 staging rules: takes_zen4_staging_rules), as does a Zen 4 where the output streams.
TEST(PermutePlan, Zen4TakesTheAvx2PlanWhereItsAvx512ShufflesLose) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(67);
  const transpose_problem problems[] = {{{1, 8, 4096}, {0, 2, 1}, 1},
                                        {{4, 4, 4, 16, 3, 3, 3}, {0, 4, 1, 5, 2, 6, 3}, 2},
                                        {{3, 3, 8, 3, 8, 3, 8}, {0, 2, 4, 6, 1, 3, 5}, 2},
                                        {{4, 3, 3, 85, 85}, {0, 3, 1, 4, 2}, 4},
                                        {{3, 8, 8, 32, 32}, {0, 3, 1, 4, 2}, 4},
                                        {{3, 32, 4, 32, 4}, {0, 2, 4, 1, 3}, 8},
                                        {{1, 4, 4, 32, 32}, {0, 3, 1, 4, 2}, 8}};
  const auto streamed = packed_transpose({1, 8, std::int64_t{32} << 20}, {0, 2, 1}, 1);
  for (isa cap : {isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    for (const transpose_problem& p : problems) {
      const auto axes = p.axes();
      const std::size_t width = p.element_bytes();
      const auto [avx2, common] = avx2_and_common_plans(p, cap);
      ASSERT_TRUE(common.shuffle) << describe(common);
      EXPECT_GE(common.shuffle->level, isa::avx512) << describe(common);
      runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen5);
      const bool staged_sixteen_ways = &p == &problems[1];
      EXPECT_EQ(describe(plan_permute(axes, width)), staged_sixteen_ways ? avx2 : describe(common)) << to_string(cap);
      runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen4);
      const permute_plan zen4 = plan_permute(axes, width);
      EXPECT_EQ(describe(zen4), avx2) << to_string(cap);
      EXPECT_NE(describe(zen4), describe(common)) << to_string(cap);
      EXPECT_EQ(describe(plan_permute_cached(axes, width)), describe(zen4)) << to_string(cap);
      expect_matches_naive_on_one_and_two_threads(axes, zen4, width, rng);
    }
    const permute_plan zen4_streamed = plan_permute(streamed, 1);
    ASSERT_TRUE(zen4_streamed.streams) << describe(zen4_streamed);
    ASSERT_TRUE(zen4_streamed.shuffle) << describe(zen4_streamed);
    EXPECT_GE(zen4_streamed.shuffle->level, isa::avx512) << describe(zen4_streamed);
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  }
  set_max_isa(isa::avx512vbmi);
}

// On a Zen 5, outputs of 12-64 MiB (loses_to_avx2_on_zen5) take the AVX2 level's plan for
// streamed unstaged 2-way interleaves of 1-4 KiB runs under 40 MiB (d2s NCHW b2 of bytes,
// [C, 2, 2, H, W] -> [C, H, 2, W, 2], runs of W bytes) and for staged 8-way interleaves of bytes
// (d2s channels-first K = 3 CRD b8 C16, [C, 8, 8, 8, D, H, W] -> [C, D, 8, H, 8, W, 8]). Runs of
// 512 bytes or 4 KiB, pair interleaves of 48 MiB and the staged one of 1 MB keep the AVX-512
// plans, as Intel's cores and a Zen 4 do for the pair interleave and a Zen 4 for the staged one
// (Intel's staging rules give that an AVX2 plan already).
TEST(PermutePlan, Zen5TakesTheAvx2PlanForStreamedPairAndStagedEightWayInterleaves) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(89);
  const std::vector<int> d2s_nchw{0, 3, 1, 4, 2};
  const std::vector<int> d2s_channels_first_k3{0, 4, 1, 5, 2, 6, 3};
  struct taken_case {
    transpose_problem problem;
    std::vector<runtime::core_kind> keeping_avx512;  // other cores that keep the AVX-512 plan
  };
  const taken_case taken[] = {
      // 12 MiB, 1 KiB runs
      {{{3, 2, 2, 1024, 1024}, d2s_nchw, 1}, {runtime::core_kind::intel, runtime::core_kind::amd_zen4}},
      // 17 MiB, staged
      {{{16, 8, 8, 8, 13, 13, 13}, d2s_channels_first_k3, 1}, {runtime::core_kind::amd_zen4}},
  };
  const transpose_problem kept[] = {
      {{12, 2, 2, 512, 512}, d2s_nchw, 1},                 // 12 MiB, 512-byte runs
      {{1, 2, 2, 768, 4096}, d2s_nchw, 1},                 // 12 MiB, 4 KiB runs
      {{12, 2, 2, 1024, 1024}, d2s_nchw, 1},               // 48 MiB
      {{16, 8, 8, 8, 5, 5, 5}, d2s_channels_first_k3, 1},  // 1 MB, staged
  };
  for (isa cap : {isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    for (const auto& [p, keeping_avx512] : taken) {
      const auto [avx2, common] = avx2_and_common_plans(p, cap);
      ASSERT_TRUE(common.shuffle && common.shuffle->interleave) << describe(common);
      EXPECT_TRUE(common.streams) << describe(common);
      EXPECT_GE(common.shuffle->level, isa::avx512) << describe(common);
      for (const runtime::core_kind cores : keeping_avx512) {
        runtime::plan_for_core_kind_for_testing(cores);
        const permute_plan plan = plan_permute(p.axes(), 1);
        ASSERT_TRUE(plan.shuffle) << describe(plan);
        EXPECT_GE(plan.shuffle->level, isa::avx512) << describe(plan) << " " << to_string(cap);
      }
      runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen5);
      const permute_plan zen5 = plan_permute(p.axes(), 1);
      EXPECT_EQ(describe_one_thread(zen5), avx2) << to_string(cap);
      ASSERT_TRUE(zen5.shuffle) << describe(zen5);
      EXPECT_EQ(zen5.shuffle->level, isa::avx2) << describe(zen5);
      EXPECT_EQ(describe(plan_permute_cached(p.axes(), 1)), describe(zen5)) << to_string(cap);
      expect_matches_naive_on_one_and_two_threads(p.axes(), zen5, 1, rng);
    }
    for (const transpose_problem& p : kept) {
      const permute_plan kept_common = avx2_and_common_plans(p, cap).second;
      ASSERT_TRUE(kept_common.shuffle) << describe(kept_common);
      EXPECT_GE(kept_common.shuffle->level, isa::avx512) << describe(kept_common);
      runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen5);
      EXPECT_EQ(describe_one_thread(plan_permute(p.axes(), 1)), describe(kept_common)) << to_string(cap);
    }
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  }
  set_max_isa(isa::avx512vbmi);
}

// Assembled interleaves keep their plan where a gather could take it: d2s NCHW DCR b4 C4 of bytes
// ([4, 4, 4, 32, 32], 4-way interleaves of 32-byte runs), which a VBMI gather of 2 steps per chunk
// took before, under the common rules and on a Zen 4.
TEST(PermutePlan, AssembledInterleavesKeepTheirPlanOverGathers) {
  if (detected_isa() < isa::avx512vbmi) GTEST_SKIP() << "needs AVX512-VBMI; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(71);
  const auto axes = packed_transpose({4, 4, 4, 32, 32}, {2, 3, 0, 4, 1}, 1);
  set_max_isa(isa::avx512vbmi);
  for (runtime::core_kind cores : {runtime::core_kind::other, runtime::core_kind::amd_zen4}) {
    runtime::plan_for_core_kind_for_testing(cores);
    const permute_plan plan = plan_permute(axes, 1);
    EXPECT_FALSE(plan.gather) << describe(plan);
    ASSERT_TRUE(plan.shuffle) << describe(plan);
    EXPECT_TRUE(plan.shuffle->repeat.assembled) << describe(plan);
    expect_matches_naive_on_one_and_two_threads(axes, plan, 1, rng);
  }
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
}

// On a Zen 4, run copies of 12-byte elements keep their plan over a VBMI gather of 3 steps per
// chunk whose windows do not sit on source lines: s2d channels-last K = 3 DCR b3 C1 of 4-byte
// elements, [21, 3, 21, 3, 21, 3] (rows 756 bytes apart, 12 offsets within a line). Zen 5 and the
// common rules gather; so does a Zen 4 where the windows sit on lines ([8, 3, 8, 3, 8, 3], rows
// 288 bytes apart).
TEST(PermutePlan, Zen4CopiesTwelveByteElementsWhereTheGatherCrossesLines) {
  if (detected_isa() < isa::avx512vbmi) GTEST_SKIP() << "needs AVX512-VBMI; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(73);
  const std::vector<int> s2d_channels_last{0, 2, 4, 1, 3, 5};
  const auto unlined = packed_transpose({21, 3, 21, 3, 21, 3}, s2d_channels_last, 4);
  const auto lined = packed_transpose({8, 3, 8, 3, 8, 3}, s2d_channels_last, 4);
  set_max_isa(isa::avx512vbmi);
  for (runtime::core_kind cores : {runtime::core_kind::other, runtime::core_kind::amd_zen5}) {
    runtime::plan_for_core_kind_for_testing(cores);
    const permute_plan plan = plan_permute(unlined, 4);
    ASSERT_TRUE(plan.gather) << describe(plan);
    EXPECT_GT(plan.gather->program->steps_per_chunk(), 2.0) << describe(plan);
    EXPECT_TRUE(plan.gather->lined_programs.empty()) << describe(plan);
  }
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen4);
  const permute_plan copies = plan_permute(unlined, 4);
  EXPECT_FALSE(copies.gather) << describe(copies);
  EXPECT_FALSE(copies.shuffle) << describe(copies);
  EXPECT_EQ(copies.width, std::size_t{12}) << describe(copies);
  expect_matches_naive_on_one_and_two_threads(unlined, copies, 4, rng);
  const permute_plan lined_gather = plan_permute(lined, 4);
  ASSERT_TRUE(lined_gather.gather) << describe(lined_gather);
  EXPECT_FALSE(lined_gather.gather->lined_programs.empty()) << describe(lined_gather);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
}

// Staged plans whose outer positions interleave on the destination split their work on two or
// more threads by blocks of the repeat where they interleave 3 ways (run_staged_plan): d2s
// channels-first K = 3 DCR b3 C16 of bytes and of 2-byte elements, [432, 5, 5, 5] and
// [432, 11, 11, 11] (outer destination strides of 15-225 bytes); b4, b8 and b2, which keep whole
// positions per work item, as well. Each against the
// reference on one, two and three threads, under every cap.
TEST(PermutePlan, StagedPlansWithInterleavedOuterPositionsMatchOnEveryThreadCount) {
  std::mt19937_64 rng(61);
  const std::vector<int> d2s_dcr_channels_first{3, 4, 0, 5, 1, 6, 2};
  struct problem {
    std::vector<std::int64_t> shape;
    std::int64_t width;
  };
  const problem problems[] = {{{3, 3, 3, 16, 5, 5, 5}, 1}, {{3, 3, 3, 16, 11, 11, 11}, 2},
                              {{3, 3, 3, 4, 7, 7, 7}, 8},  {{4, 4, 4, 16, 4, 4, 4}, 2},
                              {{8, 8, 8, 4, 3, 3, 3}, 1},  {{2, 2, 2, 16, 10, 10, 10}, 4}};
  for (isa cap : {isa::avx2, isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    set_max_isa(cap);
    for (const problem& p : problems) {
      const auto axes = packed_transpose(p.shape, d2s_dcr_channels_first, p.width);
      const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(p.width));
      SCOPED_TRACE(to_string(cap));
      expect_matches_naive_on_thread_counts(axes, plan, p.width, rng, 3);
    }
  }
  set_max_isa(isa::avx512vbmi);
}

// A permutation of a packed tensor of `shape` and element `width` bytes (see packed_transpose).
struct staged_problem {
  std::vector<std::int64_t> shape;
  std::vector<int> perm;
  std::int64_t width;
};

// Each problem plans as a staged interleave (or de-interleave) with outer positions, large enough
// to be shared, and matches the reference on one, two and three threads, under every cap.
void expect_staged_plans_match_on_thread_counts(std::span<const staged_problem> problems, bool interleave,
                                                std::mt19937_64& rng) {
  for (isa cap : {isa::avx2, isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    set_max_isa(cap);
    for (const staged_problem& p : problems) {
      const auto axes = packed_transpose(p.shape, p.perm, p.width);
      const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(p.width));
      ASSERT_GE(plan.total_bytes, runtime::min_shared_bytes) << describe(plan);
      ASSERT_TRUE(plan.shuffle && plan.shuffle->segment_copy.copy != nullptr) << describe(plan);
      ASSERT_EQ(plan.shuffle->interleave, interleave) << describe(plan);
      ASSERT_FALSE(plan.outer.empty()) << describe(plan);
      SCOPED_TRACE(to_string(cap));
      expect_matches_naive_on_thread_counts(axes, plan, p.width, rng, 3);
    }
  }
  set_max_isa(isa::avx512vbmi);
}

// Staged interleaves whose calls walk the innermost outer axis (calls of at most half the buffer),
// where the outer positions interleave on the destination, also cut the repeat into blocks on two
// or more threads, so that each thread writes its own stretch of the output (run_staged_plan): d2s
// NCHW DCR b8 C64 of 2-byte elements at 64 KiB ([4096, 3, 3]: 8 positions of 48-byte rows),
// channels-first K = 3 DCR b4 C64 of bytes ([4096, 3, 3, 3]) and b4 C4 ([256, 7, 7, 7]: 7 blocks
// of the repeat, which two threads share unevenly). Each against the reference on one, two and three
// threads, under every cap.
TEST(PermutePlan, StagedInterleavesOfInterleavedPositionsMatchOnEveryThreadCount) {
  std::mt19937_64 rng(73);
  const std::vector<int> d2s_dcr_nchw{0, 3, 4, 1, 5, 2};
  const std::vector<int> d2s_dcr_channels_first{3, 4, 0, 5, 1, 6, 2};
  const staged_problem problems[] = {{{1, 8, 8, 64, 3, 3}, d2s_dcr_nchw, 2},
                                     {{4, 4, 4, 64, 3, 3, 3}, d2s_dcr_channels_first, 1},
                                     {{4, 4, 4, 4, 7, 7, 7}, d2s_dcr_channels_first, 1}};
  expect_staged_plans_match_on_thread_counts(problems, true, rng);
}

// Staged de-interleaves with at least one outer position per thread hand each thread whole
// positions on two or more threads (run_staged_plan): s2d NCHW DCR b4 C16 of 8-byte elements
// ([16, 24, 24], 4 positions), b3 C4 of bytes ([4, 129, 129], 3 positions: two threads take two
// and one) and channels-first K = 3 DCR b2 C3 of 2-byte elements. Each against the reference on
// one, two and three threads, under every cap.
TEST(PermutePlan, StagedDeinterleavesOfWholePositionsMatchOnEveryThreadCount) {
  std::mt19937_64 rng(71);
  const std::vector<int> s2d_dcr_nchw{2, 4, 0, 1, 3};
  const staged_problem problems[] = {{{16, 6, 4, 6, 4}, s2d_dcr_nchw, 8},
                                     {{4, 43, 3, 43, 3}, s2d_dcr_nchw, 1},
                                     {{3, 16, 2, 16, 2, 16, 2}, {2, 4, 6, 0, 1, 3, 5}, 2}};
  expect_staged_plans_match_on_thread_counts(problems, false, rng);
}

// Streamed run copies walk their outer axes in the source's order (walks_outer_axes_in_source_order):
// d2s channels-last K = 3 DCR b2 C64 of bytes (runs of 128 bytes), whose destination order reads
// half of each source row per pass, at 13.8 MB; the same at 4.1 MB (in the cache) keeps the
// destination's order, as does s2d channels-last K = 3 DCR b8 C1 of bytes at 272 MB (planned
// only), whose innermost outer step writes the next line; so do gathers (d2s channels-last K = 3
// CRD). The streamed plans match the naive permute.
TEST(PermutePlan, StreamedRunCopiesAndGathersWalkTheirOuterAxesInSourceOrder) {
  std::mt19937_64 rng(101);
  auto ordered_by = [](const permute_plan& plan, auto stride) {
    for (std::size_t i = 1; i < plan.outer.size(); ++i) {
      if (std::abs(stride(plan.outer[i - 1])) < std::abs(stride(plan.outer[i]))) return false;
    }
    return true;
  };
  auto src_stride = [](const permute_axis& axis) { return axis.src_stride; };
  auto dst_stride = [](const permute_axis& axis) { return axis.dst_stride; };
  auto d2s = [](std::int64_t side) {  // [side, side, side, 2 * 2 * 2 * 64] -> [2 side, 2 side, 2 side, 64]
    return packed_transpose({side, side, side, 2, 2, 2, 64}, {0, 3, 1, 4, 2, 5, 6}, 1);
  };
  const auto streamed_axes = d2s(30);
  const permute_plan streamed = plan_permute(streamed_axes, 1);
  ASSERT_TRUE(streamed.streams && !streamed.shuffle && !streamed.gather) << describe(streamed);
  ASSERT_GE(streamed.outer.size(), 2U) << describe(streamed);
  EXPECT_TRUE(ordered_by(streamed, src_stride)) << describe(streamed);
  EXPECT_FALSE(ordered_by(streamed, dst_stride)) << describe(streamed);
  const permute_plan cached = plan_permute(d2s(20), 1);
  ASSERT_TRUE(!cached.streams && !cached.shuffle && !cached.gather) << describe(cached);
  EXPECT_TRUE(ordered_by(cached, dst_stride)) << describe(cached);
  EXPECT_FALSE(ordered_by(cached, src_stride)) << describe(cached);
  expect_matches_naive_on_one_and_two_threads(streamed_axes, streamed, 1, rng);
  if (detected_isa() >= isa::avx512vbmi) {
    // And gathers: d2s channels-last K = 3 CRD b2 C4 of 8-byte elements, 16.4 MB.
    set_max_isa(isa::avx512vbmi);
    const auto gathered_axes = packed_transpose({40, 40, 40, 4, 2, 2, 2}, {0, 4, 1, 5, 2, 6, 3}, 8);
    const permute_plan gathered = plan_permute(gathered_axes, 8);
    ASSERT_TRUE(gathered.streams && gathered.gather) << describe(gathered);
    ASSERT_GE(gathered.outer.size(), 2U) << describe(gathered);
    EXPECT_TRUE(ordered_by(gathered, src_stride)) << describe(gathered);
    EXPECT_FALSE(ordered_by(gathered, dst_stride)) << describe(gathered);
    expect_matches_naive_on_one_and_two_threads(gathered_axes, gathered, 8, rng);
  }
  if (detected_isa() < isa::avx512) return;  // the s2d case is a transpose tile from AVX-512 on
  set_max_isa(isa::avx512);
  const permute_plan lines = plan_permute(packed_transpose({81, 8, 81, 8, 81, 8}, {0, 2, 4, 1, 3, 5}, 1), 1);
  set_max_isa(isa::avx512vbmi);
  ASSERT_TRUE(lines.streams && !lines.shuffle && !lines.gather) << describe(lines);
  EXPECT_TRUE(std::any_of(lines.outer.begin(), lines.outer.end(), [](const permute_axis& axis) {
    return std::abs(axis.dst_stride) < 4096;
  })) << describe(lines);
  EXPECT_TRUE(ordered_by(lines, dst_stride)) << describe(lines);
}

// On Intel's cores streamed de-interleaves of 2-4 ways of 64 MiB or more prefetch their source
// (streamed_deinterleave_source_prefetch_bytes): s2d NCHW b2, b3 and b4 of 4-byte elements at
// 64 MiB, and b8 where its rows are off cache lines (2080 bytes). 8-way ones whose rows are on
// lines do not, nor do smaller outputs (16 MiB), Zen 4 or the common rules; a Zen 5 prefetches
// only for more than 4 ways (b8 off lines), 8 KiB ahead where Intel's run 2 KiB ahead. The kernels
// with the prefetch match the naive permute (16 MiB plans given it, of 2 ways, and of 8 ways off
// lines).
TEST(PermutePlan, IntelAndZen5PrefetchTheSourceOfStreamedDeinterleaves) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(97);
  const std::vector<int> s2d_nchw{1, 3, 0, 2};
  const auto two_ways = packed_transpose({2048, 2, 2048, 2}, s2d_nchw, 4);
  const auto four_ways = packed_transpose({1024, 4, 1024, 4}, s2d_nchw, 4);
  const auto three_ways = packed_transpose({1366, 3, 1366, 3}, s2d_nchw, 4);
  const auto eight_ways = packed_transpose({512, 8, 512, 8}, s2d_nchw, 4);
  const auto eight_ways_off_lines = packed_transpose({520, 8, 520, 8}, s2d_nchw, 4);
  const auto sixteen_mib = packed_transpose({1024, 2, 1024, 2}, s2d_nchw, 4);
  const auto sixteen_mib_eight_ways = packed_transpose({260, 8, 260, 8}, s2d_nchw, 4);
  auto prefetch_of = [](const std::vector<permute_axis>& axes) {
    const permute_plan plan = plan_permute(axes, 4);
    EXPECT_TRUE(plan.shuffle && !plan.shuffle->interleave && plan.streams) << describe(plan);
    return plan.shuffle ? plan.shuffle->repeat.source_prefetch_bytes : -1;
  };
  for (isa cap : {isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    set_max_isa(cap);
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::intel);
    EXPECT_EQ(prefetch_of(two_ways), 2048) << to_string(cap);
    EXPECT_EQ(prefetch_of(four_ways), 2048) << to_string(cap);
    EXPECT_EQ(prefetch_of(three_ways), 2048) << to_string(cap);
    EXPECT_EQ(prefetch_of(eight_ways), 0) << to_string(cap);
    EXPECT_EQ(prefetch_of(eight_ways_off_lines), 2048) << to_string(cap);
    EXPECT_EQ(prefetch_of(sixteen_mib), 0) << to_string(cap);
    EXPECT_NE(describe(plan_permute(two_ways, 4)).find(" prefetching 2048 ahead"), std::string::npos);
    for (runtime::core_kind cores : {runtime::core_kind::other, runtime::core_kind::amd_zen4}) {
      runtime::plan_for_core_kind_for_testing(cores);
      EXPECT_EQ(prefetch_of(two_ways), 0) << to_string(cap);
      EXPECT_EQ(prefetch_of(eight_ways_off_lines), 0) << to_string(cap);
    }
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen5);
    EXPECT_EQ(prefetch_of(two_ways), 0) << to_string(cap);
    EXPECT_EQ(prefetch_of(four_ways), 0) << to_string(cap);
    EXPECT_EQ(prefetch_of(eight_ways), 0) << to_string(cap);
    EXPECT_EQ(prefetch_of(eight_ways_off_lines), 8192) << to_string(cap);
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::intel);
    permute_plan prefetching = plan_permute(sixteen_mib, 4);
    ASSERT_TRUE(prefetching.shuffle) << describe(prefetching);
    prefetching.shuffle->repeat.source_prefetch_bytes = 8192;
    expect_matches_naive_on_one_and_two_threads(sixteen_mib, prefetching, 4, rng);
    // Planned for the cache at 16 MiB: streamed as at 64 MiB.
    permute_plan eight_prefetching = plan_permute(sixteen_mib_eight_ways, 4);
    ASSERT_TRUE(eight_prefetching.shuffle && eight_prefetching.shuffle->offsets.size() == 8 &&
                eight_prefetching.shuffle->segment_copy.copy == nullptr)
        << describe(eight_prefetching);
    eight_prefetching.shuffle->repeat.streaming = true;
    eight_prefetching.shuffle->repeat.source_prefetch_bytes = 8192;
    expect_matches_naive_on_one_and_two_threads(sixteen_mib_eight_ways, eight_prefetching, 4, rng);
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  }
  set_max_isa(isa::avx512vbmi);
}

// On Intel's cores de-interleave plans re-cut rows off lines from 512 bytes on, from 256 for lanes
// of 4 bytes or more and up to 8 ways; elsewhere, for interleaves, and where the rows are shorter
// or already that long, from realigned_deinterleave_run_bytes.
TEST(PermutePlan, IntelRealignsShorterDeinterleaveRows) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(59);
  const std::vector<int> s2d_nchw{1, 3, 0, 2};
  const std::vector<int> d2s_nchw{2, 0, 3, 1};
  auto realigned_of = [](const std::vector<permute_axis>& axes, std::size_t width) {
    const permute_plan plan = plan_permute(axes, width);
    EXPECT_TRUE(plan.shuffle) << describe(plan);
    return plan.shuffle ? plan.shuffle->repeat.realigned_run_bytes : -1;
  };
  // s2d NCHW b2 of 2-byte elements (724-byte rows) and of 4-byte ones (800), b4 and b16 of 4-byte
  // ones (360, 640), the d2s of the first: about 1 MiB each.
  const auto two_byte_lanes = packed_transpose({362, 2, 362, 2}, s2d_nchw, 2);
  const auto four_byte_lanes = packed_transpose({362, 2, 200, 2}, s2d_nchw, 4);
  const auto four_ways = packed_transpose({90, 4, 90, 4}, s2d_nchw, 4);
  const auto sixteen_ways = packed_transpose({8, 16, 160, 16}, s2d_nchw, 4);
  const auto interleave = packed_transpose({2, 2, 362, 362}, d2s_nchw, 2);
  const auto short_rows = packed_transpose({362, 2, 100, 2}, s2d_nchw, 2);  // 200-byte rows
  const auto long_rows = packed_transpose({60, 2, 1100, 2}, s2d_nchw, 2);   // 2200-byte rows
  for (isa cap : {isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    set_max_isa(cap);
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::intel);
    EXPECT_EQ(realigned_of(two_byte_lanes, 2), 512) << to_string(cap);
    EXPECT_EQ(realigned_of(four_byte_lanes, 4), 256) << to_string(cap);
    EXPECT_EQ(realigned_of(four_ways, 4), 256) << to_string(cap);
    EXPECT_EQ(realigned_of(sixteen_ways, 4), 512) << to_string(cap);
    EXPECT_EQ(realigned_of(interleave, 2), realigned_deinterleave_run_bytes) << to_string(cap);
    EXPECT_EQ(realigned_of(short_rows, 2), realigned_deinterleave_run_bytes) << to_string(cap);
    EXPECT_EQ(realigned_of(long_rows, 2), realigned_deinterleave_run_bytes) << to_string(cap);
    EXPECT_NE(describe(plan_permute(four_byte_lanes, 4)).find(" realigning rows from 256 bytes"), std::string::npos);
    for (runtime::core_kind cores : {runtime::core_kind::other, runtime::core_kind::amd_zen4}) {
      runtime::plan_for_core_kind_for_testing(cores);
      EXPECT_EQ(realigned_of(two_byte_lanes, 2), realigned_deinterleave_run_bytes) << to_string(cap);
      EXPECT_EQ(realigned_of(four_byte_lanes, 4), realigned_deinterleave_run_bytes) << to_string(cap);
    }
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::intel);
    expect_matches_naive_on_one_and_two_threads(two_byte_lanes, plan_permute(two_byte_lanes, 2), 2, rng);
  }
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
}

// On Intel's cores streamed de-interleaves far past the cache whose ways' rows continue one
// another go row by row instead of through line sinks where the rows are 2 KiB or more: s2d NCHW
// b2 of 2-byte elements, 2896-byte rows (66 MiB); not 1448-byte ones, not the 280-byte rows of
// s2d channels-first K = 3 DCR b4 C3 of 4-byte elements (251 MiB), not at 16 MiB, not on other
// cores.
TEST(PermutePlan, IntelStreamsLongDeinterleaveRowsRowByRowFarPastTheCache) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  const std::vector<int> s2d_nchw{1, 3, 0, 2};
  const auto long_rows = packed_transpose({6000, 2, 1448, 2}, s2d_nchw, 2);
  const auto kib_rows = packed_transpose({12000, 2, 724, 2}, s2d_nchw, 2);
  const auto short_rows = packed_transpose({3, 70, 4, 70, 4, 70, 4}, {2, 4, 6, 0, 1, 3, 5}, 4);
  const auto sixteen_mib = packed_transpose({2896, 2, 724, 2}, s2d_nchw, 2);
  auto sinks_of = [](const std::vector<permute_axis>& axes, std::size_t width = 2) {
    const permute_plan plan = plan_permute(axes, width);
    EXPECT_TRUE(plan.shuffle && !plan.shuffle->interleave && plan.shuffle->repeat.streaming) << describe(plan);
    return plan.shuffle && plan.shuffle->repeat.sinks_rows;
  };
  for (isa cap : {isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    set_max_isa(cap);
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::intel);
    EXPECT_FALSE(sinks_of(long_rows)) << to_string(cap);
    EXPECT_NE(describe(plan_permute(long_rows, 2)).find(" row by row"), std::string::npos);
    EXPECT_TRUE(sinks_of(kib_rows)) << to_string(cap);
    EXPECT_TRUE(sinks_of(short_rows, 4)) << to_string(cap);
    EXPECT_TRUE(sinks_of(sixteen_mib)) << to_string(cap);
    for (runtime::core_kind cores : {runtime::core_kind::other, runtime::core_kind::amd_zen4}) {
      runtime::plan_for_core_kind_for_testing(cores);
      EXPECT_TRUE(sinks_of(long_rows)) << to_string(cap);
    }
  }
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
}

// Far past the cache, de-interleaves whose ways' rows are too short to stream one by one but
// continue one another along the call's repeat stream them through line sinks
// (streams_short_rows_through_line_sinks): s2d channels-first K = 3 DCR b2 of bytes, [1, 1, 2D,
// 2H, 2W] -> [1, 8, D, H, W], each call a source row block whose 2 x 2 rows of 323 bytes continue
// 4 planes (269 MiB). Not at 16 MiB (rows of 129 bytes), not at the AVX2 level (no sinks). The
// same of 2-byte elements (68 MiB, rows of 322 bytes) against the naive permute on one and two
// threads, and into an output 16 bytes off a line.
TEST(PermutePlan, ShortDeinterleaveRowsStreamThroughLineSinksFarPastTheCache) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  auto space_to_depth = [](std::int64_t depth, std::int64_t height, std::int64_t width, std::int64_t bytes) {
    return packed_transpose({depth, 2, height, 2, width, 2}, {1, 3, 5, 0, 2, 4}, bytes);
  };
  auto streams = [](const std::vector<permute_axis>& axes, std::size_t width) {
    const permute_plan plan = plan_permute(axes, width);
    EXPECT_TRUE(plan.shuffle && !plan.shuffle->interleave && plan.shuffle->segment_copy.copy == nullptr)
        << describe(plan);
    return plan.shuffle && plan.shuffle->repeat.streaming;
  };
  const auto far = space_to_depth(323, 323, 323, 1);
  for (isa cap : {isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    set_max_isa(cap);
    EXPECT_TRUE(streams(far, 1)) << to_string(cap);
    const permute_plan plan = plan_permute(far, 1);
    EXPECT_TRUE(plan.shuffle && plan.shuffle->repeat.sinks_rows) << describe(plan);
    EXPECT_FALSE(streams(space_to_depth(126, 126, 129, 1), 1)) << to_string(cap);
  }
  set_max_isa(isa::avx2);
  EXPECT_FALSE(streams(far, 1));
  set_max_isa(isa::avx512vbmi);
  const auto two_byte = space_to_depth(162, 162, 161, 2);
  const permute_plan plan = plan_permute(two_byte, 2);
  ASSERT_TRUE(plan.shuffle && plan.shuffle->repeat.streaming) << describe(plan);
  std::mt19937_64 rng(71);
  expect_matches_naive_on_and_off_a_line(two_byte, plan, 2, rng);
}

// On a Zen 5, 3- and 4-way de-interleaves stream their short rows through line sinks from 12 MiB
// on too (sinks_short_rows_into_cache_sized_outputs), on more than one thread only from 16 MiB:
// s2d channels-first K = 3 b3 of 2-byte elements, [1, 1, 3D, 3H, 3W] -> [1, 27, D, H, W] with rows
// of 136 bytes (17 MB, every thread count), and b4 of 4-byte elements with rows of 160 bytes
// (16.4 MB, 16 MiB less 400 KB: one thread only). 2-way ones from 16 MiB on, on more than one
// thread only from 32 MiB: b2 of 2-byte elements with rows of 204 bytes (17 MB, one thread only)
// and 260 bytes (35 MB, every thread count); with rows of 188 bytes (13.3 MB) they keep ordinary
// stores, as other cores do. Those of 17 MB against the element loop on one thread (streaming) and
// two (not), and into an output 16 bytes off a line.
TEST(PermutePlan, Zen5StreamsShortDeinterleaveRowsIntoCacheSizedOutputs) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  auto space_to_depth = [](std::int64_t b, std::int64_t extent, std::int64_t bytes) {
    return packed_transpose({extent, b, extent, b, extent, b}, {1, 3, 5, 0, 2, 4}, bytes);
  };
  const auto three_way = space_to_depth(3, 68, 2);
  const auto four_way = space_to_depth(4, 40, 4);
  const auto two_way = space_to_depth(2, 102, 2);
  const auto small_two_way = space_to_depth(2, 94, 2);
  const auto large_two_way = space_to_depth(2, 130, 2);
  for (const runtime::core_kind cores : every_core_kind) {
    const bool zen5 = cores == runtime::core_kind::amd_zen5;
    const permute_plan three = plan_for(cores, three_way, 2);
    const permute_plan four = plan_for(cores, four_way, 4);
    const permute_plan two = plan_for(cores, two_way, 2);
    const permute_plan small_two = plan_for(cores, small_two_way, 2);
    const permute_plan large_two = plan_for(cores, large_two_way, 2);
    for (const permute_plan* plan : {&three, &four, &two, &small_two, &large_two}) {
      ASSERT_TRUE(plan->shuffle && !plan->shuffle->interleave && plan->shuffle->segment_copy.copy == nullptr)
          << describe(*plan);
      EXPECT_TRUE(plan->streams) << describe(*plan);
    }
    EXPECT_EQ(three.shuffle->offsets.size(), 3U);
    EXPECT_EQ(four.shuffle->offsets.size(), 4U);
    EXPECT_EQ(two.shuffle->offsets.size(), 2U);
    EXPECT_EQ(three.shuffle->repeat.streaming, zen5) << static_cast<int>(cores) << " " << describe(three);
    EXPECT_EQ(four.shuffle->repeat.streaming, zen5) << static_cast<int>(cores) << " " << describe(four);
    EXPECT_EQ(two.shuffle->repeat.streaming, zen5) << static_cast<int>(cores) << " " << describe(two);
    EXPECT_EQ(large_two.shuffle->repeat.streaming, zen5) << static_cast<int>(cores) << " " << describe(large_two);
    EXPECT_FALSE(small_two.shuffle->repeat.streaming) << static_cast<int>(cores) << " " << describe(small_two);
    EXPECT_FALSE(three.shuffle->streams_on_one_thread_only);
    EXPECT_EQ(four.shuffle->streams_on_one_thread_only, zen5);
    EXPECT_EQ(two.shuffle->streams_on_one_thread_only, zen5);
    EXPECT_FALSE(large_two.shuffle->streams_on_one_thread_only);
  }
  const permute_plan three = plan_for(runtime::core_kind::amd_zen5, three_way, 2);
  const permute_plan four = plan_for(runtime::core_kind::amd_zen5, four_way, 4);
  const permute_plan two = plan_for(runtime::core_kind::amd_zen5, two_way, 2);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  std::mt19937_64 rng(89);
  expect_matches_naive_on_and_off_a_line(three_way, three, 2, rng);
  expect_matches_naive_on_and_off_a_line(four_way, four, 4, rng);
  expect_matches_naive_on_and_off_a_line(two_way, two, 2, rng);
}

// On a Zen 5 the same holds where the de-interleave walks the source in order and its rows continue
// along an outer axis, not the call's repeat (s2d NCHW: each call one block of b source rows, whose
// ways' rows go to b x b planes): the call takes that axis too, so that its rows can stream through
// sinks (source_order_repeat's short_rows_sink). s2d NCHW DCR b3 C16 of 2-byte elements,
// [16, 723, 723] -> [144, 241, 241], rows of 482 bytes off lines (16.7 MB): one thread streams
// them, more keep ordinary stores, and other cores keep them too; far past the cache (C64 of
// [723, 1443], rows of 962 bytes, 134 MB) the plan keeps ordinary stores. Against the element loop on one and two
// threads, and off a line.
TEST(PermutePlan, Zen5SinksShortSourceOrderDeinterleaveRowsIntoCacheSizedOutputs) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  const auto rows = packed_transpose({16, 241, 3, 241, 3}, {2, 4, 0, 1, 3}, 2);
  const auto far_rows = packed_transpose({64, 241, 3, 481, 3}, {2, 4, 0, 1, 3}, 2);
  constexpr std::int64_t row_bytes = 241 * 2;
  for (const runtime::core_kind cores : every_core_kind) {
    const bool zen5 = cores == runtime::core_kind::amd_zen5;
    const permute_plan plan = plan_for(cores, rows, 2);
    ASSERT_TRUE(plan.streams && plan.shuffle && !plan.shuffle->interleave &&
                plan.shuffle->segment_copy.copy == nullptr && plan.shuffle->offsets.size() == 3U)
        << describe(plan);
    EXPECT_EQ(plan.shuffle->repeat.streaming, zen5) << static_cast<int>(cores) << " " << describe(plan);
    if (zen5) {
      EXPECT_EQ(plan.shuffle->repeat.outer.dst_stride, row_bytes) << describe(plan);
      EXPECT_TRUE(plan.shuffle->streams_on_one_thread_only) << describe(plan);
    }
    const permute_plan far = plan_for(cores, far_rows, 2);
    ASSERT_TRUE(far.shuffle && far.shuffle->offsets.size() == 3U) << describe(far);
    EXPECT_FALSE(far.shuffle->repeat.streaming) << static_cast<int>(cores) << " " << describe(far);
  }
  const permute_plan plan = plan_for(runtime::core_kind::amd_zen5, rows, 2);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  std::mt19937_64 rng(131);
  expect_matches_naive_on_and_off_a_line(rows, plan, 2, rng);
}

// On a Zen 5, outputs that stream but stay under 18 MiB keep the plan made for the cache beside
// the streamed one (permute_plan::on_more_threads), which run_permute takes wherever two or more
// threads share the call, where the streamed plan is a run copy with streaming stores or an
// unstaged shuffle: s2d NHWC DCR b2 C64 of 4-byte elements (16 MiB, copy_runs_streaming) and s2d
// NCHW DCR b4 C16 of 2-byte elements (16.8 MB, a direct 4-way de-interleave). Not at 26 MB, not
// for staged shuffles (s2d channels-first K = 3 DCR b4 C16 of 2-byte elements, 16.4 MB), not on
// other cores. Against the element loop on one and two threads, and off a line.
TEST(PermutePlan, Zen5KeepsTheCachePlanForCacheSizedOutputsOnMoreThreads) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  const auto runs = packed_transpose({1, 128, 2, 128, 2, 64}, {0, 1, 3, 2, 4, 5}, 4);
  const auto large_runs = packed_transpose({1, 160, 2, 160, 2, 64}, {0, 1, 3, 2, 4, 5}, 4);
  const auto rows = packed_transpose({16, 181, 4, 181, 4}, {2, 4, 0, 1, 3}, 2);
  const auto volume = packed_transpose({16, 20, 4, 20, 4, 20, 4}, {2, 4, 6, 0, 1, 3, 5}, 2);
  for (const runtime::core_kind cores : every_core_kind) {
    const bool zen5 = cores == runtime::core_kind::amd_zen5;
    const permute_plan copy = plan_for(cores, runs, 4);
    const permute_plan shuffle = plan_for(cores, rows, 2);
    const permute_plan staged = plan_for(cores, volume, 2);
    const permute_plan large = plan_for(cores, large_runs, 4);
    for (const permute_plan* plan : {&copy, &shuffle, &staged, &large}) EXPECT_TRUE(plan->streams) << describe(*plan);
    ASSERT_TRUE(shuffle.shuffle && !shuffle.shuffle->interleave && shuffle.shuffle->segment_copy.copy == nullptr)
        << describe(shuffle);
    ASSERT_TRUE(staged.shuffle && staged.shuffle->segment_copy.copy != nullptr) << describe(staged);
    EXPECT_EQ(copy.on_more_threads != nullptr, zen5) << static_cast<int>(cores) << " " << describe(copy);
    EXPECT_EQ(shuffle.on_more_threads != nullptr, zen5) << static_cast<int>(cores) << " " << describe(shuffle);
    EXPECT_EQ(staged.on_more_threads, nullptr) << static_cast<int>(cores) << " " << describe(staged);
    EXPECT_EQ(large.on_more_threads, nullptr) << static_cast<int>(cores) << " " << describe(large);
    for (const permute_plan* plan : {&copy, &shuffle}) {
      if (!plan->on_more_threads) continue;
      EXPECT_FALSE(plan->on_more_threads->streams) << describe(*plan);
      EXPECT_EQ(plan->on_more_threads->on_more_threads, nullptr) << describe(*plan);
      EXPECT_NE(describe(*plan).find("; on more threads: "), std::string::npos) << describe(*plan);
    }
  }
  const permute_plan copy = plan_for(runtime::core_kind::amd_zen5, runs, 4);
  const permute_plan shuffle = plan_for(runtime::core_kind::amd_zen5, rows, 2);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  std::mt19937_64 rng(101);
  expect_matches_naive_on_and_off_a_line(runs, copy, 4, rng);
  expect_matches_naive_on_and_off_a_line(rows, shuffle, 2, rng);
}

// Far past the cache, 8-way de-interleaves that would stage walk the source in order instead, each
// of their 64 rows per call through a line sink (far_sunk_row_blocks_repeat): s2d channels-first
// K = 3 DCR b8 of bytes, [1, 1, 8D, 8H, 8W] -> [1, 512, D, H, W] with rows of 81 bytes (259 MiB).
// Staged at 18 MiB (rows of 65 bytes), and of bytes at the avx512 level without VBMI (its sinks do
// not join byte rows), where those of 2-byte elements with rows of 80 bytes (66 MiB) sink. Not for
// b4 (16 sinks: the staged plan or the plain sinks). The 2-byte one against the naive permute on
// one and two threads, and into an output 16 bytes off a line.
TEST(PermutePlan, EightWayDeinterleavesFarPastTheCacheSinkTheirRowBlocksInSourceOrder) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  auto space_to_depth = [](std::int64_t size, std::int64_t width_blocks, std::int64_t b, std::int64_t bytes) {
    return packed_transpose({size, b, size, b, width_blocks, b}, {1, 3, 5, 0, 2, 4}, bytes);
  };
  auto sinks_blocks = [](const std::vector<permute_axis>& axes, std::size_t width) {
    const permute_plan plan = plan_permute(axes, width);
    EXPECT_TRUE(plan.shuffle && !plan.shuffle->interleave) << describe(plan);
    const bool sinks = plan.shuffle && plan.shuffle->repeat.most_sunk_rows == max_far_sunk_deinterleave_rows;
    if (sinks) {
      const shuffle_repeat& repeat = plan.shuffle->repeat;
      EXPECT_TRUE(plan.shuffle->segment_copy.copy == nullptr && repeat.streaming && repeat.by_source &&
                  repeat.inner.extent == 8 &&
                  repeat.outer.dst_stride == plan.shuffle->run.extent * static_cast<std::int64_t>(plan.width))
          << describe(plan);
      for (std::size_t k = 1; k < plan.outer.size(); ++k) {
        EXPECT_GT(plan.outer[k - 1].src_stride, plan.outer[k].src_stride) << describe(plan);
      }
    }
    return sinks;
  };
  const auto bytes = space_to_depth(81, 81, 8, 1);
  if (detected_isa() >= isa::avx512vbmi) {
    set_max_isa(isa::avx512vbmi);
    EXPECT_TRUE(sinks_blocks(bytes, 1));
    EXPECT_FALSE(sinks_blocks(space_to_depth(24, 65, 8, 1), 1));
    EXPECT_FALSE(sinks_blocks(space_to_depth(161, 161, 4, 1), 1));
  }
  set_max_isa(isa::avx512);
  EXPECT_FALSE(sinks_blocks(bytes, 1));
  const auto two_byte = space_to_depth(41, 40, 8, 2);
  EXPECT_TRUE(sinks_blocks(two_byte, 2));
  set_max_isa(isa::avx512vbmi);
  const permute_plan plan = plan_permute(two_byte, 2);
  ASSERT_TRUE(plan.shuffle && plan.shuffle->repeat.most_sunk_rows == max_far_sunk_deinterleave_rows) << describe(plan);
  std::mt19937_64 rng(73);
  expect_matches_naive_on_and_off_a_line(two_byte, plan, 2, rng);
}

// s2d NHWC DCR b3 C3 of 2-byte elements, [1, 3H, 3W, 3] -> [1, H, W, 27]: 18-byte runs that
// continue the output, read from three input rows in turn. Where the output streams they take the
// streaming kernel of runs under a line, which joins such tiles only far past the cache
// (copy_joined_runs_streaming_far); below that Intel's cores copy them with ordinary stores
// (copies_runs_into_the_cache), as they do runs of 128 bytes (C = 64 of bytes, b = 2) but not runs
// of 65-127 (C = 48), and a Zen 5's kernel joins no tile there (joins_source_stretches), its tile
// walking the output pixels innermost (copies_streamed_runs_with_ordinary_stores). In the
// cache, the spilling copy (spills_short_runs: 18-byte runs continuing one another) but on a Zen 5. The AVX2 level's
// kernel for 160-byte runs into outputs that stream (a vector loop) stays on Intel's cores.
TEST(PermutePlan, ShortRunsJoinFarPastTheCacheAndStayInTheCacheOnIntel) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  auto space_to_depth = [](std::int64_t size, std::int64_t b, std::int64_t channels, std::size_t width) {
    return packed_transpose({1, size, b, size, b, channels}, {0, 1, 3, 2, 4, 5}, width);
  };
  const auto in_cache = space_to_depth(140, 3, 3, 2);     // 1 MiB
  const auto streamed = space_to_depth(560, 3, 3, 2);     // 16 MiB
  const auto far = space_to_depth(1200, 3, 3, 2);         // 74 MiB
  const auto long_runs = space_to_depth(260, 2, 64, 1);   // 16 MiB of 128-byte runs
  const auto short_runs = space_to_depth(300, 2, 48, 1);  // 16 MiB of 96-byte runs
  set_max_isa(isa::avx512);
  for (runtime::core_kind cores : every_core_kind) {
    runtime::plan_for_core_kind_for_testing(cores);
    const bool intel = cores == runtime::core_kind::intel;
    const bool zen5 = cores == runtime::core_kind::amd_zen5;
    const permute_plan plan = plan_permute(streamed, 2);
    EXPECT_EQ(plan.col.extent, zen5 ? 560 : 3) << describe(plan);
    EXPECT_EQ(kernel_name(plan), intel || zen5 ? "copy_runs_avx512" : "copy_joined_runs_streaming_avx512")
        << describe(plan);
    EXPECT_EQ(kernel_name(plan_permute(far, 2)),
              zen5 ? "copy_joined_interleaved_runs_streaming_far_avx512" : "copy_joined_runs_streaming_far_avx512");
    // A Zen 5's tile walks the output pixels innermost, its runs not continuing one another.
    EXPECT_EQ(kernel_name(plan_permute(in_cache, 2)), zen5 ? "copy_runs_avx512" : "copy_runs_spilling_avx2")
        << describe(plan_permute(in_cache, 2));
    EXPECT_EQ(kernel_name(plan_permute(long_runs, 1)), intel ? "copy_x1024_avx512" : "copy_runs_streaming_avx512");
    EXPECT_EQ(kernel_name(plan_permute(short_runs, 1)), "copy_short_runs_streaming_avx512");
    if (intel) {
      std::mt19937_64 rng(41);
      expect_matches_naive_on_one_and_two_threads(streamed, plan, 2, rng);
    }
  }
  set_max_isa(isa::avx2);
  for (runtime::core_kind cores : {runtime::core_kind::other, runtime::core_kind::intel}) {
    runtime::plan_for_core_kind_for_testing(cores);
    EXPECT_EQ(kernel_name(plan_permute(space_to_depth(230, 2, 80, 1), 1)), "copy_runs_streaming_avx2");
  }
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  set_max_isa(isa::avx512vbmi);
}

// s2d NHWC DCR of few channels into outputs that stay in the cache: the tile's inner axis is the
// one that writes the output in order (the block rows, each run continuing the previous one), not
// the output pixels, whose runs lie a pixel apart; the plan still matches the naive copy on one
// and two threads, with the rows of the tile (the output pixels) cut among the items.
TEST(PermutePlan, ShortRunsInTheCacheWriteTheOutputInOrder) {
  auto space_to_depth = [](std::int64_t size, std::int64_t b, std::int64_t channels, std::size_t width) {
    return packed_transpose({1, size, b, size, b, channels}, {0, 1, 3, 2, 4, 5}, width);
  };
  std::mt19937_64 rng(83);
  // A Zen 5 keeps the walk whose columns are the output pixels: each column a block row's runs.
  for (const runtime::core_kind cores : {runtime::core_kind::intel, runtime::core_kind::amd_zen4,
                                         runtime::core_kind::amd_zen5, runtime::core_kind::other}) {
    runtime::plan_for_core_kind_for_testing(cores);
    const bool in_output_order = cores != runtime::core_kind::amd_zen5;
    for (const isa cap : {isa::scalar, isa::avx2, isa::avx512, isa::avx512vbmi}) {
      if (cap > detected_isa()) continue;
      set_max_isa(cap);
      for (const auto& [size, b, channels, width] :
           {std::tuple{140, 3, 3, 2}, std::tuple{105, 4, 3, 4}, std::tuple{37, 3, 1, 8}}) {
        const auto axes = space_to_depth(size, b, channels, static_cast<std::size_t>(width));
        const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
        ASSERT_FALSE(plan.shuffle || plan.gather) << describe(plan);
        const std::int64_t run = b * channels * width;
        if (in_output_order) {
          EXPECT_EQ(plan.col.extent, b) << describe(plan);
          EXPECT_EQ(plan.col.dst_stride, run) << describe(plan);
          EXPECT_EQ(plan.row.dst_stride, b * run) << describe(plan);
        } else {
          EXPECT_EQ(plan.row.extent, b) << describe(plan);
          EXPECT_EQ(plan.row.dst_stride, run) << describe(plan);
          EXPECT_EQ(plan.col.dst_stride, b * run) << describe(plan);
        }
        expect_matches_naive_on_one_and_two_threads(axes, plan, width, rng);
      }
    }
  }
  set_max_isa(isa::avx512vbmi);
}

// d2s NHWC DCR of 3 channels, [1, H, W, 3 b^2] -> [1, bH, bW, 3]: each output row's runs (a block
// column's 3 channels) continue one another from source pixels 3 b elements apart. At the AVX2
// level, in the cache, they take the spilling copy (b2 and b4 of bytes: 6- and 12-byte runs); where
// the output streams, 6-byte runs still do and 12-byte ones keep the plain copy, under every kind
// of core the planner tells apart. The plans against the element loop on one and two threads, and
// off a line.
TEST(PermutePlan, Avx2ShortRunsContinuingInTheDestinationSpill) {
  if (detected_isa() < isa::avx2) GTEST_SKIP() << "needs AVX2, which this CPU lacks";
  auto depth_to_space = [](std::int64_t size, std::int64_t b) {
    return packed_transpose({1, size, size, b, b, 3}, {0, 1, 3, 2, 4, 5}, 1);
  };
  set_max_isa(isa::avx2);
  std::mt19937_64 rng(179);
  for (const runtime::core_kind cores : every_core_kind) {
    runtime::plan_for_core_kind_for_testing(cores);
    for (const auto& [size, b, spills] :
         {std::tuple{150, 2, true}, std::tuple{75, 4, true}, std::tuple{1060, 2, true}, std::tuple{530, 4, false}}) {
      const auto axes = depth_to_space(size, b);
      const permute_plan plan = plan_permute(axes, 1);
      ASSERT_FALSE(plan.shuffle || plan.gather) << describe(plan);
      EXPECT_EQ(plan.width, static_cast<std::size_t>(3 * b)) << describe(plan);
      EXPECT_EQ(plan.streams, size * size * b * b * 3 >= static_cast<std::int64_t>(streaming_output_bytes))
          << describe(plan);
      EXPECT_EQ(kernel_name(plan), spills ? "copy_runs_spilling_avx2" : "copy_runs_avx2")
          << static_cast<int>(cores) << " " << describe(plan);
      if (!plan.streams && cores == runtime::core_kind::other)
        expect_matches_naive_on_and_off_a_line(axes, plan, 1, rng);
    }
  }
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  set_max_isa(isa::avx512vbmi);
}

// s2d channels-last K = 3 CRD b3 C3 of bytes, [1, 3D, 3H, 3W, 3] -> [1, D, H, W, 81]: a staged
// 3-way de-interleave whose segments (a block row's 3 pixels of 3 channels, 9 bytes) the AVX2
// level packs into the buffer with the spilling copy (packs_segments_spilling) under every kind of
// core; the AVX-512 level keeps its staging kernel. Against the element loop on one and two
// threads, and off a line.
TEST(PermutePlan, Avx2StagedDeinterleavesPackShortSegmentsSpilling) {
  if (detected_isa() < isa::avx2) GTEST_SKIP() << "needs AVX2, which this CPU lacks";
  auto space_to_depth = [](std::int64_t size) {
    return packed_transpose({1, size, 3, size, 3, size, 3, 3}, {0, 1, 3, 5, 7, 2, 4, 6}, 1);
  };
  const auto axes = space_to_depth(14);
  std::mt19937_64 rng(181);
  for (const runtime::core_kind cores : every_core_kind) {
    runtime::plan_for_core_kind_for_testing(cores);
    for (const isa cap : {isa::avx2, isa::avx512}) {
      if (cap > detected_isa()) continue;
      set_max_isa(cap);
      const permute_plan plan = plan_permute(axes, 1);
      const bool staged = plan.shuffle && !plan.shuffle->interleave && plan.shuffle->segment_copy.copy != nullptr;
      if (cap == isa::avx2) {
        ASSERT_TRUE(staged) << static_cast<int>(cores) << " " << describe(plan);
      }
      if (staged) {
        EXPECT_EQ(std::string(plan.shuffle->segment_copy.name) == "copy_runs_spilling_avx2", cap == isa::avx2)
            << describe(plan);
      }
      if (cores == runtime::core_kind::other) expect_matches_naive_on_and_off_a_line(axes, plan, 1, rng);
    }
  }
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  set_max_isa(isa::avx512vbmi);
}

// s2d channels-last K = 3 DCR b3 C1, [1, 3D, 3H, 3W, 1] -> [1, D, H, W, 27]: runs of a block
// column's 3 elements, whose next plane (the next output pixel along W) continues them in the
// source. For 2- and 4-byte elements (6- and 12-byte runs) the tile walks the block columns
// innermost, each row's runs continuing one another in the destination, and copies them with the
// spilling copy (spills_short_runs) at the AVX2 and AVX-512 levels, under every kind of core the
// planner tells apart. The plans against the element loop on one and two threads.
TEST(PermutePlan, ShortRunsContinuedByTheirPlanesSpillAlongTheBlockColumns) {
  if (detected_isa() < isa::avx2) GTEST_SKIP() << "needs AVX2, which this CPU lacks";
  auto space_to_depth = [](std::int64_t size, std::size_t width) {
    return packed_transpose({1, size, 3, size, 3, size, 3, 1}, {0, 1, 3, 5, 2, 4, 6, 7}, width);
  };
  std::mt19937_64 rng(151);
  for (const runtime::core_kind cores : every_core_kind) {
    runtime::plan_for_core_kind_for_testing(cores);
    for (const isa cap : {isa::avx2, isa::avx512}) {
      if (cap > detected_isa()) continue;
      set_max_isa(cap);
      for (const std::size_t width : {std::size_t{2}, std::size_t{4}}) {
        const auto axes = space_to_depth(18, width);
        const permute_plan plan = plan_permute(axes, width);
        ASSERT_FALSE(plan.streams || plan.shuffle || plan.gather) << describe(plan);
        const auto run = static_cast<std::int64_t>(3 * width);
        EXPECT_EQ(plan.col.dst_stride, run) << static_cast<int>(cores) << " " << describe(plan);
        EXPECT_EQ(kernel_name(plan), "copy_runs_spilling_avx2") << static_cast<int>(cores) << " " << describe(plan);
        if (cores == runtime::core_kind::other) {
          expect_matches_naive_on_one_and_two_threads(axes, plan, static_cast<std::int64_t>(width), rng);
        }
      }
    }
  }
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  set_max_isa(isa::avx512vbmi);
}

// d2s NHWC DCR b3 C1 of 8-byte elements, [1, H, W, 9] -> [1, 3H, 3W, 1]: 24-byte runs (a block
// row's columns), three per input pixel. Into a streamed output below 64 MiB a Zen 5 copies them
// with ordinary stores (copies_streamed_runs_with_ordinary_stores), so its tile walks the longer
// axis innermost, as in the cache: each column an output row's runs, written in order (H = W =
// 483, 16.8 MB). Other cores, which stream such runs, and a Zen 5 far past the cache (H = W =
// 966, 67 MB) keep the walk that reads the source in order (the columns a pixel's three block
// rows). The Zen 5 plan against the element loop on one and two threads, and off a line.
TEST(PermutePlan, Zen5WalksShortRunsOfStreamedOutputsInOutputOrder) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  auto depth_to_space = [](std::int64_t size) {
    return packed_transpose({1, size, size, 3, 3, 1}, {0, 1, 3, 2, 4, 5}, 8);
  };
  const auto streamed = depth_to_space(483);
  const auto far = depth_to_space(966);
  constexpr std::int64_t run = 3 * 8;
  for (const runtime::core_kind cores : every_core_kind) {
    const bool zen5 = cores == runtime::core_kind::amd_zen5;
    for (const auto& [axes, size] : {std::pair{&streamed, std::int64_t{483}}, std::pair{&far, std::int64_t{966}}}) {
      const permute_plan plan = plan_for(cores, *axes, 8);
      ASSERT_TRUE(plan.streams && !plan.shuffle && !plan.gather) << describe(plan);
      const std::int64_t output_row = 3 * size * 8;
      if (zen5 && size == 483) {
        EXPECT_EQ(plan.col.extent, size) << describe(plan);
        EXPECT_EQ(plan.col.dst_stride, run) << describe(plan);
        EXPECT_EQ(plan.row.dst_stride, output_row) << describe(plan);
      } else {
        EXPECT_EQ(plan.col.extent, 3) << static_cast<int>(cores) << " " << describe(plan);
        EXPECT_EQ(plan.col.dst_stride, output_row) << static_cast<int>(cores) << " " << describe(plan);
      }
    }
  }
  const permute_plan plan = plan_for(runtime::core_kind::amd_zen5, streamed, 8);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  std::mt19937_64 rng(137);
  expect_matches_naive_on_and_off_a_line(streamed, plan, 8, rng);
}

// d2s channels-last K = 3 DCR b4 C3 of 2-byte elements, [1, D, H, W, 192] -> [1, 4D, 4H, 4W, 3]:
// 24-byte runs (the block's columns and the channels) whose tiles read the source in one stretch
// (each column's rows 24 bytes apart, the columns 384) and continue the output. Where the output
// streams, other cores join those tiles into streamed lines; a Zen 5 copies them with ordinary
// stores (joins_source_stretches), below 64 MiB with the run copy that fetches each plane a plane
// ahead (prefetches_next_planes: the tile's columns span 96 bytes) and far past the cache with the
// kernel that joins only tiles of interleaved source streams. Intel's cores take the plain copy
// below 64 MiB (copies_runs_into_the_cache).
TEST(PermutePlan, Zen5CopiesRunsReadInOneSourceStretchWithOrdinaryStores) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  auto depth_to_space = [](std::int64_t size) {
    return packed_transpose({1, size, size, size, 4, 4, 4, 3}, {0, 1, 4, 2, 5, 3, 6, 7}, 2);
  };
  const auto streamed = depth_to_space(35);  // 16 MiB
  const auto far = depth_to_space(56);       // 67 MiB
  std::mt19937_64 rng(59);
  for (const isa cap : {isa::avx512, isa::avx512vbmi}) {
    set_max_isa(cap);
    for (const runtime::core_kind cores : every_core_kind) {
      runtime::plan_for_core_kind_for_testing(cores);
      const bool zen5 = cores == runtime::core_kind::amd_zen5;
      const bool intel = cores == runtime::core_kind::intel;
      const permute_plan plan = plan_permute(streamed, 2);
      ASSERT_GE(plan.total_bytes, static_cast<std::int64_t>(streaming_output_bytes));
      EXPECT_EQ(plan.width, 24U) << describe(plan);
      EXPECT_EQ(kernel_name(plan), zen5    ? "copy_runs_prefetching_planes_avx512"
                                   : intel ? "copy_runs_avx512"
                                           : "copy_joined_runs_streaming_avx512")
          << describe(plan);
      EXPECT_EQ(kernel_name(plan_permute(far, 2)),
                zen5 ? "copy_joined_interleaved_runs_streaming_far_avx512" : "copy_joined_runs_streaming_far_avx512");
      if (zen5 && cap == isa::avx512vbmi) expect_matches_naive_on_one_and_two_threads(streamed, plan, 2, rng);
    }
  }
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  set_max_isa(isa::avx512vbmi);
}

// Shuffles planned for the cache on Intel's cores below 64 MiB (plans_streamed_shuffle_for_the_cache):
// d2s NCHW DCR b2 C4 of 4-byte elements, [1, 16, H, W] -> [1, 4, 2H, 2W], an AVX-512 2-way
// interleave, and s2d NCHW DCR b8 C1 of 4-byte elements, [1, 1, 8H, 8W] -> [1, 64, H, W], an
// 8-way de-interleave. Of 16 MiB they stream elsewhere; of 64 MiB or more they stream everywhere.
// s2d NCHW DCR b4 (a 4-way de-interleave) streams at 16 MiB everywhere. A Zen 5 takes the AVX2
// level's plan for the 2-way interleave of 2 KiB runs at 16 MiB (loses_to_avx2_on_zen5).
TEST(PermutePlan, IntelPlansStreamedShufflesForTheCacheBelow64MiB) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  auto depth_to_space = [](std::int64_t size) {
    return packed_transpose({1, 2, 2, 4, size, size}, {0, 3, 4, 1, 5, 2}, 4);
  };
  auto space_to_depth = [](std::int64_t size, std::int64_t b) {
    return packed_transpose({1, 1, size, b, size, b}, {0, 3, 5, 1, 2, 4}, 4);
  };
  struct shuffle_case {
    const char* what;
    std::vector<permute_axis> streamed;  // 16 MiB
    std::vector<permute_axis> far;       // 64 MiB or more
    bool interleave;
    std::size_t ways;
    bool cached_on_intel;
  };
  const shuffle_case cases[] = {
      {"d2s NCHW b2", depth_to_space(512), depth_to_space(1100), true, 2, true},
      {"s2d NCHW b8", space_to_depth(256, 8), space_to_depth(530, 8), false, 8, true},
      {"s2d NCHW b4", space_to_depth(512, 4), space_to_depth(1100, 4), false, 4, false},
  };
  set_max_isa(isa::avx512);
  for (const shuffle_case& c : cases) {
    for (runtime::core_kind cores : every_core_kind) {
      runtime::plan_for_core_kind_for_testing(cores);
      const bool cached = c.cached_on_intel && cores == runtime::core_kind::intel;
      const permute_plan plan = plan_permute(c.streamed, 4);
      ASSERT_TRUE(plan.shuffle && plan.shuffle->interleave == c.interleave) << c.what << ": " << describe(plan);
      EXPECT_EQ(plan.shuffle->offsets.size(), c.ways) << c.what << ": " << describe(plan);
      const bool avx2_on_zen5 = &c == &cases[0] && cores == runtime::core_kind::amd_zen5;
      EXPECT_EQ(plan.shuffle->level, avx2_on_zen5 ? isa::avx2 : isa::avx512) << c.what << ": " << describe(plan);
      EXPECT_EQ(plan.streams, !cached) << c.what << ": " << describe(plan);
      EXPECT_EQ(plan.shuffle->repeat.streaming, !cached) << c.what << ": " << describe(plan);
      const permute_plan far_plan = plan_permute(c.far, 4);
      EXPECT_TRUE(far_plan.streams) << c.what << ": " << describe(far_plan);
      if (cached) {
        std::mt19937_64 rng(43);
        expect_matches_naive_on_one_and_two_threads(c.streamed, plan, 4, rng);
      }
    }
  }
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  set_max_isa(isa::avx512vbmi);
}

// s2d channels-first K = 3 DCR b8 C16 of 2-byte elements at 16 MiB, [16, 80, 80, 80] ->
// [8192, 10, 10, 10]: an 8-way de-interleave of 20-byte way rows whose output streams, which
// assembles its output vectors (assembles_shuffle) where the output streams, and is planned for
// the cache on AMD's Zen 4 and Zen 5 and on Intel's cores (assembles_streamed_deinterleave), where
// that ran 1.2-2x as fast; other cores keep the streamed plan.
TEST(PermutePlan, AmdAndIntelPlanStreamedAssembledDeinterleavesForTheCache) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(53);
  const auto axes = packed_transpose({16, 10, 8, 10, 8, 10, 8}, {2, 4, 6, 0, 1, 3, 5}, 2);
  set_max_isa(isa::avx512);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);
  const permute_plan common = plan_permute(axes, 2);
  ASSERT_GE(common.total_bytes, static_cast<std::int64_t>(streaming_output_bytes));
  EXPECT_TRUE(common.streams);
  EXPECT_NE(describe(common).find(" assembled"), std::string::npos) << describe(common);
  for (const runtime::core_kind cores :
       {runtime::core_kind::amd_zen4, runtime::core_kind::amd_zen5, runtime::core_kind::intel}) {
    runtime::plan_for_core_kind_for_testing(cores);
    const permute_plan cached = plan_permute(axes, 2);
    EXPECT_FALSE(cached.streams);
    EXPECT_EQ(describe(cached).find(" assembled"), std::string::npos) << describe(cached);
    EXPECT_EQ(describe(cached).find(" streaming"), std::string::npos) << describe(cached);
    EXPECT_EQ(describe(plan_permute_cached(axes, 2)), describe(cached));
    expect_matches_naive_on_one_and_two_threads(axes, cached, 2, rng);
  }
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  set_max_isa(isa::avx512vbmi);
}

// Which caps such a plan must stage under: from the lowest ISA whose kernels shuffle it on, except
// where the AVX2 kernels take the direct plan (these outputs being too small to stream:
// interleaves of runs of 64 bytes and more, and of 32 and more for more than 4 ways;
// de-interleaves of 65-95 bytes of 2 or 4 ways).
staging_rule staging_for(std::int64_t b, std::int64_t width, std::int64_t length, bool interleave) {
  const std::int64_t run_bytes = length * width;
  const bool power_of_two = (b & (b - 1)) == 0;
  std::optional<isa> from;
  // De-interleaves stage runs under a vector, and of a vector and a tail under half of one (these
  // outputs are too small to stream).
  if (!interleave && (run_bytes == 64 || run_bytes >= 96)) {
    from = std::nullopt;
  } else if (width > 8) {  // 16- and 32-byte elements: AVX2 and AVX-512, powers of two up to 16 ways
    if (power_of_two && b <= 16) from = isa::avx2;
  } else if (b > 16) {  // 64 ways take AVX-512 and elements of up to 4 bytes
    if (width <= 4) from = isa::avx512;
  } else {  // SSE2 has no permutes for B = 3 or 9: the scalar level copies elements
    from = power_of_two ? isa::scalar : isa::avx2;
  }
  const bool direct_on_avx2 =
      interleave ? run_bytes >= (b <= 4 ? 64 : 32) && b <= 16 : b <= 4 && power_of_two && run_bytes > 64;
  return [=](isa cap) -> std::optional<bool> {
    if (!from || cap < *from) return std::nullopt;
    return !(cap == isa::avx2 && direct_on_avx2);
  };
}

// The AVX2 kernels' staging rule for interleaves of 32-63 byte runs depends on the output's size:
// up to 4 ways go direct only where the output streams, 8 ways only where it stays in the cache.
// Planned only (the large outputs are never allocated).
TEST(PermutePlan, Avx2InterleavesOfShortRunsStageByOutputSize) {
  if (detected_isa() < isa::avx2) GTEST_SKIP() << "needs AVX2, which this CPU lacks";
  set_max_isa(isa::avx2);
  const std::int64_t width = 4;
  const std::int64_t length = 12;  // 48-byte runs
  for (std::int64_t b : {4, 8}) {
    for (std::int64_t outer : {std::int64_t{16}, std::int64_t{8192}}) {  // 96 KiB / 48 MiB for b = 4
      const std::int64_t run_bytes = length * width;
      const std::int64_t inner = 32;
      const std::int64_t far_row = outer * inner * run_bytes;
      // Padded near-side rows, so that the inner positions stay apart from the run.
      const std::int64_t near_inner = b * run_bytes + 2 * width;
      const auto axes = shuffle_axes(true, {outer, inner * run_bytes, inner * near_inner + width},
                                     {inner, run_bytes, near_inner}, length, b, far_row, width);
      const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
      ASSERT_TRUE(plan.shuffle.has_value()) << describe(plan);
      const bool streams = plan.total_bytes >= static_cast<std::int64_t>(streaming_output_bytes);
      EXPECT_EQ(streams, outer > 16) << describe(plan);
      const bool staged = plan.shuffle->segment_copy.copy != nullptr;
      EXPECT_EQ(staged, b <= 4 ? !streams : streams) << describe(plan) << " b=" << b;
    }
  }
  set_max_isa(isa::avx512vbmi);
}

// Short runs whose rows continue across the repeat axes go through the staging buffer: batches
// of whole inner rows, inner rows longer than the buffer, an outer axis that continues the rows
// and one that does not, padded near-side strides, every ISA, one and two threads. Interleaves
// stage runs of up to two vectors (80 and about 100 bytes here), de-interleaves runs under one
// vector and of 65-95 bytes (80 here), except where the AVX2 kernels shuffle them directly.
TEST(PermuteRun, StagedShortRunsMatchOnEveryIsa) {
  std::mt19937_64 rng(11);
  for (std::int64_t b : {2, 3, 4, 9, 16, 64}) {
    for (std::int64_t width : {1, 2, 4, 8, 16, 32}) {
      for (std::int64_t length : {std::int64_t{2}, std::int64_t{3}, std::int64_t{4}, std::int64_t{5}, std::int64_t{7},
                                  80 / width, 100 / width}) {
        if (length * width > 112) continue;  // interleaves stage runs under 128 bytes
        for (std::int64_t inner : {2, 3, 300}) {
          for (std::int64_t outer : {1, 3}) {
            for (bool continuing : {true, false}) {
              for (bool interleave : {true, false}) {
                // Far side: one row per way, continuing over (inner, outer) when `continuing`.
                const std::int64_t run_bytes = length * width;
                // Long runs fill the buffer at a few inner positions already.
                if (run_bytes >= 64 && inner > 3) continue;
                const std::int64_t far_outer = continuing ? inner * run_bytes : inner * run_bytes + 3 * width;
                const std::int64_t far_row = outer * far_outer + width;
                // Near side: all b ways of a run, b * run bytes, then padding.
                const std::int64_t near_inner = b * run_bytes + 2 * width;
                const std::int64_t near_outer = inner * near_inner + width;
                const std::int64_t near_span = outer * near_outer;
                const std::int64_t far_span = b * far_row;
                const auto axes = shuffle_axes(interleave, {outer, far_outer, near_outer},
                                               {inner, run_bytes, near_inner}, length, b, far_row, width);
                const std::int64_t src_span = (interleave ? far_span : near_span) + 64;
                const std::int64_t dst_span = (interleave ? near_span : far_span) + 64;
                ASSERT_NO_FATAL_FAILURE(random_source_matches_on_every_isa(
                    axes, width, src_span, dst_span, rng,
                    " b=" + std::to_string(b) + " w=" + std::to_string(width) + " n=" + std::to_string(length) +
                        " inner=" + std::to_string(inner) + " outer=" + std::to_string(outer),
                    staging_for(b, width, length, interleave)));
              }
            }
          }
        }
      }
    }
  }
}

// AVX2 staged shuffles whose segments (B ways of one run) are whole multiples of 32 bytes, or
// 16 bytes, or 48 for de-interleaves, walk them in place (shuffle_tile::segmented): 2-9 ways of
// every element width, segments of one to several vectors (and of 16-byte halves) whose positions
// leave 16-, 8-byte and element tails, inner rows and outer axes that continue the far side or
// not, and an axis outside the repeat (the grouped calls of small repeats), each against the
// element loop on every ISA cap, one and two threads. Under the avx2 cap every staged plan of up to
// 8 ways with such segments is segmented here (these outputs stay in the cache), and no other.
TEST(PermuteRun, SegmentedShufflesMatchOnEveryIsa) {
  std::mt19937_64 rng(29);
  int segmented_plans = 0;
  for (bool interleave : {true, false}) {
    for (std::int64_t b : {2, 3, 4, 8, 9}) {
      for (std::int64_t width : {1, 2, 4, 8}) {
        for (std::int64_t segment : {16, 32, 48, 64, 96, 160, 224}) {
          if (segment % (b * width) != 0) continue;
          const std::int64_t length = segment / (b * width);
          const std::int64_t run_bytes = length * width;
          for (std::int64_t inner : {2, 3, 37}) {
            for (std::int64_t outer : {1, 3}) {
              for (std::int64_t group : {1, 2}) {
                const bool continuing = inner != 3;
                const std::int64_t far_outer = continuing ? inner * run_bytes : inner * run_bytes + 3 * width;
                const std::int64_t far_row = outer * far_outer + width;
                const std::int64_t near_inner = segment + (inner == 37 ? 0 : 2 * width);
                const std::int64_t near_outer = inner * near_inner + width;
                auto axes = shuffle_axes(interleave, {outer, far_outer, near_outer}, {inner, run_bytes, near_inner},
                                         length, b, far_row, width);
                const std::int64_t near_span = outer * near_outer;
                const std::int64_t far_span = b * far_row;
                // A group axis outside the repeat: each position another near block and far block.
                const std::int64_t near_group = near_span + 5 * width;
                const std::int64_t far_group = far_span + 7 * width;
                if (group > 1) {
                  axes.insert(axes.begin(), interleave ? permute_axis{group, far_group, near_group}
                                                       : permute_axis{group, near_group, far_group});
                }
                const std::int64_t src_span = group * (interleave ? far_group : near_group) + 64;
                const std::int64_t dst_span = group * (interleave ? near_group : far_group) + 64;
                const std::string context = std::string(interleave ? " interleave" : " de-interleave") +
                                            " b=" + std::to_string(b) + " w=" + std::to_string(width) +
                                            " n=" + std::to_string(length) + " inner=" + std::to_string(inner) +
                                            " outer=" + std::to_string(outer) + " group=" + std::to_string(group);
                if (detected_isa() >= isa::avx2) {
                  set_max_isa(isa::avx2);
                  const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
                  set_max_isa(isa::avx512vbmi);
                  if (plan.shuffle && plan.shuffle->segment_copy.copy != nullptr && !plan.shuffle->transposes) {
                    // The plan's segment: where the near side continues over the inner axis, its run
                    // is the whole inner row. Of 16-byte halves: 16 bytes, and 48 for de-interleaves.
                    const std::int64_t planned = plan.shuffle->run.extent * width * b;
                    const bool halves_taken = planned == 16 || (!interleave && planned == 48);
                    EXPECT_EQ(plan.shuffle->segmented != nullptr, planned % 32 == 0 || halves_taken)
                        << describe(plan) << context;
                    if (plan.shuffle->segmented != nullptr) ++segmented_plans;
                  }
                }
                ASSERT_NO_FATAL_FAILURE(
                    random_source_matches_on_every_isa(axes, width, src_span, dst_span, rng, context));
              }
            }
          }
        }
      }
    }
  }
  if (detected_isa() < isa::avx2) GTEST_SKIP() << "the segmented kernels need AVX2, which this CPU lacks";
  EXPECT_GT(segmented_plans, 200);
}

// The assembling kernels (shuffle_repeat::assembled) in both directions, 2, 4 and 8 ways, every
// element width, with forcing (force_assembled_for_testing) so that every shuffle that would stage
// takes them: runs with and without a tail, with several vectors, repeat axes whose far-side step
// is shorter or longer than a line (the interleave's tiles), continuing and padded rows, misaligned
// buffers, every ISA, one and two threads. Without forcing, in cache, only the interleave rule
// applies: 4 ways of 1-byte elements in runs of 32-127 bytes (VBMI), of 2-byte ones in runs of
// 16-127 (AVX-512), where the plan would otherwise stage.
TEST(PermuteRun, AssembledShufflesMatchOnEveryIsa) {
  std::mt19937_64 rng(23);
  for (bool interleave : {true, false}) {
    for (std::int64_t b : {2, 4, 8}) {
      for (std::int64_t width : {1, 2, 4, 8}) {
        for (std::int64_t run_bytes : {8, 16, 24, 32, 36, 48, 64, 80, 100, 124, 128}) {
          if (run_bytes % width != 0) continue;
          const std::int64_t length = run_bytes / width;
          for (std::int64_t inner : {1, 3, 40}) {
            for (std::int64_t outer : {1, 5}) {
              for (bool continuing : {true, false}) {
                const std::int64_t far_outer = continuing ? inner * run_bytes : inner * run_bytes + 3 * width;
                const std::int64_t far_row = outer * far_outer + width;
                const std::int64_t near_inner = b * run_bytes + 2 * width;
                const std::int64_t near_outer = inner * near_inner + width;
                const auto axes = shuffle_axes(interleave, {outer, far_outer, near_outer},
                                               {inner, run_bytes, near_inner}, length, b, far_row, width);
                // Only in place of staging: the far-side rows continue along a repeat axis.
                const bool rows_continue = inner > 1 || (outer > 1 && continuing);
                const std::int64_t min_run = width == 2 ? 16 : 32;
                const bool expected =
                    interleave && b == 4 && width <= 2 && run_bytes >= min_run && run_bytes < 128 && rows_continue;
                const isa needed = width == 1 ? isa::avx512vbmi : isa::avx512;
                const std::string context = std::string(interleave ? "interleave" : "de-interleave") +
                                            " b=" + std::to_string(b) + " w=" + std::to_string(width) +
                                            " n=" + std::to_string(length) + " inner=" + std::to_string(inner) +
                                            " outer=" + std::to_string(outer);
                if (needed <= detected_isa()) {
                  set_max_isa(needed);
                  const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
                  if (expected) {
                    ASSERT_TRUE(plan.shuffle && plan.shuffle->repeat.assembled) << describe(plan) << context;
                    EXPECT_EQ(plan.shuffle->segment_copy.copy, nullptr) << describe(plan);
                    EXPECT_NE(describe(plan).find(" assembled"), std::string::npos) << describe(plan);
                  } else if (plan.shuffle) {
                    EXPECT_FALSE(plan.shuffle->repeat.assembled) << describe(plan) << context;
                  }
                  if (width == 1 && needed > isa::avx512) {
                    set_max_isa(isa::avx512);  // bytes without VBMI stage as before
                    const permute_plan capped = plan_permute(axes, static_cast<std::size_t>(width));
                    EXPECT_FALSE(capped.shuffle && capped.shuffle->repeat.assembled) << describe(capped);
                  }
                  set_max_isa(isa::avx512vbmi);
                }
                // Misaligned: both buffers start 1 byte past a vector (std::vector's alignment).
                const std::int64_t far_span = b * far_row + 1;
                const std::int64_t near_span = outer * near_outer + 1;
                const std::int64_t src_span = interleave ? far_span : near_span;
                const std::int64_t dst_span = interleave ? near_span : far_span;
                std::vector<std::byte> src(static_cast<std::size_t>(src_span));
                for (auto& v : src) v = static_cast<std::byte>(rng());
                std::vector<std::byte> want(static_cast<std::size_t>(dst_span), std::byte{0x5A});
                permute_naive(axes, src.data() + 1, want.data() + 1, width);
                bool assembled_somewhere = false;
                for (bool forced : {false, true}) {
                  force_assembled_for_testing(forced);
                  for (isa cap : {isa::scalar, isa::avx2, isa::avx512, isa::avx512vbmi}) {
                    if (cap > detected_isa()) continue;
                    set_max_isa(cap);
                    const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
                    assembled_somewhere = assembled_somewhere || (plan.shuffle && plan.shuffle->repeat.assembled);
                    for (int threads : {1, 2}) {
                      std::vector<std::byte> actual(static_cast<std::size_t>(dst_span), std::byte{0x5A});
                      run_permute(plan, src.data() + 1, actual.data() + 1, threads);
                      ASSERT_EQ(actual, want) << describe(plan) << " " << context << " threads=" << threads;
                    }
                  }
                  set_max_isa(isa::avx512vbmi);
                }
                force_assembled_for_testing(false);
                // Forcing reaches the kernels wherever the plan would stage (a run of 2 or more
                // elements under 128 bytes whose rows continue; de-interleaves of 64 bytes and more
                // keep their direct plans).
                if (needed <= detected_isa() && rows_continue && run_bytes < 64 && length >= 2) {
                  EXPECT_TRUE(assembled_somewhere) << context;
                }
              }
            }
          }
        }
      }
    }
  }
}

// De-interleaves of 8 ways assemble where the output streams (12 MiB or more) and each way's output
// row continues for under 1 KiB: s2d channels-first K = 3, b = 8, C = 3, of 1-, 2-, 4- and 8-byte
// elements, 15-17 MB each, with odd runs (a tail per run). With 1 KiB rows (C = 1, 32^3 cells per
// channel, bytes) they stage. Whole tensors against the reference, under the detected ISA.
TEST(PermuteRun, StreamedEightWayDeinterleavesAssemble) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  std::mt19937_64 rng(8);
  struct shape {
    std::int64_t width, channels, cells;  // cells: output side d (input side 8d)
    bool assembles;
  };
  for (const shape& t : {shape{1, 3, 22, true}, shape{2, 3, 17, true}, shape{4, 3, 13, true}, shape{8, 3, 11, true},
                         shape{1, 1, 32, false}}) {
    const std::int64_t w = t.width;
    const std::int64_t d = t.cells;
    const std::int64_t side = 8 * d;
    const std::int64_t plane = side * side;
    const std::int64_t volume = d * d * d;
    // s2d DCR as a permute: output [bd, bh, bw, c, od, oh, ow] from input [c, od, bd, oh, bh, ow, bw].
    const std::vector<permute_axis> axes{{8, plane * w, 64 * t.channels * volume * w},
                                         {8, side * w, 8 * t.channels * volume * w},
                                         {8, w, t.channels * volume * w},
                                         {t.channels, side * plane * w, volume * w},
                                         {d, 8 * plane * w, d * d * w},
                                         {d, 8 * side * w, d * w},
                                         {d, 8 * w, w}};
    std::vector<std::byte> src(static_cast<std::size_t>(t.channels * side * plane * w));
    for (auto& v : src) v = static_cast<std::byte>(rng());
    std::vector<std::byte> want(src.size(), std::byte{0x5A});
    permute_naive(axes, src.data(), want.data(), w);
    const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(w));
    if ((w == 1 ? isa::avx512vbmi : isa::avx512) <= detected_isa()) {
      ASSERT_TRUE(plan.shuffle) << describe(plan);
      EXPECT_EQ(plan.shuffle->repeat.assembled, t.assembles) << describe(plan);
    }
    for (int threads : {1, 2}) {
      std::vector<std::byte> actual(src.size(), std::byte{0x5A});
      run_permute(plan, src.data(), actual.data(), threads);
      ASSERT_EQ(actual, want) << describe(plan) << " threads=" << threads;
    }
  }
}

// A source buffer of random bytes whose last byte is the last byte before an inaccessible page, so
// that any read past the end of the source faults (masked vector loads are invisible to
// AddressSanitizer).
class guarded_source {
 public:
  // `gap`: bytes between the source's end and the page (they stay readable).
  guarded_source(std::size_t bytes, std::mt19937_64& rng, std::size_t gap = 0)
      : page_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))) {
    mapped_ = (bytes + gap + page_ - 1) / page_ * page_ + page_;
    void* memory = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<std::byte*>(memory);
    mprotect(base_ + mapped_ - page_, page_, PROT_NONE);
    data_ = base_ + mapped_ - page_ - gap - bytes;
    for (std::size_t i = 0; i < bytes; ++i) data_[i] = static_cast<std::byte>(rng());
  }
  guarded_source(const guarded_source&) = delete;
  guarded_source& operator=(const guarded_source&) = delete;
  ~guarded_source() { munmap(base_, mapped_); }
  [[nodiscard]] std::byte* data() const { return data_; }

 private:
  std::size_t page_;
  std::size_t mapped_ = 0;
  std::byte* base_ = nullptr;
  std::byte* data_ = nullptr;
};

// Bytes from the first to one past the last byte `axes` read (strides not running backwards).
std::int64_t source_span(const std::vector<permute_axis>& axes, std::int64_t width) {
  std::int64_t span = width;
  for (const permute_axis& axis : axes) span += (axis.extent - 1) * axis.src_stride;
  return span;
}

// The AVX2 kernels' run tails (b_way_step::padded_tail) load whole vectors past a run, but never
// past the source: every run length up to a little over two vectors per way, far-side rows that
// continue (staged plans, whose interleaves read one long run per batch) and padded ones (direct
// plans, one tail per run), the source ending right before an inaccessible page, every ISA the
// host has, one and two threads, into a pre-filled destination; against the element loop.
TEST(PermuteRun, RunTailsNeverReadPastTheSource) {
  std::mt19937_64 rng(23);
  for (std::int64_t b : {2, 3, 4, 8, 9, 16}) {
    for (std::int64_t width : {1, 2, 4, 8}) {
      std::vector<std::int64_t> lengths;
      for (std::int64_t length = 1; length * width <= 72; length += length * width < 40 ? 1 : 5) {
        lengths.push_back(length);
      }
      for (std::int64_t length : lengths) {
        for (bool padded : {false, true}) {
          for (bool interleave : {true, false}) {
            const std::int64_t run_bytes = length * width;
            const std::int64_t inner = 3;
            const std::int64_t far_inner = padded ? run_bytes + width : run_bytes;
            const std::int64_t far_row = inner * far_inner;
            const auto axes =
                shuffle_axes(interleave, {1, 0, 0}, {inner, far_inner, b * run_bytes}, length, b, far_row, width);
            const std::int64_t src_bytes = source_span(axes, width);
            const guarded_source guarded(static_cast<std::size_t>(src_bytes), rng);
            const std::string context = " b=" + std::to_string(b) + " w=" + std::to_string(width) +
                                        " n=" + std::to_string(length) + (padded ? " padded" : " continuing");
            std::vector<std::byte> expected(static_cast<std::size_t>(b * far_row + 64), std::byte{0x5A});
            permute_naive(axes, guarded.data(), expected.data(), width);
            ASSERT_NO_FATAL_FAILURE(expect_every_isa_matches(axes, width, guarded.data(), expected, context));
          }
        }
      }
    }
  }
}

// The block-transposing shuffles of 32 and 64 ways (the AVX2 and AVX-512 kernels): every run length
// up to a little over two blocks of positions (AVX2's interleaves load a partial block's rows whole
// where the source lasts, and element by element where it does not), far-side rows continuing or
// padded, from a source that ends at an inaccessible page, into pre-filled outputs; each plan must
// be the transposing shuffle at both levels.
TEST(PermuteRun, TransposingShufflesNeverReadPastTheSource) {
  std::mt19937_64 rng(29);
  for (std::int64_t b : {32, 64}) {
    for (std::int64_t width : {1, 2, 4, 8}) {
      const std::int64_t positions = width == 1 ? 32 : 8;  // per block, the longest of either level
      for (std::int64_t length = 2; length <= 2 * positions + 3; ++length) {
        for (bool padded : {false, true}) {
          for (bool interleave : {true, false}) {
            const std::int64_t run_bytes = length * width;
            const std::int64_t far_row = padded ? run_bytes + width : run_bytes;
            const auto axes = shuffle_axes(interleave, {1, 0, 0}, {1, 0, 0}, length, b, far_row, width);
            const guarded_source guarded(static_cast<std::size_t>(source_span(axes, width)), rng);
            const std::string context = " b=" + std::to_string(b) + " w=" + std::to_string(width) +
                                        " n=" + std::to_string(length) + (padded ? " padded" : " continuing");
            for (isa cap : {isa::avx2, isa::avx512}) {
              if (cap > detected_isa()) continue;
              set_max_isa(cap);
              const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
              // AVX-512 transposes tiles of 8-byte elements instead where 8 or more columns allow;
              // runs of a register shuffle's way count may swap roles with the ways; runs under 16
              // bytes may gather.
              const bool swaps =
                  length == 2 || length == 3 || length == 4 || length == 8 || length == 9 || length == 16;
              if ((cap == isa::avx2 || width < 8) && !swaps) {
                ASSERT_TRUE((plan.shuffle && plan.shuffle->transposes) || (plan.gather && run_bytes < 16))
                    << describe(plan) << context;
              }
            }
            set_max_isa(isa::avx512vbmi);
            std::vector<std::byte> expected(static_cast<std::size_t>(b * far_row + 64), std::byte{0x5A});
            permute_naive(axes, guarded.data(), expected.data(), width);
            ASSERT_NO_FATAL_FAILURE(expect_every_isa_matches(axes, width, guarded.data(), expected, context));
          }
        }
      }
    }
  }
}

// The axes of s2d NCHW DCR of `channels` channels, block b, w-byte elements, d x d output cells:
// output [i, j, c, h', w'] from input [c, h', i, w', j].
std::vector<permute_axis> s2d_nchw_dcr_axes(std::int64_t b, std::int64_t w, std::int64_t channels, std::int64_t d) {
  const std::int64_t side = b * d;
  return {{b, side * w, b * channels * d * d * w},
          {b, w, channels * d * d * w},
          {channels, side * side * w, d * d * w},
          {d, b * side * w, d * w},
          {d, b * w, w}};
}

// s2d NCHW DCR outputs larger than the cache: de-interleaves of up to 4 ways, and streamed ones of 8
// ways with runs under 1 KiB, read the source once, in order (the repeat walks the block row i
// inside the output row h'); the others, and in-cache outputs, keep the destination's order. Each
// also runs into a destination off cache lines.
TEST(PermuteRun, StreamedDeinterleavesWalkTheSourceInOrder) {
  std::mt19937_64 rng(17);
  struct shape {
    std::int64_t block, width, channels, cells;  // cells: output height and width
    bool source_order;
  };
  for (const shape& t :
       {shape{2, 1, 3, 1032, true}, shape{3, 2, 1, 840, true}, shape{4, 4, 4, 230, true}, shape{8, 1, 16, 128, true},
        shape{8, 8, 1, 160, false}, shape{8, 2, 2, 230, false}, shape{2, 4, 3, 32, false}}) {
    const std::int64_t b = t.block;
    const std::int64_t w = t.width;
    const std::int64_t d = t.cells;
    const std::int64_t side = b * d;
    const std::vector<permute_axis> axes = s2d_nchw_dcr_axes(b, w, t.channels, d);
    // The source ends at an inaccessible page, so that reading past it faults.
    const auto src_bytes = static_cast<std::size_t>(t.channels * side * side * w);
    const guarded_source guarded(src_bytes, rng);
    const std::byte* const src = guarded.data();
    std::vector<std::byte> want(src_bytes, std::byte{0x5A});
    permute_naive(axes, src, want.data(), w);
    const std::string context = " b=" + std::to_string(b) + " w=" + std::to_string(w) +
                                " C=" + std::to_string(t.channels) + " d=" + std::to_string(d);
    const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(w));
    if (detected_isa() >= isa::avx512) {
      ASSERT_TRUE(plan.shuffle && !plan.shuffle->interleave) << describe(plan) << context;
      ASSERT_EQ(plan.shuffle->segment_copy.copy, nullptr) << describe(plan) << context;
      // Source order: the call's inner repeat is i (source stride one input row). Streamed, with
      // up to 16 rows per position (b ways x b block rows), the call also takes h', along which
      // every output row continues, for the line sinks.
      EXPECT_EQ(plan.shuffle->repeat.inner.src_stride == side * w, t.source_order) << describe(plan) << context;
      if (t.source_order && plan.shuffle->repeat.streaming) {
        EXPECT_EQ(plan.shuffle->repeat.outer.dst_stride == d * w, b * b <= max_sunk_deinterleave_rows)
            << describe(plan) << context;
      }
    }
    expect_every_isa_matches(axes, w, src, want, context);
    // A destination 16 bytes past a cache line, as numpy's buffers are: the streamed plans write
    // it through line sinks (up to 16 rows per position) or with ordinary stores (run_permute),
    // and the bytes around it stay untouched.
    std::vector<std::byte> padded(want.size() + 128, std::byte{0x5A});
    const auto misalign =
        static_cast<std::size_t>((16 - reinterpret_cast<std::uintptr_t>(padded.data()) % 64 + 64) % 64);
    run_permute(plan, src, padded.data() + misalign, 2);
    ASSERT_TRUE(std::equal(want.begin(), want.end(), padded.begin() + static_cast<std::ptrdiff_t>(misalign)))
        << context << " (destination off lines)";
    ASSERT_TRUE(std::all_of(padded.begin(), padded.begin() + static_cast<std::ptrdiff_t>(misalign),
                            [](std::byte v) { return v == std::byte{0x5A}; }));
    ASSERT_TRUE(std::all_of(padded.begin() + static_cast<std::ptrdiff_t>(misalign + want.size()), padded.end(),
                            [](std::byte v) { return v == std::byte{0x5A}; }));
  }
}

// Streamed de-interleaves of runs of 1 KiB or more walk the source in order where the output is
// 64 MiB or more (s2d NCHW DCR b2 C4 of 4-byte elements, runs of 8 KiB at 256 MiB), not at 16 MiB
// (runs of 2 KiB); and 64 MiB of bytes (runs of 4 KiB) against the element loop. Runs of 1-2 KiB
// whose rows are off cache lines stream there too, and then walk in order (b3 C16 of 2-byte
// elements, runs of 1930 bytes), not at 16 MiB (b3 C1).
TEST(PermutePlan, LongStreamedRunsWalkTheSourceInOrderFarPastTheCache) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  for (const std::int64_t d : {2048, 512}) {
    const std::int64_t side = 2 * d;
    const permute_plan plan = plan_permute(s2d_nchw_dcr_axes(2, 4, 4, d), 4);
    ASSERT_TRUE(plan.shuffle && !plan.shuffle->interleave) << describe(plan);
    EXPECT_TRUE(plan.shuffle->repeat.streaming) << describe(plan);
    EXPECT_GE(plan.shuffle->run.extent * 4, 1024) << describe(plan);
    const bool far_past_the_cache = plan.total_bytes >= std::int64_t{64} << 20;
    EXPECT_EQ(far_past_the_cache, d == 2048) << describe(plan);
    EXPECT_EQ(plan.shuffle->repeat.inner.src_stride == side * 4, far_past_the_cache) << describe(plan);
  }
  const permute_plan off_lines = plan_permute(s2d_nchw_dcr_axes(3, 2, 16, 965), 2);
  ASSERT_TRUE(off_lines.shuffle && !off_lines.shuffle->interleave) << describe(off_lines);
  EXPECT_TRUE(off_lines.shuffle->repeat.streaming) << describe(off_lines);
  EXPECT_EQ(off_lines.shuffle->repeat.inner.src_stride, 3 * 965 * 2) << describe(off_lines);
  const permute_plan cached_off_lines = plan_permute(s2d_nchw_dcr_axes(3, 2, 1, 965), 2);
  ASSERT_TRUE(cached_off_lines.shuffle) << describe(cached_off_lines);
  EXPECT_FALSE(cached_off_lines.shuffle->repeat.streaming) << describe(cached_off_lines);
  std::mt19937_64 rng(61);
  const auto bytes = s2d_nchw_dcr_axes(2, 1, 1, 4096);
  const permute_plan plan = plan_permute(bytes, 1);
  ASSERT_TRUE(plan.shuffle) << describe(plan);
  EXPECT_EQ(plan.shuffle->repeat.inner.src_stride, 8192) << describe(plan);
  expect_matches_naive_on_one_and_two_threads(bytes, plan, 1, rng);
}

// Interleaves whose output is 64 MiB or more walk the source in order where that walk streams: d2s
// NCHW CRD b8 C16 of 2-byte elements at 256 MiB (each call one output row in 8, its source 8
// planes read through), not b3 C64 of bytes (rows of 2 KiB off cache lines would no longer
// stream); and 64 MiB of bytes (b4, rows of 8 KiB) against the element loop. Input [C, i, j, H, W]
// to output [C, H, i, W, j].
TEST(PermutePlan, InterleavesFarPastTheCacheWalkTheSourceInOrderWhereTheyStream) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  const std::vector<int> d2s_nchw{0, 3, 1, 4, 2};
  const permute_plan eight = plan_permute(packed_transpose({16, 8, 8, 362, 362}, d2s_nchw, 2), 2);
  ASSERT_TRUE(eight.shuffle && eight.shuffle->interleave) << describe(eight);
  EXPECT_TRUE(eight.shuffle->repeat.streaming) << describe(eight);
  EXPECT_EQ(eight.shuffle->repeat.inner.src_stride, 362 * 2) << describe(eight);
  const permute_plan three = plan_permute(packed_transpose({64, 3, 3, 683, 683}, d2s_nchw, 1), 1);
  ASSERT_TRUE(three.shuffle && three.shuffle->interleave) << describe(three);
  EXPECT_NE(three.shuffle->repeat.inner.src_stride, 683) << describe(three);
  std::mt19937_64 rng(67);
  const auto bytes = packed_transpose({1, 4, 4, 2048, 2048}, d2s_nchw, 1);
  const permute_plan plan = plan_permute(bytes, 1);
  ASSERT_TRUE(plan.shuffle) << describe(plan);
  EXPECT_TRUE(plan.shuffle->repeat.streaming) << describe(plan);
  EXPECT_EQ(plan.shuffle->repeat.inner.src_stride, 2048) << describe(plan);
  expect_matches_naive_on_one_and_two_threads(bytes, plan, 1, rng);
}

// Planned for a Zen 4 or a Zen 5, the source-order walks of the two tests above start where the
// output streams (walks_source_order_past_the_cache): at 16 MiB, s2d NCHW DCR b2 C4 of 4-byte
// elements (runs of 2 KiB) and d2s NCHW CRD b8 C16 of 2-byte elements (19 MB) walk the source in
// order, against the element loop; an interleave of 3 ways (d2s NCHW CRD b3 C64 of bytes) and the
// AVX2 level's 8-way interleave keep the direct walk, as the common rules keep every one of them.
TEST(PermutePlan, AmdWalksTheSourceInOrderWhereTheOutputStreams) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  const std::vector<int> d2s_nchw{0, 3, 1, 4, 2};
  const auto deinterleave = s2d_nchw_dcr_axes(2, 4, 4, 512);
  const auto eight = packed_transpose({16, 8, 8, 96, 96}, d2s_nchw, 2);
  const auto three = packed_transpose({64, 3, 3, 170, 170}, d2s_nchw, 1);
  auto source_order = [](const permute_plan& plan, std::int64_t inner_src_stride) {
    EXPECT_TRUE(plan.shuffle.has_value()) << describe(plan);
    EXPECT_TRUE(plan.streams) << describe(plan);
    return plan.shuffle && plan.shuffle->repeat.inner.src_stride == inner_src_stride;
  };
  const std::int64_t deinterleave_source_row = 2 * 512 * 4;  // one input row
  for (const runtime::core_kind cores :
       {runtime::core_kind::amd_zen4, runtime::core_kind::amd_zen5, runtime::core_kind::other}) {
    runtime::plan_for_core_kind_for_testing(cores);
    const bool amd = runtime::takes_amd_rules(cores);
    EXPECT_EQ(source_order(plan_permute(deinterleave, 4), deinterleave_source_row), amd)
        << describe(plan_permute(deinterleave, 4));
    EXPECT_EQ(source_order(plan_permute(eight, 2), 96 * 2), amd) << describe(plan_permute(eight, 2));
    EXPECT_FALSE(source_order(plan_permute(three, 1), 170)) << describe(plan_permute(three, 1));
  }
  std::mt19937_64 rng(73);
  for (const runtime::core_kind cores : amd_core_kinds) {
    runtime::plan_for_core_kind_for_testing(cores);
    expect_matches_naive_on_one_and_two_threads(deinterleave, plan_permute(deinterleave, 4), 4, rng);
    expect_matches_naive_on_one_and_two_threads(eight, plan_permute(eight, 2), 2, rng);
    set_max_isa(isa::avx2);
    EXPECT_FALSE(source_order(plan_permute(eight, 2), 96 * 2)) << describe(plan_permute(eight, 2));
    set_max_isa(isa::avx512vbmi);
  }
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
}

// In the cache, interleaves of 4 ways or more walk the source in order too, with ordinary stores:
// d2s NCHW DCR b8 C1 of 4-byte elements at 1 MiB (each call one output row in 8, its source 8
// planes read through), not b3 (3 ways), which keeps the direct walk.
TEST(PermutePlan, InterleavesOfFourWaysOrMoreWalkTheSourceInOrderInTheCache) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  const std::vector<int> d2s_nchw{0, 3, 1, 4, 2};
  const auto eight = packed_transpose({1, 8, 8, 64, 64}, d2s_nchw, 4);
  const permute_plan plan = plan_permute(eight, 4);
  ASSERT_TRUE(plan.shuffle && plan.shuffle->interleave) << describe(plan);
  EXPECT_FALSE(plan.streams) << describe(plan);
  EXPECT_FALSE(plan.shuffle->repeat.streaming) << describe(plan);
  EXPECT_EQ(plan.shuffle->repeat.inner.src_stride, 64 * 4) << describe(plan);
  std::mt19937_64 rng(79);
  expect_matches_naive_on_one_and_two_threads(eight, plan, 4, rng);
  const permute_plan three = plan_permute(packed_transpose({1, 3, 3, 171, 171}, d2s_nchw, 4), 4);
  ASSERT_TRUE(three.shuffle && three.shuffle->interleave) << describe(three);
  EXPECT_FALSE(three.streams) << describe(three);
  EXPECT_NE(three.shuffle->repeat.inner.src_stride, 171 * 4) << describe(three);
}

// On a Zen 4 and Intel's cores, staged AVX-512 interleaves of more than 4 ways take the AVX2
// level's plan where that interleaves unstaged in the source's order: d2s NCHW DCR b8 C4 of bytes
// at 1 MiB (runs of 64 bytes), not C16 (runs of 32 bytes, which the AVX2 level walks in the
// destination's order); or where it stages too: d2s channels-first K = 3 CRD b8 C4 of 2-byte
// elements at 64 KiB.
TEST(PermutePlan, Zen4AndIntelTakeTheAvx2PlanOverStagedInterleavesOfEightWays) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  const std::vector<int> d2s_nchw{0, 3, 1, 4, 2};
  const auto c4 = packed_transpose({4, 8, 8, 64, 64}, d2s_nchw, 1);
  const auto c16 = packed_transpose({16, 8, 8, 32, 32}, d2s_nchw, 1);
  const auto cubes = packed_transpose({4, 8, 8, 8, 3, 3, 3}, {0, 4, 1, 5, 2, 6, 3}, 2);
  set_max_isa(isa::avx2);
  const permute_plan avx2_cubes = plan_permute(cubes, 2);
  ASSERT_TRUE(avx2_cubes.shuffle && avx2_cubes.shuffle->interleave) << describe(avx2_cubes);
  EXPECT_NE(describe(avx2_cubes).find(" staged by "), std::string::npos) << describe(avx2_cubes);
  for (isa cap : {isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    set_max_isa(cap);
    const permute_plan common = plan_permute(c4, 1);
    ASSERT_TRUE(common.shuffle && common.shuffle->interleave) << describe(common);
    EXPECT_NE(describe(common).find(" staged by "), std::string::npos) << describe(common);
    for (runtime::core_kind cores : zen4_staging_core_kinds) {
      runtime::plan_for_core_kind_for_testing(cores);
      const permute_plan zen4 = plan_permute(c4, 1);
      ASSERT_TRUE(zen4.shuffle) << describe(zen4);
      EXPECT_EQ(zen4.shuffle->level, isa::avx2) << describe(zen4);
      EXPECT_EQ(describe(zen4).find(" staged by "), std::string::npos) << describe(zen4);
      EXPECT_TRUE(zen4.shuffle->repeat.by_source) << describe(zen4);
      std::mt19937_64 rng(83);
      expect_matches_naive_on_one_and_two_threads(c4, zen4, 1, rng);
      const permute_plan zen4_c16 = plan_permute(c16, 1);
      ASSERT_TRUE(zen4_c16.shuffle) << describe(zen4_c16);
      EXPECT_EQ(zen4_c16.shuffle->level, isa::avx512) << describe(zen4_c16);
      const permute_plan zen4_cubes = plan_permute(cubes, 2);
      EXPECT_EQ(describe(zen4_cubes), describe(avx2_cubes)) << to_string(cap);
      expect_matches_naive_on_one_and_two_threads(cubes, zen4_cubes, 2, rng);
    }
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
    const permute_plan common_cubes = plan_permute(cubes, 2);
    ASSERT_TRUE(common_cubes.shuffle) << describe(common_cubes);
    EXPECT_EQ(common_cubes.shuffle->level, isa::avx512) << describe(common_cubes);
    EXPECT_NE(describe(common_cubes).find(" staged by "), std::string::npos) << describe(common_cubes);
  }
  set_max_isa(isa::avx512vbmi);
}

// Far past the cache a destination group of source pixels is cut into parts that let a batch
// take every inner position (destination_group_part): d2s channels-last K = 3 CRD b8 C16 of 4-byte
// elements at 64 MiB, [16, 16, 8, 16 * 512] -> [128, 128, 64, 16], pixels of 32 KiB and segments of
// 512 bytes, in parts of 2 of the 8 pixels. Not at 16 MiB, nor for segments under 256 bytes (C16 of
// bytes: 128). The parts match the element loop on one and two threads; into an output off a line
// the whole group is taken, and matches too. Segments under a line take groups in parts of whole
// lines from b4 on.
TEST(PermutePlan, FarStreamedStagedInterleavesTakeTheirPixelGroupsInParts) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  set_max_isa(isa::avx512);
  std::mt19937_64 rng(131);
  const std::vector<int> d2s_channels_last_crd{0, 4, 1, 5, 2, 6, 3};  // [d, h, w, c, b, b, b]
  auto part_of = [](const std::vector<permute_axis>& axes, std::size_t width) {
    const permute_plan plan = plan_permute(axes, width);
    EXPECT_TRUE(plan.shuffle && plan.shuffle->interleave && plan.shuffle->destination_group.extent > 1)
        << describe(plan);
    return plan.shuffle ? plan.shuffle->destination_group_part : -1;
  };
  const auto far = packed_transpose({16, 16, 8, 16, 8, 8, 8}, d2s_channels_last_crd, 4);
  EXPECT_EQ(part_of(far, 4), 2);
  EXPECT_EQ(part_of(packed_transpose({4, 16, 8, 16, 8, 8, 8}, d2s_channels_last_crd, 4), 4), 0);    // 16 MiB
  EXPECT_EQ(part_of(packed_transpose({16, 32, 16, 16, 8, 8, 8}, d2s_channels_last_crd, 1), 1), 0);  // 64 MiB
  // Segments under a line (C3 of 2-byte elements: 48 bytes) take the group of pixels 3 KiB apart,
  // in parts of 20 of its 36 pixels (whole lines: multiples of 4); b3 takes none.
  const auto short_segments = packed_transpose({36, 36, 36, 3, 8, 8, 8}, d2s_channels_last_crd, 2);
  EXPECT_EQ(part_of(short_segments, 2), 20);
  const permute_plan b3 = plan_permute(packed_transpose({80, 80, 80, 3, 3, 3, 3}, d2s_channels_last_crd, 2), 2);
  EXPECT_TRUE(b3.shuffle && b3.shuffle->destination_group.extent <= 1) << describe(b3);
  const permute_plan plan = plan_permute(far, 4);
  EXPECT_NE(describe(plan).find(" in parts of 2"), std::string::npos) << describe(plan);
  expect_matches_naive_on_and_off_a_line(far, plan, 4, rng);
  const permute_plan short_plan = plan_permute(short_segments, 2);
  expect_matches_naive_on_one_and_two_threads(short_segments, short_plan, 2, rng);
  set_max_isa(isa::avx512vbmi);
}

// Staged interleaves whose output rows follow one another across an outer axis before the
// repeat's inner one (d2s channels-first K = 3 CRD: rows h * b + bh) take that axis into each call
// where the output streams, and write whole stretches of output in order (destination_group).
TEST(PermutePlan, StreamedStagedInterleavesWriteTheDestinationInOrder) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  set_max_isa(isa::avx512);
  std::mt19937_64 rng(71);
  const std::vector<int> d2s_channels_first{0, 4, 1, 5, 2, 6, 3};
  // b3 C16 of bytes, [432, 34, 34, 34] -> [16, 102, 102, 102]: output rows of 102 bytes, a call's
  // stretch one output plane (3 x 34 rows).
  const auto planes = packed_transpose({16, 3, 3, 3, 34, 34, 34}, d2s_channels_first, 1);
  const permute_plan plan = plan_permute(planes, 1);
  ASSERT_TRUE(plan.shuffle && plan.shuffle->interleave) << describe(plan);
  EXPECT_EQ(plan.shuffle->destination_group, (permute_axis{3, 3 * 34 * 34 * 34, 102})) << describe(plan);
  expect_matches_naive_on_one_and_two_threads(planes, plan, 1, rng);
  // Into a destination off its cache lines, as numpy's 16-byte aligned buffers may be.
  std::vector<std::byte> src(static_cast<std::size_t>(plan.total_bytes));
  for (auto& v : src) v = static_cast<std::byte>(rng());
  std::vector<std::byte> expected(src.size());
  permute_naive(planes, src.data(), expected.data(), 1);
  std::vector<std::byte> shifted(src.size() + 64, std::byte{0x5A});
  std::byte* const dst = shifted.data() + (37 - reinterpret_cast<std::uintptr_t>(shifted.data()) % 64 + 64) % 64;
  run_permute(plan, src.data(), dst, 2);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), dst));
  // b3 C1, [27, 85, 85, 85] -> [1, 255, 255, 255]: an output plane (65 KB) outgrows the buffers,
  // so calls take parts of one.
  const auto long_planes = packed_transpose({1, 3, 3, 3, 85, 85, 85}, d2s_channels_first, 1);
  const permute_plan long_plan = plan_permute(long_planes, 1);
  ASSERT_TRUE(long_plan.shuffle) << describe(long_plan);
  EXPECT_EQ(long_plan.shuffle->destination_group.extent, 3) << describe(long_plan);
  expect_matches_naive_on_one_and_two_threads(long_planes, long_plan, 1, rng);
  // 4-way interleaves of 1- and 2-byte elements stage so rather than assemble their output vectors
  // where the output streams, below 64 MiB (d2s channels-first K = 3 DCR b4 C16 of 2-byte elements,
  // [1024, 20, 20, 20] -> [16, 80, 80, 80]).
  const auto fours = packed_transpose({4, 4, 4, 16, 20, 20, 20}, {3, 4, 0, 5, 1, 6, 2}, 2);
  const permute_plan four_plan = plan_permute(fours, 2);
  ASSERT_TRUE(four_plan.shuffle) << describe(four_plan);
  EXPECT_FALSE(four_plan.shuffle->repeat.assembled) << describe(four_plan);
  EXPECT_EQ(four_plan.shuffle->destination_group.extent, 4) << describe(four_plan);
  expect_matches_naive_on_one_and_two_threads(fours, four_plan, 2, rng);
  // In the cache (1 MB) the plan stays as it was.
  const permute_plan cached = plan_permute(packed_transpose({16, 3, 3, 3, 8, 8, 8}, d2s_channels_first, 1), 1);
  ASSERT_TRUE(cached.shuffle) << describe(cached);
  EXPECT_EQ(cached.shuffle->destination_group.extent, 1) << describe(cached);
  // Far past the cache (planned only): 9 source planes at once take the group (b3 C16, 256 MB),
  // 64 do not (b8 C1, 272 MB).
  const permute_plan far_b3 = plan_permute(packed_transpose({16, 3, 3, 3, 85, 85, 85}, d2s_channels_first, 1), 1);
  ASSERT_TRUE(far_b3.shuffle) << describe(far_b3);
  EXPECT_EQ(far_b3.shuffle->destination_group.extent, 3) << describe(far_b3);
  const permute_plan far_b8 = plan_permute(packed_transpose({1, 8, 8, 8, 81, 81, 81}, d2s_channels_first, 1), 1);
  ASSERT_TRUE(far_b8.shuffle) << describe(far_b8);
  EXPECT_EQ(far_b8.shuffle->destination_group.extent, 1) << describe(far_b8);
  // On AMD's cores such plans keep the AVX-512 staging where the AVX2 level's in-place walk of
  // segments would otherwise replace it, below 64 MiB (d2s channels-first K = 3 CRD b8 C16 of
  // 4-byte elements: 17 MB, and 262 MB planned only).
  const auto eights = packed_transpose({16, 8, 8, 8, 8, 8, 8}, d2s_channels_first, 4);
  for (runtime::core_kind cores : amd_core_kinds) {
    runtime::plan_for_core_kind_for_testing(cores);
    const permute_plan amd_grouped = plan_permute(eights, 4);
    ASSERT_TRUE(amd_grouped.shuffle) << describe(amd_grouped);
    EXPECT_EQ(amd_grouped.shuffle->destination_group.extent, 8) << describe(amd_grouped);
    EXPECT_EQ(amd_grouped.shuffle->level, isa::avx512) << describe(amd_grouped);
    expect_matches_naive_on_one_and_two_threads(eights, amd_grouped, 4, rng);
    const permute_plan amd_far = plan_permute(packed_transpose({16, 8, 8, 8, 20, 20, 20}, d2s_channels_first, 4), 4);
    ASSERT_TRUE(amd_far.shuffle) << describe(amd_far);
    EXPECT_NE(amd_far.shuffle->segmented, nullptr) << describe(amd_far);
  }
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  // At the AVX2 level, segments under 48 bytes keep the plain staging (d2s channels-last K = 3 CRD
  // b3 C3 of bytes, 16 MB: 9-byte segments); longer ones take the group (C16: 48 bytes).
  set_max_isa(isa::avx2);
  const permute_plan short_segments =
      plan_permute(packed_transpose({59, 59, 59, 3, 3, 3, 3}, d2s_channels_first, 1), 1);
  ASSERT_TRUE(short_segments.shuffle) << describe(short_segments);
  EXPECT_EQ(short_segments.shuffle->destination_group.extent, 1) << describe(short_segments);
  const auto long_segments = packed_transpose({34, 34, 34, 16, 3, 3, 3}, d2s_channels_first, 1);
  const permute_plan avx2_plan = plan_permute(long_segments, 1);
  ASSERT_TRUE(avx2_plan.shuffle) << describe(avx2_plan);
  EXPECT_GT(avx2_plan.shuffle->destination_group.extent, 1) << describe(avx2_plan);
  expect_matches_naive_on_one_and_two_threads(long_segments, avx2_plan, 1, rng);
  set_max_isa(isa::avx512vbmi);
}

// s2d / d2s channels-first K = 1 CRD of 3 channels, [3, W, b] <-> [3, b, W]: one-level repeats of
// 3 long runs. On two threads those runs are cut into chunks of whole lines of each way's row
// (shuffle_work_items), since 3 runs give the threads 2 and 1; on one thread, with 4 channels, or
// with runs under 128 KiB, the runs stay whole.
TEST(PermutePlan, FewLongRunsThatDoNotShareOutEvenlyAreCutIntoChunks) {
  if (detected_isa() < isa::avx2) GTEST_SKIP() << "needs AVX2, which this CPU lacks";
  auto channels_first = [](std::int64_t channels, std::int64_t w, std::int64_t b, bool s2d) {
    return s2d ? packed_transpose({channels, w, b}, {0, 2, 1}, 1) : packed_transpose({channels, b, w}, {0, 2, 1}, 1);
  };
  auto shuffle_plan = [](const std::vector<permute_axis>& axes) {
    const permute_plan plan = plan_permute(axes, 1);
    EXPECT_TRUE(plan.shuffle && plan.shuffle->segment_copy.copy == nullptr && plan.shuffle->repeat.outer.extent == 1)
        << describe(plan);
    return plan;
  };
  std::mt19937_64 rng(97);
  for (bool s2d : {true, false}) {
    const auto three = channels_first(3, 65536 + 37, 3, s2d);  // 197 KB runs
    const permute_plan plan = shuffle_plan(three);
    ASSERT_TRUE(plan.shuffle) << describe(plan);
    const std::int64_t run = plan.shuffle->run.extent;
    EXPECT_EQ(shuffle_work_items(plan, 1).chunk, run) << describe(plan);
    const shuffle_split two = shuffle_work_items(plan, 2);
    EXPECT_LT(two.chunk, run) << describe(plan);
    EXPECT_EQ(two.chunk % 64, 0) << two.chunk;
    EXPECT_GE(two.run_items * 3, 8) << two.run_items;
    expect_matches_naive_on_one_and_two_threads(three, plan, 1, rng);
    const permute_plan four = shuffle_plan(channels_first(4, 65536 + 37, 3, s2d));
    ASSERT_TRUE(four.shuffle) << describe(four);
    EXPECT_EQ(shuffle_work_items(four, 2).chunk, four.shuffle->run.extent) << describe(four);
    const permute_plan short_runs = shuffle_plan(channels_first(3, 40000, 3, s2d));  // 120 KB runs
    ASSERT_TRUE(short_runs.shuffle) << describe(short_runs);
    EXPECT_EQ(shuffle_work_items(short_runs, 2).chunk, short_runs.shuffle->run.extent) << describe(short_runs);
  }
}

// d2s channels-last K = 3 CRD C64, [D, H, W, 64 b^3] -> [D b, H b, W b, 64]: 64-way block-
// transposing interleaves of each source pixel's 64 x b^3 block, staged. Where the output streams
// below 64 MiB, Intel's cores take no destination group (transposes_whole_runs_into_the_cache), so
// that each call transposes whole pixels; other cores take it. Far past the cache (planned only)
// the b3 plan, which takes no group there, copies its 768-byte segments out with streaming stores
// (streams_staged_segments), as does the 16-way interleave of d2s NHWC CRD b8 C16 of bytes; b8 of
// 2-byte elements keeps its group there and the ordinary copy.
TEST(PermutePlan, BlockTransposingInterleavesTransposeWholePixelsIntoTheCache) {
  if (detected_isa() < isa::avx512) GTEST_SKIP() << "needs AVX-512; this CPU has " << to_string(detected_isa());
  auto depth_to_space = [](std::int64_t d, std::int64_t h, std::int64_t w, std::int64_t b, std::int64_t bytes) {
    return packed_transpose({d, h, w, 64, b, b, b}, {0, 4, 1, 5, 2, 6, 3}, bytes);
  };
  const auto b3 = depth_to_space(12, 12, 13, 3, 4);      // 12.9 MB
  const auto b8 = depth_to_space(6, 6, 6, 8, 2);         // 14.2 MB: blocks of the 8 i rows cut 4 + 4 on two threads
  const auto far_b3 = depth_to_space(22, 22, 21, 3, 4);  // 70 MB
  const auto far_b8 = depth_to_space(16, 16, 16, 8, 2);  // 268 MB
  auto group_of = [](const permute_plan& plan) {
    EXPECT_TRUE(plan.shuffle && plan.shuffle->transposes && plan.shuffle->interleave &&
                plan.shuffle->segment_copy.copy != nullptr)
        << describe(plan);
    return plan.shuffle ? plan.shuffle->destination_group.extent : 0;
  };
  auto segment_copy = [](const permute_plan& plan) {
    return plan.shuffle ? std::string(plan.shuffle->segment_copy.name) : std::string("none");
  };
  std::mt19937_64 rng(89);
  for (isa cap : {isa::avx512vbmi, isa::avx512, isa::avx2}) {
    if (detected_isa() < cap) continue;
    set_max_isa(cap);
    runtime::plan_for_core_kind_for_testing(runtime::core_kind::intel);
    const std::string level(to_string(cap == isa::avx2 ? isa::avx2 : isa::avx512));
    const permute_plan b3_plan = plan_permute(b3, 4);
    EXPECT_EQ(group_of(b3_plan), 1) << to_string(cap);
    EXPECT_EQ(segment_copy(b3_plan), "copy_runs_" + level) << describe(b3_plan);
    const permute_plan b8_plan = plan_permute(b8, 2);
    EXPECT_EQ(group_of(b8_plan), 1) << to_string(cap);
    if (cap == isa::avx512vbmi) {
      expect_matches_naive_on_and_off_a_line(b3, b3_plan, 4, rng);
      expect_matches_naive_on_one_and_two_threads(b8, b8_plan, 2, rng);
    }
    const permute_plan far_b3_plan = plan_permute(far_b3, 4);
    EXPECT_EQ(group_of(far_b3_plan), 1) << to_string(cap);
    EXPECT_EQ(segment_copy(far_b3_plan), cap == isa::avx2 ? "copy_runs_avx2" : "copy_runs_streaming_avx512")
        << describe(far_b3_plan);
    const permute_plan far_b8_plan = plan_permute(far_b8, 2);
    EXPECT_GT(group_of(far_b8_plan), 1) << to_string(cap);
    EXPECT_EQ(segment_copy(far_b8_plan), "copy_runs_" + level) << describe(far_b8_plan);
    for (runtime::core_kind cores :
         {runtime::core_kind::other, runtime::core_kind::amd_zen4, runtime::core_kind::amd_zen5}) {
      runtime::plan_for_core_kind_for_testing(cores);
      EXPECT_GT(group_of(plan_permute(b3, 4)), 1) << to_string(cap) << " " << static_cast<int>(cores);
    }
  }
  // The far 16-way interleave (128-byte segments), and the streaming segment copy run: the cached b3
  // plan's segments copied out so, into a destination on and off its lines.
  set_max_isa(isa::avx512);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::intel);
  const permute_plan sixteen = plan_permute(packed_transpose({1, 260, 260, 16, 8, 8}, {0, 1, 4, 2, 5, 3}, 1), 1);
  ASSERT_TRUE(sixteen.shuffle && sixteen.shuffle->offsets.size() == 16) << describe(sixteen);
  EXPECT_EQ(segment_copy(sixteen), "copy_runs_streaming_avx512") << describe(sixteen);
  const auto cached_b3 = depth_to_space(4, 5, 6, 3, 4);
  permute_plan streamed_copy = plan_permute(cached_b3, 4);
  ASSERT_EQ(group_of(streamed_copy), 1);
  streamed_copy.shuffle->segment_copy = run_tile_kernel_avx512(768, true, true);
  ASSERT_EQ(segment_copy(streamed_copy), "copy_runs_streaming_avx512");
  expect_matches_naive_on_and_off_a_line(cached_b3, streamed_copy, 4, rng);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  set_max_isa(isa::avx512vbmi);
}

// The gather tests run under the cap of each ISA with a gather kernel that the host has: avx2
// (halves_of_16 programs) and avx512vbmi (pairs_of_64). The cap and the forcing switch are
// process-wide, so TearDown restores both even when an assertion ends a test early.
class GatherAtIsa : public testing::TestWithParam<isa> {
 protected:
  void SetUp() override {
    if (detected_isa() < GetParam()) {
      GTEST_SKIP() << "needs " << (GetParam() == isa::avx2 ? "AVX2" : "AVX512-VBMI") << ", which this CPU lacks";
    }
    set_max_isa(GetParam());
  }
  void TearDown() override {
    force_gather_for_testing(gather_forcing::off);
    set_max_isa(isa::avx512vbmi);
  }
};
INSTANTIATE_TEST_SUITE_P(Isa, GatherAtIsa, testing::Values(isa::avx2, isa::avx512vbmi),
                         [](const testing::TestParamInfo<isa>& param_info) {
                           return std::string(to_string(param_info.param));
                         });

// The AVX2 gather's own choices.
class PermuteGatherAvx2 : public testing::Test {
 protected:
  void SetUp() override {
    if (detected_isa() < isa::avx2) GTEST_SKIP() << "needs AVX2, which this CPU lacks";
    set_max_isa(isa::avx2);
  }
  void TearDown() override { set_max_isa(isa::avx512vbmi); }
};

// The tests of the VBMI gather's own choices and lined programs.
class PermuteGather : public testing::Test {
 protected:
  void SetUp() override {
    if (detected_isa() < isa::avx512vbmi) GTEST_SKIP() << "needs AVX512-VBMI, which this CPU lacks";
    set_max_isa(isa::avx512vbmi);
  }
  void TearDown() override {
    force_gather_for_testing(gather_forcing::off);
    set_max_isa(isa::avx512vbmi);
  }
};

// The plan against the element loop: source ending `gap` bytes before an inaccessible page,
// destination misaligned by 0, 1 and 7 bytes with guard bytes after it, one and two threads; and
// run as an output well past the cache would run it (its total_bytes raised to
// streamed_gather_output_bytes, and each strip prefetching the next one's lines: each strip is
// built in an L1 buffer, then streamed out, gather_rows::stream).
void expect_gather_matches(const permute_plan& plan, const std::vector<permute_axis>& axes, std::int64_t width,
                           std::int64_t bytes, std::mt19937_64& rng, std::size_t gap = 0) {
  guarded_source src(static_cast<std::size_t>(bytes), rng, gap);
  const permute_plan streamed = [&] {
    permute_plan large = plan;
    large.total_bytes = std::max(plan.total_bytes, streamed_gather_output_bytes);
    large.streams = true;
    large.gather->prefetch_next_strip = true;
    return large;
  }();
  for (std::int64_t misalign : {0, 1, 7}) {
    std::vector<std::byte> expected(static_cast<std::size_t>(bytes + misalign + 64), std::byte{0x5A});
    permute_naive(axes, src.data(), expected.data() + misalign, width);
    for (const permute_plan* run : {&plan, &streamed}) {
      for (int threads : {1, 2}) {
        std::vector<std::byte> actual(expected.size(), std::byte{0x5A});
        run_permute(*run, src.data(), actual.data() + misalign, threads);
        ASSERT_EQ(actual, expected) << describe(plan) << " misalign=" << misalign << " threads=" << threads
                                    << (run == &streamed ? " streamed" : "");
      }
    }
  }
}

// Periodic gathers, planned wherever one exists: NHWC CRD space_to_depth / depth_to_space for
// channel counts whose blocks do not divide 64 bytes (partial periods at every row's end), every
// element width, source ending right before an inaccessible page, destination misaligned and
// guarded, one and two threads; against the element loop.
TEST_P(GatherAtIsa, ProgramsMatchNaiveCopy) {
  force_gather_for_testing(gather_forcing::any);
  std::mt19937_64 rng(5);
  int gathers = 0;
  for (const bool to_space : {true, false}) {
    for (std::int64_t b : {2, 3, 4}) {
      for (std::int64_t channels : {1, 3, 4, 5, 16}) {
        for (std::int64_t width : {1, 2, 4, 8}) {
          for (std::int64_t w : {1, 7, 45}) {
            const std::int64_t h = 3;
            // depth_to_space: [H, W, C, bh, bw] -> [H, bh, W, bw, C]; space_to_depth the reverse.
            const auto axes = to_space ? packed_transpose({h, w, channels, b, b}, {0, 3, 1, 4, 2}, width)
                                       : packed_transpose({h, b, w, b, channels}, {0, 2, 4, 1, 3}, width);
            const std::int64_t bytes = h * w * channels * b * b * width;
            const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
            if (!plan.gather) continue;  // no destination block continued by a stream axis
            ++gathers;
            ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, axes, width, bytes, rng))
                << (to_space ? "d2s" : "s2d") << " b=" << b << " C=" << channels << " width=" << width << " W=" << w;
          }
        }
      }
    }
  }
  EXPECT_GT(gathers, 300);
}

// Random permutations of random shapes, gathered wherever possible, periodic programs first and
// then single-block ones only (the other random test plans them as the rules choose).
TEST_P(GatherAtIsa, RandomPermutationsMatchNaiveCopy) {
  for (const gather_forcing forcing : {gather_forcing::any, gather_forcing::single_block}) {
    force_gather_for_testing(forcing);
    std::mt19937_64 rng(77);
    int gathers = 0;
    for (int trial = 0; trial < 400; ++trial) {
      const auto rank = static_cast<std::size_t>(2 + rng() % 4);
      std::vector<std::int64_t> shape(rank);
      std::int64_t count = 1;
      for (auto& extent : shape) {
        extent = static_cast<std::int64_t>(1 + rng() % 9);
        count *= extent;
      }
      std::vector<int> perm(rank);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      const std::int64_t width = std::int64_t{1} << (rng() % 4);
      const auto axes = packed_transpose(shape, perm, width);
      const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
      if (!plan.gather) continue;
      ++gathers;
      if (forcing == gather_forcing::single_block) {
        ASSERT_TRUE(plan.gather->program->single_block) << describe(plan);
      }
      guarded_source src(static_cast<std::size_t>(count * width), rng);
      std::vector<std::byte> expected(static_cast<std::size_t>(count * width + 64), std::byte{0x5A});
      permute_naive(axes, src.data(), expected.data(), width);
      std::vector<std::byte> actual(expected.size(), std::byte{0x5A});
      run_permute(plan, src.data(), actual.data(), 1);
      ASSERT_EQ(actual, expected) << describe(plan) << " trial " << trial;
    }
    EXPECT_GT(gathers, 50);
  }
}

// Every source line any step of `program` loads has a prefetch offset on it, wherever the period's
// source starts within a line.
void expect_prefetches_cover_loads(const gather_program& program) {
  for (std::int64_t start = 0; start < 64; ++start) {
    // Lined windows may start up to 63 bytes before the period's source: floor division.
    auto line = [start](std::int64_t offset) { return (start + offset + 64) / 64 - 1; };
    std::vector<std::int64_t> prefetched;
    for (std::int64_t offset : program.prefetch_offsets) prefetched.push_back(line(offset));
    for (const gather_step& step : program.steps) {
      for (int bit = 0; bit < 64; ++bit) {
        for (auto [window, loads] : {std::pair{step.window_a, step.load_a}, std::pair{step.window_b, step.load_b}}) {
          if ((loads >> bit & 1) == 0) continue;
          EXPECT_NE(std::find(prefetched.begin(), prefetched.end(), line(window + bit)), prefetched.end())
              << "source byte " << window + bit << " of a period starting at byte " << start << " of a line";
        }
      }
    }
  }
}

// Every window a step of `program` (for periods starting `phase` bytes past a line) loads starts
// `phase` bytes before a line, or, in a program with windows on lines where they fit, takes bytes
// from both sides of a line's end.
void expect_windows_on_lines(const gather_program& program, std::int64_t phase, const std::string& context) {
  for (const gather_step& step : program.steps) {
    for (auto [window, loads] : {std::pair{step.window_a, step.load_a}, std::pair{step.window_b, step.load_b}}) {
      if (loads == 0) continue;
      const std::int64_t start = window + phase;
      ASSERT_GE(start, 0) << context;
      if (start % 64 == 0) continue;
      EXPECT_TRUE(program.lines_where_they_fit) << "a window off its line: " << context;
      const int first = std::countr_zero(loads);
      const int last = 63 - std::countl_zero(loads);
      EXPECT_NE((start + first) / 64, (start + last) / 64) << "a window off the line its bytes lie in: " << context;
    }
  }
}

// The plan against the element loop with its source starting on a cache line (where a gather runs
// its programs on source lines) and 8 and 16 bytes past one (numpy's alignment: its first program
// runs), ending right before an inaccessible page when its size allows; destination misaligned and
// guarded; one and two threads.
void expect_matches_from_any_line_offset(const permute_plan& plan, const std::vector<permute_axis>& axes,
                                         std::int64_t width, std::int64_t bytes, std::mt19937_64& rng) {
  for (std::int64_t line_offset : {0, 8, 16}) {
    const auto gap = static_cast<std::size_t>(((-bytes - line_offset) % 64 + 64) % 64);
    guarded_source src(static_cast<std::size_t>(bytes), rng, gap);
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(src.data()) % 64, static_cast<std::uintptr_t>(line_offset));
    for (std::int64_t misalign : {0, 7}) {
      std::vector<std::byte> expected(static_cast<std::size_t>(bytes + misalign + 64), std::byte{0x5A});
      permute_naive(axes, src.data(), expected.data() + misalign, width);
      for (int threads : {1, 2}) {
        std::vector<std::byte> actual(expected.size(), std::byte{0x5A});
        run_permute(plan, src.data(), actual.data() + misalign, threads);
        ASSERT_EQ(actual, expected) << describe(plan) << " source line offset=" << line_offset
                                    << " misalign=" << misalign << " threads=" << threads;
      }
    }
  }
}

// On AMD's Zen 4 and Zen 5 and on Intel's cores the VBMI gather builds consecutive chunks of a period together
// from windows loaded once per period (gather_program::chunk_groups) where that saves loads. Planned for a Zen 4 with
// gathers forced, the NHWC CRD shapes of GatherAtIsa.ProgramsMatchNaiveCopy whose program groups
// (rows of 7-341 pixels: whole periods, part-periods, strips near the source's end), against the
// element loop (expect_gather_matches: source ending before an inaccessible page, destination
// misaligned, one and two threads, streamed); and s2d NHWC DCR b3 C1 of bytes, which takes the
// gather, grouped, unforced (its chunks each take 21 bytes of three rows). A Zen 5 and Intel's
// cores plan the same groups; other cores keep the chunk-by-chunk programs.
TEST_F(PermuteGather, AmdAndIntelBuildChunkGroupsFromSharedWindows) {
  std::mt19937_64 rng(79);
  auto program_groups = [](const permute_plan& plan) { return plan.gather->program->chunk_groups.size(); };
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen4);
  const auto pixels = packed_transpose({341, 3, 341, 3, 1}, {0, 2, 1, 3, 4}, 1);
  const permute_plan chosen = plan_permute(pixels, 1);
  ASSERT_TRUE(chosen.gather) << describe(chosen);
  EXPECT_FALSE(chosen.gather->program->chunk_groups.empty()) << describe(chosen);
  ASSERT_NO_FATAL_FAILURE(expect_gather_matches(chosen, pixels, 1, 341 * 3 * 341 * 3, rng));
  force_gather_for_testing(gather_forcing::any);
  int grouped = 0;
  int lined_grouped = 0;
  for (const bool to_space : {true, false}) {
    for (std::int64_t b : {2, 3, 4}) {
      for (std::int64_t channels : {1, 3, 4, 5}) {
        for (std::int64_t width : {1, 2, 4}) {
          for (std::int64_t w : {7, 45, 341}) {
            const std::int64_t h = 24;  // several strips: a strip whose windows reach the end goes chunk by chunk
            const auto axes = to_space ? packed_transpose({h, w, channels, b, b}, {0, 3, 1, 4, 2}, width)
                                       : packed_transpose({h, b, w, b, channels}, {0, 2, 4, 1, 3}, width);
            runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);
            const permute_plan common = plan_permute(axes, static_cast<std::size_t>(width));
            if (common.gather) {
              EXPECT_TRUE(common.gather->program->chunk_groups.empty()) << describe(common);
            }
            runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen4);
            const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
            if (!plan.gather || plan.gather->program->chunk_groups.empty()) continue;
            ++grouped;
            for (const runtime::core_kind cores : {runtime::core_kind::amd_zen5, runtime::core_kind::intel}) {
              runtime::plan_for_core_kind_for_testing(cores);
              const permute_plan same = plan_permute(axes, static_cast<std::size_t>(width));
              ASSERT_TRUE(same.gather) << describe(same);
              EXPECT_EQ(same.gather->program->chunk_groups.size(), program_groups(plan)) << describe(same);
            }
            runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen4);
            const gather_program& program = *plan.gather->program;
            std::uint32_t chunks = 0;
            for (const gather_chunk_group& group : program.chunk_groups) {
              EXPECT_EQ(group.first_chunk, chunks) << describe(plan);
              EXPECT_LE(group.chunks, static_cast<std::uint32_t>(max_group_chunks)) << describe(plan);
              EXPECT_LE(group.windows, static_cast<std::uint32_t>(max_group_windows)) << describe(plan);
              chunks += group.chunks;
            }
            EXPECT_EQ(chunks, program.chunk_end.size()) << describe(plan);
            const std::int64_t bytes = h * w * channels * b * b * width;
            ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, axes, width, bytes, rng))
                << (to_space ? "d2s" : "s2d") << " b=" << b << " C=" << channels << " width=" << width << " W=" << w;
            const auto& lined = plan.gather->lined_programs;
            if (lined.empty() || lined.front()->chunk_groups.empty()) continue;
            // A source starting on a line, so that the lined programs run, ending before the page.
            ++lined_grouped;
            const auto line_gap = static_cast<std::size_t>((64 - bytes % 64) % 64);
            ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, axes, width, bytes, rng, line_gap))
                << describe(plan) << " on lines";
          }
        }
      }
    }
  }
  EXPECT_GE(grouped, 20);
  EXPECT_GE(lined_grouped, 10);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
}

// Past the L2 cache, Intel's cores let a group of chunks have up to max_group_windows windows
// (most_group_windows): s2d channels-last K = 3 b3 C1 of bytes (each chunk reads 9 source rows)
// groups at 2.2 MB, in groups of over max_near_group_windows windows, and matches the element loop;
// at 250 KB, and on a Zen 4, its groups keep to max_near_group_windows. d2s NHWC CRD b3 C1 of
// 4-byte elements, whose rows share their source lines, takes such groups at 16.8 MB but not at
// 67 MB, far past the cache.
TEST_F(PermuteGather, IntelGroupsChunksOverMoreWindowsPastTheL2Cache) {
  std::mt19937_64 rng(83);
  auto widest_group = [](const permute_plan& plan) {
    std::uint32_t widest = 0;
    if (!plan.gather) return widest;
    for (const gather_chunk_group& group : plan.gather->program->chunk_groups) widest = std::max(widest, group.windows);
    return widest;
  };
  auto cube = [](std::int64_t blocks) {
    return packed_transpose({blocks, 3, blocks, 3, blocks, 3, 1}, {0, 2, 4, 1, 3, 5, 6}, 1);
  };
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::intel);
  const auto large = cube(43);  // 129^3 bytes
  const permute_plan wide = plan_permute(large, 1);
  ASSERT_TRUE(wide.gather) << describe(wide);
  EXPECT_GT(widest_group(wide), static_cast<std::uint32_t>(max_near_group_windows)) << describe(wide);
  EXPECT_LE(widest_group(wide), static_cast<std::uint32_t>(max_group_windows)) << describe(wide);
  ASSERT_NO_FATAL_FAILURE(expect_gather_matches(wide, large, 1, 129 * 129 * 129, rng));
  const permute_plan small = plan_permute(cube(21), 1);  // 63^3 bytes
  ASSERT_TRUE(small.gather) << describe(small);
  EXPECT_LE(widest_group(small), static_cast<std::uint32_t>(max_near_group_windows)) << describe(small);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen4);
  const permute_plan zen4 = plan_permute(large, 1);
  EXPECT_LE(widest_group(zen4), static_cast<std::uint32_t>(max_near_group_windows)) << describe(zen4);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::intel);
  auto pixels = [](std::int64_t side) { return packed_transpose({side, side, 1, 3, 3}, {0, 3, 1, 4, 2}, 4); };
  const permute_plan shared = plan_permute(pixels(683), 4);  // 16.8 MB
  ASSERT_TRUE(shared.gather) << describe(shared);
  EXPECT_TRUE(shared.gather->rows_share_source) << describe(shared);
  EXPECT_GT(widest_group(shared), static_cast<std::uint32_t>(max_near_group_windows)) << describe(shared);
  const permute_plan far = plan_permute(pixels(1366), 4);  // 67.2 MB
  ASSERT_TRUE(far.gather) << describe(far);
  EXPECT_TRUE(far.gather->rows_share_source) << describe(far);
  EXPECT_LE(widest_group(far), static_cast<std::uint32_t>(max_near_group_windows)) << describe(far);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
}

// Gathers whose source strides but the rows' are multiples of 64 bytes carry programs with their
// windows on source lines, one per offset within a line the rows start at (up to 8): depth_to_space
// / space_to_depth NCHW CRD of channel planes of whole lines (one program) and not (none), NHWC CRD
// whose rows start 8-32 bytes apart within lines (two to eight). Every window of a program for rows
// starting p bytes past a line starts p bytes before a line, no program takes more than one step
// more than the plain one, every line a program loads is prefetched; each plan against the element
// loop (expect_matches_from_any_line_offset).
TEST_F(PermuteGather, LinedProgramsMatchNaiveCopy) {
  force_gather_for_testing(gather_forcing::any);
  std::mt19937_64 rng(31);
  int lined = 0;
  int phased = 0;
  int gathers = 0;
  auto check = [&](const std::vector<permute_axis>& axes, std::int64_t width, std::int64_t bytes) {
    const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
    if (!plan.gather) return;
    ++gathers;
    const gather_tile& tile = *plan.gather;
    if (!tile.lined_programs.empty()) {
      ++lined;
      if (tile.line_phase_rows > 1) ++phased;
      EXPECT_EQ(static_cast<std::int64_t>(tile.lined_programs.size()),
                std::min(tile.line_phase_rows, tile.rows.extent));
      for (std::size_t j = 0; j < tile.lined_programs.size(); ++j) {
        const gather_program& program = *tile.lined_programs[j];
        const std::int64_t phase = static_cast<std::int64_t>(j) * tile.rows.src_stride % 64;
        EXPECT_EQ(program.line_phase, phase) << describe(plan);
        EXPECT_LE(program.steps_per_chunk(), tile.program->steps_per_chunk() + 1.0) << describe(plan);
        expect_windows_on_lines(program, phase, describe(plan));
        expect_prefetches_cover_loads(program);
      }
    }
    ASSERT_NO_FATAL_FAILURE(expect_matches_from_any_line_offset(plan, axes, width, bytes, rng));
  };
  for (const bool to_space : {true, false}) {
    for (std::int64_t b : {2, 3, 4}) {
      for (std::int64_t width : {1, 2, 4, 8}) {
        for (std::int64_t channels : {1, 3}) {
          for (const auto& [h, w] : {std::pair<std::int64_t, std::int64_t>{4, 16}, {3, 24}, {2, 64}, {5, 7}}) {
            // depth_to_space: [C, bh, bw, H, W] -> [C, H, bh, W, bw]; space_to_depth the reverse.
            const auto axes = to_space ? packed_transpose({channels, b, b, h, w}, {0, 3, 1, 4, 2}, width)
                                       : packed_transpose({channels, h, b, w, b}, {0, 2, 4, 1, 3}, width);
            ASSERT_NO_FATAL_FAILURE(check(axes, width, channels * b * b * h * w * width))
                << "NCHW b=" << b << " C=" << channels << " width=" << width << " H=" << h << " W=" << w;
          }
          for (const auto& [h, w] : {std::pair<std::int64_t, std::int64_t>{3, 26}, {4, 13}, {2, 37}, {16, 26}}) {
            // depth_to_space NHWC CRD: [H, W, C, bh, bw] -> [H, bh, W, bw, C]; space_to_depth the reverse.
            const auto axes = to_space ? packed_transpose({h, w, channels, b, b}, {0, 3, 1, 4, 2}, width)
                                       : packed_transpose({h, b, w, b, channels}, {0, 2, 4, 1, 3}, width);
            ASSERT_NO_FATAL_FAILURE(check(axes, width, channels * b * b * h * w * width))
                << "NHWC b=" << b << " C=" << channels << " width=" << width << " H=" << h << " W=" << w;
          }
        }
      }
    }
  }
  EXPECT_GT(lined, 20);
  EXPECT_GT(phased, 5);
  EXPECT_GT(gathers, lined);
}

// Where windows on source lines would take too many steps (channels-first K = 3 space_to_depth CRD
// b8 of bytes: a chunk takes 8 bytes from each of 8 rows, one line's end in most of them), the
// tile's lined programs keep the plain program's windows, each moved onto its line where the bytes
// it supplies lie in one (lines_where_they_fit): the same steps, the only windows off lines those
// whose bytes straddle two, every loaded line prefetched, the plain programs that group kept
// alone; each plan against the element loop (expect_matches_from_any_line_offset).
TEST_F(PermuteGather, WindowsOnLinesWhereTheyFitMatchNaiveCopy) {
  force_gather_for_testing(gather_forcing::any);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen5);
  std::mt19937_64 rng(37);
  int fitted = 0;
  for (const bool to_depth : {true, false}) {
    for (const auto& [b, channels] : {std::pair<std::int64_t, std::int64_t>{8, 3}, {8, 4}, {4, 64}, {4, 8}}) {
      for (std::int64_t coarse : {2, 3}) {
        // space_to_depth: [C, D, bd, H, bh, W, bw] -> [C, bd, bh, bw, D, H, W]; depth_to_space the reverse.
        const auto axes = to_depth
                              ? packed_transpose({channels, coarse, b, coarse, b, coarse, b}, {0, 2, 4, 6, 1, 3, 5}, 1)
                              : packed_transpose({channels, b, b, b, coarse, coarse, coarse}, {0, 4, 1, 5, 2, 6, 3}, 1);
        const std::string shape = std::string(to_depth ? "s2d" : "d2s") + " b=" + std::to_string(b) +
                                  " C=" + std::to_string(channels) + " coarse=" + std::to_string(coarse);
        const permute_plan plan = plan_permute(axes, 1);
        ASSERT_TRUE(plan.gather) << shape << ": " << describe(plan);
        const gather_tile& tile = *plan.gather;
        for (std::size_t j = 0; j < tile.lined_programs.size(); ++j) {
          const gather_program& program = *tile.lined_programs[j];
          if (!program.lines_where_they_fit) continue;
          ++fitted;
          EXPECT_TRUE(tile.program->chunk_groups.empty()) << shape << ": " << describe(plan);
          EXPECT_EQ(program.steps.size(), tile.program->steps.size()) << shape << ": " << describe(plan);
          const std::int64_t phase = static_cast<std::int64_t>(j) * tile.rows.src_stride % 64;
          EXPECT_EQ(program.line_phase, phase) << shape << ": " << describe(plan);
          expect_windows_on_lines(program, phase, shape + ": " + describe(plan));
          expect_prefetches_cover_loads(program);
        }
        const std::int64_t bytes = channels * b * b * b * coarse * coarse * coarse;
        ASSERT_NO_FATAL_FAILURE(expect_matches_from_any_line_offset(plan, axes, 1, bytes, rng)) << shape;
      }
    }
  }
  EXPECT_GE(fitted, 4);
}

// Rows that start at more offsets within a line than max_line_phase_rows, but are no more rows
// than that (d2s channels-last K = 3 CRD b2 C4 of bytes: 2 rows 4 bytes apart, 16 offsets), take
// an exact lined program each, one per row, with the plain program's steps; windows that would only
// fit lines (d2s channels-first K = 3 CRD b8) or one step per chunk (d2s NHWC CRD b2 C16) keep the
// plain program there. Each plan against the element loop from any line offset, one and two threads
// (expect_matches_from_any_line_offset).
TEST_F(PermuteGather, RowsInManyPhasesTakeAnExactProgramEach) {
  force_gather_for_testing(gather_forcing::any);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen5);
  std::mt19937_64 rng(43);
  int row_by_row = 0;
  for (std::int64_t side : {8, 16}) {
    // [D, H, W, C, bd, bh, bw] -> [D, bd, H, bh, W, bw, C]
    const auto axes = packed_transpose({side, side, side, 4, 2, 2, 2}, {0, 4, 1, 5, 2, 6, 3}, 1);
    const permute_plan plan = plan_permute(axes, 1);
    ASSERT_TRUE(plan.gather) << describe(plan);
    const gather_tile& tile = *plan.gather;
    if (tile.line_phase_rows > 8) {
      ++row_by_row;
      EXPECT_EQ(static_cast<std::int64_t>(tile.lined_programs.size()), tile.rows.extent) << describe(plan);
      for (std::size_t j = 0; j < tile.lined_programs.size(); ++j) {
        const gather_program& program = *tile.lined_programs[j];
        const std::int64_t phase = static_cast<std::int64_t>(j) * tile.rows.src_stride % 64;
        EXPECT_EQ(program.line_phase, phase) << describe(plan);
        EXPECT_FALSE(program.lines_where_they_fit) << describe(plan);
        EXPECT_GE(program.steps_per_chunk(), 2.0) << describe(plan);
        EXPECT_EQ(program.steps_per_chunk(), tile.program->steps_per_chunk()) << describe(plan);
        expect_windows_on_lines(program, phase, describe(plan));
        expect_prefetches_cover_loads(program);
      }
    }
    ASSERT_NO_FATAL_FAILURE(expect_matches_from_any_line_offset(plan, axes, 1, side * side * side * 32, rng))
        << "side " << side;
  }
  EXPECT_GE(row_by_row, 1);
  // [C, bd, bh, bw, D, H, W] -> [C, D, bd, H, bh, W, bw]: windows that fit lines only.
  const auto fitted = packed_transpose({64, 8, 8, 8, 3, 3, 3}, {0, 4, 1, 5, 2, 6, 3}, 1);
  const permute_plan fitted_plan = plan_permute(fitted, 1);
  ASSERT_TRUE(fitted_plan.gather) << describe(fitted_plan);
  EXPECT_LE(fitted_plan.gather->line_phase_rows, 8) << describe(fitted_plan);
  // [H, W, C, bh, bw] -> [H, bh, W, bw, C], C = 16: one step per chunk.
  const auto one_step = packed_transpose({8, 128, 16, 2, 2}, {0, 3, 1, 4, 2}, 1);
  const permute_plan one_step_plan = plan_permute(one_step, 1);
  ASSERT_TRUE(one_step_plan.gather) << describe(one_step_plan);
  EXPECT_LE(one_step_plan.gather->line_phase_rows, 8) << describe(one_step_plan);
}

// Staged 2-way interleaves of runs up to 8 bytes take a gather of two steps: depth_to_space
// channels-first K = 3 CRD b2 C16 of bytes over 8 x 8 x 8 pixels, against the element loop
// (expect_gather_matches); the 2-way de-interleave of the same space_to_depth keeps its shuffle.
TEST_F(PermuteGather, TwoWayStagedInterleavesOfShortRunsGather) {
  // depth_to_space: [C, bd, bh, bw, D, H, W] -> [C, D, bd, H, bh, W, bw]; space_to_depth the reverse.
  const auto to_space = packed_transpose({16, 2, 2, 2, 8, 8, 8}, {0, 4, 1, 5, 2, 6, 3}, 1);
  const permute_plan interleave = plan_permute(to_space, 1);
  ASSERT_TRUE(interleave.gather) << describe(interleave);
  EXPECT_LE(interleave.gather->program->steps_per_chunk(), 2.0) << describe(interleave);
  std::mt19937_64 rng(59);
  ASSERT_NO_FATAL_FAILURE(expect_gather_matches(interleave, to_space, 1, 16 * 8 * 512, rng));
  const auto to_depth = packed_transpose({16, 8, 2, 8, 2, 8, 2}, {0, 2, 4, 6, 1, 3, 5}, 1);
  const permute_plan deinterleave = plan_permute(to_depth, 1);
  EXPECT_FALSE(deinterleave.gather) << describe(deinterleave);
  ASSERT_TRUE(deinterleave.shuffle) << describe(deinterleave);
  EXPECT_FALSE(deinterleave.shuffle->interleave) << describe(deinterleave);
}

// Staged 4-way interleaves of runs of one line (64 bytes) take a gather of two steps where the
// output stays in the cache: depth_to_space channels-first K = 3 CRD b4 C1 of 4-byte elements over
// 16 x 16 x 16 pixels (1 MiB), against the element loop (expect_gather_matches); not for 16
// channels (16 MiB, whose output streams), nor for runs of 44 bytes (11 x 11 x 11 pixels).
TEST_F(PermuteGather, FourWayStagedInterleavesOfLineRunsGatherInTheCache) {
  // [C, bd, bh, bw, D, H, W] -> [C, D, bd, H, bh, W, bw]
  auto to_space = [](std::int64_t channels, std::int64_t side) {
    return packed_transpose({channels, 4, 4, 4, side, side, side}, {0, 4, 1, 5, 2, 6, 3}, 4);
  };
  const auto lines = to_space(1, 16);
  const permute_plan plan = plan_permute(lines, 4);
  ASSERT_TRUE(plan.gather) << describe(plan);
  EXPECT_LE(plan.gather->program->steps_per_chunk(), 2.0) << describe(plan);
  std::mt19937_64 rng(61);
  ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, lines, 4, 64 * 4096 * 4, rng));
  const permute_plan streamed = plan_permute(to_space(16, 16), 4);
  EXPECT_FALSE(streamed.gather) << describe(streamed);
  EXPECT_TRUE(streamed.streams) << describe(streamed);
  const permute_plan shorter = plan_permute(to_space(1, 11), 4);
  EXPECT_FALSE(shorter.gather) << describe(shorter);
}

// On a Zen 5, 24-byte elements in destination blocks of 2 or 4 take the gather at every size short
// of far past the cache: space_to_depth NHWC DCR b2 C3 of 4-byte elements (runs of 24 bytes, blocks
// of 48) at 1 MiB, and b4 C3 of 2-byte ones (blocks of 96) at 64 KiB, each against the element loop
// (expect_gather_matches); not b8 C3 of bytes (blocks of 8), b3 C4 of 2-byte elements (blocks of 3),
// nor on a Zen 4.
TEST_F(PermuteGather, Zen5GathersShortBlocksOf24ByteElements) {
  // space_to_depth NHWC DCR: [H, bh, W, bw, C] -> [H, W, bh, bw, C]
  auto pixels = [](std::int64_t side, std::int64_t b, std::int64_t channels, std::int64_t width) {
    return packed_transpose({side, b, side, b, channels}, {0, 2, 1, 3, 4}, width);
  };
  std::mt19937_64 rng(53);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen5);
  for (const auto& [side, b, width] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{148, 2, 4}, {26, 4, 2}}) {
    const auto axes = pixels(side, b, 3, width);
    const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
    ASSERT_TRUE(plan.gather) << "b=" << b << ": " << describe(plan);
    EXPECT_EQ(plan.width, 24U) << describe(plan);
    EXPECT_EQ(plan.gather->block_bytes, b * 24) << describe(plan);
    EXPECT_LE(plan.gather->program->steps_per_chunk(), 2.0) << describe(plan);
    ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, axes, width, side * side * b * b * 3 * width, rng))
        << "b=" << b;
  }
  const permute_plan blocks_of_8 = plan_permute(pixels(74, 8, 3, 1), 1);
  EXPECT_FALSE(blocks_of_8.gather) << describe(blocks_of_8);
  const permute_plan blocks_of_3 = plan_permute(pixels(121, 3, 4, 2), 2);
  EXPECT_FALSE(blocks_of_3.gather) << describe(blocks_of_3);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen4);
  const permute_plan zen4 = plan_permute(pixels(148, 2, 3, 4), 4);
  EXPECT_FALSE(zen4.gather) << describe(zen4);
}

// On a Zen 5, streamed gathers whose periods exceed 512 bytes, into outputs under 32 MiB, cut their
// long rows into strips of 8 KiB rather than 4 KiB (gather_tile::wide_streamed_strips): s2d NHWC CRD
// b3 C3 of bytes (1,728-byte periods) at 16.8 MB, not at 50 MB, not on other cores, not for b4 C4
// (64-byte periods). Rows of 17,550 bytes (10 periods and 270 bytes: strips of 4, 4 and 2 periods,
// the last with the tail) in wide strips against the element loop (expect_gather_matches, which
// also runs them streamed).
TEST_F(PermuteGather, Zen5StreamsLongPeriodsInWideStrips) {
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen5);
  // space_to_depth NHWC CRD: [H, bh, W, bw, C] -> [H, W, C, bh, bw]
  auto pixels = [](std::int64_t side, std::int64_t b, std::int64_t channels) {
    return packed_transpose({side, b, side, b, channels}, {0, 2, 4, 1, 3}, 1);
  };
  const permute_plan cached = plan_permute(pixels(788, 3, 3), 1);
  ASSERT_TRUE(cached.gather) << describe(cached);
  EXPECT_TRUE(cached.gather->wide_streamed_strips) << describe(cached);
  const permute_plan past = plan_permute(pixels(1365, 3, 3), 1);
  ASSERT_TRUE(past.gather) << describe(past);
  EXPECT_FALSE(past.gather->wide_streamed_strips) << describe(past);
  const permute_plan short_periods = plan_permute(pixels(512, 4, 4), 1);
  ASSERT_TRUE(short_periods.gather) << describe(short_periods);
  EXPECT_FALSE(short_periods.gather->wide_streamed_strips) << describe(short_periods);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::intel);
  const permute_plan intel = plan_permute(pixels(788, 3, 3), 1);
  ASSERT_TRUE(intel.gather) << describe(intel);
  EXPECT_FALSE(intel.gather->wide_streamed_strips) << describe(intel);

  force_gather_for_testing(gather_forcing::any);
  std::mt19937_64 rng(47);
  // [2, 3, 1950, 3, 3] -> [2, 650, 27]: rows of 17,550 bytes
  const auto axes = packed_transpose({2, 3, 1950, 3, 3}, {0, 2, 4, 1, 3}, 1);
  permute_plan plan = plan_permute(axes, 1);
  ASSERT_TRUE(plan.gather) << describe(plan);
  ASSERT_GT(plan.gather->program->period_dst_bytes, 512) << describe(plan);
  plan.gather->wide_streamed_strips = true;
  ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, axes, 1, 2 * 3 * 1950 * 3 * 3, rng));
}

// Where a period's source bytes are not a multiple of 64 (s2d NHWC CRD b8 C3 of 4-byte elements:
// 96), the lined programs join two periods into one whose source starts at the same offset within a
// line every time, with the plain program's steps; rows short and long enough to be cut into work
// items. Each plan against the element loop from any line offset, one and two threads
// (expect_matches_from_any_line_offset).
TEST_F(PermuteGather, JoinedPeriodsOnLinesMatchNaiveCopy) {
  force_gather_for_testing(gather_forcing::any);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen5);
  std::mt19937_64 rng(41);
  for (std::int64_t w : {9, 90}) {  // rows of 6,912 and 69,120 bytes
    const auto axes = packed_transpose({3, 8, w, 8, 3}, {0, 2, 4, 1, 3}, 4);
    const permute_plan plan = plan_permute(axes, 4);
    ASSERT_TRUE(plan.gather) << describe(plan);
    const gather_tile& tile = *plan.gather;
    ASSERT_FALSE(tile.lined_programs.empty()) << describe(plan);
    for (const auto& lined : tile.lined_programs) {
      EXPECT_EQ(lined->joined_periods, 2) << describe(plan);
      EXPECT_EQ(lined->period_dst_bytes, 2 * tile.program->period_dst_bytes) << describe(plan);
      EXPECT_EQ(lined->period_src_bytes % 64, 0) << describe(plan);
      EXPECT_EQ(lined->steps_per_chunk(), tile.program->steps_per_chunk()) << describe(plan);
      expect_windows_on_lines(*lined, lined->line_phase, describe(plan));
      expect_prefetches_cover_loads(*lined);
    }
    ASSERT_NO_FATAL_FAILURE(expect_matches_from_any_line_offset(plan, axes, 4, 3 * 8 * w * 8 * 3 * 4, rng))
        << "W=" << w;
  }
}

// A plan of 12 MiB or more (its strips prefetch the next ones) against the element loop on one and
// two threads, its source ending right before an inaccessible page, its destination on a line and
// 7 bytes past one.
void expect_large_gather_matches(const std::vector<permute_axis>& axes, std::int64_t width, std::uint64_t seed) {
  const permute_plan planned = plan_permute(axes, static_cast<std::size_t>(width));
  ASSERT_TRUE(planned.gather.has_value()) << describe(planned);
  ASSERT_GE(planned.total_bytes, 12 * 1024 * 1024);
  EXPECT_FALSE(planned.gather->prefetch_next_strip) << describe(planned);  // in the cache
  // Run as an output far past the cache runs (gathers_prefetch_next_strip), without allocating one.
  permute_plan plan = planned;
  plan.gather->prefetch_next_strip = true;
  std::mt19937_64 rng(seed);
  guarded_source src(static_cast<std::size_t>(plan.total_bytes), rng);
  std::vector<std::byte> expected(static_cast<std::size_t>(plan.total_bytes), std::byte{0x5A});
  permute_naive(axes, src.data(), expected.data(), width);
  for (std::size_t misalign : {0, 7}) {
    for (int threads : {1, 2}) {
      std::vector<std::byte> actual(expected.size() + misalign, std::byte{0x5A});
      run_permute(plan, src.data(), actual.data() + misalign, threads);
      const auto start = actual.begin() + static_cast<std::ptrdiff_t>(misalign);
      ASSERT_TRUE(std::equal(expected.begin(), expected.end(), start))
          << describe(plan) << " threads=" << threads << " misalign=" << misalign;
      ASSERT_TRUE(std::all_of(actual.begin(), start, [](std::byte v) { return v == std::byte{0x5A}; }))
          << describe(plan) << " wrote before its destination, misalign=" << misalign;
    }
  }
  expect_prefetches_cover_loads(*plan.gather->program);
}

// Outputs far past the cache prefetch each next strip: the RGB pixel shuffle of 13 MB (partial
// periods at every row's end) still matches the element loop so run, and the program's prefetch
// offsets reach every source line any step loads.
TEST_P(GatherAtIsa, LargeOutputsPrefetchEveryLineTheyRead) {
  expect_large_gather_matches(packed_transpose({1040, 1041, 3, 2, 2}, {0, 3, 1, 4, 2}, 1), 1,
                              41);  // d2s [1040, 1041, 12] -> [2080, 2082, 3]
}

// Gathers prefetch each next strip from 64 MiB on (gathers_prefetch_next_strip; by the common
// rules: see Zen5GathersOfLongPeriodsPrefetchTheNextStripFrom14MiB), not at 16 MiB,
// where the source stays in the cache and the prefetches cost (planned only: nothing allocated).
TEST_P(GatherAtIsa, PrefetchTheNextStripOnlyFarPastTheCache) {
  for (std::int64_t height : {1040, 4160}) {  // d2s [height, 2082, 12] -> [2 * height, 4164, 3]
    const permute_plan plan = plan_permute(packed_transpose({height, 2082, 3, 2, 2}, {0, 3, 1, 4, 2}, 1), 1);
    ASSERT_TRUE(plan.gather.has_value()) << describe(plan);
    const bool far = plan.total_bytes >= std::int64_t{64} << 20;
    EXPECT_EQ(far, height == 4160) << plan.total_bytes;
    EXPECT_EQ(plan.gather->prefetch_next_strip, far) << describe(plan);
    EXPECT_EQ(describe(plan).find("prefetching the next strip") != std::string::npos, far) << describe(plan);
  }
}

// A position whose rows hold under 2 KiB (depth_to_space of pixels into 2-4 short rows, NHWC CRD)
// is walked with the next positions out in one call, as groups of rows: many positions (37 and
// 600, some calls ending near the source's end, whose last group runs alone), every element width,
// source ending right before an inaccessible page, destination misaligned and guarded, one and two
// threads, against the element loop; a 12 MB case also prefetches each next strip of groups.
TEST_P(GatherAtIsa, GroupedShortRowsMatchNaiveCopy) {
  std::mt19937_64 rng(23);
  int gathers = 0;
  for (std::int64_t h : {37, 600}) {
    for (std::int64_t b : {2, 3, 4}) {
      for (std::int64_t channels : {1, 3, 4}) {
        for (std::int64_t width : {1, 2, 4, 8}) {
          for (std::int64_t w : {7, 45}) {
            const auto axes = packed_transpose({h, w, channels, b, b}, {0, 3, 1, 4, 2}, width);
            const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
            if (!plan.gather) continue;
            ++gathers;
            ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, axes, width, h * w * channels * b * b * width, rng))
                << "b=" << b << " C=" << channels << " width=" << width << " H=" << h << " W=" << w;
          }
        }
      }
    }
  }
  EXPECT_GT(gathers, 20);
  expect_large_gather_matches(packed_transpose({6200, 170, 3, 2, 2}, {0, 3, 1, 4, 2}, 1), 1,
                              43);  // d2s [6200, 170, 12]
}

// Gathers whose rows read the same source lines (gather_rows_share_source) take every row over a
// stretch of periods per call and strip across the rows (gather_rows::across): d2s NHWC CRD b2-b4
// of 3-4 channels, W 300 and 301, rows of 3.6-38 KiB whose blocks of rows outgrow a work item, every element
// width, gathers forced; destination misaligned and guarded, source ending right before an
// inaccessible page, one and two threads, as planned and streamed, against the element loop.
TEST_P(GatherAtIsa, RowsSharingTheirSourceGoAcrossRows) {
  std::mt19937_64 rng(59);
  force_gather_for_testing(gather_forcing::any);
  int across = 0;
  for (std::int64_t b : {2, 3, 4}) {
    for (std::int64_t channels : {3, 4}) {
      for (std::int64_t width : {1, 2, 4, 8}) {
        for (std::int64_t w : {300, 301}) {  // 301: rows end in part of a period
          const auto axes = packed_transpose({3, w, channels, b, b}, {0, 3, 1, 4, 2}, width);
          const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
          if (!plan.gather) continue;
          EXPECT_TRUE(plan.gather->rows_share_source) << describe(plan);
          if (b * w * b * channels * width <= 64 * 1024) continue;  // every row in one call anyway
          ++across;
          EXPECT_NE(describe(plan).find(" across rows"), std::string::npos) << describe(plan);
          ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, axes, width, 3 * w * channels * b * b * width, rng))
              << "b=" << b << " C=" << channels << " width=" << width << " W=" << w;
        }
      }
    }
  }
  EXPECT_GE(across, 8);
}

// Streamed gathers build each strip across the rows in an L1 buffer of 16 KiB and a period, also
// where a period of every row, or the part-period ending them, would not fit it: s2d
// channels-first K = 3 DCR b3 C8 of bytes, 63^3 (168 rows of 441 bytes, one period of 1344 bytes
// each: 221 KiB), and d2s NHWC CRD b8 C15 of bytes, W 85 (8 rows of 10,200 bytes, periods of 960:
// a work item's 2 periods and 600-byte tail on every row, 20,160 bytes). Gathers forced; as
// planned and streamed, against the element loop.
TEST_P(GatherAtIsa, StreamedStripsAcrossManyRowsFitTheirBuffer) {
  std::mt19937_64 rng(83);
  force_gather_for_testing(gather_forcing::any);
  const std::vector<std::pair<std::vector<std::int64_t>, std::vector<int>>> shapes{
      {{8, 21, 3, 21, 3, 21, 3}, {2, 4, 6, 0, 1, 3, 5}},
      {{2, 85, 15, 8, 8}, {0, 3, 1, 4, 2}},
  };
  int across = 0;
  for (const auto& [shape, perm] : shapes) {
    const auto axes = packed_transpose(shape, perm, 1);
    const permute_plan plan = plan_permute(axes, 1);
    if (!plan.gather) continue;
    const bool goes_across = describe(plan).find(" across rows") != std::string::npos;
    across += goes_across ? 1 : 0;
    const std::int64_t bytes = std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
    for (std::size_t gap : {0, 16}) {  // 16: a source off its lines, where a lined program would not run
      ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, axes, 1, bytes, rng, gap))
          << describe(plan) << " gap " << gap;
    }
  }
  if (GetParam() == isa::avx512vbmi) {
    EXPECT_EQ(across, 2);
  }
}

// Gathers of one 64-byte chunk per period (d2s NHWC CRD b4 C4 and b2 C8 of 4-byte elements) run as
// outputs well past the cache run them: rows of 2.4 KiB written in place, rows of 38 KiB built in
// the L1 buffer and streamed (gather_streams_strips); destination misaligned and guarded, one and
// two threads, against the element loop.
TEST_P(GatherAtIsa, OneChunkPeriodsOfLongRowsStreamThroughTheBuffer) {
  std::mt19937_64 rng(61);
  force_gather_for_testing(gather_forcing::any);
  int one_chunk = 0;
  for (std::int64_t w : {38, 600}) {
    for (auto [b, channels] : {std::pair<std::int64_t, std::int64_t>{4, 4}, {2, 8}}) {
      const auto axes = packed_transpose({3, w, channels, b, b}, {0, 3, 1, 4, 2}, 4);
      const permute_plan plan = plan_permute(axes, 4);
      if (!plan.gather || plan.gather->program->period_dst_bytes != 64) continue;
      ++one_chunk;
      ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, axes, 4, 3 * w * channels * b * b * 4, rng))
          << "b=" << b << " C=" << channels << " W=" << w;
    }
  }
  EXPECT_GE(one_chunk, GetParam() == isa::avx512vbmi ? 4 : 0);
}

// Streamed gather strips whose every chunk is a whole cache line are built in place with streaming
// stores (gather_streams_in_place) rather than through the L1 buffer: depth_to_space and
// space_to_depth NHWC CRD whose rows are whole lines (periods of 64 bytes to whole rows, rows of
// 384 bytes to 32 KiB), planned as for an output past the cache,
// from sources on a line and 16 bytes off one, into outputs on a line (in place, unless the
// program runs on source lines) and 16 bytes off one (through the buffer), one and two threads,
// against the element loop, with guard bytes either side of the output.
TEST_P(GatherAtIsa, StreamedStripsOfWholeLinesGoStraightToTheirLines) {
  struct shape_case {
    bool to_space;
    std::int64_t b;
    std::int64_t channels;
    std::int64_t width;
    std::int64_t w;
  };
  const std::vector<shape_case> cases = {
      {true, 2, 3, 2, 32},    // d2s b2 C3 of 2-byte elements: rows of 384 bytes, period 192
      {true, 4, 4, 1, 64},    // d2s b4 C4 of bytes: rows of 1 KiB
      {false, 2, 3, 1, 64},   // s2d b2 C3 of bytes: rows of 768 bytes
      {false, 4, 4, 1, 512},  // s2d b4 C4 of bytes: rows of 32 KiB, one chunk per period
      {true, 2, 3, 2, 256},   // d2s b2 C3 of 2-byte elements: rows of 3 KiB, period 192, across rows
      {false, 4, 4, 1, 64},   // s2d b4 C4 of bytes: rows of 4 KiB, one chunk per period
      {true, 2, 4, 4, 128},   // d2s b2 C4 of 4-byte elements: one chunk per period, lined in phases
  };
  force_gather_for_testing(gather_forcing::any);
  std::mt19937_64 rng(83);
  int in_place = 0;
  for (const shape_case& test : cases) {
    const std::int64_t h = 3;
    const auto axes = test.to_space
                          ? packed_transpose({h, test.w, test.channels, test.b, test.b}, {0, 3, 1, 4, 2}, test.width)
                          : packed_transpose({h, test.b, test.w, test.b, test.channels}, {0, 2, 4, 1, 3}, test.width);
    const std::int64_t bytes = h * test.w * test.channels * test.b * test.b * test.width;
    permute_plan plan = plan_permute(axes, static_cast<std::size_t>(test.width));
    ASSERT_TRUE(plan.gather) << describe(plan);
    plan.total_bytes = std::max(plan.total_bytes, streamed_gather_output_bytes);
    plan.streams = true;
    for (const std::int64_t source_offset : {0, 16}) {
      // The source ends `gap` bytes before an inaccessible page and starts `source_offset` past a line.
      const auto gap = static_cast<std::size_t>(((-bytes - source_offset) % 64 + 64) % 64);
      guarded_source src(static_cast<std::size_t>(bytes), rng, gap);
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(src.data()) % 64, static_cast<std::uintptr_t>(source_offset));
      const bool lined = source_offset == 0 && !plan.gather->lined_programs.empty();
      for (const std::int64_t dst_offset : {0, 16}) {
        std::vector<std::byte> expected(static_cast<std::size_t>(bytes + 256), std::byte{0x5A});
        const auto lead = [&](std::vector<std::byte>& buffer) {
          const auto misfit = reinterpret_cast<std::uintptr_t>(buffer.data()) % 64;
          return static_cast<std::ptrdiff_t>((64 - misfit) % 64 + 64 + dst_offset);
        };
        permute_naive(axes, src.data(), expected.data() + lead(expected), test.width);
        for (int threads : {1, 2}) {
          std::vector<std::byte> actual(expected.size(), std::byte{0x5A});
          std::byte* const dst = actual.data() + lead(actual);
          const bool straight = gather_streams_in_place(plan, src.data(), dst);
          EXPECT_EQ(straight, GetParam() == isa::avx512vbmi && dst_offset == 0 && !lined)
              << describe(plan) << " source offset " << source_offset << " destination offset " << dst_offset;
          in_place += straight ? 1 : 0;
          run_permute(plan, src.data(), dst, threads);
          // The guards: `expected` and `actual` differ in where their output starts.
          const std::size_t at_expected = static_cast<std::size_t>(lead(expected));
          const std::size_t at_actual = static_cast<std::size_t>(lead(actual));
          ASSERT_TRUE(
              std::equal(expected.begin() + static_cast<std::ptrdiff_t>(at_expected),
                         expected.begin() + static_cast<std::ptrdiff_t>(at_expected + static_cast<std::size_t>(bytes)),
                         actual.begin() + static_cast<std::ptrdiff_t>(at_actual)))
              << describe(plan) << " source offset " << source_offset << " destination offset " << dst_offset
              << " threads " << threads;
          EXPECT_TRUE(std::all_of(actual.begin(), actual.begin() + static_cast<std::ptrdiff_t>(at_actual),
                                  [](std::byte v) { return v == std::byte{0x5A}; }));
          EXPECT_TRUE(
              std::all_of(actual.begin() + static_cast<std::ptrdiff_t>(at_actual + static_cast<std::size_t>(bytes)),
                          actual.end(), [](std::byte v) { return v == std::byte{0x5A}; }));
        }
      }
    }
  }
  EXPECT_GE(in_place, GetParam() == isa::avx512vbmi ? 12 : 0);
}

// Single-block gathers, where no stream continues a destination block within a period of 2 KiB:
// depth_to_space of 3-byte pixels into rows of 1023 bytes (NHWC b3 C1), and tiny 3-D tensors
// whose channels are whole blocks (channels-first CRD b3, 3 x 3 x 3 and 5 x 5 x 5 per channel,
// and b2, 5 x 5 x 5): every element width, destination misaligned and guarded, source ending
// right before an inaccessible page, one and two threads, against the element loop. Forced, and
// chosen by the rules for the 1023-byte rows; a 12.6 MB case also prefetches.
TEST_P(GatherAtIsa, SingleBlockProgramsMatchNaiveCopy) {
  struct shape_case {
    std::vector<std::int64_t> shape;
    std::vector<int> perm;
  };
  const std::vector<shape_case> cases = {
      {{4, 341, 3, 3, 1}, {0, 2, 1, 3, 4}},             // d2s NHWC b3 C1: [4, 341, 9] -> [12, 1023, 1]
      {{5, 45, 3, 3, 1}, {0, 2, 1, 3, 4}},              // [5, 45, 9] -> [15, 135, 1]
      {{64, 3, 3, 3, 3, 3, 3}, {0, 4, 1, 5, 2, 6, 3}},  // d2s CF-K3 CRD b3: [1728, 3, 3, 3] -> [64, 9, 9, 9]
      {{7, 3, 3, 3, 5, 5, 5}, {0, 4, 1, 5, 2, 6, 3}},   // [189, 5, 5, 5] -> [7, 15, 15, 15]
      {{64, 2, 2, 2, 5, 5, 5}, {0, 4, 1, 5, 2, 6, 3}},  // d2s CF-K3 CRD b2: [512, 5, 5, 5] -> [64, 10, 10, 10]
  };
  std::mt19937_64 rng(13);
  std::array<int, 2> gathers{};  // forced, by the rules
  for (const gather_forcing forcing : {gather_forcing::single_block, gather_forcing::off}) {
    force_gather_for_testing(forcing);
    for (const shape_case& test : cases) {
      for (const bool to_space : {true, false}) {
        for (std::int64_t width : {1, 2, 4, 8}) {
          auto axes = packed_transpose(test.shape, test.perm, width);
          if (!to_space) {
            // space_to_depth: the inverse permutation, over the depth_to_space output's shape.
            std::vector<std::int64_t> out_shape(test.perm.size());
            std::vector<int> inverse(test.perm.size());
            for (std::size_t k = 0; k < test.perm.size(); ++k) {
              out_shape[k] = test.shape[static_cast<std::size_t>(test.perm[k])];
              inverse[static_cast<std::size_t>(test.perm[k])] = static_cast<int>(k);
            }
            axes = packed_transpose(out_shape, inverse, width);
          }
          const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
          if (forcing == gather_forcing::off) {
            // The rules: 3-byte pixels into 1023-byte rows become a single-block gather.
            if (width == 1 && to_space && test.shape[1] == 341) {
              EXPECT_TRUE(plan.gather && plan.gather->program->single_block) << describe(plan);
            }
          }
          if (!plan.gather) continue;  // no block of 2 KiB or less
          if (forcing == gather_forcing::off && !plan.gather->program->single_block) continue;
          ASSERT_TRUE(plan.gather->program->single_block) << describe(plan);
          ++gathers[forcing == gather_forcing::off ? 1 : 0];
          std::int64_t bytes = width;
          for (std::int64_t extent : test.shape) bytes *= extent;
          ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, axes, width, bytes, rng))
              << (to_space ? "d2s" : "s2d") << " width=" << width;
        }
      }
    }
  }
  EXPECT_GE(gathers[0], 35);
  // The AVX2 rules take single blocks for the 3-byte pixels only, and keep the run copy where the
  // output is larger than the cache: there the large case is forced.
  const bool avx2 = GetParam() == isa::avx2;
  EXPECT_GE(gathers[1], avx2 ? 2 : 8);
  force_gather_for_testing(avx2 ? gather_forcing::single_block : gather_forcing::off);
  expect_large_gather_matches(packed_transpose({4110, 341, 3, 3, 1}, {0, 2, 1, 3, 4}, 1), 1,
                              43);  // d2s [4110, 341, 9] -> [12330, 1023, 1]
  EXPECT_TRUE(
      plan_permute(packed_transpose({4110, 341, 3, 3, 1}, {0, 2, 1, 3, 4}, 1), 1).gather->program->single_block);
}

// Rows of 16 KiB or more are cut into strips of periods; where the strips stream
// (gather_rows::stream) those strips are 4 KiB (streamed_long_row_strip_bytes). s2d NHWC DCR of
// rows of 17-42 KB (b3 C1 of bytes, b2 C3 of 1- and 2-byte elements), whose last strip holds a
// part-period, against the element loop, streamed and not, on one and two threads.
TEST_F(PermuteGather, StreamedLongRowsMatchInShortStrips) {
  std::mt19937_64 rng(101);
  struct long_rows {
    std::int64_t w, b, channels, width;
  };
  for (const long_rows& c : {long_rows{1901, 3, 1, 1}, long_rows{3500, 2, 3, 1}, long_rows{1777, 2, 3, 2}}) {
    const std::int64_t h = 3;
    const auto axes = packed_transpose({h, c.b, c.w, c.b, c.channels}, {0, 2, 1, 3, 4}, c.width);
    const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(c.width));
    ASSERT_TRUE(plan.gather) << describe(plan);
    const std::int64_t row_bytes = plan.gather->stream.extent * plan.gather->block_bytes;
    EXPECT_GE(row_bytes, 16384) << describe(plan);
    EXPECT_NE(row_bytes % plan.gather->program->period_dst_bytes, 0) << describe(plan);
    ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, axes, c.width, h * c.w * c.channels * c.b * c.b * c.width, rng))
        << describe(plan);
  }
}

// Rows too long to be a block of their own (d2s NHWC b3 C1, 1365 pixels: rows of 4,095 bytes) take
// a periodic gather whose block is one element, continued along the row, for elements of 3, 6 and
// 12 bytes (bytes, 2- and 4-byte values); 24-byte elements keep their plan. Against the element
// loop, and at 12.6 MB, where the output streams. There, of elements over 3 bytes, only tiles
// writing several destination streams give way (d2s NHWC DCR b3 C4 of bytes at 16.8 MB, its tile
// walking the 3 output rows innermost); a tile continuing the destination keeps its copy (C3).
TEST_F(PermuteGather, LoneElementBlocksWhereRowsOutgrowAPeriod) {
  std::mt19937_64 rng(29);
  for (std::int64_t width : {1, 2, 4, 8}) {
    const auto axes = packed_transpose({4, 1365, 3, 3, 1}, {0, 2, 1, 3, 4}, width);  // d2s [4, 1365, 9]
    const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
    if (width == 8) {
      EXPECT_FALSE(plan.gather) << describe(plan);
      continue;
    }
    ASSERT_TRUE(plan.gather) << describe(plan);
    EXPECT_FALSE(plan.gather->program->single_block) << describe(plan);
    EXPECT_EQ(plan.gather->block_bytes, 3 * width) << describe(plan);
    EXPECT_EQ(plan.gather->stream.extent, 1365) << describe(plan);
    ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, axes, width, 4 * 1365 * 9 * width, rng)) << "width=" << width;
  }
  expect_large_gather_matches(packed_transpose({1030, 1365, 3, 3, 1}, {0, 2, 1, 3, 4}, 1), 1, 31);
  const permute_plan several_streams = plan_permute(packed_transpose({683, 683, 3, 3, 4}, {0, 2, 1, 3, 4}, 1), 1);
  ASSERT_TRUE(several_streams.gather) << describe(several_streams);
  EXPECT_EQ(several_streams.gather->block_bytes, 12) << describe(several_streams);
  const permute_plan continued = plan_permute(packed_transpose({788, 788, 3, 3, 3}, {0, 2, 1, 3, 4}, 1), 1);
  EXPECT_FALSE(continued.gather) << describe(continued);
  EXPECT_EQ(kernel_name(continued), "copy_runs_spilling_avx2") << describe(continued);
}

// Spilled run copies keep their place over the gather where the output streams and the tile has
// 8 columns or more (d2s channels-last K = 3 DCR b3 C1 of 2-byte elements: 6-byte runs, one per
// input pixel along W), and far past the cache where it has 3 (s2d NHWC DCR b3 C3 of bytes: a
// block row's 9 bytes per tile column); in the cache, and for the s2d tile short of far past it,
// the gather stays. Plans only, but for the streamed d2s, against the element loop.
TEST_F(PermuteGather, StreamedSpilledRunsKeepTheirCopy) {
  auto depth_to_space = [](std::int64_t size) {
    return packed_transpose({1, size, size, size, 3, 3, 3, 1}, {0, 1, 4, 2, 5, 3, 6, 7}, 2);
  };
  auto space_to_depth = [](std::int64_t size) {
    return packed_transpose({1, size, 3, size, 3, 3}, {0, 1, 3, 2, 4, 5}, 1);
  };
  struct expectation {
    std::vector<permute_axis> axes;
    std::size_t width;
    bool spills;
  };
  const std::vector<expectation> cases = {
      {depth_to_space(12), 2, false},    // 93 KB
      {depth_to_space(68), 2, true},     // 17 MB
      {space_to_depth(120), 1, false},   // 389 KB
      {space_to_depth(1400), 1, false},  // 18 MB
      {space_to_depth(2900), 1, true},   // 76 MB
  };
  for (const auto& [axes, width, spills] : cases) {
    const permute_plan plan = plan_permute(axes, width);
    EXPECT_EQ(kernel_name(plan), spills ? "copy_runs_spilling_avx2" : "gather_avx512vbmi") << describe(plan);
  }
  std::mt19937_64 rng(191);
  const permute_plan streamed = plan_permute(cases[1].axes, 2);
  ASSERT_TRUE(streamed.streams) << describe(streamed);
  expect_matches_naive_on_one_and_two_threads(cases[1].axes, streamed, 2, rng);
}

// Without forcing, the rules take a gather for the RGB pixel shuffle (NHWC CRD, C = 3 uint8, where
// the 3-way staged shuffle moved one pixel per step), for staged shuffles moving one input pixel
// per call, for 16-way shuffles of 4- and 16-byte runs and for run copies of 24-byte elements;
// they keep the tile for long runs and 32-byte elements, the 16-way shuffle for 64-byte runs, and
// the VBMI 3-way shuffle where gather rows would be short (33 bytes: NCHW DCR b3 W 11). Gathers of
// more than 4 steps per chunk replace only staged calls of under 256 bytes.
TEST_F(PermuteGather, ChosenWhereItBeatsTheOtherKernels) {
  const auto rgb = packed_transpose({64, 64, 3, 2, 2}, {0, 3, 1, 4, 2}, 1);         // d2s [64, 64, 12] -> [128, 128, 3]
  const auto rgb_floats = packed_transpose({74, 74, 3, 4, 4}, {0, 3, 1, 4, 2}, 4);  // d2s [74, 74, 48] -> [296, 296, 3]
  const auto sixteen_short = packed_transpose({128, 4, 128, 4, 4}, {0, 2, 4, 1, 3}, 1);  // s2d NHWC CRD b4 C4
  const auto sixteen_mid = packed_transpose({64, 4, 64, 4, 16}, {0, 2, 4, 1, 3}, 1);     // s2d NHWC CRD b4 C16
  const auto sixteen_long = packed_transpose({32, 4, 32, 4, 64}, {0, 2, 4, 1, 3}, 1);    // s2d NHWC CRD b4 C64
  const auto long_runs = packed_transpose({64, 64, 2, 2, 64}, {0, 2, 1, 3, 4}, 4);       // NHWC DCR, runs of 256 bytes
  EXPECT_EQ(kernel_name(plan_permute(rgb, 1)), "gather_avx512vbmi");
  EXPECT_EQ(kernel_name(plan_permute(rgb_floats, 4)), "gather_avx512vbmi") << describe(plan_permute(rgb_floats, 4));
  EXPECT_EQ(kernel_name(plan_permute(sixteen_short, 1)), "gather_avx512vbmi")
      << describe(plan_permute(sixteen_short, 1));
  EXPECT_EQ(kernel_name(plan_permute(sixteen_mid, 1)), "gather_avx512vbmi") << describe(plan_permute(sixteen_mid, 1));
  EXPECT_EQ(kernel_name(plan_permute(sixteen_long, 1)), "interleave16_x8_avx512")
      << describe(plan_permute(sixteen_long, 1));
  EXPECT_FALSE(plan_permute(long_runs, 4).gather) << describe(plan_permute(long_runs, 4));
  // Run copies of 24-byte elements (s2d NHWC DCR b2 C3 float32) gather only where the gather
  // streams into an output the last-level cache could hold (17 MiB planned as for a Zen 5), not in
  // the cache (64 KiB), not on a Zen 4 (whose gather streams there too, but lost to the run copy),
  // and not past 64 MiB; 32-byte ones (C4) do not gather.
  const auto rgb_pairs = packed_transpose({37, 2, 37, 2, 3}, {0, 2, 1, 3, 4}, 4);
  const auto cache_sized_rgb_pairs = packed_transpose({600, 2, 600, 2, 3}, {0, 2, 1, 3, 4}, 4);
  const auto large_rgb_pairs = packed_transpose({1500, 2, 1500, 2, 3}, {0, 2, 1, 3, 4}, 4);
  const auto rgba_pairs = packed_transpose({37, 2, 37, 2, 4}, {0, 2, 1, 3, 4}, 4);
  EXPECT_EQ(kernel_name(plan_permute(rgb_pairs, 4)), "copy_runs_spilling_avx2") << describe(plan_permute(rgb_pairs, 4));
  EXPECT_FALSE(plan_permute(cache_sized_rgb_pairs, 4).gather) << describe(plan_permute(cache_sized_rgb_pairs, 4));
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen5);
  EXPECT_EQ(kernel_name(plan_permute(cache_sized_rgb_pairs, 4)), "gather_avx512vbmi")
      << describe(plan_permute(cache_sized_rgb_pairs, 4));
  EXPECT_FALSE(plan_permute(large_rgb_pairs, 4).gather) << describe(plan_permute(large_rgb_pairs, 4));
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::amd_zen4);
  EXPECT_FALSE(plan_permute(cache_sized_rgb_pairs, 4).gather) << describe(plan_permute(cache_sized_rgb_pairs, 4));
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  EXPECT_FALSE(plan_permute(rgba_pairs, 4).gather) << describe(plan_permute(rgba_pairs, 4));
  // Tiny 3-D tensors: staged calls of 81 bytes (s2d channels-last CRD b3 C3, 27 x 27 x 27) take a
  // gather of 5 steps per chunk; calls of 1000 bytes (s2d channels-first DCR b8 C1, 40 x 40 x 40)
  // keep the staged 8-way shuffle.
  const auto tiny_calls = packed_transpose({9, 3, 9, 3, 9, 3, 3}, {0, 2, 4, 6, 1, 3, 5}, 1);
  const auto longer_calls = packed_transpose({5, 8, 5, 8, 5, 8}, {1, 3, 5, 0, 2, 4}, 1);
  const permute_plan tiny_plan = plan_permute(tiny_calls, 1);
  ASSERT_TRUE(tiny_plan.gather) << describe(tiny_plan);
  EXPECT_GT(tiny_plan.gather->program->steps_per_chunk(), 4.0) << describe(tiny_plan);
  EXPECT_FALSE(plan_permute(longer_calls, 1).gather) << describe(plan_permute(longer_calls, 1));
  // d2s NHWC CRD b8 C3 of bytes: staged calls of 192 bytes, a gather of over 5 steps per chunk only
  // where the output streams (16 MiB), not in the cache (64 KiB).
  const auto cached_calls = packed_transpose({18, 18, 3, 8, 8}, {0, 3, 1, 4, 2}, 1);
  const auto streamed_calls = packed_transpose({296, 296, 3, 8, 8}, {0, 3, 1, 4, 2}, 1);
  EXPECT_EQ(kernel_name(plan_permute(cached_calls, 1)), "interleave3_x8_avx512vbmi")
      << describe(plan_permute(cached_calls, 1));
  const permute_plan streamed_plan = plan_permute(streamed_calls, 1);
  ASSERT_TRUE(streamed_plan.gather) << describe(streamed_plan);
  EXPECT_GT(streamed_plan.gather->program->steps_per_chunk(), 5.2) << describe(streamed_plan);
  const auto short_rows =
      packed_transpose({3, 3, 64, 11, 11}, {2, 3, 0, 4, 1}, 1);  // d2s [576, 11, 11] -> [64, 33, 33]
  EXPECT_EQ(kernel_name(plan_permute(short_rows, 1)), "interleave3_x8_avx512vbmi")
      << describe(plan_permute(short_rows, 1));
}

// Without forcing, the AVX2 rules take a gather for the short runs of NHWC CRD (4 channels of
// bytes, a direct 4-way shuffle of 4-byte runs, with the program of the shortest period: 32 bytes,
// not the 2 KiB output row), for the RGB pixel shuffle (a staged 3-way shuffle of 2-byte runs), for
// elements moved one at a time (a 96 x 96 transpose of 4-byte elements: too many ways for a
// shuffle) and for 3-byte pixels into rows of 1023 bytes (single blocks); they keep the run copy of
// 256-byte runs, the 16-way shuffle of 64-byte runs, the block-transposing 64-way shuffle (s2d
// channels-last CRD b4 of 64 4-byte channels), and the 3-byte pixels' run copy where the output is
// larger than the cache.
TEST_F(PermuteGatherAvx2, ChosenWhereItBeatsTheOtherKernels) {
  const auto four_channels = packed_transpose({64, 64, 4, 2, 2}, {0, 3, 1, 4, 2}, 1);  // d2s [64, 64, 16]
  const auto rgb = packed_transpose({64, 64, 3, 2, 2}, {0, 3, 1, 4, 2}, 1);            // d2s [64, 64, 12]
  const auto one_at_a_time = packed_transpose({96, 96}, {1, 0}, 4);
  const auto transposing = packed_transpose({3, 4, 3, 4, 3, 4, 64}, {0, 2, 4, 6, 1, 3, 5}, 4);  // s2d CL-K3 CRD b4 C64
  const auto pixels_into_rows = packed_transpose({4, 341, 3, 3, 1}, {0, 2, 1, 3, 4}, 1);        // d2s [4, 341, 9]
  const auto large_pixels_into_rows = packed_transpose({4110, 341, 3, 3, 1}, {0, 2, 1, 3, 4}, 1);
  const auto long_runs = packed_transpose({64, 64, 2, 2, 64}, {0, 2, 1, 3, 4}, 4);     // NHWC DCR, 256-byte runs
  const auto sixteen_long = packed_transpose({32, 4, 32, 4, 64}, {0, 2, 4, 1, 3}, 1);  // s2d NHWC CRD b4 C64

  const permute_plan four_plan = plan_permute(four_channels, 1);
  ASSERT_EQ(kernel_name(four_plan), "gather_avx2") << describe(four_plan);
  EXPECT_EQ(four_plan.gather->program->period_dst_bytes, 32) << describe(four_plan);
  EXPECT_EQ(kernel_name(plan_permute(rgb, 1)), "gather_avx2") << describe(plan_permute(rgb, 1));
  EXPECT_EQ(kernel_name(plan_permute(one_at_a_time, 4)), "gather_avx2") << describe(plan_permute(one_at_a_time, 4));
  EXPECT_EQ(kernel_name(plan_permute(transposing, 4)), "interleave64_x32_transposing_avx2")
      << describe(plan_permute(transposing, 4));
  const permute_plan rows_plan = plan_permute(pixels_into_rows, 1);
  ASSERT_EQ(kernel_name(rows_plan), "gather_avx2") << describe(rows_plan);
  EXPECT_TRUE(rows_plan.gather->program->single_block) << describe(rows_plan);
  EXPECT_FALSE(plan_permute(large_pixels_into_rows, 1).gather) << describe(plan_permute(large_pixels_into_rows, 1));
  EXPECT_FALSE(plan_permute(long_runs, 4).gather) << describe(plan_permute(long_runs, 4));
  EXPECT_FALSE(plan_permute(sixteen_long, 1).gather) << describe(plan_permute(sixteen_long, 1));
  set_max_isa(isa::scalar);
  EXPECT_FALSE(plan_permute(rgb, 1).gather) << describe(plan_permute(rgb, 1));
}

// Random permutations of random shapes of 4 KiB to 3 MiB (3-6 axes of up to 48), gathered wherever
// possible, as planned and as an output well past the cache would run them (expect_gather_matches:
// strips built in the L1 buffer and streamed out), source on and off its lines, one and two
// threads. Shapes this large give strips of many rows and long periods, which the small shapes of
// RandomPermutationsMatchNaiveCopy never reach: before 429ee50 the first 100 of these overflowed
// the streamed strips' buffer.
TEST_P(GatherAtIsa, LargeRandomPermutationsMatchNaiveCopy) {
  force_gather_for_testing(gather_forcing::any);
  std::mt19937_64 rng(97);
  int gathers = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const auto rank = static_cast<std::size_t>(3 + rng() % 4);
    const std::int64_t width = std::int64_t{1} << (rng() % 4);
    std::vector<std::int64_t> shape(rank);
    std::int64_t count = 1;
    for (auto& extent : shape) {
      extent = static_cast<std::int64_t>(1 + rng() % 48);
      count *= extent;
    }
    if (count * width > (std::int64_t{3} << 20) || count * width < 4096) continue;
    std::vector<int> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    const auto axes = packed_transpose(shape, perm, width);
    const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
    if (!plan.gather) continue;
    ++gathers;
    const std::size_t gap = rng() % 2 == 0 ? 0 : 16;  // 16: the source off its lines
    ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, axes, width, count * width, rng, gap))
        << describe(plan) << " trial " << trial;
  }
  EXPECT_GT(gathers, 50);
}

// The axes of a SpaceToDepth (to_space false) or DepthToSpace over K spatial axes as a permute of
// packed tensors: the space side is [C, O_1, b, ..., O_K, b] (channels first) or
// [O_1, b, ..., O_K, b, C] (channels last); the depth side puts b^K blocks before C (DCR) or after
// it (CRD), beside [O_1..O_K] on the same side as C.
std::vector<permute_axis> space_depth_axes(bool to_space, bool channels_last, bool dcr, std::int64_t block,
                                           std::int64_t channels, const std::vector<std::int64_t>& coarse,
                                           std::int64_t width) {
  // Labels: 0 the channels, 1..K the coarse axes O_i, K+1..2K the block axes.
  const int k = static_cast<int>(coarse.size());
  std::vector<int> space;
  std::vector<int> depth;
  if (!channels_last) space.push_back(0);
  for (int i = 0; i < k; ++i) {
    space.push_back(1 + i);
    space.push_back(k + 1 + i);
  }
  if (channels_last) space.push_back(0);
  std::vector<int> depth_channels;
  if (!dcr) depth_channels.push_back(0);
  for (int i = 0; i < k; ++i) depth_channels.push_back(k + 1 + i);
  if (dcr) depth_channels.push_back(0);
  if (!channels_last) depth = depth_channels;
  for (int i = 0; i < k; ++i) depth.push_back(1 + i);
  if (channels_last) depth.insert(depth.end(), depth_channels.begin(), depth_channels.end());
  const auto& in = to_space ? depth : space;
  const auto& out = to_space ? space : depth;
  std::vector<std::int64_t> shape;
  for (int label : in) shape.push_back(label == 0 ? channels : label <= k ? coarse[label - 1] : block);
  std::vector<int> perm;
  for (int label : out) perm.push_back(static_cast<int>(std::find(in.begin(), in.end(), label) - in.begin()));
  return packed_transpose(shape, perm, width);
}

// Staged 3-way shuffles (RGB pixels) take a gather of up to 5 steps per chunk for runs up to 4
// bytes, and of up to 3 for runs of 8: space_to_depth NHWC CRD b4 C3 of bytes (runs of 4 bytes),
// depth_to_space channels-last K = 3 CRD b2 C3 of bytes (runs of 2) and NHWC CRD b2 C3 of 4-byte
// elements (runs of 8), each against the element loop (expect_gather_matches); not the 4-way
// shuffles of depth_to_space channels-last K = 3 CRD b4 C4 of bytes, nor 3-way runs of 3 bytes at 6
// steps (space_to_depth channels-last K = 3 CRD b3 C3 of bytes).
TEST_F(PermuteGatherAvx2, StagedThreeWayShufflesOfShortRunsGather) {
  struct gathered {
    std::vector<permute_axis> axes;
    std::int64_t width;
    std::int64_t bytes;
    double most_steps;
  };
  const std::vector<gathered> cases = {
      {space_depth_axes(false, true, false, 4, 3, {37, 37}, 1), 1, 37 * 37 * 48, 5.0},
      {space_depth_axes(true, true, false, 2, 3, {14, 14, 14}, 1), 1, 14 * 14 * 14 * 24, 5.0},
      {space_depth_axes(true, true, false, 2, 3, {37, 37}, 4), 4, 37 * 37 * 12 * 4, 3.0},
  };
  std::mt19937_64 rng(67);
  for (const gathered& c : cases) {
    const permute_plan plan = plan_permute(c.axes, static_cast<std::size_t>(c.width));
    ASSERT_TRUE(plan.gather) << describe(plan);
    EXPECT_GT(plan.gather->program->steps_per_chunk(), 2.0) << describe(plan);
    EXPECT_LE(plan.gather->program->steps_per_chunk(), c.most_steps) << describe(plan);
    ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, c.axes, c.width, c.bytes, rng)) << describe(plan);
  }
  const permute_plan four_ways = plan_permute(space_depth_axes(true, true, false, 4, 4, {6, 6, 6}, 1), 1);
  EXPECT_FALSE(four_ways.gather) << describe(four_ways);
  const permute_plan six_steps = plan_permute(space_depth_axes(false, true, false, 3, 3, {13, 13, 13}, 1), 1);
  EXPECT_FALSE(six_steps.gather) << describe(six_steps);
}

// Run copies whose tile rows hold at most 4 runs (space_to_depth's block columns) take a gather in
// the cache where its period is short: s2d NHWC DCR b2 C3 of 2-byte elements (96-byte periods) and
// b3 C4 of bytes (288 bytes), each against the element loop (expect_gather_matches); the latter
// not from 8 MiB on (12.6 MB), nor periods of 864 bytes (channels-last K = 3 DCR b3 C1 of 4-byte
// elements), nor the many runs a row of depth_to_space (NHWC DCR b4 C3 of bytes).
TEST_F(PermuteGatherAvx2, RunCopiesOfFewRunsARowGatherInTheCache) {
  std::mt19937_64 rng(71);
  const auto short_period = space_depth_axes(false, true, true, 2, 3, {52, 52}, 2);
  const auto long_period = space_depth_axes(false, true, true, 3, 4, {43, 43}, 1);
  for (const auto& [axes, width] : {std::pair{&short_period, 2}, std::pair{&long_period, 1}}) {
    const permute_plan plan = plan_permute(*axes, width);
    ASSERT_TRUE(plan.gather) << describe(plan);
    EXPECT_FALSE(plan.gather->program->single_block) << describe(plan);
    const std::int64_t bytes = plan.total_bytes;
    ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, *axes, width, bytes, rng)) << describe(plan);
  }
  const permute_plan large = plan_permute(space_depth_axes(false, true, true, 3, 4, {591, 591}, 1), 1);
  EXPECT_FALSE(large.streams) << describe(large);
  EXPECT_FALSE(large.gather) << describe(large);
  const permute_plan long_periods = plan_permute(space_depth_axes(false, true, true, 3, 1, {8, 8, 8}, 4), 4);
  EXPECT_FALSE(long_periods.gather) << describe(long_periods);
  const permute_plan many_runs = plan_permute(space_depth_axes(true, true, true, 4, 3, {37, 37}, 1), 1);
  EXPECT_FALSE(many_runs.gather) << describe(many_runs);
}

// Where the output streams, run copies of few runs a row still take a gather for 3-byte elements of
// up to 3 steps at any size, and for 6-byte ones of 96-byte periods short of far past the cache
// (short_pixels_gather_where_the_output_streams): space_to_depth NHWC DCR b3 C1 of bytes
// (12.6 MB) and channels-last K = 3 DCR b2 C3 of bytes (12.8 MB), each against the element loop
// (expect_gather_matches); planned only, NHWC b3 C1 of bytes at 67 MB gathers too, and neither
// NHWC DCR b2 C3 of bytes at 67 MB nor NHWC b3 C1 of 2-byte elements (288-byte periods, 12.7 MB).
TEST_F(PermuteGatherAvx2, RunCopiesOfShortPixelsGatherWhereTheOutputStreams) {
  std::mt19937_64 rng(151);
  const auto three_byte_pixels = space_depth_axes(false, true, true, 3, 1, {1183, 1183}, 1);
  const auto six_byte_pixels = space_depth_axes(false, true, true, 2, 3, {81, 81, 81}, 1);
  for (const auto* axes : {&three_byte_pixels, &six_byte_pixels}) {
    const permute_plan plan = plan_permute(*axes, 1);
    EXPECT_TRUE(plan.streams) << describe(plan);
    ASSERT_TRUE(plan.gather) << describe(plan);
    EXPECT_FALSE(plan.gather->program->single_block) << describe(plan);
    ASSERT_NO_FATAL_FAILURE(expect_gather_matches(plan, *axes, 1, plan.total_bytes, rng)) << describe(plan);
  }
  const permute_plan far_three_byte = plan_permute(space_depth_axes(false, true, true, 3, 1, {2731, 2731}, 1), 1);
  EXPECT_TRUE(far_three_byte.gather) << describe(far_three_byte);
  const permute_plan far_six_byte = plan_permute(space_depth_axes(false, true, true, 2, 3, {2366, 2366}, 1), 1);
  EXPECT_GE(far_six_byte.total_bytes, std::int64_t{64} << 20) << describe(far_six_byte);
  EXPECT_FALSE(far_six_byte.gather) << describe(far_six_byte);
  const permute_plan long_period = plan_permute(space_depth_axes(false, true, true, 3, 1, {840, 840}, 2), 2);
  EXPECT_TRUE(long_period.streams) << describe(long_period);
  EXPECT_FALSE(long_period.gather) << describe(long_period);
}

// AVX2 interleaves whose output rows continue one another keep ordinary stores where the rows are
// under 512 bytes and not whole lines, of elements of up to 4 bytes (avx2_streams_continuing_rows_badly):
// depth_to_space channels-first K = 3 CRD b2 C3 of bytes, 178-byte rows (16.9 MB), against the element
// loop on and off a line; its 8-byte elements (DCR C16, 400-byte rows) and the same bytes far past the
// cache (67 MB, 282-byte rows) still stream.
TEST(PermutePlan, Avx2ShortContinuingInterleaveRowsKeepOrdinaryStores) {
  if (detected_isa() < isa::avx2) GTEST_SKIP() << "needs AVX2, which this CPU lacks";
  set_max_isa(isa::avx2);
  const auto byte_rows = space_depth_axes(true, false, false, 2, 3, {89, 89, 89}, 1);
  const permute_plan bytes = plan_permute(byte_rows, 1);
  const permute_plan words = plan_permute(space_depth_axes(true, false, true, 2, 16, {25, 25, 25}, 8), 8);
  const permute_plan far = plan_permute(space_depth_axes(true, false, false, 2, 3, {141, 141, 141}, 1), 1);
  set_max_isa(isa::avx512vbmi);
  for (const permute_plan* plan : {&bytes, &words, &far}) {
    ASSERT_TRUE(plan->shuffle && plan->shuffle->interleave && plan->shuffle->segment_copy.copy == nullptr)
        << describe(*plan);
    EXPECT_TRUE(plan->streams) << describe(*plan);
    EXPECT_EQ(plan->shuffle->repeat.streaming, plan != &bytes) << describe(*plan);
  }
  std::mt19937_64 rng(163);
  expect_matches_naive_on_and_off_a_line(byte_rows, bytes, 1, rng);
}

// A Zen 5 walks gather calls whose rows hold 2-8 KiB in groups of rows, and those of 8-16 KiB where
// the strips stream (gather_tile::grouped_rows_bytes); other CPUs only under 2 KiB: d2s NHWC CRD b3
// C1 of bytes, W = 341 (3 rows of 1,023 bytes a call, 1 MiB) and W = 1365 (3 of 4,095, 16 MiB).
// The Zen 5 plans against the element loop on one and two threads and off a line.
TEST(PermutePlan, Zen5GroupsGatherRowsOfUpTo8KiBAnd16KiBStreamed) {
  if (detected_isa() < isa::avx512vbmi) GTEST_SKIP() << "needs AVX512-VBMI; this CPU has " << to_string(detected_isa());
  const auto cached = space_depth_axes(true, true, false, 3, 1, {341, 341}, 1);
  const auto streamed = space_depth_axes(true, true, false, 3, 1, {1365, 1365}, 1);
  for (const runtime::core_kind cores : every_core_kind) {
    const bool zen5 = cores == runtime::core_kind::amd_zen5;
    for (const auto* axes : {&cached, &streamed}) {
      const permute_plan plan = plan_for(cores, *axes, 1);
      if (zen5) {
        ASSERT_TRUE(plan.gather) << describe(plan);
      }
      const bool grouped = describe_one_thread(plan).find(" in row groups") != std::string::npos;
      EXPECT_EQ(grouped, zen5) << static_cast<int>(cores) << " " << describe(plan);
    }
  }
  const permute_plan cached_plan = plan_for(runtime::core_kind::amd_zen5, cached, 1);
  const permute_plan streamed_plan = plan_for(runtime::core_kind::amd_zen5, streamed, 1);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  EXPECT_FALSE(cached_plan.streams) << describe(cached_plan);
  EXPECT_TRUE(streamed_plan.streams) << describe(streamed_plan);
  std::mt19937_64 rng(107);
  expect_matches_naive_on_and_off_a_line(cached, cached_plan, 1, rng);
  expect_matches_naive_on_and_off_a_line(streamed, streamed_plan, 1, rng);
}

// On a Zen 5 a gather whose rows are strips of their own, over a period of 8 blocks or more,
// prefetches each next strip from 14 MiB on, not only from 64 MiB (gathers_prefetch_next_strip):
// s2d NHWC CRD b3 C3 of 4-byte elements, 108-byte output pixels in periods of 1,728 bytes,
// [1182, 1182, 3] -> [394, 394, 27] (16.8 MB). Not at 13.2 MB ([1050, 1050, 3]), not on other
// cores. The Zen 5 plan against the element loop on one and two threads, and off a line.
TEST(PermutePlan, Zen5GathersOfLongPeriodsPrefetchTheNextStripFrom14MiB) {
  if (detected_isa() < isa::avx512vbmi) GTEST_SKIP() << "needs AVX512-VBMI; this CPU has " << to_string(detected_isa());
  const auto prefetched = space_depth_axes(false, true, false, 3, 3, {394, 394}, 4);
  const auto smaller = space_depth_axes(false, true, false, 3, 3, {350, 350}, 4);
  for (const runtime::core_kind cores : every_core_kind) {
    const bool zen5 = cores == runtime::core_kind::amd_zen5;
    for (const auto* axes : {&prefetched, &smaller}) {
      const permute_plan plan = plan_for(cores, *axes, 4);
      if (!plan.gather) {
        EXPECT_FALSE(zen5) << describe(plan);
        continue;
      }
      EXPECT_TRUE(plan.streams) << describe(plan);
      EXPECT_EQ(plan.gather->prefetch_next_strip, zen5 && axes == &prefetched)
          << static_cast<int>(cores) << " " << describe(plan);
    }
  }
  const permute_plan plan = plan_for(runtime::core_kind::amd_zen5, prefetched, 4);
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  ASSERT_TRUE(plan.gather && plan.gather->program->period_dst_bytes >= 8 * plan.gather->block_bytes) << describe(plan);
  EXPECT_NE(describe(plan).find("prefetching the next strip"), std::string::npos) << describe(plan);
  std::mt19937_64 rng(139);
  expect_matches_naive_on_and_off_a_line(prefetched, plan, 4, rng);
}

// De-interleaves that move their runs one by one prefetch the next run's source as they go
// (deinterleaves_prefetch_next_run), at the AVX2 and AVX-512 levels: space_to_depth NCHW of 2, 4
// and 8 ways, of 1-, 2- and 4-byte elements, 1 channel or 3, rows on and off cache lines,
// 256-514 KiB. Not outputs under 256 KiB, interleaves (depth_to_space NCHW), nor staged or
// segmented shuffles. The prefetches change no byte: each plan matches the element loop on one and
// two threads and into an output off a line; the runs whose next one lies in the next channel or
// block row (the outer repeat), and the last run, whose next one lies past the source, are among
// them.
TEST(PermutePlan, DeinterleavesPrefetchTheNextRun) {
  if (detected_isa() < isa::avx2) GTEST_SKIP() << "the vector kernels need AVX2, which this CPU lacks";
  struct problem {
    std::int64_t block;
    std::int64_t channels;
    std::vector<std::int64_t> coarse;
    std::int64_t width;
  };
  const std::vector<problem> problems = {
      {2, 1, {256, 512}, 1}, {2, 3, {90, 181}, 2}, {4, 1, {64, 256}, 1}, {4, 3, {40, 67}, 4},
      {8, 1, {32, 64}, 4},   {8, 3, {40, 37}, 1},  {2, 1, {64, 128}, 1},  // the last of 32 KiB
  };
  std::mt19937_64 rng(151);
  for (const isa cap : {isa::avx2, isa::avx512, isa::avx512vbmi}) {
    if (cap > detected_isa()) continue;
    set_max_isa(cap);
    std::size_t prefetching = 0;
    for (const problem& p : problems) {
      for (const bool dcr : {true, false}) {
        const auto axes = space_depth_axes(false, false, dcr, p.block, p.channels, p.coarse, p.width);
        const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(p.width));
        if (cap == isa::avx2) {
          ASSERT_TRUE(plan.shuffle && !plan.shuffle->interleave) << describe(plan);
        } else if (!plan.shuffle) {
          continue;  // a gather
        }
        const bool prefetches = plan.shuffle->segment_copy.copy == nullptr && plan.shuffle->segmented == nullptr &&
                                plan.total_bytes >= (std::int64_t{256} << 10);
        EXPECT_EQ(plan.shuffle->repeat.prefetches_next_run, prefetches) << to_string(cap) << " " << describe(plan);
        EXPECT_EQ(describe(plan).find(" prefetching the next run") != std::string::npos, prefetches) << describe(plan);
        prefetching += prefetches ? 1 : 0;
        ASSERT_NO_FATAL_FAILURE(expect_matches_naive_on_one_and_two_threads(axes, plan, p.width, rng))
            << describe(plan);
        ASSERT_NO_FATAL_FAILURE(expect_matches_naive_off_a_line(axes, plan, p.width, rng)) << describe(plan);
        const permute_plan interleave =
            plan_permute(space_depth_axes(true, false, dcr, p.block, p.channels, p.coarse, p.width),
                         static_cast<std::size_t>(p.width));
        EXPECT_FALSE(interleave.shuffle && interleave.shuffle->repeat.prefetches_next_run) << describe(interleave);
      }
    }
    EXPECT_GE(prefetching, 6U) << to_string(cap);
  }
  set_max_isa(isa::avx512vbmi);
}

// Random SpaceToDepth / DepthToSpace problems of 11-40 MiB, where the plans stream their output,
// stage or sink it far past the cache: both layouts, K = 1-3, both modes, blocks 2-8, channel
// counts on and off vector widths, every element width; planned for a random kind of core (each
// has rules of its own) with the assembling kernels forced or not, at every ISA cap from AVX2 up,
// source on and off its lines, destination misaligned or not, one and two threads; against the
// element loop. A one-off run of 5,000 such problems of 4-80 MiB found nothing; these keep the
// paths that only outputs this large take under test.
TEST(PermuteRun, LargeSpaceDepthProblemsMatchOnEveryCoreKind) {
  if (detected_isa() < isa::avx2) GTEST_SKIP() << "the vector kernels need AVX2, which this CPU lacks";
#if defined(__SANITIZE_ADDRESS__)
  constexpr int problems = 6;  // the element loop over 40 MiB takes seconds under the sanitizers
#else
  constexpr int problems = 30;
#endif
  constexpr std::array<std::int64_t, 4> widths{1, 2, 4, 8};
  constexpr std::array<std::int64_t, 4> blocks{2, 3, 4, 8};
  constexpr std::array<std::int64_t, 8> channel_counts{1, 3, 4, 5, 7, 16, 32, 64};
  std::mt19937_64 rng(41);
  std::vector<std::byte> src;
  std::vector<std::byte> expected;
  std::vector<std::byte> actual;
  int streamed = 0;
  for (int problem = 0; problem < problems; ++problem) {
    const bool to_space = rng() % 2 == 0;
    const bool channels_last = rng() % 2 == 0;
    const bool dcr = rng() % 2 == 0;
    const int k = 1 + static_cast<int>(rng() % 3);
    const std::int64_t width = widths[rng() % widths.size()];
    const std::int64_t block = blocks[rng() % blocks.size()];
    const std::int64_t channels = channel_counts[rng() % channel_counts.size()];
    const double target = 11.0 * double(1 << 20) * std::pow(40.0 / 11.0, static_cast<double>(rng() % 1000) / 1000.0);
    const double coarse_extent =
        std::pow(target / static_cast<double>(channels * width) / std::pow(static_cast<double>(block), k), 1.0 / k);
    std::vector<std::int64_t> coarse(static_cast<std::size_t>(k));
    std::int64_t bytes = channels * width;
    for (auto& extent : coarse) {
      const double jitter = 0.9 + 0.2 * static_cast<double>(rng() % 1000) / 1000.0;
      extent = std::max<std::int64_t>(1, std::llround(coarse_extent * jitter));
      bytes *= extent * block;
    }
    const auto axes = space_depth_axes(to_space, channels_last, dcr, block, channels, coarse, width);
    const std::size_t source_offset = rng() % 2 == 0 ? 0 : 16;  // 16: the source off its lines
    const std::size_t misalign = rng() % 2;
    src.resize(static_cast<std::size_t>(bytes) + source_offset + sizeof(std::uint64_t));
    for (std::size_t i = 0; i + sizeof(std::uint64_t) <= src.size(); i += sizeof(std::uint64_t)) {
      const std::uint64_t bits = rng();
      std::memcpy(src.data() + i, &bits, sizeof bits);
    }
    expected.assign(static_cast<std::size_t>(bytes) + 64, std::byte{0x5A});
    permute_naive(axes, src.data() + source_offset, expected.data() + misalign, width);
    const auto cores = every_core_kind[rng() % every_core_kind.size()];
    runtime::plan_for_core_kind_for_testing(cores);
    const bool forced = rng() % 2 == 0;
    force_assembled_for_testing(forced);
    const std::string context = std::string(to_space ? "d2s" : "s2d") + (channels_last ? " last" : " first") +
                                " K=" + std::to_string(k) + (dcr ? " DCR" : " CRD") + " b=" + std::to_string(block) +
                                " C=" + std::to_string(channels) + " width=" + std::to_string(width) +
                                " O_1=" + std::to_string(coarse[0]) +
                                " cores=" + std::to_string(static_cast<int>(cores)) +
                                " forced=" + std::to_string(forced) + " problem " + std::to_string(problem);
    for (isa cap : {isa::avx2, isa::avx512, isa::avx512vbmi}) {
      if (cap > detected_isa()) continue;
      set_max_isa(cap);
      const permute_plan plan = plan_permute(axes, static_cast<std::size_t>(width));
      streamed += plan.streams ? 1 : 0;
      for (int threads : {1, 2}) {
        actual.assign(expected.size(), std::byte{0x5A});
        run_permute(plan, src.data() + source_offset, actual.data() + misalign, threads);
        ASSERT_TRUE(actual == expected) << describe(plan) << " " << context << " threads=" << threads;
      }
    }
    force_assembled_for_testing(false);
    set_max_isa(isa::avx512vbmi);
  }
  runtime::plan_for_core_kind_for_testing(runtime::core_kind::other);  // as PlansByTheCommonRules left it
  EXPECT_GT(streamed, problems / 2);
}

}  // namespace
}  // namespace regrid::kernels
