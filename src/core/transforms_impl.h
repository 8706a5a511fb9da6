// Engine-private state shared by the transforms: whether a function is being traced (vjp/jvp/
// vmap), so arrays built meanwhile are marked as tracers and not detached on eval; and whether
// compile is tracing one.
#pragma once

#include <initializer_list>
#include <utility>
#include <vector>

#include "tessera/array.h"

namespace tessera::detail {

bool in_tracing();

// RAII: marks the current thread as tracing while alive.
struct InTracing {
  InTracing();
  ~InTracing();
  InTracing(const InTracing&) = delete;
  InTracing& operator=(const InTracing&) = delete;
};

// Whether compile is tracing a function on this thread. Values the ops would compute from
// shapes (mean's divisor) become graph nodes then, so a shapeless replay recomputes them.
bool in_compile_trace();

// Whether that trace may be replayed with other shapes (compile(shapeless=True), export): ops
// then keep shape-following nodes instead of fixed shapes.
bool in_shapeless_compile_trace();

// RAII: marks the current thread as tracing for compile while alive (`shapeless`: the trace may be
// replayed with other shapes; a nested trace keeps an outer shapeless one shapeless).
struct InCompileTrace {
  explicit InCompileTrace(bool shapeless = true);
  ~InCompileTrace();
  InCompileTrace(const InCompileTrace&) = delete;
  InCompileTrace& operator=(const InCompileTrace&) = delete;

 private:
  bool prev_shapeless_;
};

// `arrays`, copied, while compile traces; nothing otherwise. What a primitive keeps as its
// shape sources (Primitive::shape_sources), so eager ops pay nothing for them.
std::vector<array> shape_sources_while_compiling(std::initializer_list<const array*> arrays);

// While vmap runs the rule of a primitive that has shape sources (only while compile traces):
// those sources as vmap batched them, each with its batch axis (-1: not batched), so that the
// rule can keep following them (a shapeless replay). Null otherwise.
using VmappedSources = std::vector<std::pair<array, int>>;
const VmappedSources* vmapped_shape_sources();
// RAII: `sources` are what vmapped_shape_sources() returns while alive.
struct VmappedSourcesScope {
  explicit VmappedSourcesScope(const VmappedSources* sources);
  ~VmappedSourcesScope();
  VmappedSourcesScope(const VmappedSourcesScope&) = delete;
  VmappedSourcesScope& operator=(const VmappedSourcesScope&) = delete;
  const VmappedSources* prev;
};

}  // namespace tessera::detail
