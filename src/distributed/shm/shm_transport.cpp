// Shared-memory collectives for ranks on one host (see shm_transport.h).
#include "distributed/shm/shm_transport.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "distributed/reduce_kernels.h"
#include "distributed/ring/socket.h"

namespace tessera::distributed::detail {

namespace {

constexpr double kSpinSeconds = 50e-6;  // bounded spin before sleeping on the futex
constexpr int kSleepSliceMs = 10;       // futex sleeps this long between liveness checks

struct alignas(64) Word {
  std::atomic<uint32_t> v{0};
  char pad[60];
};

struct Control {
  Word pub;      // rounds whose input blocks and header are published
  Word red;      // rounds whose result block is written
  Word done;     // rounds this rank has finished reading from everyone
  Word abort;    // non-zero: this rank failed
  Word waiters;  // threads sleeping on one of the counters above
  WireHeader hdr[2];
};

long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

bool reached(uint32_t v, uint32_t target) { return static_cast<int32_t>(v - target) >= 0; }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

struct ShmTransport::Segment {
  std::string name;
  void* base = nullptr;
  size_t bytes = 0;
  Control* ctrl = nullptr;
  char* data = nullptr;
  ~Segment() {
    if (base) munmap(base, bytes);
  }
};

namespace {

size_t segment_bytes(int size) {
  return 4096 + 2 * static_cast<size_t>(size) * kShmBlockBytes;
}

std::unique_ptr<ShmTransport::Segment> map_segment(const std::string& name, int size,
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
  seg->bytes = segment_bytes(size);
  if (create && ftruncate(fd, static_cast<off_t>(seg->bytes)) != 0) {
    int e = errno;
    close(fd);
    shm_unlink(name.c_str());
    throw std::runtime_error("[ring] shared memory: cannot size segment " + name + " to " +
                             format_bytes(seg->bytes) + ": " + std::strerror(e));
  }
  void* p = mmap(nullptr, seg->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    if (create) shm_unlink(name.c_str());
    throw std::runtime_error("[ring] shared memory: cannot map segment " + name + ": " +
                             std::strerror(errno));
  }
  seg->base = p;
  madvise(p, seg->bytes, MADV_HUGEPAGE);
  seg->ctrl = static_cast<Control*>(p);
  seg->data = static_cast<char*>(p) + 4096;
  if (create) {
    new (seg->ctrl) Control();
    std::memset(seg->data, 0, seg->bytes - 4096);  // fault the pages in now, not during ops
  }
  return seg;
}

}  // namespace

ShmTransport::ShmTransport(int rank, int size, double timeout_s, std::vector<int> liveness_fds)
    : rank_(rank), size_(size), timeout_s_(timeout_s), liveness_fds_(std::move(liveness_fds)) {}

ShmTransport::~ShmTransport() = default;

std::unique_ptr<ShmTransport> ShmTransport::create(
    int rank, int size, double timeout_s,
    const std::function<void(const void*, void*, size_t)>& exchange,
    std::vector<int> liveness_fds) {
  std::unique_ptr<ShmTransport> t(new ShmTransport(rank, size, timeout_s, std::move(liveness_fds)));
  uint64_t rnd = 0;
  if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd)) rnd = static_cast<uint64_t>(getpid());
  constexpr size_t kName = 64;
  char mine[kName] = {};
  std::snprintf(mine, kName, "/tessera-%d-%d-%016llx", static_cast<int>(getpid()), rank,
                static_cast<unsigned long long>(rnd));
  t->segs_.resize(static_cast<size_t>(size));
  t->segs_[static_cast<size_t>(rank)] = map_segment(mine, size, true);
  std::vector<char> names(kName * static_cast<size_t>(size));
  try {
    exchange(mine, names.data(), kName);
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      t->segs_[static_cast<size_t>(r)] =
          map_segment(std::string(names.data() + kName * static_cast<size_t>(r)), size, false);
    }
    char dummy = 0;
    std::vector<char> all(static_cast<size_t>(size));
    exchange(&dummy, all.data(), 1);  // everyone has mapped everything: the names can go
  } catch (...) {
    shm_unlink(mine);
    throw;
  }
  shm_unlink(mine);
  return t;
}

char* ShmTransport::buffer(int peer, int parity) {
  return segs_[static_cast<size_t>(peer)]->data +
         static_cast<size_t>(parity) * static_cast<size_t>(size_) * kShmBlockBytes;
}

void ShmTransport::post(Counter c, uint32_t value) {
  Control* ctl = segs_[static_cast<size_t>(rank_)]->ctrl;
  std::atomic<uint32_t>& w = c == Counter::pub ? ctl->pub.v : c == Counter::red ? ctl->red.v
                                                                                : ctl->done.v;
  w.store(value, std::memory_order_seq_cst);
  if (ctl->waiters.v.load(std::memory_order_seq_cst) > 0) futex(&w, FUTEX_WAKE, INT_MAX, nullptr);
}

void ShmTransport::abort() {
  aborted_ = true;
  Control* ctl = segs_[static_cast<size_t>(rank_)]->ctrl;
  ctl->abort.v.store(1);
  for (Word* w : {&ctl->pub, &ctl->red, &ctl->done}) {
    w->v.fetch_add(0);
    futex(&w->v, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

void ShmTransport::wait_for(int peer, Counter c, uint32_t target, const WireHeader& mine) {
  Control* ctl = segs_[static_cast<size_t>(peer)]->ctrl;
  std::atomic<uint32_t>& w = c == Counter::pub ? ctl->pub.v : c == Counter::red ? ctl->red.v
                                                                                : ctl->done.v;
  if (reached(w.load(std::memory_order_acquire), target)) return;
  auto start = Clock::now();
  auto spin_end = start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(kSpinSeconds));
  for (int i = 0;; ++i) {
    if (reached(w.load(std::memory_order_acquire), target)) return;
    cpu_relax();
    if ((i & 63) == 63 && Clock::now() >= spin_end) break;
  }
  IoContext ctx;
  ctx.op = op_kind_name(static_cast<OpKind>(mine.kind));
  ctx.bytes = mine.bytes;
  std::string dname = mine.dtype == kBytesDtype ? "" : dtype_name(kAllDtypes[mine.dtype]);
  ctx.dtype = dname.c_str();
  ctx.rank = rank_;
  ctx.peer = peer;
  ctx.peer_address = "shared memory";
  ctx.timeout_s = timeout_s_;
  while (true) {
    for (int r = 0; r < size_; ++r) {
      if (segs_[static_cast<size_t>(r)]->ctrl->abort.v.load() != 0 && !aborted_) {
        throw std::runtime_error("[ring] rank " + std::to_string(rank_) + ": rank " +
                                 std::to_string(r) + " failed " + describe_op(ctx) +
                                 " (shared memory); see its error.");
      }
    }
    if (aborted_) {
      throw std::runtime_error("[ring] rank " + std::to_string(rank_) + ": aborted " +
                               describe_op(ctx));
    }
    for (int fd : liveness_fds_) {
      pollfd pf{fd, POLLIN | POLLRDHUP, 0};
      if (::poll(&pf, 1, 0) == 1) {
        char b;
        ssize_t n = ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          ctx.peer_address = "TCP liveness connection";
          throw std::runtime_error("[ring] rank " + std::to_string(rank_) +
                                   ": a ring neighbour closed its connection " +
                                   describe_op(ctx) +
                                   " (shared memory). The peer may have exited; see its log.");
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
    if (timeout_s_ > 0 &&
        std::chrono::duration<double>(Clock::now() - start).count() > timeout_s_) {
      throw std::runtime_error(timeout_message(ctx));
    }
  }
}

void ShmTransport::check_header(int peer, int parity, const WireHeader& mine) {
  const WireHeader& h = segs_[static_cast<size_t>(peer)]->ctrl->hdr[parity];
  if (h.kind != mine.kind || h.dtype != mine.dtype || h.seq != mine.seq ||
      h.count != mine.count || h.bytes != mine.bytes || h.lane != mine.lane) {
    WireHeader copy = h;
    throw std::runtime_error(
        "[ring] rank " + std::to_string(rank_) + ": mismatched operation with rank " +
        std::to_string(peer) + " (shared memory): this rank called " + describe_header(mine) +
        ", rank " + std::to_string(peer) + " called " + describe_header(copy) +
        ". Every rank must call the same collectives with the same sizes and dtypes in the "
        "same order.");
  }
}

// Waits until buffer `parity` is free on every rank (all finished round round_ - 2), then
// publishes our header for this round.
void ShmTransport::begin_round(const WireHeader& h, int parity) {
  if (round_ >= 2) {
    for (int j = 0; j < size_; ++j) {
      if (j != rank_) wait_for(j, Counter::done, round_ - 1, h);
    }
  }
  segs_[static_cast<size_t>(rank_)]->ctrl->hdr[parity] = h;
}

void ShmTransport::all_reduce(const void* in_v, void* out_v, size_t count, Dtype dtype,
                              ReduceOp op, uint64_t seq) {
  const size_t es = dtype.size();
  const size_t N = static_cast<size_t>(size_);
  const size_t r = static_cast<size_t>(rank_);
  const size_t epb = kShmBlockBytes / es;  // elements per block
  const size_t per_round = epb * N;
  const size_t rounds = count == 0 ? 1 : (count + per_round - 1) / per_round;
  auto* in = static_cast<const char*>(in_v);
  auto* out = static_cast<char*>(out_v);
  WireHeader h;
  h.kind = static_cast<uint8_t>(op == ReduceOp::sum   ? OpKind::all_sum
                                : op == ReduceOp::max ? OpKind::all_max
                                                      : OpKind::all_min);
  h.dtype = static_cast<uint8_t>(dtype.val());
  h.seq = seq;
  h.count = count;
  h.bytes = count * es;
  for (size_t k = 0; k < rounds; ++k) {
    const int parity = static_cast<int>(round_ & 1);
    h.lane = static_cast<uint8_t>(k);
    const size_t base = k * per_round;
    const size_t n = count == 0 ? 0 : std::min(per_round, count - base);
    const size_t seg = (n + N - 1) / N;
    auto off = [&](size_t b) { return std::min(n, b * seg); };
    auto len = [&](size_t b) { return std::min(n, (b + 1) * seg) - off(b); };
    begin_round(h, parity);
    char* mybuf = buffer(rank_, parity);
    for (size_t j = 0; j < N; ++j) {
      if (j != r && len(j) > 0) {
        std::memcpy(mybuf + j * kShmBlockBytes, in + (base + off(j)) * es, len(j) * es);
      }
    }
    post(Counter::pub, round_ + 1);
    for (int j = 0; j < size_; ++j) {
      if (j == rank_) continue;
      wait_for(j, Counter::pub, round_ + 1, h);
      check_header(j, parity, h);
    }
    // Our block: fold every rank's contribution straight from the peers' buffers (computed
    // once, so identical on every rank); the result goes to `out` and to our buffer.
    if (len(r) > 0) {
      auto src = [&](size_t j) -> const char* {
        return j == r ? in + (base + off(r)) * es : buffer(static_cast<int>(j), parity) + r * kShmBlockBytes;
      };
      char* dst = out + (base + off(r)) * es;
      // Fold order r, r+1, ..., r-1: fixed per block, and safe when in == out.
      reduce_buffers(dst, src(r), src((r + 1) % N), len(r), dtype, op);
      for (size_t j = 2; j < N; ++j) reduce_buffers(dst, dst, src((r + j) % N), len(r), dtype, op);
      std::memcpy(mybuf + r * kShmBlockBytes, dst, len(r) * es);
    }
    post(Counter::red, round_ + 1);
    for (size_t j = 0; j < N; ++j) {
      if (j == r) continue;
      wait_for(static_cast<int>(j), Counter::red, round_ + 1, h);
      if (len(j) > 0) {
        std::memcpy(out + (base + off(j)) * es,
                    buffer(static_cast<int>(j), parity) + j * kShmBlockBytes, len(j) * es);
      }
    }
    post(Counter::done, round_ + 1);
    ++round_;
  }
}

void ShmTransport::reduce_scatter(const void* in_v, void* out_v, size_t count, Dtype dtype,
                                  ReduceOp op, uint64_t seq) {
  const size_t es = dtype.size();
  const size_t N = static_cast<size_t>(size_);
  const size_t r = static_cast<size_t>(rank_);
  const size_t epb = kShmBlockBytes / es;
  const size_t rounds = count == 0 ? 1 : (count + epb - 1) / epb;
  auto* in = static_cast<const char*>(in_v);
  auto* out = static_cast<char*>(out_v);
  WireHeader h;
  h.kind = static_cast<uint8_t>(op == ReduceOp::sum   ? OpKind::sum_scatter
                                : op == ReduceOp::max ? OpKind::max_scatter
                                                      : OpKind::min_scatter);
  h.dtype = static_cast<uint8_t>(dtype.val());
  h.seq = seq;
  h.count = count;
  h.bytes = count * N * es;
  for (size_t k = 0; k < rounds; ++k) {
    const int parity = static_cast<int>(round_ & 1);
    h.lane = static_cast<uint8_t>(k);
    const size_t lo = k * epb;
    const size_t n = count == 0 ? 0 : std::min(epb, count - lo);
    begin_round(h, parity);
    char* mybuf = buffer(rank_, parity);
    for (size_t j = 0; j < N; ++j) {
      if (j != r && n > 0) {
        std::memcpy(mybuf + j * kShmBlockBytes, in + (j * count + lo) * es, n * es);
      }
    }
    post(Counter::pub, round_ + 1);
    for (int j = 0; j < size_; ++j) {
      if (j == rank_) continue;
      wait_for(j, Counter::pub, round_ + 1, h);
      check_header(j, parity, h);
    }
    if (n > 0) {
      auto src = [&](size_t j) -> const char* {
        return j == r ? in + (r * count + lo) * es
                      : buffer(static_cast<int>(j), parity) + r * kShmBlockBytes;
      };
      char* dst = out + lo * es;
      reduce_buffers(dst, src(r), src((r + 1) % N), n, dtype, op);
      for (size_t j = 2; j < N; ++j) reduce_buffers(dst, dst, src((r + j) % N), n, dtype, op);
    }
    post(Counter::done, round_ + 1);
    ++round_;
  }
}

void ShmTransport::all_gather(const void* in_v, void* out_v, size_t bytes, uint64_t seq) {
  const size_t N = static_cast<size_t>(size_);
  const size_t per_round = N * kShmBlockBytes;
  const size_t rounds = bytes == 0 ? 1 : (bytes + per_round - 1) / per_round;
  auto* in = static_cast<const char*>(in_v);
  auto* out = static_cast<char*>(out_v);
  WireHeader h;
  h.kind = static_cast<uint8_t>(OpKind::all_gather);
  h.seq = seq;
  h.count = bytes;
  h.bytes = bytes;
  for (size_t k = 0; k < rounds; ++k) {
    const int parity = static_cast<int>(round_ & 1);
    h.lane = static_cast<uint8_t>(k);
    const size_t lo = k * per_round;
    const size_t n = bytes == 0 ? 0 : std::min(per_round, bytes - lo);
    begin_round(h, parity);
    if (n > 0) std::memcpy(buffer(rank_, parity), in + lo, n);
    post(Counter::pub, round_ + 1);
    for (size_t j = 0; j < N; ++j) {
      if (j == static_cast<size_t>(rank_)) continue;
      wait_for(static_cast<int>(j), Counter::pub, round_ + 1, h);
      check_header(static_cast<int>(j), parity, h);
      if (n > 0) std::memcpy(out + j * bytes + lo, buffer(static_cast<int>(j), parity), n);
    }
    post(Counter::done, round_ + 1);
    ++round_;
  }
}

void ShmTransport::barrier(uint64_t seq) {
  WireHeader h;
  h.kind = static_cast<uint8_t>(OpKind::barrier);
  h.seq = seq;
  const int parity = static_cast<int>(round_ & 1);
  begin_round(h, parity);
  post(Counter::pub, round_ + 1);
  for (int j = 0; j < size_; ++j) {
    if (j == rank_) continue;
    wait_for(j, Counter::pub, round_ + 1, h);
    check_header(j, parity, h);
  }
  post(Counter::done, round_ + 1);
  ++round_;
}

}  // namespace tessera::distributed::detail
