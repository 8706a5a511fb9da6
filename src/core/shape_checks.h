// Shape and axis checks shared by the core and the op front ends: axis normalisation,
// broadcasting, shape text for errors.
#pragma once

#include <string>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera::detail {

// "(2,3)" / "()" for error messages.
std::string shape_str(const Shape& s);
// Normalise a possibly negative axis for an `ndim`-dim array; throws std::invalid_argument naming
// the op, the axis and ndim.
int normalize_axis(const char* op, int axis, int ndim);
// The same, but an axis outside [-ndim, ndim) is std::out_of_range (as MLX's reductions,
// moveaxis and swapaxes report it).
int normalize_axis_in_range(const char* op, int axis, int ndim);
// Normalise, sort and check for duplicates.
std::vector<int> normalize_axes(const char* op, const std::vector<int>& axes, int ndim);
// NumPy broadcasting of two / many shapes; throws "[op] shapes (2,3) and (4) cannot be broadcast".
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
Shape broadcast_shapes(const char* op, const std::vector<array>& arrays);
// `n` as a dimension; throws std::overflow_error (as MLX) naming the op and `what` ("the padded
// axis 0") when it does not fit a 32-bit dimension.
int32_t checked_dim(const char* op, int64_t n, const std::string& what);
// Throws std::invalid_argument unless `a` and `b` have equal shapes.
void check_same_shape(const char* op, const array& a, const array& b);

}  // namespace tessera::detail
