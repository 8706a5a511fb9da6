// Primitives of the reduce and scan families: Reduce, ArgReduce, Scan, and the last-axis
// Softmax / LogSumExp kernels. Front ends in ops/reduce.cpp, ops/scan.cpp, ops/softmax.cpp;
// kernels in backend/cpu/{reduce,scan,softmax}.cpp.
#pragma once

#include <vector>

#include "core/primitive.h"

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

// Index (uint32) of the first min/max along `axis`; the output keeps the axis with size 1.
class ArgReduce : public UnaryPrimitive {
 public:
  enum ReduceType { ArgMin, ArgMax };
  ArgReduce(Stream s, ReduceType type, int axis) : UnaryPrimitive(s), type_(type), axis_(axis) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return type_ == ArgMin ? "ArgMin" : "ArgMax"; }
  bool is_equivalent(const Primitive& other) const override;

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
  bool is_equivalent(const Primitive& other) const override;

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
  bool is_equivalent(const Primitive& other) const override;

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
};

}  // namespace tessera
