// Primitives of the shape family (front ends in shape.cpp, kernels in backend/cpu/shape.cpp).
#pragma once

#include <array>
#include <initializer_list>
#include <string>

#include "tessera/primitive.h"
#include "core/transforms_impl.h"

namespace tessera {

// View of the input with 0 strides along broadcast dims. One an elementwise op inserts names the
// other operands as its shape sources (shapeless compile broadcasts against their new shapes).
class Broadcast : public UnaryPrimitive {
 public:
  Broadcast(Stream s, Shape shape) : UnaryPrimitive(s), shape_(std::move(shape)) {}
  // An imported one (export): the shape sources are edges of the imported graph.
  Broadcast(Stream s, Shape shape, int keep_last)
      : UnaryPrimitive(s), shape_(std::move(shape)), keep_last_(keep_last) {}
  // `sources` (kept while compile traces): the arrays the output shape follows. Their last
  // `keep_last` dims do not count: the input keeps its own (a batched product's matrix dims).
  Broadcast(Stream s, Shape shape, std::initializer_list<const array*> sources, int keep_last = 0);
  Broadcast(Stream s, Shape shape, std::vector<array> sources, int keep_last = 0);
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Broadcast"; }
  TESSERA_STATE(shape_, keep_last_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> shape_sources() const override { return sources_; }
  void clear_shape_sources() override { sources_.clear(); }
  std::vector<Shape> shapeless_output_shapes(const std::vector<array>& inputs,
                                             const std::vector<Shape>& source_shapes) override;
  bool fused_broadcast() const override { return true; }

 private:
  // vmap while compile traces a broadcast that has shape sources.
  std::pair<array, int> vmap_following(const array& in, int ax,
                                       const detail::VmappedSources& sources);
  Shape shape_;
  // Kept only while compile traces (no cost per op otherwise), until build_graph takes them.
  std::vector<array> sources_;
  int keep_last_ = 0;
};

namespace detail {
// broadcast_to(a, shape) for an elementwise op whose other operands are `sources`.
array broadcast_for_elementwise(const array& a, const Shape& shape,
                                std::initializer_list<const array*> sources, StreamOrDevice s);
// `a` broadcast to the batch dims `batch` of a batched product whose other operand is `other`,
// keeping its last two dims. While compile traces the node is made even when nothing changes,
// so that a shapeless replay can broadcast new shapes.
array broadcast_batch_for_product(const array& a, const Shape& batch, const array& other,
                                  StreamOrDevice s);
}  // namespace detail

// View when the input's strides allow it, else a row-contiguous copy. `infer` is the dim that
// was given as -1 (or -1): a shapeless compile recomputes it from the new input's size.
class Reshape : public UnaryPrimitive {
 public:
  Reshape(Stream s, Shape shape, int infer = -1)
      : UnaryPrimitive(s), shape_(std::move(shape)), infer_(infer) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Reshape"; }
  TESSERA_STATE(shape_, infer_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;

 private:
  Shape shape_;
  int infer_;
};

// View with permuted dims: out.shape[i] = in.shape[axes[i]].
class Transpose : public UnaryPrimitive {
 public:
  Transpose(Stream s, std::vector<int> axes) : UnaryPrimitive(s), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Transpose"; }
  TESSERA_STATE(axes_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const std::vector<int>& axes() const { return axes_; }

 private:
  std::vector<int> axes_;  // a permutation of [0, ndim)
};

// View with size-1 dims inserted at `axes` (sorted, unique, positions in the output).
class ExpandDims : public UnaryPrimitive {
 public:
  ExpandDims(Stream s, std::vector<int> axes) : UnaryPrimitive(s), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "ExpandDims"; }
  TESSERA_STATE(axes_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  static Shape output_shape(const Shape& in, const std::vector<int>& axes);
  bool undoes(const Primitive& previous) const override;
  const std::vector<int>& axes() const { return axes_; }

 private:
  std::vector<int> axes_;
};

// View with the size-1 dims at `axes` (sorted, unique) removed.
class Squeeze : public UnaryPrimitive {
 public:
  Squeeze(Stream s, std::vector<int> axes) : UnaryPrimitive(s), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Squeeze"; }
  TESSERA_STATE(axes_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  static Shape output_shape(const Shape& in, const std::vector<int>& axes);
  bool undoes(const Primitive& previous) const override;
  const std::vector<int>& axes() const { return axes_; }

 private:
  std::vector<int> axes_;
};

// Inputs of one dtype, equal shapes except along `axis`; a new row-contiguous buffer.
class Concatenate : public UnaryPrimitive {
 public:
  Concatenate(Stream s, int axis) : UnaryPrimitive(s), axis_(axis) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Concatenate"; }
  TESSERA_STATE(axis_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;

 private:
  int axis_;
};

// Views of the parts [0, i0), [i0, i1), ..., [ik, n) along `axis` (indices sorted, in [0, n]).
class Split : public Primitive {
 public:
  Split(Stream s, Shape indices, int axis)
      : Primitive(s), indices_(std::move(indices)), axis_(axis) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Split"; }
  TESSERA_STATE(indices_, axis_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  Shape indices_;
  int axis_;
};

// View with the order of elements reversed along `axes` (negative strides).
class Flip : public UnaryPrimitive {
 public:
  Flip(Stream s, std::vector<int> axes) : UnaryPrimitive(s), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Flip"; }
  TESSERA_STATE(axes_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;

 private:
  std::vector<int> axes_;
};

// inputs {a, pad_value (0-d, a's dtype)}; pads a[axes[i]] (axes normalised) by low_[i] before
// and high_[i] after, filling with pad_value. A new row-contiguous buffer. ("edge" mode is
// composed from split/broadcast_to/concatenate in the front end.)
class Pad : public UnaryPrimitive {
 public:
  Pad(Stream s, std::vector<int> axes, Shape low, Shape high)
      : UnaryPrimitive(s), axes_(std::move(axes)), low_(std::move(low)), high_(std::move(high)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Pad"; }
  TESSERA_STATE(axes_, low_, high_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  std::vector<int> axes_;
  Shape low_, high_;
};

// {inputs..., dependencies...} -> the first n inputs, buffers shared: the outputs exist only
// once the dependencies are evaluated.
class Depends : public Primitive {
 public:
  Depends(Stream s, size_t n) : Primitive(s), n_(n) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_DECLARE_VJP
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  const char* name() const override { return "Depends"; }
  TESSERA_STATE(n_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  size_t n_;
};

}  // namespace tessera
