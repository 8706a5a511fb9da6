// The ring backend (DESIGN.md section 4): rank r keeps C TCP connections to each ring
// neighbour (C = addresses per rank in the hostfile), opens direct connections on demand for
// send/recv between other ranks, and runs pipelined ring algorithms striped over all
// connections in both directions. Ranks on one host use shared memory (shm/shm_transport.h)
// for collectives and send/recv when enabled; in a job across hosts with several ranks per
// host, collectives are hierarchical (hierarchy.cpp). Every message carries a WireHeader (stream.h), so ranks that
// call different operations or sizes get an error naming both sides instead of a hang.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/group_impl.h"
#include "distributed/hostfile.h"
#include "distributed/ring/failure_notice.h"
#include "distributed/ring/handshake.h"
#include "distributed/ring/lane_pool.h"
#include "distributed/ring/socket.h"
#include "distributed/ring/stream.h"

namespace tessera::distributed::detail {

class ShmTransport;

struct RingOptions {
  double timeout_s = 300;          // TESSERA_DIST_TIMEOUT: inactivity limit per wait, 0 = none
  double connect_timeout_s = 60;   // TESSERA_DIST_CONNECT_TIMEOUT
  std::string token;               // TESSERA_JOB_TOKEN; empty = no authentication
  bool shm = true;                 // TESSERA_RING_SHM
  bool shm_single_copy = true;     // TESSERA_RING_SHM_SINGLE_COPY: large all_gathers by CMA
  bool verbose = false;            // TESSERA_RING_VERBOSE
  bool direct = true;              // TESSERA_RING_DIRECT: small collectives straight to every rank
  size_t chunk_bytes = 256 << 10;  // pipelining granularity of the TCP ring
  size_t segment_bytes = 512 << 10;  // per lane: reductions go round the ring in such pieces
  double spin_s = 50e-6;           // TESSERA_DIST_SPIN_US
  // Reads the values above from tessera/config.h (the only place configuration comes from).
  static RingOptions from_config();
};

class RingGroup : public GroupImpl {
 public:
  // Listens on hostfile.ranks[rank], connects the ring (and authenticates when a token is
  // set); throws std::invalid_argument for a bad rank and std::runtime_error when peers do
  // not show up before the connect timeout.
  RingGroup(int rank, Hostfile hostfile, RingOptions options = RingOptions::from_config());
  // The same with this rank's listeners already bound (one per hostfile address of `rank`, in
  // order), as split() does: its ports are ephemeral and known only once bound.
  RingGroup(int rank, Hostfile hostfile, RingOptions options, std::vector<Socket> listeners);
  ~RingGroup() override;
  RingGroup(const RingGroup&) = delete;
  RingGroup& operator=(const RingGroup&) = delete;

  int rank() override { return rank_; }
  int size() override { return size_; }
  const char* backend_name() override { return "ring"; }
  // MPI_Comm_split: an all_gather of (color, key, fresh listener ports) on this group, then
  // the members' own ring over new authenticated connections (same hosts, same job token).
  std::shared_ptr<GroupImpl> split(int color, int key) override;

  TESSERA_GROUP_ARRAY_CALLS
  void all_reduce(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op) override;
  void all_mean(const void* in, void* out, size_t count, Dtype dtype) override;
  void all_gather(const void* in, void* out, size_t bytes) override;
  void reduce_scatter(const void* in, void* out, size_t count, Dtype dtype,
                      ReduceOp op) override;
  void send(const void* in, size_t bytes, Dtype dtype, int dst) override;
  void recv(void* out, size_t bytes, Dtype dtype, int src) override;
  void broadcast(void* buf, size_t bytes, int root) override;
  void all_to_all(const void* in, void* out, size_t bytes) override;
  void barrier() override;

  // Breaks the group from any thread: connections are shut down, operations in flight and
  // later ones throw. Peers see the connections close and fail too.
  void abort(const std::string& why);
  bool shm_active() const { return shm_ != nullptr; }
  bool shm_single_copy() const;  // large all_gathers read the peers' memory directly
  int connections() const { return conns_; }
  const Hostfile& hostfile() const { return hostfile_; }
  const RingOptions& options() const { return opt_; }

 private:
  void point_to_point(void* buf, size_t bytes, Dtype dtype, int peer, bool sending);
  // mean: all_mean (op sum, not scatter), its own kind on the wire.
  void reduce(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op, bool scatter,
              bool mean = false);
  struct OpDesc {
    OpKind kind;
    uint8_t dtype;  // Dtype::Val or kBytesDtype
    size_t count;
    size_t bytes;
  };

  void accept_loop();
  // Stops the acceptor and joins it and the handshake threads (idempotent).
  void stop_accepting();
  // Connects to `peer` at `addr` and runs the client handshake, retrying while its listener is
  // full, until `deadline`.
  Link connect_link(int peer, const HostAddress& addr, const ConnIdentity& me,
                    const Deadline& deadline);
  // One accepted connection's handshake and registration (on its own thread); `ip` is its
  // source, `stranger` whether the hostfile lists it.
  void authenticate(Socket s, const std::string& peer_text, const std::string& ip, bool stranger);
  static std::string source_ip(const std::string& peer_text);
  // Why a connection from `ip` cannot be rank `claimed` ("" if it can): see authenticate().
  std::string wrong_host(int claimed, const std::string& ip) const;
  void warn_without_token() const;
  static constexpr int kMaxHandshakes = 16;           // from hostfile addresses, at once
  static constexpr int kMaxStrangerHandshakes = 8;    // from other addresses, at once
  static constexpr int kMaxHandshakesPerStranger = 2;  // from one other address, at once
  Link* direct_link(int peer);
  Link* link_to(int peer, bool sending, int conn);
  WireHeader header_for(const OpDesc& d, uint64_t seq, int lane, int lanes) const;
  long ring_lane(Stream& st, int i, int lanes, const OpDesc& d, uint64_t seq);
  int lanes_for(size_t bytes) const;
  StreamEnv stream_env(const char* recv_expectation) const;
  char* scratch(int lane);
  // Runs the streams (one per lane) and turns any failure into a broken group + exception.
  void run_lanes(std::vector<Stream>& streams, const StreamEnv& env);
  void check_usable(const char* op);
  // Breaks the group with this rank's story of `e` and throws it.
  [[noreturn]] void fail(const std::exception& e);
  // The error this rank reports for `e`: a neighbour's failure notice when one arrives (that
  // failure came first), else e's own text.
  std::string story(const std::exception& e);
  std::string without_rank_prefix(const std::string& why) const;
  // Sends `n` to both neighbours unless it is the notice sent last.
  void send_notice_update(const FailureNotice& n);
  void ring_reduce(const char* in, char* out, size_t count, Dtype dtype, ReduceOp op,
                   OpKind kind, bool scatter);
  void small_reduce(const char* in, char* out, size_t count, Dtype dtype, ReduceOp op,
                    const OpDesc& d, uint64_t seq);
  void setup_shm();
  // A job across hosts with as many ranks on every host (hierarchy.cpp).
  struct Hierarchy {
    std::shared_ptr<GroupImpl> local;  // this host's ranks (shared memory)
    // The ranks with this rank's local index on every host that has one (TCP): one per host
    // when the hosts run as many ranks each; local index 0 are the hosts' leaders.
    std::shared_ptr<GroupImpl> cross;
    int hosts = 0, host = 0, local_rank = 0;
    bool equal = true;  // every host runs per_host ranks (else per_host is the most on one)
    int per_host = 0;
    std::vector<int> host_of, local_of;     // per rank of this group
    std::vector<std::vector<int>> members;  // [host][local rank] -> rank
    std::vector<int> local_members, cross_members;  // the sub-groups' ranks, in this numbering
  };
  void setup_hierarchy();
  // Runs f on the local (or cross) sub-group; its errors, which number ranks within that
  // sub-group, are rethrown with the job's numbering of its members.
  void in_local(const std::function<void(GroupImpl&)>& f);
  void in_cross(const std::function<void(GroupImpl&)>& f);
  void in_subgroup(GroupImpl& g, const std::vector<int>& members, const char* which,
                   const std::function<void(GroupImpl&)>& f);
  void hier_all_reduce(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op);
  void hier_all_gather(const void* in, void* out, size_t bytes);
  void hier_broadcast(char* buf, size_t bytes, int root);
  // Leader-based forms for hosts with different numbers of ranks.
  void hier_all_reduce_leaders(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op);
  void hier_all_gather_leaders(const void* in, void* out, size_t bytes);
  // Runs a hierarchical step; a failure breaks this group too, as one on its own ring would.
  template <typename F>
  void hier_run(F&& f) {
    try {
      f(*hier_);
    } catch (const std::exception& e) {
      fail(e);
    }
  }

  const int rank_;
  const int size_;
  const int left_, right_;
  const Hostfile hostfile_;
  const RingOptions opt_;
  JobTerms terms_;  // what every connection's two ends must agree on (fixed after construction)
  int conns_ = 1;
  SpinPolicy spin_;  // how waits for peers poll (spin_policy.h)

  std::vector<Socket> listeners_;      // own addresses; owned by the acceptor thread after start
  std::vector<Link> right_links_, left_links_;  // C each; fixed after construction
  // The neighbour pairs' control connections (failure notices only; failure_notice.h), opened
  // to the right and accepted from the left; fixed after construction.
  Socket control_right_, control_left_;
  Socket wake_read_, wake_write_;      // stops the acceptor thread

  std::mutex accept_mu_;  // guards pending_left_, direct_, stopping_
  std::condition_variable accept_cv_;
  std::vector<std::unique_ptr<Link>> pending_left_;
  std::unique_ptr<Link> pending_control_left_;
  std::map<int, std::unique_ptr<Link>> direct_;
  bool stopping_ = false;
  std::thread acceptor_;
  std::vector<std::thread> handshakers_;  // authenticate() threads (accept_mu_)
  std::vector<int> handshake_fds_;        // their sockets, shut down on destruction (accept_mu_)
  int handshakes_active_ = 0;             // from hostfile addresses (accept_mu_)
  int strangers_active_ = 0;              // from other addresses (accept_mu_)
  std::map<std::string, int> handshakes_by_ip_;  // in progress per source address (accept_mu_)
  std::set<std::string> hostfile_ips_;   // every host the hostfile lists; fixed after construction
  std::vector<bool> rank_is_local_;       // rank r's first address is one of this host's
  std::string left_rejection_;  // why the last connection claiming to be left_ was refused (accept_mu_)
  // Declared after the threads and what they use, so it runs first when the group goes away,
  // also when the constructor throws after starting them (a joinable std::thread member would
  // otherwise end the process with std::terminate).
  struct ThreadStopper {
    RingGroup* g;
    ~ThreadStopper() { g->stop_accepting(); }
  } thread_stopper_{this};

  std::mutex op_mu_;  // one operation at a time
  uint64_t coll_seq_ = 0;                   // collectives issued (op_mu_)
  std::vector<uint64_t> sent_, received_;   // point-to-point messages per peer (op_mu_)
  std::vector<std::vector<char>> scratch_;  // per lane chunk buffers (op_mu_)
  std::vector<char> work_;                  // reduce_scatter partial sums (op_mu_)
  std::vector<char> gather_;                // small_reduce's gathered inputs (op_mu_)
  std::unique_ptr<LanePool> pool_;

  std::atomic<bool> broken_{false};
  std::mutex story_mu_;  // one thread at a time reads the control connections (story())
  std::mutex err_mu_;    // guards first_error_, story_, adopted_, last_notice_
  std::string first_error_;
  std::string story_;          // this rank's error once story() chose it
  FailureNotice adopted_;      // a neighbour's notice this rank reported as its own error
  FailureNotice last_notice_;  // the last notice sent to the neighbours

  std::unique_ptr<ShmTransport> shm_;
  std::unique_ptr<Hierarchy> hier_;
  std::vector<char> hier_buf_, hier_buf2_;  // hierarchical steps' intermediates (op_mu_)
};

}  // namespace tessera::distributed::detail
