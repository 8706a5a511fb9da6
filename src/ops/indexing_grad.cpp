// Derivative and batching rules of the indexing primitives (vjp/jvp/vmap), written with ops;
// the front ends they reuse live in indexing.cpp.
#include <algorithm>
#include <stdexcept>

#include "ops/indexing.h"
#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

using namespace detail::idx;

namespace {
// The tangent of input `i` when given in `argnums`, else zeros like the primal.
array tangent_or_zeros(const std::vector<array>& primals, const std::vector<array>& tangents,
                       const std::vector<int>& argnums, int i) {
  for (size_t k = 0; k < argnums.size(); ++k) {
    if (argnums[k] == i) return tangents[k];
  }
  return zeros_like(primals[i]);
}

[[noreturn]] void no_index_derivative(const char* op, const char* what) {
  throw std::invalid_argument(op_prefix(op) + "cannot compute the " + what +
                              " with respect to the indices (integers have no derivative); "
                              "wrap them in stop_gradient, or leave them out of argnums");
}
}  // namespace

std::vector<array> Slice::vjp(const std::vector<array>& primals,
                              const std::vector<array>& cotangents, const std::vector<int>&,
                              const std::vector<array>&) {
  return {make_slice_update(zeros_like(primals[0], stream()), cotangents[0], start_, strides_,
                            stream())};
}

std::vector<array> Slice::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                              const std::vector<int>&) {
  return {make_slice(tangents[0], start_, strides_, out_shape_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Slice::vmap(const std::vector<array>& inputs,
                                                            const std::vector<int>& axes) {
  int b = axes[0];
  if (b < 0) return {{make_slice(inputs[0], start_, strides_, out_shape_, stream())}, {-1}};
  return {{make_slice(inputs[0], insert_dim(start_, b, 0), insert_dim(strides_, b, 1),
                      insert_dim(out_shape_, b, inputs[0].shape(b)), stream())},
          {b}};
}

std::vector<array> SliceUpdate::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums, const std::vector<array>&) {
  const array& cot = cotangents[0];
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg == 0) {
      out.push_back(
          make_slice_update(cot, zeros_like(primals[1], stream()), start_, strides_, stream()));
    } else {
      out.push_back(make_slice(cot, start_, strides_, primals[1].shape(), stream()));
    }
  }
  return out;
}

std::vector<array> SliceUpdate::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  return {make_slice_update(tangent_or_zeros(primals, tangents, argnums, 0),
                            tangent_or_zeros(primals, tangents, argnums, 1), start_, strides_,
                            stream())};
}

std::pair<std::vector<array>, std::vector<int>> SliceUpdate::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int bs = axes[0], bu = axes[1];
  if (bs < 0 && bu < 0) {
    return {{make_slice_update(inputs[0], inputs[1], start_, strides_, stream())}, {-1}};
  }
  int b = bs >= 0 ? bs : bu;
  int32_t n = bs >= 0 ? inputs[0].shape(bs) : inputs[1].shape(bu);
  // Give the unbatched operand a broadcast batch dim at the same position.
  auto add_batch = [&](const array& x) {
    auto r = reshape(x, insert_dim(x.shape(), b, 1), stream());
    return broadcast_to(r, insert_dim(x.shape(), b, n), stream());
  };
  array src = bs >= 0 ? inputs[0] : add_batch(inputs[0]);
  array upd = bu < 0 ? add_batch(inputs[1])
                     : (bu == b ? inputs[1] : moveaxis(inputs[1], bu, b, stream()));
  return {{make_slice_update(src, upd, insert_dim(start_, b, 0), insert_dim(strides_, b, 1),
                             stream())},
          {b}};
}

namespace {

// A start array batched under vmap would give each batch element its own slice position: not
// supported (as in MLX); the message names the way that is.
void reject_batched_start(const char* op, int start_axis) {
  if (start_axis >= 0) {
    throw std::invalid_argument(std::string("[vmap] ") + op +
                                " with a start array that is batched (a different start per "
                                "batch element) is not supported; index with take / "
                                "take_along_axis or gather instead");
  }
}

std::vector<int> shift_axes(std::vector<int> axes, int batch_axis) {
  for (auto& ax : axes) ax += ax >= batch_axis ? 1 : 0;
  return axes;
}

}  // namespace

std::pair<std::vector<array>, std::vector<int>> DynamicSlice::vmap(const std::vector<array>& inputs,
                                                                   const std::vector<int>& axes) {
  reject_batched_start("slice", axes[1]);
  const int b = axes[0];
  if (b < 0) return {{slice(inputs[0], inputs[1], axes_, slice_size_, stream())}, {-1}};
  Shape size = slice_size_;
  size.insert(size.begin() + b, inputs[0].shape(b));
  return {{slice(inputs[0], inputs[1], shift_axes(axes_, b), std::move(size), stream())}, {b}};
}

std::pair<std::vector<array>, std::vector<int>> DynamicSliceUpdate::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  reject_batched_start("slice_update", axes[2]);
  array src = inputs[0], upd = inputs[1];
  int sb = axes[0], ub = axes[1];
  const Stream s = stream();
  if (sb < 0 && ub < 0) return {{slice_update(src, upd, inputs[2], axes_, s)}, {-1}};
  if (sb < 0) {  // every batch element updates its own copy of the source
    Shape shape = src.shape();
    shape.insert(shape.begin() + ub, upd.shape(ub));
    src = broadcast_to(expand_dims(src, ub, s), shape, s);
    sb = ub;
  }
  if (ub < 0) {  // the same update for every batch element
    Shape shape = upd.shape();
    shape.insert(shape.begin() + sb, src.shape(sb));
    upd = broadcast_to(expand_dims(upd, sb, s), shape, s);
  } else if (ub != sb) {
    upd = moveaxis(upd, ub, sb, s);
  }
  return {{slice_update(src, upd, inputs[2], shift_axes(axes_, sb), s)}, {sb}};
}

std::vector<array> DynamicSlice::vjp(const std::vector<array>& primals,
                                     const std::vector<array>& cotangents,
                                     const std::vector<int>& argnums,
                                     const std::vector<array>&) {
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg != 0) no_index_derivative("slice", "vjp");
    out.push_back(
        slice_update(zeros_like(primals[0], stream()), cotangents[0], primals[1], axes_, stream()));
  }
  return out;
}

std::vector<array> DynamicSlice::jvp(const std::vector<array>& primals,
                                     const std::vector<array>& tangents,
                                     const std::vector<int>& argnums) {
  for (int arg : argnums) {
    if (arg != 0) no_index_derivative("slice", "jvp");
  }
  return {slice(tangents[0], primals[1], axes_, slice_size_, stream())};
}

std::vector<array> DynamicSliceUpdate::vjp(const std::vector<array>& primals,
                                           const std::vector<array>& cotangents,
                                           const std::vector<int>& argnums,
                                           const std::vector<array>&) {
  const array& cot = cotangents[0];
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg == 0) {
      out.push_back(slice_update(cot, zeros_like(primals[1], stream()), primals[2], axes_,
                                 stream()));
    } else if (arg == 1) {
      out.push_back(slice(cot, primals[2], axes_, primals[1].shape(), stream()));
    } else {
      no_index_derivative("slice_update", "vjp");
    }
  }
  return out;
}

std::vector<array> DynamicSliceUpdate::jvp(const std::vector<array>& primals,
                                           const std::vector<array>& tangents,
                                           const std::vector<int>& argnums) {
  for (int arg : argnums) {
    if (arg == 2) no_index_derivative("slice_update", "jvp");
  }
  return {slice_update(tangent_or_zeros(primals, tangents, argnums, 0),
                       tangent_or_zeros(primals, tangents, argnums, 1), primals[2], axes_,
                       stream())};
}

std::vector<array> Gather::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums, const std::vector<array>&) {
  std::vector<array> out;
  std::vector<array> indices(primals.begin() + 1, primals.end());
  for (int arg : argnums) {
    if (arg != 0) no_index_derivative("gather", "vjp");
    out.push_back(scatter_add(zeros_like(primals[0], stream()), indices, cotangents[0], axes_,
                              stream()));
  }
  return out;
}

std::vector<array> Gather::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  for (int arg : argnums) {
    if (arg != 0) no_index_derivative("gather", "jvp");
  }
  std::vector<array> indices(primals.begin() + 1, primals.end());
  return {gather(tangents[0], indices, axes_, slice_sizes_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Gather::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  const array& a = inputs[0];
  int ba = axes[0];
  std::vector<array> indices(inputs.begin() + 1, inputs.end());
  int bi = -1;
  for (size_t k = 1; k < axes.size() && bi < 0; ++k) bi = axes[k];
  if (ba >= 0 && bi < 0) {
    std::vector<int> new_axes;
    for (int ax : axes_) new_axes.push_back(ax >= ba ? ax + 1 : ax);
    auto sizes = insert_dim(slice_sizes_, ba, a.shape(ba));
    int idx_ndim = indices.empty() ? 0 : static_cast<int>(indices[0].ndim());
    return {{gather(a, indices, new_axes, sizes, stream())}, {idx_ndim + ba}};
  }
  if (bi < 0) return {{gather(a, indices, axes_, slice_sizes_, stream())}, {-1}};
  bool same_axis = true;
  for (size_t k = 1; k < axes.size(); ++k) same_axis = same_axis && axes[k] == bi;
  // (unbatched index arrays among batched ones take the general path)
  if (ba < 0 && same_axis) {
    return {{gather(a, indices, axes_, slice_sizes_, stream())}, {bi}};
  }
  // General case: batch dims first; an extra index array walks the batch of `a` in step with
  // the batch of the indices (unbatched operands get a size-1 batch dim that broadcasts).
  int n = ba >= 0 ? a.shape(ba) : 0;
  for (size_t k = 1; ba < 0 && k < axes.size(); ++k) {
    if (axes[k] >= 0) {
      n = inputs[k].shape(axes[k]);
      break;
    }
  }
  for (size_t k = 0; k < indices.size(); ++k) {
    int b = axes[k + 1];
    indices[k] =
        b >= 0 ? moveaxis(indices[k], b, 0, stream()) : expand_dims(indices[k], 0, stream());
  }
  const int idx_ndim = indices.empty() ? 1 : static_cast<int>(indices[0].ndim());
  array a0 = ba >= 0 ? moveaxis(a, ba, 0, stream())
                     : broadcast_to(expand_dims(a, 0, stream()),
                                    insert_dim(a.shape(), 0, n), stream());
  Shape lead(idx_ndim, 1);
  lead[0] = n;
  indices.insert(indices.begin(), reshape(arange(0, n, 1, stream()), lead, stream()));
  std::vector<int> new_axes{0};
  for (int ax : axes_) new_axes.push_back(ax + 1);
  auto sizes = insert_dim(slice_sizes_, 0, 1);
  auto out = gather(a0, indices, new_axes, sizes, stream());
  return {{squeeze(out, idx_ndim, stream())}, {0}};
}

std::vector<array> Scatter::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums,
                                const std::vector<array>& outputs) {
  if (reduce_ == ScatterReduce::Prod) {
    throw std::invalid_argument("[scatter_prod] vjp is not implemented");
  }
  const array& cot = cotangents[0];
  const int last = static_cast<int>(primals.size()) - 1;
  std::vector<array> indices(primals.begin() + 1, primals.end() - 1);
  const array& upd = primals[last];
  const bool extremum = reduce_ == ScatterReduce::Max || reduce_ == ScatterReduce::Min;
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg == 0) {
      if (reduce_ == ScatterReduce::Sum) {
        out.push_back(cot);
      } else if (extremum) {
        // The input keeps its gradient where it is still the result.
        out.push_back(where(equal(outputs[0], primals[0], stream()), cot,
                            zeros_like(cot, stream()), stream()));
      } else {
        out.push_back(scatter(cot, indices, zeros_like(upd, stream()), axes_, stream()));
      }
    } else if (arg == last) {
      Shape slice(upd.shape().end() - static_cast<long>(primals[0].ndim()), upd.shape().end());
      auto g = gather(cot, indices, axes_, slice, stream());
      if (extremum) {
        auto won = equal(gather(outputs[0], indices, axes_, slice, stream()), upd, stream());
        g = where(won, g, zeros_like(g, stream()), stream());
      }
      out.push_back(g);
    } else {
      no_index_derivative(scatter_name(reduce_), "vjp");
    }
  }
  return out;
}

std::vector<array> Scatter::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>& argnums) {
  if (reduce_ != ScatterReduce::None && reduce_ != ScatterReduce::Sum) {
    throw std::invalid_argument(op_prefix(scatter_name(reduce_)) + "jvp is not implemented");
  }
  const int last = static_cast<int>(primals.size()) - 1;
  for (int arg : argnums) {
    if (arg != 0 && arg != last) no_index_derivative(scatter_name(reduce_), "jvp");
  }
  std::vector<array> indices(primals.begin() + 1, primals.end() - 1);
  auto ta = tangent_or_zeros(primals, tangents, argnums, 0);
  auto tu = tangent_or_zeros(primals, tangents, argnums, last);
  return {scatter_impl(scatter_name(reduce_), reduce_, ta, indices, tu, axes_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Scatter::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  const char* op = scatter_name(reduce_);
  const size_t last = inputs.size() - 1;
  int n = -1;
  for (size_t k = 0; k < inputs.size() && n < 0; ++k) {
    if (axes[k] >= 0) n = inputs[k].shape(axes[k]);
  }
  std::vector<array> indices(inputs.begin() + 1, inputs.end() - 1);
  if (n < 0) {
    return {{scatter_impl(op, reduce_, inputs[0], indices, inputs[last], axes_, stream())}, {-1}};
  }
  // Batch dims first; an extra index array sends batch b of the updates to batch b of `a`.
  auto front = [&](const array& x, int b) {
    if (b >= 0) return moveaxis(x, b, 0, stream());
    return broadcast_to(expand_dims(x, 0, stream()), insert_dim(x.shape(), 0, n), stream());
  };
  // Index dims of one batch element: its updates' dims less its source's (either may be the
  // batched one).
  const int idx_ndim = (static_cast<int>(inputs[last].ndim()) - (axes[last] >= 0 ? 1 : 0)) -
                       (static_cast<int>(inputs[0].ndim()) - (axes[0] >= 0 ? 1 : 0));
  for (size_t k = 0; k < indices.size(); ++k) indices[k] = front(indices[k], axes[k + 1]);
  Shape lead(idx_ndim + 1, 1);
  lead[0] = n;
  indices.insert(indices.begin(), reshape(arange(0, n, 1, stream()), lead, stream()));
  auto upd = expand_dims(front(inputs[last], axes[last]), idx_ndim + 1, stream());
  std::vector<int> new_axes{0};
  for (int ax : axes_) new_axes.push_back(ax + 1);
  return {{scatter_impl(op, reduce_, front(inputs[0], axes[0]), indices, upd, new_axes,
                        stream())},
          {0}};
}

std::vector<array> GatherAxis::vjp(const std::vector<array>& primals,
                                   const std::vector<array>& cotangents,
                                   const std::vector<int>& argnums, const std::vector<array>&) {
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg != 0) no_index_derivative("take_along_axis", "vjp");
    out.push_back(scatter_add_axis(zeros_like(primals[0], stream()), primals[1], cotangents[0],
                                   axis_, stream()));
  }
  return out;
}

std::vector<array> GatherAxis::jvp(const std::vector<array>& primals,
                                   const std::vector<array>& tangents,
                                   const std::vector<int>& argnums) {
  for (int arg : argnums) {
    if (arg != 0) no_index_derivative("take_along_axis", "jvp");
  }
  return {take_along_axis(tangents[0], primals[1], axis_, stream())};
}

std::vector<array> ScatterAxis::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums, const std::vector<array>&) {
  const char* op = reduce_ == ScatterReduce::Sum ? "scatter_add_axis" : "put_along_axis";
  const array& cot = cotangents[0];
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg == 0) {
      out.push_back(reduce_ == ScatterReduce::Sum
                        ? cot
                        : put_along_axis(cot, primals[1], zeros_like(primals[2], stream()), axis_,
                                         stream()));
    } else if (arg == 2) {
      out.push_back(take_along_axis(cot, primals[1], axis_, stream()));
    } else {
      no_index_derivative(op, "vjp");
    }
  }
  return out;
}

std::vector<array> ScatterAxis::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  const char* op = reduce_ == ScatterReduce::Sum ? "scatter_add_axis" : "put_along_axis";
  for (int arg : argnums) {
    if (arg == 1) no_index_derivative(op, "jvp");
  }
  return {scatter_axis_impl(op, reduce_, tangent_or_zeros(primals, tangents, argnums, 0),
                            primals[1], tangent_or_zeros(primals, tangents, argnums, 2), axis_,
                            stream())};
}

std::pair<std::vector<array>, std::vector<int>> GatherAxis::vmap(const std::vector<array>& inputs,
                                                                 const std::vector<int>& axes) {
  if (axes[0] < 0 && axes[1] < 0) {
    return {{take_along_axis(inputs[0], inputs[1], axis_, stream())}, {-1}};
  }
  auto front = [&](const array& x, int b) {
    return b >= 0 ? moveaxis(x, b, 0, stream()) : expand_dims(x, 0, stream());
  };
  return {{take_along_axis(front(inputs[0], axes[0]), front(inputs[1], axes[1]), axis_ + 1,
                           stream())},
          {0}};
}

std::pair<std::vector<array>, std::vector<int>> ScatterAxis::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  const char* op = reduce_ == ScatterReduce::Sum ? "scatter_add_axis" : "put_along_axis";
  if (axes[0] < 0 && axes[1] < 0 && axes[2] < 0) {
    return {{scatter_axis_impl(op, reduce_, inputs[0], inputs[1], inputs[2], axis_, stream())},
            {-1}};
  }
  auto front = [&](const array& x, int b) {
    return b >= 0 ? moveaxis(x, b, 0, stream()) : expand_dims(x, 0, stream());
  };
  return {{scatter_axis_impl(op, reduce_, front(inputs[0], axes[0]), front(inputs[1], axes[1]),
                             front(inputs[2], axes[2]), axis_ + 1, stream())},
          {0}};
}

}  // namespace tessera
