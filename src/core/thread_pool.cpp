// Fixed pool of worker threads for intra-op parallelism (see thread_pool.h).
#include "core/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "core/fork.h"
#include "core/trace.h"
#include "tessera/config.h"

namespace tessera::detail {

namespace {

thread_local bool tl_in_pool_chunk = false;

// How long an idle worker, and a caller waiting for the other chunks, poll before sleeping. A
// graph's ops come back to back, each a few microseconds apart: a worker that slept after each
// chunk made every parallel op pay a wake-up (measured: a 256x512 multiply took 37 us on 2
// threads against 14 us on 1; with the poll, 7 us). Bounded, so an idle process sleeps. After the
// first 256 polls each one yields the core: on a machine with no spare core the poller would
// otherwise take the core of the thread it waits for, or of the Python thread building the next
// graph (mlx-lm's decode on 2 cores: 27 -> 22 ms per token, a lone parallel op unchanged).
constexpr auto kSpinFor = std::chrono::microseconds(50);
constexpr int kPollsBeforeYield = 256;

inline void cpu_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `ready()` for up to kSpinFor; whether it became true.
template <typename Ready>
bool spin_until(Ready ready) {
  const auto end = std::chrono::steady_clock::now() + kSpinFor;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if (i >= kPollsBeforeYield) sched_yield();
    else cpu_pause();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() >= end) return ready();
  }
}

class ThreadPool {
 public:
  explicit ThreadPool(int n) : n_(std::max(1, n)) {
    for (int i = 0; i < n_ - 1; ++i) {
      workers_.emplace_back([this] {
        // Named for `top -H` and gdb (a new thread would inherit its starter's name).
        pthread_setname_np(pthread_self(), "tessera-pool");
        run();
      });
    }
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return n_; }
  void submit(std::function<void()> f) {
    bool wake;
    {
      std::lock_guard<std::mutex> l(mu_);
      q_.push_back(std::move(f));
      queued_.store(q_.size(), std::memory_order_release);
      wake = sleepers_ > 0;  // a polling worker sees queued_ without being woken
    }
    if (wake) cv_.notify_one();
  }

 private:
  void run() {
    tl_in_pool_chunk = true;
    trace::set_thread_name("pool");
    for (;;) {
      spin_until([this] { return queued_.load(std::memory_order_acquire) != 0; });
      std::function<void()> f;
      {
        std::unique_lock<std::mutex> l(mu_);
        ++sleepers_;
        cv_.wait(l, [this] { return stop_ || !q_.empty(); });
        --sleepers_;
        if (stop_ && q_.empty()) return;
        f = std::move(q_.front());
        q_.pop_front();
        queued_.store(q_.size(), std::memory_order_release);
      }
      f();
    }
  }
  int n_;
  std::mutex mu_;  // guards q_, sleepers_ and stop_
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  std::atomic<size_t> queued_{0};  // q_.size(), for polling without the lock
  int sleepers_ = 0;               // workers waiting on cv_
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

int pool_size() {
  int64_t n = config::get_int("TESSERA_NUM_THREADS");
  if (n <= 0) {
    // The CPUs this process may use (a launcher may have bound it), not the machine's.
    cpu_set_t set;
    n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
    if (n <= 0) n = std::max(1u, std::thread::hardware_concurrency());
  }
  return static_cast<int>(n);
}

// Never destroyed (its threads may outlive main); after a fork the child's copy has no
// threads, so it is abandoned and a new one made on first use.
std::atomic<ThreadPool*> g_pool{nullptr};
std::atomic<bool> g_pool_stale{false};
std::mutex g_pool_mu;

ThreadPool& pool() {
  ThreadPool* p = g_pool.load(std::memory_order_acquire);
  if (p != nullptr && !g_pool_stale.load(std::memory_order_relaxed)) return *p;
  std::lock_guard<std::mutex> l(g_pool_mu);
  p = g_pool.load(std::memory_order_acquire);
  if (p == nullptr || g_pool_stale.load(std::memory_order_relaxed)) {
    const int n = p != nullptr ? p->size() : pool_size();
    p = new ThreadPool(n);
    g_pool.store(p, std::memory_order_release);
    g_pool_stale.store(false, std::memory_order_relaxed);
  }
  return *p;
}

}  // namespace

int num_threads() { return pool().size(); }

void thread_pool_after_fork_child() {
  new (&g_pool_mu) std::mutex();  // another thread may have held it at the fork
  g_pool_stale.store(true, std::memory_order_relaxed);
}

void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& f) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  size_t chunks = std::min<size_t>(static_cast<size_t>(num_threads()), (n + grain - 1) / grain);
  if (chunks <= 1 || tl_in_pool_chunk) {
    f(0, n);
    return;
  }
  // Shared with the chunks (they may still be unwinding when the caller has seen them done).
  // Each chunk is taken once, by a pool thread or by the caller: after its own chunk the caller
  // runs every chunk no pool thread has started, so it waits only for chunks in progress. (On a
  // machine with no spare core a pool thread can start long after the caller is done: with
  // half_gemm's blocks, mlx-lm's 111 M decode went from 19 to 15-16 ms per token on 2 cores.)
  // A pool task that finds its chunk taken
  // returns without touching f, which may be gone by then.
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::atomic<size_t> left;
    std::unique_ptr<std::atomic<bool>[]> taken;
    std::exception_ptr error;
  };
  auto sh = std::make_shared<Shared>();
  sh->left.store(chunks - 1);
  sh->taken = std::make_unique<std::atomic<bool>[]>(chunks);
  for (size_t c = 0; c < chunks; ++c) sh->taken[c].store(false, std::memory_order_relaxed);
  size_t per = (n + chunks - 1) / chunks;
  auto record = [](Shared& s) {
    std::lock_guard<std::mutex> l(s.mu);
    if (!s.error) s.error = std::current_exception();
  };
  for (size_t c = 1; c < chunks; ++c) {
    size_t b = c * per, e = std::min(n, b + per);
    pool().submit([sh, &f, b, e, c, record, kernel = trace::current_kernel()] {
      if (sh->taken[c].exchange(true, std::memory_order_acq_rel)) return;
      try {
        const int64_t t0 = trace::on() ? trace::now_ns() : 0;
        if (b < e) f(b, e);
        if (t0) {
          trace::slice("pool", kernel ? kernel : "parallel_for", t0, trace::now_ns(),
                       "\"elements\":" + std::to_string(e - b));
        }
      } catch (...) {
        record(*sh);
      }
      // The last chunk wakes a caller that stopped polling (under the lock: no lost wake-up).
      if (sh->left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> l(sh->mu);
        sh->cv.notify_one();
      }
    });
  }
  std::exception_ptr mine;
  tl_in_pool_chunk = true;
  try {
    f(0, std::min(n, per));
  } catch (...) {
    mine = std::current_exception();
  }
  for (size_t c = 1; c < chunks; ++c) {
    if (sh->taken[c].exchange(true, std::memory_order_acq_rel)) continue;
    const size_t b = c * per, e = std::min(n, b + per);
    try {
      if (b < e) f(b, e);
    } catch (...) {
      record(*sh);
    }
    sh->left.fetch_sub(1, std::memory_order_acq_rel);
  }
  tl_in_pool_chunk = false;
  auto done = [&] { return sh->left.load(std::memory_order_acquire) == 0; };
  if (!spin_until(done)) {
    std::unique_lock<std::mutex> l(sh->mu);
    sh->cv.wait(l, done);
  }
  if (mine) std::rethrow_exception(mine);
  std::lock_guard<std::mutex> l(sh->mu);  // the chunks' error, written under the lock
  if (sh->error) std::rethrow_exception(sh->error);
}

}  // namespace tessera::detail
