// Front ends of the sort family (sort, argsort, partition, argpartition, topk) and the
// derivatives of Sort and Partition (a permutation: gather forward, scatter back).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "ops/sort.h"
#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

array flat(const array& a, StreamOrDevice s) {
  return reshape(a, Shape{static_cast<int32_t>(a.size())}, s);
}

int check_kth(const char* op, const array& a, int kth, int axis) {
  int n = a.shape(axis);
  int k = kth < 0 ? kth + n : kth;
  if (k < 0 || k >= n) {
    throw std::invalid_argument(std::string("[") + op + "] kth " + std::to_string(kth) +
                                " is out of range along axis " + std::to_string(axis) +
                                " of an array of shape " + detail::shape_str(a.shape()));
  }
  return k;
}

}  // namespace

array sort(const array& a, StreamOrDevice s) { return sort(flat(a, s), 0, s); }
array sort(const array& a, int axis, StreamOrDevice s) {
  int ax = detail::normalize_axis("sort", axis, static_cast<int>(a.ndim()));
  Shape shape = a.shape();
  return array(std::move(shape), a.dtype(), std::make_shared<Sort>(to_stream(s), ax), {a});
}

array argsort(const array& a, StreamOrDevice s) { return argsort(flat(a, s), 0, s); }
array argsort(const array& a, int axis, StreamOrDevice s) {
  int ax = detail::normalize_axis("argsort", axis, static_cast<int>(a.ndim()));
  Shape shape = a.shape();
  return array(std::move(shape), uint32, std::make_shared<ArgSort>(to_stream(s), ax), {a});
}

array partition(const array& a, int kth, StreamOrDevice s) { return partition(flat(a, s), kth, 0, s); }
array partition(const array& a, int kth, int axis, StreamOrDevice s) {
  int ax = detail::normalize_axis("partition", axis, static_cast<int>(a.ndim()));
  int k = check_kth("partition", a, kth, ax);
  Shape shape = a.shape();
  return array(std::move(shape), a.dtype(), std::make_shared<Partition>(to_stream(s), k, ax), {a});
}

array argpartition(const array& a, int kth, StreamOrDevice s) {
  return argpartition(flat(a, s), kth, 0, s);
}
array argpartition(const array& a, int kth, int axis, StreamOrDevice s) {
  int ax = detail::normalize_axis("argpartition", axis, static_cast<int>(a.ndim()));
  int k = check_kth("argpartition", a, kth, ax);
  Shape shape = a.shape();
  return array(std::move(shape), uint32, std::make_shared<ArgPartition>(to_stream(s), k, ax), {a});
}

array topk(const array& a, int k, StreamOrDevice s) { return topk(flat(a, s), k, 0, s); }
array topk(const array& a, int k, int axis, StreamOrDevice s) {
  int ax = detail::normalize_axis("topk", axis, static_cast<int>(a.ndim()));
  if (k < 0 || k > a.shape(ax)) {
    throw std::invalid_argument("[topk] k=" + std::to_string(k) + " is out of range along axis " +
                                std::to_string(axis) + " of an array of shape " +
                                detail::shape_str(a.shape()));
  }
  if (k == a.shape(ax)) return a;
  auto part = partition(a, -k, ax, s);
  Shape start(a.ndim(), 0);
  Shape stop = a.shape();
  start[ax] = a.shape(ax) - k;
  return slice(part, start, stop, s);
}

// ---- equivalence and derivatives ----

bool Sort::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Sort*>(&other);
  return o && o->axis_ == axis_;
}
bool ArgSort::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const ArgSort*>(&other);
  return o && o->axis_ == axis_;
}
bool Partition::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Partition*>(&other);
  return o && o->axis_ == axis_ && o->kth_ == kth_;
}
bool ArgPartition::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const ArgPartition*>(&other);
  return o && o->axis_ == axis_ && o->kth_ == kth_;
}

// The permutation does not depend smoothly on the input: stop_gradient keeps higher orders right.
std::vector<array> Sort::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents, const std::vector<int>&,
                             const std::vector<array>&) {
  auto idx = stop_gradient(argsort(primals[0], axis_, stream()), stream());
  return {put_along_axis(zeros_like(primals[0], stream()), idx, cotangents[0], axis_, stream())};
}
std::vector<array> Sort::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents, const std::vector<int>&) {
  auto idx = stop_gradient(argsort(primals[0], axis_, stream()), stream());
  return {take_along_axis(tangents[0], idx, axis_, stream())};
}
std::vector<array> Partition::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents, const std::vector<int>&,
                                  const std::vector<array>&) {
  auto idx = stop_gradient(argpartition(primals[0], kth_, axis_, stream()), stream());
  return {put_along_axis(zeros_like(primals[0], stream()), idx, cotangents[0], axis_, stream())};
}
std::vector<array> Partition::jvp(const std::vector<array>& primals,
                                  const std::vector<array>& tangents, const std::vector<int>&) {
  auto idx = stop_gradient(argpartition(primals[0], kth_, axis_, stream()), stream());
  return {take_along_axis(tangents[0], idx, axis_, stream())};
}


namespace {
int shifted(int axis, int bax) { return axis + ((bax >= 0 && bax <= axis) ? 1 : 0); }
}  // namespace

std::pair<std::vector<array>, std::vector<int>> Sort::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  return {{sort(inputs[0], shifted(axis_, axes[0]), stream())}, axes};
}
std::pair<std::vector<array>, std::vector<int>> ArgSort::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  return {{argsort(inputs[0], shifted(axis_, axes[0]), stream())}, axes};
}
std::pair<std::vector<array>, std::vector<int>> Partition::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  return {{partition(inputs[0], kth_, shifted(axis_, axes[0]), stream())}, axes};
}
std::pair<std::vector<array>, std::vector<int>> ArgPartition::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{argpartition(inputs[0], kth_, shifted(axis_, axes[0]), stream())}, axes};
}

array searchsorted(const array& sorted_sequence, const array& values, const std::string& side,
                   StreamOrDevice s) {
  if (side != "left" && side != "right") {
    throw std::invalid_argument("[searchsorted] side must be 'left' or 'right'; got '" + side + "'");
  }
  if (sorted_sequence.ndim() != 1) {
    throw std::invalid_argument("[searchsorted] the sorted sequence must be 1-D; got shape " +
                                detail::shape_str(sorted_sequence.shape()));
  }
  const Dtype dt = promote_types(sorted_sequence.dtype(), values.dtype());
  return array(values.shape(), uint32, std::make_shared<SearchSorted>(to_stream(s), side == "right"),
               {astype(sorted_sequence, dt, s), astype(values, dt, s)});
}

// Integer positions: no derivative (zeros, as for argsort).
std::vector<array> SearchSorted::vjp(const std::vector<array>& primals,
                                     const std::vector<array>& cotangents,
                                     const std::vector<int>& argnums, const std::vector<array>&) {
  std::vector<array> out;
  for (int arg : argnums) out.push_back(zeros_like(primals[arg], stream()));
  return out;
}

std::pair<std::vector<array>, std::vector<int>> SearchSorted::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  const std::string side = right_ ? "right" : "left";
  if (axes[0] < 0) {
    return {{searchsorted(inputs[0], inputs[1], side, stream())}, {axes[1]}};
  }
  // A batch of sequences: one search per batch entry.
  array seqs = moveaxis(inputs[0], axes[0], 0, stream());
  array vals = axes[1] < 0 ? inputs[1] : moveaxis(inputs[1], axes[1], 0, stream());
  std::vector<array> outs;
  for (int b = 0; b < seqs.shape(0); ++b) {
    array seq = squeeze(slice(seqs, {b, 0}, {b + 1, seqs.shape(1)}, stream()), 0, stream());
    array v = vals;
    if (axes[1] >= 0) {
      Shape start(vals.ndim(), 0), stop = vals.shape();
      start[0] = b;
      stop[0] = b + 1;
      v = squeeze(slice(vals, start, stop, stream()), 0, stream());
    }
    outs.push_back(searchsorted(seq, v, side, stream()));
  }
  return {{stack(outs, 0, stream())}, {0}};
}

// The middle element (the mean of the two middle ones for an even count) of the sorted axes;
// NaN where any element is NaN (as max / min / mean propagate it).
array median(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  const int nd = static_cast<int>(a.ndim());
  std::vector<int> ax = detail::normalize_axes("median", axes, nd);
  std::sort(ax.begin(), ax.end());
  std::vector<int> perm;
  for (int i = 0; i < nd; ++i) {
    if (!std::binary_search(ax.begin(), ax.end(), i)) perm.push_back(i);
  }
  const int kept = static_cast<int>(perm.size());
  perm.insert(perm.end(), ax.begin(), ax.end());
  array flat = ax.empty() ? expand_dims(a, -1, s) : flatten(transpose(a, perm, s), kept, nd - 1, s);
  const int n = flat.shape(-1);
  if (n == 0) throw std::invalid_argument("[median] cannot take the median of an empty axis");
  const Dtype dt = issubdtype(a.dtype(), inexact) ? a.dtype() : float32;
  array sorted = sort(flat, -1, s);
  auto at = [&](int i) {
    Shape start(sorted.ndim(), 0), stop = sorted.shape();
    start.back() = i;
    stop.back() = i + 1;
    return astype(slice(sorted, start, stop, s), dt, s);
  };
  array mid = n % 2 ? at(n / 2) : multiply(add(at(n / 2 - 1), at(n / 2), s), array(0.5, dt), s);
  if (issubdtype(a.dtype(), inexact)) {
    mid = where(any(isnan(flat, s), -1, true, s), array(std::nan(""), dt), mid, s);
  }
  mid = squeeze(mid, -1, s);
  return keepdims ? expand_dims(mid, ax, s) : mid;
}

array median(const array& a, bool keepdims, StreamOrDevice s) {
  std::vector<int> ax(a.ndim());
  std::iota(ax.begin(), ax.end(), 0);
  return median(a, ax, keepdims, s);
}

array median(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return median(a, std::vector<int>{axis}, keepdims, s);
}

}  // namespace tessera
