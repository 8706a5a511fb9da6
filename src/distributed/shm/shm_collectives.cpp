// The collectives over the shared-memory segments (shm_transport.h describes the algorithms);
// the segments, waits and failure reports are shm_transport.cpp's.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "distributed/reduce_kernels.h"
#include "distributed/ring/socket.h"
#include "distributed/shm/shm_layout.h"
#include "distributed/shm/shm_transport.h"

namespace tessera::distributed::detail {

using shm_layout::kTinyBytes;

namespace {

constexpr size_t kPieceBytes = 64 << 10;  // reduce granularity (the result stays in cache)

// Contiguous split of n elements into `parts` blocks: block b is [off(b), off(b) + len(b)).
struct Blocks {
  size_t n, seg;
  Blocks(size_t n_, size_t parts) : n(n_), seg((n_ + parts - 1) / parts) {}
  size_t off(size_t b) const { return std::min(n, b * seg); }
  size_t len(size_t b) const { return std::min(n, (b + 1) * seg) - off(b); }
};

}  // namespace

void ShmTransport::reduce_stage(uint64_t unit, const WireHeader& h, const char* in, char* out,
                                size_t base, size_t n, Dtype dtype, ReduceOp op, int divisor) {
  const size_t es = dtype.size();
  const size_t N = static_cast<size_t>(size_);
  const size_t r = static_cast<size_t>(rank_);
  for (int j = 0; j < size_; ++j) {
    if (j == rank_) continue;
    wait_for(j, Counter::pub, unit + 1, h);
    check_header(j, unit, h);
  }
  Blocks b(n, N);
  const size_t len = b.len(r);
  if (len > 0) {
    const size_t off = (base + b.off(r)) * es;
    char* dst = out + off;
    const char* own = in + off;
    char* result = slot(rank_, unit) + r * block_;
    const size_t piece = kPieceBytes / es;
    for (size_t p = 0; p < len; p += piece) {
      const size_t m = std::min(piece, len - p);
      const size_t pb = p * es;
      // Own contribution first (safe when in == out), then the peers in rank order.
      bool first = true;
      for (size_t k = 1; k < N; ++k) {
        const size_t j = (r + k) % N;
        const char* src = slot(static_cast<int>(j), unit) + r * block_ + pb;
        reduce_buffers(dst + pb, first ? own + pb : dst + pb, src, m, dtype, op);
        first = false;
      }
      if (divisor > 1) divide_buffer(dst + pb, m, dtype, divisor);
      std::memcpy(result + pb, dst + pb, m * es);
    }
  }
  post(Counter::red, unit + 1);
}

void ShmTransport::gather_stage(uint64_t unit, const WireHeader& h, char* out, size_t base,
                                size_t n, size_t es) {
  const size_t N = static_cast<size_t>(size_);
  Blocks b(n, N);
  for (size_t j = 0; j < N; ++j) {
    if (j == static_cast<size_t>(rank_)) continue;
    wait_for(static_cast<int>(j), Counter::red, unit + 1, h);
    if (b.len(j) > 0) {
      std::memcpy(out + (base + b.off(j)) * es, slot(static_cast<int>(j), unit) + j * block_,
                  b.len(j) * es);
    }
  }
  post(Counter::done, unit + 1);
}

void ShmTransport::all_reduce(const void* in_v, void* out_v, size_t count, Dtype dtype,
                              ReduceOp op, uint64_t seq, int divisor) {
  const size_t es = dtype.size();
  const size_t N = static_cast<size_t>(size_);
  const size_t r = static_cast<size_t>(rank_);
  auto* in = static_cast<const char*>(in_v);
  auto* out = static_cast<char*>(out_v);
  const OpKind kind = divisor > 1 ? OpKind::all_mean : reduce_kind(op, false);
  WireHeader h = make_header(kind, seq, count, count * es, dtype_code(dtype));

  if (h.bytes <= kTinyBytes) {
    // One cache line per rank; every rank reduces the inputs in rank order itself.
    h.lane = 0;
    const uint64_t u = tiny_exchange(h, in, h.bytes);
    if (count > 0) {
      auto src = [&](int j) { return tiny_data(j, u); };  // ours too: `in` may be `out`
      reduce_buffers(out, src(0), src(1), count, dtype, op);
      for (int j = 2; j < size_; ++j) reduce_buffers(out, out, src(j), count, dtype, op);
      if (divisor > 1) divide_buffer(out, count, dtype, divisor);
    }
    post(Counter::done, u + 1);
    return;
  }
  if (h.bytes <= kShmSmallBytes && h.bytes <= chunk_) {
    // One unit: everyone publishes everything and reduces everything itself, in rank order
    // from the slots (so in == out is safe and every rank computes the same bits).
    const uint64_t u = unit_++;
    h.lane = 0;
    begin_unit(u, h);
    if (h.bytes > 0) std::memcpy(slot(rank_, u), in, h.bytes);
    post(Counter::pub, u + 1);
    for (int j = 0; j < size_; ++j) {
      if (j == rank_) continue;
      wait_for(j, Counter::pub, u + 1, h);
      check_header(j, u, h);
    }
    if (count > 0) {
      reduce_buffers(out, slot(0, u), slot(1, u), count, dtype, op);
      for (int j = 2; j < size_; ++j) reduce_buffers(out, out, slot(j, u), count, dtype, op);
      if (divisor > 1) divide_buffer(out, count, dtype, divisor);
    }
    post(Counter::done, u + 1);
    return;
  }

  const size_t per_unit = N * (block_ / es);
  const size_t K = (count + per_unit - 1) / per_unit;
  const uint64_t u0 = unit_;
  unit_ += K;
  auto unit_n = [&](size_t k) { return std::min(per_unit, count - k * per_unit); };
  for (size_t t = 0; t < K + 2; ++t) {
    if (t < K) {
      // Copy-in: the blocks of unit t that the peers reduce.
      const uint64_t u = u0 + t;
      h.lane = static_cast<uint8_t>(t);
      begin_unit(u, h);
      const size_t base = t * per_unit;
      Blocks b(unit_n(t), N);
      char* mine = slot(rank_, u);
      for (size_t j = 0; j < N; ++j) {
        if (j != r && b.len(j) > 0) {
          std::memcpy(mine + j * block_, in + (base + b.off(j)) * es, b.len(j) * es);
        }
      }
      post(Counter::pub, u + 1);
    }
    if (t >= 1 && t - 1 < K) {
      const size_t k = t - 1;
      h.lane = static_cast<uint8_t>(k);
      reduce_stage(u0 + k, h, in, out, k * per_unit, unit_n(k), dtype, op, divisor);
    }
    if (t >= 2) {
      const size_t k = t - 2;
      h.lane = static_cast<uint8_t>(k);
      gather_stage(u0 + k, h, out, k * per_unit, unit_n(k), es);
    }
  }
}

void ShmTransport::reduce_scatter(const void* in_v, void* out_v, size_t count, Dtype dtype,
                                  ReduceOp op, uint64_t seq) {
  const size_t es = dtype.size();
  const size_t N = static_cast<size_t>(size_);
  const size_t r = static_cast<size_t>(rank_);
  const size_t epb = block_ / es;
  const size_t K = std::max<size_t>(1, (count + epb - 1) / epb);
  auto* in = static_cast<const char*>(in_v);
  auto* out = static_cast<char*>(out_v);
  WireHeader h = make_header(reduce_kind(op, true), seq, count, count * N * es, dtype_code(dtype));
  const uint64_t u0 = unit_;
  unit_ += K;
  auto unit_n = [&](size_t k) { return count == 0 ? 0 : std::min(epb, count - k * epb); };
  for (size_t t = 0; t < K + 1; ++t) {
    if (t < K) {
      const uint64_t u = u0 + t;
      h.lane = static_cast<uint8_t>(t);
      begin_unit(u, h);
      const size_t lo = t * epb, n = unit_n(t);
      char* mine = slot(rank_, u);
      for (size_t j = 0; j < N; ++j) {
        if (j != r && n > 0) std::memcpy(mine + j * block_, in + (j * count + lo) * es, n * es);
      }
      post(Counter::pub, u + 1);
    }
    if (t >= 1) {
      const size_t k = t - 1;
      const uint64_t u = u0 + k;
      h.lane = static_cast<uint8_t>(k);
      wait_all(Counter::pub, u + 1, h);
      for (int j = 0; j < size_; ++j) {
        if (j != rank_) check_header(j, u, h);
      }
      const size_t lo = k * epb, n = unit_n(k);
      if (n > 0) {
        char* dst = out + lo * es;
        const char* own = in + (r * count + lo) * es;
        for (size_t i = 1; i < N; ++i) {
          const size_t j = (r + i) % N;
          reduce_buffers(dst, i == 1 ? own : dst, slot(static_cast<int>(j), u) + r * block_, n,
                         dtype, op);
        }
      }
      post(Counter::done, u + 1);
    }
  }
}

void ShmTransport::all_gather(const void* in_v, void* out_v, size_t bytes, uint64_t seq) {
  const size_t N = static_cast<size_t>(size_);
  const size_t K = std::max<size_t>(1, (bytes + chunk_ - 1) / chunk_);
  auto* in = static_cast<const char*>(in_v);
  auto* out = static_cast<char*>(out_v);
  WireHeader h = make_header(OpKind::all_gather, seq, bytes, bytes);
  char* mine = out + static_cast<size_t>(rank_) * bytes;
  if (single_copy_ && bytes >= (size_ == 2 ? kShmSingleCopyPairBytes : kShmSingleCopyBytes)) {
    all_gather_direct(in, out, bytes, h);
    return;
  }
  if (in != mine && bytes > 0) std::memmove(mine, in, bytes);
  const uint64_t u0 = unit_;
  unit_ += K;
  auto unit_n = [&](size_t k) { return bytes == 0 ? 0 : std::min(chunk_, bytes - k * chunk_); };
  for (size_t t = 0; t < K + 1; ++t) {
    if (t < K) {
      const uint64_t u = u0 + t;
      h.lane = static_cast<uint8_t>(t);
      begin_unit(u, h);
      if (unit_n(t) > 0) std::memcpy(slot(rank_, u), in + t * chunk_, unit_n(t));
      post(Counter::pub, u + 1);
    }
    if (t >= 1) {
      const size_t k = t - 1;
      const uint64_t u = u0 + k;
      h.lane = static_cast<uint8_t>(k);
      for (size_t j = 0; j < N; ++j) {
        if (j == static_cast<size_t>(rank_)) continue;
        wait_for(static_cast<int>(j), Counter::pub, u + 1, h);
        check_header(static_cast<int>(j), u, h);
        if (unit_n(k) > 0) {
          std::memcpy(out + j * bytes + k * chunk_, slot(static_cast<int>(j), u), unit_n(k));
        }
      }
      post(Counter::done, u + 1);
    }
  }
}

void ShmTransport::all_gather_direct(const char* in, char* out, size_t bytes, WireHeader h) {
  const uint64_t u = unit_++;
  h.lane = 0;
  begin_unit(u, h);
  segs_[static_cast<size_t>(rank_)]->ctrl->block_addr[u % kShmSlots] =
      reinterpret_cast<uint64_t>(in);
  post(Counter::pub, u + 1);
  char* mine = out + static_cast<size_t>(rank_) * bytes;
  if (in != mine) std::memmove(mine, in, bytes);  // while the peers start reading `in`
  // Starting after our own rank, so that the ranks do not all read the same peer at once.
  for (int k = 1; k < size_; ++k) {
    const int j = (rank_ + k) % size_;
    wait_for(j, Counter::pub, u + 1, h);
    check_header(j, u, h);
    const uint64_t addr = segs_[static_cast<size_t>(j)]->ctrl->block_addr[u % kShmSlots];
    read_peer(j, addr, out + static_cast<size_t>(j) * bytes, bytes, h);
  }
  post(Counter::done, u + 1);
  // `in` must stay as it is until every peer has read it.
  for (int j = 0; j < size_; ++j) {
    if (j == rank_) continue;
    wait_for(j, Counter::done, u + 1, h);
    done_seen_[static_cast<size_t>(j)] = static_cast<uint32_t>(u + 1);
  }
}

void ShmTransport::read_peer(int peer, uint64_t addr, char* dst, size_t bytes,
                             const WireHeader& h) {
  const int32_t pid = segs_[static_cast<size_t>(peer)]->ctrl->pid;
  for (size_t got = 0; got < bytes;) {
    iovec local{dst + got, bytes - got};
    iovec remote{reinterpret_cast<void*>(addr + got), bytes - got};
    const ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    const int e = n < 0 ? errno : EFAULT;
    if (e == EINTR) continue;
    std::string dtype;
    const IoContext ctx = io_context(peer, h, dtype);
    std::string story = peer_failure(ctx, peer);
    if (story.empty()) {
      story = "[ring] rank " + std::to_string(rank_) + ": cannot read rank " +
              std::to_string(peer) + "'s block (pid " + std::to_string(pid) + ", " +
              format_bytes(bytes) + ") " + describe_op(ctx) + ": " + std::strerror(e) +
              ". Set TESSERA_RING_SHM_SINGLE_COPY=0 to copy through shared memory instead.";
    }
    throw std::runtime_error(story);
  }
}

void ShmTransport::broadcast(void* buf_v, size_t bytes, int root, uint64_t seq) {
  auto* buf = static_cast<char*>(buf_v);
  const size_t K = std::max<size_t>(1, (bytes + chunk_ - 1) / chunk_);
  // count = the root: ranks naming different roots get a mismatch
  WireHeader h = make_header(OpKind::broadcast, seq, static_cast<uint64_t>(root), bytes);
  const uint64_t u0 = unit_;
  unit_ += K;
  auto unit_n = [&](size_t k) { return bytes == 0 ? 0 : std::min(chunk_, bytes - k * chunk_); };
  for (size_t k = 0; k < K; ++k) {
    const uint64_t u = u0 + k;
    h.lane = static_cast<uint8_t>(k);
    begin_unit(u, h);  // every rank publishes its header: the root checks them below
    if (rank_ == root && unit_n(k) > 0) std::memcpy(slot(rank_, u), buf + k * chunk_, unit_n(k));
    post(Counter::pub, u + 1);
    if (rank_ != root) {
      wait_for(root, Counter::pub, u + 1, h);
      check_header(root, u, h);
      if (unit_n(k) > 0) std::memcpy(buf + k * chunk_, slot(root, u), unit_n(k));
    } else if (k == 0) {
      for (int j = 0; j < size_; ++j) {
        if (j == rank_) continue;
        wait_for(j, Counter::pub, u + 1, h);
        check_header(j, u, h);
      }
    }
    post(Counter::done, u + 1);
  }
}

void ShmTransport::barrier(uint64_t seq) {
  const uint64_t u = tiny_exchange(make_header(OpKind::barrier, seq, 0, 0), nullptr, 0);
  post(Counter::done, u + 1);
}

}  // namespace tessera::distributed::detail
