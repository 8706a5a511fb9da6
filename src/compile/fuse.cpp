// Fusion (graph.h): row-shaped subgraphs first become CompiledRows nodes (fuse_rows.cpp); then
// elementwise nodes of one shape and stream join regions, each region of two
// or more nodes becomes one Compiled node (a region feeding only a sum / max / min becomes one
// CompiledReduce with it). A node joins the regions of its producers only when
// no path leaves those regions and comes back into them through other nodes or other regions,
// so the fused graph has no cycle. Which primitives are elementwise comes from the fusion table
// (fused_functor()), never from a list here.
#include <algorithm>
#include <unordered_set>

#include "tessera/primitives/compiled.h"
#include "compile/graph.h"

namespace tessera::compile_detail {

namespace {

struct Regions {
  std::vector<int> parent;                  // union-find over region ids (a region's first node)
  std::vector<std::vector<int>> external;   // per root: values its members read from outside
  std::vector<std::vector<int>> upstream;   // per root: regions its members' inputs come from
  int find(int r) {
    while (parent[r] != r) r = parent[r] = parent[parent[r]];
    return r;
  }
  // Whether a path of regions leads from any of `roots` to one of `from` (their upstream, then
  // theirs, ...): a region one of whose members reads the roots' values while another leads on.
  bool reaches(std::vector<int> from, const std::vector<int>& roots) {
    std::vector<char> seen(parent.size(), 0);
    for (int& r : from) {
      r = find(r);
      seen[r] = 1;
    }
    while (!from.empty()) {
      const int cur = from.back();
      from.pop_back();
      if (std::find(roots.begin(), roots.end(), cur) != roots.end()) return true;
      for (int u : upstream[cur]) {
        const int fu = find(u);
        if (!seen[fu]) {
          seen[fu] = 1;
          from.push_back(fu);
        }
      }
    }
    return false;
  }
};

bool contains(const std::vector<int>& s, int r) { return std::find(s.begin(), s.end(), r) != s.end(); }

}  // namespace

void fuse(Graph& g) {
  // A fused graph replays with the shapes of the plain one (compile.cpp), and a fused run may
  // hide a value a broadcast's shape follows: shape sources are not edges here.
  for (auto& n : g.nodes) n.shape_sources.clear();
  // A node that reads only its inputs' shapes does not read their data: bound to the traced
  // shapes, it loses its inputs, so it never keeps a value of a fused run in memory.
  for (auto& n : g.nodes) {
    if (n.inputs.empty()) continue;
    std::vector<Shape> read;
    for (int v : n.inputs) read.push_back(g.shapes[v]);
    if (auto bound = n.primitive->bind_input_shapes(read)) {
      n.primitive = std::move(bound);
      n.shape_inputs = std::move(n.inputs);
      n.inputs.clear();
    }
  }
  prune_and_sort(g);
  fuse_rows(g);
  const size_t nv = g.shapes.size(), nn = g.nodes.size();
  std::vector<int> producer(nv, -1);
  for (size_t i = 0; i < nn; ++i) {
    for (int v : g.nodes[i].outputs) producer[v] = static_cast<int>(i);
  }
  auto fusable = [&](size_t i) {
    const GraphNode& n = g.nodes[i];
    if (!n.primitive->fused_functor() || n.outputs.size() != 1 || n.inputs.empty()) return false;
    for (int v : n.inputs) {
      if (g.shapes[v] != g.shapes[n.outputs[0]]) return false;
    }
    return true;
  };
  Regions rg;
  rg.parent.resize(nn);
  for (size_t i = 0; i < nn; ++i) rg.parent[i] = static_cast<int>(i);
  rg.external.resize(nn);
  rg.upstream.resize(nn);
  std::vector<int> region(nn, -1);
  std::vector<std::vector<int>> anc(nv);  // regions upstream of each value (ids, not roots)
  auto member_of = [&](int v, const std::vector<int>& roots) {
    const int p = producer[v];
    return p >= 0 && region[p] >= 0 && contains(roots, rg.find(region[p]));
  };
  // Whether node i may join the union of `roots`: no path from the roots to a value they would
  // read from outside, neither directly nor through another region (two regions that each read
  // the other's values through outside nodes would each have to run first).
  auto may_join = [&](size_t i, const std::vector<int>& roots) {
    std::vector<int> from;
    auto upstream_of = [&](int v) {
      if (!member_of(v, roots)) from.insert(from.end(), anc[v].begin(), anc[v].end());
    };
    for (int v : g.nodes[i].inputs) upstream_of(v);
    for (int r : roots) {
      for (int v : rg.external[r]) upstream_of(v);
    }
    return !rg.reaches(std::move(from), roots);
  };
  for (size_t i = 0; i < nn; ++i) {
    const GraphNode& n = g.nodes[i];
    if (fusable(i)) {
      std::vector<int> joined;
      for (int v : n.inputs) {
        const int p = producer[v];
        if (p < 0 || region[p] < 0) continue;
        const int r = rg.find(region[p]);
        if (contains(joined, r) || g.nodes[p].primitive->stream() != n.primitive->stream()) {
          continue;
        }
        std::vector<int> trial = joined;
        trial.push_back(r);
        if (may_join(i, trial)) joined = std::move(trial);
      }
      const int root = joined.empty() ? static_cast<int>(i) : joined[0];
      for (int r : joined) {
        rg.parent[r] = root;
        if (r != root) {
          auto& ext = rg.external[root];
          ext.insert(ext.end(), rg.external[r].begin(), rg.external[r].end());
          auto& up = rg.upstream[root];
          up.insert(up.end(), rg.upstream[r].begin(), rg.upstream[r].end());
        }
      }
      region[i] = root;
      auto& ext = rg.external[root];
      for (int v : n.inputs) ext.push_back(v);
      auto& up = rg.upstream[root];
      for (int v : n.inputs) {
        for (int r : anc[v]) {
          if (rg.find(r) != root && !contains(up, r)) up.push_back(r);
        }
      }
      // Values now produced inside the region are no longer external.
      std::vector<int> kept;
      for (int v : ext) {
        if (!member_of(v, {root}) && !contains(kept, v)) kept.push_back(v);
      }
      ext = std::move(kept);
    }
    std::vector<int> up;
    for (int v : n.inputs) up.insert(up.end(), anc[v].begin(), anc[v].end());
    if (region[i] >= 0) up.push_back(region[i]);
    std::sort(up.begin(), up.end());
    up.erase(std::unique(up.begin(), up.end()), up.end());
    for (int v : n.outputs) anc[v] = up;
  }

  // Members per region root, in graph order.
  std::vector<std::vector<int>> members(nn);
  for (size_t i = 0; i < nn; ++i) {
    if (region[i] >= 0) members[rg.find(region[i])].push_back(static_cast<int>(i));
  }
  // A region whose one value read outside it is read only by a fusable reduction (the table's
  // fused_reduction) folds that reduction into its loop, even as a single node: sum(x * x)
  // never writes x * x.
  std::vector<std::vector<int>> readers(nv);
  for (size_t i = 0; i < nn; ++i) {
    for (int v : g.nodes[i].inputs) readers[v].push_back(static_cast<int>(i));
  }
  const std::unordered_set<int> is_output(g.outputs.begin(), g.outputs.end());
  std::vector<int> reduce_of(nn, -1);  // per region root: the reduction it folds in
  std::vector<char> folded(nn, 0);     // reductions folded into a region
  for (size_t r = 0; r < nn; ++r) {
    if (members[r].empty()) continue;
    std::vector<int> read_outside;
    for (int m : members[r]) {
      const int v = g.nodes[m].outputs[0];
      bool outside = is_output.count(v) != 0;
      for (int c : readers[v]) outside = outside || region[c] < 0 || rg.find(region[c]) != int(r);
      if (outside) read_outside.push_back(v);
    }
    if (read_outside.size() != 1) continue;
    const int v = read_outside[0];
    if (is_output.count(v) || readers[v].size() != 1) continue;
    const int red = readers[v][0];
    const GraphNode& n = g.nodes[red];
    std::vector<int> axes;
    const auto op = n.primitive->fused_reduction(&axes);
    const Dtype d = g.dtypes[v];
    if (op == Primitive::FusedReduce::none || n.outputs.size() != 1 || n.inputs.size() != 1 ||
        (d != float32 && d != float64) || g.dtypes[n.outputs[0]] != d ||
        n.primitive->stream() != g.nodes[members[r][0]].primitive->stream()) {
      continue;
    }
    reduce_of[r] = red;
    folded[red] = 1;
  }
  std::vector<int> root_of(nn, -1);
  for (size_t r = 0; r < nn; ++r) {
    if (members[r].size() < 2 && reduce_of[r] < 0) continue;
    for (int m : members[r]) root_of[m] = static_cast<int>(r);
  }
  // Values a fused region must hand out: read by a node outside it, or a function output.
  std::unordered_set<int> used_outside(g.outputs.begin(), g.outputs.end());
  for (size_t i = 0; i < nn; ++i) {
    for (int v : g.nodes[i].inputs) {
      const int p = producer[v];
      if (p >= 0 && root_of[p] >= 0 && root_of[p] != root_of[i]) used_outside.insert(v);
    }
  }
  std::vector<GraphNode> nodes;
  for (size_t i = 0; i < nn; ++i) {
    if (root_of[i] < 0 && !folded[i]) nodes.push_back(std::move(g.nodes[i]));
  }
  for (size_t r = 0; r < nn; ++r) {
    if (members[r].size() < 2 && reduce_of[r] < 0) continue;
    std::vector<int> inputs;
    std::vector<Dtype> input_dtypes;
    std::vector<FusedStep> steps;
    std::vector<int> out_steps, out_values;
    std::unordered_map<int, int> step_of, input_of;
    for (int m : members[r]) {
      GraphNode& n = g.nodes[m];
      FusedStep st{n.primitive, n.primitive->fused_functor(), g.dtypes[n.outputs[0]], {}};
      for (int v : n.inputs) {
        if (auto it = step_of.find(v); it != step_of.end()) {
          st.args.push_back(it->second);
          continue;
        }
        auto [it, inserted] = input_of.emplace(v, static_cast<int>(inputs.size()));
        if (inserted) {
          inputs.push_back(v);
          input_dtypes.push_back(g.dtypes[v]);
        }
        st.args.push_back(-it->second - 1);
      }
      const int out = n.outputs[0];
      step_of.emplace(out, static_cast<int>(steps.size()));
      if (used_outside.count(out)) {
        out_steps.push_back(static_cast<int>(steps.size()));
        out_values.push_back(out);
      }
      steps.push_back(std::move(st));
    }
    auto stream = steps[0].primitive->stream();
    if (reduce_of[r] >= 0) {
      GraphNode& red = g.nodes[reduce_of[r]];
      std::vector<int> axes;
      const auto op = red.primitive->fused_reduction(&axes);
      auto prim = std::make_shared<CompiledReduce>(stream, std::move(input_dtypes),
                                                   std::move(steps), step_of.at(red.inputs[0]),
                                                   red.primitive, op, std::move(axes));
      nodes.push_back(GraphNode{std::move(prim), std::move(inputs), red.outputs});
      continue;
    }
    auto prim = std::make_shared<Compiled>(stream, std::move(input_dtypes), std::move(steps),
                                           std::move(out_steps));
    nodes.push_back(GraphNode{std::move(prim), std::move(inputs), std::move(out_values)});
  }
  g.nodes = std::move(nodes);
  prune_and_sort(g);
}

}  // namespace tessera::compile_detail
