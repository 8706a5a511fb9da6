// The intra-op thread pool: coverage of the range, exceptions, nesting, size.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

using tessera::detail::num_threads;
using tessera::detail::parallel_for;

TEST(ThreadPool, SizedToTheCoresByDefault) {
  EXPECT_EQ(num_threads(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

TEST(ThreadPool, EveryIndexVisitedExactlyOnce) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{1} << 20}) {
    std::vector<std::atomic<int>> hits(n);
    parallel_for(n, 64, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) hits[i]++;
    });
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPool, ChunkExceptionReachesTheCaller) {
  EXPECT_THROW(parallel_for(1 << 16, 1, [](size_t b, size_t) {
                 if (b > 0) throw std::runtime_error("chunk failed");
               }),
               std::runtime_error);
  // The pool still works afterwards.
  std::atomic<size_t> sum{0};
  parallel_for(100, 1, [&](size_t b, size_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 100u);
}

TEST(ThreadPool, NestedCallsRunInline) {
  std::atomic<size_t> total{0};
  parallel_for(8, 1, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      parallel_for(100, 1, [&](size_t bb, size_t ee) { total += ee - bb; });
    }
  });
  EXPECT_EQ(total.load(), 800u);
}
