// Stream workers and eval's inline path (core/scheduler.h): a blocking eval on an idle stream
// runs on the calling thread, and the stream's order still holds against tasks enqueued from
// other threads meanwhile.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "core/scheduler.h"
#include "tessera/tessera.h"

namespace {

using namespace std::chrono_literals;
namespace mx = tessera;

// run_inline once the stream's worker has also left the epilogue of its last task (it may
// still be finishing it when synchronize returns); false if that takes over 5 s.
bool run_inline_when_idle(const mx::Stream& s, const std::function<void()>& body) {
  for (int i = 0; i < 5000; ++i) {
    if (mx::scheduler::run_inline(s, body)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST(Scheduler, RunInlineOnAnIdleStreamRunsOnTheCallingThread) {
  auto s = mx::new_stream(mx::Device::cpu);
  mx::synchronize(s);
  std::thread::id ran_on;
  EXPECT_TRUE(run_inline_when_idle(s, [&] { ran_on = std::this_thread::get_id(); }));
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(Scheduler, TasksEnqueuedDuringAnInlineRunWaitForIt) {
  auto s = mx::new_stream(mx::Device::cpu);
  mx::synchronize(s);
  std::atomic<bool> inside{false};
  std::atomic<int> seen_inside{-1};
  ASSERT_TRUE(run_inline_when_idle(s, [&] {
    inside = true;
    std::thread other([&] {
      mx::scheduler::enqueue(s, [&] { seen_inside = inside ? 1 : 0; });
    });
    other.join();
    std::this_thread::sleep_for(50ms);  // the worker would run the task now if it could
    inside = false;
  }));
  mx::synchronize(s);
  EXPECT_EQ(seen_inside.load(), 0);
}

TEST(Scheduler, RunInlineDeclinesWhileTheWorkerIsBusy) {
  auto s = mx::new_stream(mx::Device::cpu);
  std::atomic<bool> release{false}, started{false};
  mx::scheduler::enqueue(s, [&] {
    started = true;
    for (int i = 0; i < 5000 && !release; ++i) std::this_thread::sleep_for(1ms);
  });
  for (int i = 0; i < 5000 && !started; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(started);
  bool ran = false;
  EXPECT_FALSE(mx::scheduler::run_inline(s, [&] { ran = true; }));
  EXPECT_FALSE(ran);
  release = true;
  mx::synchronize(s);
  // Nested: a body running inline may evaluate on its own stream again.
  int depth = 0;
  EXPECT_TRUE(run_inline_when_idle(s, [&] {
    ++depth;
    EXPECT_TRUE(mx::scheduler::run_inline(s, [&] { ++depth; }));
  }));
  EXPECT_EQ(depth, 2);
}

TEST(Scheduler, EvalWhileAnotherThreadKeepsTheStreamBusyGivesTheRightValues) {
  // One thread evaluates long chains asynchronously on the default stream while this one
  // evaluates short graphs with eval (inline when the stream is idle, queued otherwise).
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    for (int k = 0; k < 200 && !stop; ++k) {
      mx::array a = mx::full({256}, 1.0f, mx::float32);
      for (int i = 0; i < 50; ++i) a = mx::add(a, mx::array(1.0f));
      mx::eval(a);
      EXPECT_EQ(a.data<float>()[255], 51.0f);
    }
  });
  for (int k = 0; k < 300; ++k) {
    mx::array b = mx::multiply(mx::full({8}, static_cast<float>(k), mx::float32), mx::array(2.0f));
    mx::eval(b);
    ASSERT_EQ(b.data<float>()[7], 2.0f * static_cast<float>(k));
  }
  stop = true;
  busy.join();
}

}  // namespace
