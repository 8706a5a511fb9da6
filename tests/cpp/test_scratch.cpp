// cpu::Scratch: per-thread blocks for a kernel's temporaries, taken and given back in stack
// order and kept between calls.
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

#include "backend/cpu/scratch.h"

using tessera::cpu::Scratch;

namespace {

bool aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

}  // namespace

TEST(Scratch, NestedBlocksAreDistinctAlignedAndKeepTheirValues) {
  Scratch<float> outer(100);
  for (int i = 0; i < 100; ++i) outer[i] = static_cast<float>(i);
  {
    Scratch<double> inner(1000);
    Scratch<uint8_t> innermost(3);
    EXPECT_TRUE(aligned64(outer.data()));
    EXPECT_TRUE(aligned64(inner.data()));
    EXPECT_TRUE(aligned64(innermost.data()));
    const auto* o0 = reinterpret_cast<const char*>(outer.data());
    const auto* i0 = reinterpret_cast<const char*>(inner.data());
    EXPECT_TRUE(i0 >= o0 + 100 * sizeof(float) || i0 + 1000 * sizeof(double) <= o0);
    for (int i = 0; i < 1000; ++i) inner[i] = -1.0;
    for (int i = 0; i < 3; ++i) innermost[i] = 7;
    EXPECT_EQ(inner[999], -1.0);
  }
  for (int i = 0; i < 100; ++i) ASSERT_EQ(outer[i], static_cast<float>(i));
}

TEST(Scratch, ABlockIsKeptBetweenCallsAndGrowsWhenAskedForMore) {
  const void* first;
  {
    Scratch<float> a(256);
    first = a.data();
  }
  {
    Scratch<float> again(200);  // fits the kept block
    EXPECT_EQ(again.data(), first);
  }
  Scratch<float> bigger(100000);  // needs a new one
  for (int i = 0; i < 100000; ++i) bigger[i] = 1.0f;
  EXPECT_EQ(bigger[99999], 1.0f);
}

TEST(Scratch, EachThreadHasItsOwnBlocks) {
  Scratch<int> mine(64);
  const void* theirs = nullptr;
  std::thread t([&] {
    Scratch<int> s(64);
    theirs = s.data();
  });
  t.join();
  EXPECT_NE(theirs, static_cast<const void*>(mine.data()));
}
