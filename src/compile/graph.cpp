// Building a Graph from traced arrays, and pruning / ordering it (graph.h).
#include "compile/graph.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_set>

namespace tessera::compile_detail {

Graph build_graph(const std::vector<array>& inputs, const std::vector<array>& outputs) {
  Graph g;
  g.num_inputs = static_cast<int>(inputs.size());
  std::unordered_map<std::uintptr_t, int> value_of;  // arrays that have a value number
  for (auto& in : inputs) value_of.emplace(in.id(), g.add_value(in.shape(), in.dtype()));
  auto value = [&](const array& a) {
    auto it = value_of.find(a.id());
    if (it != value_of.end()) return it->second;
    const int v = g.add_value(a.shape(), a.dtype());
    g.constants.emplace(v, a);
    value_of.emplace(a.id(), v);
    return v;
  };
  auto visited = [&](const array& a) { return value_of.count(a.id()) != 0; };
  // Post-order walk without recursion: a frame is expanded once its inputs are done.
  std::vector<std::pair<array, bool>> stack;
  for (auto it = outputs.rbegin(); it != outputs.rend(); ++it) stack.emplace_back(*it, false);
  while (!stack.empty()) {
    auto [a, expanded] = stack.back();
    stack.pop_back();
    if (visited(a)) continue;
    if (!a.has_primitive() || a.is_available()) {  // a value known now
      value(a);
      continue;
    }
    if (!expanded) {
      stack.emplace_back(a, true);
      for (auto& in : a.inputs()) {
        if (!visited(in)) stack.emplace_back(in, false);
      }
      for (auto& src : a.primitive().shape_sources()) {
        if (!visited(src)) stack.emplace_back(src, false);
      }
      continue;
    }
    // An array an enclosing transform traces (compile called inside grad, with the closure
    // holding it) must stay itself: the transform differentiates through it. It is one when it is
    // a tracer not computed from this function's inputs.
    // Its shape sources count: a broadcast of a constant that follows an input's shape is no
    // constant.
    bool depends = false;
    const std::vector<array> sources = a.primitive().shape_sources();
    for (const auto* arrays : {&a.inputs(), &sources}) {
      for (auto& in : *arrays) depends = depends || g.constants.count(value_of.at(in.id())) == 0;
    }
    if (!depends && a.is_tracer()) {
      value(a);
      continue;
    }
    GraphNode node{a.primitive_ptr(), {}, {}};
    for (auto& in : a.inputs()) node.inputs.push_back(value(in));
    for (auto& src : sources) node.shape_sources.push_back(value(src));
    a.primitive().clear_shape_sources();
    for (auto& o : a.outputs()) {
      const int v = g.add_value(o.shape(), o.dtype());
      value_of.emplace(o.id(), v);
      node.outputs.push_back(v);
    }
    g.nodes.push_back(std::move(node));
  }
  for (auto& o : outputs) g.outputs.push_back(value(o));
  prune_and_sort(g);
  return g;
}

void prune_and_sort(Graph& g) {
  const size_t nv = g.shapes.size();
  std::vector<int> producer(nv, -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int v : g.nodes[i].outputs) producer[v] = static_cast<int>(i);
  }
  // Live nodes, and each one's count of live producers still to place.
  std::vector<char> live(g.nodes.size(), 0);
  std::vector<int> stack;
  for (int v : g.outputs) {
    if (producer[v] >= 0) stack.push_back(producer[v]);
  }
  while (!stack.empty()) {
    const int n = stack.back();
    stack.pop_back();
    if (live[n]) continue;
    live[n] = 1;
    for (const auto* vs : {&g.nodes[n].inputs, &g.nodes[n].shape_sources}) {
      for (int v : *vs) {
        if (producer[v] >= 0 && !live[producer[v]]) stack.push_back(producer[v]);
      }
    }
  }
  std::vector<int> pending(g.nodes.size(), 0);
  std::vector<std::vector<int>> consumers(g.nodes.size());
  std::vector<int> ready;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!live[i]) continue;
    std::unordered_set<int> seen;
    std::vector<int> deps = g.nodes[i].inputs;
    deps.insert(deps.end(), g.nodes[i].shape_sources.begin(), g.nodes[i].shape_sources.end());
    for (int v : deps) {
      const int p = producer[v];
      if (p >= 0 && seen.insert(p).second) {
        ++pending[i];
        consumers[p].push_back(static_cast<int>(i));
      }
    }
    if (pending[i] == 0) ready.push_back(static_cast<int>(i));
  }
  // Kahn's algorithm, taking the earliest ready node first (keeps the traced order where it can).
  std::vector<GraphNode> order;
  std::vector<int> heap(ready.rbegin(), ready.rend());
  auto cmp = [](int a, int b) { return a > b; };
  std::make_heap(heap.begin(), heap.end(), cmp);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    const int n = heap.back();
    heap.pop_back();
    order.push_back(std::move(g.nodes[n]));
    for (int c : consumers[n]) {
      if (--pending[c] == 0) {
        heap.push_back(c);
        std::push_heap(heap.begin(), heap.end(), cmp);
      }
    }
  }
  const size_t live_count = static_cast<size_t>(std::count(live.begin(), live.end(), 1));
  if (order.size() != live_count) {
    throw std::logic_error("[compile] the traced graph has a cycle (" +
                           std::to_string(live_count - order.size()) + " nodes left unordered)");
  }
  g.nodes = std::move(order);
}

}  // namespace tessera::compile_detail
