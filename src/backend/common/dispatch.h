// Type dispatch shared by the kernels of every device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace tessera::common {

// f(T{}) with the unsigned integer type of `size` bytes: kernels that move elements without
// reading them (gathers, scatters of whole elements, slices) need one instantiation per width,
// not one per dtype.
template <typename F>
void dispatch_itemsize(size_t size, F&& f) {
  switch (size) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default: throw std::logic_error("no element type of " + std::to_string(size) + " bytes");
  }
}

}  // namespace tessera::common
