// Helpers shared by op front ends: the shape and axis checks (core/shape_checks.h) and the
// helpers below.
#pragma once

#include <optional>

#include "core/shape_checks.h"

namespace tessera::detail {

// conjugate(a) for a complex array, `a` itself otherwise. Complex vjps follow MLX: the cotangent
// times the conjugate of the derivative, conj(jvp(conj(cotangent))) for a holomorphic op.
array conj_if_complex(const array& a, const Stream& s);

// The flat batch indices of a gathered product's operand (gather_mm, gather_qmm): `given` (any
// integer dtype) as uint32, or every matrix of `a` (2 or more dims) in order, shaped as its batch.
// `name` is the argument ("lhs_indices") named by the errors.
array batch_indices(const char* op, const char* name, const std::optional<array>& given,
                    const array& a, const Stream& s);

// The cotangent of a gathered operand: the per-position cotangents (idx..., R, C) added into
// zeros of `shape` (..., R, C) at the flat matrix indices `indices`.
array scatter_matrices(const Shape& shape, const array& indices, const array& per_position,
                       const Stream& s);

}  // namespace tessera::detail
