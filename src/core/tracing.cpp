// Per-thread tracing depth used by vjp/jvp/vmap/compile (core/transforms_impl.h).
#include "core/transforms_impl.h"

namespace tessera::detail {

namespace {
thread_local int tl_tracing_depth = 0;
}

bool in_tracing() { return tl_tracing_depth > 0; }
InTracing::InTracing() { ++tl_tracing_depth; }
InTracing::~InTracing() { --tl_tracing_depth; }

}  // namespace tessera::detail
