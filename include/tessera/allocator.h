// Raw buffers from the caching allocator (src/core/allocator.cpp). Kernels call
// allocator::malloc for their outputs; arrays return buffers with allocator::free.
#pragma once

#include <cstddef>

namespace tessera::allocator {

class CachingAllocator;  // src/core/allocator.cpp

class Buffer {
 public:
  Buffer() = default;
  // Memory the allocator does not own (allocator::free ignores it).
  Buffer(void* ptr, size_t size) : ptr_(ptr), size_(size) {}
  void* raw_ptr() const { return ptr_; }
  // The size that was asked for (the block may be larger).
  size_t size() const { return size_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  friend class CachingAllocator;
  Buffer(void* ptr, size_t size, size_t block) : ptr_(ptr), size_(size), block_(block) {}
  void* ptr_ = nullptr;
  size_t size_ = 0;
  size_t block_ = 0;  // the allocator's block behind ptr_; 0 for memory it does not own
};

// Page-aligned for sizes of a page or more; 64-byte aligned below. A request of 0 bytes returns
// a valid, unique pointer. Throws std::runtime_error past the memory limit (memory.h).
Buffer malloc(size_t size);
void free(Buffer buffer);

}  // namespace tessera::allocator
