// The authenticated connection handshake (see handshake.h).
#include "distributed/ring/handshake.h"

#include <sys/random.h>

#include <cstring>
#include <stdexcept>

#include "distributed/sha256.h"

namespace tessera::distributed::detail {

namespace {

constexpr uint32_t kHelloMagic = 0x5453484b;  // "TSHK"
constexpr uint32_t kReplyMagic = 0x54534852;  // "TSHR"
constexpr uint16_t kVersion = 1;

enum Status : uint32_t { kOk = 0, kRejected = 1 };

#pragma pack(push, 1)
struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t has_token;
  uint32_t client_rank;
  uint32_t server_rank;
  uint32_t index;
  uint32_t kind;
  uint8_t nonce[32];
};
struct Reply {
  uint32_t magic;
  uint32_t status;
  uint8_t nonce[32];
  uint8_t mac[32];
};
struct Proof {
  uint8_t mac[32];
};
#pragma pack(pop)

void random_bytes(uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) throw std::runtime_error("[ring] getrandom failed");
    p += got;
    n -= static_cast<size_t>(got);
  }
}

// MAC over a role label, the whole hello (both ranks, index, kind, client nonce) and the
// server nonce: a reply cannot be replayed for another connection or role.
Digest256 mac_for(const std::string& token, const char* role, const Hello& h,
                  const uint8_t* server_nonce) {
  std::string msg(role);
  msg.append(reinterpret_cast<const char*>(&h), sizeof(h));
  msg.append(reinterpret_cast<const char*>(server_nonce), 32);
  return hmac_sha256(token, msg);
}

}  // namespace

void client_handshake(const Socket& s, const std::string& token, const ConnIdentity& me,
                      const Deadline& deadline, const IoContext& ctx) {
  Hello h{};
  h.magic = kHelloMagic;
  h.version = kVersion;
  h.has_token = token.empty() ? 0 : 1;
  h.client_rank = static_cast<uint32_t>(me.client_rank);
  h.server_rank = static_cast<uint32_t>(me.server_rank);
  h.index = static_cast<uint32_t>(me.index);
  h.kind = static_cast<uint32_t>(me.kind);
  random_bytes(h.nonce, sizeof(h.nonce));
  send_all(s, &h, sizeof(h), deadline, ctx);
  Reply r{};
  try {
    recv_all(s, &r, sizeof(r), deadline, ctx);
  } catch (const std::runtime_error&) {
    throw std::runtime_error("[ring] rank " + std::to_string(me.client_rank) + ": rank " +
                             std::to_string(me.server_rank) + " (" + ctx.peer_address +
                             ") closed the connection during the handshake: it rejected us "
                             "(check that every rank has the same TESSERA_JOB_TOKEN and "
                             "hostfile) or it failed.");
  }
  if (r.magic != kReplyMagic || r.status != kOk) {
    throw std::runtime_error("[ring] rank " + std::to_string(me.client_rank) + ": rank " +
                             std::to_string(me.server_rank) + " (" + ctx.peer_address +
                             ") rejected the connection handshake.");
  }
  Proof p{};
  if (!token.empty()) {
    Digest256 want = mac_for(token, "tessera-ring-server", h, r.nonce);
    if (!constant_time_equal(want.data(), r.mac, 32)) {
      throw std::runtime_error(
          "[ring] rank " + std::to_string(me.client_rank) + ": the process listening on " +
          ctx.peer_address + " (rank " + std::to_string(me.server_rank) +
          "'s address) does not know the job token; refusing to talk to it.");
    }
    Digest256 mine = mac_for(token, "tessera-ring-client", h, r.nonce);
    std::memcpy(p.mac, mine.data(), 32);
  }
  send_all(s, &p, sizeof(p), deadline, ctx);
  uint32_t final_status = kRejected;
  try {
    recv_all(s, &final_status, sizeof(final_status), deadline, ctx);
  } catch (const std::runtime_error&) {
    final_status = kRejected;
  }
  if (final_status != kOk) {
    throw std::runtime_error("[ring] rank " + std::to_string(me.client_rank) + ": rank " +
                             std::to_string(me.server_rank) + " (" + ctx.peer_address +
                             ") rejected our job token; every rank needs the same "
                             "TESSERA_JOB_TOKEN.");
  }
}

ConnIdentity server_handshake(const Socket& s, const std::string& token, int my_rank,
                              int world_size, int max_index, const Deadline& deadline,
                              const std::string& peer_text) {
  IoContext ctx;
  ctx.op = "handshake";
  ctx.rank = my_rank;
  ctx.peer_address = peer_text;
  ctx.timeout_s = deadline.span_s();
  Hello h{};
  recv_all(s, &h, sizeof(h), deadline, ctx);
  auto reject = [&](const std::string& why) -> ConnIdentity {
    Reply r{};
    r.magic = kReplyMagic;
    r.status = kRejected;
    try {
      send_all(s, &r, sizeof(r), Deadline::after(0.5), ctx);
    } catch (const std::runtime_error&) {
    }
    throw std::runtime_error("[ring] rank " + std::to_string(my_rank) +
                             ": rejected a connection from " + peer_text + ": " + why);
  };
  if (h.magic != kHelloMagic || h.version != kVersion) {
    return reject("not a Tessera ring handshake (bad magic or version)");
  }
  ConnIdentity id;
  id.client_rank = static_cast<int>(h.client_rank);
  id.server_rank = static_cast<int>(h.server_rank);
  id.index = static_cast<int>(h.index);
  id.kind = static_cast<ConnKind>(h.kind);
  if (h.server_rank != static_cast<uint32_t>(my_rank)) {
    return reject("it wants rank " + std::to_string(h.server_rank) + " but this is rank " +
                  std::to_string(my_rank) + " (are the hostfiles the same on every rank?)");
  }
  if (h.client_rank >= static_cast<uint32_t>(world_size) ||
      h.client_rank == static_cast<uint32_t>(my_rank)) {
    return reject("it claims rank " + std::to_string(h.client_rank) + " in a group of " +
                  std::to_string(world_size));
  }
  if (h.kind > 1 || (id.kind == ConnKind::ring && h.index >= static_cast<uint32_t>(max_index)) ||
      (id.kind == ConnKind::direct && h.index != 0)) {
    return reject("bad connection kind/index " + std::to_string(h.kind) + "/" +
                  std::to_string(h.index));
  }
  if ((h.has_token != 0) != !token.empty()) {
    return reject(token.empty() ? "the peer uses a job token but this rank has none"
                                : "the peer has no job token but this rank requires one");
  }
  ctx.peer = id.client_rank;
  Reply r{};
  r.magic = kReplyMagic;
  r.status = kOk;
  random_bytes(r.nonce, sizeof(r.nonce));
  if (!token.empty()) {
    Digest256 m = mac_for(token, "tessera-ring-server", h, r.nonce);
    std::memcpy(r.mac, m.data(), 32);
  }
  send_all(s, &r, sizeof(r), deadline, ctx);
  Proof p{};
  try {
    recv_all(s, &p, sizeof(p), deadline, ctx);
  } catch (const std::runtime_error&) {
    throw std::runtime_error("[ring] rank " + std::to_string(my_rank) +
                             ": a connection from " + peer_text + " claiming rank " +
                             std::to_string(id.client_rank) +
                             " ended before proving the job token (a wrong TESSERA_JOB_TOKEN?)");
  }
  uint32_t status = kOk;
  if (!token.empty()) {
    Digest256 want = mac_for(token, "tessera-ring-client", h, r.nonce);
    if (!constant_time_equal(want.data(), p.mac, 32)) status = kRejected;
  }
  try {
    send_all(s, &status, sizeof(status), deadline, ctx);
  } catch (const std::runtime_error&) {
    if (status == kOk) throw;
  }
  if (status != kOk) {
    throw std::runtime_error("[ring] rank " + std::to_string(my_rank) +
                             ": rejected a connection from " + peer_text + " claiming rank " +
                             std::to_string(id.client_rank) + ": wrong job token (HMAC mismatch)");
  }
  return id;
}

}  // namespace tessera::distributed::detail
