// Per-thread tracing depths of vjp/jvp/vmap and of compile (core/transforms_impl.h).
#include "core/transforms_impl.h"

namespace tessera::detail {

namespace {
thread_local int tl_tracing_depth = 0;
thread_local int tl_compile_trace_depth = 0;
thread_local bool tl_shapeless_trace = false;
thread_local const VmappedSources* tl_vmapped_sources = nullptr;
}  // namespace

const VmappedSources* vmapped_shape_sources() { return tl_vmapped_sources; }
VmappedSourcesScope::VmappedSourcesScope(const VmappedSources* sources)
    : prev(tl_vmapped_sources) {
  tl_vmapped_sources = sources;
}
VmappedSourcesScope::~VmappedSourcesScope() { tl_vmapped_sources = prev; }

bool in_tracing() { return tl_tracing_depth > 0; }
InTracing::InTracing() { ++tl_tracing_depth; }
InTracing::~InTracing() { --tl_tracing_depth; }

bool in_compile_trace() { return tl_compile_trace_depth > 0; }
bool in_shapeless_compile_trace() { return tl_compile_trace_depth > 0 && tl_shapeless_trace; }
InCompileTrace::InCompileTrace(bool shapeless) : prev_shapeless_(tl_shapeless_trace) {
  ++tl_compile_trace_depth;
  tl_shapeless_trace = shapeless || prev_shapeless_;  // false outside every trace
}
InCompileTrace::~InCompileTrace() {
  --tl_compile_trace_depth;
  tl_shapeless_trace = prev_shapeless_;
}

std::vector<array> shape_sources_while_compiling(std::initializer_list<const array*> arrays) {
  std::vector<array> out;
  if (!in_compile_trace()) return out;
  for (const array* a : arrays) out.push_back(*a);
  return out;
}

}  // namespace tessera::detail
