// Front ends and derivatives of the creation extras: linspace, eye/identity, tri, tril/triu,
// view, as_strided, contiguous.
#include <stdexcept>

#include "ops/creation_extra.h"
#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

array linspace(double start, double stop, int num, bool endpoint, Dtype dtype, StreamOrDevice s) {
  if (num < 0) {
    throw std::invalid_argument("[linspace] the number of samples must be non-negative, got " +
                                std::to_string(num));
  }
  return array(Shape{num}, dtype, std::make_shared<Linspace>(to_stream(s), start, stop, endpoint),
               {});
}

array linspace(double start, double stop, int num, Dtype dtype, StreamOrDevice s) {
  return linspace(start, stop, num, true, dtype, s);
}

array eye(int n, int m, int k, Dtype dtype, StreamOrDevice s) {
  if (n < 0 || m < 0) {
    throw std::invalid_argument("[eye] n and m must be non-negative, got n=" + std::to_string(n) +
                                " m=" + std::to_string(m));
  }
  return array(Shape{n, m}, dtype, std::make_shared<Eye>(to_stream(s), k, false), {});
}

array identity(int n, Dtype dtype, StreamOrDevice s) { return eye(n, n, 0, dtype, s); }

array tri(int n, int m, int k, Dtype type, StreamOrDevice s) {
  if (n < 0 || m < 0) {
    throw std::invalid_argument("[tri] n and m must be non-negative, got n=" + std::to_string(n) +
                                " m=" + std::to_string(m));
  }
  return array(Shape{n, m}, type, std::make_shared<Eye>(to_stream(s), k, true), {});
}

namespace {
array triangular(const char* op, const array& x, int k, bool upper, StreamOrDevice s) {
  if (x.ndim() < 2) {
    throw std::invalid_argument(std::string("[") + op + "] the array must be at least 2-D, got shape " +
                                detail::shape_str(x.shape()));
  }
  auto shape = x.shape();
  return array(std::move(shape), x.dtype(), std::make_shared<Triangular>(to_stream(s), k, upper),
               {x});
}
}  // namespace

array tril(array x, int k, StreamOrDevice s) { return triangular("tril", x, k, false, s); }
array triu(array x, int k, StreamOrDevice s) { return triangular("triu", x, k, true, s); }

array view(const array& a, const Dtype& dtype, StreamOrDevice s) {
  if (a.dtype() == dtype) return a;
  const size_t ib = size_of(a.dtype()), ob = size_of(dtype);
  Shape shape = a.shape();
  if (ib != ob) {
    if (a.ndim() == 0) {
      throw std::invalid_argument("[view] a 0-d array of " + std::to_string(ib) +
                                  "-byte items cannot be viewed as " + std::to_string(ob) +
                                  "-byte items; the item sizes must match");
    }
    if (ib < ob) {
      const int ratio = static_cast<int>(ob / ib);
      if (shape.back() % ratio != 0) {
        throw std::invalid_argument(
            "[view] the last axis of shape " + detail::shape_str(shape) + " spans " +
            std::to_string(shape.back() * ib) + " bytes, not a multiple of the " +
            std::to_string(ob) + "-byte item size of the requested dtype");
      }
      shape.back() /= ratio;
    } else {
      shape.back() *= static_cast<int>(ib / ob);
    }
  }
  return array(std::move(shape), dtype, std::make_shared<View>(to_stream(s), dtype), {a});
}

array as_strided(array a, Shape shape, Strides strides, size_t offset, StreamOrDevice s) {
  for (auto d : shape) {
    if (d < 0) {
      throw std::invalid_argument("[as_strided] negative dimension in shape " +
                                  detail::shape_str(shape));
    }
  }
  if (strides.size() != shape.size()) {
    throw std::invalid_argument("[as_strided] got " + std::to_string(strides.size()) +
                                " strides for shape " + detail::shape_str(shape));
  }
  // Refuse views that reach outside the input's elements.
  if (detail::shape_size(shape) > 0) {
    int64_t lo = static_cast<int64_t>(offset), hi = static_cast<int64_t>(offset);
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t span = static_cast<int64_t>(shape[i] - 1) * strides[i];
      (span < 0 ? lo : hi) += span;
    }
    if (lo < 0 || hi >= static_cast<int64_t>(a.size())) {
      throw std::invalid_argument("[as_strided] shape " + detail::shape_str(shape) +
                                  " with offset " + std::to_string(offset) +
                                  " reaches elements [" + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "] outside the input's " +
                                  std::to_string(a.size()) + " elements");
    }
  }
  auto out_shape = shape;
  auto dtype = a.dtype();
  array flat = flatten(a, s);
  return array(std::move(out_shape), dtype,
               std::make_shared<AsStrided>(to_stream(s), std::move(shape), std::move(strides),
                                           offset),
               {std::move(flat)});
}

array contiguous(const array& a, bool allow_col_major, StreamOrDevice s) {
  auto shape = a.shape();
  return array(std::move(shape), a.dtype(),
               std::make_shared<Contiguous>(to_stream(s), allow_col_major), {a});
}

// ---- equivalence ----

bool Linspace::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Linspace*>(&other);
  return o && o->start_ == start_ && o->stop_ == stop_ && o->endpoint_ == endpoint_;
}

bool Eye::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Eye*>(&other);
  return o && o->k_ == k_ && o->lower_triangle_ == lower_triangle_;
}

bool Triangular::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Triangular*>(&other);
  return o && o->k_ == k_ && o->upper_ == upper_;
}

bool View::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const View*>(&other);
  return o && o->dtype_ == dtype_;
}

bool AsStrided::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const AsStrided*>(&other);
  return o && o->shape_ == shape_ && o->strides_ == strides_ && o->offset_ == offset_;
}

bool Contiguous::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Contiguous*>(&other);
  return o && o->allow_col_major_ == allow_col_major_;
}

// ---- derivatives and batching ----

std::vector<array> Triangular::vjp(const std::vector<array>&,
                                   const std::vector<array>& cotangents, const std::vector<int>&,
                                   const std::vector<array>&) {
  return {upper_ ? triu(cotangents[0], k_, stream()) : tril(cotangents[0], k_, stream())};
}

std::vector<array> Triangular::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                   const std::vector<int>&) {
  return {upper_ ? triu(tangents[0], k_, stream()) : tril(tangents[0], k_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Triangular::vmap(const std::vector<array>& inputs,
                                                                 const std::vector<int>& axes) {
  array x = axes[0] > 0 ? moveaxis(inputs[0], axes[0], 0, stream()) : inputs[0];
  array y = upper_ ? triu(x, k_, stream()) : tril(x, k_, stream());
  return {{y}, {axes[0] >= 0 ? 0 : -1}};
}

std::pair<std::vector<array>, std::vector<int>> View::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  if (axes[0] < 0) return {{view(inputs[0], dtype_, stream())}, {-1}};
  if (inputs[0].ndim() == 1 && size_of(inputs[0].dtype()) != size_of(dtype_)) {
    throw std::invalid_argument("[vmap] View: each batch element is 0-d and the item sizes of " +
                                std::string("the dtypes differ"));
  }
  array x = axes[0] > 0 ? moveaxis(inputs[0], axes[0], 0, stream()) : inputs[0];
  return {{view(x, dtype_, stream())}, {0}};
}

// Each output element reads input element offset + sum_k i_k * strides_k; elements read more
// than once (overlapping windows) collect every cotangent that reached them.
std::vector<array> AsStrided::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents, const std::vector<int>&,
                                  const std::vector<array>&) {
  const Stream s = stream();
  array index = array(static_cast<int64_t>(offset_), int64);
  for (size_t k = 0; k < shape_.size(); ++k) {
    Shape along(shape_.size(), 1);
    along[k] = shape_[k];
    auto i = reshape(arange(0.0, static_cast<double>(shape_[k]), 1.0, int64, s), along, s);
    index = add(index, multiply(i, array(static_cast<int64_t>(strides_[k]), int64), s), s);
  }
  index = flatten(broadcast_to(index, shape_, s), s);
  return {scatter_add_axis(zeros_like(primals[0], s), index, flatten(cotangents[0], s), 0, s)};
}

std::vector<array> AsStrided::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {as_strided(tangents[0], shape_, strides_, offset_, stream())};
}

std::vector<array> Contiguous::vjp(const std::vector<array>&,
                                   const std::vector<array>& cotangents, const std::vector<int>&,
                                   const std::vector<array>&) {
  return cotangents;
}

std::vector<array> Contiguous::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                   const std::vector<int>&) {
  return tangents;
}

std::pair<std::vector<array>, std::vector<int>> Contiguous::vmap(const std::vector<array>& inputs,
                                                                 const std::vector<int>& axes) {
  return {{contiguous(inputs[0], allow_col_major_, stream())}, axes};
}

}  // namespace tessera
