// Same-host collectives through POSIX shared memory (DESIGN.md section 4), used by RingGroup
// when every rank's address is local and TESSERA_RING_SHM is on. Each rank owns one segment:
// a control block (round counters, headers, abort flag) and two buffers used alternately by
// successive rounds. A rank publishes the blocks its peers need, reduces its own block reading
// the peers' buffers directly, and copies the peers' results out. Waits spin briefly, then
// sleep on a futex; while sleeping they poll the TCP ring connections so a dead peer becomes
// an error, and honour TESSERA_DIST_TIMEOUT.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/group_impl.h"
#include "distributed/ring/stream.h"

namespace tessera::distributed::detail {

class ShmTransport {
 public:
  // `exchange(mine, all, bytes)` is an all_gather over another transport (TCP), used to swap
  // segment names. `liveness_fds` are connections whose closing means a peer died.
  static std::unique_ptr<ShmTransport> create(
      int rank, int size, double timeout_s,
      const std::function<void(const void*, void*, size_t)>& exchange,
      std::vector<int> liveness_fds);
  ~ShmTransport();
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  void all_reduce(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op,
                  uint64_t seq);
  // `in` holds size * count elements; block `rank` of the reduction lands in `out`.
  void reduce_scatter(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op,
                      uint64_t seq);
  // `in` (bytes) may alias out + rank * bytes.
  void all_gather(const void* in, void* out, size_t bytes, uint64_t seq);
  void barrier(uint64_t seq);
  // Any thread: wakes every waiter (here and on peers) with an error.
  void abort();

  struct Segment;  // one mapped segment (defined in the .cpp)

 private:
  ShmTransport(int rank, int size, double timeout_s, std::vector<int> liveness_fds);
  enum class Counter { pub, red, done };
  void wait_for(int peer, Counter c, uint32_t target, const WireHeader& mine);
  void post(Counter c, uint32_t value);
  void check_header(int peer, int parity, const WireHeader& mine);
  char* buffer(int peer, int parity);
  void begin_round(const WireHeader& h, int parity);

  const int rank_, size_;
  const double timeout_s_;
  const std::vector<int> liveness_fds_;
  std::vector<std::unique_ptr<Segment>> segs_;  // index = rank; segs_[rank_] is ours
  uint32_t round_ = 0;                          // rounds completed (the operation thread only)
  std::atomic<bool> aborted_{false};
};

// Bytes of one block in a round (also what a segment's buffer holds per rank).
inline constexpr size_t kShmBlockBytes = 256 << 10;

}  // namespace tessera::distributed::detail
