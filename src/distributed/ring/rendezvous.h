// Start-up without a hostfile (DESIGN.md section 4): a job started by Slurm (srun), Open MPI's
// mpirun or an MPICH / PMI launcher knows each process's rank and the job's size from the
// environment, but not where the other ranks listen. Rank 0 listens on a coordinator address
// (TESSERA_COORDINATOR=host:port, or for Slurm the first node of the step and a port derived
// from the job and step ids); every rank binds its ring listener on an ephemeral port of the
// address that reaches the coordinator (or TESSERA_RING_ADDRESS) and registers it there; rank
// 0 answers everyone with the full table, which is the ring hostfile. With TESSERA_JOB_TOKEN
// set, every registration and every answer carries an HMAC of it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/group_impl.h"
#include "distributed/ring/ring_group.h"

namespace tessera::distributed::detail {

// What a scheduler told this process.
struct SchedulerJob {
  std::string source;       // "Slurm", "Open MPI", "PMI"
  std::string rank_var;     // the variable the rank came from, for messages
  int rank = 0, size = 1;
  std::string coordinator;  // "host:port"; "" when the environment does not give one
  std::string coordinator_origin;  // how it was found, for messages
};

// The job a scheduler started this process in (an srun step's SLURM_PROCID / SLURM_NTASKS, Open
// MPI's OMPI_COMM_WORLD_*, PMI_RANK / PMI_SIZE), or nullopt when none did. A malformed or
// inconsistent value throws std::invalid_argument naming the variable.
std::optional<SchedulerJob> detect_scheduler_job();

// Slurm's compact host lists: "node[01-03,7],gpu1" -> node01 node02 node03 node7 gpu1.
// Throws std::invalid_argument for a malformed list.
std::vector<std::string> expand_slurm_hostlist(const std::string& list);

// The messages, as bytes (each parser throws std::invalid_argument saying what is wrong):
// a u32 big-endian length of at most `limit` bytes, the JSON body, then (with a token)
// HMAC-SHA256 of bound_to + body under the token.
uint32_t rendezvous_body_length(const unsigned char length[4], size_t limit);
void check_rendezvous_mac(const std::string& body, const unsigned char mac[32],
                          const std::string& token, const std::string& bound_to);
// A rank's registration: {"tessera_rendezvous": 1, "rank", "size", "address" (host:port),
// "host", "nonce"}.
struct Registration {
  int rank = -1, size = -1;
  std::string address, host, nonce;
};
Registration parse_registration(const std::string& body);
// Rank 0's answer: {"ok": true, "table": [[address], ...]} or {"ok": false, "error": why}.
struct RendezvousReply {
  bool ok = false;
  std::string error;
  Hostfile table;
};
RendezvousReply parse_rendezvous_reply(const std::string& body, const std::string& origin);

// Meets every rank of `job` at its coordinator and returns this rank's ring group.
std::shared_ptr<GroupImpl> rendezvous_ring(const SchedulerJob& job, RingOptions options);

}  // namespace tessera::distributed::detail
