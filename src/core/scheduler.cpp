// Devices, streams and their worker threads (stream.h, device.h, scheduler.h). Each stream has
// one thread running its queue in order; `synchronize` enqueues a marker and waits for it.
#include "core/scheduler.h"

#include "core/fork.h"
#include "core/trace.h"

#include <pthread.h>

#include <algorithm>
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

#include "backend/device.h"
#include "tessera/device.h"

namespace tessera {

namespace {

// The stream whose worker the calling thread is (-1: none), and the stream whose tasks it is
// running inline (scheduler::run_inline). Either may be evaluated on from this thread whoever
// owns it: a kernel may evaluate a graph of its own.
thread_local int tl_serving = -1;
thread_local int tl_inline = -1;

class StreamWorker {
 public:
  explicit StreamWorker(int index) : thread_([this, index] { run(index); }) {}
  ~StreamWorker() {
    stop();
    if (thread_.joinable()) thread_.join();
  }
  // The stream's thread ended: the worker finishes what is queued and exits, waited for by
  // nobody (a job blocked in a collective must not hold up the end of a thread).
  void retire() {
    stop();
    thread_.detach();
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
  void stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
  }
  void run(int index) {
    trace::set_thread_name("stream");
    pthread_setname_np(pthread_self(), "tessera-stream");  // as `top -H` and gdb show it
    tl_serving = index;
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

// Owns every stream, indexed by Stream::index. A worker is kept after its stream ended (its
// detached thread may still be draining the queue).
struct StreamRegistry {
  std::mutex mu;
  std::vector<Stream> streams;
  // The thread that may evaluate on each stream (a default id: any thread), and whether the
  // thread that made it has ended.
  std::vector<std::thread::id> owners;
  std::vector<bool> ended;
  int thread_local_streams = 0;  // ThreadLocalStream handles made so far
  std::map<int, std::unique_ptr<StreamWorker>> workers;
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
  if (index < 0 || index >= static_cast<int>(r.streams.size()) || r.ended[index]) return nullptr;
  auto it = r.workers.find(index);
  if (it != r.workers.end()) return it->second.get();
  return r.workers.emplace(index, std::make_unique<StreamWorker>(index)).first->second.get();
}

void require_available(Device d, const char* what) {
  if (!is_available(d)) {
    throw std::invalid_argument(std::string("[") + what +
                                "] the device is not available in this build; use Device::cpu");
  }
}

Stream make_stream(Device d, std::thread::id owner, const char* what) {
  require_available(d, what);
  auto& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  Stream s(static_cast<int>(r.streams.size()), d);
  r.streams.push_back(s);
  r.owners.push_back(owner);
  r.ended.push_back(false);
  r.workers.emplace(s.index, std::make_unique<StreamWorker>(s.index));
  return s;
}

// The calling thread's streams: its default per device (with the last one asked for at hand,
// as every op asks), the streams behind the ThreadLocalStream handles it used, and the streams
// it made, which end with it.
struct ThreadStreams {
  std::map<Device, Stream> defaults;
  std::optional<Stream> last_default;
  std::map<int, Stream> local;
  std::vector<int> made;
  ~ThreadStreams() {
    StreamRegistry* r = g_registry.load(std::memory_order_acquire);
    if (r == nullptr || made.empty()) return;
    std::lock_guard<std::mutex> l(r->mu);
    for (int index : made) {
      r->ended[index] = true;
      auto it = r->workers.find(index);
      if (it != r->workers.end()) it->second->retire();
    }
  }
};

ThreadStreams& thread_streams() {
  thread_local ThreadStreams t;
  return t;
}

Device& default_device_ref() {
  static Device d(Device::cpu, 0);
  return d;
}

}  // namespace

const Device& default_device() { return default_device_ref(); }

bool is_available(const Device& d) {
  return d.index == 0 && (d.type == Device::cpu || backend::gpu_backend() != nullptr);
}

int device_count(Device::DeviceType type) {
  return type == Device::cpu || backend::gpu_backend() != nullptr ? 1 : 0;
}

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
  Stream s = make_stream(d, std::this_thread::get_id(), "new_stream");
  thread_streams().made.push_back(s.index);
  return s;
}

Stream new_thread_unsafe_stream(Device d) {
  return make_stream(d, std::thread::id(), "new_thread_unsafe_stream");
}

ThreadLocalStream new_thread_local_stream(Device d) {
  require_available(d, "new_thread_local_stream");
  auto& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  return ThreadLocalStream(r.thread_local_streams++, d);
}

Stream stream_from_thread_local_stream(ThreadLocalStream s) {
  ThreadStreams& t = thread_streams();
  auto it = t.local.find(s.index);
  if (it != t.local.end()) return it->second;
  Stream made = new_stream(s.device);
  t.local.emplace(s.index, made);
  return made;
}

Stream default_stream(Device d) {
  ThreadStreams& t = thread_streams();
  if (t.last_default && t.last_default->device == d) return *t.last_default;
  auto it = t.defaults.find(d);
  if (it == t.defaults.end()) it = t.defaults.emplace(d, new_stream(d)).first;
  t.last_default = it->second;
  return it->second;
}

void set_default_stream(Stream s) {
  ThreadStreams& t = thread_streams();
  t.defaults.insert_or_assign(s.device, s);
  t.last_default = s;
}

std::vector<Stream> get_streams() {
  auto& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  return r.streams;
}

Stream to_stream(StreamOrDevice s) {
  if (auto* st = std::get_if<Stream>(&s)) return *st;
  if (auto* tls = std::get_if<ThreadLocalStream>(&s)) return stream_from_thread_local_stream(*tls);
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
  if (s.device.type == Device::gpu) {
    if (backend::DeviceBackend* b = backend::gpu_backend()) b->synchronize(s);
  }
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

void synchronize(ThreadLocalStream s) { synchronize(stream_from_thread_local_stream(s)); }

namespace {

// Drains the live streams that `pick` selects (by index, under the registry's lock).
template <typename Pick>
void drain_streams(Pick pick) {
  auto& r = registry();
  std::vector<Stream> live;
  {
    std::lock_guard<std::mutex> l(r.mu);
    for (const Stream& s : r.streams) {
      if (!r.ended[s.index] && pick(s.index)) live.push_back(s);
    }
  }
  for (const Stream& s : live) drain(s);
}

}  // namespace

void clear_streams() {
  const std::vector<int>& made = thread_streams().made;
  drain_streams([&](int i) { return std::find(made.begin(), made.end(), i) != made.end(); });
}

namespace scheduler {

void enqueue(const Stream& s, std::function<void()> task) {
  auto& r = registry();
  StreamWorker* w = nullptr;
  {
    std::lock_guard<std::mutex> l(r.mu);
    w = worker_locked(r, s.index);
    if (w == nullptr) {
      throw std::invalid_argument("[scheduler] stream " + std::to_string(s.index) +
                                  " takes no work: it was never made, or its thread has ended");
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

void check_usable(const Stream& s) {
  // The stream last found usable by this thread (its own or a thread-unsafe one stays so).
  thread_local int ok_index = -1;
  thread_local int ok_generation = -1;
  const int generation = g_generation.load(std::memory_order_relaxed);
  if (s.index == ok_index && generation == ok_generation) return;
  if (s.index == tl_serving || s.index == tl_inline) return;
  auto& r = registry();
  std::string why;
  {
    std::lock_guard<std::mutex> l(r.mu);
    if (s.index < 0 || s.index >= static_cast<int>(r.streams.size())) {
      why = "no such stream was made";
    } else if (r.ended[s.index]) {
      why = "the thread that made it has ended";
    } else if (r.owners[s.index] != std::thread::id() &&
               r.owners[s.index] != std::this_thread::get_id()) {
      why = "it belongs to another thread";
    }
  }
  if (why.empty()) {
    ok_index = s.index;
    ok_generation = generation;
    return;
  }
  throw std::runtime_error(
      "There is no Stream(" + std::string(s.device.type == Device::cpu ? "cpu" : "gpu") + ", " +
      std::to_string(s.index) + ") in current thread: " + why +
      ". A thread evaluates on its own streams only (its default stream, those it made with "
      "new_stream); for work shared between threads use new_thread_local_stream (one stream per "
      "thread behind one handle) or new_thread_unsafe_stream");
}

bool run_inline(const Stream& s, const std::function<void()>& body) {
  // A task that evaluates on the stream it is running inline owns that stream already.
  if (tl_inline == s.index) {
    body();
    return true;
  }
  // Workers are never freed (an ended stream's stays), so the last one found can be remembered.
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
    ~Mark() { tl_inline = prev; }
  } mark{tl_inline};
  // Captures two references: within std::function's inline buffer, no allocation per op.
  return w->run_inline([&] {
    tl_inline = s.index;
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
  drain_streams([](int) { return true; });  // the child will not have the threads to finish it
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
  fresh->owners = old->owners;
  fresh->ended = old->ended;
  fresh->thread_local_streams = old->thread_local_streams;
  // `old` (its lock held by this thread, its workers' threads gone) is abandoned on purpose.
  for (auto& [index, worker] : old->workers) (void)worker.release();
  g_registry.store(fresh, std::memory_order_release);
  g_generation.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace tessera
