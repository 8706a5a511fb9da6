// Derivative helpers shared by op front ends (see utils.h).
#include "ops/utils.h"

#include "tessera/ops.h"

namespace tessera::detail {

array conj_if_complex(const array& a, const Stream& s) {
  return a.dtype() == complex64 ? conjugate(a, s) : a;
}

}  // namespace tessera::detail
