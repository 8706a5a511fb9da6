// Starting and supervising the ranks of a job: one process group per rank (a local rank, or the
// ssh client of a remote one), stdout/stderr relayed line by line with a "[rank] " prefix, stdin
// broadcast to every rank, and fail-fast shutdown (SIGTERM, then SIGKILL after a grace period)
// when any rank fails. A remote rank's ssh runs `tessera _rank-agent` (rank_host.h): its stdin
// carries the job, then framed stdin, signals and heartbeats.
#pragma once

#include <string>
#include <vector>

namespace tessera::cli {

struct RankSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "K=V" entries: the whole environment of the rank
  std::vector<int> cpus;         // CPUs the rank may run on (sched_setaffinity); empty = any
  std::string cwd;               // working directory; "" = the launcher's
  std::string host;              // where it runs, for messages; "" for this host
  bool remote = false;           // argv runs ssh to an agent
  std::string preamble;          // bytes written to its stdin first (a remote rank's job)
};

struct SuperviseOptions {
  bool prefix = true;          // "[rank] " before every line
  double grace_seconds = 5.0;  // SIGTERM -> SIGKILL delay after a failure
  bool verbose = false;
  double heartbeat_seconds = 10;  // remote ranks: agents stop a rank after this much silence
};

// Runs every rank to completion. Returns 0 when all exit 0, else the first failing rank's exit
// status (a death by signal n as 128 + n).
int supervise(const std::vector<RankSpec>& ranks, const SuperviseOptions& options);

}  // namespace tessera::cli
