// NumPy-style indexing of tessera.core arrays: __getitem__, __setitem__ and a.at[idx].add(...).
#pragma once

#include "common.h"

namespace tessera::python {

// a[index]: ints, slices (any step), None, Ellipsis, integer arrays / lists and tuples of these,
// with NumPy's rules for where the broadcast index dims go. Boolean masks are refused (as MLX).
array get_item(const array& a, nb::handle index);
// The array a[index] = value makes (a new array: the caller rebinds its handle). Boolean masks
// are accepted: a[mask] = scalar fills, a[mask] = values fills in order (masked_scatter).
array set_item(const array& a, nb::handle index, nb::handle value);

// Adds __getitem__, __setitem__ and the `at` property to the array class, and
// tessera.core.IndexingError to the module.
void init_indexing(nb::module_& m, nb::class_<array>& cls);

}  // namespace tessera::python
