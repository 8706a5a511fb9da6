// Helpers shared by op front ends: the shape and axis checks (core/shape_checks.h) and the
// derivative helpers below.
#pragma once

#include "core/shape_checks.h"

namespace tessera::detail {

// conjugate(a) for a complex array, `a` itself otherwise. Complex vjps follow MLX: the cotangent
// times the conjugate of the derivative, conj(jvp(conj(cotangent))) for a holomorphic op.
array conj_if_complex(const array& a, const Stream& s);

}  // namespace tessera::detail
