// The primitives compile adds to a graph: Compiled (a fused run of elementwise ops, one kernel)
// and CompileInput (what the traced function sees for an input). Front ends in
// src/compile/compiled.cpp, kernels in src/backend/cpu/compiled/.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/primitive.h"

namespace tessera {

// One op of a fused run: `primitive` (its fused_functor() is `functor`) applied to `args`,
// giving one value of `dtype`. args >= 0 name an earlier step, args < 0 the input -(arg + 1).
struct FusedStep {
  std::shared_ptr<Primitive> primitive;
  std::string functor;
  Dtype dtype;
  std::vector<int> args;
};

// Elementwise steps over inputs of one shape (the output's), run as one loop: each element of
// every output is computed from the same element of the inputs without writing the
// intermediates to memory. Outputs are the values of the steps named in `outputs`.
class Compiled : public Primitive {
 public:
  Compiled(Stream s, std::vector<Dtype> input_dtypes, std::vector<FusedStep> steps,
           std::vector<int> outputs);

  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_DECLARE_TRANSFORMS
  const char* name() const override { return "Compiled"; }
  void print(std::ostream& os) const override;
  bool is_equivalent(const Primitive& other) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;

  const std::vector<Dtype>& input_dtypes() const { return input_dtypes_; }
  const std::vector<FusedStep>& steps() const { return steps_; }
  const std::vector<int>& output_steps() const { return outputs_; }
  // The program as text: functors, dtypes and arguments of every step (equal programs compute
  // equal values; the kernel cache is keyed by it).
  const std::string& program() const { return program_; }
  std::vector<Dtype> output_dtypes() const;
  // The steps as ordinary lazy ops on `inputs` (the transforms differentiate and batch these).
  virtual std::vector<array> unfused(const std::vector<array>& inputs) const;

  // What the back end of this primitive's device keeps for its program (the CPU: the kernels
  // built per input layout, backend/cpu/compiled/compiled.cpp), made on first use. Compiled never
  // looks inside; a primitive runs on one device, so one back end's Cache type is ever asked for.
  struct KernelCache {
    virtual ~KernelCache() = default;
  };
  template <class Cache>
  Cache& kernel_cache() {
    std::call_once(kernel_cache_made_, [this] { kernel_cache_ = std::make_unique<Cache>(); });
    return static_cast<Cache&>(*kernel_cache_);
  }

 protected:
  std::vector<Dtype> input_dtypes_;
  std::vector<FusedStep> steps_;
  std::vector<int> outputs_;
  std::string program_;

 private:
  std::once_flag kernel_cache_made_;
  std::unique_ptr<KernelCache> kernel_cache_;
};

// A Compiled run whose one output is reduced (sum, max or min over `axes`, kept as size-1 dims)
// in the same loop: the elementwise values are never written to memory. `reduce` is the
// reduction's own primitive (its output shapes and derivatives, and the fallback).
class CompiledReduce : public Compiled {
 public:
  CompiledReduce(Stream s, std::vector<Dtype> input_dtypes, std::vector<FusedStep> steps,
                 int output, std::shared_ptr<Primitive> reduce, FusedReduce op,
                 std::vector<int> axes);
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  const char* name() const override { return "CompiledReduce"; }
  void print(std::ostream& os) const override;
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> unfused(const std::vector<array>& inputs) const override;
  FusedReduce op() const { return op_; }
  const std::vector<int>& axes() const { return axes_; }

 private:
  std::shared_ptr<Primitive> reduce_;
  FusedReduce op_;
  std::vector<int> axes_;
};

// Row fusion: steps over a row shape S (reductions of its trailing `axes` give the per-row
// shape S', those dims 1) in one kernel that takes one row at a time: the row's reductions in
// phases (a phase's reductions read the results of earlier ones, as softmax's sum reads its
// max), then the row's outputs, re-reading the row's inputs from cache instead of writing the
// intermediate values to memory. Each step has a kind: 'e' elementwise, 'r' reduction (its
// primitive's fused_reduction), 'b' broadcast (fused_broadcast); and a level: 'R' (shape S) or
// 'W' (shape S'). Each input a role: 'd' shape S, 'w' shape S', 's' one value.
class CompiledRows : public Compiled {
 public:
  CompiledRows(Stream s, std::vector<Dtype> input_dtypes, std::vector<FusedStep> steps,
               std::vector<int> outputs, std::string kinds, std::string levels,
               std::string roles, std::vector<int> axes);
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  const char* name() const override { return "CompiledRows"; }
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  std::vector<array> unfused(const std::vector<array>& inputs) const override;
  const std::string& kinds() const { return kinds_; }
  const std::string& levels() const { return levels_; }
  const std::string& roles() const { return roles_; }

 private:
  // S from the first 'd' input's shape, and S'.
  std::pair<Shape, Shape> row_shapes(const std::vector<array>& inputs) const;
  std::string kinds_, levels_, roles_;
  std::vector<int> axes_;
};

// The traced function's view of input `index`: shape and dtype, no value. Evaluating it (or
// anything computed from it) while the function is traced is an error naming compile.
class CompileInput : public UnaryPrimitive {
 public:
  CompileInput(Stream s, int index) : UnaryPrimitive(s), index_(index) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  const char* name() const override { return "CompileInput"; }
  int index() const { return index_; }

 private:
  int index_;
};

}  // namespace tessera
