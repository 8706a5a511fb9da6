// The caching allocator and the memory API: counters, the cache, limits and alignment.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "tessera/tessera.h"

using namespace tessera;

namespace {
// Every test starts from an empty cache and default limits.
class Memory : public ::testing::Test {
 protected:
  void SetUp() override {
    synchronize();
    clear_cache();
    old_limit_ = get_memory_limit();
  }
  void TearDown() override {
    set_memory_limit(old_limit_);
    set_cache_limit(old_limit_);
  }
  size_t old_limit_ = 0;
};
}  // namespace

TEST_F(Memory, DefaultLimitIsEightyPercentOfRam) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  double ram = static_cast<double>(pages) * static_cast<double>(page);
  EXPECT_NEAR(static_cast<double>(get_memory_limit()), 0.8 * ram, 0.001 * ram);
}

TEST_F(Memory, ActivePeakAndCacheFollowAllocations) {
  size_t base = get_active_memory();
  reset_peak_memory();
  {
    auto buf = allocator::malloc(10 << 20);  // 10 MiB (rounded to 2 MiB blocks: 10 MiB)
    EXPECT_EQ(get_active_memory() - base, size_t{10} << 20);
    EXPECT_GE(get_peak_memory(), base + (size_t{10} << 20));
    allocator::free(buf);
  }
  EXPECT_EQ(get_active_memory(), base);
  EXPECT_EQ(get_cache_memory(), size_t{10} << 20);  // kept for reuse
  auto again = allocator::malloc(10 << 20);
  EXPECT_EQ(get_cache_memory(), 0u);  // the cached block was reused
  allocator::free(again);
  clear_cache();
  EXPECT_EQ(get_cache_memory(), 0u);
  reset_peak_memory();
  EXPECT_EQ(get_peak_memory(), get_active_memory());
}

TEST_F(Memory, TheAllocatorInterfaceGivesEachBufferItsBlock) {
  allocator::Allocator& cpu = allocator::allocator();
  auto large = cpu.malloc(3 * 4096);  // three pages
  EXPECT_EQ(cpu.size(large), size_t{3} * 4096);
  void* p = large.raw_ptr();
  cpu.free(large);
  // A smaller request is served from the cached block and owns all of it, as MLX's does.
  auto small = allocator::malloc(2 * 4096 + 100);
  EXPECT_EQ(small.raw_ptr(), p);
  EXPECT_EQ(small.size(), size_t{2} * 4096 + 100);
  EXPECT_EQ(cpu.size(small), size_t{3} * 4096);
  allocator::free(small);
  // Memory the allocator does not own is its asked-for size.
  char outside[40];
  EXPECT_EQ(cpu.size(allocator::Buffer(outside, sizeof(outside))), sizeof(outside));
}

namespace {
// A device's allocator of its own: blocks from new[], rounded to 256 bytes, each one counted.
class CountingAllocator final : public allocator::Allocator {
 public:
  allocator::Buffer malloc(size_t size) override {
    const size_t block = (size + 255) / 256 * 256 + 256 * (size == 0);
    ++live_;
    return owned(new char[block], size, block);
  }
  void free(allocator::Buffer b) override {
    if (block_of(b) == 0) return;
    --live_;
    delete[] static_cast<char*>(b.raw_ptr());
  }
  size_t size(allocator::Buffer b) const override { return block_of(b) ? block_of(b) : b.size(); }
  int live_ = 0;
};
}  // namespace

TEST_F(Memory, AnAllocatorOfOneselfMakesAndTakesBackItsBuffers) {
  CountingAllocator a;
  allocator::Allocator& any = a;
  auto b = any.malloc(1000);
  auto z = any.malloc(0);
  EXPECT_EQ(any.size(b), 1024u);
  EXPECT_EQ(b.size(), 1000u);
  EXPECT_EQ(any.size(z), 256u);
  EXPECT_NE(z.raw_ptr(), nullptr);
  EXPECT_EQ(a.live_, 2);
  any.free(allocator::Buffer(b.raw_ptr(), 1000));  // not its own buffer: ignored
  EXPECT_EQ(a.live_, 2);
  any.free(b);
  any.free(z);
  EXPECT_EQ(a.live_, 0);
}

TEST_F(Memory, SmallBlocksComeBackFromTheirOwnSizeClass) {
  // Below a page, blocks are 64-byte classes reused only by a request of the same class.
  auto a = allocator::malloc(100);  // class 128
  auto b = allocator::malloc(200);  // class 256
  void* pa = a.raw_ptr();
  void* pb = b.raw_ptr();
  allocator::free(a);
  allocator::free(b);
  EXPECT_EQ(get_cache_memory(), 128u + 256u);
  auto c = allocator::malloc(250);  // class 256: b's block
  EXPECT_EQ(c.raw_ptr(), pb);
  EXPECT_EQ(c.size(), 250u);
  auto d = allocator::malloc(65);  // class 128: a's block
  EXPECT_EQ(d.raw_ptr(), pa);
  EXPECT_EQ(get_cache_memory(), 0u);
  auto e = allocator::malloc(300);  // class 320: nothing cached, a new block
  EXPECT_NE(e.raw_ptr(), pa);
  EXPECT_NE(e.raw_ptr(), pb);
  size_t active = get_active_memory();
  for (auto x : {c, d, e}) allocator::free(x);
  EXPECT_EQ(get_active_memory(), active - 128 - 256 - 320);
  clear_cache();
  EXPECT_EQ(get_cache_memory(), 0u);
}

TEST_F(Memory, FreeIgnoresMemoryTheAllocatorDoesNotOwn) {
  float user[4] = {1, 2, 3, 4};
  size_t active = get_active_memory(), cache = get_cache_memory();
  allocator::free(allocator::Buffer(user, sizeof(user)));
  EXPECT_EQ(get_active_memory(), active);
  EXPECT_EQ(get_cache_memory(), cache);
  EXPECT_EQ(user[3], 4.0f);
}

TEST_F(Memory, BuffersArePageAlignedAndHugeBlocksTwoMiBAligned) {
  auto small = allocator::malloc(100);
  auto page = allocator::malloc(5000);
  auto huge = allocator::malloc(8 << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.raw_ptr()) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(page.raw_ptr()) % 4096, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(huge.raw_ptr()) % (2 << 20), 0u);
  auto zero1 = allocator::malloc(0), zero2 = allocator::malloc(0);
  EXPECT_NE(zero1.raw_ptr(), nullptr);
  EXPECT_NE(zero1.raw_ptr(), zero2.raw_ptr());
  for (auto b : {small, page, huge, zero1, zero2}) allocator::free(b);
}

TEST_F(Memory, LimitTrimsCacheThenThrowsNamingRequestAndLimit) {
  auto a = allocator::malloc(8 << 20);
  allocator::free(a);  // 8 MiB now cached
  size_t active = get_active_memory();
  set_memory_limit(active + (12 << 20));
  // 6 MiB fits only once the 8 MiB cached block is released (no reuse: too big for 6 MiB).
  auto b = allocator::malloc(6 << 20);
  EXPECT_EQ(get_cache_memory(), 0u);
  try {
    allocator::malloc(64 << 20);
    ADD_FAILURE() << "expected the memory limit to be enforced";
  } catch (const std::runtime_error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("64 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("memory limit"), std::string::npos) << m;
    EXPECT_NE(m.find("set_memory_limit"), std::string::npos) << m;
  }
  allocator::free(b);
}

TEST_F(Memory, CacheLimitBoundsTheCache) {
  set_cache_limit(4 << 20);
  auto a = allocator::malloc(3 << 20), b = allocator::malloc(3 << 20);
  allocator::free(a);
  allocator::free(b);
  EXPECT_LE(get_cache_memory(), size_t{4} << 20);
  set_cache_limit(0);
  EXPECT_EQ(get_cache_memory(), 0u);
}

TEST_F(Memory, SettersReturnPreviousValuesAndWiredLimitIsANoOp) {
  size_t prev = set_memory_limit(123456789);
  EXPECT_EQ(set_memory_limit(prev), 123456789u);
  EXPECT_EQ(set_wired_limit(1 << 30), 0u);
}

TEST_F(Memory, EvaluatedGraphIntermediatesAreFreed) {
  size_t base = get_active_memory();
  {
    auto x = zeros({1 << 20}, float32);  // 4 MiB
    for (int i = 0; i < 10; ++i) x = astype(astype(x, float64), float32);
    eval(x);
    synchronize();  // the worker has released the finished tasks
    // Only x (4 MiB) stays active; the 20 intermediates went back to the cache.
    EXPECT_EQ(get_active_memory() - base, size_t{4} << 20);
  }
  EXPECT_EQ(get_active_memory(), base);
}

TEST_F(Memory, ClearCacheHandsLargeBlocksBackLazilyAndReusesTheirAddresses) {
  // Large blocks leave the cache (its counter is 0) with MADV_FREE: the system may take their
  // pages, but the mapping stays (msync fails on an unmapped range), and a later request of the
  // size reuses it instead of faulting in new pages.
  auto a = allocator::malloc(8 << 20);
  auto* pa = static_cast<char*>(a.raw_ptr());
  for (size_t i = 0; i < (size_t{8} << 20); i += 4096) pa[i] = 1;
  allocator::free(a);
  clear_cache();
  EXPECT_EQ(get_cache_memory(), 0u);
  EXPECT_EQ(msync(pa, 4096, MS_ASYNC), 0);
  const size_t active = get_active_memory();
  auto b = allocator::malloc(8 << 20);
  EXPECT_EQ(b.raw_ptr(), pa);
  EXPECT_EQ(get_active_memory(), active + (size_t{8} << 20));
  auto* pb = static_cast<char*>(b.raw_ptr());
  for (size_t i = 0; i < (size_t{8} << 20); i += 4096) pb[i] = 2;  // writable, whatever it held
  EXPECT_EQ(pb[4096], 2);
  allocator::free(b);
  clear_cache();
  // The memory limit holds for a reused block too.
  const size_t old = set_memory_limit(get_active_memory() + (size_t{4} << 20));
  EXPECT_THROW(allocator::malloc(8 << 20), std::runtime_error);
  set_memory_limit(old);
  // A request no lazy block fits maps new memory, unmapping lazy blocks of at least its size.
  auto c = allocator::malloc(32 << 20);
  EXPECT_NE(c.raw_ptr(), nullptr);
  auto* pc = static_cast<char*>(c.raw_ptr());
  const bool in_c = pa >= pc && pa < pc + (size_t{32} << 20);  // the system may map it again
  EXPECT_TRUE(in_c || msync(pa, 4096, MS_ASYNC) == -1);
  allocator::free(c);
}
