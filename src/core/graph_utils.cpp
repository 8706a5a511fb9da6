// print_graph and export_to_dot (tessera/graph_utils.h): an iterative depth-first walk of the
// lazy graph (no recursion limit), each array once, a node's siblings with it.
#include "tessera/graph_utils.h"

#include <unordered_set>
#include <utility>

#include "tessera/primitive.h"
#include "tessera/utils.h"

namespace tessera {

const std::string& NodeNamer::get_name(const array& x) {
  auto it = names.find(x.id());
  if (it != names.end()) return it->second;
  // The n-th name in A, ..., Z, AA, AB, ... (bijective base 26).
  std::string name;
  for (size_t n = names.size() + 1; n > 0; n = (n - 1) / 26) {
    name.insert(name.begin(), static_cast<char>('A' + (n - 1) % 26));
  }
  return names.emplace(x.id(), std::move(name)).first->second;
}

void NodeNamer::set_name(const array& x, std::string n) { names[x.id()] = std::move(n); }

namespace {

// Calls visit(x) for every array reachable from `outputs`, inputs before their users.
template <typename F>
void post_order(const std::vector<array>& outputs, F&& visit) {
  std::unordered_set<std::uintptr_t> seen;
  std::vector<std::pair<array, size_t>> stack;  // (array, next input to descend into)
  for (const auto& o : outputs) {
    if (!seen.insert(o.id()).second) continue;
    stack.emplace_back(o, 0);
    while (!stack.empty()) {
      auto& [x, next] = stack.back();
      if (next == 0 && x.has_primitive()) {
        for (const auto& sib : x.siblings()) seen.insert(sib.id());
      }
      const std::vector<array> no_inputs;
      const auto& ins = x.has_primitive() ? x.inputs() : no_inputs;
      if (next < ins.size()) {
        const array in = ins[next++];
        if (seen.insert(in.id()).second) stack.emplace_back(in, 0);
        continue;
      }
      array done = x;
      stack.pop_back();
      visit(done);
    }
  }
}

void print_list(std::ostream& os, NodeNamer& namer, const std::vector<array>& arrs) {
  for (size_t i = 0; i < arrs.size(); ++i) {
    os << (i ? ", " : "") << namer.get_name(arrs[i]) << " [" << arrs[i].shape() << ", "
       << dtype_name(arrs[i].dtype()) << "]";
  }
}

}  // namespace

void print_graph(std::ostream& os, NodeNamer namer, const std::vector<array>& outputs) {
  std::vector<array> inputs, nodes;
  post_order(outputs, [&](const array& x) { (x.has_primitive() ? nodes : inputs).push_back(x); });
  os << "Inputs: ";
  print_list(os, namer, inputs);
  os << "\nOutputs: ";
  print_list(os, namer, outputs);
  os << "\n";
  for (const auto& x : nodes) {
    os << x.primitive().name() << " ";
    print_list(os, namer, x.inputs());
    os << " -> ";
    print_list(os, namer, x.outputs());
    os << "\n";
  }
}

void export_to_dot(std::ostream& os, NodeNamer namer, const std::vector<array>& outputs) {
  // Arrays some node reads are intermediates; outputs nothing reads are the sinks.
  std::unordered_set<std::uintptr_t> read;
  post_order(outputs, [&](const array& x) {
    if (x.has_primitive()) {
      for (const auto& in : x.inputs()) read.insert(in.id());
    }
  });
  os << "digraph {\n";
  post_order(outputs, [&](const array& x) {
    if (!x.has_primitive()) {
      os << "{ rank=source; \"" << namer.get_name(x) << "\"; }\n";
      return;
    }
    const auto node = x.primitive_id();
    os << "{ " << node << " [label=\"" << x.primitive().name() << "\", shape=rectangle]; }\n";
    for (const auto& in : x.inputs()) os << '"' << namer.get_name(in) << "\" -> " << node << "\n";
    for (const auto& out : x.outputs()) {
      os << "{ " << (read.count(out.id()) ? "" : "rank=sink; ") << '"' << namer.get_name(out)
         << "\"; }\n"
         << node << " -> \"" << namer.get_name(out) << "\"\n";
    }
  });
  os << "}\n";
}

}  // namespace tessera
