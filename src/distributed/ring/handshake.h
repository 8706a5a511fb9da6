// Connection handshake of the ring backend. Every connection starts with it, before any data:
// the connecting side says who it is (its rank, the rank it wants, the connection index and
// kind); when a job token is set, both sides prove knowledge of it with HMAC-SHA256 over both
// ranks, the index, the kind and two fresh nonces (mutual challenge-response). Peers are
// identified by this handshake, never by the order in which they arrive.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "distributed/ring/socket.h"
#include "core/sha256.h"

namespace tessera::distributed::detail {

using tessera::detail::constant_time_equal;
using tessera::detail::Digest256;
using tessera::detail::hmac_sha256;
using tessera::detail::sha256;
using tessera::detail::to_hex;

// ring: data to a neighbour; direct: send/recv between non-neighbours; control: the neighbour
// pair's failure notices (failure_notice.h), never data.
enum class ConnKind : uint32_t { ring = 0, direct = 1, control = 2 };

struct ConnIdentity {
  int client_rank = -1;  // the side that connected
  int server_rank = -1;  // the side that accepted
  int index = 0;         // connection index (0..C-1 for ring connections)
  ConnKind kind = ConnKind::ring;
};

// What both ends of a connection must agree on to be one job. The hostfile and the shared-memory
// setting travel in the hello (inside the MAC when a token is set), so ranks started with
// different settings are told which one differs instead of waiting out the connect timeout.
struct JobTerms {
  std::string token;           // TESSERA_JOB_TOKEN; empty = no authentication
  Digest256 hostfile_digest{}; // hostfile_digest() of the group's hostfile
  bool shm = false;            // TESSERA_RING_SHM
  int world_size = 0;          // ranks in the group
  // How many groups over this hostfile this rank has made, this one included: every rank
  // makes them in the same order, so a connection for the next group that reaches a group
  // still being torn down (the same ports) is told to retry instead of being taken.
  uint64_t generation = 1;
};

// Thrown by client_handshake when the peer did not get to judge us: its listener was full, or
// the connection closed before any reply (a listener being torn down, e.g. a peer between two
// init() calls). Retrying shortly may succeed.
struct HandshakeRetry : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Connecting side. Throws std::runtime_error if the server rejects us (naming the setting that
// differs) or fails to prove the token (an impostor on the address), naming the peer.
void client_handshake(const Socket& s, const JobTerms& terms, const ConnIdentity& me,
                      const Deadline& deadline, const IoContext& ctx);

// Accepting side. `max_index` bounds ConnIdentity::index for ring connections. Returns the
// verified identity; throws HandshakeRejected with the reason (wrong token, wrong rank,
// different hostfile or shm setting, malformed hello) after telling the client why, or
// std::runtime_error on a timeout or a closed connection.
struct HandshakeRejected : std::runtime_error {
  HandshakeRejected(const std::string& what, int claimed_rank, bool routine = false)
      : std::runtime_error(what), claimed_rank(claimed_rank), routine(routine) {}
  int claimed_rank;  // the rank the client said it was (-1 if its hello was malformed)
  bool routine;      // an expected turn-away (a newer group's rank told to retry): not logged
};
// `source_check(claimed_rank)`, when given, says why the connection's source address cannot be
// that rank ("" when it can); the client is then refused before any data or token exchange.
using SourceCheck = std::function<std::string(int claimed_rank)>;
// The accepting side's judgement of a client's hello (the bytes it sent; fewer than
// kHelloBytes, or another magic or version, is malformed) before any token exchange: the
// identity it claims, every field checked against this rank's group, or why it is refused.
inline constexpr size_t kHelloBytes = 104;
struct HelloVerdict {
  uint32_t status = 0;  // 0: acceptable (the token proof follows); else the refusal code sent back
  std::string why;      // the refusal, for this rank's message
  ConnIdentity id;
  int claimed = -1;     // the rank the client says it is (-1: a malformed hello)
  bool routine = false;
};
HelloVerdict judge_hello(std::string_view hello, const JobTerms& terms, int my_rank,
                         int world_size, int max_index, const SourceCheck& source_check = nullptr);
ConnIdentity server_handshake(const Socket& s, const JobTerms& terms, int my_rank,
                              int world_size, int max_index, const Deadline& deadline,
                              const std::string& peer_text,
                              const SourceCheck& source_check = nullptr);

// Tells a client that arrived while the listener was full to retry (HandshakeRetry there).
void refuse_busy(const Socket& s);

}  // namespace tessera::distributed::detail
