// Devices, streams and their worker threads (stream.h, device.h, scheduler.h). Each stream has
// one thread running its queue in order; `synchronize` enqueues a marker and waits for it.
#include "core/scheduler.h"

#include "core/fork.h"
#include "core/trace.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "tessera/device.h"

namespace tessera {

namespace {

class StreamWorker {
 public:
  StreamWorker() : thread_([this] { run(); }) {}
  ~StreamWorker() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void enqueue(std::function<void()> f) {
    {
      std::lock_guard<std::mutex> l(mu_);
      busy_.fetch_add(1, std::memory_order_seq_cst);
      q_.push_back(std::move(f));
    }
    cv_.notify_one();
  }
  // Runs `body` on the calling thread as this stream's next task when nothing is queued or
  // running; meanwhile the worker holds back anything enqueued, so stream order is kept.
  // Two atomics instead of the queue's lock, taken and released twice (a loop of lone ops,
  // e.g. small collectives, pays this every op). The claim is a store-then-load on each side,
  // all sequentially consistent: enqueue counts a task before the worker looks at inline_, and
  // a caller claims inline_ before it looks at the count, so they cannot both go ahead.
  bool run_inline(const std::function<void()>& body) {
    if (busy_.load(std::memory_order_acquire) != 0) return false;
    bool idle = false;
    if (!inline_.compare_exchange_strong(idle, true, std::memory_order_seq_cst)) return false;
    struct Release {
      StreamWorker* w;
      ~Release() {
        w->inline_.store(false, std::memory_order_seq_cst);
        if (w->busy_.load(std::memory_order_seq_cst) != 0) {
          // The worker may be between its check of inline_ and its sleep: taking the lock
          // makes it either see the store or get the notification.
          { std::lock_guard<std::mutex> l(w->mu_); }
          w->cv_.notify_one();
        }
      }
    } release{this};
    if (busy_.load(std::memory_order_seq_cst) != 0) return false;  // a task came in between
    body();
    return true;
  }

 private:
  void run() {
    trace::set_thread_name("stream");
    for (;;) {
      std::function<void()> f;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [this] {
          return (stop_ || !q_.empty()) && !inline_.load(std::memory_order_seq_cst);
        });
        if (q_.empty()) return;  // stopping and drained
        f = std::move(q_.front());
        q_.pop_front();
      }
      f();
      f = nullptr;  // release what the task captured before taking the next one
      busy_.fetch_sub(1, std::memory_order_seq_cst);
    }
  }
  std::mutex mu_;  // guards q_ and stop_
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  bool stop_ = false;
  std::atomic<uint32_t> busy_{0};     // tasks queued or running
  std::atomic<bool> inline_{false};  // a caller is running tasks of this stream itself
  std::thread thread_;
};

// Owns every stream. Streams live until exit; only the owning main thread creates them.
struct StreamRegistry {
  std::mutex mu;
  std::vector<Stream> streams;
  std::map<int, std::unique_ptr<StreamWorker>> workers;
  std::map<Device, Stream> defaults;
  std::mutex active_mu;
  std::condition_variable active_cv;
  int active = 0;
  uint64_t finished = 0;
  std::mutex errors_mu;
  std::map<int, std::exception_ptr> errors;  // by stream: the first one async_eval left
};

// Never destroyed: workers may run past main's end. A forked child abandons its copy (its
// workers' threads did not survive the fork) for a new registry of the same streams, whose
// workers start on first use; the generation tells thread-local caches to look again.
std::atomic<StreamRegistry*> g_registry{nullptr};
std::atomic<int> g_generation{0};
// Bumped whenever a default stream changes, so per-thread copies of the defaults know to look
// again (every op asks for its default stream; the registry's lock is not taken for that).
std::atomic<uint64_t> g_defaults_version{1};

StreamRegistry& registry() {
  StreamRegistry* r = g_registry.load(std::memory_order_acquire);
  if (r != nullptr) return *r;
  static std::once_flag once;
  std::call_once(once, [] { g_registry.store(new StreamRegistry(), std::memory_order_release); });
  return *g_registry.load(std::memory_order_acquire);
}

// The worker of stream `index` (under r.mu), started now if this registry has none yet (after
// a fork); null for an unknown stream.
StreamWorker* worker_locked(StreamRegistry& r, int index) {
  auto it = r.workers.find(index);
  if (it != r.workers.end()) return it->second.get();
  for (const Stream& s : r.streams) {
    if (s.index == index) return r.workers.emplace(index, std::make_unique<StreamWorker>()).first->second.get();
  }
  return nullptr;
}

Device& default_device_ref() {
  static Device d(Device::cpu, 0);
  return d;
}

}  // namespace

const Device& default_device() { return default_device_ref(); }

bool is_available(const Device& d) { return d.type == Device::cpu && d.index == 0; }

int device_count(Device::DeviceType type) { return type == Device::cpu ? 1 : 0; }

void set_default_device(const Device& d) {
  if (!is_available(d)) {
    throw std::invalid_argument(
        std::string("[set_default_device] ") + (d.type == Device::gpu ? "gpu" : "cpu") + ":" +
        std::to_string(d.index) +
        " is not available in this build; only Device::cpu (index 0) can compute here");
  }
  default_device_ref() = d;
}

Stream new_stream(Device d) {
  if (!is_available(d)) {
    throw std::invalid_argument("[new_stream] the device is not available in this build; use "
                                "Device::cpu");
  }
  auto& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  Stream s(static_cast<int>(r.streams.size()), d);
  r.streams.push_back(s);
  r.workers.emplace(s.index, std::make_unique<StreamWorker>());
  return s;
}

Stream default_stream(Device d) {
  struct Cache {
    uint64_t version = 0;
    Stream stream{0, Device::cpu};
  };
  thread_local Cache kept;
  Cache& cache = kept;  // one thread_local lookup (a call in a shared library)
  // Read before the lookup: a default changed meanwhile makes the next call look again.
  const uint64_t version = g_defaults_version.load(std::memory_order_acquire);
  if (version == cache.version && cache.stream.device == d) return cache.stream;
  auto& r = registry();
  std::optional<Stream> found;
  {
    std::lock_guard<std::mutex> l(r.mu);
    auto it = r.defaults.find(d);
    if (it != r.defaults.end()) found = it->second;
  }
  if (!found) {
    Stream s = new_stream(d);
    std::lock_guard<std::mutex> l(r.mu);
    found = r.defaults.emplace(d, s).first->second;
  }
  cache.stream = *found;
  cache.version = version;
  return *found;
}

void set_default_stream(Stream s) {
  auto& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  r.defaults.insert_or_assign(s.device, s);
  g_defaults_version.fetch_add(1, std::memory_order_release);
}

std::vector<Stream> get_streams() {
  auto& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  return r.streams;
}

Stream to_stream(StreamOrDevice s) {
  if (auto* st = std::get_if<Stream>(&s)) return *st;
  if (auto* d = std::get_if<Device>(&s)) return default_stream(*d);
  return default_stream(default_device());
}

namespace {

// Waits until every task submitted to `s` so far has run.
void drain(Stream s) {
  struct Marker {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto m = std::make_shared<Marker>();
  scheduler::enqueue(s, [m] {
    std::lock_guard<std::mutex> l(m->mu);
    m->done = true;
    m->cv.notify_all();
  });
  std::unique_lock<std::mutex> l(m->mu);
  m->cv.wait(l, [&] { return m->done; });
}

}  // namespace

void synchronize(Stream s) {
  drain(s);
  auto& r = registry();
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> l(r.errors_mu);
    auto it = r.errors.find(s.index);
    if (it == r.errors.end()) return;
    e = std::move(it->second);
    r.errors.erase(it);
  }
  std::rethrow_exception(e);
}

void synchronize() { synchronize(default_stream(default_device())); }

void clear_streams() {
  for (const Stream& s : get_streams()) drain(s);
}

namespace scheduler {

void enqueue(const Stream& s, std::function<void()> task) {
  auto& r = registry();
  StreamWorker* w = nullptr;
  {
    std::lock_guard<std::mutex> l(r.mu);
    w = worker_locked(r, s.index);
    if (w == nullptr) {
      throw std::invalid_argument("[scheduler] unknown stream " + std::to_string(s.index));
    }
  }
  {
    std::lock_guard<std::mutex> l(r.active_mu);
    ++r.active;
  }
  w->enqueue([t = std::move(task), &r]() mutable {
    t();
    t = nullptr;
    std::lock_guard<std::mutex> l(r.active_mu);
    --r.active;
    ++r.finished;
    r.active_cv.notify_all();
  });
}

bool run_inline(const Stream& s, const std::function<void()>& body) {
  // A task that evaluates on the stream it is running inline owns that stream already.
  thread_local int inline_stream = -1;
  if (inline_stream == s.index) {
    body();
    return true;
  }
  // Workers live as long as the process, so the last one found can be remembered.
  thread_local int cached_index = -1;
  thread_local int cached_generation = -1;
  thread_local StreamWorker* cached = nullptr;
  StreamWorker* w = cached;
  const int generation = g_generation.load(std::memory_order_relaxed);
  if (cached_index != s.index || cached_generation != generation) {
    auto& r = registry();
    std::lock_guard<std::mutex> l(r.mu);
    w = worker_locked(r, s.index);
    if (w == nullptr) return false;
    cached = w;
    cached_index = s.index;
    cached_generation = generation;
  }
  struct Mark {
    int prev;
    ~Mark() { inline_stream = prev; }
  } mark{inline_stream};
  return w->run_inline([&] {
    inline_stream = s.index;
    body();
  });
}

void record_error(const Stream& s, std::exception_ptr e) {
  auto& r = registry();
  std::lock_guard<std::mutex> l(r.errors_mu);
  r.errors.emplace(s.index, std::move(e));
}

int n_active_tasks() {
  auto& r = registry();
  std::lock_guard<std::mutex> l(r.active_mu);
  return r.active;
}

void wait_for_one() {
  auto& r = registry();
  std::unique_lock<std::mutex> l(r.active_mu);
  if (r.active == 0) return;
  uint64_t seen = r.finished;
  r.active_cv.wait(l, [&] { return r.finished != seen || r.active == 0; });
}

}  // namespace scheduler

// ---- fork (core/fork.h) ----

void detail::scheduler_prepare_fork() {
  if (g_registry.load(std::memory_order_acquire) == nullptr) return;  // no stream yet
  clear_streams();  // the child cannot finish work queued on threads it will not have
  registry().mu.lock();
}

void detail::scheduler_after_fork_parent() {
  if (StreamRegistry* r = g_registry.load(std::memory_order_acquire)) r->mu.unlock();
}

void detail::scheduler_after_fork_child() {
  StreamRegistry* old = g_registry.load(std::memory_order_acquire);
  if (old == nullptr) return;
  auto* fresh = new StreamRegistry();
  fresh->streams = old->streams;
  fresh->defaults = old->defaults;
  // `old` (its lock held by this thread, its workers' threads gone) is abandoned on purpose.
  for (auto& [index, worker] : old->workers) (void)worker.release();
  g_registry.store(fresh, std::memory_order_release);
  g_generation.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace tessera
