// Raw buffers and the allocator interface (MLX's allocator.h). Kernels call allocator::malloc for
// their outputs; arrays return buffers with allocator::free, which hands each buffer back to the
// allocator that made it. The CPU's allocator is a caching one (src/core/allocator.cpp); another
// device brings its own (src/backend/device.h), which allocator::malloc uses while that device
// runs a kernel.
#pragma once

#include <cstddef>

namespace tessera::allocator {

class Allocator;

class Buffer {
 public:
  Buffer() = default;
  // Memory the allocator does not own (allocator::free ignores it).
  Buffer(void* ptr, size_t size) : ptr_(ptr), size_(size) {}
  void* raw_ptr() const { return ptr_; }
  // The size that was asked for (the block may be larger).
  size_t size() const { return size_; }
  explicit operator bool() const { return ptr_ != nullptr; }
  // The allocator that made it (its device's); null for memory no allocator owns.
  Allocator* owner() const { return owner_; }

 private:
  friend class Allocator;
  friend void free(Buffer buffer);
  Buffer(void* ptr, size_t size, size_t block, Allocator* owner)
      : ptr_(ptr), size_(size), block_(block), owner_(owner) {}
  void* ptr_ = nullptr;
  size_t size_ = 0;
  size_t block_ = 0;          // the allocator's block behind ptr_; 0 for memory it does not own
  Allocator* owner_ = nullptr;  // the allocator that made it
};

// A device's memory. malloc throws std::runtime_error when it cannot serve a request (naming the
// request and the limit); free ignores a buffer it does not own (Buffer(ptr, size)).
class Allocator {
 public:
  virtual Buffer malloc(size_t size) = 0;
  virtual void free(Buffer buffer) = 0;
  // The bytes behind `buffer`: at least what was asked for (a cached block may be larger).
  virtual size_t size(Buffer buffer) const = 0;

  Allocator() = default;
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;
  virtual ~Allocator() = default;

 protected:
  // A buffer of `size` asked-for bytes in this allocator's block of `block` (> 0) bytes at `ptr`.
  Buffer owned(void* ptr, size_t size, size_t block) { return Buffer(ptr, size, block, this); }
  // The block behind a buffer this allocator made; 0 for memory it does not own.
  static size_t block_of(const Buffer& b) { return b.block_; }
};

// The CPU's allocator.
Allocator& allocator();

// The calling thread's allocator's malloc: the CPU's, or the device's whose kernel the thread is
// running. The CPU's buffers are page-aligned for sizes of a page or more, 64-byte aligned below;
// a request of 0 bytes returns a valid, unique pointer; past the memory limit (memory.h) it
// throws std::runtime_error.
Buffer malloc(size_t size);
// Back to the allocator that made it; nothing for memory no allocator owns.
void free(Buffer buffer);

// While one lives, allocator::malloc on this thread uses `a` (a device's eval sets it around a
// kernel; nested scopes restore the outer one).
class ScopedAllocator {
 public:
  explicit ScopedAllocator(Allocator& a);
  ~ScopedAllocator();
  ScopedAllocator(const ScopedAllocator&) = delete;
  ScopedAllocator& operator=(const ScopedAllocator&) = delete;

 private:
  Allocator* saved_;
};

}  // namespace tessera::allocator
