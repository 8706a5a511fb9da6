// Stream workers and eval's inline path (core/scheduler.h): a blocking eval on an idle stream
// runs on the calling thread, and the stream's order still holds against tasks enqueued from
// other threads meanwhile.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "core/scheduler.h"
#include "tessera/scheduler.h"
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

// The number of stream worker threads of this process (named so in /proc/self/task/*/comm).
int stream_threads() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::string name;
    std::getline(std::ifstream(e.path() / "comm"), name);
    n += name == "tessera-stream";
  }
  return n;
}

// Runs f on a new thread and joins it; what f throws comes back as its message.
std::string on_thread(const std::function<void()>& f) {
  std::string error;
  std::thread([&] {
    try {
      f();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }).join();
  return error;
}

// As MLX 0.32: each thread has its own default stream, set_default_stream sets the calling
// thread's, and the stream a thread made (new_stream, or its default) is evaluated on by that
// thread only: from another one, eval is a runtime_error naming the stream.
// The public side (tessera/scheduler.h, MLX's scheduler::enqueue): a program's own tasks run on
// a stream's thread in order, and a task waiting on another stream's does not block that stream.
TEST(Scheduler, ProgramTasksRunInStreamOrderAndAcrossStreams) {
  auto s1 = mx::new_stream(mx::Device::cpu);
  auto s2 = mx::new_stream(mx::Device::cpu);
  int x = 1;
  std::vector<int> order;
  auto first = std::make_shared<std::promise<void>>();
  auto first_done = first->get_future().share();
  auto done = std::make_shared<std::promise<void>>();
  auto all_done = done->get_future();
  // Enqueued first, on s2, and waiting for s1's task: s1 still runs its task.
  mx::scheduler::enqueue(s2, [&x, &order, first_done, done] {
    if (first_done.wait_for(10s) != std::future_status::ready) return;
    x *= 5;
    order.push_back(2);
    done->set_value();
  });
  mx::scheduler::enqueue(s1, [&x, &order, first] {
    x += 1;
    order.push_back(1);
    first->set_value();
  });
  ASSERT_EQ(all_done.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(x, 10);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  // A task counts as active until its worker has left it, which may be just after its last
  // statement: wait_for_one returns once one more has finished.
  for (int i = 0; i < 10 && mx::scheduler::n_active_tasks() > 0; ++i) {
    mx::scheduler::wait_for_one();
  }
  EXPECT_EQ(mx::scheduler::n_active_tasks(), 0);
  EXPECT_THROW(mx::scheduler::enqueue(mx::Stream(1 << 20, mx::Device::cpu), [] {}),
               std::invalid_argument);
}

TEST(StreamThreads, DefaultStreamsAndNewStreamsBelongToTheirThread) {
  const mx::Stream main_default = mx::default_stream(mx::Device::cpu);
  const mx::Stream mine = mx::new_stream(mx::Device::cpu);
  std::optional<mx::Stream> theirs;
  EXPECT_EQ(on_thread([&] {
              theirs = mx::default_stream(mx::Device::cpu);
              EXPECT_EQ(mx::default_stream(mx::Device::cpu), *theirs);  // the same from then on
              mx::set_default_stream(mx::new_stream(mx::Device::cpu));
              mx::array a = mx::arange(4, mx::float32) * 2.0f;
              mx::eval(a);
              EXPECT_EQ(a.data<float>()[3], 6.0f);
            }),
            "");
  EXPECT_NE(*theirs, main_default);
  EXPECT_NE(*theirs, mine);
  EXPECT_EQ(mx::default_stream(mx::Device::cpu), main_default);  // the thread's set stayed there
  // A graph on this thread's stream, evaluated on another thread.
  mx::array on_mine = mx::add(mx::arange(10, mx::float32, mine), mx::array(1.0f), mine);
  const std::string error = on_thread([&] { mx::eval(on_mine); });
  EXPECT_NE(error.find("There is no Stream(cpu, " + std::to_string(mine.index) +
                       ") in current thread: it belongs to another thread"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("new_thread_local_stream"), std::string::npos) << error;
  mx::eval(on_mine);  // still fine here, and the failed attempt left nothing behind
  EXPECT_EQ(on_mine.data<float>()[9], 10.0f);
  mx::array lazy = mx::sum(mx::full({3}, 2.0f, mx::float32) * 3.0f);  // this thread's default
  EXPECT_NE(on_thread([&] { (void)lazy.item<float>(); }).find("belongs to another thread"),
            std::string::npos);
  EXPECT_EQ(lazy.item<float>(), 18.0f);
  // Computed arrays have no stream left: any thread reads and uses them.
  EXPECT_EQ(on_thread([&] {
              mx::array b = lazy + 1.0f;
              EXPECT_EQ(b.item<float>(), 19.0f);
            }),
            "");
}

TEST(StreamThreads, ThreadUnsafeStreamsWorkOnEveryThread) {
  const mx::Stream shared = mx::new_thread_unsafe_stream(mx::Device::cpu);
  mx::array a = mx::multiply(mx::arange(5, mx::float32, shared), mx::array(3.0f), shared);
  EXPECT_EQ(on_thread([&] {
              mx::eval(a);
              mx::StreamContext ctx(shared);
              mx::array b = mx::sum(a);
              EXPECT_EQ(b.item<float>(), 30.0f);
            }),
            "");
  EXPECT_EQ(a.data<float>()[4], 12.0f);
}

// One ThreadLocalStream handle: each thread gets its own stream behind it, the same one each
// time, and the work of several threads runs at once on separate streams.
TEST(StreamThreads, AThreadLocalStreamIsOneStreamPerThread) {
  const mx::ThreadLocalStream tls = mx::new_thread_local_stream(mx::Device::cpu);
  EXPECT_NE(mx::new_thread_local_stream(mx::Device::cpu), tls);
  const mx::Stream here = mx::stream_from_thread_local_stream(tls);
  EXPECT_EQ(mx::stream_from_thread_local_stream(tls), here);
  EXPECT_EQ(mx::to_stream(tls), here);
  std::vector<mx::Stream> seen(4, here);
  std::vector<float> sums(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      mx::StreamContext ctx(tls);
      seen[t] = mx::default_stream(mx::Device::cpu);
      mx::array x = mx::full({100}, static_cast<float>(t + 1), mx::float32);
      sums[t] = mx::sum(x * x).item<float>();
      mx::synchronize(tls);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    EXPECT_NE(seen[t], here);
    for (int u = 0; u < t; ++u) EXPECT_NE(seen[t], seen[u]);
    EXPECT_EQ(sums[t], 100.0f * (t + 1) * (t + 1));
  }
}

// A thread's streams end with it: the work it left queued still runs, later use of its
// streams is an error that says so, and their worker threads are gone (a server that starts a
// thread per request does not pile up threads).
TEST(StreamThreads, AThreadsStreamsEndWithItAndTheirWorkersExit) {
  mx::eval(mx::array(1.0f) + 1.0f);
  // Settled: this thread's worker has named itself, and the workers of threads that ended in
  // earlier tests of this process have exited.
  int before = -1;
  for (int i = 0, last = -2; i < 100 && !(before == last && before >= 1); ++i) {
    last = before;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    before = stream_threads();
  }
  ASSERT_GE(before, 1);
  std::optional<mx::Stream> made;
  mx::array left = mx::array(0.0f);
  std::thread([&] {
    made = mx::new_stream(mx::Device::cpu);
    mx::array x = mx::full({1000}, 1.0f, mx::float32, *made);
    for (int i = 0; i < 20; ++i) x = x + 1.0f;
    left = mx::sum(x);
    mx::async_eval(left);
  }).join();
  left.wait();
  EXPECT_EQ(left.item<float>(), 21000.0f);
  mx::array late = mx::arange(3, mx::float32, *made) + 1.0f;
  try {
    mx::eval(late);
    ADD_FAILURE() << "evaluating on an ended thread's stream did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("the thread that made it has ended"), std::string::npos)
        << e.what();
  }
  int during = 0;
  std::thread([&] {
    mx::eval(mx::array(1.0f) + 1.0f);
    for (int i = 0; i < 500 && during <= before; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      during = stream_threads();
    }
  }).join();
  EXPECT_GT(during, before);  // a live thread's stream has a worker
  for (int t = 0; t < 20; ++t) {
    std::thread([] {
      EXPECT_EQ(mx::sum(mx::arange(3, mx::float32) + 1.0f).item<float>(), 6.0f);
    }).join();
  }
  int now = stream_threads();
  for (int i = 0; i < 500 && now > before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    now = stream_threads();
  }
  EXPECT_LE(now, before);
}

}  // namespace
