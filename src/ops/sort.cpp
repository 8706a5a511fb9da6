// Front ends of the sort family (sort, argsort, partition, argpartition, topk) and the
// derivatives of Sort and Partition (a permutation: gather forward, scatter back).
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

}  // namespace tessera
