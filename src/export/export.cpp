// export_function / import_function (tessera/export.h): compile's traced graph (compile/graph.h)
// written to a file and replayed from it.
//
// File layout (all integers little-endian, through export_state.h's codecs):
//   "TESSERA-FN\n", u32 format version, string writer's version, string metadata, bool shapeless,
//   u64 constant count, per constant: Dtype, Shape, u64 byte count, bytes (the constants of every
//   trace, each array once), u64 trace count, then per trace:
//     u64 positional count, [string] keyword names (sorted), [Shape] value shapes,
//     [Dtype] value dtypes (values [0, inputs) are the inputs: positional, then keywords),
//     u64 constant count, per constant: i32 value, u64 index into the file's constants,
//     u64 node count, per node: string primitive key, string state bytes, [i32] inputs,
//     [i32] outputs, [i32] shape sources,
//     [i32] outputs.
#include "tessera/export.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <typeindex>
#include <unordered_map>

#include "tessera/primitives/compiled.h"
#include "compile/graph.h"
#include "export/export_registry.h"
#include "core/transforms_impl.h"
#include "io/byte_io.h"
#include "io/npy.h"
#include "tessera/ops.h"
#include "tessera/stream.h"
#include "tessera/transforms.h"

namespace tessera {

namespace {

using compile_detail::Graph;
using compile_detail::GraphNode;
using export_detail::get;
using export_detail::put;
using export_detail::StateReader;
using export_detail::StateWriter;

constexpr char kMagic[] = "TESSERA-FN\n";
constexpr size_t kMagicSize = sizeof(kMagic) - 1;
constexpr uint32_t kFormatVersion = 1;
constexpr char kWriterVersion[] = "tessera " TESSERA_VERSION_STRING;

std::vector<std::string> sorted_keys(const Kwargs& kwargs) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : kwargs) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::string describe(const Shape& shape, Dtype dtype) {
  std::ostringstream os;
  os << dtype << "(";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << (shape.size() == 1 ? ",)" : ")");
  return os.str();
}

// The constants of an exporter's traces, each array once (a weight several traces capture is
// written once).
struct ConstantPool {
  std::vector<array> arrays;  // evaluated, row-contiguous
  std::vector<array> originals;  // kept alive, so that their ids stay theirs
  std::unordered_map<std::uintptr_t, uint64_t> index;

  uint64_t add(const array& a) {
    auto [it, fresh] = index.emplace(a.id(), arrays.size());
    if (fresh) {
      arrays.push_back(detail::io::prepare_for_save(a));
      originals.push_back(a);
    }
    return it->second;
  }
};

// The outputs of input-less nodes (arange, full, eye, linspace: a weight the function builds)
// become constants: those nodes run once, now, and the file holds their values. A shapeless
// replay could not ask such a primitive for its shapes, and no later input can change them.
void fold_inputless_nodes(Graph& g) {
  std::vector<GraphNode> kept;
  std::vector<array> computed;
  for (GraphNode& n : g.nodes) {
    if (!n.inputs.empty() || !n.shape_sources.empty()) {
      kept.push_back(std::move(n));
      continue;
    }
    std::vector<Shape> shapes;
    std::vector<Dtype> dtypes;
    for (int v : n.outputs) {
      shapes.push_back(g.shapes[v]);
      dtypes.push_back(g.dtypes[v]);
    }
    auto outs = array::make_arrays(std::move(shapes), dtypes, n.primitive, {});
    for (size_t k = 0; k < outs.size(); ++k) g.constants.emplace(n.outputs[k], outs[k]);
    computed.insert(computed.end(), outs.begin(), outs.end());
  }
  eval(computed);
  g.nodes = std::move(kept);
}

// One traced signature of the exported function, as bytes; its constants go to `pool`.
std::string encode_trace(const ExportFn& fun, const Args& args, const Kwargs& kwargs,
                         ConstantPool& pool) {
  const auto keys = sorted_keys(kwargs);
  std::vector<array> inputs = args;
  for (const auto& k : keys) inputs.push_back(kwargs.at(k));
  const Stream s = to_stream({});
  std::vector<array> stand_ins;
  for (size_t i = 0; i < inputs.size(); ++i) {
    stand_ins.emplace_back(inputs[i].shape(), inputs[i].dtype(),
                           std::make_shared<CompileInput>(s, static_cast<int>(i)),
                           std::vector<array>{});
  }
  Args trace_args(stand_ins.begin(), stand_ins.begin() + static_cast<long>(args.size()));
  Kwargs trace_kwargs;
  for (size_t i = 0; i < keys.size(); ++i) {
    trace_kwargs.emplace(keys[i], stand_ins[args.size() + i]);
  }
  std::vector<array> outputs;
  {
    detail::InCompileTrace tracing;
    outputs = fun(trace_args, trace_kwargs);
  }
  Graph g = compile_detail::build_graph(stand_ins, outputs);
  compile_detail::simplify(g, /*shapeless=*/true);  // as strict as a shapeless file needs
  fold_inputless_nodes(g);

  StateWriter w;
  put<uint64_t>(w, args.size());
  put(w, keys);
  put(w, g.shapes);
  put(w, g.dtypes);
  std::map<int, array> constants(g.constants.begin(), g.constants.end());  // a fixed order
  put<uint64_t>(w, constants.size());
  for (auto& [v, a] : constants) {
    put<int32_t>(w, v);
    put<uint64_t>(w, pool.add(a));
  }
  const auto& registry = export_detail::registry();
  put<uint64_t>(w, g.nodes.size());
  for (const GraphNode& n : g.nodes) {
    const Primitive& p = *n.primitive;
    auto key = registry.keys.find(std::type_index(typeid(p)));
    StateWriter state;
    if (key == registry.keys.end() || !p.write_state(state)) {
      throw std::invalid_argument(
          std::string("[export_function] the function uses ") + p.name() +
          ", which cannot be exported (it holds a function, a group or a compiled kernel); "
          "export the function without it, or call it outside the exported function");
    }
    put(w, key->second);
    put(w, state.bytes());
    put(w, n.inputs);
    put(w, n.outputs);
    put(w, n.shape_sources);
  }
  put(w, g.outputs);
  return w.bytes();
}

void check_value(int v, size_t count, const StateReader& r) {
  if (v < 0 || static_cast<size_t>(v) >= count) {
    throw std::invalid_argument(r.where() + ": a node names value " + std::to_string(v) +
                                " of " + std::to_string(count) + " (corrupt file)");
  }
}

}  // namespace

// ---- export ----

struct FunctionExporter::Impl {
  std::string file;
  ExportFn fun;
  bool shapeless;
  std::string metadata;
  std::vector<std::string> traces;
  ConstantPool constants;
  bool closed = false;

  // The whole file again (a trace adds constants to the table before the traces); the
  // constants' bytes go straight from the arrays to the file.
  void write() const {
    detail::io::FileWriter f(file, "[export_function]");
    auto flush = [&f](const StateWriter& w) { f.write(w.bytes().data(), w.bytes().size()); };
    StateWriter head;
    head.raw(kMagic, kMagicSize);
    put(head, kFormatVersion);
    put(head, std::string(kWriterVersion));
    put(head, metadata);
    put(head, shapeless);
    put<uint64_t>(head, constants.arrays.size());
    flush(head);
    for (const array& c : constants.arrays) {
      StateWriter w;
      put(w, c.dtype());
      put(w, c.shape());
      put<uint64_t>(w, c.nbytes());
      flush(w);
      if (c.nbytes() > 0) f.write(c.data<char>(), c.nbytes());
    }
    StateWriter tail;
    put<uint64_t>(tail, traces.size());
    for (const auto& t : traces) tail.raw(t.data(), t.size());
    flush(tail);
    f.close();
  }
};

FunctionExporter::FunctionExporter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FunctionExporter::~FunctionExporter() = default;
FunctionExporter::FunctionExporter(FunctionExporter&&) noexcept = default;
FunctionExporter& FunctionExporter::operator=(FunctionExporter&&) noexcept = default;

void FunctionExporter::operator()(const Args& args, const Kwargs& kwargs) {
  if (!impl_ || impl_->closed) {
    throw std::runtime_error("[export_function] this exporter of " +
                             (impl_ ? impl_->file : std::string("?")) +
                             " is closed; make a new one with exporter()");
  }
  impl_->traces.push_back(encode_trace(impl_->fun, args, kwargs, impl_->constants));
  impl_->write();
}

void FunctionExporter::close() {
  if (impl_) impl_->closed = true;
}

FunctionExporter exporter(const std::string& file, ExportFn fun, bool shapeless,
                          const std::string& metadata) {
  auto impl = std::make_unique<FunctionExporter::Impl>();
  impl->file = file;
  impl->fun = std::move(fun);
  impl->shapeless = shapeless;
  impl->metadata = metadata;
  impl->write();  // the file exists (with no trace) from here on, as MLX's
  return FunctionExporter(std::move(impl));
}

FunctionExporter exporter(const std::string& file,
                          const std::function<std::vector<array>(const Args&)>& fun,
                          bool shapeless, const std::string& metadata) {
  return exporter(
      file,
      [fun](const Args& args, const Kwargs& kwargs) {
        if (!kwargs.empty()) {
          throw std::invalid_argument(
              "[export_function] keyword inputs given to a function of positional arrays only");
        }
        return fun(args);
      },
      shapeless, metadata);
}

void export_function(const std::string& file, ExportFn fun, const Args& args,
                     const Kwargs& kwargs, bool shapeless, const std::string& metadata) {
  auto e = exporter(file, std::move(fun), shapeless, metadata);
  e(args, kwargs);
  e.close();
}

void export_function(const std::string& file,
                     const std::function<std::vector<array>(const Args&)>& fun, const Args& args,
                     bool shapeless, const std::string& metadata) {
  auto e = exporter(file, fun, shapeless, metadata);
  e(args);
  e.close();
}

void export_function(const std::string& file,
                     const std::function<std::vector<array>(const Kwargs&)>& fun,
                     const Kwargs& kwargs, bool shapeless, const std::string& metadata) {
  export_function(
      file,
      [fun](const Args& args, const Kwargs& kw) {
        if (!args.empty()) {
          throw std::invalid_argument(
              "[export_function] positional inputs given to a function of keyword arrays only");
        }
        return fun(kw);
      },
      Args{}, kwargs, shapeless, metadata);
}

// ---- import ----

namespace {

struct StoredNode {
  std::string key;
  std::string state;
  std::vector<int> inputs, outputs, shape_sources;
};

struct Trace {
  size_t num_args = 0;
  std::vector<std::string> keys;
  Graph graph;  // nodes without primitives: built per stream
  std::vector<StoredNode> nodes;
  // The graph with primitives, per stream it was called on (streams belong to threads).
  mutable std::mutex mutex;
  mutable std::map<Stream, std::shared_ptr<const Graph>> built;

  std::string signature() const {
    std::string s = "(";
    for (int i = 0; i < graph.num_inputs; ++i) {
      if (i) s += ", ";
      if (static_cast<size_t>(i) >= num_args) s += keys[i - num_args] + "=";
      s += describe(graph.shapes[i], graph.dtypes[i]);
    }
    return s + ")";
  }

  std::shared_ptr<const Graph> for_stream(const Stream& s, const std::string& where) const {
    std::lock_guard<std::mutex> lock(mutex);
    auto& g = built[s];
    if (g) return g;
    auto full = std::make_shared<Graph>(graph);
    const auto& readers = export_detail::registry().readers;
    for (const StoredNode& n : nodes) {
      StateReader r(n.state, where + ": " + n.key);
      auto p = readers.at(n.key)(r, s);
      if (!r.done()) {
        throw std::invalid_argument(where + ": the parameters of " + n.key +
                                    " are longer than it reads (corrupt file)");
      }
      full->nodes.push_back(GraphNode{p, n.inputs, n.outputs, n.shape_sources});
    }
    g = full;
    return g;
  }
};

array decode_constant(StateReader& r) {
  Dtype dtype = get<Dtype>(r);
  Shape shape = get<Shape>(r);
  auto nbytes = get<uint64_t>(r);
  uint64_t expect = dtype.size();
  for (int d : shape) {
    if (d < 0) throw std::invalid_argument(r.where() + ": a negative dimension (corrupt file)");
    const uint64_t cap = uint64_t{1} << 62;  // past any file: the check below fails
    expect = d != 0 && expect > cap / static_cast<uint64_t>(d) ? cap : expect * d;
  }
  if (nbytes != expect) {
    throw std::invalid_argument(r.where() + ": a constant of " + describe(shape, dtype) +
                                " holds " + std::to_string(nbytes) + " bytes (corrupt file)");
  }
  r.need(nbytes);
  auto buf = allocator::malloc(nbytes);
  try {
    r.raw(buf.raw_ptr(), nbytes);
  } catch (...) {
    allocator::free(buf);
    throw;
  }
  return array(buf, std::move(shape), dtype, allocator::free);
}

std::unique_ptr<Trace> decode_trace(StateReader& r, const std::vector<array>& pool) {
  auto t = std::make_unique<Trace>();
  t->num_args = get<uint64_t>(r);
  t->keys = get<std::vector<std::string>>(r);
  Graph& g = t->graph;
  g.shapes = get<std::vector<Shape>>(r);
  g.dtypes = get<std::vector<Dtype>>(r);
  const size_t values = g.shapes.size();
  if (g.dtypes.size() != values || t->num_args + t->keys.size() > values) {
    throw std::invalid_argument(r.where() + ": inconsistent value tables (corrupt file)");
  }
  g.num_inputs = static_cast<int>(t->num_args + t->keys.size());
  auto n_constants = get<uint64_t>(r);
  for (uint64_t i = 0; i < n_constants; ++i) {
    int v = get<int32_t>(r);
    check_value(v, values, r);
    auto k = get<uint64_t>(r);
    if (k >= pool.size()) {
      throw std::invalid_argument(r.where() + ": constant " + std::to_string(k) + " of " +
                                  std::to_string(pool.size()) + " (corrupt file)");
    }
    if (pool[k].shape() != g.shapes[v] || pool[k].dtype() != g.dtypes[v]) {
      throw std::invalid_argument(r.where() + ": a constant of " +
                                  describe(pool[k].shape(), pool[k].dtype()) + " stands for " +
                                  describe(g.shapes[v], g.dtypes[v]) + " (corrupt file)");
    }
    g.constants.emplace(v, pool[k]);
  }
  const auto& readers = export_detail::registry().readers;
  auto n_nodes = get<uint64_t>(r);
  for (uint64_t i = 0; i < n_nodes; ++i) {
    StoredNode n;
    n.key = get<std::string>(r);
    if (!readers.count(n.key)) {
      throw std::invalid_argument(r.where() + ": unknown primitive '" + n.key +
                                  "' (written by another version of Tessera?)");
    }
    n.state = get<std::string>(r);
    n.inputs = get<std::vector<int>>(r);
    n.outputs = get<std::vector<int>>(r);
    n.shape_sources = get<std::vector<int>>(r);
    for (auto* list : {&n.inputs, &n.outputs, &n.shape_sources}) {
      for (int v : *list) check_value(v, values, r);
    }
    if (n.outputs.empty()) throw std::invalid_argument(r.where() + ": a node without outputs");
    t->nodes.push_back(std::move(n));
  }
  g.outputs = get<std::vector<int>>(r);
  for (int v : g.outputs) check_value(v, values, r);
  return t;
}

// The MLX release that wrote `bytes`, if they start as MLX's files do (a u64 length, then the
// version string); empty otherwise.
std::string mlx_version(const std::string& bytes) {
  uint64_t n = 0;
  if (bytes.size() < 8) return "";
  std::memcpy(&n, bytes.data(), 8);
  if (n == 0 || n > 32 || bytes.size() < 8 + n) return "";
  std::string v = bytes.substr(8, n);
  for (char c : v) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.') return "";
  }
  return v;
}

}  // namespace

struct ImportedFunction::Impl {
  std::string file;
  std::string metadata;
  bool shapeless = false;
  std::vector<std::unique_ptr<Trace>> traces;
};

ImportedFunction import_function(const std::string& file) {
  const std::string where = "[import_function] " + file;
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::invalid_argument(where + ": cannot open the file");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.compare(0, kMagicSize, kMagic) != 0) {
    std::string mlx = mlx_version(bytes);
    throw std::invalid_argument(
        where + (mlx.empty() ? ": not a function file Tessera wrote (export_function)"
                             : ": written by MLX " + mlx) +
        ". Tessera reads only the files its own export_function writes, not MLX's .mlxfn "
        "format: export the function again with Tessera");
  }
  StateReader r(std::string_view(bytes).substr(kMagicSize), where);
  auto version = get<uint32_t>(r);
  if (version != kFormatVersion) {
    throw std::invalid_argument(where + ": format version " + std::to_string(version) +
                                ", this Tessera reads version " + std::to_string(kFormatVersion));
  }
  auto impl = std::make_shared<ImportedFunction::Impl>();
  impl->file = file;
  get<std::string>(r);  // the writer's version, for people reading the file
  impl->metadata = get<std::string>(r);
  impl->shapeless = get<bool>(r);
  std::vector<array> pool;
  auto n = get<uint64_t>(r);
  for (uint64_t i = 0; i < n; ++i) pool.push_back(decode_constant(r));
  n = get<uint64_t>(r);
  for (uint64_t i = 0; i < n; ++i) impl->traces.push_back(decode_trace(r, pool));
  if (!r.done()) throw std::invalid_argument(where + ": bytes after the last trace (corrupt file)");
  return ImportedFunction(std::move(impl));
}

const std::string& ImportedFunction::metadata() const { return impl_->metadata; }

std::vector<array> ImportedFunction::operator()(const Args& args, const Kwargs& kwargs) const {
  const auto keys = sorted_keys(kwargs);
  std::vector<array> inputs = args;
  for (const auto& k : keys) inputs.push_back(kwargs.at(k));
  const Trace* match = nullptr;
  for (const auto& t : impl_->traces) {
    if (t->num_args != args.size() || t->keys != keys) continue;
    bool ok = true;
    for (size_t i = 0; ok && i < inputs.size(); ++i) {
      ok = inputs[i].dtype() == t->graph.dtypes[i] &&
           (impl_->shapeless ? inputs[i].ndim() == t->graph.shapes[i].size()
                             : inputs[i].shape() == t->graph.shapes[i]);
    }
    if (ok) {
      match = t.get();
      break;
    }
  }
  if (!match) {
    std::string given = "(";
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (i) given += ", ";
      if (i >= args.size()) given += keys[i - args.size()] + "=";
      given += describe(inputs[i].shape(), inputs[i].dtype());
    }
    std::string have;
    for (const auto& t : impl_->traces) have += "\n  " + t->signature();
    throw std::invalid_argument(
        "[import_function] " + impl_->file + ": no trace takes " + given + ")" +
        (impl_->shapeless ? " (shapeless: ranks and dtypes must match)" : "") +
        "; the file has:" + (have.empty() ? std::string(" no trace") : have));
  }
  auto g = match->for_stream(to_stream({}), "[import_function] " + impl_->file);
  return compile_detail::replay(*g, inputs, impl_->shapeless);
}

namespace detail {

std::vector<std::string> exportable_primitives() {
  std::vector<std::string> keys;
  for (const auto& [key, reader] : export_detail::registry().readers) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::vector<std::string> exported_primitives(const std::string& file) {
  auto f = import_function(file);
  std::vector<std::string> keys;
  for (const auto& t : f.impl_->traces) {
    for (const auto& n : t->nodes) keys.push_back(n.key);
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

}  // namespace detail

}  // namespace tessera
