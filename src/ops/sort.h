// Primitives of the sort family (front ends in sort.cpp, kernels in backend/cpu/sort.cpp).
// NaNs order after every number.
#pragma once

#include "tessera/primitive.h"

namespace tessera {

class Sort : public UnaryPrimitive {
 public:
  Sort(Stream s, int axis) : UnaryPrimitive(s), axis_(axis) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Sort"; }
  TESSERA_STATE(axis_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  int axis_;
};

// Stable: ties keep their input order.
class ArgSort : public UnaryPrimitive {
 public:
  ArgSort(Stream s, int axis) : UnaryPrimitive(s), axis_(axis) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_VMAP
  const char* name() const override { return "ArgSort"; }
  TESSERA_STATE(axis_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  int axis_;
};

class Partition : public UnaryPrimitive {
 public:
  Partition(Stream s, int kth, int axis) : UnaryPrimitive(s), kth_(kth), axis_(axis) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Partition"; }
  TESSERA_STATE(kth_, axis_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  int kth_;
  int axis_;
};

class ArgPartition : public UnaryPrimitive {
 public:
  ArgPartition(Stream s, int kth, int axis) : UnaryPrimitive(s), kth_(kth), axis_(axis) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_VMAP
  const char* name() const override { return "ArgPartition"; }
  TESSERA_STATE(kth_, axis_)
  bool is_equivalent(const Primitive& other) const override;

 private:
  int kth_;
  int axis_;
};

// For each value, the index in the sorted 1-D sequence (input 0) where it would be inserted to
// keep the order: before equal elements (left) or after them (right). NaNs sort last.
class SearchSorted : public UnaryPrimitive {
 public:
  SearchSorted(Stream s, bool right) : UnaryPrimitive(s), right_(right) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_DECLARE_VJP
  TESSERA_DECLARE_VMAP
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override {
    return {inputs[1].shape()};
  }
  const char* name() const override { return "SearchSorted"; }
  TESSERA_STATE(right_)
  bool is_equivalent(const Primitive& other) const override {
    auto* o = dynamic_cast<const SearchSorted*>(&other);
    return o && o->right_ == right_;
  }

 private:
  bool right_;
};

}  // namespace tessera
