// Building fused kernels with the system C++ compiler, and the on-disk kernel cache
// (docs/compile.md): a kernel is a shared object keyed by its source (with the headers it
// includes), the compiler's identity, the flags, Tessera's version and the CPU's features; written under a temporary name and renamed,
// so ranks that build the same kernel at once do not collide; checked (a SHA-256 trailer) before
// it is loaded, so a truncated or corrupted file is rebuilt; the directory is bounded in size,
// least recently used out first.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::cpu {

// A built fused kernel: elements [begin, end) of the outputs from the inputs.
using FusedKernel = void (*)(const void* const* in, void* const* out, int64_t begin, int64_t end,
                             int ndim, const int64_t* shape, const int64_t* strides);

}  // namespace tessera::cpu

namespace tessera::cpu::jit {

// Whether a compiler was found (the first call looks, and warns once on stderr when none is).
bool compiler_available();

// The kernel built from `source` (a function `tessera_fused`): from this process's table, from
// the disk cache, or built now. Throws std::runtime_error with the compiler's output when the
// build fails, and when no compiler is available.
FusedKernel load(const std::string& source);

// The directory kernels are cached in (TESSERA_COMPILE_CACHE_DIR, else ~/.cache/tessera/kernels).
std::string cache_dir();

// Counters (compile_stats()).
uint64_t builds();
uint64_t disk_hits();
// Forget the in-process table (the loaded objects stay mapped; tests).
void forget_loaded();

}  // namespace tessera::cpu::jit
