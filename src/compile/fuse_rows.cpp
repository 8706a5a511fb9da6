// Row fusion (graph.h): softmax-, logsumexp- and normalisation-shaped subgraphs become one
// CompiledRows node (compiled.h). A group grows from a reduction of an input's trailing axes
// through the nodes around it that work on the same rows: elementwise nodes on the row shape S
// or on the per-row shape S' (S with the reduced dims 1), broadcasts from S' or from one value,
// and further reductions of the same axes. Groups with two reductions, or whose reduction is read
// again inside the group (x / sum(x)), are replaced; a lone reduction of an elementwise value
// stays for fuse()'s CompiledReduce. What may join comes from the fusion table
// (fused_functor, fused_reduction, fused_broadcast).
#include <algorithm>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "tessera/primitives/compiled.h"
#include "compile/graph.h"

namespace tessera::compile_detail {

namespace {

bool all_ones(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](int64_t d) { return d == 1; });
}

// The shapes and axes a group works on.
struct Rows {
  Shape row, per_row;
  std::vector<int> axes;
  Stream stream;
};

// The trailing-axes reduction `n` as the seed of a group, or nothing.
std::optional<Rows> seed(const Graph& g, const GraphNode& n) {
  std::vector<int> axes;
  if (n.primitive->fused_reduction(&axes) == Primitive::FusedReduce::none ||
      n.inputs.size() != 1 || n.outputs.size() != 1 || axes.empty()) {
    return std::nullopt;
  }
  const Shape& row = g.shapes[n.inputs[0]];
  const Dtype d = g.dtypes[n.inputs[0]];
  if ((d != float32 && d != float64) || g.dtypes[n.outputs[0]] != d) return std::nullopt;
  const int nd = static_cast<int>(row.size());
  std::vector<int> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  const int first = nd - static_cast<int>(sorted.size());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] != first + static_cast<int>(i)) return std::nullopt;
  }
  Rows r{row, row, sorted, n.primitive->stream()};
  for (int a : sorted) r.per_row[static_cast<size_t>(a)] = 1;
  if (r.per_row == r.row) return std::nullopt;
  return r;
}

// Level of node `n` in a group on `r`: 'R' or 'W' (its output's shape), or 0 when it may not
// join. Kind by the fusion table: 'e', 'r' or 'b'.
std::pair<char, char> member_kind(const Graph& g, const GraphNode& n, const Rows& r) {
  if (n.outputs.size() != 1 || n.inputs.empty() || n.primitive->stream() != r.stream) return {0, 0};
  const Shape& out = g.shapes[n.outputs[0]];
  const char level = out == r.row ? 'R' : out == r.per_row ? 'W' : 0;
  if (!level) return {0, 0};
  if (n.primitive->fused_functor()) {
    for (int v : n.inputs) {
      if (g.shapes[v] != out) return {0, 0};
    }
    return {level, 'e'};
  }
  if (n.primitive->fused_broadcast() && n.inputs.size() == 1) {
    const Shape& from = g.shapes[n.inputs[0]];
    const bool ok = level == 'R' ? (from == r.per_row || all_ones(from)) : all_ones(from);
    return ok && from != out ? std::pair<char, char>{level, 'b'} : std::pair<char, char>{0, 0};
  }
  auto s = seed(g, n);
  if (s && level == 'W' && s->row == r.row && s->axes == r.axes) return {level, 'r'};
  return {0, 0};
}

}  // namespace

void fuse_rows(Graph& g) {
  const size_t nv = g.shapes.size(), nn = g.nodes.size();
  std::vector<int> producer(nv, -1);
  std::vector<std::vector<int>> readers(nv);
  for (size_t i = 0; i < nn; ++i) {
    for (int v : g.nodes[i].outputs) producer[v] = static_cast<int>(i);
    for (int v : g.nodes[i].inputs) readers[v].push_back(static_cast<int>(i));
  }
  const std::unordered_set<int> is_output(g.outputs.begin(), g.outputs.end());
  std::vector<int> group_of(nn, -1);
  std::vector<GraphNode> added;
  std::vector<char> keep(nn, 1);
  int groups = 0;
  for (size_t s0 = 0; s0 < nn; ++s0) {
    if (group_of[s0] >= 0) continue;
    const auto rows = seed(g, g.nodes[s0]);
    if (!rows) continue;
    // Grow through producers and readers of the members.
    std::vector<int> members{static_cast<int>(s0)};
    std::vector<char> in_group(nn, 0);
    std::vector<char> level(nn, 0), kind(nn, 0);
    in_group[s0] = 1;
    level[s0] = 'W';
    kind[s0] = 'r';
    for (size_t q = 0; q < members.size(); ++q) {
      const GraphNode& m = g.nodes[members[q]];
      std::vector<int> around;
      for (int v : m.inputs) {
        if (producer[v] >= 0) around.push_back(producer[v]);
      }
      for (int c : readers[m.outputs[0]]) around.push_back(c);
      for (int c : around) {
        if (in_group[c] || group_of[c] >= 0) continue;
        auto [lv, kd] = member_kind(g, g.nodes[c], *rows);
        if (!lv) continue;
        in_group[c] = 1;
        level[c] = lv;
        kind[c] = kd;
        members.push_back(c);
      }
    }
    std::sort(members.begin(), members.end());
    // Worth a kernel: a reduction read again inside the group, or two reductions.
    int reductions = 0;
    bool reread = false;
    for (int m : members) {
      if (kind[m] != 'r') continue;
      ++reductions;
      for (int c : readers[g.nodes[m].outputs[0]]) reread = reread || in_group[c];
    }
    if (reductions < 2 && !reread) continue;
    // Values the group reads from outside; none may depend on a member (no cycle through
    // outside nodes once the group is one node).
    std::vector<int> inputs;
    for (int m : members) {
      for (int v : g.nodes[m].inputs) {
        if ((producer[v] < 0 || !in_group[producer[v]]) &&
            std::find(inputs.begin(), inputs.end(), v) == inputs.end()) {
          inputs.push_back(v);
        }
      }
    }
    bool cycle = false;
    {
      std::vector<char> seen(nn, 0);
      std::vector<int> stack;
      for (int v : inputs) {
        if (producer[v] >= 0) stack.push_back(producer[v]);
      }
      while (!stack.empty() && !cycle) {
        const int p = stack.back();
        stack.pop_back();
        if (seen[p]) continue;
        seen[p] = 1;
        cycle = in_group[p] != 0;
        for (int v : g.nodes[p].inputs) {
          if (producer[v] >= 0) stack.push_back(producer[v]);
        }
      }
    }
    std::string roles;
    for (int v : inputs) {
      const Shape& s = g.shapes[v];
      roles += s == rows->row ? 'd' : s == rows->per_row ? 'w' : all_ones(s) ? 's' : '?';
    }
    if (cycle || roles.find('d') == std::string::npos || roles.find('?') != std::string::npos) {
      continue;
    }
    // Outputs: member values read outside or returned. A broadcast read outside stays a node
    // of its own (its input is then an output), so the group hands out no broadcast value.
    std::vector<int> out_values;
    auto hand_out = [&](int v) {
      if (std::find(out_values.begin(), out_values.end(), v) == out_values.end()) {
        out_values.push_back(v);
      }
    };
    std::vector<char> outside(nn, 0);  // members whose value is read outside or returned
    for (int m : members) {
      const int v = g.nodes[m].outputs[0];
      outside[m] = is_output.count(v) != 0;
      for (int c : readers[v]) outside[m] = outside[m] || !in_group[c];
      if (!outside[m]) continue;
      if (kind[m] == 'b') {
        const int src = g.nodes[m].inputs[0];
        if (producer[src] >= 0 && in_group[producer[src]]) hand_out(src);
      } else {
        hand_out(v);
      }
    }
    // Steps in graph order.
    std::unordered_map<int, int> step_of, input_of;
    for (size_t k = 0; k < inputs.size(); ++k) input_of.emplace(inputs[k], static_cast<int>(k));
    std::vector<FusedStep> steps;
    std::vector<Dtype> input_dtypes;
    for (int v : inputs) input_dtypes.push_back(g.dtypes[v]);
    std::string kinds, levels;
    for (int m : members) {
      const GraphNode& n = g.nodes[m];
      std::string functor = kind[m] == 'e' ? n.primitive->fused_functor() : "broadcast";
      if (kind[m] == 'r') {
        std::vector<int> axes;
        const auto op = n.primitive->fused_reduction(&axes);
        functor = op == Primitive::FusedReduce::sum   ? "reduce sum"
                  : op == Primitive::FusedReduce::max ? "reduce max"
                                                      : "reduce min";
      }
      FusedStep st{n.primitive, std::move(functor), g.dtypes[n.outputs[0]], {}};
      for (int v : n.inputs) {
        auto it = step_of.find(v);
        st.args.push_back(it != step_of.end() ? it->second : -input_of.at(v) - 1);
      }
      step_of.emplace(n.outputs[0], static_cast<int>(steps.size()));
      steps.push_back(std::move(st));
      kinds += kind[m];
      levels += level[m];
    }
    std::vector<int> out_steps;
    for (int v : out_values) out_steps.push_back(step_of.at(v));
    auto prim = std::make_shared<CompiledRows>(rows->stream, std::move(input_dtypes),
                                               std::move(steps), std::move(out_steps),
                                               std::move(kinds), std::move(levels),
                                               std::move(roles), rows->axes);
    for (int m : members) {
      group_of[m] = groups;
      keep[m] = kind[m] == 'b' && outside[m];  // a broadcast read outside stays a node
    }
    added.push_back(GraphNode{std::move(prim), std::move(inputs), std::move(out_values)});
    ++groups;
  }
  if (added.empty()) return;
  std::vector<GraphNode> nodes;
  for (size_t i = 0; i < nn; ++i) {
    if (keep[i]) nodes.push_back(std::move(g.nodes[i]));
  }
  for (auto& n : added) nodes.push_back(std::move(n));
  g.nodes = std::move(nodes);
  prune_and_sort(g);
}

}  // namespace tessera::compile_detail
