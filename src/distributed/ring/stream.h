// The pipelined duplex engine of the ring backend: one "lane" sends a sequence of steps to one
// connection while receiving a sequence of steps from another, with every message prefixed by
// a WireHeader that is checked against ours. Received chunks are either written in place or
// reduced into a destination; step s's send may only use what step s-1 has received and
// processed (that is what makes ring algorithms pipelined). collectives.cpp builds the steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "distributed/group_impl.h"
#include "distributed/ring/socket.h"
#include "distributed/spin_policy.h"

namespace tessera::distributed::detail {

// A TCP connection to one peer. The fd is used by at most one sender and one receiver thread.
struct Link {
  Socket sock;
  int peer = -1;
  std::string peer_address;
};

enum class OpKind : uint8_t {
  all_sum = 1,
  all_max,
  all_min,
  all_gather,
  sum_scatter,
  max_scatter,
  min_scatter,
  broadcast,
  all_to_all,
  barrier,
  send,      // point to point (the receiver expects kind send)
  all_mean,  // all_sum divided by the group size
};

const char* op_kind_name(OpKind k);

constexpr uint8_t kBytesDtype = 255;  // ops on raw bytes (all_gather, broadcast, ...)

// Sent before the data of every message on every connection.
struct WireHeader {
  uint32_t magic = 0x54535244;  // "TSRD"
  uint8_t kind = 0;             // OpKind
  uint8_t dtype = kBytesDtype;  // Dtype::Val or kBytesDtype
  uint8_t lane = 0;
  uint8_t lanes = 1;
  uint64_t seq = 0;    // collective number, or message number between a pair for send/recv
  uint64_t count = 0;  // elements (bytes for raw-byte ops; the root for broadcast)
  uint64_t bytes = 0;  // total bytes of the operation on this rank
};
static_assert(sizeof(WireHeader) == 32);

std::string describe_header(const WireHeader& h);  // "all_sum of 7 float32 elements (28 B) ..."

// The header of one operation (lane 0 of 1); raw-byte ops keep dtype kBytesDtype.
WireHeader make_header(OpKind kind, uint64_t seq, uint64_t count, uint64_t bytes,
                       uint8_t dtype = kBytesDtype);
inline uint8_t dtype_code(Dtype d) { return static_cast<uint8_t>(d.val()); }
OpKind reduce_kind(ReduceOp op, bool scatter);  // all_sum / sum_scatter, ...
// Every field equal: what a peer sends for the same operation, lane and chunk.
bool headers_match(const WireHeader& a, const WireHeader& b);

struct StreamStep {
  const char* send = nullptr;  // bytes to send in this step (send_len of them)
  size_t send_len = 0;
  // The bytes to send are ready from the start (this rank's input); otherwise they are what the
  // previous step receives, and may be sent only as far as that step has processed.
  bool send_ready = false;
  char* recv = nullptr;  // destination of this step's received bytes
  size_t recv_len = 0;
  // When set, received chunks land in scratch and recv[i] = op(reduce_with[i], scratch[i]).
  const char* reduce_with = nullptr;
};

struct Stream {
  Link* send_link = nullptr;  // may be null (receive only)
  Link* recv_link = nullptr;  // may be null (send only)
  WireHeader header;          // sent on send_link; the same is expected on recv_link
  std::vector<StreamStep> steps;
  Dtype dtype = float32;  // for reductions
  ReduceOp op = ReduceOp::sum;
  char* scratch = nullptr;  // `chunk` bytes, for reduce steps
  size_t chunk = 0;         // a multiple of the element size
};

struct StreamEnv {
  int rank = -1;
  double timeout_s = 0;  // inactivity limit, 0 = none
  std::string recv_peer_expectation;  // extra text for mismatch errors (e.g. p2p direction)
  SpinPolicy spin;
};

// Runs the stream to completion. Throws std::runtime_error naming the peer on a closed
// connection, a timeout, or a header that differs from ours (a mismatched collective).
void run_stream(Stream& st, const StreamEnv& env);

}  // namespace tessera::distributed::detail
