// Raw buffers from the caching allocator (src/core/allocator.cpp). Kernels call
// allocator::malloc for their outputs; arrays return buffers with allocator::free.
#pragma once

#include <cstddef>

namespace tessera::allocator {

class Buffer {
 public:
  Buffer() = default;
  Buffer(void* ptr, size_t size) : ptr_(ptr), size_(size) {}
  void* raw_ptr() const { return ptr_; }
  // The size that was asked for (the block may be larger).
  size_t size() const { return size_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

// Page-aligned for sizes of a page or more; 64-byte aligned below. A request of 0 bytes returns
// a valid, unique pointer. Throws std::runtime_error past the memory limit (memory.h).
Buffer malloc(size_t size);
void free(Buffer buffer);

}  // namespace tessera::allocator
