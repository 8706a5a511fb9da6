// compile (tessera/compile.h): the cache of traced graphs per function and input signature,
// tracing, and replay. See graph.h for the passes.
#include "tessera/compile.h"

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "backend/compile_hooks.h"
#include "tessera/primitives/compiled.h"
#include "compile/graph.h"
#include "core/trace.h"
#include "core/transforms_impl.h"
#include "tessera/config.h"
#include "tessera/stream.h"

namespace tessera {

namespace compile_detail {

std::vector<array> replay(const Graph& g, const std::vector<array>& inputs, bool shapeless,
                          const std::vector<Shape>* shapes, std::vector<Shape>* shapes_out) {
  std::vector<std::optional<array>> values(g.shapes.size());
  for (int i = 0; i < g.num_inputs; ++i) values[i] = inputs[i];
  for (auto& [v, a] : g.constants) values[v] = a;
  std::vector<array> args;
  for (auto& n : g.nodes) {
    args.clear();
    for (int v : n.inputs) args.push_back(*values[v]);
    std::vector<Shape> out_shapes;
    std::shared_ptr<Primitive> prim = n.primitive;
    if (shapes) {
      for (int v : n.outputs) out_shapes.push_back((*shapes)[v]);
      if (!n.shape_inputs.empty()) {
        std::vector<Shape> read;
        for (int v : n.shape_inputs) read.push_back((*shapes)[v]);
        prim = n.primitive->bind_input_shapes(read);
      }
    } else if (shapeless && !n.shape_sources.empty()) {
      std::vector<Shape> sources;
      for (int v : n.shape_sources) sources.push_back(values[v]->shape());
      out_shapes = n.primitive->shapeless_output_shapes(args, sources);
    } else if (shapeless) {
      out_shapes = n.primitive->output_shapes(args);
    } else {
      for (int v : n.outputs) out_shapes.push_back(g.shapes[v]);
    }
    if (n.outputs.size() == 1) {
      values[n.outputs[0]].emplace(std::move(out_shapes[0]), g.dtypes[n.outputs[0]],
                                   std::move(prim), args);
    } else {
      std::vector<Dtype> dtypes;
      for (int v : n.outputs) dtypes.push_back(g.dtypes[v]);
      auto outs = array::make_arrays(std::move(out_shapes), dtypes, std::move(prim), args);
      for (size_t k = 0; k < outs.size(); ++k) values[n.outputs[k]] = outs[k];
    }
  }
  if (shapes_out) {
    shapes_out->assign(values.size(), Shape{});
    for (size_t v = 0; v < values.size(); ++v) {
      if (values[v]) (*shapes_out)[v] = values[v]->shape();
    }
  }
  std::vector<array> res;
  for (int v : g.outputs) res.push_back(*values[v]);
  return res;
}

}  // namespace compile_detail

namespace {

using compile_detail::Graph;
using compile_detail::replay;

constexpr int kModeUnset = -1;
std::atomic<int> g_mode{kModeUnset};
std::atomic<uint64_t> g_traces{0};

struct Entry {
  // The default stream the trace ran on: its ops run there, so another default stream (a
  // StreamContext) traces again, and the function's ops go where the caller's eager ops go.
  Stream stream{0, Device::cpu};
  // A shapeless trace and a shaped one of the same function (compile(f) and
  // compile(f, shapeless=true) share f's cache) are different graphs: a shaped one merges
  // values whose shapes are equal only for the shapes it was traced with.
  bool shapeless = false;
  // The mode it was traced under (which graphs exist): another mode traces again.
  CompileMode mode = CompileMode::enabled;
  std::vector<Dtype> dtypes;
  std::vector<Shape> shapes;  // with shapeless, only the ranks count
  std::vector<uint64_t> constants;
  Graph plain;  // simplified, unfused: replayed under the transforms
  // What evaluation replays: plain without its no-ops, fused where a kernel can be built; none
  // under no_simplify.
  std::optional<Graph> run;
  // Shapeless: the shape of every value for the inputs' shapes, found by replaying the plain
  // graph (where every shape source exists), memoised per input shapes.
  mutable std::mutex shapes_mutex;
  mutable std::map<std::vector<Shape>, std::vector<Shape>> shape_tables;
};

constexpr size_t kMaxShapeTables = 64;

// Never destroyed: compiled functions held by other static objects erase their entries when
// they go, possibly after this file's statics would have been.
std::mutex& g_cache_mutex = *new std::mutex;
auto& g_cache = *new std::unordered_map<std::uintptr_t, std::vector<std::shared_ptr<const Entry>>>;

bool matches(const Entry& e, const std::vector<array>& inputs, bool shapeless,
             const std::vector<uint64_t>& constants, const Stream& stream, CompileMode mode) {
  if (e.dtypes.size() != inputs.size() || e.constants != constants || !(e.stream == stream) ||
      e.shapeless != shapeless || e.mode != mode) {
    return false;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (e.dtypes[i] != inputs[i].dtype()) return false;
    if (shapeless ? e.shapes[i].size() != inputs[i].ndim() : e.shapes[i] != inputs[i].shape()) {
      return false;
    }
  }
  return true;
}

std::shared_ptr<const Entry> trace(const CompileFn& fun, const std::vector<array>& inputs,
                                   std::vector<uint64_t> constants, CompileMode mode,
                                   bool shapeless) {
  ++g_traces;
  trace::instant("compile", "compile: trace (cache miss)",
                 "\"inputs\":" + std::to_string(inputs.size()));
  auto e = std::make_shared<Entry>();
  e->constants = std::move(constants);
  std::vector<array> stand_ins;
  const Stream s = to_stream({});
  e->stream = s;
  e->shapeless = shapeless;
  for (size_t i = 0; i < inputs.size(); ++i) {
    e->dtypes.push_back(inputs[i].dtype());
    e->shapes.push_back(inputs[i].shape());
    stand_ins.emplace_back(inputs[i].shape(), inputs[i].dtype(),
                           std::make_shared<CompileInput>(s, static_cast<int>(i)),
                           std::vector<array>{});
  }
  std::vector<array> outputs;
  {
    detail::InCompileTrace tracing(shapeless);
    outputs = fun(stand_ins);
  }
  e->mode = mode;
  e->plain = compile_detail::build_graph(stand_ins, outputs);
  if (mode != CompileMode::no_simplify) {
    compile_detail::simplify(e->plain, shapeless);
    e->run = e->plain;
    compile_detail::drop_noops(*e->run);
    if (mode == CompileMode::enabled && backend::can_fuse(e->stream.device)) {
      compile_detail::fuse(*e->run);
    }
  }
  return e;
}

// The run graph on `inputs` with shapeless shapes: fusing and dropping no-ops hide values that
// the broadcasts' shape sources name, so every value's shape comes from the plain graph.
std::vector<array> replay_run_shapeless(const Entry& e, const std::vector<array>& inputs) {
  std::vector<Shape> key;
  for (auto& a : inputs) key.push_back(a.shape());
  std::vector<Shape> table;
  {
    std::lock_guard<std::mutex> lock(e.shapes_mutex);
    if (auto it = e.shape_tables.find(key); it != e.shape_tables.end()) table = it->second;
  }
  if (table.empty()) {
    replay(e.plain, inputs, true, nullptr, &table);
    std::lock_guard<std::mutex> lock(e.shapes_mutex);
    if (e.shape_tables.size() >= kMaxShapeTables) e.shape_tables.clear();
    e.shape_tables.emplace(std::move(key), table);
  }
  return replay(*e.run, inputs, true, &table);
}

// The transforms trace through the original primitives: replay the unfused graph when an input
// or a captured constant is being traced by grad, vjp, jvp or vmap.
bool under_transform(const Graph& g, const std::vector<array>& inputs) {
  for (auto& a : inputs) {
    if (a.is_tracer()) return true;
  }
  for (auto& [v, a] : g.constants) {
    if (a.is_tracer()) return true;
  }
  return false;
}

std::vector<array> call(const CompileFn& fun, std::uintptr_t id, bool shapeless,
                        const std::vector<uint64_t>& constants, const std::vector<array>& inputs) {
  const CompileMode mode = compile_mode();
  // Inside another compiled function's trace, the outer graph takes this one's ops (and fuses
  // them with its own): replaying this graph there would hide its shape sources from the outer one.
  if (mode == CompileMode::disabled || detail::in_compile_trace()) return fun(inputs);
  std::shared_ptr<const Entry> entry;
  const Stream stream = to_stream({});
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    for (auto& e : g_cache[id]) {
      if (matches(*e, inputs, shapeless, constants, stream, mode)) {
        entry = e;
        break;
      }
    }
  }
  if (!entry) {
    // Traced without the lock: the function may call other compiled functions.
    entry = trace(fun, inputs, constants, mode, shapeless);
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    g_cache[id].push_back(entry);
  }
  if (!entry->run || under_transform(entry->plain, inputs)) {
    return replay(entry->plain, inputs, shapeless);
  }
  if (shapeless) return replay_run_shapeless(*entry, inputs);
  return replay(*entry->run, inputs, false);
}

}  // namespace

CompileMode compile_mode() {
  int m = g_mode.load(std::memory_order_relaxed);
  if (m == kModeUnset) {
    m = static_cast<int>(config::get_bool("TESSERA_DISABLE_COMPILE") ? CompileMode::disabled
                                                                      : CompileMode::enabled);
    int expected = kModeUnset;
    if (!g_mode.compare_exchange_strong(expected, m)) m = expected;
  }
  return static_cast<CompileMode>(m);
}

void set_compile_mode(CompileMode mode) { g_mode.store(static_cast<int>(mode)); }
void disable_compile() { set_compile_mode(CompileMode::disabled); }
void enable_compile() { set_compile_mode(CompileMode::enabled); }

namespace {
// As MLX: compiling nothing is an error, unless compile is disabled (then compile(f) is f).
void check_target(bool empty) {
  if (empty && compile_mode() != CompileMode::disabled) {
    throw std::invalid_argument("[compile] the function to compile is empty (a null function "
                                "pointer or an empty std::function)");
  }
}
}  // namespace

CompileFn compile(CompileFn fun, bool shapeless) {
  check_target(!fun);
  // Ids of std::function objects start above any address a function pointer or Python object
  // could have; the cache entry goes with the last copy of the returned function.
  static std::atomic<std::uintptr_t> next{std::uintptr_t{1} << 62};
  const std::uintptr_t id = next++;
  std::shared_ptr<void> erase(nullptr, [id](void*) { detail::compile_erase(id); });
  return [fun = std::move(fun), id, shapeless, erase](const std::vector<array>& inputs) {
    return call(fun, id, shapeless, {}, inputs);
  };
}

CompileFn compile(std::vector<array> (*fun)(const std::vector<array>&), bool shapeless) {
  check_target(fun == nullptr);
  return detail::compile(fun, reinterpret_cast<std::uintptr_t>(fun), shapeless);
}

namespace detail {

CompileFn compile(CompileFn fun, std::uintptr_t fun_id, bool shapeless,
                  std::vector<uint64_t> constants) {
  return [fun = std::move(fun), fun_id, shapeless,
          constants = std::move(constants)](const std::vector<array>& inputs) {
    return call(fun, fun_id, shapeless, constants, inputs);
  };
}

void compile_erase(std::uintptr_t fun_id) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  g_cache.erase(fun_id);
}

void compile_clear_cache() {
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    g_cache.clear();
  }
  backend::forget_kernels();
}

CompileStats compile_stats() {
  const backend::KernelCounters k = backend::kernel_counters();
  return CompileStats{g_traces.load(), k.builds, k.disk_hits};
}

}  // namespace detail

}  // namespace tessera
