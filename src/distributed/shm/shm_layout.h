// The shared-memory segment's layout, shared by the transport (shm_transport.cpp: set-up,
// waits, failures, point to point) and the collectives over it (shm_collectives.cpp).
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "distributed/ring/stream.h"
#include "distributed/shm/shm_transport.h"

namespace tessera::distributed::detail {

namespace shm_layout {

inline constexpr size_t kTinyBytes = 24;  // operations this small travel in one cache line
inline constexpr size_t kCauseBytes = 512;

struct alignas(64) Word {
  std::atomic<uint32_t> v{0};
  char pad[60];
};

// A whole small exchange in one cache line: the header, up to kTinyBytes of data and the
// unit number that publishes them, so a peer pays one cache-line transfer per operation.
struct alignas(64) TinyLine {
  std::atomic<uint32_t> seq{0};  // unit + 1 once hdr and data are written
  uint32_t pad = 0;
  WireHeader hdr;
  char data[kTinyBytes];
};
static_assert(sizeof(TinyLine) == 64);

struct Control {
  Word pub;      // units whose inputs and header are published
  Word red;      // units whose reduced block is published
  Word done;     // units this rank has finished reading from everyone
  Word abort;    // non-zero: this rank failed
  Word waiters;  // threads sleeping on one of the counters above
  WireHeader hdr[kShmSlots];
  TinyLine tiny[kShmSlots];  // units of tiny operations use these instead of pub/hdr/slots
  int32_t pid = 0;           // the owner's process, so peers can tell that it exited
  uint64_t pid_addr = 0;     // where `pid` lies in the owner's address space (the CMA probe)
  uint64_t block_addr[kShmSlots] = {};  // one-copy all_gather: the owner's block, per unit
  // Why the owner failed ("rank 1 (pid 42) exited during all_sum of ..."), written before
  // `abort` is set: every survivor then tells the same story.
  char cause[kCauseBytes] = {};
  int32_t cause_rank = -1;  // the rank that first saw the failure the cause describes
};
static_assert(sizeof(Control) <= 4096);

}  // namespace shm_layout

struct ShmTransport::P2pCtl {
  shm_layout::Word sent;      // in the sender's segment: chunks published for the receiver
  shm_layout::Word consumed;  // in the receiver's segment (its entry for the sender): chunks read
  WireHeader hdr[kP2pSlots];
  static void check_layout() { static_assert(sizeof(P2pCtl) % 64 == 0); }
};
// (alignas(64) Words make P2pCtl a whole number of cache lines.)

struct ShmTransport::Segment {
  std::string name;
  void* base = nullptr;
  size_t bytes = 0;
  shm_layout::Control* ctrl = nullptr;
  char* data = nullptr;
  char* p2p = nullptr;  // P2pCtl per rank, then kP2pSlots chunks per rank
  ~Segment() {
    if (base) munmap(base, bytes);
  }
};

}  // namespace tessera::distributed::detail
