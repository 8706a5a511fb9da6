// Simplification of a traced graph (graph.h): equal scalar constants, then common
// subexpressions, merged, and a node that undoes its input's node (Primitive::undoes) replaced
// by that node's input; then what no output reads is dropped. For evaluation alone, no-ops too.
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <typeinfo>

#include "compile/graph.h"
#include "ops/creation.h"
#include "tessera/primitives/elementwise.h"

namespace tessera::compile_detail {

namespace {

// Constants up to this size are compared by value.
constexpr size_t kSmallConstantBytes = 64;

int find(std::vector<int>& rep, int v) {
  while (rep[v] != v) v = rep[v] = rep[rep[v]];
  return v;
}

}  // namespace

void simplify(Graph& g, bool shapeless) {
  std::vector<int> rep(g.shapes.size());
  for (size_t v = 0; v < rep.size(); ++v) rep[v] = static_cast<int>(v);

  // Equal small constants: same dtype, shape and bytes.
  std::map<std::tuple<int, Shape, std::string>, int> by_value;
  for (auto& [v, a] : g.constants) {
    if (!a.is_available() || a.nbytes() > kSmallConstantBytes || a.error()) continue;
    if (!a.flags().row_contiguous || a.data_size() != a.size()) continue;
    std::string bytes(static_cast<const char*>(a.raw_data()), a.nbytes());
    auto key = std::make_tuple(static_cast<int>(a.dtype().val()), a.shape(), std::move(bytes));
    auto [it, inserted] = by_value.emplace(std::move(key), v);
    if (!inserted) rep[v] = it->second;
  }

  // Common subexpressions: the same kind of primitive (is_equivalent: parameters included) on
  // the same inputs. Shapeless, also on the same shape sources (a broadcast of one value to the
  // shapes of two different arrays may differ on replay); otherwise the output shapes, compared
  // below, are all that counts.
  std::map<std::vector<size_t>, std::vector<size_t>> seen;  // (kind, inputs) -> node indices
  std::vector<char> dropped(g.nodes.size(), 0);
  std::vector<int> producer(g.shapes.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    GraphNode& n = g.nodes[i];
    for (int& v : n.inputs) v = find(rep, v);
    for (int& v : n.shape_sources) v = find(rep, v);
    if (n.inputs.size() == 1 && n.outputs.size() == 1 && producer[n.inputs[0]] >= 0) {
      const GraphNode& p = g.nodes[static_cast<size_t>(producer[n.inputs[0]])];
      if (p.inputs.size() == 1 && p.outputs.size() == 1 && n.primitive->undoes(*p.primitive)) {
        rep[n.outputs[0]] = p.inputs[0];
        dropped[i] = true;
        continue;
      }
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) producer[n.outputs[k]] = static_cast<int>(i);
    std::vector<size_t> key{typeid(*n.primitive).hash_code(), n.outputs.size(), n.inputs.size()};
    for (int v : n.inputs) key.push_back(static_cast<size_t>(v));
    if (shapeless) {
      for (int v : n.shape_sources) key.push_back(static_cast<size_t>(v));
    }
    auto& candidates = seen[key];
    bool merged = false;
    for (size_t c : candidates) {
      const GraphNode& m = g.nodes[c];
      bool same = m.primitive->is_equivalent(*n.primitive);
      for (size_t k = 0; same && k < n.outputs.size(); ++k) {
        same = g.shapes[m.outputs[k]] == g.shapes[n.outputs[k]] &&
               g.dtypes[m.outputs[k]] == g.dtypes[n.outputs[k]];
      }
      if (same) {
        for (size_t k = 0; k < n.outputs.size(); ++k) rep[n.outputs[k]] = m.outputs[k];
        dropped[i] = merged = true;
        break;
      }
    }
    if (!merged) candidates.push_back(i);
  }
  std::vector<GraphNode> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!dropped[i]) kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
  for (int& v : g.outputs) v = find(rep, v);
  prune_and_sort(g);
}

void drop_noops(Graph& g) {
  std::vector<int> rep(g.shapes.size());
  for (size_t v = 0; v < rep.size(); ++v) rep[v] = static_cast<int>(v);
  std::vector<GraphNode> kept;
  for (auto& n : g.nodes) {
    for (int& v : n.inputs) v = find(rep, v);
    for (int& v : n.shape_sources) v = find(rep, v);
    const Primitive& p = *n.primitive;
    if (n.inputs.size() == 1 && n.outputs.size() == 1 &&
        (typeid(p) == typeid(Copy) || typeid(p) == typeid(StopGradient)) &&
        g.shapes[n.inputs[0]] == g.shapes[n.outputs[0]] &&
        g.dtypes[n.inputs[0]] == g.dtypes[n.outputs[0]]) {
      rep[n.outputs[0]] = n.inputs[0];
    } else {
      kept.push_back(std::move(n));
    }
  }
  g.nodes = std::move(kept);
  for (int& v : g.outputs) v = find(rep, v);
  prune_and_sort(g);
}

}  // namespace tessera::compile_detail
