// The ring backend's algorithms (see ring_group.h): which bytes go where, when. Connections
// are set up in ring_group.cpp; bytes move in stream.cpp (TCP) and shm/shm_transport.cpp.
#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "distributed/reduce_kernels.h"
#include "distributed/ring/ring_group.h"
#include "distributed/shm/shm_transport.h"

namespace tessera::distributed::detail {

namespace {

constexpr size_t kMinLaneBytes = 256 << 10;  // below this per rank, one lane is faster
// all_reduce of at most this many bytes times (ranks - 1) gathers every input and reduces
// locally: n - 1 latency hops instead of 2(n - 1), for (n - 1) x the bytes.
constexpr size_t kSmallReduceBytes = 64 << 10;
// With more than 2 ranks, inputs of at most this size go to every rank directly (one hop).
constexpr size_t kDirectBytes = 4 << 10;

// Contiguous split of [0, n) into `parts`: the i-th range.
std::pair<size_t, size_t> split_range(size_t n, size_t parts, size_t i) {
  size_t step = (n + parts - 1) / parts;
  size_t lo = std::min(n, i * step);
  size_t hi = std::min(n, lo + step);
  return {lo, hi};
}

}  // namespace

int RingGroup::lanes_for(size_t bytes) const {
  size_t r = bytes / (static_cast<size_t>(size_) * kMinLaneBytes);
  return static_cast<int>(std::clamp<size_t>(r, 1, static_cast<size_t>(2 * conns_)));
}

// Lane i of a ring operation: connection i / 2, rightwards for even i, leftwards for odd.
long RingGroup::ring_lane(Stream& st, int i, int lanes, const OpDesc& d, uint64_t seq) {
  const size_t c = static_cast<size_t>(i / 2);
  const long dir = (i % 2 == 0) ? 1 : -1;
  st.send_link = dir > 0 ? &right_links_[c] : &left_links_[c];
  st.recv_link = dir > 0 ? &left_links_[c] : &right_links_[c];
  st.header = header_for(d, seq, i, lanes);
  return dir;
}

void RingGroup::ring_reduce(const char* in, char* out, size_t count, Dtype dtype, ReduceOp op,
                            OpKind kind, bool scatter) {
  const size_t es = dtype.size();
  const size_t N = static_cast<size_t>(size_);
  const size_t total = scatter ? count * N : count;
  OpDesc d{kind, dtype_code(dtype), count, total * es};
  const uint64_t seq = coll_seq_++;
  if (!scatter && total * es * (N - 1) <= kSmallReduceBytes) {
    small_reduce(in, out, total, dtype, op, d, seq);
    return;
  }
  const int R = lanes_for(total * es);
  if (scatter && N > 2 && work_.size() < total * es) work_.resize(total * es);
  char* work = scatter ? work_.data() : out;
  auto mod = [&](long x) { return static_cast<size_t>(((x % size_) + size_) % size_); };
  const size_t seg_elems = std::max<size_t>(N, opt_.segment_bytes / es);

  std::vector<Stream> streams(static_cast<size_t>(R));
  for (int i = 0; i < R; ++i) {
    Stream& st = streams[static_cast<size_t>(i)];
    const long dir = ring_lane(st, i, R, d, seq);
    st.dtype = dtype;
    st.op = op;
    st.chunk = opt_.chunk_bytes / es * es;
    st.scratch = scratch(i);
    auto [lo, hi] = split_range(count, static_cast<size_t>(R), static_cast<size_t>(i));
    // The lane's elements [lo, hi) go round the ring in segments of seg_elems: each segment's
    // reduced blocks are sent on while they are still in cache (measured at 64 MiB, 2 ranks:
    // 1.6 GB/s unsegmented, 2.3-2.9 GB/s in 1 MiB segments). A segment's first send uses only
    // this rank's input, so it does not wait for the previous segment's last receive.
    for (size_t a = lo;;) {
      const size_t b = std::min(hi, a + seg_elems);
      // Block k of this segment, in elements: [off(k), off(k) + len(k)).
      const size_t blk = scatter ? 0 : (b - a + N - 1) / N;
      auto off = [&](size_t k) { return scatter ? k * count + a : std::min(b, a + k * blk); };
      auto len = [&](size_t k) { return scatter ? b - a : std::min(b, a + (k + 1) * blk) - off(k); };
      const long r = rank_;
      if (!scatter) {
        for (long s = 0; s < 2 * (size_ - 1); ++s) {
          size_t sb = mod(r - dir * s), rb = mod(r - dir * (s + 1));
          StreamStep step;
          step.send = (s == 0 ? in : out) + off(sb) * es;
          step.send_len = len(sb) * es;
          step.send_ready = s == 0;
          step.recv = out + off(rb) * es;
          step.recv_len = len(rb) * es;
          if (s < size_ - 1) step.reduce_with = in + off(rb) * es;
          st.steps.push_back(step);
        }
      } else {
        for (long s = 0; s < size_ - 1; ++s) {
          size_t sb = mod(r - dir * (s + 1)), rb = mod(r - dir * (s + 2));
          StreamStep step;
          step.send = (s == 0 ? in : work) + off(sb) * es;
          step.send_len = len(sb) * es;
          step.send_ready = s == 0;
          step.recv = (s == size_ - 2) ? out + a * es : work + off(rb) * es;
          step.recv_len = len(rb) * es;
          step.reduce_with = in + off(rb) * es;
          st.steps.push_back(step);
        }
      }
      if (b >= hi) break;
      a = b;
    }
  }
  run_lanes(streams, stream_env(""));
}

// Small all_reduce: a ring all_gather of the inputs (one lane), then every rank reduces the
// gathered inputs in rank order, so every rank computes the same bits.
void RingGroup::small_reduce(const char* in, char* out, size_t count, Dtype dtype, ReduceOp op,
                             const OpDesc& d, uint64_t seq) {
  const size_t B = count * dtype.size();
  const size_t N = static_cast<size_t>(size_);
  if (gather_.size() < B * N) gather_.resize(B * N);
  char* g = gather_.data();
  if (B > 0) std::memcpy(g + static_cast<size_t>(rank_) * B, in, B);
  if (size_ > 2 && B <= kDirectBytes && opt_.direct) {
    // One hop instead of n - 1: every input goes straight to every rank. All sends first:
    // messages this small fit in the socket buffers, so no rank waits for a reader here.
    for (bool sending : {true, false}) {
      for (int k = 1; k < size_; ++k) {
        const int peer = sending ? (rank_ + k) % size_ : (rank_ - k + size_) % size_;
        std::vector<Stream> one(1);
        Stream& st = one[0];
        try {
          (sending ? st.send_link : st.recv_link) = link_to(peer, sending, 0);
        } catch (const std::exception& e) {
          fail(e);
        }
        st.header = header_for(d, seq, k, size_);
        StreamStep step;
        if (sending) {
          step.send = in;
          step.send_len = B;
          step.send_ready = true;
        } else {
          step.recv = g + static_cast<size_t>(peer) * B;
          step.recv_len = B;
        }
        st.steps.push_back(step);
        run_lanes(one, stream_env(""));
      }
    }
  } else {
    std::vector<Stream> streams(1);
    Stream& st = streams[0];
    st.send_link = &right_links_[0];
    st.recv_link = &left_links_[0];
    st.header = header_for(d, seq, 0, 1);
    for (long s = 0; s < size_ - 1; ++s) {
      const size_t sb = static_cast<size_t>((rank_ - s + 2 * size_) % size_);
      const size_t rb = static_cast<size_t>((rank_ - s - 1 + 2 * size_) % size_);
      StreamStep step;
      step.send = g + sb * B;
      step.send_len = B;
      step.recv = g + rb * B;
      step.recv_len = B;
      st.steps.push_back(step);
    }
    run_lanes(streams, stream_env(""));
  }
  reduce_buffers(out, g, g + B, count, dtype, op);
  for (size_t k = 2; k < N; ++k) reduce_buffers(out, out, g + k * B, count, dtype, op);
}

void RingGroup::all_reduce(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op) {
  reduce(in, out, count, dtype, op, false);
}

void RingGroup::all_mean(const void* in, void* out, size_t count, Dtype dtype) {
  reduce(in, out, count, dtype, ReduceOp::sum, false, true);
}

void RingGroup::reduce_scatter(const void* in, void* out, size_t count, Dtype dtype,
                               ReduceOp op) {
  reduce(in, out, count, dtype, op, true);
}

// all_reduce (scatter = false) or reduce_scatter: shared memory when every rank is local,
// else the TCP ring. A mean divides each reduced block over shared memory, and the whole result
// after the TCP and hierarchical algorithms (whose inner collectives are sums).
void RingGroup::reduce(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op,
                       bool scatter, bool mean) {
  const OpKind kind = mean ? OpKind::all_mean : reduce_kind(op, scatter);
  check_usable(op_kind_name(kind));
  std::lock_guard<std::mutex> lk(op_mu_);
  if (size_ == 1) {
    if (in != out) std::memcpy(out, in, count * dtype.size());
    return;
  }
  if (hier_) {
    hier_run([&](Hierarchy&) {
      if (!scatter) {
        hier_all_reduce(in, out, count, dtype, op);
        if (mean) divide_buffer(out, count, dtype, size_);
        return;
      }
      const size_t bytes = count * dtype.size();
      if (bytes == 0) return;
      work_.resize(bytes * static_cast<size_t>(size_));
      hier_all_reduce(in, work_.data(), count * static_cast<size_t>(size_), dtype, op);
      std::memcpy(out, work_.data() + static_cast<size_t>(rank_) * bytes, bytes);
    });
    return;
  }
  if (shm_) {
    try {
      if (scatter) {
        shm_->reduce_scatter(in, out, count, dtype, op, coll_seq_++);
      } else {
        shm_->all_reduce(in, out, count, dtype, op, coll_seq_++, mean ? size_ : 1);
      }
    } catch (const std::exception& e) {
      fail(e);
    }
    return;
  }
  ring_reduce(static_cast<const char*>(in), static_cast<char*>(out), count, dtype, op, kind,
              scatter);
  if (mean) divide_buffer(out, count, dtype, size_);
}

void RingGroup::all_gather(const void* in_v, void* out_v, size_t bytes) {
  check_usable("all_gather");
  std::lock_guard<std::mutex> lk(op_mu_);
  auto* in = static_cast<const char*>(in_v);
  auto* out = static_cast<char*>(out_v);
  if (shm_ && !hier_ && size_ > 1) {
    // Shared memory copies this rank's block itself, after publishing `in`: the peers read
    // `in`, which nobody writes, rather than our output's block, which we would write first.
    try {
      shm_->all_gather(in, out, bytes, coll_seq_++);
    } catch (const std::exception& e) {
      fail(e);
    }
    return;
  }
  if (in != out + static_cast<size_t>(rank_) * bytes && bytes > 0) {
    std::memmove(out + static_cast<size_t>(rank_) * bytes, in, bytes);
  }
  if (size_ == 1) return;
  if (hier_) {
    hier_run([&](Hierarchy&) {
      hier_all_gather(out + static_cast<size_t>(rank_) * bytes, out, bytes);
    });
    return;
  }
  OpDesc d{OpKind::all_gather, kBytesDtype, bytes, bytes};
  const uint64_t seq = coll_seq_++;
  const int R = lanes_for(bytes * static_cast<size_t>(size_));
  auto mod = [&](long x) { return static_cast<size_t>(((x % size_) + size_) % size_); };
  std::vector<Stream> streams(static_cast<size_t>(R));
  for (int i = 0; i < R; ++i) {
    Stream& st = streams[static_cast<size_t>(i)];
    const long dir = ring_lane(st, i, R, d, seq);
    auto [lo, hi] = split_range(bytes, static_cast<size_t>(R), static_cast<size_t>(i));
    // In segments, as ring_reduce: a received block is forwarded while still in cache.
    const size_t seg = std::max<size_t>(1, opt_.segment_bytes / static_cast<size_t>(size_));
    for (size_t a = lo;;) {
      const size_t b = std::min(hi, a + seg);
      for (long s = 0; s < size_ - 1; ++s) {
        size_t sb = mod(rank_ - dir * s), rb = mod(rank_ - dir * (s + 1));
        StreamStep step;
        step.send = out + sb * bytes + a;
        step.send_len = b - a;
        step.send_ready = s == 0;
        step.recv = out + rb * bytes + a;
        step.recv_len = b - a;
        st.steps.push_back(step);
      }
      if (b >= hi) break;
      a = b;
    }
  }
  run_lanes(streams, stream_env(""));
}

void RingGroup::broadcast(void* buf_v, size_t bytes, int root) {
  check_usable("broadcast");
  if (root < 0 || root >= size_) {
    throw std::invalid_argument("[broadcast] root " + std::to_string(root) +
                                " is out of range for a group of size " + std::to_string(size_));
  }
  std::lock_guard<std::mutex> lk(op_mu_);
  if (size_ == 1) return;
  auto* buf = static_cast<char*>(buf_v);
  if (hier_) {
    hier_run([&](Hierarchy&) { hier_broadcast(buf, bytes, root); });
    return;
  }
  if (shm_) {
    try {
      shm_->broadcast(buf, bytes, root, coll_seq_++);
    } catch (const std::exception& e) {
      fail(e);
    }
    return;
  }
  // The root travels in the header's count, so ranks that name different roots get an error
  // naming both instead of a hang or a silent wrong result.
  OpDesc d{OpKind::broadcast, kBytesDtype, static_cast<size_t>(root), bytes};
  const uint64_t seq = coll_seq_++;
  const int pos = (rank_ - root + size_) % size_;
  const int R = std::clamp<int>(static_cast<int>(bytes / kMinLaneBytes), 1, conns_);
  std::vector<Stream> streams(static_cast<size_t>(R));
  for (int i = 0; i < R; ++i) {
    Stream& st = streams[static_cast<size_t>(i)];
    st.header = header_for(d, seq, i, R);
    auto [lo, hi] = split_range(bytes, static_cast<size_t>(R), static_cast<size_t>(i));
    // A chain from the root to the right; the last rank closes the ring with a header-only
    // message to the root, so every rank checks one header against its own.
    st.recv_link = &left_links_[i];
    st.send_link = &right_links_[i];
    StreamStep first;
    if (pos > 0) {
      first.recv = buf + lo;
      first.recv_len = hi - lo;
    }
    if (pos == 0) {
      first.send = buf + lo;
      first.send_len = hi - lo;
      first.send_ready = true;
    }
    st.steps.push_back(first);
    if (pos > 0 && pos < size_ - 1) {
      StreamStep forward;
      forward.send = buf + lo;
      forward.send_len = hi - lo;
      st.steps.push_back(forward);
    }
  }
  run_lanes(streams, stream_env(""));
}

void RingGroup::all_to_all(const void* in_v, void* out_v, size_t bytes) {
  check_usable("all_to_all");
  std::lock_guard<std::mutex> lk(op_mu_);
  auto* in = static_cast<const char*>(in_v);
  auto* out = static_cast<char*>(out_v);
  const size_t r = static_cast<size_t>(rank_);
  if (bytes > 0) std::memmove(out + r * bytes, in + r * bytes, bytes);
  if (size_ == 1) return;
  OpDesc d{OpKind::all_to_all, kBytesDtype, bytes, bytes * static_cast<size_t>(size_)};
  const uint64_t seq = coll_seq_++;
  for (int k = 1; k < size_; ++k) {
    const int dst = (rank_ + k) % size_, src = (rank_ - k + size_) % size_;
    std::vector<Stream> streams(1);
    Stream& st = streams[0];
    try {
      st.send_link = link_to(dst, true, 0);
      st.recv_link = link_to(src, false, 0);
    } catch (const std::exception& e) {
      fail(e);
    }
    st.header = header_for(d, seq, k, size_);
    StreamStep step;
    step.send = in + static_cast<size_t>(dst) * bytes;
    step.send_len = bytes;
    step.recv = out + static_cast<size_t>(src) * bytes;
    step.recv_len = bytes;
    st.steps.push_back(step);
    run_lanes(streams, stream_env(""));
  }
}

void RingGroup::barrier() {
  check_usable("barrier");
  std::lock_guard<std::mutex> lk(op_mu_);
  if (size_ == 1) return;
  if (hier_) {  // all of this host entered, then all of every host
    hier_run([this](Hierarchy& h) {
      in_local([](GroupImpl& g) { g.barrier(); });
      if (h.equal) {
        in_cross([](GroupImpl& g) { g.barrier(); });
        return;
      }
      // Only the leaders meet across hosts: the others wait inside for their leader.
      if (h.local_rank == 0) in_cross([](GroupImpl& g) { g.barrier(); });
      in_local([](GroupImpl& g) { g.barrier(); });
    });
    return;
  }
  if (shm_) {
    try {
      shm_->barrier(coll_seq_++);
    } catch (const std::exception& e) {
      fail(e);
    }
    return;
  }
  uint8_t one = 1, out = 0;
  ring_reduce(reinterpret_cast<const char*>(&one), reinterpret_cast<char*>(&out), 1, uint8,
              ReduceOp::max, OpKind::barrier, false);
}

void RingGroup::send(const void* in, size_t bytes, Dtype dtype, int dst) {
  point_to_point(const_cast<void*>(in), bytes, dtype, dst, true);
}

void RingGroup::recv(void* out, size_t bytes, Dtype dtype, int src) {
  point_to_point(out, bytes, dtype, src, false);
}

// One side of a send/recv pair: striped over the C ring connections for a neighbour, one
// direct connection otherwise. Both sides number their messages per peer (sent_/received_).
void RingGroup::point_to_point(void* buf, size_t bytes, Dtype dtype, int peer, bool sending) {
  const char* what = sending ? "send" : "recv";
  check_usable(what);
  if (peer < 0 || peer >= size_ || peer == rank_) {
    throw std::invalid_argument(std::string("[") + what + "] " +
                                (sending ? "destination" : "source") + " rank " +
                                std::to_string(peer) + " is invalid for rank " +
                                std::to_string(rank_) + " in a group of size " +
                                std::to_string(size_));
  }
  std::lock_guard<std::mutex> lk(op_mu_);
  if (hier_ && hier_->host_of[peer] == hier_->host) {  // same host: its shared memory
    hier_run([&](Hierarchy& h) {
      const int to = h.local_of[peer];
      in_local([&](GroupImpl& g) { sending ? g.send(buf, bytes, dtype, to) : g.recv(buf, bytes, dtype, to); });
    });
    return;
  }
  const bool neighbour = peer == left_ || peer == right_;
  const int R = neighbour ? std::clamp<int>(static_cast<int>(bytes / kMinLaneBytes), 1, conns_) : 1;
  OpDesc d{OpKind::send, dtype_code(dtype), bytes / dtype.size(), bytes};
  auto& counters = sending ? sent_ : received_;
  const uint64_t seq = counters[static_cast<size_t>(peer)]++;
  if (shm_ && shm_->p2p_enabled()) {
    try {
      if (sending) {
        shm_->send(buf, bytes, dtype, peer, seq);
      } else {
        shm_->recv(buf, bytes, dtype, peer, seq);
      }
    } catch (const std::exception& e) {
      fail(e);
    }
    return;
  }
  std::vector<Stream> streams(static_cast<size_t>(R));
  for (int i = 0; i < R; ++i) {
    Stream& st = streams[static_cast<size_t>(i)];
    try {
      (sending ? st.send_link : st.recv_link) = link_to(peer, sending, i);
    } catch (const std::exception& e) {
      fail(e);
    }
    st.header = header_for(d, seq, i, R);
    auto [lo, hi] = split_range(bytes, static_cast<size_t>(R), static_cast<size_t>(i));
    StreamStep step;
    if (sending) {
      step.send = static_cast<const char*>(buf) + lo;
      step.send_len = hi - lo;
    } else {
      step.recv = static_cast<char*>(buf) + lo;
      step.recv_len = hi - lo;
    }
    st.steps.push_back(step);
  }
  run_lanes(streams, stream_env(sending ? "" : " (this rank's recv against its send)"));
}

}  // namespace tessera::distributed::detail
