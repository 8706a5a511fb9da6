// CPU kernel of RandomBits: fills each key's block of the output with Threefry-2x32 output.
#include <cstring>

#include "backend/cpu/strided.h"
#include "backend/cpu/threefry.h"
#include "core/thread_pool.h"
#include "ops/random.h"

namespace tessera {

namespace {

// Element offset of flat (row-major) index `i` of an array with `shape` and `strides`.
int64_t flat_to_offset(size_t i, const Shape& shape, const Strides& strides) {
  int64_t off = 0;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    auto n = static_cast<size_t>(shape[d]);
    off += static_cast<int64_t>(i % n) * strides[d];
    i /= n;
  }
  return off;
}

// One key's block of `nbytes` bytes, viewed as ceil(nbytes / 4) little-endian 32-bit words;
// the last word may be cut short. Words are written with memcpy: blocks of width-1/2 outputs
// need not be 4-byte aligned.
struct Block {
  char* base;
  size_t nbytes;
  void put(size_t word, uint32_t v) const {
    size_t at = 4 * word;
    size_t n = nbytes - at < 4 ? nbytes - at : 4;
    std::memcpy(base + at, &v, n);
  }
};

// Word i of the first half and word (half + odd + i) of the second half come from counter
// (i, half + odd + i); for an odd word count the middle word is the first half of counter
// (half, 0). This is MLX's layout, so bits agree with MLX for the same key.
void fill_words(uint32_t k0, uint32_t k1, const Block& blk, size_t half, bool odd, size_t begin,
                size_t end) {
  const size_t second = half + (odd ? 1 : 0);
  for (size_t i = begin; i < end; ++i) {
    auto [a, b] = cpu::threefry2x32(k0, k1, static_cast<uint32_t>(i),
                                    static_cast<uint32_t>(second + i));
    blk.put(i, a);
    blk.put(second + i, b);
  }
}

}  // namespace

void RandomBits::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  const array& keys = inputs[0];
  const size_t num_keys = keys.size() / 2;
  if (out.size() == 0 || num_keys == 0) return;
  const size_t bytes_per_key = out.nbytes() / num_keys;
  const size_t words = (bytes_per_key + 3) / 4;
  const size_t half = words / 2;
  const bool odd = words % 2 == 1;

  const uint32_t* kdata = keys.data<uint32_t>();
  char* obase = out.data<char>();
  const Shape& kshape = keys.shape();
  const Strides& kstrides = keys.strides();
  auto key_of = [&](size_t k) {
    return std::make_pair(kdata[flat_to_offset(2 * k, kshape, kstrides)],
                          kdata[flat_to_offset(2 * k + 1, kshape, kstrides)]);
  };
  auto fill_key = [&](size_t k, size_t begin, size_t end) {
    auto [k0, k1] = key_of(k);
    Block blk{obase + k * bytes_per_key, bytes_per_key};
    fill_words(k0, k1, blk, half, odd, begin, end);
    if (odd && end == half) {
      blk.put(half, cpu::threefry2x32(k0, k1, static_cast<uint32_t>(half), 0u).first);
    }
  };

  // About 20 cheap rounds per word pair: a few thousand pairs are worth a thread.
  constexpr size_t kGrain = 4096;
  if (num_keys == 1) {
    detail::parallel_for(half == 0 ? 1 : half, kGrain, [&](size_t b, size_t e) {
      fill_key(0, b, half == 0 ? 0 : e);
    });
  } else {
    size_t grain = half >= kGrain ? 1 : kGrain / (half + 1) + 1;
    detail::parallel_for(num_keys, grain, [&](size_t b, size_t e) {
      for (size_t k = b; k < e; ++k) fill_key(k, 0, half);
    });
  }
}

}  // namespace tessera
