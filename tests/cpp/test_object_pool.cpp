// detail::FreeList: per-thread lists of the engine's small objects, and the shared list that
// blocks freed by a thread that does not allocate their size go to (a stream's worker releasing
// the graph another thread built).
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/object_pool.h"

namespace {

// Sizes no engine object has, so other code's blocks do not mix in.
using Pool = tessera::detail::FreeList<1234>;
using Busy = tessera::detail::FreeList<1240>;
using Brief = tessera::detail::FreeList<1248>;

}  // namespace

TEST(FreeList, BlocksFreedOnAThreadThatNeverAllocatesComeBackToTheAllocatingThread) {
  std::thread maker([] {  // its own thread, so its list drains when it ends
    std::vector<void*> first(100);
    for (auto& p : first) p = Pool::take();
    std::thread releaser([&] {
      for (void* p : first) Pool::give(p);  // this thread never takes: the shared list
    });
    releaser.join();
    std::vector<void*> again(100);
    for (auto& p : again) p = Pool::take();
    EXPECT_EQ(std::set<void*>(first.begin(), first.end()),
              std::set<void*>(again.begin(), again.end()));
    for (void* p : again) Pool::give(p);  // this thread's own list now
    EXPECT_EQ(Pool::take(), again.back());  // last in, first out
    Pool::give(again.back());
  });
  maker.join();
}

TEST(FreeList, AMakerAndAReleaserAtOnceNeverShareABlock) {
  // One thread allocates batches of 500 blocks (a graph) while another releases the previous
  // ones, 200 times, as mlx-lm's thread and the stream's worker do. Each block carries the round
  // it was handed out in; the releaser checks it before giving the block back, so a block handed
  // out again while still held would show a later round.
  constexpr int kBlocks = 500, kRounds = 200;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<int, std::vector<void*>>> handed;
  bool done = false;
  int wrong = 0;
  size_t distinct = 0;
  auto mark = [](void* p) { return static_cast<int*>(p) + 4; };  // past the list's link
  std::thread releaser([&] {
    for (;;) {
      std::pair<int, std::vector<void*>> batch;
      {
        std::unique_lock<std::mutex> l(mu);
        cv.wait(l, [&] { return done || !handed.empty(); });
        if (handed.empty()) return;
        batch = std::move(handed.front());
        handed.pop_front();
      }
      for (void* p : batch.second) {
        if (*mark(p) != batch.first) ++wrong;
        Busy::give(p);
      }
      cv.notify_all();  // the maker waits for the backlog to shrink
    }
  });
  std::thread maker([&] {
    std::set<void*> seen;
    for (int r = 0; r < kRounds; ++r) {
      std::vector<void*> batch(kBlocks);
      for (auto& p : batch) {
        p = Busy::take();
        *mark(p) = r;
        seen.insert(p);
      }
      std::unique_lock<std::mutex> l(mu);
      handed.emplace_back(r, std::move(batch));
      cv.notify_all();
      cv.wait(l, [&] { return handed.size() <= 1; });  // the releaser gets through one batch
    }
    distinct = seen.size();
    {
      std::lock_guard<std::mutex> l(mu);
      done = true;
    }
    cv.notify_all();
  });
  maker.join();
  releaser.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_LE(distinct, static_cast<size_t>(kBlocks) * 8);  // reused, not 100,000 new blocks
  // What the releaser gave after the maker's last batch is on the shared list: take it here
  // and free it (with more takes than blocks, the rest come from operator new).
  std::vector<void*> left;
  for (int i = 0; i < kBlocks * 8; ++i) left.push_back(Busy::take());
  for (void* p : left) ::operator delete(p);
}

TEST(FreeList, AThreadThatTookTheSharedListFreesWhatItLeftWhenItEnds) {
  // A thread that took the shared list whole and ends with most of it unused frees the rest
  // (make test-asan's leak check fails otherwise).
  std::vector<void*> blocks(10);
  for (auto& p : blocks) p = ::operator new(1248);
  std::thread giver([&] {
    for (void* p : blocks) Brief::give(p);  // never takes: all ten to the shared list
  });
  giver.join();
  void* got = nullptr;
  std::thread taker([&] {
    got = Brief::take();  // takes the ten, uses one
    Brief::give(got);
  });
  taker.join();
  EXPECT_NE(std::find(blocks.begin(), blocks.end(), got), blocks.end());
}
