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

}  // namespace tessera
