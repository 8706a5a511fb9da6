// How a rank waits for a peer (TCP stream or shared memory): busy-poll for a bounded time, then
// sleep in the kernel. Busy-polling saves the wake-up (tens of microseconds on these VMs) for
// small messages; when more ranks share this host than it has CPUs, the poll loop yields the
// CPU so the rank being waited for can run.
#pragma once

namespace tessera::distributed::detail {

struct SpinPolicy {
  double spin_s = 50e-6;  // TESSERA_DIST_SPIN_US; 0 = sleep at once
  bool yield = false;     // oversubscribed host: sched_yield while polling
};

// Ranks on this host versus the CPUs they share (TESSERA_HOST_CPUS, set by tessera launch), or
// else the CPUs this process may run on.
bool host_oversubscribed(int local_ranks);

}  // namespace tessera::distributed::detail
