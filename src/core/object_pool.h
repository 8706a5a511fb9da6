// Per-thread free lists for the engine's small, short-lived objects (array descriptors, graph
// nodes, data handles: array.cpp; elementwise primitives: ops/unary.cpp, ops/binary.cpp). An
// eager graph makes and drops thousands of them in bursts,
// which overflow malloc's per-thread cache (7 blocks per size) and cost a search each; here a
// freed block goes on its thread's list and the next allocation of that size takes it back.
#pragma once

#include <cstddef>
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
    if (s.head) {
      Block* b = s.head;
      s.head = b->next;
      --s.count;
      return b;
    }
    if (s.phase == Phase::unused) {
      s.phase = Phase::live;
      drain_at_exit();  // constructs this thread's drain guard
    }
    return ::operator new(Size);
  }

  static void give(void* p) {
    State& s = state();
    if (s.phase != Phase::live || s.count >= kMaxBlocks) {
      ::operator delete(p);  // full, or this thread's list is gone (its exit has begun)
      return;
    }
    auto* b = static_cast<Block*>(p);
    b->next = s.head;
    s.head = b;
    ++s.count;
  }

 private:
  struct Block {
    Block* next;
  };
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
