// What this CPU runs beyond the build's target, asked once per process: the kernels with copies
// for wider vectors (elementwise loops, GEMM, convolution) pick one with these. False off x86-64.
#pragma once

namespace tessera::cpu {

#if defined(__x86_64__)
inline bool cpu_has_avx2_fma() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}
inline bool cpu_has_avx512f() {
  static const bool ok = cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f");
  return ok;
}
// F, BW, DQ and VL: what the elementwise loops' AVX-512 copies are compiled for.
inline bool cpu_has_avx512_skx() {
  static const bool ok = cpu_has_avx512f() && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return ok;
}
#else
inline bool cpu_has_avx2_fma() { return false; }
inline bool cpu_has_avx512f() { return false; }
inline bool cpu_has_avx512_skx() { return false; }
#endif

// TESSERA_CPU_ISA, validated (loop_isa.cpp): what the kernels with per-ISA copies may use. A
// value this CPU cannot run (avx2 without AVX2 + FMA + F16C, avx512 without AVX-512 F / BW / DQ /
// VL) or an unknown one throws, naming the variable.
enum class RequestedIsa { automatic, baseline, avx2, avx512 };
RequestedIsa requested_isa();

}  // namespace tessera::cpu
