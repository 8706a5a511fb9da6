// The pthread_atfork handlers (see fork.h).
#include "core/fork.h"

#include <pthread.h>

namespace tessera::detail {

namespace {

void prepare() {
  scheduler_prepare_fork();  // waits for queued work, then holds the registry's lock
  lock_allocator_for_fork();
}

void parent() {
  unlock_allocator_after_fork();
  scheduler_after_fork_parent();
}

void child() {
  unlock_allocator_after_fork();
  scheduler_after_fork_child();
  thread_pool_after_fork_child();
}

// Registered when the library loads.
const int kRegistered = pthread_atfork(prepare, parent, child);

}  // namespace

}  // namespace tessera::detail
