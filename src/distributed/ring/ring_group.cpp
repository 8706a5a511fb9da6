// Ring algorithms and connection management of the ring backend (see ring_group.h). Byte
// movement lives in stream.cpp/socket.cpp; this file decides which bytes go where, when.
#include "distributed/ring/ring_group.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include "distributed/reduce_kernels.h"
#include "distributed/ring/handshake.h"
#include "distributed/shm/shm_transport.h"
#include "tessera/config.h"

namespace tessera::distributed::detail {

namespace {

constexpr size_t kMinLaneBytes = 256 << 10;  // below this per rank, one lane is faster
// all_reduce of at most this many bytes times (ranks - 1) gathers every input and reduces
// locally: n - 1 latency hops instead of 2(n - 1), for (n - 1) x the bytes.
constexpr size_t kSmallReduceBytes = 64 << 10;
// With more than 2 ranks, inputs of at most this size go to every rank directly (one hop).
constexpr size_t kDirectBytes = 4 << 10;

int validated_rank(int rank, const Hostfile& hf) {
  if (hf.size() < 1) throw std::invalid_argument("[ring] the hostfile lists no ranks");
  if (rank < 0 || rank >= hf.size()) {
    throw std::invalid_argument("[ring] rank " + std::to_string(rank) +
                                " is out of range for a hostfile of " +
                                std::to_string(hf.size()) + " ranks (valid: 0.." +
                                std::to_string(hf.size() - 1) + ")");
  }
  return rank;
}

uint8_t dtype_code(Dtype d) { return static_cast<uint8_t>(d.val()); }

OpKind reduce_kind(ReduceOp op, bool scatter) {
  switch (op) {
    case ReduceOp::sum: return scatter ? OpKind::sum_scatter : OpKind::all_sum;
    case ReduceOp::max: return scatter ? OpKind::max_scatter : OpKind::all_max;
    case ReduceOp::min: return scatter ? OpKind::min_scatter : OpKind::all_min;
  }
  return OpKind::all_sum;
}

// Contiguous split of [0, n) into `parts`: the i-th range.
std::pair<size_t, size_t> split_range(size_t n, size_t parts, size_t i) {
  size_t step = (n + parts - 1) / parts;
  size_t lo = std::min(n, i * step);
  size_t hi = std::min(n, lo + step);
  return {lo, hi};
}

}  // namespace

RingOptions RingOptions::from_config() {
  RingOptions o;
  o.timeout_s = static_cast<double>(config::get_int("TESSERA_DIST_TIMEOUT"));
  o.connect_timeout_s = static_cast<double>(config::get_int("TESSERA_DIST_CONNECT_TIMEOUT"));
  if (auto t = config::get_string("TESSERA_JOB_TOKEN")) o.token = *t;
  o.shm = config::get_bool("TESSERA_RING_SHM");
  o.verbose = config::get_bool("TESSERA_RING_VERBOSE");
  o.spin_s = static_cast<double>(config::get_int("TESSERA_DIST_SPIN_US")) * 1e-6;
  return o;
}

bool host_oversubscribed(int local_ranks) {
  cpu_set_t cpus;
  int n = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 0;
  if (n <= 0) n = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  return local_ranks > n;
}

StreamEnv RingGroup::stream_env(const char* recv_expectation) const {
  return StreamEnv{rank_, opt_.timeout_s, recv_expectation, spin_};
}

RingGroup::RingGroup(int rank, Hostfile hostfile, RingOptions options)
    : RingGroup(rank, std::move(hostfile), std::move(options), std::vector<Socket>{}) {}

RingGroup::RingGroup(int rank, Hostfile hostfile, RingOptions options,
                     std::vector<Socket> listeners)
    : rank_(validated_rank(rank, hostfile)),
      size_(hostfile.size()),
      left_((rank_ - 1 + size_) % size_),
      right_((rank_ + 1) % size_),
      hostfile_(std::move(hostfile)),
      opt_(std::move(options)) {
  conns_ = hostfile_.connections();
  int local_ranks = 0;
  for (int r = 0; r < size_; ++r) local_ranks += is_local_address(hostfile_.ranks[r][0]) ? 1 : 0;
  spin_.spin_s = opt_.spin_s;
  spin_.yield = host_oversubscribed(local_ranks);
  sent_.assign(static_cast<size_t>(size_), 0);
  received_.assign(static_cast<size_t>(size_), 0);
  if (size_ == 1) return;

  if (!listeners.empty()) {
    if (static_cast<int>(listeners.size()) != conns_) {
      throw std::invalid_argument("[ring] rank " + std::to_string(rank_) + ": " +
                                  std::to_string(listeners.size()) + " listeners given for " +
                                  std::to_string(conns_) + " connections per rank");
    }
    listeners_ = std::move(listeners);
  } else {
    for (int c = 0; c < conns_; ++c) {
      listeners_.push_back(listen_on(hostfile_.ranks[rank_][c], rank_));
    }
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("[ring] pipe2 failed");
  wake_read_ = Socket(fds[0]);
  wake_write_ = Socket(fds[1]);
  pending_left_.resize(static_cast<size_t>(conns_));
  acceptor_ = std::thread([this] { accept_loop(); });

  try {
    const Deadline deadline = Deadline::after(opt_.connect_timeout_s);
    for (int c = 0; c < conns_; ++c) {
      const HostAddress& addr = hostfile_.ranks[right_][c];
      if (opt_.verbose) {
        std::cerr << "[ring] rank " << rank_ << ": connecting to rank " << right_ << " ("
                  << addr.text() << "), connection " << c << "\n";
      }
      Link l;
      l.peer = right_;
      l.peer_address = addr.text();
      l.sock = connect_with_backoff(addr, deadline, rank_, right_, opt_.verbose);
      IoContext ctx;
      ctx.op = "handshake";
      ctx.rank = rank_;
      ctx.peer = right_;
      ctx.peer_address = l.peer_address;
      client_handshake(l.sock, opt_.token, {rank_, right_, c, ConnKind::ring}, deadline, ctx);
      right_links_.push_back(std::move(l));
    }
    std::unique_lock<std::mutex> lk(accept_mu_);
    auto all_in = [&] {
      return std::all_of(pending_left_.begin(), pending_left_.end(),
                         [](const auto& p) { return p != nullptr; });
    };
    bool ok = opt_.connect_timeout_s > 0
                  ? accept_cv_.wait_for(lk, std::chrono::duration<double>(opt_.connect_timeout_s),
                                        all_in)
                  : (accept_cv_.wait(lk, all_in), true);
    if (!ok) {
      throw std::runtime_error(
          "[ring] rank " + std::to_string(rank_) + ": rank " + std::to_string(left_) + " (" +
          hostfile_.ranks[left_][0].text() + ") did not connect within " +
          std::to_string(static_cast<int>(opt_.connect_timeout_s)) +
          " s. Is it running with the same hostfile and TESSERA_JOB_TOKEN? Raise "
          "TESSERA_DIST_CONNECT_TIMEOUT if it starts late.");
    }
    for (auto& p : pending_left_) left_links_.push_back(std::move(*p));
    pending_left_.clear();
  } catch (...) {
    {
      std::lock_guard<std::mutex> lk(accept_mu_);
      stopping_ = true;
    }
    char b = 1;
    [[maybe_unused]] ssize_t w = ::write(wake_write_.fd(), &b, 1);
    acceptor_.join();
    throw;
  }
  if (opt_.verbose) std::cerr << "[ring] rank " << rank_ << ": ring connected\n";
  if (2 * conns_ - 1 > 0) pool_ = std::make_unique<LanePool>(2 * conns_ - 1);
  scratch_.resize(static_cast<size_t>(2 * conns_));
  if (opt_.shm) setup_shm();
}

RingGroup::~RingGroup() {
  if (acceptor_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(accept_mu_);
      stopping_ = true;
    }
    char b = 1;
    [[maybe_unused]] ssize_t w = ::write(wake_write_.fd(), &b, 1);
    acceptor_.join();
  }
  pool_.reset();
  shm_.reset();
}

void RingGroup::accept_loop() {
  while (true) {
    std::vector<pollfd> pf;
    for (auto& l : listeners_) pf.push_back({l.fd(), POLLIN, 0});
    pf.push_back({wake_read_.fd(), POLLIN, 0});
    int rc = ::poll(pf.data(), pf.size(), -1);
    if (rc < 0) continue;
    if (pf.back().revents) return;
    for (size_t i = 0; i + 1 < pf.size(); ++i) {
      if (!(pf[i].revents & POLLIN)) continue;
      std::string peer_text = "?";
      Socket s = accept_until(listeners_[i], Deadline::after(0.001), &peer_text);
      if (!s.valid()) continue;
      s.set_nodelay();
      ConnIdentity id;
      try {
        id = server_handshake(s, opt_.token, rank_, size_, conns_,
                              Deadline::after(std::min(opt_.connect_timeout_s, 10.0)), peer_text);
      } catch (const std::exception& e) {
        std::cerr << e.what() << " (connection closed; still waiting for the right peer)\n";
        continue;
      }
      auto link = std::make_unique<Link>();
      link->peer = id.client_rank;
      link->peer_address = hostfile_.ranks[id.client_rank][0].text();
      link->sock = std::move(s);
      std::lock_guard<std::mutex> lk(accept_mu_);
      if (id.kind == ConnKind::ring) {
        if (id.client_rank != left_ || pending_left_.empty() ||
            pending_left_[static_cast<size_t>(id.index)]) {
          std::cerr << "[ring] rank " << rank_ << ": rejected an unexpected ring connection "
                    << id.index << " from rank " << id.client_rank << " (" << peer_text
                    << "); only rank " << left_ << " connects here, once per index\n";
          continue;
        }
        if (opt_.verbose) {
          std::cerr << "[ring] rank " << rank_ << ": accepted connection " << id.index
                    << " from rank " << id.client_rank << "\n";
        }
        pending_left_[static_cast<size_t>(id.index)] = std::move(link);
      } else {
        if (direct_.count(id.client_rank) || id.client_rank > rank_) {
          std::cerr << "[ring] rank " << rank_ << ": rejected an unexpected direct connection "
                    << "from rank " << id.client_rank << " (" << peer_text << ")\n";
          continue;
        }
        direct_[id.client_rank] = std::move(link);
      }
      accept_cv_.notify_all();
    }
  }
}

Link* RingGroup::direct_link(int peer) {
  std::unique_lock<std::mutex> lk(accept_mu_);
  auto it = direct_.find(peer);
  if (it != direct_.end()) return it->second.get();
  const HostAddress& addr = hostfile_.ranks[peer][0];
  if (rank_ < peer) {  // the lower rank of a pair opens the connection
    lk.unlock();
    auto l = std::make_unique<Link>();
    l->peer = peer;
    l->peer_address = addr.text();
    Deadline d = Deadline::after(opt_.connect_timeout_s);
    l->sock = connect_with_backoff(addr, d, rank_, peer, opt_.verbose);
    IoContext ctx;
    ctx.op = "handshake";
    ctx.rank = rank_;
    ctx.peer = peer;
    ctx.peer_address = l->peer_address;
    client_handshake(l->sock, opt_.token, {rank_, peer, 0, ConnKind::direct}, d, ctx);
    lk.lock();
    Link* p = l.get();
    direct_[peer] = std::move(l);
    return p;
  }
  auto ready = [&] { return direct_.count(peer) > 0 || broken_.load(); };
  bool ok = opt_.timeout_s > 0
                ? accept_cv_.wait_for(lk, std::chrono::duration<double>(opt_.timeout_s), ready)
                : (accept_cv_.wait(lk, ready), true);
  if (broken_) throw std::runtime_error("[ring] rank " + std::to_string(rank_) + ": aborted");
  if (!ok) {
    throw std::runtime_error("[ring] rank " + std::to_string(rank_) + ": rank " +
                             std::to_string(peer) + " (" + addr.text() +
                             ") did not open its direct connection within " +
                             std::to_string(static_cast<int>(opt_.timeout_s)) +
                             " s; is it calling the matching send/recv? Raise "
                             "TESSERA_DIST_TIMEOUT if it is just late.");
  }
  return direct_[peer].get();
}

Link* RingGroup::link_to(int peer, bool sending, int conn) {
  auto c = static_cast<size_t>(conn);
  if (sending) {
    if (peer == right_) return &right_links_[c];
    if (peer == left_) return &left_links_[c];
  } else {
    if (peer == left_) return &left_links_[c];
    if (peer == right_) return &right_links_[c];
  }
  return direct_link(peer);
}

WireHeader RingGroup::header_for(const OpDesc& d, uint64_t seq, int lane, int lanes) const {
  WireHeader h;
  h.kind = static_cast<uint8_t>(d.kind);
  h.dtype = d.dtype;
  h.lane = static_cast<uint8_t>(lane);
  h.lanes = static_cast<uint8_t>(lanes);
  h.seq = seq;
  h.count = d.count;
  h.bytes = d.bytes;
  return h;
}

int RingGroup::lanes_for(size_t bytes) const {
  size_t r = bytes / (static_cast<size_t>(size_) * kMinLaneBytes);
  return static_cast<int>(std::clamp<size_t>(r, 1, static_cast<size_t>(2 * conns_)));
}

char* RingGroup::scratch(int lane) {
  auto& s = scratch_[static_cast<size_t>(lane)];
  if (s.size() < opt_.chunk_bytes) s.resize(opt_.chunk_bytes);
  return s.data();
}

void RingGroup::check_usable(const char* op) {
  if (broken_) {
    std::lock_guard<std::mutex> lk(err_mu_);
    throw std::runtime_error("[ring] rank " + std::to_string(rank_) + ": cannot run " + op +
                             ": the group is unusable after an earlier failure: " +
                             first_error_);
  }
}

void RingGroup::abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lk(err_mu_);
    if (first_error_.empty()) first_error_ = why;
  }
  broken_ = true;
  for (auto& l : right_links_) l.sock.shutdown_both();
  for (auto& l : left_links_) l.sock.shutdown_both();
  {
    std::lock_guard<std::mutex> lk(accept_mu_);
    for (auto& [r, l] : direct_) l->sock.shutdown_both();
  }
  accept_cv_.notify_all();
  if (shm_) shm_->abort();
}

void RingGroup::fail(const std::string& msg) {
  abort(msg);
  std::lock_guard<std::mutex> lk(err_mu_);
  throw std::runtime_error(first_error_);
}

void RingGroup::run_lanes(std::vector<Stream>& streams, const StreamEnv& env) {
  if (streams.size() == 1) {
    try {
      run_stream(streams[0], env);
    } catch (const std::exception& e) {
      fail(e.what());
    }
    return;
  }
  std::vector<std::function<void()>> jobs;
  for (auto& st : streams) {
    jobs.emplace_back([this, &st, &env] {
      try {
        run_stream(st, env);
      } catch (const std::exception& e) {
        abort(e.what());  // wakes the other lanes at once
        throw;
      }
    });
  }
  auto errs = pool_->run(jobs);
  for (auto& e : errs) {
    if (e) {
      std::lock_guard<std::mutex> lk(err_mu_);
      throw std::runtime_error(first_error_);
    }
  }
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
    const int c = i / 2;
    const long dir = (i % 2 == 0) ? 1 : -1;
    st.send_link = dir > 0 ? &right_links_[c] : &left_links_[c];
    st.recv_link = dir > 0 ? &left_links_[c] : &right_links_[c];
    st.header = header_for(d, seq, i, R);
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
  if (size_ > 2 && B <= kDirectBytes) {
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
          fail(e.what());
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
  const OpKind kind = reduce_kind(op, false);
  check_usable(op_kind_name(kind));
  std::lock_guard<std::mutex> lk(op_mu_);
  if (size_ == 1) {
    if (in != out) std::memcpy(out, in, count * dtype.size());
    return;
  }
  if (shm_) {
    try {
      shm_->all_reduce(in, out, count, dtype, op, coll_seq_++);
    } catch (const std::exception& e) {
      fail(e.what());
    }
    return;
  }
  ring_reduce(static_cast<const char*>(in), static_cast<char*>(out), count, dtype, op, kind,
              false);
}

void RingGroup::reduce_scatter(const void* in, void* out, size_t count, Dtype dtype,
                               ReduceOp op) {
  const OpKind kind = reduce_kind(op, true);
  check_usable(op_kind_name(kind));
  std::lock_guard<std::mutex> lk(op_mu_);
  if (size_ == 1) {
    if (in != out) std::memcpy(out, in, count * dtype.size());
    return;
  }
  if (shm_) {
    try {
      shm_->reduce_scatter(in, out, count, dtype, op, coll_seq_++);
    } catch (const std::exception& e) {
      fail(e.what());
    }
    return;
  }
  ring_reduce(static_cast<const char*>(in), static_cast<char*>(out), count, dtype, op, kind,
              true);
}

void RingGroup::all_gather(const void* in_v, void* out_v, size_t bytes) {
  check_usable("all_gather");
  std::lock_guard<std::mutex> lk(op_mu_);
  auto* in = static_cast<const char*>(in_v);
  auto* out = static_cast<char*>(out_v);
  if (in != out + static_cast<size_t>(rank_) * bytes && bytes > 0) {
    std::memmove(out + static_cast<size_t>(rank_) * bytes, in, bytes);
  }
  if (size_ == 1) return;
  if (shm_) {
    try {
      shm_->all_gather(out + static_cast<size_t>(rank_) * bytes, out, bytes, coll_seq_++);
    } catch (const std::exception& e) {
      fail(e.what());
    }
    return;
  }
  OpDesc d{OpKind::all_gather, kBytesDtype, bytes, bytes};
  const uint64_t seq = coll_seq_++;
  const int R = lanes_for(bytes * static_cast<size_t>(size_));
  auto mod = [&](long x) { return static_cast<size_t>(((x % size_) + size_) % size_); };
  std::vector<Stream> streams(static_cast<size_t>(R));
  for (int i = 0; i < R; ++i) {
    Stream& st = streams[static_cast<size_t>(i)];
    const int c = i / 2;
    const long dir = (i % 2 == 0) ? 1 : -1;
    st.send_link = dir > 0 ? &right_links_[c] : &left_links_[c];
    st.recv_link = dir > 0 ? &left_links_[c] : &right_links_[c];
    st.header = header_for(d, seq, i, R);
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
      fail(e.what());
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
  if (shm_) {
    try {
      shm_->barrier(coll_seq_++);
    } catch (const std::exception& e) {
      fail(e.what());
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
      fail(e.what());
    }
    return;
  }
  std::vector<Stream> streams(static_cast<size_t>(R));
  for (int i = 0; i < R; ++i) {
    Stream& st = streams[static_cast<size_t>(i)];
    try {
      (sending ? st.send_link : st.recv_link) = link_to(peer, sending, i);
    } catch (const std::exception& e) {
      fail(e.what());
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

// MPI_Comm_split semantics: ranks with the same color form a group ordered by (key, rank).
// Every rank of this group takes part. Each binds fresh listeners on its own hostfile hosts
// (ephemeral ports), the (color, key, ports) records are exchanged with an all_gather here,
// and the sub-group connects its own ring over new, authenticated connections.
std::shared_ptr<GroupImpl> RingGroup::split(int color, int key) {
  check_usable("split");
  if (key < 0) key = rank_;
  const size_t C = static_cast<size_t>(std::max(conns_, 1));
  const size_t rec = 2 + C;  // color, key, one port per connection
  std::vector<Socket> listeners;
  std::vector<int32_t> mine(rec, 0);
  mine[0] = color;
  mine[1] = key;
  if (size_ > 1) {
    for (size_t c = 0; c < C; ++c) {
      HostAddress a = hostfile_.ranks[rank_][c];
      a.port = 0;
      Socket s = listen_on(a, rank_);
      mine[2 + c] = local_port(s);
      listeners.push_back(std::move(s));
    }
  }
  std::vector<int32_t> all(rec * static_cast<size_t>(size_), 0);
  all_gather(mine.data(), all.data(), rec * sizeof(int32_t));

  std::vector<int> members;
  for (int r = 0; r < size_; ++r) {
    if (all[static_cast<size_t>(r) * rec] == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[static_cast<size_t>(a) * rec + 1] < all[static_cast<size_t>(b) * rec + 1];
  });
  Hostfile sub;
  int new_rank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    const int m = members[i];
    if (m == rank_) new_rank = static_cast<int>(i);
    std::vector<HostAddress> addrs;
    for (size_t c = 0; c < C && c < hostfile_.ranks[m].size(); ++c) {
      HostAddress a = hostfile_.ranks[m][c];
      a.port = all[static_cast<size_t>(m) * rec + 2 + c];
      addrs.push_back(a);
    }
    sub.ranks.push_back(std::move(addrs));
  }
  if (members.size() == 1) listeners.clear();
  if (opt_.verbose) {
    std::cerr << "[ring] rank " << rank_ << ": split(color " << color << ", key " << key
              << ") -> rank " << new_rank << " of " << members.size() << "\n";
  }
  return std::make_shared<RingGroup>(new_rank, std::move(sub), opt_, std::move(listeners));
}

void RingGroup::setup_shm() {
  for (int r = 0; r < size_; ++r) {
    if (!is_local_address(hostfile_.ranks[r][0])) return;  // shm only when every rank is here
  }
  auto exchange = [this](const void* mine, void* all, size_t bytes) {
    // The names travel over TCP before shm_ is set, so this is the TCP all_gather.
    all_gather(mine, all, bytes);
  };
  shm_ = ShmTransport::create(rank_, size_, opt_.timeout_s, spin_, exchange,
                              [this]() -> std::vector<int> {
                                std::vector<int> fds;
                                for (auto& l : left_links_) fds.push_back(l.sock.fd());
                                for (auto& l : right_links_) fds.push_back(l.sock.fd());
                                return fds;
                              }());
}

}  // namespace tessera::distributed::detail
