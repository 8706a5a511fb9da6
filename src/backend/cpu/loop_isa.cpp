// Which copy of the flat elementwise loops runs (elementwise.h): chosen once per process from
// the CPU's features and TESSERA_CPU_ISA.
#include <stdexcept>
#include <string>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/elementwise.h"
#include "tessera/config.h"

namespace tessera::cpu {

namespace {

LoopIsa choose() {
#ifdef TESSERA_ISA_DISPATCH
  switch (requested_isa()) {
    case RequestedIsa::baseline: return LoopIsa::baseline;
    case RequestedIsa::avx2: return LoopIsa::avx2;
    default: break;
  }
  return cpu_has_avx512_skx() ? LoopIsa::avx512 : cpu_has_avx2_fma() ? LoopIsa::avx2
                                                                     : LoopIsa::baseline;
#else
  requested_isa();  // still validated
  return LoopIsa::baseline;
#endif
}

}  // namespace

RequestedIsa requested_isa() {
  static const RequestedIsa isa = [] {
    const std::string want = config::get_string("TESSERA_CPU_ISA").value_or("auto");
    if (want != "auto" && want != "baseline" && want != "avx2" && want != "avx512") {
      throw std::invalid_argument("TESSERA_CPU_ISA=" + want +
                                  " is not one of auto, baseline, avx2, avx512");
    }
#if defined(__x86_64__)
    const bool avx2 = cpu_has_avx2_fma() && cpu_has_f16c();
    if ((want == "avx2" && !avx2) || (want == "avx512" && !(avx2 && cpu_has_avx512_skx()))) {
      const char* lacks = want == "avx2" ? "AVX2 + FMA + F16C" : "AVX-512 (F, BW, DQ, VL)";
      throw std::invalid_argument("TESSERA_CPU_ISA=" + want + ": this CPU does not have " +
                                  lacks + "; use auto");
    }
#endif
    return want == "baseline" ? RequestedIsa::baseline
           : want == "avx2"   ? RequestedIsa::avx2
           : want == "avx512" ? RequestedIsa::avx512
                              : RequestedIsa::automatic;
  }();
  return isa;
}

LoopIsa loop_isa() {
  static const LoopIsa isa = choose();
  return isa;
}

}  // namespace tessera::cpu
