// Pytrees (see trees.h).
#include "trees.h"

#include <nanobind/stl/function.h>

#include <unordered_map>

namespace tessera::python {

namespace {

void collect(nb::handle t, std::vector<array>& out, const std::string* strict) {
  if (nb::isinstance<array>(t)) {
    out.push_back(nb::cast<array>(t));
  } else if (nb::isinstance<nb::list>(t) || nb::isinstance<nb::tuple>(t)) {
    for (nb::handle e : t) collect(e, out, strict);
  } else if (nb::isinstance<nb::dict>(t)) {
    for (auto [k, v] : nb::borrow<nb::dict>(t)) collect(v, out, strict);
  } else if (strict) {
    throw std::invalid_argument(*strict + " holds a leaf of type " +
                                nb::cast<std::string>(t.type().attr("__name__")) +
                                "; only arrays (in lists, tuples and dicts) can be differentiated: "
                                "pass it as another argument, or wrap it with array()");
  }
}

// Visits the array leaves of `t`, putting visit(leaf)'s result in their place: lists and dicts
// in place, tuples rebuilt (keeping their type). With `tuple_error`, an array directly inside a
// tuple is that std::invalid_argument instead (its container cannot change in place).
nb::object update_in_place(nb::handle t, const std::function<nb::object(nb::handle)>& visit,
                           const std::string* tuple_error = nullptr) {
  if (nb::isinstance<array>(t)) return visit(t);
  if (nb::isinstance<nb::list>(t)) {
    nb::list l = nb::borrow<nb::list>(t);
    for (size_t i = 0; i < l.size(); ++i) l[i] = update_in_place(l[i], visit, tuple_error);
    return l;
  }
  if (nb::isinstance<nb::tuple>(t)) {
    nb::list out;
    for (nb::handle e : t) {
      if (tuple_error && nb::isinstance<array>(e)) throw std::invalid_argument(*tuple_error);
      out.append(update_in_place(e, visit, tuple_error));
    }
    if (PyTuple_CheckExact(t.ptr())) return nb::tuple(out);
    if (nb::hasattr(t, "_fields")) return t.type()(*nb::tuple(out));
    return t.type()(out);
  }
  if (nb::isinstance<nb::dict>(t)) {
    nb::dict d = nb::borrow<nb::dict>(t);
    nb::list keys = nb::list(d.keys());  // the dict's values change while it is walked
    for (nb::handle k : keys) d[k] = update_in_place(d[k], visit, tuple_error);
    return d;
  }
  return nb::borrow(t);
}

}  // namespace

std::vector<array> tree_arrays(nb::handle tree) {
  std::vector<array> out;
  collect(tree, out, nullptr);
  return out;
}

std::vector<array> tree_arrays_only(nb::handle tree, const std::string& what) {
  std::vector<array> out;
  collect(tree, out, &what);
  return out;
}

nb::object tree_fill(nb::handle tree, const std::vector<array>& leaves, size_t* pos,
                     std::vector<nb::object>* written, std::vector<nb::object>* replaced) {
  return update_in_place(tree, [&](nb::handle leaf) {
    if (*pos >= leaves.size()) throw std::logic_error("[tree] fewer leaves than arrays");
    replaced->push_back(nb::borrow(leaf));
    written->push_back(nb::cast(leaves[(*pos)++]));
    return written->back();
  });
}

void tree_fill_state(nb::handle tree, const std::vector<array>& leaves,
                     const std::string& tuple_error) {
  size_t pos = 0;
  update_in_place(tree, [&](nb::handle) {
    if (pos >= leaves.size()) throw std::logic_error("[tree] fewer leaves than arrays");
    return nb::cast(leaves[pos++]);
  }, &tuple_error);
}

nb::object tree_restore(nb::handle tree, const std::vector<nb::object>& written,
                        const std::vector<nb::object>& replaced) {
  std::unordered_map<PyObject*, size_t> where;
  for (size_t i = 0; i < written.size(); ++i) where.emplace(written[i].ptr(), i);
  return update_in_place(tree, [&](nb::handle leaf) {
    auto it = where.find(leaf.ptr());
    return it == where.end() ? nb::borrow(leaf) : replaced[it->second];
  });
}

nb::object tree_map_arrays(nb::handle t, const std::function<nb::object(nb::handle)>& f,
                           bool keep_dict_types) {
  if (nb::isinstance<array>(t)) return f(t);
  if (nb::isinstance<nb::list>(t)) {
    nb::list out;
    for (nb::handle e : t) out.append(tree_map_arrays(e, f, keep_dict_types));
    // Subclasses of list keep their type (as MLX's trees do).
    if (!PyList_CheckExact(t.ptr())) return t.type()(out);
    return out;
  }
  if (nb::isinstance<nb::tuple>(t)) {
    nb::list out;
    for (nb::handle e : t) out.append(tree_map_arrays(e, f, keep_dict_types));
    // Tuple subclasses keep their type (named tuples take their items as arguments).
    if (PyTuple_CheckExact(t.ptr())) return nb::tuple(out);
    if (nb::hasattr(t, "_fields")) return t.type()(*nb::tuple(out));
    return t.type()(out);
  }
  if (nb::isinstance<nb::dict>(t)) {
    if (PyDict_CheckExact(t.ptr()) || !keep_dict_types) {
      nb::dict out;
      for (auto [k, v] : nb::borrow<nb::dict>(t)) out[k] = tree_map_arrays(v, f, keep_dict_types);
      return out;
    }
    // A dict subclass (an nn.Module) keeps its type and attributes: a shallow copy (no
    // __init__ call) with the entries replaced, so a vmapped function sees a model. (grad
    // writes its tracers into the caller's own object instead: tree_fill.)
    static nb::handle shallow_copy = nb::object(nb::module_::import_("copy").attr("copy")).release();
    nb::object out = shallow_copy(t);
    for (auto [k, v] : nb::borrow<nb::dict>(t)) out[k] = tree_map_arrays(v, f, keep_dict_types);
    return out;
  }
  return nb::borrow(t);
}

nb::object tree_replace(nb::handle t, const std::vector<array>& leaves, size_t* pos,
                        bool keep_dict_types) {
  return tree_map_arrays(t, [&](nb::handle) {
    if (*pos >= leaves.size()) throw std::logic_error("[tree] fewer leaves than arrays");
    return nb::cast(leaves[(*pos)++]);
  }, keep_dict_types);
}

void tree_visit_with_prefix(nb::handle t, nb::handle prefix,
                            const std::function<void(nb::handle)>& f) {
  const bool prefix_is_node = nb::isinstance<nb::list>(prefix) || nb::isinstance<nb::tuple>(prefix) ||
                              nb::isinstance<nb::dict>(prefix);
  if (nb::isinstance<array>(t)) {
    if (prefix_is_node) throw std::invalid_argument("[tree] the axes tree is deeper than the input tree");
    f(prefix);
    return;
  }
  if (nb::isinstance<nb::list>(t) || nb::isinstance<nb::tuple>(t)) {
    if (!prefix_is_node) {
      for (nb::handle e : t) tree_visit_with_prefix(e, prefix, f);
      return;
    }
    if (nb::isinstance<nb::dict>(prefix) || nb::len(prefix) != nb::len(t)) {
      throw std::invalid_argument("[tree] the axes tree does not match the input: a sequence of " +
                                  std::to_string(nb::len(t)) + " against " +
                                  nb::cast<std::string>(nb::repr(prefix)));
    }
    size_t i = 0;
    nb::list pl = nb::list(prefix);
    for (nb::handle e : t) tree_visit_with_prefix(e, pl[i++], f);
    return;
  }
  if (nb::isinstance<nb::dict>(t)) {
    if (!prefix_is_node) {
      for (auto [k, v] : nb::borrow<nb::dict>(t)) tree_visit_with_prefix(v, prefix, f);
      return;
    }
    if (!nb::isinstance<nb::dict>(prefix)) {
      throw std::invalid_argument("[tree] the axes tree does not match the input: a dict against " +
                                  nb::cast<std::string>(nb::repr(prefix)));
    }
    nb::dict pd = nb::borrow<nb::dict>(prefix);
    for (auto [k, v] : nb::borrow<nb::dict>(t)) {
      if (!pd.contains(k)) {
        throw std::invalid_argument("[tree] the axes dict has no entry for key " +
                                    nb::cast<std::string>(nb::repr(k)));
      }
      tree_visit_with_prefix(v, pd[k], f);
    }
  }
}

}  // namespace tessera::python
