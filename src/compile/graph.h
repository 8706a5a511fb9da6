// A traced function as compile keeps it: values by number, nodes reading and writing them.
// graph.cpp builds, prunes and sorts it, simplify.cpp and fuse.cpp rewrite it, compile.cpp replays it.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "tessera/primitive.h"
#include "tessera/array.h"

namespace tessera::compile_detail {

struct GraphNode {
  std::shared_ptr<Primitive> primitive;
  std::vector<int> inputs;   // value numbers
  std::vector<int> outputs;  // value numbers, in the primitive's output order
  // Values whose shapes the output shapes follow (Primitive::shape_sources; shapeless replay).
  std::vector<int> shape_sources = {};
  // Fused graph: the values whose shapes an input-less shape reader (Primitive::
  // bind_input_shapes) was bound to. Not edges: a shapeless replay reads them from the plain
  // graph's shape table and binds the primitive again.
  std::vector<int> shape_inputs = {};
};

struct Graph {
  int num_inputs = 0;             // values [0, num_inputs) are the function's inputs
  std::vector<Shape> shapes;  // per value (traced shapes)
  std::vector<Dtype> dtypes;  // per value
  std::unordered_map<int, array> constants;  // the constant values' arrays
  std::vector<GraphNode> nodes;  // every node after the nodes producing its inputs
  std::vector<int> outputs;      // the function's outputs

  int add_value(const Shape& s, Dtype d) {
    shapes.push_back(s);
    dtypes.push_back(d);
    return static_cast<int>(shapes.size()) - 1;
  }
};

// The graph behind `outputs`, whose inputs are `inputs` (the traced function's stand-ins). It
// stops at constants: arrays already evaluated or without a primitive, and tracers of an
// enclosing transform; everything else the function computed is replayed on every call.
Graph build_graph(const std::vector<array>& inputs, const std::vector<array>& outputs);

// Equal constants merged (scalars of one dtype and value), common subexpressions merged (same
// primitive by is_equivalent, same inputs; for a `shapeless` graph, same shape sources too),
// nodes whose outputs nothing reads removed.
void simplify(Graph& g, bool shapeless);

// Copies and stop_gradients (same shape and dtype in as out) replaced by their inputs: nothing to
// evaluate. Only for the graph that evaluation replays; the transforms need stop_gradient.
void drop_noops(Graph& g);

// Runs of elementwise nodes of one shape become Compiled nodes (a node is elementwise when its
// primitive names a fused_functor()).
void fuse(Graph& g);

// Part of fuse: subgraphs that reduce rows and read the results again (softmax, logsumexp,
// normalisations) become CompiledRows nodes (fuse_rows.cpp).
void fuse_rows(Graph& g);

// Removes the nodes no output depends on and puts the rest in an order where every node comes
// after its inputs' producers.
void prune_and_sort(Graph& g);

// The graph's nodes as new arrays on `inputs`. Output shapes are the traced ones, or those of
// `shapes` (per value), or with `shapeless` and no table, recomputed node by node; `shapes_out`
// receives every value's shape (compile.cpp; export.cpp replays imported graphs with it).
std::vector<array> replay(const Graph& g, const std::vector<array>& inputs, bool shapeless,
                          const std::vector<Shape>* shapes = nullptr,
                          std::vector<Shape>* shapes_out = nullptr);

}  // namespace tessera::compile_detail
