// The Threefry-2x32 block cipher with 20 rounds (Salmon et al., "Parallel random numbers: as easy
// as 1, 2, 3", SC'11), the counter-based hash behind RandomBits (backend/cpu/random.cpp).
#pragma once

#include <cstdint>
#include <utility>

namespace tessera::cpu {

constexpr uint32_t rotl32(uint32_t x, uint32_t r) { return (x << r) | (x >> (32u - r)); }

// Encrypts the counter pair (c0, c1) under the key pair (k0, k1).
constexpr std::pair<uint32_t, uint32_t> threefry2x32(uint32_t k0, uint32_t k1, uint32_t c0,
                                                     uint32_t c1) {
  constexpr uint32_t kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  // The third schedule word makes the key schedule's parity constant (Skein's C240).
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  uint32_t x0 = c0 + ks[0];
  uint32_t x1 = c1 + ks[1];
  // Five groups of four rounds, a key injection after each group.
  for (uint32_t g = 0; g < 5; ++g) {
    for (uint32_t r : kRot[g % 2]) {
      x0 += x1;
      x1 = rotl32(x1, r) ^ x0;
    }
    x0 += ks[(g + 1) % 3];
    x1 += ks[(g + 2) % 3] + g + 1;
  }
  return {x0, x1};
}

}  // namespace tessera::cpu
