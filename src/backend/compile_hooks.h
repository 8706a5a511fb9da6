// The device seam of compile (src/compile): what it asks of a device's kernel builder. compile
// traces, simplifies and fuses device-neutrally and asks here only whether fused kernels can be
// built and for the builders' counters; each back end implements these (the CPU's in
// backend/cpu/compiled/jit.cpp, its C++ compiler and kernel cache behind them). A new device
// answers for itself in can_fuse and adds its counters.
#pragma once

#include <cstdint>

#include "tessera/device.h"

namespace tessera::backend {

// Whether fused kernels can be built for `device` now (the CPU: a C++ compiler was found; the
// first call looks and warns once when there is none). compile fuses only when this holds.
bool can_fuse(const Device& device);

struct KernelCounters {
  uint64_t builds = 0;     // kernels built by a compiler in this process
  uint64_t disk_hits = 0;  // kernels loaded from an on-disk cache
};
KernelCounters kernel_counters();

// Forget the kernels loaded in this process (compile_clear_cache; the loaded code stays mapped).
void forget_kernels();

}  // namespace tessera::backend
