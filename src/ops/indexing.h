// Primitives of the indexing family (front ends and derivatives in indexing.cpp, kernels in
// backend/cpu/slicing.cpp and backend/cpu/indexing.cpp).
#pragma once

#include <string>

#include "tessera/primitive.h"

namespace tessera {

// View a[start : start + out_shape * strides] with normalised (clamped, non-negative) starts.
class Slice : public UnaryPrimitive {
 public:
  Slice(Stream s, Shape start, Shape strides, Shape out_shape)
      : UnaryPrimitive(s),
        start_(std::move(start)),
        strides_(std::move(strides)),
        out_shape_(std::move(out_shape)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Slice"; }
  TESSERA_STATE(start_, strides_, out_shape_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  Shape start_;
  Shape strides_;
  Shape out_shape_;
};

// Inputs {src, update}: a copy of src with the strided region (start, strides, update's shape)
// replaced by update (same dtype, already broadcast to the region's shape).
class SliceUpdate : public UnaryPrimitive {
 public:
  SliceUpdate(Stream s, Shape start, Shape strides)
      : UnaryPrimitive(s), start_(std::move(start)), strides_(std::move(strides)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "SliceUpdate"; }
  TESSERA_STATE(start_, strides_)
  bool is_equivalent(const Primitive& other) const override;
  // The source's shape, when the update still fits at start_ (shapeless compile).
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;

 private:
  Shape start_;
  Shape strides_;
};

// Inputs {a, start}: a copy of the region of shape out.shape() whose start along axes_ is read
// from the integer array `start` (wrapped when negative, clamped so the region fits).
class DynamicSlice : public UnaryPrimitive {
 public:
  DynamicSlice(Stream s, std::vector<int> axes, Shape slice_size)
      : UnaryPrimitive(s), axes_(std::move(axes)), slice_size_(std::move(slice_size)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "DynamicSlice"; }
  TESSERA_STATE(axes_, slice_size_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  std::vector<int> axes_;
  Shape slice_size_;
};

// Inputs {src, update, start}: a copy of src with the region of update's shape, starting at
// `start` along axes_ (wrapped, clamped) and 0 elsewhere, replaced by update.
class DynamicSliceUpdate : public UnaryPrimitive {
 public:
  DynamicSliceUpdate(Stream s, std::vector<int> axes)
      : UnaryPrimitive(s), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "DynamicSliceUpdate"; }
  TESSERA_STATE(axes_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  std::vector<int> axes_;
};

// Inputs {a, indices...} (indices broadcast to one shape): out[i, ...] = the slice of
// slice_sizes_ of `a` starting at indices[k][i] along axes_[k] (0 along other dims).
class Gather : public UnaryPrimitive {
 public:
  // `op` names the user's op in kernel errors (take is a Gather too).
  Gather(Stream s, std::vector<int> axes, Shape slice_sizes, const char* op = "gather")
      : UnaryPrimitive(s), axes_(std::move(axes)), slice_sizes_(std::move(slice_sizes)), op_(op) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Gather"; }
  TESSERA_STATE(axes_, slice_sizes_)
  bool is_equivalent(const Primitive& other) const override;
  // The indices' broadcast shape, then the slice sizes (which must fit the new input).
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;

 private:
  std::vector<int> axes_;
  Shape slice_sizes_;
  const char* op_;  // a string literal
};

enum class ScatterReduce { None, Sum, Prod, Max, Min };

// Inputs {a, indices..., updates}: a copy of `a` with each update slice combined into the
// position given by the indices (applied in order).
class Scatter : public UnaryPrimitive {
 public:
  Scatter(Stream s, ScatterReduce reduce, std::vector<int> axes)
      : UnaryPrimitive(s), reduce_(reduce), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Scatter"; }
  TESSERA_STATE(reduce_, axes_)
  void print(std::ostream& os) const override;
  bool is_equivalent(const Primitive& other) const override;

 private:
  ScatterReduce reduce_;
  std::vector<int> axes_;
};

// Inputs {a, indices} of equal rank, equal shapes except along axis_: take_along_axis.
class GatherAxis : public UnaryPrimitive {
 public:
  GatherAxis(Stream s, int axis, const char* op = "take_along_axis")
      : UnaryPrimitive(s), axis_(axis), op_(op) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "GatherAxis"; }
  TESSERA_STATE(axis_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  int axis_;
  const char* op_;  // the user's op, for kernel errors (a string literal)
};

// Inputs {a, indices, updates}; indices and updates of one shape, equal to a's except along
// axis_: put_along_axis (None) and scatter_add_axis (Sum).
class ScatterAxis : public UnaryPrimitive {
 public:
  ScatterAxis(Stream s, ScatterReduce reduce, int axis)
      : UnaryPrimitive(s), reduce_(reduce), axis_(axis) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "ScatterAxis"; }
  TESSERA_STATE(reduce_, axis_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  ScatterReduce reduce_;
  int axis_;
};

namespace detail {
// Index arrays read by a kernel, in row-major order: each value wrapped (negative counts from the
// end) and checked to leave room for `extent` elements in [0, size); throws
// std::invalid_argument naming `op`, the value and the axis.
std::vector<int64_t> read_indices(const array& idx, int64_t size, const char* op, int axis,
                                  int64_t extent = 1);
}  // namespace detail

// Front-end pieces shared by indexing.cpp and indexing_grad.cpp.
namespace detail::idx {
// gather and take_along_axis under the name of the op the user called (take and
// masked_scatter are built on them): argument checks keep the primitive's own name, kernel
// errors (a bad index) say `op`, a string literal.
array gather_as(const char* op, const array& a, const std::vector<array>& indices,
                const std::vector<int>& axes_in, const Shape& slice_sizes, StreamOrDevice s);
array take_along_axis_as(const char* op, const array& a, const array& indices, int axis_in,
                         StreamOrDevice s);
std::string op_prefix(const char* op);
Shape insert_dim(Shape s, int pos, int32_t v);
const char* scatter_name(ScatterReduce r);
// Slice / SliceUpdate from already normalised starts and strides.
array make_slice(const array& a, Shape start, Shape strides, Shape out_shape, StreamOrDevice s);
array make_slice_update(const array& src, const array& upd, Shape start, Shape strides,
                        StreamOrDevice s);
array scatter_impl(const char* op, ScatterReduce reduce, const array& a,
                   const std::vector<array>& indices, const array& updates,
                   const std::vector<int>& axes_in, StreamOrDevice s);
array scatter_axis_impl(const char* op, ScatterReduce reduce, const array& a,
                        const array& indices, const array& values, int axis_in,
                        StreamOrDevice s);
}  // namespace detail::idx

}  // namespace tessera
