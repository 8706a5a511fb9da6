// Stream workers: each stream owns one thread that runs its tasks in submission order.
#pragma once

#include <exception>
#include <functional>

#include "tessera/stream.h"

namespace tessera::scheduler {

void enqueue(const Stream& s, std::function<void()> task);
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
// Tasks submitted to any stream and not finished yet.
int n_active_tasks();
// Block until at least one more task finishes (or none is active).
void wait_for_one();

}  // namespace tessera::scheduler
