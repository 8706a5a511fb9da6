// Front ends of the collectives (validation, shapes, singleton shortcuts as MLX) and their
// derivatives and batching rules.
#include "distributed/primitives.h"

#include <stdexcept>

#include "core/object_pool.h"
#include "distributed/reduce_kernels.h"
#include "ops/utils.h"
#include "tessera/ops.h"
#include "tessera/transforms.h"

namespace tessera::distributed {

namespace {

// The group an op runs on (the caller's, moved out of its by-value parameter, or init()'s).
Group resolve(std::optional<Group>& g) { return g ? std::move(*g) : init(); }

// A node of primitive P (made with `args`) on `inputs`. Collectives are made in loops (one per
// step, or thousands of small ones): their primitives come from the per-thread free lists.
template <class P, class... Args>
array make(Shape shape, Dtype dtype, std::vector<array> inputs, Args&&... args) {
  auto primitive = tessera::detail::make_pooled<P>(std::forward<Args>(args)...);
  return array(std::move(shape), dtype, std::move(primitive), std::move(inputs));
}

array all_reduce(const array& x, std::optional<Group> group, StreamOrDevice s,
                 detail::ReduceOp op, bool mean = false) {
  auto g = resolve(group);
  if (mean && !detail::divisible_dtype(x.dtype())) {
    throw std::invalid_argument(
        "[all_mean] needs float16, bfloat16, float32 or float64; got " + dtype_name(x.dtype()) +
        ". Cast first (x.astype(float32)), or use all_sum(x) / group.size().");
  }
  if (g.size() == 1) return x;
  return make<AllReduce>(x.shape(), x.dtype(), {x}, to_stream(s), std::move(g), op, mean);
}

void check_peer(const char* what, int peer, const Group& g) {
  if (peer < 0 || peer >= g.size()) {
    throw std::invalid_argument(std::string("Invalid ") + what + "=" + std::to_string(peer) +
                                " for a group of size " + std::to_string(g.size()));
  }
}

}  // namespace

array all_sum(const array& x, std::optional<Group> group, StreamOrDevice s) {
  return all_reduce(x, std::move(group), s, detail::ReduceOp::sum);
}
array all_mean(const array& x, std::optional<Group> group, StreamOrDevice s) {
  return all_reduce(x, std::move(group), s, detail::ReduceOp::sum, true);
}
array all_max(const array& x, std::optional<Group> group, StreamOrDevice s) {
  return all_reduce(x, std::move(group), s, detail::ReduceOp::max);
}
array all_min(const array& x, std::optional<Group> group, StreamOrDevice s) {
  return all_reduce(x, std::move(group), s, detail::ReduceOp::min);
}

array all_gather(const array& x, std::optional<Group> group, StreamOrDevice s) {
  auto g = resolve(group);
  if (g.size() == 1) return x;
  Shape shape = x.ndim() == 0 ? Shape{g.size()} : x.shape();
  if (x.ndim() > 0) shape[0] *= g.size();
  return make<AllGather>(std::move(shape), x.dtype(), {x}, to_stream(s), g);
}

array sum_scatter(const array& x, std::optional<Group> group, StreamOrDevice s) {
  auto g = resolve(group);
  if (g.size() == 1) return x;
  if (x.ndim() == 0 || x.shape(0) % g.size() != 0) {
    throw std::invalid_argument("[sum_scatter] Invalid shape=" + tessera::detail::shape_str(x.shape()) +
                                " for a group of size " + std::to_string(g.size()) +
                                ". The first dimension (axis 0) must be divisible by the group "
                                "size and the input must have at least one dimension.");
  }
  Shape shape = x.shape();
  shape[0] /= g.size();
  return make<ReduceScatter>(std::move(shape), x.dtype(), {x}, to_stream(s), g);
}

array send(const array& x, int dst, std::optional<Group> group, StreamOrDevice s) {
  auto g = resolve(group);
  if (g.size() == 1) throw std::invalid_argument("Cannot send to a singleton group");
  check_peer("destination", dst, g);
  if (dst == g.rank()) {
    throw std::invalid_argument("[send] rank " + std::to_string(dst) +
                                " cannot send to itself; pick another destination");
  }
  return make<Send>(x.shape(), x.dtype(), {x}, to_stream(s), g, dst);
}

array recv(Shape shape, Dtype dtype, int src, std::optional<Group> group, StreamOrDevice s) {
  auto g = resolve(group);
  if (g.size() == 1) throw std::invalid_argument("Cannot recv from a singleton group");
  check_peer("source", src, g);
  if (src == g.rank()) {
    throw std::invalid_argument("[recv] rank " + std::to_string(src) +
                                " cannot receive from itself; pick another source");
  }
  return make<Recv>(std::move(shape), dtype, {}, to_stream(s), g, src);
}

array recv_like(const array& x, int src, std::optional<Group> group, StreamOrDevice s) {
  return recv(x.shape(), x.dtype(), src, std::move(group), s);
}

array broadcast(const array& x, int root, std::optional<Group> group, StreamOrDevice s) {
  auto g = resolve(group);
  check_peer("root", root, g);
  if (g.size() == 1) return x;
  return make<Broadcast>(x.shape(), x.dtype(), {x}, to_stream(s), g, root);
}

array all_to_all(const array& x, std::optional<Group> group, StreamOrDevice s) {
  auto g = resolve(group);
  if (g.size() == 1) return x;
  if (x.ndim() == 0 || x.shape(0) % g.size() != 0) {
    throw std::invalid_argument("[all_to_all] Invalid shape=" + tessera::detail::shape_str(x.shape()) +
                                " for a group of size " + std::to_string(g.size()) +
                                ": axis 0 must be divisible by the group size.");
  }
  return make<AllToAll>(x.shape(), x.dtype(), {x}, to_stream(s), g);
}

void barrier(std::optional<Group> group, StreamOrDevice s) {
  auto g = resolve(group);
  if (g.size() == 1) return;
  auto b = make<Barrier>(Shape{0}, bool_, {}, to_stream(s), g);
  eval(b);
}

// ---- derivatives and batching ----

const char* AllReduce::name() const {
  if (mean_) return "Mean AllReduce";
  switch (op_) {
    case detail::ReduceOp::sum: return "Sum AllReduce";
    case detail::ReduceOp::max: return "Max AllReduce";
    case detail::ReduceOp::min: return "Min AllReduce";
  }
  return "AllReduce";
}

// As MLX: the cotangent passes through unchanged (the gradient of all_sum(x).sum() is ones);
// all_mean's is divided by the group size, as the gradient of all_sum(x) / size.
std::vector<array> AllReduce::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                                  const std::vector<int>&, const std::vector<array>&) {
  if (!mean_) return cotangents;
  return {divide(cotangents[0], array(static_cast<float>(group().size()), cotangents[0].dtype()),
                 stream())};
}

std::vector<array> AllReduce::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {all_reduce(tangents[0], group(), stream(), op_, mean_)};
}

std::pair<std::vector<array>, std::vector<int>> AllReduce::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  return {{all_reduce(inputs[0], group(), stream(), op_, mean_)}, axes};
}

// This rank's rows of the gathered cotangent.
std::vector<array> AllGather::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents, const std::vector<int>&,
                                  const std::vector<array>&) {
  const array& x = primals[0];
  int r = group().rank();
  if (x.ndim() == 0) return {reshape(take(cotangents[0], r, 0), Shape{})};
  int n0 = x.shape(0);
  Shape start(x.ndim(), 0), stop = cotangents[0].shape();
  start[0] = r * n0;
  stop[0] = (r + 1) * n0;
  return {slice(cotangents[0], start, stop)};
}

std::vector<array> AllGather::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {all_gather(tangents[0], group(), stream())};
}

// Gather along a non-batch axis: move the batch axis last (a batched scalar gets a leading
// axis of 1 first), gather along axis 0, report the batch axis where it ended up.
std::pair<std::vector<array>, std::vector<int>> AllGather::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  array x = inputs[0];
  if (axes[0] < 0) return {{all_gather(x, group(), stream())}, {-1}};
  if (x.ndim() == 1) {
    x = expand_dims(x, 0);
    return {{all_gather(x, group(), stream())}, {1}};
  }
  int last = static_cast<int>(x.ndim()) - 1;
  x = moveaxis(x, axes[0], last);
  return {{all_gather(x, group(), stream())}, {last}};
}

// Beyond MLX (which has no vjp here): the transpose of a sum-scatter is an all-gather.
std::vector<array> ReduceScatter::vjp(const std::vector<array>&,
                                      const std::vector<array>& cotangents,
                                      const std::vector<int>&, const std::vector<array>&) {
  return {all_gather(cotangents[0], group(), stream())};
}

std::vector<array> AllToAll::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                                 const std::vector<int>&, const std::vector<array>&) {
  return {all_to_all(cotangents[0], group(), stream())};
}

}  // namespace tessera::distributed
