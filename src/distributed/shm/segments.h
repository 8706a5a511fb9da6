// The names of the shared-memory segments ShmTransport creates, and the removal of the ones a
// killed rank left behind.
#pragma once

namespace tessera::distributed::detail {

// Segments are named /dev/shm/tessera-<creator pid>-<rank>-<random> and unlinked once every
// rank has mapped them; a rank killed before that leaves its segment behind. These remove such
// leftovers: every segment of `pid` (the launcher calls it for each rank it reaps), or every
// segment whose creator no longer runs (each rank calls it before creating its own). Returns
// how many were removed.
int remove_shm_segments_of(int pid);
int remove_orphaned_shm_segments();

}  // namespace tessera::distributed::detail
