// The collectives as lazy primitives (front ends and derivatives in primitives.cpp, kernels in
// backend/cpu/distributed.cpp). Each holds the group whose backend moves the bytes.
#pragma once

#include "distributed/group_impl.h"
#include "tessera/primitive.h"
#include "tessera/distributed.h"

namespace tessera::distributed {

class DistPrimitive : public UnaryPrimitive {
 public:
  DistPrimitive(Stream s, Group g) : UnaryPrimitive(s), group_(std::move(g)) {}
  const Group& group() const { return group_; }

 private:
  Group group_;
};

class AllReduce : public DistPrimitive {
 public:
  // mean: the sum divided by the group's size (all_mean).
  AllReduce(Stream s, Group g, detail::ReduceOp op, bool mean = false)
      : DistPrimitive(s, std::move(g)), op_(op), mean_(mean) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  std::vector<array> vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                         const std::vector<int>&, const std::vector<array>&) override;
  std::vector<array> jvp(const std::vector<array>&, const std::vector<array>& tangents,
                         const std::vector<int>&) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  const char* name() const override;

 private:
  detail::ReduceOp op_;
  bool mean_;
};

class AllGather : public DistPrimitive {
 public:
  using DistPrimitive::DistPrimitive;
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>&, const std::vector<array>&) override;
  std::vector<array> jvp(const std::vector<array>&, const std::vector<array>& tangents,
                         const std::vector<int>&) override;
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                       const std::vector<int>& axes) override;
  const char* name() const override { return "AllGather"; }
};

class ReduceScatter : public DistPrimitive {
 public:
  using DistPrimitive::DistPrimitive;
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  std::vector<array> vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                         const std::vector<int>&, const std::vector<array>&) override;
  const char* name() const override { return "Sum ReduceScatter"; }
};

class Send : public DistPrimitive {
 public:
  Send(Stream s, Group g, int dst) : DistPrimitive(s, std::move(g)), dst_(dst) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  const char* name() const override { return "Send"; }

 private:
  int dst_;
};

class Recv : public DistPrimitive {
 public:
  Recv(Stream s, Group g, int src) : DistPrimitive(s, std::move(g)), src_(src) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  const char* name() const override { return "Recv"; }

 private:
  int src_;
};

class Broadcast : public DistPrimitive {
 public:
  Broadcast(Stream s, Group g, int root) : DistPrimitive(s, std::move(g)), root_(root) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  const char* name() const override { return "Broadcast"; }

 private:
  int root_;
};

class AllToAll : public DistPrimitive {
 public:
  using DistPrimitive::DistPrimitive;
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  std::vector<array> vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                         const std::vector<int>&, const std::vector<array>&) override;
  const char* name() const override { return "AllToAll"; }
};

class Barrier : public DistPrimitive {
 public:
  using DistPrimitive::DistPrimitive;
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  const char* name() const override { return "Barrier"; }
};

}  // namespace tessera::distributed
