// What this CPU runs beyond the build's target, asked once per process: the kernels with copies
// for wider vectors (elementwise loops, GEMM, convolution) pick one with these. False off x86-64.
#pragma once

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tessera::cpu {

#if defined(__x86_64__)
inline bool cpu_has_avx2_fma() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}
// CPUID read directly where clang 14's __builtin_cpu_supports lacks the feature's name.
inline bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  static const bool ok = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
  return ok;
}
inline bool cpu_has_avx512_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  static const bool ok = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5)) != 0;
  return ok;
}
// CPUID's vendor string is "GenuineIntel".
inline bool cpu_is_intel() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  static const bool ok = __get_cpuid(0, &a, &b, &c, &d) && b == 0x756e6547u &&  // "Genu"
                         d == 0x49656e69u && c == 0x6c65746eu;                   // "ineI", "ntel"
  return ok;
}
// AVX512_VNNI (vpdpwssd, vpdpbusd): CPUID leaf 7, ECX bit 11.
inline bool cpu_has_avx512_vnni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  static const bool ok = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11)) != 0;
  return ok;
}
// AMX-TILE and AMX-BF16 (CPUID leaf 7, EDX bits 24 and 22), and Linux's permission for this
// process to use the tile data (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, 18:
// process-wide, asked once; kernels before 5.16 refuse it, and then AMX is not used).
inline bool cpu_has_amx_bf16() {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || (d & (1u << 24)) == 0 ||
        (d & (1u << 22)) == 0) {
      return false;
    }
#if defined(__linux__)
    constexpr long kReqXcompPerm = 0x1023, kXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) == 0;
#else
    return false;
#endif
  }();
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
inline bool cpu_has_f16c() { return false; }
inline bool cpu_has_avx512_bf16() { return false; }
inline bool cpu_has_avx512_vnni() { return false; }
inline bool cpu_has_amx_bf16() { return false; }
inline bool cpu_is_intel() { return false; }
inline bool cpu_has_avx512f() { return false; }
inline bool cpu_has_avx512_skx() { return false; }
#endif

// TESSERA_CPU_ISA, validated (loop_isa.cpp): what the kernels with per-ISA copies may use. A
// value this CPU cannot run (avx2 without AVX2 + FMA + F16C, avx512 without AVX-512 F / BW / DQ /
// VL) or an unknown one throws, naming the variable.
enum class RequestedIsa { automatic, baseline, avx2, avx512 };
RequestedIsa requested_isa();

}  // namespace tessera::cpu
