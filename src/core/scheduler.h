// The scheduler's side the library uses (the public side, enqueue and waiting, is
// tessera/scheduler.h).
#pragma once

#include <exception>
#include <functional>

#include "tessera/scheduler.h"
#include "tessera/stream.h"

namespace tessera::scheduler {

// Throws std::runtime_error (naming the stream and why) unless the calling thread may evaluate
// on s: a stream it made or its default stream, a thread-unsafe stream, or the stream whose
// task it is running.
void check_usable(const Stream& s);
// Runs `body` on the calling thread as the next task of stream s if s has nothing queued or
// running (returns false, running nothing, otherwise). Tasks enqueued on s meanwhile wait until
// body returns, so the stream's order holds. eval uses it to skip two thread hand-offs.
bool run_inline(const Stream& s, const std::function<void()>& body);
// Keeps `e` (unless an earlier error is kept already) for the next synchronize(s) to raise: a
// kernel error of async_eval, which nobody waits for.
void record_error(const Stream& s, std::exception_ptr e);

}  // namespace tessera::scheduler
