// The memory cache: freed large tensors are reused by the next tensor of the same size, within
// the limit, oldest evicted first, and never for small tensors.
#include <gtest/gtest.h>

#include <cstring>

#include "regrid/regrid.hpp"

namespace {

// Restores the process-wide limit whatever a test does with it.
class MemoryCache : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = regrid::memory_cache_limit();
    if (saved_ == 0)
      GTEST_SKIP() << "the memory cache is off in this build or environment (AddressSanitizer or "
                      "REGRID_MEMORY_CACHE_MIB=0); the release build runs these tests";
    regrid::release_cached_memory();
  }
  void TearDown() override {
    regrid::set_memory_cache_limit(saved_);
    regrid::release_cached_memory();
  }
  std::size_t saved_ = 0;
};

constexpr std::int64_t mib_floats = (1 << 20) / 4;

TEST_F(MemoryCache, ReusesAFreedBlockOfTheSameSize) {
  const std::byte* first = nullptr;
  {
    regrid::tensor big(regrid::uninitialized, regrid::dtype::float32, {8, mib_floats});
    first = big.data();
    EXPECT_EQ(regrid::cached_memory_bytes(), 0U);
  }
  EXPECT_EQ(regrid::cached_memory_bytes(), std::size_t{8} << 20);
  // Another dtype of the same byte size takes the same block back.
  regrid::tensor again(regrid::uninitialized, regrid::dtype::int32, {8, mib_floats});
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(regrid::cached_memory_bytes(), 0U);
}

TEST_F(MemoryCache, ZeroInitializedTensorsAreZeroOnReuse) {
  {
    regrid::tensor dirty(regrid::uninitialized, regrid::dtype::uint8, {4 << 20});
    std::memset(dirty.data(), 0x5A, dirty.size_bytes());
  }
  const regrid::tensor clean(regrid::dtype::uint8, {4 << 20});
  for (std::size_t i = 0; i < clean.size_bytes(); i += 4093) ASSERT_EQ(clean.data()[i], std::byte{0}) << i;
}

TEST_F(MemoryCache, OtherSizesAndSmallTensorsAreNotServedFromIt) {
  { regrid::tensor big(regrid::uninitialized, regrid::dtype::float32, {8, mib_floats}); }
  const regrid::tensor other(regrid::uninitialized, regrid::dtype::float32, {10, mib_floats});
  EXPECT_EQ(regrid::cached_memory_bytes(), std::size_t{8} << 20);
  { regrid::tensor small(regrid::uninitialized, regrid::dtype::float32, {1, mib_floats}); }
  EXPECT_EQ(regrid::cached_memory_bytes(), std::size_t{8} << 20);
}

TEST_F(MemoryCache, KeepsTheNewestBlocksWithinTheLimit) {
  regrid::set_memory_cache_limit(std::size_t{12} << 20);
  const std::byte* newest = nullptr;
  {
    regrid::tensor a(regrid::uninitialized, regrid::dtype::float32, {8, mib_floats});
    const regrid::tensor b(regrid::uninitialized, regrid::dtype::float32, {8, mib_floats});
    EXPECT_NE(a.data(), b.data());
    // b is destroyed first, then a: a is the newest block, and caching it evicts b.
    newest = a.data();
  }
  EXPECT_EQ(regrid::cached_memory_bytes(), std::size_t{8} << 20);
  const regrid::tensor reused(regrid::uninitialized, regrid::dtype::float32, {8, mib_floats});
  EXPECT_EQ(reused.data(), newest);
  { regrid::tensor too_big(regrid::uninitialized, regrid::dtype::float32, {16, mib_floats}); }
  EXPECT_EQ(regrid::cached_memory_bytes(), 0U);
}

TEST_F(MemoryCache, LoweringTheLimitFreesAndZeroTurnsItOff) {
  { regrid::tensor a(regrid::uninitialized, regrid::dtype::float32, {8, mib_floats}); }
  EXPECT_EQ(regrid::cached_memory_bytes(), std::size_t{8} << 20);
  regrid::set_memory_cache_limit(0);
  EXPECT_EQ(regrid::memory_cache_limit(), 0U);
  EXPECT_EQ(regrid::cached_memory_bytes(), 0U);
  { regrid::tensor b(regrid::uninitialized, regrid::dtype::float32, {8, mib_floats}); }
  EXPECT_EQ(regrid::cached_memory_bytes(), 0U);
}

}  // namespace
