// Connection handshake of the ring backend. Every connection starts with it, before any data:
// the connecting side says who it is (its rank, the rank it wants, the connection index and
// kind); when a job token is set, both sides prove knowledge of it with HMAC-SHA256 over both
// ranks, the index, the kind and two fresh nonces (mutual challenge-response). Peers are
// identified by this handshake, never by the order in which they arrive.
#pragma once

#include <cstdint>
#include <string>

#include "distributed/ring/socket.h"

namespace tessera::distributed::detail {

enum class ConnKind : uint32_t { ring = 0, direct = 1 };

struct ConnIdentity {
  int client_rank = -1;  // the side that connected
  int server_rank = -1;  // the side that accepted
  int index = 0;         // connection index (0..C-1 for ring connections)
  ConnKind kind = ConnKind::ring;
};

// Connecting side. Throws std::runtime_error if the server rejects us or fails to prove the
// token (an impostor on the address), naming the peer.
void client_handshake(const Socket& s, const std::string& token, const ConnIdentity& me,
                      const Deadline& deadline, const IoContext& ctx);

// Accepting side. `max_index` bounds ConnIdentity::index for ring connections. Returns the
// verified identity; throws std::runtime_error with the reason (wrong token, wrong rank,
// malformed hello, timeout) after telling the client it was rejected.
ConnIdentity server_handshake(const Socket& s, const std::string& token, int my_rank,
                              int world_size, int max_index, const Deadline& deadline,
                              const std::string& peer_text);

}  // namespace tessera::distributed::detail
