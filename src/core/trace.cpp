// The timeline recorder (core/trace.h, tessera/trace.h): per-thread event buffers, the Chrome
// trace JSON writer, and TESSERA_TRACE (start at load, write at exit).
#include "core/trace.h"

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "tessera/config.h"
#include "tessera/trace.h"

namespace tessera::trace {

std::atomic<bool> g_on{false};

namespace {

struct Event {
  char ph;  // 'X' slice, 'i' instant
  const char* cat;
  std::string name;
  int64_t ts, dur;
  std::string args;
};

struct Buffer {
  std::mutex mu;
  int tid = 0;
  std::string name;
  std::vector<Event> events;
};

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<Buffer>> buffers;
  std::string path;  // of the trace being recorded
  int next_tid = 1;
};

// Never destroyed: threads may record while static destructors run.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

Buffer& buffer() {
  thread_local std::shared_ptr<Buffer> b = [] {
    auto nb = std::make_shared<Buffer>();
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    nb->tid = r.next_tid++;
    // The process's main thread (which evaluates inline when its stream is idle), or another.
    nb->name = (gettid() == getpid() ? "main (" : "thread (") + std::to_string(nb->tid) + ")";
    r.buffers.push_back(nb);
    return nb;
  }();
  return *b;
}

void push(Event e) {
  Buffer& b = buffer();
  std::lock_guard<std::mutex> lock(b.mu);
  b.events.push_back(std::move(e));
}

std::atomic<int64_t> g_wait_ns{0};
thread_local const char* tl_kernel = nullptr;

void write_us(std::ostream& os, int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000),
                static_cast<long long>(ns % 1000));
  os << buf;
}

}  // namespace

int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

void slice(const char* cat, const std::string& name, int64_t begin_ns, int64_t end_ns,
           const std::string& args) {
  if (!on()) return;
  push(Event{'X', cat, name, begin_ns, end_ns - begin_ns, args});
}

void instant(const char* cat, const std::string& name, const std::string& args) {
  if (!on()) return;
  push(Event{'i', cat, name, now_ns(), 0, args});
}

void set_thread_name(const std::string& name) {
  Buffer& b = buffer();
  std::lock_guard<std::mutex> lock(b.mu);
  b.name = name + " (" + std::to_string(b.tid) + ")";
}

void add_wait_ns(int64_t ns) { g_wait_ns.fetch_add(ns, std::memory_order_relaxed); }
int64_t wait_ns() { return g_wait_ns.load(std::memory_order_relaxed); }
const char*& current_kernel() { return tl_kernel; }

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace tessera::trace

namespace tessera {

using trace::registry;

void start_trace(const std::string& path) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (trace::on()) {
    throw std::invalid_argument("[start_trace] a trace is already being recorded (to " + r.path +
                                "); call stop_trace() first");
  }
  if (path.empty()) throw std::invalid_argument("[start_trace] the path is empty");
  for (auto& b : r.buffers) {
    std::lock_guard<std::mutex> bl(b->mu);
    b->events.clear();
  }
  r.path = path;
  trace::g_on.store(true);
}

bool is_tracing() { return trace::on(); }

std::string stop_trace() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!trace::on()) return "";
  trace::g_on.store(false);
  const long pid = static_cast<long>(getpid());
  std::ostringstream os;
  os << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"clock\":\"CLOCK_REALTIME\",\"pid\":" << pid
     << "},\"traceEvents\":[\n";
  os << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << pid
     << ",\"args\":{\"name\":\"tessera (pid " << pid << ")\"}}";
  for (auto& b : r.buffers) {
    std::lock_guard<std::mutex> bl(b->mu);
    os << ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << pid << ",\"tid\":" << b->tid
       << ",\"args\":{\"name\":" << trace::quote(b->name) << "}}";
    for (auto& e : b->events) {
      os << ",\n{\"ph\":\"" << e.ph << "\",\"cat\":\"" << e.cat << "\",\"name\":"
         << trace::quote(e.name) << ",\"pid\":" << pid << ",\"tid\":" << b->tid << ",\"ts\":";
      trace::write_us(os, e.ts);
      if (e.ph == 'X') {
        os << ",\"dur\":";
        trace::write_us(os, e.dur);
      } else {
        os << ",\"s\":\"t\"";
      }
      os << ",\"args\":{" << e.args << "}}";
    }
    b->events.clear();
  }
  os << "\n]}\n";
  std::ofstream f(r.path, std::ios::binary);
  f << os.str();
  f.close();
  if (!f) throw std::runtime_error("[stop_trace] cannot write the trace file " + r.path);
  return r.path;
}

namespace {
// TESSERA_TRACE=path: record the whole run, written at exit.
const bool g_env_trace = [] {
  try {
    auto p = config::get_string("TESSERA_TRACE");
    if (!p || p->empty()) return false;
    start_trace(*p);
    std::atexit([] {
      try {
        stop_trace();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
      }
    });
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[trace] TESSERA_TRACE: %s\n", e.what());
    return false;
  }
}();
}  // namespace

}  // namespace tessera
