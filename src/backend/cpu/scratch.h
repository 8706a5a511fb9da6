// Temporary memory for one kernel call, from blocks each thread keeps between calls. Taken and
// given back in stack order, so a kernel may call another that takes its own.
//
// Why: a kernel's std::vector temporaries cost a malloc and a free per call, and glibc's malloc
// of 1 KiB or more first consolidates every small block the thread freed since (measured in
// mlx-lm's decode: one consolidation per matrix-vector product, from its float copy of x).
#pragma once

#include <cstddef>
#include <type_traits>

namespace tessera::cpu {

// The thread's next block of at least `bytes` (64-byte aligned, uninitialised), and giving the
// last one taken back. Scratch below pairs them.
void* scratch_take(size_t bytes);
void scratch_give();

template <typename T>
class Scratch {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  // n elements, uninitialised.
  explicit Scratch(size_t n) : p_(static_cast<T*>(scratch_take(n * sizeof(T)))) {}
  ~Scratch() { scratch_give(); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  T* data() const { return p_; }
  T& operator[](size_t i) const { return p_[i]; }

 private:
  T* p_;
};

}  // namespace tessera::cpu
