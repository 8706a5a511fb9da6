// The element traits and integer arithmetic of the CPU kernels (elementwise, reductions, scans):
// backend/common/element_ops.h's, under the CPU's namespace.
#pragma once

#include "backend/common/element_ops.h"

namespace tessera::cpu {

using common::AccOf;
using common::compute_t;
using common::is_complex_v;
using common::is_half_v;
using common::is_inexact_v;
using common::is_nan;
using common::less_than;
using common::WrapOf;
using common::wrap_add;
using common::wrap_mul;

}  // namespace tessera::cpu
