// Per-thread free lists for the engine's small, short-lived objects (array descriptors, graph
// nodes, data handles: array.cpp; elementwise primitives: ops/unary.cpp, ops/binary.cpp). An
// eager graph makes and drops thousands of them in bursts,
// which overflow malloc's per-thread cache (7 blocks per size) and cost a search each; here a
// freed block goes on its thread's list and the next allocation of that size takes it back. A
// block freed by a thread that does not allocate its size (the stream's worker releasing a graph
// that mlx-lm's thread built) goes on a shared list instead, which the next thread to run dry
// takes whole: given to glibc, it was freed into the other thread's arena under its lock.
#pragma once

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <memory>
#include <new>

namespace tessera::detail {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kPoolObjects = false;  // let the sanitizer see every allocation
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kPoolObjects = false;
#else
inline constexpr bool kPoolObjects = true;
#endif
#else
inline constexpr bool kPoolObjects = true;
#endif

// One list per block size and thread. A block goes back on the list of the thread that drops
// the last reference, if that thread allocates from the list too (else to the system); a list
// holds at most kMaxBlocks.
template <size_t Size>
class FreeList {
 public:
  static constexpr uint32_t kMaxBlocks = 16384;

  static void* take() {
    State& s = state();
    if (s.phase == Phase::unused) {
      s.phase = Phase::live;
      drain_at_exit();  // constructs this thread's drain guard
    }
    if (!s.head && s.phase == Phase::live) s.head = returned().take_all(s.count);
    if (s.head) {
      Block* b = s.head;
      s.head = b->next;
      --s.count;
      return b;
    }
    return ::operator new(Size);
  }

  static void give(void* p) {
    State& s = state();
    auto* b = static_cast<Block*>(p);
    if (s.phase == Phase::live && s.count < kMaxBlocks) {
      b->next = s.head;
      s.head = b;
      ++s.count;
      return;
    }
    // A thread that does not allocate this size (a stream's worker releasing the graph that
    // mlx-lm's thread built), or whose list is full or gone: the shared list, unless that is
    // full too.
    if (!returned().give(b)) ::operator delete(p);
  }

 private:
  struct Block {
    Block* next;
  };
  // Blocks given back by threads without a list of their own, for the next thread whose list
  // runs dry to take all at once. Pushes and take-alls only (no single pops), so a block seen at
  // the head cannot be taken and pushed back in between (no ABA). The count bounds it loosely.
  class Returned {
   public:
    bool give(Block* b) {
      if (count_.load(std::memory_order_relaxed) >= kMaxBlocks) return false;
      count_.fetch_add(1, std::memory_order_relaxed);
      b->next = head_.load(std::memory_order_relaxed);
      while (!head_.compare_exchange_weak(b->next, b, std::memory_order_release,
                                          std::memory_order_relaxed)) {
      }
      return true;
    }
    // The whole list (null if empty); `count` becomes its length.
    Block* take_all(uint32_t& count) {
      if (!head_.load(std::memory_order_relaxed)) return nullptr;
      Block* all = head_.exchange(nullptr, std::memory_order_acquire);
      uint32_t n = 0;
      for (Block* b = all; b; b = b->next) ++n;
      count_.fetch_sub(n, std::memory_order_relaxed);
      count = n;
      return all;
    }

   private:
    std::atomic<Block*> head_{nullptr};
    std::atomic<uint32_t> count_{0};
  };
  static Returned& returned() {
    static Returned* r = new Returned();  // never destroyed: threads may give blocks at exit
    return *r;
  }
  enum class Phase : uint8_t { unused, live, closed };
  // Trivially destructible, so it stays usable while the thread's other destructors run.
  struct State {
    Block* head = nullptr;
    uint32_t count = 0;
    Phase phase = Phase::unused;
  };
  static State& state() {
    static thread_local State s;
    return s;
  }
  struct Drain {
    ~Drain() {
      State& s = state();
      while (s.head) {
        Block* b = s.head;
        s.head = b->next;
        ::operator delete(b);
      }
      s.count = 0;
      s.phase = Phase::closed;
    }
  };
  static void drain_at_exit() { static thread_local Drain d; (void)d; }
};

// A standard allocator over FreeList, for std::allocate_shared of single objects.
template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) {}  // NOLINT: rebinding, as allocators do

  T* allocate(size_t n) {
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
    if (!kPoolObjects || n != 1) return std::allocator<T>().allocate(n);
    return static_cast<T*>(FreeList<sizeof(T)>::take());
  }
  void deallocate(T* p, size_t n) {
    if (!kPoolObjects || n != 1) return std::allocator<T>().deallocate(p, n);
    FreeList<sizeof(T)>::give(p);
  }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const { return true; }
};

template <class T, class... Args>
std::shared_ptr<T> make_pooled(Args&&... args) {
  return std::allocate_shared<T>(PoolAllocator<T>{}, std::forward<Args>(args)...);
}

}  // namespace tessera::detail
