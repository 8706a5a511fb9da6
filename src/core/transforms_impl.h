// Engine-private state shared by the transforms: whether a function is being traced (vjp/jvp/
// vmap/compile), so arrays built meanwhile are marked as tracers and not detached on eval.
#pragma once

namespace tessera::detail {

bool in_tracing();

// RAII: marks the current thread as tracing while alive.
struct InTracing {
  InTracing();
  ~InTracing();
  InTracing(const InTracing&) = delete;
  InTracing& operator=(const InTracing&) = delete;
};

}  // namespace tessera::detail
