// Same-host collectives through POSIX shared memory (DESIGN.md section 4), used by RingGroup
// when every rank's address is local and TESSERA_RING_SHM is on.
//
// Each rank owns one persistent segment, created and pre-faulted once per group: a control
// block (three progress counters, the abort flag, one header per slot) and kSlots slots of
// kShmChunkBytes. An operation is cut into "units" (one chunk of work each); unit u uses slot
// u % kSlots of every rank, and all ranks process the same sequence of units, so the
// counters are absolute unit numbers that only grow:
//   pub  = units whose inputs (and header) this rank has published in its slot,
//   red  = units whose reduced block this rank has published (all_reduce only),
//   done = units this rank has finished reading from every peer (frees the slot on reuse).
// All-reduce of a large message, per unit: a rank copies the blocks its peers reduce into its
// slot, reduces its own block straight from its input and the peers' slots into the output
// and into its slot, then copies the peers' reduced blocks out. Units are software-pipelined
// (copy-in of unit t, reduce of t-1, gather of t-2 in one step), so a rank rarely waits and
// both ranks work on disjoint blocks in parallel. Small messages take one unit in which every
// rank reduces everything itself (one synchronisation instead of two).
// All-gather of large blocks, where the ranks may read each other's memory (checked when the
// group forms), takes one copy instead of two: each rank publishes the address of its block and
// reads the peers' blocks straight into its output (process_vm_readv), then waits until every
// peer has read its own block before returning.
// Waits spin briefly, then sleep on a futex; while sleeping they poll the TCP ring
// connections so a dead peer becomes an error, and honour TESSERA_DIST_TIMEOUT.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/group_impl.h"
#include "distributed/spin_policy.h"
#include "distributed/ring/stream.h"

namespace tessera::distributed::detail {

class ShmTransport {
 public:
  // `exchange(mine, all, bytes)` is an all_gather over another transport (TCP), used to swap
  // segment names. `liveness` are (connection, peer) pairs: the connection closing while this
  // rank waits for that peer means the peer died.
  // `single_copy` allows the one-copy all_gather (TESSERA_RING_SHM_SINGLE_COPY); it is used
  // only if every rank asked for it and may read every other's memory.
  static std::unique_ptr<ShmTransport> create(
      int rank, int size, double timeout_s, SpinPolicy spin, bool single_copy,
      const std::function<void(const void*, void*, size_t)>& exchange,
      std::vector<std::pair<int, int>> liveness);
  ~ShmTransport();
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  // divisor > 1: all_mean (op sum), each reduced block divided while in cache.
  void all_reduce(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op,
                  uint64_t seq, int divisor = 1);
  // `in` holds size * count elements; block `rank` of the reduction lands in `out`.
  void reduce_scatter(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op,
                      uint64_t seq);
  // `in` (bytes) may alias out + rank * bytes; it is copied there here (the peers read `in`).
  void all_gather(const void* in, void* out, size_t bytes, uint64_t seq);
  // `bytes` of root's `buf` into every rank's `buf`, through root's slots (pipelined).
  void broadcast(void* buf, size_t bytes, int root, uint64_t seq);
  void barrier(uint64_t seq);
  bool single_copy() const { return single_copy_; }
  // Point to point through a per-pair ring of kP2pSlots chunks in the sender's segment (two
  // copies, pipelined): the sender returns once everything is in the ring or read. `seq` is
  // the message number between the pair. Both check the header of every chunk.
  bool p2p_enabled() const { return p2p_chunk_ > 0; }
  void send(const void* in, size_t bytes, Dtype dtype, int dst, uint64_t seq);
  void recv(void* out, size_t bytes, Dtype dtype, int src, uint64_t seq);
  // Any thread: wakes every waiter (here and on peers) with an error; peers report `cause`
  // (a message without the "[ring] rank N: " prefix).
  void abort(const std::string& cause);

  struct Segment;  // one mapped segment (defined in the .cpp)

 private:
  ShmTransport(int rank, int size, double timeout_s, std::vector<std::pair<int, int>> liveness);
  enum class Counter { pub, red, done };
  // Waits until `peer`'s counter c has reached `target` (unit numbers + 1).
  void wait_for(int peer, Counter c, uint64_t target, const WireHeader& mine);
  void wait_all(Counter c, uint64_t target, const WireHeader& mine);
  void post(Counter c, uint64_t value);
  void check_header(int peer, uint64_t unit, const WireHeader& mine);
  // The error naming the peer that failed first and how, or "" while the job is well. Only the
  // awaited peer's exit counts: a peer that finished this op may well exit (its part is done),
  // while one that failed says so in its segment.
  std::string peer_failure(const IoContext& ctx, int awaited);
  // What an error raised while waiting on `peer` during `h` names (`dtype` holds its dtype).
  IoContext io_context(int peer, const WireHeader& h, std::string& dtype) const;
  [[noreturn]] void throw_mismatch(int peer, const WireHeader& mine, const WireHeader& theirs);
  // wait_for on any word of `peer`'s segment; with unit != kNoUnit it also notices a peer that
  // published that unit the other way (tiny line versus pub) and raises a mismatch.
  static constexpr uint64_t kNoUnit = ~uint64_t(0);
  void wait_word(int peer, std::atomic<uint32_t>& w, uint64_t target, const WireHeader& mine,
                 uint64_t unit, bool tiny);
  // Waits until every peer has finished the unit that last used unit's slot.
  void slot_free(uint64_t unit, const WireHeader& h);
  uint64_t tiny_exchange(const WireHeader& h, const void* in, size_t bytes);
  const char* tiny_data(int peer, uint64_t unit);
  char* slot(int peer, uint64_t unit);
  // Waits until slot unit % kSlots is free on every peer, then publishes our header for it.
  void begin_unit(uint64_t unit, const WireHeader& h);
  // Stage of an all_reduce unit that follows the copy-in: waits for the peers' inputs and
  // reduces this rank's block.
  void reduce_stage(uint64_t unit, const WireHeader& h, const char* in, char* out, size_t base,
                    size_t n, Dtype dtype, ReduceOp op, int divisor);
  void gather_stage(uint64_t unit, const WireHeader& h, char* out, size_t base, size_t n,
                    size_t es);
  // The one-copy all_gather (see the top of this file).
  void all_gather_direct(const char* in, char* out, size_t bytes, WireHeader h);
  // Copies `bytes` at `addr` in `peer`'s address space to `dst`.
  void read_peer(int peer, uint64_t addr, char* dst, size_t bytes, const WireHeader& h);

  const int rank_, size_;
  const double timeout_s_;
  SpinPolicy spin_;  // set by create()
  const std::vector<std::pair<int, int>> liveness_;  // (fd, peer)
  // A peer's reported failure this rank has raised, and who first saw it: abort() passes them on.
  std::string relay_cause_;
  int relay_rank_ = -1;
  std::vector<std::unique_ptr<Segment>> segs_;  // index = rank; segs_[rank_] is ours
  size_t chunk_ = 0;                            // bytes per slot
  size_t block_ = 0;                            // bytes per rank's block in a slot (64-aligned)
  uint64_t unit_ = 0;                           // units started (the operation thread only)
  std::vector<uint32_t> done_seen_;             // last `done` read from each peer
  size_t p2p_chunk_ = 0;                        // bytes per point-to-point slot; 0 = off
  std::vector<uint64_t> p2p_sent_, p2p_read_;   // chunks sent to / read from each peer
  struct P2pCtl;
  P2pCtl* p2p_ctl(int owner, int other);        // in owner's segment, for messages owner->other
  char* p2p_slot(int owner, int other, uint64_t chunk);
  std::atomic<bool> aborted_{false};
  bool single_copy_ = false;  // every rank may read every other's memory (process_vm_readv)
};

// Bytes of one slot (one unit of work); a rank's segment holds kShmSlots of them.
inline constexpr size_t kShmChunkBytes = size_t(1) << 20;
inline constexpr size_t kShmSlots = 4;
// All-reduce messages up to this size (and at most one slot) use the one-step algorithm.
inline constexpr size_t kShmSmallBytes = 32 << 10;
// Point to point: slots per ordered pair of ranks and their size; up to kShmP2pMaxRanks local
// ranks (beyond that the rings would cost too much memory and send/recv stay on TCP).
inline constexpr size_t kP2pSlots = 4;
inline constexpr size_t kP2pChunkBytes = 256 << 10;
inline constexpr int kShmP2pMaxRanks = 32;
// All-gather blocks from this size take the one-copy path where it is allowed (below it the
// system call and the extra wait for the peers cost more than the saved copy). Measured on 2
// vCPUs: a pair gains from 8 KiB (4.0 vs 5.4 us at 32 KiB); with 4 ranks sharing the CPUs the
// N - 1 system calls per rank cost more than the copies up to ~256 KiB (12.8 vs 6.3 us at 4 KiB).
inline constexpr size_t kShmSingleCopyPairBytes = 8 << 10;
inline constexpr size_t kShmSingleCopyBytes = 256 << 10;

}  // namespace tessera::distributed::detail
