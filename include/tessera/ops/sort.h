// Sorting ops: sort, argsort, partition, argpartition, topk (see tessera/ops.h). Versions
// without an axis work on the flattened array. NaNs sort last; indices are uint32.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {

array sort(const array& a, StreamOrDevice s = {});
array sort(const array& a, int axis, StreamOrDevice s = {});
// Stable: equal elements keep their order.
array argsort(const array& a, StreamOrDevice s = {});
array argsort(const array& a, int axis, StreamOrDevice s = {});
// The kth element (negative counts from the end) lands in its sorted place; smaller ones before
// it, larger after, in no particular order.
array partition(const array& a, int kth, StreamOrDevice s = {});
array partition(const array& a, int kth, int axis, StreamOrDevice s = {});
array argpartition(const array& a, int kth, StreamOrDevice s = {});
array argpartition(const array& a, int kth, int axis, StreamOrDevice s = {});
// The k largest elements along the axis (in no particular order).
array topk(const array& a, int k, StreamOrDevice s = {});
array topk(const array& a, int k, int axis, StreamOrDevice s = {});

// Insertion points of `values` in the sorted 1-D `sorted_sequence` (uint32): before equal
// elements with side "left", after them with "right"; NaNs sort last.
array searchsorted(const array& sorted_sequence, const array& values,
                   const std::string& side = "left", StreamOrDevice s = {});

}  // namespace tessera
