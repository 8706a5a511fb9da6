// The recorder behind tessera/trace.h. Off, every hook costs one relaxed load and a predictable
// branch (on()); on, events go to a buffer per thread, merged when the file is written.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace tessera::trace {

extern std::atomic<bool> g_on;
inline bool on() { return g_on.load(std::memory_order_relaxed); }

// Nanoseconds on the common clock of every process of a host (CLOCK_REALTIME).
int64_t now_ns();

// A complete slice on this thread's track; `args` is a JSON object's members ("\"a\":1,...") or
// empty. `cat`: "kernel", "pool", "collective", "compile".
void slice(const char* cat, const std::string& name, int64_t begin_ns, int64_t end_ns,
           const std::string& args = {});
// A marker at now_ns().
void instant(const char* cat, const std::string& name, const std::string& args = {});
// This thread's track name ("stream 0", "pool 1", "main").
void set_thread_name(const std::string& name);

// Time spent waiting for peers, summed over the threads that wait (the distributed layer's poll
// and futex loops add to it while tracing); a collective's slice reports its part of it.
void add_wait_ns(int64_t ns);
int64_t wait_ns();
// Adds the time from construction to destruction to the waiting time (when tracing).
struct WaitScope {
  int64_t t0 = on() ? now_ns() : 0;
  WaitScope() = default;
  WaitScope(const WaitScope&) = delete;
  WaitScope& operator=(const WaitScope&) = delete;
  ~WaitScope() {
    if (t0) add_wait_ns(now_ns() - t0);
  }
};

// The kernel this thread is running (pool chunks are named after it).
const char*& current_kernel();

// JSON string escaping.
std::string quote(const std::string& s);

}  // namespace tessera::trace
