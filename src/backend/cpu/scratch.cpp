#include "backend/cpu/scratch.h"

#include <cstdlib>
#include <new>
#include <vector>

namespace tessera::cpu {

namespace {

constexpr size_t kAlign = 64;
// A block above this goes back to the system when given back: a kernel's temporaries are small
// next to its operands, and a thread should not hold a large one for ever.
constexpr size_t kKeepBytes = size_t{8} << 20;

struct Block {
  void* p = nullptr;
  size_t bytes = 0;
};

struct Stack {
  std::vector<Block> blocks;
  size_t depth = 0;
  ~Stack() {
    for (auto& b : blocks) std::free(b.p);
  }
};

Stack& stack() {
  thread_local Stack s;
  return s;
}

}  // namespace

void* scratch_take(size_t bytes) {
  Stack& s = stack();
  if (s.depth == s.blocks.size()) s.blocks.emplace_back();
  Block& b = s.blocks[s.depth];
  if (b.bytes < bytes) {
    std::free(b.p);
    b.p = nullptr;
    b.bytes = 0;
    // Round up to a whole number of alignment units, with room to grow by half.
    size_t want = bytes + bytes / 2;
    want = (want + kAlign - 1) / kAlign * kAlign;
    b.p = std::aligned_alloc(kAlign, want);
    if (!b.p) throw std::bad_alloc();
    b.bytes = want;
  }
  ++s.depth;
  return b.p;
}

void scratch_give() {
  Stack& s = stack();
  Block& b = s.blocks[--s.depth];
  if (b.bytes > kKeepBytes) {
    std::free(b.p);
    b = Block{};
  }
}

}  // namespace tessera::cpu
