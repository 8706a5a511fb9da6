// The pipelined duplex engine (see stream.h).
#include "core/trace.h"
#include "distributed/ring/stream.h"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "distributed/reduce_kernels.h"

namespace tessera::distributed::detail {

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::all_sum: return "all_sum";
    case OpKind::all_max: return "all_max";
    case OpKind::all_min: return "all_min";
    case OpKind::all_gather: return "all_gather";
    case OpKind::sum_scatter: return "sum_scatter";
    case OpKind::max_scatter: return "max_scatter";
    case OpKind::min_scatter: return "min_scatter";
    case OpKind::broadcast: return "broadcast";
    case OpKind::all_to_all: return "all_to_all";
    case OpKind::barrier: return "barrier";
    case OpKind::send: return "send/recv";
    case OpKind::all_mean: return "all_mean";
  }
  return "unknown operation";
}

namespace {

std::string dtype_text(uint8_t d) {
  if (d == kBytesDtype) return "bytes";
  if (d < kNumDtypes) return dtype_name(kAllDtypes[d]);
  return "dtype#" + std::to_string(d);
}

}  // namespace

std::string describe_header(const WireHeader& h) {
  std::string s = op_kind_name(static_cast<OpKind>(h.kind));
  if (static_cast<OpKind>(h.kind) == OpKind::broadcast) {
    s += " of " + format_bytes(h.bytes) + " from root " + std::to_string(h.count);
  } else if (h.dtype == kBytesDtype) {
    s += " of " + format_bytes(h.bytes);
  } else {
    s += " of " + std::to_string(h.count) + " " + dtype_text(h.dtype) + " elements (" +
         format_bytes(h.bytes) + ")";
  }
  s += (static_cast<OpKind>(h.kind) == OpKind::send ? " as message #" : " as collective #") +
       std::to_string(h.seq);
  return s;
}

WireHeader make_header(OpKind kind, uint64_t seq, uint64_t count, uint64_t bytes, uint8_t dtype) {
  WireHeader h;
  h.kind = static_cast<uint8_t>(kind);
  h.dtype = dtype;
  h.seq = seq;
  h.count = count;
  h.bytes = bytes;
  return h;
}

OpKind reduce_kind(ReduceOp op, bool scatter) {
  switch (op) {
    case ReduceOp::sum: return scatter ? OpKind::sum_scatter : OpKind::all_sum;
    case ReduceOp::max: return scatter ? OpKind::max_scatter : OpKind::all_max;
    case ReduceOp::min: return scatter ? OpKind::min_scatter : OpKind::all_min;
  }
  return OpKind::all_sum;
}

bool headers_match(const WireHeader& a, const WireHeader& b) {
  return a.magic == b.magic && a.kind == b.kind && a.dtype == b.dtype && a.lane == b.lane &&
         a.lanes == b.lanes && a.seq == b.seq && a.count == b.count && a.bytes == b.bytes;
}

namespace {

bool would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

}  // namespace

void run_stream(Stream& st, const StreamEnv& env) {
  constexpr size_t H = sizeof(WireHeader);
  constexpr size_t kMaxIo = size_t(1) << 30;
  const int S = static_cast<int>(st.steps.size());
  const size_t es = st.header.dtype == kBytesDtype ? 1 : size_t(kAllDtypes[st.header.dtype].size());

  IoContext sctx, rctx;
  for (IoContext* c : {&sctx, &rctx}) {
    c->op = op_kind_name(static_cast<OpKind>(st.header.kind));
    c->bytes = st.header.bytes;
    c->dtype = "";
    c->rank = env.rank;
    c->timeout_s = env.timeout_s;
  }
  std::string dname = st.header.dtype == kBytesDtype ? "" : dtype_text(st.header.dtype);
  sctx.dtype = rctx.dtype = dname.c_str();
  if (st.send_link) {
    sctx.peer = st.send_link->peer;
    sctx.peer_address = st.send_link->peer_address;
  }
  if (st.recv_link) {
    rctx.peer = st.recv_link->peer;
    rctx.peer_address = st.recv_link->peer_address;
  }

  size_t hs = st.send_link ? 0 : H;  // header bytes sent
  size_t hr = st.recv_link ? 0 : H;  // header bytes received
  WireHeader peer_hdr;
  int ss = 0;                        // send step
  size_t spos = 0;                   // bytes sent in step ss
  int rs = 0;                        // recv step
  size_t rpos = 0;                   // bytes received in step rs
  size_t cstart = 0;                 // start of the chunk being received (reduce steps)
  std::vector<size_t> done(S, 0);    // processed bytes per recv step
  if (!st.send_link) ss = S;
  if (!st.recv_link) rs = S;

  auto skip_send = [&] {
    while (ss < S && spos >= st.steps[ss].send_len) {
      ++ss;
      spos = 0;
    }
  };
  auto skip_recv = [&] {
    while (rs < S && rpos >= st.steps[rs].recv_len) {
      done[rs] = st.steps[rs].recv_len;
      ++rs;
      rpos = 0;
      cstart = 0;
    }
  };
  auto send_limit = [&]() -> size_t {
    const StreamStep& step = st.steps[ss];
    if (ss == 0 || step.send_ready || rs > ss - 1) return step.send_len;
    if (rs == ss - 1) return std::min(step.send_len, done[ss - 1]);
    return 0;
  };
  auto check_header = [&] {
    if (!headers_match(peer_hdr, st.header)) {
      if (peer_hdr.magic != st.header.magic) {
        throw std::runtime_error("[ring] rank " + std::to_string(env.rank) +
                                 ": received garbage instead of a message header from rank " +
                                 std::to_string(rctx.peer) + " (" + rctx.peer_address + ") " +
                                 describe_op(rctx) +
                                 "; the ranks are out of step (an earlier mismatched call?).");
      }
      throw std::runtime_error(
          "[ring] rank " + std::to_string(env.rank) + ": mismatched operation with rank " +
          std::to_string(rctx.peer) + " (" + rctx.peer_address + "): this rank called " +
          describe_header(st.header) + ", rank " + std::to_string(rctx.peer) + " called " +
          describe_header(peer_hdr) + env.recv_peer_expectation +
          ". Every rank must call the same collectives with the same sizes and dtypes in the "
          "same order.");
    }
  };

  skip_send();
  skip_recv();
  const int timeout_ms = env.timeout_s > 0 ? static_cast<int>(env.timeout_s * 1000) : -1;
  using Clock = std::chrono::steady_clock;
  const auto spin_for = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(env.spin.spin_s));
  bool spinning = false;
  Clock::time_point spin_end;

  while (true) {
    const bool send_pending = hs < H || ss < S;
    const bool recv_pending = hr < H || rs < S;
    if (!send_pending && !recv_pending) break;
    bool progress = false;
    bool want_out = false, want_in = false;

    if (send_pending) {
      iovec iov[2];
      int n_iov = 0;
      if (hs < H) iov[n_iov++] = {reinterpret_cast<char*>(&st.header) + hs, H - hs};
      size_t lim = ss < S ? send_limit() : 0;
      if (ss < S && lim > spos) {
        iov[n_iov++] = {const_cast<char*>(st.steps[ss].send) + spos,
                        std::min(lim - spos, kMaxIo)};
      }
      if (n_iov > 0) {
        msghdr mh{};
        mh.msg_iov = iov;
        mh.msg_iovlen = static_cast<size_t>(n_iov);
        ssize_t n = ::sendmsg(st.send_link->sock.fd(), &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
          progress = true;
          size_t m = static_cast<size_t>(n);
          if (hs < H) {
            size_t t = std::min(m, H - hs);
            hs += t;
            m -= t;
          }
          spos += m;
          skip_send();
        } else if (n < 0 && !would_block(errno)) {
          throw_peer_closed(sctx, "sending to it", errno);
        } else {
          want_out = true;
        }
      }
    }

    if (recv_pending) {
      iovec iov[2];
      int n_iov = 0;
      if (hr < H) iov[n_iov++] = {reinterpret_cast<char*>(&peer_hdr) + hr, H - hr};
      if (rs < S) {
        const StreamStep& step = st.steps[rs];
        if (step.reduce_with) {
          size_t cend = std::min(cstart + st.chunk, step.recv_len);
          iov[n_iov++] = {st.scratch + (rpos - cstart), cend - rpos};
        } else {
          iov[n_iov++] = {step.recv + rpos, std::min(step.recv_len - rpos, kMaxIo)};
        }
      }
      msghdr mh{};
      mh.msg_iov = iov;
      mh.msg_iovlen = static_cast<size_t>(n_iov);
      ssize_t n = ::recvmsg(st.recv_link->sock.fd(), &mh, MSG_DONTWAIT);
      if (n > 0) {
        progress = true;
        size_t m = static_cast<size_t>(n);
        if (hr < H) {
          size_t t = std::min(m, H - hr);
          hr += t;
          m -= t;
          if (hr == H) check_header();
        }
        if (m > 0) {
          const StreamStep& step = st.steps[rs];
          rpos += m;
          if (step.reduce_with) {
            size_t cend = std::min(cstart + st.chunk, step.recv_len);
            if (rpos == cend) {
              reduce_buffers(step.recv + cstart, step.reduce_with + cstart, st.scratch,
                             (cend - cstart) / es, st.dtype, st.op);
              done[rs] = cend;
              cstart = cend;
            }
          } else {
            done[rs] = rpos;
          }
          skip_recv();
        }
      } else if (n == 0) {
        throw_peer_closed(rctx, "receiving from it", 0);
      } else if (!would_block(errno)) {
        throw_peer_closed(rctx, "receiving from it", errno);
      } else {
        want_in = true;
      }
    }

    if (progress) {
      spinning = false;
      continue;
    }
    // Bounded busy-poll (retrying the non-blocking calls above) before sleeping in poll().
    if (env.spin.spin_s > 0) {
      auto t = Clock::now();
      if (!spinning) {
        spinning = true;
        spin_end = t + spin_for;
        continue;
      }
      if (t < spin_end) {
        if (env.spin.yield) sched_yield();
        continue;
      }
      spinning = false;
    }
    pollfd pf[2];
    int np = 0;
    if (want_out) pf[np++] = {st.send_link->sock.fd(), POLLOUT, 0};
    if (want_in) pf[np++] = {st.recv_link->sock.fd(), POLLIN, 0};
    if (np == 0) continue;  // cannot happen: a pending side without progress wants I/O
    int rc = 0;
    trace::WaitScope waiting;
    for (int waited = 0;;) {  // in slices, so that an interrupt is seen within one
      const int slice = timeout_ms < 0 ? kInterruptSliceMs : std::min(kInterruptSliceMs, timeout_ms - waited);
      rc = ::poll(pf, static_cast<nfds_t>(np), slice);
      if (rc != 0) break;
      check_interrupt(want_in ? rctx : sctx);
      waited += slice;
      if (timeout_ms >= 0 && waited >= timeout_ms) break;
    }
    if (rc == 0) throw_timeout(want_in ? rctx : sctx);
    if (rc < 0 && errno != EINTR) {
      throw std::runtime_error("[ring] rank " + std::to_string(env.rank) + ": poll failed: " +
                               std::strerror(errno));
    }
  }
}

}  // namespace tessera::distributed::detail
