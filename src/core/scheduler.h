// Stream workers: each stream owns one thread that runs its tasks in submission order.
#pragma once

#include <functional>

#include "tessera/stream.h"

namespace tessera::scheduler {

void enqueue(const Stream& s, std::function<void()> task);
// Tasks submitted to any stream and not finished yet.
int n_active_tasks();
// Block until at least one more task finishes (or none is active).
void wait_for_one();

}  // namespace tessera::scheduler
