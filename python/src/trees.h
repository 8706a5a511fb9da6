// Pytrees: nested dicts, lists and tuples whose leaves are arrays (other leaves are carried
// through unchanged), as MLX's transforms take and return them.
#pragma once

#include <functional>

#include "common.h"

namespace tessera::python {

// The array leaves of `tree` in order (dicts in insertion order).
std::vector<array> tree_arrays(nb::handle tree);
// As tree_arrays, but any other leaf is a ValueError naming `what` and the leaf's type (MLX's
// rule for the trees a gradient is taken of). Empty containers are fine.
std::vector<array> tree_arrays_only(nb::handle tree, const std::string& what);
// `tree` with each array leaf replaced, in order, by f(leaf). List and tuple subclasses keep
// their types; dict subclasses (an nn.Module) too with `keep_dict_types` (a shallow copy), else
// they become dicts (as MLX returns gradients).
nb::object tree_map_arrays(nb::handle tree, const std::function<nb::object(nb::handle)>& f,
                           bool keep_dict_types = true);
// `tree` with its array leaves replaced, in order, by `leaves[*pos]...` (advances *pos).
nb::object tree_replace(nb::handle tree, const std::vector<array>& leaves, size_t* pos,
                        bool keep_dict_types = true);
inline nb::object tree_replace(nb::handle tree, const std::vector<array>& leaves) {
  size_t pos = 0;
  return tree_replace(tree, leaves, &pos);
}
// Writes leaves[*pos]... over the array leaves of `tree` in place, as MLX's transforms do with
// the trees they differentiate: lists and dicts (subclasses too: a model) are the caller's own
// objects, changed in place; tuples are rebuilt. Returns the tree (a new one for a tuple). The
// Python objects written are appended to `written` and those they replaced to `replaced`.
nb::object tree_fill(nb::handle tree, const std::vector<array>& leaves, size_t* pos,
                     std::vector<nb::object>* written, std::vector<nb::object>* replaced);
// Writes leaves[0]... over the array leaves of `tree` in place (lists and dicts, subclasses too),
// as compile updates the state it was given; an array directly inside a tuple is
// std::invalid_argument(tuple_error).
void tree_fill_state(nb::handle tree, const std::vector<array>& leaves,
                     const std::string& tuple_error);
// Undoes tree_fill: wherever `written[i]` still stands in `tree` (the same Python object),
// `replaced[i]` goes back; whatever the function stored in the containers meanwhile stays.
nb::object tree_restore(nb::handle tree, const std::vector<nb::object>& written,
                        const std::vector<nb::object>& replaced);
// Calls f(leaf, prefix_value) for every array leaf of `tree`, where `prefix` is a tree prefix of
// `tree` (an int or None at some node applies to everything below it).
void tree_visit_with_prefix(nb::handle tree, nb::handle prefix,
                            const std::function<void(nb::handle prefix_value)>& f);

}  // namespace tessera::python
