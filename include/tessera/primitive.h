// The Primitive base class: one node type of the lazy graph, and the only thing the core (eval,
// transforms, compile) knows of an op. Public, so that a program or an extension can add its own
// operation as MLX's extension guide describes (examples/extension): a front end that returns
// array(shape, dtype, std::make_shared<MyPrimitive>(to_stream(s), ...), inputs), and a subclass
// that computes the outputs (eval_cpu) and, optionally, tells grad / jvp / vmap / compile how to
// go through it. Tessera's own primitives follow the same pattern: their front ends (shape/dtype
// rules, vjp/jvp/vmap) live in src/ops/<family>.cpp, their CPU kernels in
// src/backend/cpu/<family>.cpp; tessera/primitives.h declares the ones programs name.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tessera/export_state.h"
#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {

class Primitive {
 public:
  explicit Primitive(Stream stream) : stream_(stream) {}
  virtual ~Primitive() = default;
  Primitive(const Primitive&) = delete;
  Primitive& operator=(const Primitive&) = delete;

  const Stream& stream() const { return stream_; }
  const Device& device() const { return stream_.device; }

  // Compute `outputs` (already shaped and typed, without data) from evaluated `inputs`.
  virtual void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) = 0;
  // The same on a GPU stream. No backend provides one in this build: the default throws
  // std::runtime_error naming the primitive.
  virtual void eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs);

  // Cotangents of the inputs named in argnums, given cotangents of every output.
  virtual std::vector<array> vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums,
                                 const std::vector<array>& outputs);
  // Tangents of every output, given tangents of the inputs named in argnums.
  virtual std::vector<array> jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>& argnums);
  // Batched outputs and the axis each output is batched along (-1 for none), given inputs and
  // the axis each input is batched along (-1 for none).
  virtual std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                               const std::vector<int>& axes);

  virtual const char* name() const = 0;
  virtual void print(std::ostream& os) const { os << name(); }
  // Same kind and same parameters (compile merges equivalent nodes).
  virtual bool is_equivalent(const Primitive& other) const { return false; }
  // Output shapes for new input shapes (shapeless compile); throws when not supported.
  virtual std::vector<Shape> output_shapes(const std::vector<array>& inputs);
  // Arrays, other than the inputs, whose shapes the output shape follows, recorded while compile
  // traces: a broadcast an elementwise op inserts follows the other operands, a sum's gradient
  // the summed input. compile's graph takes them as values (clear_shape_sources then drops
  // them), and a shapeless replay recomputes the output shapes from their new shapes with
  // shapeless_output_shapes.
  virtual std::vector<array> shape_sources() const { return {}; }
  virtual void clear_shape_sources() {}
  virtual std::vector<Shape> shapeless_output_shapes(const std::vector<array>& inputs,
                                                     const std::vector<Shape>& source_shapes) {
    return output_shapes(inputs);
  }

  // Fusion table entry (compile reads this and nothing else): the functor that computes one
  // output element of this primitive from one element of each input, as a C++ expression naming
  // it bare ("AddOp{}"; each device's code generator has its own, the CPU's in
  // backend/cpu/*_ops.h); nullptr for a primitive
  // that compile must not fuse (the default). Only one-output primitives whose inputs and
  // output have one shape may name one.
  virtual const char* fused_functor() const { return nullptr; }
  // Fusion table entry for reductions: a primitive that reduces `axes` of its one input with
  // sum, max or min (output keeping them as size-1 dims), into whose loop compile may fuse the
  // elementwise ops that produce the input. Empty axes: not fusable (the default).
  enum class FusedReduce { none, sum, max, min };
  virtual FusedReduce fused_reduction(std::vector<int>* axes) const { return FusedReduce::none; }
  // Fusion table entry for broadcasts: true for a primitive whose output is its one input
  // broadcast to the output shape, values unchanged (a row-fused kernel reads the input's
  // element for the row instead).
  virtual bool fused_broadcast() const { return false; }
  // Simplification table entry: whether this primitive, applied to the output of `previous`,
  // gives back `previous`'s one input unchanged for every shape (an expand_dims of the axes a
  // squeeze removed: a reduction without keepdims indexed back with [:, None]). compile then
  // reads that input instead, so row fusion sees the reduction's kept dims.
  virtual bool undoes(const Primitive& previous) const { return false; }
  // For a primitive that reads only its inputs' shapes, never their data (mean's divisor): the
  // same computation as an input-less primitive for inputs of `shapes`. compile's fusion binds
  // such nodes, so reading a shape never keeps a fused value in memory. nullptr (the default):
  // the primitive reads data.
  virtual std::shared_ptr<Primitive> bind_input_shapes(const std::vector<Shape>& shapes) const {
    return nullptr;
  }
  // Export (tessera/export.h): writes the parameters the constructor takes after the stream and
  // returns true; false (the default) for a primitive that cannot be exported (one that holds a
  // function or a group). Defined by TESSERA_STATE.
  virtual bool write_state(export_detail::StateWriter& w) const { return false; }

 private:
  Stream stream_;
};

// A primitive with exactly one output (most of them).
class UnaryPrimitive : public Primitive {
 public:
  using Primitive::Primitive;
  virtual void eval_cpu(const std::vector<array>& inputs, array& out) = 0;
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) final {
    eval_cpu(inputs, outputs[0]);
  }
  // As Primitive::eval_gpu (the default throws): code written for MLX overrides this one.
  virtual void eval_gpu(const std::vector<array>& inputs, array& out);
  void eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) final {
    eval_gpu(inputs, outputs[0]);
  }
};

// Declarations of the derivative and batching overrides inside a primitive's class body; the
// definitions go in src/ops/<family>.cpp.
#define TESSERA_DECLARE_VJP                                                                     \
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents, \
                         const std::vector<int>& argnums, const std::vector<array>& outputs)    \
      override;
#define TESSERA_DECLARE_JVP                                                                   \
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents, \
                         const std::vector<int>& argnums) override;
#define TESSERA_DECLARE_VMAP                                                            \
  std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs, \
                                                       const std::vector<int>& axes) override;
// vjp, jvp and vmap together.
#define TESSERA_DECLARE_TRANSFORMS TESSERA_DECLARE_VJP TESSERA_DECLARE_JVP TESSERA_DECLARE_VMAP

// In a primitive's class body: its parameters, the fields its constructor takes after the
// stream in the constructor's order (nothing for a parameterless one). Defines state(), a tuple
// of them, and write_state; src/core/export_registry.cpp lists the class so import can rebuild
// it (export_state.h).
#define TESSERA_STATE(...)                                                   \
  auto state() const { return std::make_tuple(__VA_ARGS__); }                \
  bool write_state(export_detail::StateWriter& w) const override {          \
    export_detail::put(w, state());                                          \
    return true;                                                             \
  }

// Declares name(), a parameterless is_equivalent and an empty state for simple primitives.
#define TESSERA_PRIMITIVE_NAME(NAME)                                \
  const char* name() const override { return #NAME; }              \
  bool is_equivalent(const Primitive& other) const override {       \
    return dynamic_cast<const NAME*>(&other) != nullptr;            \
  }                                                                 \
  TESSERA_STATE()

}  // namespace tessera
