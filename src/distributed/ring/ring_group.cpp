// Connection management of the ring backend (see ring_group.h): construction, the acceptor,
// direct links, failure, split and the shared-memory set-up. The algorithms are in
// collectives.cpp; byte movement in stream.cpp/socket.cpp.
#include "distributed/ring/ring_group.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "distributed/ring/failure_notice.h"
#include "distributed/ring/handshake.h"
#include "distributed/shm/shm_transport.h"
#include "tessera/config.h"

namespace tessera::distributed::detail {

namespace {

// The n-th group this process makes over `hostfile` as `rank` (JobTerms::generation); by rank,
// since one process may run several ranks (threads).
uint64_t next_generation(const Digest256& hostfile, int rank) {
  static std::mutex mu;
  static std::map<std::pair<Digest256, int>, uint64_t> made;
  std::lock_guard<std::mutex> lk(mu);
  return ++made[{hostfile, rank}];
}

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

}  // namespace

RingOptions RingOptions::from_config() {
  RingOptions o;
  o.timeout_s = static_cast<double>(config::get_int("TESSERA_DIST_TIMEOUT"));
  o.connect_timeout_s = static_cast<double>(config::get_int("TESSERA_DIST_CONNECT_TIMEOUT"));
  if (auto t = config::get_string("TESSERA_JOB_TOKEN")) o.token = *t;
  o.shm = config::get_bool("TESSERA_RING_SHM");
  o.shm_single_copy = config::get_bool("TESSERA_RING_SHM_SINGLE_COPY");
  o.verbose = config::get_bool("TESSERA_RING_VERBOSE");
  o.direct = config::get_bool("TESSERA_RING_DIRECT");
  o.spin_s = static_cast<double>(config::get_int("TESSERA_DIST_SPIN_US")) * 1e-6;
  return o;
}

bool host_oversubscribed(int local_ranks) {
  // A launcher that bound each rank to its own CPUs says how many the host's ranks share: the
  // rank's own affinity would make two bound ranks on two CPUs look like two ranks on one.
  if (config::get_string("TESSERA_HOST_CPUS")) return local_ranks > config::get_int("TESSERA_HOST_CPUS");
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
      opt_(std::move(options)),
      terms_{opt_.token, sha256(hostfile_.to_json()), opt_.shm, hostfile_.size(), 0} {
  terms_.generation = next_generation(terms_.hostfile_digest, rank_);
  conns_ = hostfile_.connections();
  for (const auto& addrs : hostfile_.ranks) {
    for (const auto& a : addrs) hostfile_ips_.insert(a.host);
  }
  warn_without_token();
  for (int r = 0; r < size_; ++r) rank_is_local_.push_back(is_local_address(hostfile_.ranks[r][0]));
  const int local_ranks =
      static_cast<int>(std::count(rank_is_local_.begin(), rank_is_local_.end(), true));
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
  const bool want_control = size_ > 1;

  {
    const Deadline deadline = Deadline::after(opt_.connect_timeout_s);
    for (int c = 0; c < conns_; ++c) {
      const HostAddress& addr = hostfile_.ranks[right_][c];
      if (opt_.verbose) {
        std::cerr << "[ring] rank " << rank_ << ": connecting to rank " << right_ << " ("
                  << addr.text() << "), connection " << c << "\n";
      }
      try {
        right_links_.push_back(
            connect_link(right_, addr, {rank_, right_, c, ConnKind::ring}, deadline));
      } catch (const std::runtime_error& e) {
        // The left neighbour may have told us meanwhile why the job cannot form (it connected
        // with other settings and we turned it away): say that too.
        std::lock_guard<std::mutex> lk(accept_mu_);
        if (left_rejection_.empty()) throw;
        throw std::runtime_error(std::string(e.what()) + " Meanwhile rank " +
                                 std::to_string(left_) + " connected here and was turned away: " +
                                 left_rejection_);
      }
    }
    if (want_control) {
      control_right_ = std::move(
          connect_link(right_, hostfile_.ranks[right_][0], {rank_, right_, 0, ConnKind::control},
                       deadline)
              .sock);
    }
    std::unique_lock<std::mutex> lk(accept_mu_);
    auto all_in = [&] {
      return std::all_of(pending_left_.begin(), pending_left_.end(),
                         [](const auto& p) { return p != nullptr; }) &&
             (!want_control || pending_control_left_ != nullptr);
    };
    bool ok = opt_.connect_timeout_s > 0
                  ? accept_cv_.wait_for(lk, std::chrono::duration<double>(opt_.connect_timeout_s),
                                        all_in)
                  : (accept_cv_.wait(lk, all_in), true);
    if (!ok) {
      std::string msg = "[ring] rank " + std::to_string(rank_) + ": rank " +
                        std::to_string(left_) + " (" + hostfile_.ranks[left_][0].text() +
                        ") did not connect within " +
                        std::to_string(static_cast<int>(opt_.connect_timeout_s)) + " s.";
      if (left_rejection_.empty()) {
        msg += " Is it running, with the same hostfile, TESSERA_JOB_TOKEN and TESSERA_RING_SHM?"
               " Raise TESSERA_DIST_CONNECT_TIMEOUT if it starts late.";
      } else {
        msg += " A connection claiming to be it came and was turned away: " + left_rejection_;
      }
      throw std::runtime_error(msg);
    }
    for (auto& p : pending_left_) left_links_.push_back(std::move(*p));
    pending_left_.clear();
    if (want_control) control_left_ = std::move(pending_control_left_->sock);
  }
  // (Any exception from here on leaves through thread_stopper_, which joins the threads.)
  if (opt_.verbose) std::cerr << "[ring] rank " << rank_ << ": ring connected\n";
  if (2 * conns_ - 1 > 0) pool_ = std::make_unique<LanePool>(2 * conns_ - 1);
  scratch_.resize(static_cast<size_t>(2 * conns_));
  if (opt_.shm) setup_shm();
  if (opt_.shm && !shm_) setup_hierarchy();
}

RingGroup::~RingGroup() {
  hier_.reset();
  stop_accepting();
  // Whatever a peer sent on the control connections is read, so closing them sends no reset
  // that could destroy the peer's own notice to us on the way.
  drain(control_left_);
  drain(control_right_);
  pool_.reset();
  shm_.reset();
}

void RingGroup::stop_accepting() {
  if (!acceptor_.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(accept_mu_);
    stopping_ = true;
  }
  char b = 1;
  [[maybe_unused]] ssize_t w = ::write(wake_write_.fd(), &b, 1);
  acceptor_.join();
  std::vector<std::thread> handshakers;
  {
    std::lock_guard<std::mutex> lk(accept_mu_);
    for (int fd : handshake_fds_) ::shutdown(fd, SHUT_RDWR);  // ends their handshakes now
    handshakers.swap(handshakers_);
  }
  for (auto& t : handshakers) t.join();
}

Link RingGroup::connect_link(int peer, const HostAddress& addr, const ConnIdentity& me,
                             const Deadline& deadline) {
  IoContext ctx;
  ctx.op = "handshake";
  ctx.rank = rank_;
  ctx.peer = peer;
  ctx.peer_address = addr.text();
  // A peer whose listener is momentarily full, or that closed before answering (its previous
  // group's listener going away), is tried again; bounded by the deadline.
  for (double pause = 0.01;; pause = std::min(pause * 2, 0.2)) {
    Link l;
    l.peer = peer;
    l.peer_address = addr.text();
    l.sock = connect_with_backoff(addr, deadline, rank_, peer, opt_.verbose);
    try {
      client_handshake(l.sock, terms_, me, deadline, ctx);
      return l;
    } catch (const HandshakeRetry& e) {
      if (deadline.remaining_s() <= pause) {
        throw std::runtime_error(std::string(e.what()) + " Retried for " +
                                 std::to_string(static_cast<int>(deadline.span_s())) +
                                 " s (TESSERA_DIST_CONNECT_TIMEOUT).");
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(pause));
    }
  }
}

// "10.0.0.2:5000" -> "10.0.0.2", "[::1]:5000" -> "::1" (as hostfile entries spell hosts).
std::string RingGroup::source_ip(const std::string& peer_text) {
  std::string ip = peer_text.substr(0, peer_text.rfind(':'));
  if (ip.size() >= 2 && ip.front() == '[' && ip.back() == ']') ip = ip.substr(1, ip.size() - 2);
  return ip;
}

// The one source-address check that never refuses a real rank: a rank the hostfile places on
// this host connects from one of this host's addresses (a local connection always has a local
// source), so a connection from another host claiming it is an impostor or a misplaced rank.
// Ranks of other hosts are not checked: a host with several addresses may connect from any.
std::string RingGroup::wrong_host(int claimed, const std::string& ip) const {
  if (!rank_is_local_[static_cast<size_t>(claimed)]) return "";
  HostAddress from;
  from.host = ip;
  from.ipv6 = ip.find(':') != std::string::npos;
  if (is_local_address(from)) return "";
  return "the hostfile places rank " + std::to_string(claimed) + " on this host (" +
         hostfile_.ranks[static_cast<size_t>(claimed)][0].text() +
         ") but the connection comes from " + ip + ", another host";
}

// Without a token anyone who can reach a rank's port can take a rank's place (a source-address
// check is only a heuristic: hosts with several addresses connect from any of them).
void RingGroup::warn_without_token() const {
  if (!opt_.token.empty() || size_ == 1) return;
  bool remote = false;
  for (const auto& addrs : hostfile_.ranks) {
    for (const auto& a : addrs) remote |= !is_loopback(a);
  }
  static std::atomic<bool> warned{false};
  if (remote && !warned.exchange(true)) {
    std::cerr << "[ring] warning: rank " << rank_ << " joins a job on non-loopback addresses "
              << "without TESSERA_JOB_TOKEN: any process that can reach these ports can claim "
              << "a rank and read or corrupt its data. Set the same secret in TESSERA_JOB_TOKEN "
              << "on every rank (tessera launch sets one per job).\n";
  }
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
      // Each connection proves itself on its own thread, so one that connects and stays
      // silent cannot hold up the peers behind it for its handshake deadline. Connections from
      // addresses the hostfile does not list have a budget of their own, per source address
      // too, so strangers cannot crowd out the job's ranks (on loopback every source looks
      // like a rank: there the shared budget is all there is).
      const std::string ip = source_ip(peer_text);
      const bool stranger = hostfile_ips_.count(ip) == 0;
      std::lock_guard<std::mutex> lk(accept_mu_);
      if (stopping_) return;
      int& from_ip = handshakes_by_ip_[ip];
      const bool full = stranger ? (strangers_active_ >= kMaxStrangerHandshakes ||
                                    from_ip >= kMaxHandshakesPerStranger)
                                 : handshakes_active_ >= kMaxHandshakes;
      if (full) {
        std::cerr << "[ring] rank " << rank_ << ": the listener is full ("
                  << (stranger ? "connections from addresses outside the hostfile"
                               : "connections authenticating")
                  << "); asked " << peer_text << " to retry\n";
        refuse_busy(s);
        continue;
      }
      ++(stranger ? strangers_active_ : handshakes_active_);
      ++from_ip;
      handshake_fds_.push_back(s.fd());
      handshakers_.emplace_back([this, sock = std::move(s), peer_text, ip, stranger]() mutable {
        authenticate(std::move(sock), peer_text, ip, stranger);
      });
    }
  }
}

void RingGroup::authenticate(Socket s, const std::string& peer_text, const std::string& ip,
                             bool stranger) {
  const int fd = s.fd();
  auto finished = [&] {  // under accept_mu_
    handshake_fds_.erase(std::find(handshake_fds_.begin(), handshake_fds_.end(), fd));
    --(stranger ? strangers_active_ : handshakes_active_);
    if (--handshakes_by_ip_[ip] == 0) handshakes_by_ip_.erase(ip);
  };
  ConnIdentity id;
  try {
    id = server_handshake(s, terms_, rank_, size_, conns_,
                          Deadline::after(std::min(opt_.connect_timeout_s, 10.0)), peer_text,
                          [this, &ip](int claimed) { return wrong_host(claimed, ip); });
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lk(accept_mu_);
    auto* r = dynamic_cast<const HandshakeRejected*>(&e);
    if (!stopping_ && (r == nullptr || !r->routine || opt_.verbose)) {
      std::cerr << e.what() << " (connection closed; still waiting for the right peer)\n";
    }
    if (r != nullptr && r->claimed_rank == left_) left_rejection_ = e.what();
    finished();
    return;
  }
  auto link = std::make_unique<Link>();
  link->peer = id.client_rank;
  link->peer_address = hostfile_.ranks[id.client_rank][0].text();
  link->sock = std::move(s);
  std::lock_guard<std::mutex> lk(accept_mu_);
  finished();
  if (stopping_) return;
  if (id.kind == ConnKind::ring) {
    if (id.client_rank != left_) {
      std::cerr << "[ring] rank " << rank_ << ": rejected a ring connection from rank "
                << id.client_rank << " (" << peer_text << "): only this rank's left neighbour, "
                << "rank " << left_ << ", opens ring connections here\n";
      return;
    }
    if (pending_left_.empty() || pending_left_[static_cast<size_t>(id.index)]) {
      std::cerr << "[ring] rank " << rank_ << ": rejected a second ring connection " << id.index
                << " from rank " << id.client_rank << " (" << peer_text
                << "): that connection is already established (a stale or duplicate client)\n";
      return;
    }
    if (opt_.verbose) {
      std::cerr << "[ring] rank " << rank_ << ": accepted connection " << id.index
                << " from rank " << id.client_rank << "\n";
    }
    pending_left_[static_cast<size_t>(id.index)] = std::move(link);
  } else if (id.kind == ConnKind::control) {
    if (id.client_rank != left_ || pending_control_left_ || size_ == 1) {
      std::cerr << "[ring] rank " << rank_ << ": rejected an unexpected control connection from "
                << "rank " << id.client_rank << " (" << peer_text << ")\n";
      return;
    }
    pending_control_left_ = std::move(link);
  } else {
    if (direct_.count(id.client_rank) || id.client_rank > rank_) {
      std::cerr << "[ring] rank " << rank_ << ": rejected an unexpected direct connection "
                << "from rank " << id.client_rank << " (" << peer_text << ")\n";
      return;
    }
    direct_[id.client_rank] = std::move(link);
  }
  accept_cv_.notify_all();
}

Link* RingGroup::direct_link(int peer) {
  std::unique_lock<std::mutex> lk(accept_mu_);
  auto it = direct_.find(peer);
  if (it != direct_.end()) return it->second.get();
  const HostAddress& addr = hostfile_.ranks[peer][0];
  if (rank_ < peer) {  // the lower rank of a pair opens the connection
    lk.unlock();
    auto l = std::make_unique<Link>(connect_link(peer, addr, {rank_, peer, 0, ConnKind::direct},
                                                 Deadline::after(opt_.connect_timeout_s)));
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
  WireHeader h = make_header(d.kind, seq, d.count, d.bytes, d.dtype);
  h.lane = static_cast<uint8_t>(lane);
  h.lanes = static_cast<uint8_t>(lanes);
  return h;
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
  FailureNotice n;
  {
    std::lock_guard<std::mutex> lk(err_mu_);
    if (first_error_.empty()) first_error_ = why;
    n = adopted_.origin >= 0 ? adopted_ : FailureNotice{rank_, without_rank_prefix(first_error_)};
  }
  // The notice goes out before the data connections close, so a neighbour that sees them close
  // finds it waiting (failure_notice.h).
  send_notice_update(n);
  broken_ = true;
  for (auto& l : right_links_) l.sock.shutdown_both();
  for (auto& l : left_links_) l.sock.shutdown_both();
  {
    std::lock_guard<std::mutex> lk(accept_mu_);
    for (auto& [r, l] : direct_) l->sock.shutdown_both();
  }
  accept_cv_.notify_all();
  if (shm_) shm_->abort(without_rank_prefix(why));
}

// Peers repeat a cause under their own name: drop ours ("[ring] rank 0: ").
std::string RingGroup::without_rank_prefix(const std::string& why) const {
  const std::string mine = "[ring] rank " + std::to_string(rank_) + ": ";
  return why.rfind(mine, 0) == 0 ? why.substr(mine.size()) : why;
}

std::string RingGroup::story(const std::exception& e) {
  std::lock_guard<std::mutex> story_lock(story_mu_);  // one reader of the control connections
  {
    std::lock_guard<std::mutex> lk(err_mu_);
    if (!first_error_.empty()) return first_error_;  // already failed: one story per rank
    if (!story_.empty()) return story_;
  }
  // Ask the peer this rank blames. One that closed because it failed sent its notice first: it
  // is waiting, or the control connection has ended too (it died and sent none: the story is
  // this rank's own). One that went silent may itself be waiting on a silent rank further on:
  // it times out about when we do and says so, while a stopped or cut-off rank says nothing.
  auto* pf = dynamic_cast<const PeerFailure*>(&e);
  if (!pf) return e.what();  // not about a peer (a mismatch, a bad argument): this rank's own
  std::vector<const Socket*> from;
  const bool neighbour = pf->peer == left_ || pf->peer == right_;
  if (pf->peer == left_ || !neighbour) from.push_back(&control_left_);
  if (pf->peer == right_ || !neighbour) from.push_back(&control_right_);
  // A silent rank's neighbours time out at about the same moment and each blames the one it
  // waited on: each says so at once, and passes on at once whatever the rank it blames says,
  // so the story of the rank next to the silent one reaches everyone within the wait.
  if (pf->timeout) send_notice_update(FailureNotice{rank_, without_rank_prefix(e.what())});
  const double wait = pf->timeout ? std::min(1.0, 0.2 * opt_.timeout_s) : 0.05;
  std::optional<FailureNotice> latest;
  collect_notices(from, wait, [&](const FailureNotice& n) {
    latest = n;
    send_notice_update(n);
  });
  std::lock_guard<std::mutex> lk(err_mu_);
  if (!latest) {
    story_ = e.what();
  } else {
    adopted_ = *latest;  // passed on unchanged, so the story keeps its first witness
    story_ = "[ring] rank " + std::to_string(rank_) + ": " + latest->cause +
             " (first seen by rank " + std::to_string(latest->origin) + "; this rank was " +
             pf->during + ")";
  }
  return story_;
}

void RingGroup::send_notice_update(const FailureNotice& n) {
  std::lock_guard<std::mutex> lk(err_mu_);
  if (n.origin == last_notice_.origin && n.cause == last_notice_.cause) return;
  last_notice_ = n;
  send_notice(control_left_, n);
  send_notice(control_right_, n);
}

void RingGroup::fail(const std::exception& e) {
  abort(story(e));
  std::lock_guard<std::mutex> lk(err_mu_);
  throw std::runtime_error(first_error_);
}

void RingGroup::run_lanes(std::vector<Stream>& streams, const StreamEnv& env) {
  if (streams.size() == 1) {
    try {
      run_stream(streams[0], env);
    } catch (const std::exception& e) {
      fail(e);
    }
    return;
  }
  std::vector<std::function<void()>> jobs;
  for (auto& st : streams) {
    jobs.emplace_back([this, &st, &env] {
      try {
        run_stream(st, env);
      } catch (const std::exception& e) {
        abort(story(e));  // wakes the other lanes at once
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

bool RingGroup::shm_single_copy() const { return shm_ && shm_->single_copy(); }

void RingGroup::setup_shm() {
  for (int r = 0; r < size_; ++r) {
    if (!is_local_address(hostfile_.ranks[r][0])) return;  // shm only when every rank is here
  }
  auto exchange = [this](const void* mine, void* all, size_t bytes) {
    // The names travel over TCP before shm_ is set, so this is the TCP all_gather.
    all_gather(mine, all, bytes);
  };
  shm_ = ShmTransport::create(rank_, size_, opt_.timeout_s, spin_, opt_.shm_single_copy, exchange,
                              [this] {
                                std::vector<std::pair<int, int>> fds;
                                for (auto& l : left_links_) fds.emplace_back(l.sock.fd(), left_);
                                for (auto& l : right_links_) fds.emplace_back(l.sock.fd(), right_);
                                return fds;
                              }());
}

}  // namespace tessera::distributed::detail
