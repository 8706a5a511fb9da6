// Derivatives (vjp, jvp) and batching rules (vmap) of the shape family's primitives. Every shape
// op is linear, so jvp applies the op to the tangent and vjp applies its adjoint. vmap moves the
// batch axis to the front and shifts the op's axes by one.
#include <numeric>
#include <stdexcept>

#include "ops/shape.h"
#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

// `x` with its batch axis `ax` (>= 0) moved to the front.
array batch_front(const array& x, int ax, const Stream& s) {
  return ax > 0 ? moveaxis(x, ax, 0, s) : x;
}

std::vector<int> shifted(const std::vector<int>& axes) {
  std::vector<int> out(axes);
  for (auto& a : out) a += 1;
  return out;
}

// Position of `arg` in argnums, or -1.
int arg_position(const std::vector<int>& argnums, int arg) {
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == arg) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

// ---- Broadcast ----

std::vector<array> Broadcast::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents, const std::vector<int>&,
                                  const std::vector<array>&) {
  // Sum the cotangent over the new leading dims and the dims broadcast from size 1.
  const Shape& in_shape = primals[0].shape();
  const int lead = static_cast<int>(shape_.size() - in_shape.size());
  std::vector<int> axes;
  for (int i = 0; i < static_cast<int>(shape_.size()); ++i) {
    if (i < lead || (in_shape[i - lead] == 1 && shape_[i] != 1)) axes.push_back(i);
  }
  array g = axes.empty() ? cotangents[0] : sum(cotangents[0], axes, true, stream());
  std::vector<int> leading(static_cast<size_t>(lead));
  std::iota(leading.begin(), leading.end(), 0);
  return {squeeze(g, leading, stream())};
}

std::vector<array> Broadcast::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {broadcast_to(tangents[0], shape_, stream())};
}

// The batched broadcast for a shapeless compile: it keeps following its shape sources (as vmap
// batched them), so a replay with new batch and source shapes broadcasts to the new shape. The
// batch dim goes first, in the input and in each batched source, each then padded with unit dims
// to the output's rank (dims align from the right); an input that is not batched broadcasts
// along it. Nothing batched: the broadcast as traced, following the same sources.
std::pair<array, int> Broadcast::vmap_following(const array& in, int ax,
                                                const detail::VmappedSources& sources) {
  const int rank = static_cast<int>(shape_.size());
  auto batch_first_padded = [&](const array& x, int x_ax) {
    array y = moveaxis(x, x_ax, 0, stream());
    std::vector<int> pad(static_cast<size_t>(rank + 1 - static_cast<int>(y.ndim())));
    std::iota(pad.begin(), pad.end(), 1);
    return pad.empty() ? y : expand_dims(y, pad, stream());
  };
  int batch = ax >= 0 ? in.shape(ax) : -1;
  std::vector<array> srcs;
  for (const auto& [src, src_ax] : sources) {
    srcs.push_back(src_ax < 0 ? src : batch_first_padded(src, src_ax));
    if (src_ax >= 0) batch = src.shape(src_ax);
  }
  Shape shape = shape_;
  if (batch < 0) {
    return {array(shape, in.dtype(),
                  std::make_shared<Broadcast>(stream(), shape, std::move(srcs), keep_last_), {in}),
            -1};
  }
  shape.insert(shape.begin(), batch);
  array x = ax >= 0 ? batch_first_padded(in, ax) : in;
  detail::broadcast_shapes("broadcast_to", x.shape(), shape);  // checks
  return {array(shape, in.dtype(),
                std::make_shared<Broadcast>(stream(), shape, std::move(srcs), keep_last_), {x}),
          0};
}

std::pair<std::vector<array>, std::vector<int>> Broadcast::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  const array& in = inputs[0];
  int ax = axes[0];
  if (const detail::VmappedSources* sources = detail::vmapped_shape_sources()) {
    auto [out, out_ax] = vmap_following(in, ax, *sources);
    return {{out}, {out_ax}};
  }
  if (ax < 0) return {{broadcast_to(in, shape_, stream())}, {-1}};
  // Without its batch dim the input has ndim-1 dims, right-aligned against shape_, so input dim
  // i lands on output dim i + lead; the batch dim is inserted there.
  int lead = static_cast<int>(shape_.size()) - (static_cast<int>(in.ndim()) - 1);
  Shape shape = shape_;
  shape.insert(shape.begin() + ax + lead, in.shape()[ax]);
  return {{broadcast_to(in, shape, stream())}, {ax + lead}};
}

// ---- Reshape ----

std::vector<array> Reshape::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents, const std::vector<int>&,
                                const std::vector<array>&) {
  return {reshape(cotangents[0], primals[0].shape(), stream())};
}

std::vector<array> Reshape::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                const std::vector<int>&) {
  return {reshape(tangents[0], shape_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Reshape::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  if (axes[0] < 0) return {{reshape(inputs[0], shape_, stream())}, {-1}};
  array x = batch_front(inputs[0], axes[0], stream());
  Shape shape = shape_;
  shape.insert(shape.begin(), x.shape()[0]);
  return {{reshape(x, shape, stream())}, {0}};
}

// ---- Transpose ----

std::vector<array> Transpose::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                                  const std::vector<int>&, const std::vector<array>&) {
  std::vector<int> inverse(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) inverse[axes_[i]] = static_cast<int>(i);
  return {transpose(cotangents[0], std::move(inverse), stream())};
}

std::vector<array> Transpose::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {transpose(tangents[0], axes_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Transpose::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  if (axes[0] < 0) return {{transpose(inputs[0], axes_, stream())}, {-1}};
  array x = batch_front(inputs[0], axes[0], stream());
  std::vector<int> perm{0};
  for (int a : axes_) perm.push_back(a + 1);
  return {{transpose(x, std::move(perm), stream())}, {0}};
}

// ---- ExpandDims / Squeeze ----

// Each the other's inverse (not a reshape to the traced shape, so shapeless compile replays them).
std::vector<array> ExpandDims::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                                   const std::vector<int>&, const std::vector<array>&) {
  return {squeeze(cotangents[0], axes_, stream())};
}

std::vector<array> ExpandDims::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                   const std::vector<int>&) {
  return {expand_dims(tangents[0], axes_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> ExpandDims::vmap(const std::vector<array>& inputs,
                                                                 const std::vector<int>& axes) {
  if (axes[0] < 0) return {{expand_dims(inputs[0], axes_, stream())}, {-1}};
  array x = batch_front(inputs[0], axes[0], stream());
  return {{expand_dims(x, shifted(axes_), stream())}, {0}};
}

std::vector<array> Squeeze::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                                const std::vector<int>&, const std::vector<array>&) {
  return {expand_dims(cotangents[0], axes_, stream())};
}

std::vector<array> Squeeze::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                const std::vector<int>&) {
  return {squeeze(tangents[0], axes_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Squeeze::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  if (axes[0] < 0) return {{squeeze(inputs[0], axes_, stream())}, {-1}};
  array x = batch_front(inputs[0], axes[0], stream());
  return {{squeeze(x, shifted(axes_), stream())}, {0}};
}

// ---- Concatenate / Split ----

std::vector<array> Concatenate::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums, const std::vector<array>&) {
  Shape indices;
  int acc = 0;
  for (size_t i = 0; i + 1 < primals.size(); ++i) {
    acc += primals[i].shape()[axis_];
    indices.push_back(acc);
  }
  auto parts = split(cotangents[0], indices, axis_, stream());
  std::vector<array> out;
  for (int arg : argnums) out.push_back(parts[arg]);
  return out;
}

std::vector<array> Concatenate::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  std::vector<array> parts;
  for (size_t i = 0; i < primals.size(); ++i) {
    int k = arg_position(argnums, static_cast<int>(i));
    parts.push_back(k >= 0 ? tangents[k] : zeros_like(primals[i], stream()));
  }
  return {concatenate(std::move(parts), axis_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Concatenate::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int batch = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) batch = inputs[i].shape()[axes[i]];
  }
  if (batch < 0) return {{concatenate(inputs, axis_, stream())}, {-1}};
  std::vector<array> parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) {
      parts.push_back(batch_front(inputs[i], axes[i], stream()));
    } else {
      Shape shape = inputs[i].shape();
      shape.insert(shape.begin(), batch);
      parts.push_back(broadcast_to(expand_dims(inputs[i], 0, stream()), shape, stream()));
    }
  }
  return {{concatenate(std::move(parts), axis_ + 1, stream())}, {0}};
}

std::vector<array> Split::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                              const std::vector<int>&, const std::vector<array>&) {
  if (!std::is_sorted(indices_.begin(), indices_.end())) {
    throw std::invalid_argument(
        "[vjp] Split: only splits at non-decreasing indices have a vjp");
  }
  return {concatenate(cotangents, axis_, stream())};
}

std::vector<array> Split::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                              const std::vector<int>&) {
  return split(tangents[0], indices_, axis_, stream());
}

std::pair<std::vector<array>, std::vector<int>> Split::vmap(const std::vector<array>& inputs,
                                                            const std::vector<int>& axes) {
  if (axes[0] < 0) {
    auto outs = split(inputs[0], indices_, axis_, stream());
    return {outs, std::vector<int>(outs.size(), -1)};
  }
  array x = batch_front(inputs[0], axes[0], stream());
  auto outs = split(x, indices_, axis_ + 1, stream());
  return {outs, std::vector<int>(outs.size(), 0)};
}

// ---- Flip ----

std::vector<array> Flip::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                             const std::vector<int>&, const std::vector<array>&) {
  return {flip(cotangents[0], axes_, stream())};
}

std::vector<array> Flip::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                             const std::vector<int>&) {
  return {flip(tangents[0], axes_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Flip::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  if (axes[0] < 0) return {{flip(inputs[0], axes_, stream())}, {-1}};
  array x = batch_front(inputs[0], axes[0], stream());
  return {{flip(x, shifted(axes_), stream())}, {0}};
}

// ---- Pad ----

std::vector<array> Pad::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents,
                            const std::vector<int>& argnums, const std::vector<array>&) {
  // The interior is the cotangent of `a`; everything else went to pad_value.
  array interior = cotangents[0];
  for (size_t i = 0; i < axes_.size(); ++i) {
    int n = primals[0].shape()[axes_[i]];
    interior = split(interior, Shape{low_[i], low_[i] + n}, axes_[i], stream())[1];
  }
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg == 0) {
      out.push_back(interior);
    } else {
      out.push_back(subtract(sum(cotangents[0], stream()), sum(interior, stream()), stream()));
    }
  }
  return out;
}

std::vector<array> Pad::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                            const std::vector<int>& argnums) {
  // Pad is linear in (a, pad_value) jointly.
  int ka = arg_position(argnums, 0);
  int kv = arg_position(argnums, 1);
  array ta = ka >= 0 ? tangents[ka] : zeros_like(primals[0], stream());
  array tv = kv >= 0 ? tangents[kv] : zeros_like(primals[1], stream());
  return {pad(ta, axes_, low_, high_, tv, "constant", stream())};
}

std::pair<std::vector<array>, std::vector<int>> Pad::vmap(const std::vector<array>& inputs,
                                                          const std::vector<int>& axes) {
  if (axes.size() > 1 && axes[1] >= 0) {
    throw std::invalid_argument("[vmap] Pad: a batched pad_value is not supported");
  }
  if (axes[0] < 0) {
    return {{pad(inputs[0], axes_, low_, high_, inputs[1], "constant", stream())}, {-1}};
  }
  array x = batch_front(inputs[0], axes[0], stream());
  return {{pad(x, shifted(axes_), low_, high_, inputs[1], "constant", stream())}, {0}};
}

}  // namespace tessera
