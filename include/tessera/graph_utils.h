// Printing a lazy graph, as MLX's graph_utils.h: print_graph (one line per node) and
// export_to_dot (Graphviz). Arrays are named A, B, ..., Z, AA, AB, ... in the order first met,
// unless a NodeNamer is given names.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "tessera/array.h"

namespace tessera {

struct NodeNamer {
  std::unordered_map<std::uintptr_t, std::string> names;
  const std::string& get_name(const array& x);
  void set_name(const array& x, std::string n);
};

// "Inputs: A [(2,2), float32], ...", "Outputs: ...", then "<Primitive> <inputs> -> <outputs>" for
// each node, inputs before the nodes that use them.
void print_graph(std::ostream& os, NodeNamer namer, const std::vector<array>& outputs);
inline void print_graph(std::ostream& os, const std::vector<array>& outputs) {
  print_graph(os, NodeNamer{}, outputs);
}
template <typename... Arrays>
  requires(std::is_convertible_v<Arrays, array> && ...)
void print_graph(std::ostream& os, Arrays&&... outputs) {
  print_graph(os, NodeNamer{}, std::vector<array>{std::forward<Arrays>(outputs)...});
}

// A Graphviz digraph: evaluated arrays as sources, primitives as boxes, final outputs as sinks.
void export_to_dot(std::ostream& os, NodeNamer namer, const std::vector<array>& outputs);
inline void export_to_dot(std::ostream& os, const std::vector<array>& outputs) {
  export_to_dot(os, NodeNamer{}, outputs);
}
template <typename... Arrays>
  requires(std::is_convertible_v<Arrays, array> && ...)
void export_to_dot(std::ostream& os, Arrays&&... outputs) {
  export_to_dot(os, NodeNamer{}, std::vector<array>{std::forward<Arrays>(outputs)...});
}

}  // namespace tessera
