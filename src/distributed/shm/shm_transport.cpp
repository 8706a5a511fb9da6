// Shared-memory transport for ranks on one host (see shm_transport.h): the segments and their
// set-up, waiting on peers, failure reports, the tiny-line exchange and point to point. The
// collectives over it are in shm_collectives.cpp.
#include "core/trace.h"
#include "distributed/shm/shm_transport.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "distributed/ring/socket.h"
#include "distributed/shm/segments.h"
#include "distributed/shm/shm_layout.h"

namespace tessera::distributed::detail {

using shm_layout::Control;
using shm_layout::kCauseBytes;
using shm_layout::TinyLine;
using shm_layout::Word;

namespace {

constexpr int kSleepSliceMs = 10;       // futex sleeps this long between liveness checks

long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

bool reached(uint32_t v, uint32_t target) { return static_cast<int32_t>(v - target) >= 0; }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

std::unique_ptr<ShmTransport::Segment> map_segment(const std::string& name, size_t bytes,
                                                   bool create) {
  int fd = shm_open(name.c_str(), create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
  if (fd < 0) {
    throw std::runtime_error("[ring] shared memory: cannot " +
                             std::string(create ? "create" : "open") + " segment " + name +
                             ": " + std::strerror(errno) +
                             ". Set TESSERA_RING_SHM=0 to use TCP instead.");
  }
  auto seg = std::make_unique<ShmTransport::Segment>();
  seg->name = name;
  seg->bytes = bytes;
  if (create && ftruncate(fd, static_cast<off_t>(seg->bytes)) != 0) {
    int e = errno;
    close(fd);
    shm_unlink(name.c_str());
    throw std::runtime_error("[ring] shared memory: cannot size segment " + name + " to " +
                             format_bytes(seg->bytes) + ": " + std::strerror(e));
  }
  void* p = mmap(nullptr, seg->bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    if (create) shm_unlink(name.c_str());
    throw std::runtime_error("[ring] shared memory: cannot map segment " + name + ": " +
                             std::strerror(errno));
  }
  seg->base = p;
  madvise(p, seg->bytes, MADV_HUGEPAGE);  // honoured where shmem huge pages are enabled
  seg->ctrl = static_cast<Control*>(p);
  seg->data = static_cast<char*>(p) + 4096;
  if (create) {
    new (seg->ctrl) Control();
    seg->ctrl->pid = static_cast<int32_t>(getpid());
    seg->ctrl->pid_addr = reinterpret_cast<uint64_t>(&seg->ctrl->pid);
    std::memset(seg->data, 0, seg->bytes - 4096);  // fault the pages in now, not during ops
  }
  return seg;
}

// Whether this process may read the memory of the owner of `c` (same user, no ptrace
// restriction): reads the owner's pid where the owner says it keeps it.
bool can_read_memory_of(const Control* c) {
  int32_t v = 0;
  iovec local{&v, sizeof v};
  iovec remote{reinterpret_cast<void*>(c->pid_addr), sizeof v};
  return process_vm_readv(c->pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof v) &&
         v == c->pid;
}

}  // namespace

ShmTransport::ShmTransport(int rank, int size, double timeout_s,
                           std::vector<std::pair<int, int>> liveness)
    : rank_(rank), size_(size), timeout_s_(timeout_s), liveness_(std::move(liveness)) {
  chunk_ = kShmChunkBytes;
  block_ = chunk_ / static_cast<size_t>(size_) / 64 * 64;
  done_seen_.assign(static_cast<size_t>(size_), 0);
  p2p_sent_.assign(static_cast<size_t>(size_), 0);
  p2p_read_.assign(static_cast<size_t>(size_), 0);
}

ShmTransport::~ShmTransport() = default;

std::unique_ptr<ShmTransport> ShmTransport::create(
    int rank, int size, double timeout_s, SpinPolicy spin, bool single_copy,
    const std::function<void(const void*, void*, size_t)>& exchange,
    std::vector<std::pair<int, int>> liveness) {
  std::unique_ptr<ShmTransport> t(new ShmTransport(rank, size, timeout_s, std::move(liveness)));
  t->spin_ = spin;
  remove_orphaned_shm_segments();
  if (size <= kShmP2pMaxRanks) t->p2p_chunk_ = kP2pChunkBytes;
  const size_t n = static_cast<size_t>(size);
  const size_t p2p_ctl_bytes = (n * sizeof(P2pCtl) + 4095) / 4096 * 4096;
  const size_t p2p_bytes = t->p2p_chunk_ > 0 ? p2p_ctl_bytes + n * kP2pSlots * t->p2p_chunk_ : 0;
  const size_t seg_bytes = 4096 + kShmSlots * t->chunk_ + p2p_bytes;
  uint64_t rnd = 0;
  if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd)) rnd = static_cast<uint64_t>(getpid());
  constexpr size_t kName = 64;
  char mine[kName] = {};
  std::snprintf(mine, kName, "/tessera-%d-%d-%016llx", static_cast<int>(getpid()), rank,
                static_cast<unsigned long long>(rnd));
  t->segs_.resize(static_cast<size_t>(size));
  t->segs_[static_cast<size_t>(rank)] = map_segment(mine, seg_bytes, true);
  std::vector<char> names(kName * static_cast<size_t>(size));
  try {
    exchange(mine, names.data(), kName);
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      t->segs_[static_cast<size_t>(r)] = map_segment(
          std::string(names.data() + kName * static_cast<size_t>(r)), seg_bytes, false);
    }
    for (auto& s : t->segs_) s->p2p = s->data + kShmSlots * t->chunk_;
    // Everyone has mapped everything (the names can go) and says whether it can read every
    // peer's memory: the one-copy all_gather needs all of them to.
    char can = single_copy ? 1 : 0;
    for (int r = 0; r < size && can; ++r) {
      if (r != rank && !can_read_memory_of(t->segs_[static_cast<size_t>(r)]->ctrl)) can = 0;
    }
    std::vector<char> all(static_cast<size_t>(size));
    exchange(&can, all.data(), 1);
    t->single_copy_ = std::all_of(all.begin(), all.end(), [](char c) { return c == 1; });
  } catch (...) {
    shm_unlink(mine);
    throw;
  }
  shm_unlink(mine);
  return t;
}

char* ShmTransport::slot(int peer, uint64_t unit) {
  return segs_[static_cast<size_t>(peer)]->data + (unit % kShmSlots) * chunk_;
}

namespace {

std::atomic<uint32_t>& counter_word(Control* ctl, int c) {
  return c == 0 ? ctl->pub.v : c == 1 ? ctl->red.v : ctl->done.v;
}

}  // namespace

void ShmTransport::post(Counter c, uint64_t value) {
  Control* ctl = segs_[static_cast<size_t>(rank_)]->ctrl;
  std::atomic<uint32_t>& w = counter_word(ctl, static_cast<int>(c));
  w.store(static_cast<uint32_t>(value), std::memory_order_seq_cst);
  if (ctl->waiters.v.load(std::memory_order_seq_cst) > 0) futex(&w, FUTEX_WAKE, INT_MAX, nullptr);
}

// Alive and not a zombie: the launcher reaps at once, but a rank started by hand may have a
// parent that never does.
bool process_alive(int32_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return pid <= 0 || errno == EPERM;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return true;  // no /proc: trust kill()
  char buf[512] = {};
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const char* paren = std::strrchr(buf, ')');  // "pid (comm) S ..."; comm may hold spaces
  return !(paren && static_cast<size_t>(paren - buf) + 2 < n && paren[2] == 'Z');
}

// One story on every survivor: the awaited peer dead without reporting a failure (killed,
// crashed) is the root cause, named with its pid; otherwise the first reported cause is
// repeated (a peer that failed and then exited is not blamed for exiting).
std::string ShmTransport::peer_failure(const IoContext& ctx, int awaited) {
  const std::string me = "[ring] rank " + std::to_string(rank_) + ": ";
  int reporter = -1;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const Control* c = segs_[static_cast<size_t>(r)]->ctrl;
    const bool reported = c->abort.v.load(std::memory_order_acquire) != 0;
    if (r == awaited && !reported && !process_alive(c->pid)) {
      return me + "rank " + std::to_string(r) + " (pid " + std::to_string(c->pid) + ") exited " +
             describe_op(ctx) + " (shared memory); see its log for why.";
    }
    if (reported && reporter < 0) reporter = r;
  }
  if (reporter < 0) return "";
  const Control* c = segs_[static_cast<size_t>(reporter)]->ctrl;
  std::string cause(c->cause, strnlen(c->cause, kCauseBytes));
  if (cause.empty()) {
    return me + "rank " + std::to_string(reporter) + " failed " + describe_op(ctx) +
           " (shared memory); see its error.";
  }
  // Passed on unchanged if this rank fails in turn, so the story keeps its first witness.
  relay_cause_ = cause;
  relay_rank_ = c->cause_rank;
  return me + cause + " (reported by rank " + std::to_string(relay_rank_) + "; this rank was " +
         describe_op(ctx) + ")";
}

void ShmTransport::abort(const std::string& cause) {
  aborted_ = true;
  Control* ctl = segs_[static_cast<size_t>(rank_)]->ctrl;
  if (ctl->abort.v.load() == 0) {
    const bool relayed = relay_rank_ >= 0;
    std::strncpy(ctl->cause, (relayed ? relay_cause_ : cause).c_str(), kCauseBytes - 1);
    ctl->cause_rank = relayed ? relay_rank_ : rank_;
    std::atomic_thread_fence(std::memory_order_release);
  }
  ctl->abort.v.store(1);
  for (Word* w : {&ctl->pub, &ctl->red, &ctl->done}) {
    w->v.fetch_add(0);
    futex(&w->v, FUTEX_WAKE, INT_MAX, nullptr);
  }
  for (TinyLine& t : ctl->tiny) futex(&t.seq, FUTEX_WAKE, INT_MAX, nullptr);
}

IoContext ShmTransport::io_context(int peer, const WireHeader& h, std::string& dtype) const {
  IoContext ctx;
  ctx.op = op_kind_name(static_cast<OpKind>(h.kind));
  ctx.bytes = h.bytes;
  dtype = h.dtype == kBytesDtype ? "" : dtype_name(kAllDtypes[h.dtype]);
  ctx.dtype = dtype.c_str();
  ctx.rank = rank_;
  ctx.peer = peer;
  ctx.peer_address = "shared memory";
  ctx.timeout_s = timeout_s_;
  return ctx;
}

void ShmTransport::wait_for(int peer, Counter c, uint64_t target64, const WireHeader& mine) {
  Control* ctl = segs_[static_cast<size_t>(peer)]->ctrl;
  // A peer that took the tiny path for the unit we wait to see published called something
  // else: wait_word reports it instead of waiting out the timeout.
  const uint64_t unit = c == Counter::pub ? target64 - 1 : kNoUnit;
  wait_word(peer, counter_word(ctl, static_cast<int>(c)), target64, mine, unit, false);
}

void ShmTransport::wait_word(int peer, std::atomic<uint32_t>& w, uint64_t target64,
                             const WireHeader& mine, uint64_t unit, bool tiny) {
  trace::WaitScope waiting;
  Control* ctl = segs_[static_cast<size_t>(peer)]->ctrl;
  const auto target = static_cast<uint32_t>(target64);
  // A first burst of polls without reading the clock: most waits end within it (not when
  // the peer may need this CPU to get there).
  for (int i = 0; i < (spin_.yield ? 0 : 64); ++i) {
    if (reached(w.load(std::memory_order_acquire), target)) return;
    cpu_relax();
  }
  auto start = Clock::now();
  auto spin_end = start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(spin_.spin_s));
  // Bounded spin (the peer is usually running on another core and posts within
  // microseconds), then sleep on the futex. With more ranks than CPUs the peer may be waiting
  // for this core, so the spin yields it every 4 polls (measured, 4 ranks on 2 CPUs, 4-byte
  // all_sum: 170 us without yielding, 4.6 us yielding every 64 polls, 3.2 us every 4); with a
  // CPU per rank a yield only costs.
  for (int i = 0; spin_.spin_s > 0; ++i) {
    if (reached(w.load(std::memory_order_acquire), target)) return;
    if (spin_.yield && (i & 3) == 3) {
      sched_yield();
    } else {
      cpu_relax();
    }
    if ((i & 63) == 63 && Clock::now() >= spin_end) break;
  }
  std::string dname;
  const IoContext ctx = io_context(peer, mine, dname);
  while (true) {
    // The counter first: a peer that posted and then left (or failed a later check) must not
    // turn a completed wait into an error.
    if (reached(w.load(std::memory_order_acquire), target)) return;
    if (unit != kNoUnit) {
      // The peer published this unit the other way (tiny line versus pub/hdr): a mismatch.
      const auto u1 = static_cast<uint32_t>(unit + 1);
      if (tiny && reached(ctl->pub.v.load(std::memory_order_acquire), u1)) {
        WireHeader copy = ctl->hdr[unit % kShmSlots];
        throw_mismatch(peer, mine, copy);
      }
      const TinyLine& t = ctl->tiny[unit % kShmSlots];
      if (!tiny && reached(t.seq.load(std::memory_order_acquire), u1)) {
        WireHeader copy = t.hdr;
        throw_mismatch(peer, mine, copy);
      }
    }
    // A peer that posted what we wait for and then left or died (its last op done) is no
    // failure: its post came before its exit, so once its exit is seen the post is visible.
    auto raise_unless_posted = [&](const std::string& story) {
      if (reached(w.load(std::memory_order_acquire), target)) return;
      throw std::runtime_error(story);
    };
    if (!aborted_) {
      std::string story = peer_failure(ctx, peer);
      if (!story.empty()) {
        raise_unless_posted(story);
        return;
      }
    }
    if (aborted_) {
      throw std::runtime_error("[ring] rank " + std::to_string(rank_) + ": aborted " +
                               describe_op(ctx));
    }
    for (const auto& [fd, owner] : liveness_) {
      if (owner != peer) continue;  // a neighbour that finished and left is no failure
      pollfd pf{fd, POLLIN | POLLRDHUP, 0};
      if (::poll(&pf, 1, 0) == 1) {
        char b;
        ssize_t n = ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          // Its process may still be going away: give the pid check a moment to see it.
          for (int i = 0; i < 20; ++i) {
            if (reached(w.load(std::memory_order_acquire), target)) return;
            std::string story = peer_failure(ctx, peer);
            if (!story.empty()) {
              raise_unless_posted(story);
              return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
          raise_unless_posted("[ring] rank " + std::to_string(rank_) + ": rank " +
                              std::to_string(peer) + " closed its connection " +
                              describe_op(ctx) +
                              " (shared memory) while its process lives on; see its log.");
          return;
        }
      }
    }
    std::atomic<uint32_t>& waiters = ctl->waiters.v;
    waiters.fetch_add(1, std::memory_order_seq_cst);
    uint32_t v = w.load(std::memory_order_seq_cst);
    if (!reached(v, target)) {
      timespec ts{0, kSleepSliceMs * 1000000L};
      futex(&w, FUTEX_WAIT, v, &ts);
    }
    waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (reached(w.load(std::memory_order_acquire), target)) return;
    check_interrupt(ctx);
    if (timeout_s_ > 0 &&
        std::chrono::duration<double>(Clock::now() - start).count() > timeout_s_) {
      throw_timeout(ctx);
    }
  }
}

void ShmTransport::check_header(int peer, uint64_t unit, const WireHeader& mine) {
  const WireHeader& h = segs_[static_cast<size_t>(peer)]->ctrl->hdr[unit % kShmSlots];
  if (!headers_match(h, mine)) {
    WireHeader copy = h;
    throw_mismatch(peer, mine, copy);
  }
}

void ShmTransport::throw_mismatch(int peer, const WireHeader& mine, const WireHeader& theirs) {
  throw std::runtime_error(
      "[ring] rank " + std::to_string(rank_) + ": mismatched operation with rank " +
      std::to_string(peer) + " (shared memory): this rank called " + describe_header(mine) +
      ", rank " + std::to_string(peer) + " called " + describe_header(theirs) +
      ". Every rank must call the same collectives with the same sizes and dtypes in the "
      "same order.");
}

void ShmTransport::wait_all(Counter c, uint64_t target, const WireHeader& mine) {
  for (int j = 0; j < size_; ++j) {
    if (j != rank_) wait_for(j, c, target, mine);
  }
}

void ShmTransport::slot_free(uint64_t unit, const WireHeader& h) {
  if (unit < kShmSlots) return;
  const auto target = static_cast<uint32_t>(unit - kShmSlots + 1);
  for (int j = 0; j < size_; ++j) {
    if (j == rank_) continue;
    // Peers are rarely kShmSlots units behind: the last value read usually answers, and
    // their `done` line is not fetched on every operation.
    uint32_t& seen = done_seen_[static_cast<size_t>(j)];
    if (reached(seen, target)) continue;
    wait_for(j, Counter::done, target, h);
    seen = segs_[static_cast<size_t>(j)]->ctrl->done.v.load(std::memory_order_acquire);
  }
}

void ShmTransport::begin_unit(uint64_t unit, const WireHeader& h) {
  slot_free(unit, h);
  segs_[static_cast<size_t>(rank_)]->ctrl->hdr[unit % kShmSlots] = h;
}

// One unit through the peers' tiny lines: publish hdr and `bytes` of `in`, wait for every
// peer's line of the same unit and check its header. Returns the unit; the peers' data stays
// in their lines until this rank posts `done` for it.
uint64_t ShmTransport::tiny_exchange(const WireHeader& h, const void* in, size_t bytes) {
  const uint64_t u = unit_++;
  slot_free(u, h);
  Control* mine = segs_[static_cast<size_t>(rank_)]->ctrl;
  TinyLine& t = mine->tiny[u % kShmSlots];
  t.hdr = h;
  if (bytes > 0) std::memcpy(t.data, in, bytes);
  t.seq.store(static_cast<uint32_t>(u + 1), std::memory_order_seq_cst);
  if (mine->waiters.v.load(std::memory_order_seq_cst) > 0) {
    futex(&t.seq, FUTEX_WAKE, INT_MAX, nullptr);
  }
  for (int j = 0; j < size_; ++j) {
    if (j == rank_) continue;
    const TinyLine& p = segs_[static_cast<size_t>(j)]->ctrl->tiny[u % kShmSlots];
    wait_word(j, const_cast<std::atomic<uint32_t>&>(p.seq), u + 1, h, u, true);
    const WireHeader& ph = p.hdr;
    if (!headers_match(ph, h)) {
      WireHeader copy = ph;
      throw_mismatch(j, h, copy);
    }
  }
  return u;
}

const char* ShmTransport::tiny_data(int peer, uint64_t unit) {
  return segs_[static_cast<size_t>(peer)]->ctrl->tiny[unit % kShmSlots].data;
}

ShmTransport::P2pCtl* ShmTransport::p2p_ctl(int owner, int other) {
  return reinterpret_cast<P2pCtl*>(segs_[static_cast<size_t>(owner)]->p2p) + other;
}

char* ShmTransport::p2p_slot(int owner, int other, uint64_t chunk) {
  const size_t n = static_cast<size_t>(size_);
  const size_t ctl_bytes = (n * sizeof(P2pCtl) + 4095) / 4096 * 4096;
  return segs_[static_cast<size_t>(owner)]->p2p + ctl_bytes +
         (static_cast<size_t>(other) * kP2pSlots + chunk % kP2pSlots) * p2p_chunk_;
}

namespace {

WireHeader p2p_header(size_t bytes, Dtype dtype, uint64_t seq) {
  return make_header(OpKind::send, seq, bytes / dtype.size(), bytes, dtype_code(dtype));
}

// Wakes sleepers of `w` (a word of this rank's segment) when someone sleeps on this segment.
void post_word(Control* mine, std::atomic<uint32_t>& w, uint32_t value) {
  w.store(value, std::memory_order_seq_cst);
  if (mine->waiters.v.load(std::memory_order_seq_cst) > 0) futex(&w, FUTEX_WAKE, INT_MAX, nullptr);
}

}  // namespace

void ShmTransport::send(const void* in_v, size_t bytes, Dtype dtype, int dst, uint64_t seq) {
  const WireHeader h = p2p_header(bytes, dtype, seq);
  auto* in = static_cast<const char*>(in_v);
  P2pCtl* out_ctl = p2p_ctl(rank_, dst);  // ours, for dst
  P2pCtl* back = p2p_ctl(dst, rank_);     // dst's, for us: its `consumed`
  uint64_t& c = p2p_sent_[static_cast<size_t>(dst)];
  const size_t chunks = std::max<size_t>(1, (bytes + p2p_chunk_ - 1) / p2p_chunk_);
  for (size_t k = 0; k < chunks; ++k, ++c) {
    if (c >= kP2pSlots) {
      wait_word(dst, back->consumed.v, c - kP2pSlots + 1, h, kNoUnit, false);
    }
    const size_t off = k * p2p_chunk_, len = std::min(p2p_chunk_, bytes - std::min(bytes, off));
    WireHeader ch = h;
    ch.lane = static_cast<uint8_t>(k);
    out_ctl->hdr[c % kP2pSlots] = ch;
    if (len > 0) std::memcpy(p2p_slot(rank_, dst, c), in + off, len);
    post_word(segs_[static_cast<size_t>(rank_)]->ctrl, out_ctl->sent.v,
              static_cast<uint32_t>(c + 1));
  }
}

void ShmTransport::recv(void* out_v, size_t bytes, Dtype dtype, int src, uint64_t seq) {
  const WireHeader h = p2p_header(bytes, dtype, seq);
  auto* out = static_cast<char*>(out_v);
  P2pCtl* in_ctl = p2p_ctl(src, rank_);  // src's, for us
  P2pCtl* mine = p2p_ctl(rank_, src);    // ours, for src: our `consumed`
  uint64_t& c = p2p_read_[static_cast<size_t>(src)];
  const size_t chunks = std::max<size_t>(1, (bytes + p2p_chunk_ - 1) / p2p_chunk_);
  for (size_t k = 0; k < chunks; ++k, ++c) {
    wait_word(src, in_ctl->sent.v, c + 1, h, kNoUnit, false);
    WireHeader expect = h;
    expect.lane = static_cast<uint8_t>(k);
    const WireHeader got = in_ctl->hdr[c % kP2pSlots];
    if (!headers_match(got, expect)) {
      throw_mismatch(src, h, got);
    }
    const size_t off = k * p2p_chunk_, len = std::min(p2p_chunk_, bytes - std::min(bytes, off));
    if (len > 0) std::memcpy(out + off, p2p_slot(src, rank_, c), len);
    post_word(segs_[static_cast<size_t>(rank_)]->ctrl, mine->consumed.v,
              static_cast<uint32_t>(c + 1));
  }
}

}  // namespace tessera::distributed::detail
