// Graph compilation (docs/compile.md): compile(fun) traces `fun` once per input signature,
// simplifies the traced graph (common subexpressions, equal constants), fuses runs of elementwise
// ops into one kernel built by the system C++ compiler and cached on disk, and replays the graph
// on every later call. MLX's C++ API.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tessera/array.h"

namespace tessera {

// disabled: compile(fun) calls fun. no_simplify: trace and replay only. no_fuse: also simplify.
// enabled: also fuse (the default).
enum class CompileMode { disabled, no_simplify, no_fuse, enabled };

using CompileFn = std::function<std::vector<array>(const std::vector<array>&)>;

// A function computing the same values as `fun`, traced once per signature of its inputs (dtypes
// and shapes; with `shapeless`, dtypes and ranks only, the graph replayed with the new shapes).
// `fun` must be a function of its inputs: arrays it captures are constants of the traced graph,
// and side effects happen once, while tracing.
CompileFn compile(CompileFn fun, bool shapeless = false);
// A plain function is identified by its address: compiling it twice shares one cache.
CompileFn compile(std::vector<array> (*fun)(const std::vector<array>&), bool shapeless = false);
template <typename F, typename = std::enable_if_t<
                          std::is_convertible_v<F, decltype(+std::declval<F>())>>>
CompileFn compile(F&& f, bool shapeless = false) {
  return compile(+f, shapeless);
}

// Turn compilation off / on for the whole process; enable_compile() overrides
// TESSERA_DISABLE_COMPILE.
void disable_compile();
void enable_compile();
void set_compile_mode(CompileMode mode);
CompileMode compile_mode();

namespace detail {
// The compiled function for `fun` identified by `fun_id`; `constants` (the values of non-array
// arguments, from Python) join the signature. The Python binding uses this.
CompileFn compile(CompileFn fun, std::uintptr_t fun_id, bool shapeless = false,
                  std::vector<uint64_t> constants = {});
// Drops the traced graphs of `fun_id` (its function is gone).
void compile_erase(std::uintptr_t fun_id);
// Drops every traced graph and the in-memory kernel table (the disk cache stays).
void compile_clear_cache();

// Counters for tests and benchmarks.
struct CompileStats {
  uint64_t traces = 0;         // calls that traced the function
  uint64_t kernel_builds = 0;  // kernels built by the compiler (disk cache misses)
  uint64_t disk_hits = 0;      // kernels loaded from the disk cache
};
CompileStats compile_stats();
}  // namespace detail

}  // namespace tessera
