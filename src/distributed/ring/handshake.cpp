// The authenticated connection handshake (see handshake.h).
#include "distributed/ring/handshake.h"

#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>

#include "core/sha256.h"

namespace tessera::distributed::detail {

namespace {

constexpr uint32_t kHelloMagic = 0x5453484b;  // "TSHK"
constexpr uint32_t kReplyMagic = 0x54534852;  // "TSHR"
constexpr uint16_t kVersion = 2;

// Why a server turned a client away; travels in Reply::status and in the final status word, so
// the client's message names the setting that differs.
enum Status : uint32_t {
  kOk = 0,
  kRejected = 1,          // malformed hello or an identity this rank cannot accept
  kBusy = 2,              // the listener was full: retry
  kWrongRank = 3,         // it wanted another rank at this address
  kTokenPresence = 4,     // one side has a job token, the other none
  kTokenMismatch = 5,     // both have tokens, different ones
  kHostfileDiffers = 6,   // the hostfiles differ
  kShmDiffers = 7,        // TESSERA_RING_SHM differs
  kOlderGroup = 8,        // this listener belongs to an older group of the job: retry
  kNewerGroup = 9,        // the client belongs to an older group (it is going away)
  kWrongHost = 10,        // it claims a rank of this host but connects from another host
};
constexpr uint32_t kFlagShm = 1;

#pragma pack(push, 1)
struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t has_token;
  uint32_t client_rank;
  uint32_t server_rank;
  uint32_t index;
  uint32_t kind;
  uint32_t world_size;
  uint32_t flags;  // kFlagShm
  uint64_t generation;
  uint8_t hostfile[32];
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

// The client's message for a server's refusal, naming what differs and how to make it agree.
std::string refusal_message(uint32_t status, const ConnIdentity& me, const IoContext& ctx) {
  const std::string who = "[ring] rank " + std::to_string(me.client_rank) + ": rank " +
                          std::to_string(me.server_rank) + " (" + ctx.peer_address + ") ";
  switch (status) {
    case kWrongRank:
      return who + "says it is not rank " + std::to_string(me.server_rank) +
             ": the ranks were started with different hostfiles (MLX_HOSTFILE); give every rank "
             "the same file.";
    case kTokenPresence:
      return who + "refused us: one of us has TESSERA_JOB_TOKEN set and the other has not; set "
             "the same token on every rank (tessera launch sets one per job).";
    case kTokenMismatch:
      return who + "refused us: its TESSERA_JOB_TOKEN differs from this rank's; every rank of a "
             "job needs the same token (tessera launch sets one per job).";
    case kHostfileDiffers:
      return who + "refused us: it was started with a different hostfile (MLX_HOSTFILE); give "
             "every rank the same file.";
    case kNewerGroup:
      return who + "is at a later init() of this job than this rank: the ranks called init() "
             "(after clear_backends) different numbers of times.";
    case kWrongHost:
      return who + "refused us: the hostfile places rank " + std::to_string(me.client_rank) +
             " on rank " + std::to_string(me.server_rank) + "'s host, but this process runs on "
             "another host; start each rank on the host its hostfile entry names.";
    case kShmDiffers:
      return who + "refused us: its TESSERA_RING_SHM differs from this rank's; set the same "
             "value on every rank.";
    default:
      return who + "rejected the connection handshake (its log says why).";
  }
}

}  // namespace

void client_handshake(const Socket& s, const JobTerms& terms, const ConnIdentity& me,
                      const Deadline& deadline, const IoContext& ctx_in) {
  IoContext ctx = ctx_in;
  ctx.limit_var = "TESSERA_DIST_CONNECT_TIMEOUT";
  ctx.timeout_s = deadline.span_s();
  const std::string& token = terms.token;
  Hello h{};
  h.magic = kHelloMagic;
  h.version = kVersion;
  h.has_token = token.empty() ? 0 : 1;
  h.client_rank = static_cast<uint32_t>(me.client_rank);
  h.server_rank = static_cast<uint32_t>(me.server_rank);
  h.index = static_cast<uint32_t>(me.index);
  h.kind = static_cast<uint32_t>(me.kind);
  h.world_size = static_cast<uint32_t>(terms.world_size);
  h.generation = terms.generation;
  h.flags = terms.shm ? kFlagShm : 0;
  std::memcpy(h.hostfile, terms.hostfile_digest.data(), sizeof(h.hostfile));
  random_bytes(h.nonce, sizeof(h.nonce));
  try {
    send_all(s, &h, sizeof(h), deadline, ctx);
  } catch (const PeerFailure& e) {
    // Reset before it read a byte (a listener closing with us in its backlog): try again.
    if (e.timeout) throw;
    throw HandshakeRetry(e.what());
  }
  Reply r{};
  try {
    recv_all(s, &r, sizeof(r), deadline, ctx);
  } catch (const std::runtime_error&) {
    throw HandshakeRetry("[ring] rank " + std::to_string(me.client_rank) + ": rank " +
                         std::to_string(me.server_rank) + " (" + ctx.peer_address +
                         ") closed the connection before answering the handshake: it is not a "
                         "Tessera rank of this version, or it failed (see its log).");
  }
  if (r.magic == kReplyMagic && r.status == kBusy) {
    throw HandshakeRetry("[ring] rank " + std::to_string(me.client_rank) + ": rank " +
                        std::to_string(me.server_rank) + " (" + ctx.peer_address +
                        ") turned the connection away: its listener was full (too many "
                        "connections authenticating at once).");
  }
  if (r.magic != kReplyMagic) {
    throw std::runtime_error("[ring] rank " + std::to_string(me.client_rank) + ": the process at " +
                             ctx.peer_address + " (rank " + std::to_string(me.server_rank) +
                             "'s address) does not speak the Tessera ring handshake.");
  }
  if (r.status == kOlderGroup) {
    throw HandshakeRetry("[ring] rank " + std::to_string(me.client_rank) + ": rank " +
                         std::to_string(me.server_rank) + " (" + ctx.peer_address +
                         ") still listens with an older group of this job (init() #" +
                         std::to_string(terms.generation) + " here); its new group is not up.");
  }
  if (r.status != kOk) throw std::runtime_error(refusal_message(r.status, me, ctx));
  Proof p{};
  if (!token.empty()) {
    Digest256 want = mac_for(token, "tessera-ring-server", h, r.nonce);
    if (!constant_time_equal(want.data(), r.mac, 32)) {
      throw std::runtime_error(
          "[ring] rank " + std::to_string(me.client_rank) + ": the process listening on " +
          ctx.peer_address + " (rank " + std::to_string(me.server_rank) +
          "'s address) could not prove this rank's job token: it belongs to another job or its "
          "TESSERA_JOB_TOKEN differs; refusing to talk to it.");
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
  if (final_status != kOk) throw std::runtime_error(refusal_message(final_status, me, ctx));
}

void refuse_busy(const Socket& s) {
  Reply r{};
  r.magic = kReplyMagic;
  r.status = kBusy;
  // Non-blocking best effort: a client that does not read it sees the close instead.
  [[maybe_unused]] ssize_t w = ::send(s.fd(), &r, sizeof(r), MSG_DONTWAIT | MSG_NOSIGNAL);
}

HelloVerdict judge_hello(std::string_view hello, const JobTerms& terms, int my_rank,
                         int world_size, int max_index, const SourceCheck& source_check) {
  static_assert(sizeof(Hello) == kHelloBytes);
  HelloVerdict v;
  auto refuse = [&](Status status, std::string why) {
    v.status = status;
    v.why = std::move(why);
    return v;
  };
  Hello h{};
  if (hello.size() == sizeof(h)) std::memcpy(&h, hello.data(), sizeof(h));
  if (hello.size() != sizeof(h) || h.magic != kHelloMagic || h.version != kVersion) {
    return refuse(kRejected, "not a Tessera ring handshake of this version (bad magic or version)");
  }
  v.claimed = static_cast<int>(std::min<uint32_t>(h.client_rank, INT32_MAX));
  v.id.client_rank = v.claimed;
  v.id.server_rank = static_cast<int>(std::min<uint32_t>(h.server_rank, INT32_MAX));
  v.id.index = static_cast<int>(std::min<uint32_t>(h.index, INT32_MAX));
  v.id.kind = static_cast<ConnKind>(h.kind);
  if (h.server_rank != static_cast<uint32_t>(my_rank)) {
    return refuse(kWrongRank, "it wants rank " + std::to_string(h.server_rank) +
                                  " but this is rank " + std::to_string(my_rank) +
                                  ": the ranks have different hostfiles (MLX_HOSTFILE)");
  }
  if (h.world_size != static_cast<uint32_t>(world_size)) {
    return refuse(kHostfileDiffers, "its hostfile lists " + std::to_string(h.world_size) +
                                        " ranks and this rank's " + std::to_string(world_size) +
                                        " (MLX_HOSTFILE differs between ranks)");
  }
  if (h.generation > terms.generation) {
    v.routine = true;
    return refuse(kOlderGroup, "it is for init() #" + std::to_string(h.generation) +
                                   " and this group is #" + std::to_string(terms.generation) +
                                   " (being torn down); told it to retry");
  }
  if (h.generation < terms.generation) {
    return refuse(kNewerGroup, "it is from an older group of the job (init() #" +
                                   std::to_string(h.generation) + ", this is #" +
                                   std::to_string(terms.generation) + ")");
  }
  if (h.client_rank >= static_cast<uint32_t>(world_size) ||
      h.client_rank == static_cast<uint32_t>(my_rank)) {
    return refuse(kRejected, "rank " + std::to_string(h.client_rank) +
                                 " cannot connect to rank " + std::to_string(my_rank) +
                                 " in a group of " + std::to_string(world_size));
  }
  if (source_check) {
    if (std::string why = source_check(v.id.client_rank); !why.empty()) {
      return refuse(kWrongHost, why);
    }
  }
  if (h.kind > 2 || (v.id.kind == ConnKind::ring && h.index >= static_cast<uint32_t>(max_index)) ||
      (v.id.kind != ConnKind::ring && h.index != 0)) {
    return refuse(kRejected, "bad connection kind/index " + std::to_string(h.kind) + "/" +
                                 std::to_string(h.index));
  }
  if ((h.has_token != 0) != !terms.token.empty()) {
    return refuse(kTokenPresence, terms.token.empty()
                                      ? "it has a TESSERA_JOB_TOKEN and this rank has none"
                                      : "it has no TESSERA_JOB_TOKEN and this rank has one");
  }
  return v;
}

ConnIdentity server_handshake(const Socket& s, const JobTerms& terms, int my_rank,
                              int world_size, int max_index, const Deadline& deadline,
                              const std::string& peer_text, const SourceCheck& source_check) {
  const std::string& token = terms.token;
  IoContext ctx;
  ctx.op = "handshake";
  ctx.rank = my_rank;
  ctx.peer_address = peer_text;
  ctx.timeout_s = deadline.span_s();
  ctx.limit_var = "TESSERA_DIST_CONNECT_TIMEOUT";
  Hello h{};
  // The magic first: a client that is not a Tessera rank (a port scanner, an HTTP request) is
  // named as such instead of timing out while we wait for the rest of a hello.
  constexpr size_t kPrefix = sizeof(h.magic) + sizeof(h.version);
  recv_all(s, &h, kPrefix, deadline, ctx);
  if (h.magic == kHelloMagic && h.version == kVersion) {
    recv_all(s, reinterpret_cast<char*>(&h) + kPrefix, sizeof(h) - kPrefix, deadline, ctx);
  }
  const size_t got = h.magic == kHelloMagic && h.version == kVersion ? sizeof(h) : kPrefix;
  const HelloVerdict v = judge_hello(std::string_view(reinterpret_cast<const char*>(&h), got), terms,
                                     my_rank, world_size, max_index, source_check);
  const int claimed = v.claimed;
  const bool routine = v.routine;
  auto refused = [&](const std::string& why) {
    return HandshakeRejected("[ring] rank " + std::to_string(my_rank) +
                                 ": rejected a connection from " + peer_text +
                                 (claimed >= 0 ? " claiming rank " + std::to_string(claimed) : "") +
                                 ": " + why,
                             claimed, routine);
  };
  if (v.status != kOk) {
    Reply r{};
    r.magic = kReplyMagic;
    r.status = v.status;
    try {
      send_all(s, &r, sizeof(r), Deadline::after(0.5), ctx);
    } catch (const std::runtime_error&) {
    }
    throw refused(v.why);
  }
  const ConnIdentity id = v.id;
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
    // The client found that we cannot prove its token and hung up.
    throw refused("it ended the handshake before proving the job token: its TESSERA_JOB_TOKEN "
                  "differs from this rank's");
  }
  // Only an authenticated peer learns which job setting differs.
  uint32_t status = kOk;
  std::string why;
  if (!token.empty() &&
      !constant_time_equal(mac_for(token, "tessera-ring-client", h, r.nonce).data(), p.mac, 32)) {
    status = kTokenMismatch;
    why = "its TESSERA_JOB_TOKEN differs from this rank's (HMAC mismatch)";
  } else if (std::memcmp(h.hostfile, terms.hostfile_digest.data(), sizeof(h.hostfile)) != 0) {
    status = kHostfileDiffers;
    why = "its hostfile differs from this rank's (MLX_HOSTFILE: the same file on every rank)";
  } else if (((h.flags & kFlagShm) != 0) != terms.shm) {
    status = kShmDiffers;
    why = std::string("it has TESSERA_RING_SHM=") + ((h.flags & kFlagShm) ? "1" : "0") +
          " and this rank " + (terms.shm ? "1" : "0") + " (set the same value on every rank)";
  }
  try {
    send_all(s, &status, sizeof(status), deadline, ctx);
  } catch (const std::runtime_error&) {
    if (status == kOk) throw;
  }
  if (status != kOk) throw refused(why);
  return id;
}

}  // namespace tessera::distributed::detail
