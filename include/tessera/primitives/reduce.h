// Primitives of the reduce and scan families: Reduce, ArgReduce, Scan, and the last-axis
// Softmax / LogSumExp kernels. Front ends in src/ops/{reduce,scan,softmax}.cpp;
// kernels in src/backend/cpu/{reduce,scan,softmax}.cpp.
#pragma once

#include <vector>

#include "tessera/primitive.h"

namespace tessera {

// Reduces `axes` (sorted, unique) of its input; the output keeps them as size-1 dims (front ends
// reshape them away when keepdims is false).
class Reduce : public UnaryPrimitive {
 public:
  enum ReduceType { And, Or, Sum, Prod, Min, Max };
  Reduce(Stream s, ReduceType type, std::vector<int> axes)
      : UnaryPrimitive(s), type_(type), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override;
  TESSERA_STATE(type_, axes_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  ReduceType type() const { return type_; }
  const std::vector<int>& axes() const { return axes_; }
  // Fusion table entry: sum, max and min fuse with their elementwise producers.
  FusedReduce fused_reduction(std::vector<int>* axes) const override {
    *axes = axes_;
    return type_ == Sum ? FusedReduce::sum : type_ == Max ? FusedReduce::max
           : type_ == Min ? FusedReduce::min : FusedReduce::none;
  }

 private:
  ReduceType type_;
  std::vector<int> axes_;
};

// The number of elements along `axes` of its input (or its reciprocal when `inverted`), as a
// scalar of `dtype`: mean's and var's divisor while compile traces, so that a shapeless replay
// divides by the count of the new shape. It reads only its input's shape; bound to a shape
// (bind_input_shapes) it has no input.
class NumberOfElements : public UnaryPrimitive {
 public:
  // `bound`: the value of one bound to a shape (see bind_input_shapes); -1 for one with an input.
  NumberOfElements(Stream s, std::vector<int> axes, bool inverted, Dtype dtype, double bound = -1)
      : UnaryPrimitive(s), axes_(std::move(axes)), inverted_(inverted), dtype_(dtype),
        bound_(bound) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "NumberOfElements"; }
  TESSERA_STATE(axes_, inverted_, dtype_, bound_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>&) override { return {Shape{}}; }
  std::shared_ptr<Primitive> bind_input_shapes(const std::vector<Shape>& shapes) const override;
  // The value for an input of `shape`.
  double value(const Shape& shape) const;

 private:
  std::vector<int> axes_;
  bool inverted_;
  Dtype dtype_;
  double bound_;  // the value, once bound to a shape (then there is no input); else -1
};

// Index (uint32) of the first min/max along `axis`; the output keeps the axis with size 1.
class ArgReduce : public UnaryPrimitive {
 public:
  enum ReduceType { ArgMin, ArgMax };
  ArgReduce(Stream s, ReduceType type, int axis) : UnaryPrimitive(s), type_(type), axis_(axis) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return type_ == ArgMin ? "ArgMin" : "ArgMax"; }
  TESSERA_STATE(type_, axis_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    Shape out = inputs[0].shape();
    out[axis_] = 1;
    return {out};
  }

 private:
  ReduceType type_;
  int axis_;
};

// Inclusive/exclusive, forward/reverse scan along one axis.
class Scan : public UnaryPrimitive {
 public:
  enum ReduceType { Max, Min, Sum, Prod, LogAddExp };
  Scan(Stream s, ReduceType type, int axis, bool reverse, bool inclusive)
      : UnaryPrimitive(s), type_(type), axis_(axis), reverse_(reverse), inclusive_(inclusive) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override;
  TESSERA_STATE(type_, axis_, reverse_, inclusive_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  ReduceType type_;
  int axis_;
  bool reverse_;
  bool inclusive_;
};

// Softmax along the last axis of a floating input.
class Softmax : public UnaryPrimitive {
 public:
  Softmax(Stream s, bool precise) : UnaryPrimitive(s), precise_(precise) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Softmax"; }
  TESSERA_STATE(precise_)
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  bool precise_;
};

// log(sum(exp(x))) along the last axis of a floating input; the output keeps it with size 1.
class LogSumExp : public UnaryPrimitive {
 public:
  using UnaryPrimitive::UnaryPrimitive;
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  TESSERA_PRIMITIVE_NAME(LogSumExp)
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    Shape out = inputs[0].shape();
    out.back() = 1;
    return {out};
  }
};

}  // namespace tessera
