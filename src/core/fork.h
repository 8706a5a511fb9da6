// fork() with Tessera's threads running (Python's multiprocessing on Linux): pthread_atfork
// handlers (core/fork.cpp) finish the queued work and hold the allocator's and the stream
// registry's locks across the fork, so the child inherits consistent state; the child then gets
// a fresh intra-op pool and fresh stream workers, created on first use. A child must not use
// a distributed group it inherited (its connections and threads belong to the parent).
#pragma once

namespace tessera::detail {

void lock_allocator_for_fork();
void unlock_allocator_after_fork();
void thread_pool_after_fork_child();
void scheduler_prepare_fork();
void scheduler_after_fork_parent();
void scheduler_after_fork_child();

}  // namespace tessera::detail
