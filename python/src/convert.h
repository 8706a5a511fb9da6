// Python values <-> arrays: scalars, nested lists and tuples, NumPy arrays (any dtype, strides
// or byte order), buffer-protocol objects; and back: item(), tolist(), NumPy views.
#pragma once

#include "common.h"

namespace tessera::python {

// As mx.array(obj, dtype): Python bool -> bool, int -> int32 (int64 when it does not fit),
// float -> float32, complex -> complex64; NumPy float64 / complex128 -> float32 / complex64
// (as MLX) unless `dtype` says otherwise. Ragged lists are a ValueError naming the depth.
array to_array(nb::handle obj, std::optional<Dtype> dtype = std::nullopt);

// Operands of a binary op: a Python scalar takes the other operand's dtype when that is an
// array of a kind the scalar fits (an int with any number array, a float with inexact ones), as
// MLX does, so `x + 1` keeps x's dtype.
array to_array_like(nb::handle obj, const array& like);
std::pair<array, array> to_arrays(const ArrayLike& a, const ArrayLike& b);
inline array to_array(const ArrayLike& a) { return to_array(a.obj); }

// Evaluate (without the GIL) and read.
nb::object to_scalar(array a);  // a.item()
nb::object to_list(array a);    // a.tolist()

// A NumPy array that views `a`'s buffer and keeps it alive (evaluates `a` first). bfloat16 has
// no NumPy dtype: TypeError naming it.
nb::object to_numpy(array a);

}  // namespace tessera::python
