// The caching allocator: page-aligned blocks (huge-page advised from 4 MiB), a cache of freed
// blocks by size, active/peak/cache counters, and an enforced memory limit (memory.h).
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "core/fork.h"
#include "tessera/allocator.h"
#include "tessera/config.h"
#include "tessera/memory.h"

namespace tessera {

namespace {

constexpr size_t kSmallAlign = 64;
constexpr size_t kPage = 4096;
constexpr size_t kHuge = size_t{2} << 20;
constexpr size_t kHugeFrom = size_t{4} << 20;  // blocks this big are 2 MiB aligned + THP advised

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

size_t block_size_for(size_t n) {
  if (n < kPage) return round_up(n == 0 ? 1 : n, kSmallAlign);
  if (n < kHugeFrom) return round_up(n, kPage);
  return round_up(n, kHuge);
}

std::string human(size_t bytes) {
  std::ostringstream os;
  os.precision(3);
  if (bytes >= (size_t{1} << 30)) os << static_cast<double>(bytes) / (1 << 30) << " GiB";
  else if (bytes >= (size_t{1} << 20)) os << static_cast<double>(bytes) / (1 << 20) << " MiB";
  else if (bytes >= 1024) os << static_cast<double>(bytes) / 1024 << " KiB";
  else os << bytes << " B";
  os << " (" << bytes << " bytes)";
  return os.str();
}

void* system_alloc(size_t block) {
  if (block < kPage) {
    void* p = std::aligned_alloc(kSmallAlign, block);
    if (!p) throw std::bad_alloc();
    return p;
  }
  if (block < kHugeFrom) {
    void* p = std::aligned_alloc(kPage, block);
    if (!p) throw std::bad_alloc();
    return p;
  }
  // Map block + 2 MiB, trim to a 2 MiB aligned region so transparent huge pages can back it.
  size_t len = block + kHuge;
  void* raw = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  auto base = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = round_up(base, kHuge);
  if (aligned > base) munmap(raw, aligned - base);
  size_t tail = (base + len) - (aligned + block);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + block), tail);
  madvise(reinterpret_cast<void*>(aligned), block, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

void system_free(void* p, size_t block) {
  if (block < kHugeFrom) {
    std::free(p);
  } else {
    munmap(p, block);
  }
}

size_t physical_memory() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return size_t{8} << 30;
  return static_cast<size_t>(pages) * static_cast<size_t>(page);
}

}  // namespace

// Blocks below a page are kept in one exact-size bin per 64-byte class, so the many small
// arrays of an eager graph are served without a search; larger blocks in a size-ordered map.
// A buffer carries its block's size, so freeing looks nothing up.
using allocator::Buffer;

class CachingAllocator final : public allocator::Allocator {
 public:
  CachingAllocator() {
    const int64_t mb = config::get_int("TESSERA_MEMORY_LIMIT_MB");
    memory_limit_ = mb > 0 ? static_cast<size_t>(mb) << 20
                           : static_cast<size_t>(0.8 * static_cast<double>(physical_memory()));
    cache_limit_ = memory_limit_;
  }
  ~CachingAllocator() {
    std::lock_guard<std::mutex> lock(mu_);
    release_cache_locked(cache_bytes_);
    release_lazy_locked(lazy_bytes_);
  }

  Buffer malloc(size_t n) override {
    size_t block = block_size_for(n);
    std::unique_lock<std::mutex> lock(mu_);
    auto [p, real] = take_cached_locked(block);
    if (p) {
      block = real;
    } else {
      if (active_ + cache_bytes_ + block > memory_limit_) {
        release_cache_locked(active_ + cache_bytes_ + block - memory_limit_);
      }
      if (active_ + block > memory_limit_) {
        throw std::runtime_error(
            "[malloc] cannot allocate " + human(n) + ": " + human(active_) +
            " are already in use and the memory limit is " + human(memory_limit_) +
            ". Free arrays you no longer need, evaluate in smaller pieces, or raise the limit "
            "with set_memory_limit().");
      }
      std::tie(p, real) = take_fitting(lazy_, block, lazy_bytes_);
      if (p) {
        block = real;
      } else {
        if (block >= kHugeFrom) release_lazy_locked(block);  // a new mapping takes their place
        lock.unlock();  // the system call may be slow; no state is touched meanwhile
        p = system_alloc(block);
        lock.lock();
      }
    }
    active_ += block;
    if (active_ > peak_) peak_ = active_;
    return owned(p, n, block);
  }

  void free(Buffer b) override {
    const size_t block = block_of(b);
    if (!b.raw_ptr() || block == 0) return;  // wrapped user memory is freed by its own deleter
    std::lock_guard<std::mutex> lock(mu_);
    active_ -= block;
    if (block > cache_limit_) {
      system_free(b.raw_ptr(), block);
      return;
    }
    if (block < kPage) {
      small_[block / kSmallAlign - 1].push_back(b.raw_ptr());
    } else {
      large_.emplace(block, b.raw_ptr());
    }
    cache_bytes_ += block;
    if (cache_bytes_ > cache_limit_) release_cache_locked(cache_bytes_ - cache_limit_);
  }

  size_t size(Buffer b) const override { return block_of(b) ? block_of(b) : b.size(); }

  size_t active() { std::lock_guard<std::mutex> l(mu_); return active_; }
  size_t peak() { std::lock_guard<std::mutex> l(mu_); return peak_; }
  void reset_peak() { std::lock_guard<std::mutex> l(mu_); peak_ = active_; }
  size_t cache() { std::lock_guard<std::mutex> l(mu_); return cache_bytes_; }
  size_t memory_limit() { std::lock_guard<std::mutex> l(mu_); return memory_limit_; }
  size_t set_memory_limit(size_t v) {
    std::lock_guard<std::mutex> l(mu_);
    std::swap(v, memory_limit_);
    return v;
  }
  size_t set_cache_limit(size_t v) {
    std::lock_guard<std::mutex> l(mu_);
    std::swap(v, cache_limit_);
    if (cache_bytes_ > cache_limit_) release_cache_locked(cache_bytes_ - cache_limit_);
    return v;
  }
  // clear_cache(): blocks below kHugeFrom go back to the system; larger ones are handed back
  // lazily (below), so a program that clears its cache every step (mlx-lm's trainer does) does
  // not fault every page of its working set in again.
  void clear() {
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = large_.begin(); it != large_.end();) {
      if (it->first < kHugeFrom) {
        ++it;
        continue;
      }
      madvise(it->second, it->first, MADV_FREE);
      lazy_.emplace(it->first, it->second);
      lazy_bytes_ += it->first;
      cache_bytes_ -= it->first;
      it = large_.erase(it);
    }
    release_cache_locked(cache_bytes_);
  }

 private:
  // A cached block: of the same size below a page, else the same or up to 1/8 larger (no more
  // waste than that). Returns the pointer and the block's real size, or {nullptr, 0}.
  std::pair<void*, size_t> take_cached_locked(size_t block) {
    if (block < kPage) {
      auto& bin = small_[block / kSmallAlign - 1];
      if (bin.empty()) return {nullptr, 0};
      void* p = bin.back();
      bin.pop_back();
      cache_bytes_ -= block;
      return {p, block};
    }
    return take_fitting(large_, block, cache_bytes_);
  }

  // A block of `blocks` of the same size as `block` or up to 1/8 larger, taken out of it and its
  // size out of `bytes`; {nullptr, 0} when none fits.
  static std::pair<void*, size_t> take_fitting(std::multimap<size_t, void*>& blocks, size_t block,
                                               size_t& bytes) {
    auto it = blocks.lower_bound(block);
    if (it == blocks.end() || it->first > block + block / 8) return {nullptr, 0};
    std::pair<void*, size_t> r{it->second, it->first};
    bytes -= it->first;
    blocks.erase(it);
    return r;
  }

  // Unmaps lazily freed blocks, largest first, until at least `bytes` are gone or none remain.
  void release_lazy_locked(size_t bytes) {
    for (size_t freed = 0; freed < bytes && !lazy_.empty();) {
      auto it = std::prev(lazy_.end());
      system_free(it->second, it->first);
      freed += it->first;
      lazy_bytes_ -= it->first;
      lazy_.erase(it);
    }
  }

  // Free cached blocks, largest first, until at least `bytes` are released or none remain.
  void release_cache_locked(size_t bytes) {
    size_t freed = 0;
    while (freed < bytes && !large_.empty()) {
      auto it = std::prev(large_.end());
      system_free(it->second, it->first);
      freed += it->first;
      cache_bytes_ -= it->first;
      large_.erase(it);
    }
    for (size_t c = small_.size(); c-- > 0 && freed < bytes;) {
      const size_t block = (c + 1) * kSmallAlign;
      auto& bin = small_[c];
      while (freed < bytes && !bin.empty()) {
        system_free(bin.back(), block);
        bin.pop_back();
        freed += block;
        cache_bytes_ -= block;
      }
    }
  }

  friend void detail::lock_allocator_for_fork();
  friend void detail::unlock_allocator_after_fork();
  std::mutex mu_;  // guards everything below; any thread may allocate or free
  std::array<std::vector<void*>, kPage / kSmallAlign> small_;  // bin c holds (c+1)*64-byte blocks
  std::multimap<size_t, void*> large_;
  // Blocks clear_cache() handed back with MADV_FREE: the kernel takes their pages when it needs
  // memory (zero-filled if touched again), else they are still there; their address ranges stay
  // mapped for reuse. Not counted as cache (their memory is the system's to take); unmapped when
  // a new mapping is made.
  std::multimap<size_t, void*> lazy_;
  size_t lazy_bytes_ = 0;
  size_t active_ = 0, peak_ = 0, cache_bytes_ = 0;
  size_t memory_limit_ = 0, cache_limit_ = 0;
};

namespace {

CachingAllocator& instance() {
  // Never destroyed: buffers may be freed by static destructors after main returns.
  static auto* a = new CachingAllocator();
  return *a;
}

}  // namespace

void detail::lock_allocator_for_fork() { instance().mu_.lock(); }
void detail::unlock_allocator_after_fork() { instance().mu_.unlock(); }

namespace {
// The allocator of the device whose kernel this thread runs; null: the CPU's.
thread_local allocator::Allocator* t_device_allocator = nullptr;
}  // namespace

namespace allocator {
Allocator& allocator() { return instance(); }
Buffer malloc(size_t size) {
  if (t_device_allocator) return t_device_allocator->malloc(size);
  return instance().malloc(size);
}
void free(Buffer buffer) {
  if (buffer.owner_ == &instance()) {
    instance().free(buffer);  // the common case, without a virtual call
  } else if (buffer.owner_) {
    buffer.owner_->free(buffer);
  }
}
ScopedAllocator::ScopedAllocator(Allocator& a) : saved_(t_device_allocator) {
  t_device_allocator = &a;
}
ScopedAllocator::~ScopedAllocator() { t_device_allocator = saved_; }
}  // namespace allocator

size_t get_active_memory() { return instance().active(); }
size_t get_peak_memory() { return instance().peak(); }
void reset_peak_memory() { instance().reset_peak(); }
size_t get_cache_memory() { return instance().cache(); }
size_t set_memory_limit(size_t limit) { return instance().set_memory_limit(limit); }
size_t get_memory_limit() { return instance().memory_limit(); }
size_t set_cache_limit(size_t limit) { return instance().set_cache_limit(limit); }
void clear_cache() { instance().clear(); }
size_t set_wired_limit(size_t) { return 0; }

}  // namespace tessera
