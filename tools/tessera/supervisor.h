// Starting and supervising the ranks of a job: each local rank in its own process group, and
// for each remote host one ssh session running `tessera _rank-agent`, which starts that host's
// ranks (rank_host.h has the protocol). Output is relayed line by line with a "[rank] "
// prefix, stdin is broadcast to every rank, and when any rank fails the others are stopped
// (SIGTERM, then SIGKILL after a grace period).
#pragma once

#include <string>
#include <vector>

namespace tessera::cli {

// A rank on this host.
struct RankSpec {
  int rank = 0;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "K=V" entries: the whole environment of the rank
  std::vector<int> cpus;         // CPUs the rank may run on (sched_setaffinity); empty = any
  std::string cwd;               // working directory; "" = the launcher's
};

// The ranks on one remote host: `argv` runs ssh to the host's agent, whose stdin gets
// `preamble` (the job of every rank there) first.
struct HostSpec {
  std::string host;  // the ssh destination, for messages
  std::vector<std::string> argv, env;
  std::string preamble;
  std::vector<int> ranks;  // in the order of the preamble's list
};

struct SuperviseOptions {
  bool prefix = true;          // "[rank] " before every line
  double grace_seconds = 5.0;  // SIGTERM -> SIGKILL delay after a failure
  bool verbose = false;
  double heartbeat_seconds = 10;  // agents stop their ranks after this much silence
};

struct SuperviseResult {
  int code = 0;              // 0 when every rank exited 0, else the first failure's status
  bool interrupted = false;  // SIGINT or SIGTERM reached the launcher
  std::string failure;       // "rank 2 exited with status 3" (empty when code is 0)
};

// Runs every rank of a job of `size` ranks to completion (a death by signal n counts as status
// 128 + n).
SuperviseResult supervise(int size, const std::vector<RankSpec>& local, const std::vector<HostSpec>& remote,
              const SuperviseOptions& options);

}  // namespace tessera::cli
