// The intra-op thread pool: coverage of the range, exceptions, nesting, size; the block driver's
// contract; and results that are the same bits for every pool size.
#include <gtest/gtest.h>

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backend/cpu/elementwise.h"
#include "core/thread_pool.h"
#include "test_util.h"

using tessera::detail::num_threads;
using tessera::detail::parallel_for;

// TESSERA_NUM_THREADS when set (the suite also runs under 1 and 3), else the CPUs this process
// may run on.
TEST(ThreadPool, SizedToTheCoresByDefault) {
  const char* env = std::getenv("TESSERA_NUM_THREADS");
  int want = env && *env ? std::atoi(env) : 0;
  if (want <= 0) {
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    want = CPU_COUNT(&set);
  }
  EXPECT_EQ(num_threads(), want);
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
  // The chunk holding the last index throws: a worker's when there are several, the caller's
  // own with a pool of one.
  EXPECT_THROW(parallel_for(1 << 16, 1, [](size_t, size_t e) {
                 if (e == (1u << 16)) throw std::runtime_error("chunk failed");
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

// A share no pool thread has started is run by the caller: with every pool thread held by another
// call's shares, a parallel_for still finishes at once (it used to wait until one was free; on a
// machine with no spare core that wait was a pool thread getting its core back).
TEST(ThreadPool, TheCallerRunsSharesNoPoolThreadHasStarted) {
  const int threads = num_threads();
  if (threads < 2) GTEST_SKIP() << "a pool of one runs every call inline";
  std::atomic<int> holding{0};
  std::atomic<bool> release{false};
  std::thread holder([&] {
    parallel_for(static_cast<size_t>(threads), 1, [&](size_t b, size_t) {
      if (b == 0) return;
      ++holding;
      for (int i = 0; i < 20000 && !release; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  });
  for (int i = 0; i < 10000 && holding < threads - 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(holding.load(), threads - 1);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::atomic<int>> hits(64);
  parallel_for(64, 1, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) hits[i]++;
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  release = true;
  holder.join();
  for (size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i].load(), 1) << i;
  EXPECT_LT(seconds, 5.0);
}

// Every pool size calls the body once per block with the block's own bounds (callers keep one
// partial result per block: a single call over the whole range once left the others unset).
TEST(ThreadPool, ParallelBlocksCallsOncePerBlockWithItsBounds) {
  for (size_t n : {size_t{1}, size_t{99}, size_t{100}, size_t{101}, size_t{100000}}) {
    const size_t block = 100, nblocks = (n + block - 1) / block;
    std::vector<std::atomic<int>> calls(nblocks);
    std::atomic<bool> bounds_ok{true};
    tessera::cpu::parallel_blocks(n, block, [&](size_t lo, size_t hi) {
      if (lo % block != 0 || hi != std::min(n, lo + block)) bounds_ok = false;
      calls[lo / block]++;
    });
    EXPECT_TRUE(bounds_ok.load()) << n;
    for (size_t k = 0; k < nblocks; ++k) ASSERT_EQ(calls[k].load(), 1) << "n=" << n << " k=" << k;
  }
}

namespace {

std::string run_digest(const std::string& env) {
  const std::string cmd = env + " " TESSERA_BIN_DIR "/op_digest 2>&1";
  auto r = tessera::test_util::run_command(cmd);
  EXPECT_EQ(r.code, 0) << cmd << "\n" << r.out;
  return r.out;
}

}  // namespace

// Ranks of one job may have different pool sizes (hosts with different CPU counts); replicated
// computations must not drift apart, so no result may depend on the number of threads (ours, or
// the threads OpenBLAS would start on a host with more CPUs).
TEST(PoolSizes, EveryOpGivesTheSameBitsWithOneTwoAndThreeThreads) {
  const std::string one = run_digest("TESSERA_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1");
  ASSERT_GT(one.size(), 100u) << one;
  EXPECT_EQ(run_digest("TESSERA_NUM_THREADS=2"), one);
  EXPECT_EQ(run_digest("TESSERA_NUM_THREADS=3 OPENBLAS_NUM_THREADS=3"), one);
}
