// What the CPU kernels of the tessera::fast primitives share (fast.cpp: the norms, cross
// entropy, RoPE; attention.cpp): which per-ISA copy of a kernel runs, and the dispatch over the
// floating dtypes of the ops' composites.
#pragma once

#include <stdexcept>
#include <string>

#include "backend/cpu/half_gemm.h"
#include "tessera/dtype.h"
#include "tessera/types.h"

namespace tessera {

// The kernels come in copies per instruction set (a body compiled for AVX-512, for AVX2 and
// plain): which one runs, as TESSERA_CPU_ISA and this CPU allow, decided once.
enum class CopyIsa { plain, avx2, avx512 };
inline CopyIsa copy_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const CopyIsa isa = [] {
    const cpu::HalfIsa h = cpu::half_isa();
    if (h == cpu::HalfIsa::avx512 || h == cpu::HalfIsa::avx512_bf16) return CopyIsa::avx512;
    return h == cpu::HalfIsa::avx2 ? CopyIsa::avx2 : CopyIsa::plain;
  }();
  return isa;
#else
  return CopyIsa::plain;
#endif
}

// The target of the AVX-512 copies.
#if defined(__x86_64__) && defined(__GNUC__)
#define TESSERA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#endif

// f(T{}) for the floating dtype d (the dtypes of the fast ops' composites).
template <typename F>
void dispatch_floating(const char* op, Dtype d, F f) {
  switch (d) {
    case Dtype::Val::float32: return f(float{});
    case Dtype::Val::float16: return f(float16_t{});
    case Dtype::Val::bfloat16: return f(bfloat16_t{});
    case Dtype::Val::float64: return f(double{});
    default:
      throw std::invalid_argument(std::string("[") + op + "] no kernel for dtype " +
                                  dtype_name(d));
  }
}

}  // namespace tessera
