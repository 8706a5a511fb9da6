// Persistent worker threads that run the extra lanes of a striped ring operation (lane 0 runs
// on the caller). Workers live as long as the group, so an operation pays a wake-up, not a
// thread start.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::distributed::detail {

class LanePool {
 public:
  explicit LanePool(int workers) : slots_(static_cast<size_t>(workers)) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this, i] { loop(i); });
  }
  ~LanePool() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  LanePool(const LanePool&) = delete;
  LanePool& operator=(const LanePool&) = delete;

  int workers() const { return static_cast<int>(threads_.size()); }

  // Runs jobs[0] here and jobs[1..] on workers; returns every job's exception (null if none).
  std::vector<std::exception_ptr> run(std::vector<std::function<void()>>& jobs) {
    std::vector<std::exception_ptr> errs(jobs.size());
    size_t extra = jobs.size() - 1;
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (size_t i = 0; i < extra; ++i) {
        slots_[i].job = &jobs[i + 1];
        slots_[i].err = &errs[i + 1];
        slots_[i].pending = true;
      }
      outstanding_ = extra;
    }
    cv_.notify_all();
    try {
      jobs[0]();
    } catch (...) {
      errs[0] = std::current_exception();
    }
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return outstanding_ == 0; });
    return errs;
  }

 private:
  struct Slot {
    std::function<void()>* job = nullptr;
    std::exception_ptr* err = nullptr;
    bool pending = false;
  };
  void loop(int i) {
    std::unique_lock<std::mutex> lk(mu_);
    while (true) {
      cv_.wait(lk, [&] { return stop_ || slots_[i].pending; });
      if (stop_) return;
      Slot s = slots_[i];
      slots_[i].pending = false;
      lk.unlock();
      try {
        (*s.job)();
      } catch (...) {
        *s.err = std::current_exception();
      }
      lk.lock();
      if (--outstanding_ == 0) done_cv_.notify_all();
    }
  }

  std::mutex mu_;  // guards slots_, outstanding_, stop_
  std::condition_variable cv_, done_cv_;
  std::vector<Slot> slots_;
  size_t outstanding_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tessera::distributed::detail
