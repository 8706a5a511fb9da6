// Stream workers (MLX's scheduler.h): each CPU stream owns one thread that runs its tasks in
// submission order. eval hands its kernels to them; a program may enqueue its own task.
#pragma once

#include <functional>

#include "tessera/stream.h"

namespace tessera::scheduler {

// Run `task` on stream s's thread after everything submitted to s before it. Throws
// std::invalid_argument when s takes no work (never made, or its thread has ended).
void enqueue(const Stream& s, std::function<void()> task);
// Tasks submitted to any stream and not finished yet.
int n_active_tasks();
// Block until at least one more task finishes (or none is active).
void wait_for_one();

}  // namespace tessera::scheduler
