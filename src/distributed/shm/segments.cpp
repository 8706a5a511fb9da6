// Leftover shared-memory segments (see segments.h).
#include "distributed/shm/segments.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace tessera::distributed::detail {

namespace {

constexpr const char kSegmentPrefix[] = "tessera-";

// The creator's pid in a segment name of ours, or -1.
int segment_creator(const char* name) {
  const size_t n = sizeof(kSegmentPrefix) - 1;
  if (std::strncmp(name, kSegmentPrefix, n) != 0) return -1;
  char* end = nullptr;
  const long pid = std::strtol(name + n, &end, 10);
  return end != name + n && *end == '-' && pid > 0 && pid <= INT_MAX ? static_cast<int>(pid) : -1;
}

// pred(creator pid, seconds since the segment was last written by write/ftruncate: its age).
template <class Pred>
int remove_segments_where(Pred pred) {
  DIR* d = opendir("/dev/shm");
  if (!d) return 0;
  std::vector<std::string> doomed;
  const time_t now = time(nullptr);
  while (const dirent* e = readdir(d)) {
    const int pid = segment_creator(e->d_name);
    struct stat st {};
    if (pid <= 0 || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (pred(pid, static_cast<double>(now - st.st_mtime))) {
      doomed.push_back(std::string("/") + e->d_name);
    }
  }
  closedir(d);
  int removed = 0;
  for (const auto& name : doomed) removed += shm_unlink(name.c_str()) == 0;
  return removed;
}

}  // namespace

int remove_shm_segments_of(int pid) {
  return remove_segments_where([pid](int creator, double) { return creator == pid; });
}

// Only the creator's death makes a segment an orphan: every rank that maps it has done so, or
// fails to, while the creator waits in the name exchange. kill() says ESRCH for a process that
// does not exist in this pid namespace; one of another user answers EPERM and is left alone.
// Containers that share /dev/shm but not pids see each other's ranks as dead, so a segment
// must also be older than any set-up (a minute) to count as an orphan.
int remove_orphaned_shm_segments() {
  constexpr double kOldestSetupSeconds = 60;
  return remove_segments_where([](int creator, double age) {
    return age > kOldestSetupSeconds && creator != static_cast<int>(getpid()) &&
           ::kill(creator, 0) != 0 && errno == ESRCH;
  });
}

}  // namespace tessera::distributed::detail
