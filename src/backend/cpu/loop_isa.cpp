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
  const std::string want = config::get_string("TESSERA_CPU_ISA").value_or("auto");
  if (want != "auto" && want != "baseline" && want != "avx2" && want != "avx512") {
    throw std::invalid_argument("TESSERA_CPU_ISA=" + want +
                                " is not one of auto, baseline, avx2, avx512");
  }
#ifdef TESSERA_ISA_DISPATCH
  const bool avx2 = cpu_has_avx2_fma(), avx512 = cpu_has_avx512_skx();
  if ((want == "avx2" && !avx2) || (want == "avx512" && !avx512)) {
    throw std::invalid_argument("TESSERA_CPU_ISA=" + want + ": this CPU does not have " +
                                (want == "avx2" ? "AVX2 + FMA" : "AVX-512 (F, BW, DQ, VL)") +
                                "; use auto");
  }
  if (want == "baseline") return LoopIsa::baseline;
  if (want == "avx2") return LoopIsa::avx2;
  return avx512 ? LoopIsa::avx512 : avx2 ? LoopIsa::avx2 : LoopIsa::baseline;
#else
  return LoopIsa::baseline;
#endif
}

}  // namespace

LoopIsa loop_isa() {
  static const LoopIsa isa = choose();
  return isa;
}

}  // namespace tessera::cpu
