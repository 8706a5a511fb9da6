// Transforms over pytrees: eval, async_eval, grad, value_and_grad (argnums / argnames), vjp, jvp,
// vmap (in_axes / out_axes trees), custom_function (with .vjp / .jvp / .vmap) and checkpoint.
// The traced Python function runs with the GIL held; evaluation releases it.
#include <nanobind/stl/function.h>
#include <nanobind/stl/string.h>

#include <set>

#include "convert.h"
#include "trees.h"

namespace tessera::python {

namespace {

void eval_trees(const nb::args& trees, bool async) {
  std::vector<array> all;
  for (nb::handle t : trees) {
    auto leaves = tree_arrays(t);
    all.insert(all.end(), leaves.begin(), leaves.end());
  }
  blocking([&] { async ? async_eval(all) : eval(all); });
}

using IntOrVec = std::variant<int, std::vector<int>>;
using StrOrVec = std::variant<std::string, std::vector<std::string>>;

struct GradSpec {
  std::vector<int> argnums;
  std::vector<std::string> argnames;
};

GradSpec grad_spec(const std::optional<IntOrVec>& argnums, const StrOrVec& argnames) {
  GradSpec g;
  if (auto* s = std::get_if<std::string>(&argnames)) {
    g.argnames = {*s};
  } else {
    g.argnames = std::get<std::vector<std::string>>(argnames);
  }
  if (!argnums) {
    if (g.argnames.empty()) g.argnums = {0};
  } else if (auto* i = std::get_if<int>(&*argnums)) {
    g.argnums = {*i};
  } else {
    g.argnums = std::get<std::vector<int>>(*argnums);
  }
  if (g.argnums.empty() && g.argnames.empty()) {
    throw std::invalid_argument("[grad] argnums and argnames are both empty: name at least one "
                                "argument to differentiate with respect to");
  }
  if (std::set<int>(g.argnums.begin(), g.argnums.end()).size() != g.argnums.size()) {
    throw std::invalid_argument("[grad] argnums has a repeated index");
  }
  return g;
}

// What grad, value_and_grad, vmap and checkpoint return: the user's function, held where the
// cycle collector sees it (gc_slots), and the transform, which gets it on each call.
struct PyTransformed {
  using Apply = std::function<nb::object(nb::handle fun, nb::args, nb::kwargs)>;
  nb::object fun;
  Apply apply;
  nb::object call(nb::args args, nb::kwargs kwargs) const {
    return apply(fun, std::move(args), std::move(kwargs));
  }
  template <class F>
  void visit_refs(F&& f) { f(fun); }
};

nb::object transformed(nb::object fun, PyTransformed::Apply apply) {
  return nb::cast(PyTransformed{std::move(fun), std::move(apply)});
}

// The callable value_and_grad / grad return.
nb::object make_value_and_grad(nb::callable fun, GradSpec spec, bool grad_only) {
  const char* tag = grad_only ? "[grad]" : "[value_and_grad]";
  auto call = [spec, grad_only, tag](nb::handle fun, nb::args args, nb::kwargs kwargs) -> nb::object {
    const int nargs = static_cast<int>(args.size());
    std::vector<int> nums = spec.argnums;
    for (auto& i : nums) {
      if (i < 0) i += nargs;
      if (i < 0 || i >= nargs) {
        throw std::invalid_argument(std::string(tag) + " argnums names argument " +
                                    std::to_string(i) + " but the function got " +
                                    std::to_string(nargs) + " positional arguments");
      }
    }
    std::vector<array> leaves;
    std::vector<size_t> counts;
    for (int i : nums) {
      auto l = tree_arrays_only(args[static_cast<size_t>(i)],
                                std::string(tag) + " argument " + std::to_string(i));
      counts.push_back(l.size());
      leaves.insert(leaves.end(), l.begin(), l.end());
    }
    for (const auto& name : spec.argnames) {
      if (!kwargs.contains(name.c_str())) {
        throw std::invalid_argument(std::string(tag) + " argnames names '" + name +
                                    "' but the function was not called with that keyword");
      }
      auto l = tree_arrays_only(kwargs[name.c_str()],
                                std::string(tag) + " keyword argument '" + name + "'");
      counts.push_back(l.size());
      leaves.insert(leaves.end(), l.begin(), l.end());
    }
    nb::object out_tree;
    VecFn f = [&](const std::vector<array>& xs) {
      nb::list new_args;
      for (nb::handle a : args) new_args.append(a);
      nb::dict new_kwargs;
      for (auto [k, v] : kwargs) new_kwargs[k] = v;
      // As MLX, the function sees the caller's own lists and dicts with the tracers written
      // into them (so what it stores there stays), and the arrays it was given are put back
      // afterwards, however the call ends.
      size_t pos = 0;
      std::vector<nb::object> written, replaced;
      for (int i : nums) {
        const auto k = static_cast<size_t>(i);
        new_args[k] = tree_fill(args[k], xs, &pos, &written, &replaced);
      }
      for (const auto& name : spec.argnames) {
        new_kwargs[name.c_str()] = tree_fill(kwargs[name.c_str()], xs, &pos, &written, &replaced);
      }
      auto restore = [&] {
        for (int i : nums) tree_restore(new_args[static_cast<size_t>(i)], written, replaced);
        for (const auto& name : spec.argnames) {
          tree_restore(new_kwargs[name.c_str()], written, replaced);
        }
      };
      try {
        out_tree = fun(*nb::tuple(new_args), **new_kwargs);
      } catch (...) {
        restore();
        throw;
      }
      restore();
      if (grad_only && !nb::isinstance<array>(out_tree)) {  // as MLX: aux values need value_and_grad
        throw std::invalid_argument(
            std::string(tag) + " the function must return a scalar array, got a " +
            nb::cast<std::string>(nb::str(out_tree.type().attr("__name__"))) +
            "; use value_and_grad for a function that returns (value, auxiliary values)");
      }
      auto outs = tree_arrays(out_tree);
      if (outs.empty() || outs[0].size() != 1 || outs[0].ndim() != 0) {
        throw std::invalid_argument(
            std::string(tag) + " the function must return a scalar array, or a tuple whose first "
            "element is one; got " +
            (outs.empty() ? std::string("no array") : "an array of shape " +
                                                          nb::cast<std::string>(nb::str(nb::cast(outs[0].shape())))));
      }
      return outs;
    };
    std::vector<int> all(leaves.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    std::vector<array> values, grads;
    if (leaves.empty()) {
      // Nothing to differentiate: the gradient trees are the (array-free) arguments as given.
      values = f({});
    } else {
      std::tie(values, grads) = value_and_grad(f, all)(leaves);
    }
    // Gradients of a dict subclass (a model) are plain dicts, as MLX returns them.
    size_t pos = 0;
    nb::object positional;
    if (nums.size() == 1) {
      positional = tree_replace(args[static_cast<size_t>(nums[0])], grads, &pos, false);
    } else if (nums.size() > 1) {
      nb::list g;
      for (int i : nums) g.append(tree_replace(args[static_cast<size_t>(i)], grads, &pos, false));
      positional = nb::tuple(g);
    } else {
      positional = nb::none();
    }
    nb::object grads_py = positional;
    if (!spec.argnames.empty()) {
      nb::dict kw;
      for (const auto& name : spec.argnames) {
        kw[name.c_str()] = tree_replace(kwargs[name.c_str()], grads, &pos, false);
      }
      grads_py = nb::make_tuple(positional, kw);
    }
    if (grad_only) return grads_py;
    return nb::make_tuple(tree_replace(out_tree, values), grads_py);
  };
  return transformed(std::move(fun), std::move(call));
}

// vjp / jvp take lists of arrays (as MLX) and a function of positional arrays.
VecFn vec_fn(nb::callable fun, const char* tag) {
  return [fun, tag](const std::vector<array>& xs) {
    nb::list args;
    for (const auto& x : xs) args.append(nb::cast(x));
    nb::object out = fun(*nb::tuple(args));
    auto outs = tree_arrays(out);
    if (outs.empty()) throw std::invalid_argument(std::string(tag) + " the function returned no arrays");
    return outs;
  };
}

// One axis per array of `tree` (as tree_arrays orders them), from `spec`, a tree prefix of it
// whose values are ints or None; a tree that is a lone array may also take a tuple of one value
// (as MLX). A negative axis counts from the end of its array (arrays[i]); None is -1, "not
// batched", as the C++ vmap reads it.
std::vector<int> axes_for(nb::handle tree, nb::handle spec, const std::vector<array>& arrays,
                          const char* which) {
  if (nb::isinstance<array>(tree) && nb::isinstance<nb::tuple>(spec) && nb::len(spec) == 1) {
    spec = nb::borrow<nb::tuple>(spec)[0];
  }
  std::vector<int> out;
  tree_visit_with_prefix(tree, spec, [&](nb::handle v) {
    if (v.is_none()) {
      out.push_back(-1);
      return;
    }
    if (!nb::isinstance<nb::int_>(v) || nb::isinstance<nb::bool_>(v)) {
      throw std::invalid_argument(std::string("[vmap] ") + which +
                                  " must be ints or None (in a tree matching the arguments), got " +
                                  nb::cast<std::string>(nb::repr(v)));
    }
    const array& a = arrays.at(out.size());
    const int rank = static_cast<int>(a.ndim());
    const int axis = nb::cast<int>(v);
    if (axis < -rank || axis >= rank) {
      throw std::invalid_argument(std::string("[vmap] ") + which + " " + std::to_string(axis) +
                                  " is out of range for an array of " + std::to_string(rank) +
                                  " dims");
    }
    out.push_back(axis < 0 ? axis + rank : axis);
  });
  return out;
}

nb::object make_vmap(nb::callable fun, nb::object in_axes, nb::object out_axes) {
  auto call = [in_axes, out_axes](nb::handle fun, nb::args args, nb::kwargs kwargs) -> nb::object {
    if (kwargs.size() != 0) {
      throw nb::type_error("[vmap] a vmapped function takes positional arguments only (as MLX's); "
                           "bind keyword arguments with functools.partial first");
    }
    // in_axes: an int / None for every argument, or a sequence with one tree prefix per argument.
    nb::object spec = in_axes;
    if (nb::isinstance<nb::list>(in_axes) || nb::isinstance<nb::tuple>(in_axes)) {
      if (nb::len(in_axes) != args.size()) {
        throw std::invalid_argument("[vmap] in_axes has " + std::to_string(nb::len(in_axes)) +
                                    " entries for " + std::to_string(args.size()) + " arguments");
      }
      spec = nb::tuple(in_axes);
    } else {
      nb::list rep;
      for (size_t i = 0; i < args.size(); ++i) rep.append(in_axes);
      spec = nb::tuple(rep);
    }
    auto leaves = tree_arrays(args);
    auto in_ax = axes_for(args, spec, leaves, "in_axes");
    nb::object out_tree;
    VecFn f = [&](const std::vector<array>& xs) {
      nb::object new_args = tree_replace(args, xs);
      out_tree = fun(*nb::borrow<nb::tuple>(new_args));
      return tree_arrays(out_tree);
    };
    auto outs = vmap(f, in_ax, {})(leaves);  // batch axis 0 first; moved below
    auto out_ax = axes_for(out_tree, out_axes, outs, "out_axes");
    for (size_t i = 0; i < outs.size(); ++i) {
      if (out_ax[i] < 0) {
        throw std::invalid_argument("[vmap] out_axes of None is not supported: every output "
                                    "of a vmapped function is batched");
      }
      if (out_ax[i] != 0) outs[i] = moveaxis(outs[i], 0, out_ax[i]);
    }
    return tree_replace(out_tree, outs);
  };
  return transformed(std::move(fun), std::move(call));
}

// custom_function: a decorator whose object calls `fun` and takes rules with .vjp / .jvp / .vmap.
// As MLX, a rule of a one-argument function receives that argument itself (not a 1-tuple),
// and the tangents of the inputs not differentiated are None.
nb::object rule_args(const nb::object& args) {
  return nb::len(args) == 1 ? nb::object(args[0]) : args;
}

struct PyCustomFunction {
  explicit PyCustomFunction(nb::callable f) : fun(std::move(f)) {}
  nb::object fun;
  std::optional<nb::object> vjp_rule, jvp_rule, vmap_rule;

  template <class F>
  void visit_refs(F&& f) {
    f(fun);
    for (auto* r : {&vjp_rule, &jvp_rule, &vmap_rule}) {
      if (*r) f(**r);
    }
  }

  nb::object call(nb::args args) const {
    auto leaves = tree_arrays(args);
    // Everything the rules capture lives as long as the graph does (see PyRef).
    PyRef out_tree, args_obj(nb::borrow(args)), f(fun);
    VecFn vf = [f, args_obj, out_tree](const std::vector<array>& xs) {
      nb::gil_scoped_acquire gil;
      nb::object new_args = tree_replace(*args_obj, xs);
      *out_tree = (*f)(*nb::borrow<nb::tuple>(new_args));
      return tree_arrays(*out_tree);
    };
    std::optional<CustomVjpFn> vjp_fn;
    std::optional<CustomJvpFn> jvp_fn;
    std::optional<CustomVmapFn> vmap_fn;
    if (vjp_rule) {
      PyRef r(*vjp_rule);
      vjp_fn = [r, args_obj, out_tree](const std::vector<array>& primals,
                                        const std::vector<array>& cotangents,
                                        const std::vector<array>& outputs) {
        nb::gil_scoped_acquire gil;
        nb::object p = rule_args(tree_replace(*args_obj, primals));
        nb::object c = tree_replace(*out_tree, cotangents);
        nb::object o = tree_replace(*out_tree, outputs);
        nb::object g = (*r)(p, c, o);
        auto res = tree_arrays(g);
        if (res.size() != primals.size()) {
          throw std::invalid_argument("[custom_function] the vjp returned " + std::to_string(res.size()) +
                                      " arrays for " + std::to_string(primals.size()) + " primals");
        }
        return res;
      };
    }
    if (jvp_rule) {
      PyRef r(*jvp_rule);
      jvp_fn = [r, args_obj](const std::vector<array>& primals, const std::vector<array>& tangents,
                             const std::vector<int>& argnums) {
        nb::gil_scoped_acquire gil;
        nb::object t = tree_replace(*args_obj, primals);
        // Leaves in the order of the primals: the differentiated ones get their tangent.
        std::vector<nb::object> by_leaf(primals.size(), nb::none());
        for (size_t k = 0; k < argnums.size(); ++k) {
          by_leaf[static_cast<size_t>(argnums[k])] = nb::cast(tangents[k]);
        }
        size_t leaf = 0;
        nb::object tans = tree_map_arrays(t, [&](nb::handle) { return by_leaf[leaf++]; });
        nb::object g = (*r)(rule_args(t), rule_args(tans));
        return tree_arrays(g);
      };
    }
    if (vmap_rule) {
      PyRef r(*vmap_rule);
      vmap_fn = [r, args_obj](const std::vector<array>& inputs, const std::vector<int>& axes) {
        nb::gil_scoped_acquire gil;
        // The axes as a tree of the arguments (None for an input not batched).
        size_t leaf = 0;
        nb::object ax = tree_map_arrays(*args_obj, [&](nb::handle) {
          const int a = axes[leaf++];
          return a < 0 ? nb::none() : nb::cast(a);
        });
        nb::object res = (*r)(rule_args(tree_replace(*args_obj, inputs)), rule_args(ax));
        if (!nb::isinstance<nb::tuple>(res) || nb::len(res) != 2) {
          throw std::invalid_argument("[custom_function] the vmap rule must return (outputs, out_axes)");
        }
        auto outs = tree_arrays(res[0]);
        std::vector<int> oax;
        nb::handle axes_h = res[1];
        if (nb::isinstance<nb::int_>(axes_h) || axes_h.is_none()) {
          oax.assign(outs.size(), axes_h.is_none() ? -1 : nb::cast<int>(axes_h));
        } else {
          for (nb::handle a : axes_h) oax.push_back(a.is_none() ? -1 : nb::cast<int>(a));
        }
        return std::make_pair(outs, oax);
      };
    }
    auto outs = custom_function(vf, vjp_fn, jvp_fn, vmap_fn)(leaves);
    return tree_replace(*out_tree, outs);
  }
};

}  // namespace

void init_transforms(nb::module_& m) {
  nb::class_<PyTransformed>(m, "_TransformedFunction", nb::type_slots(gc_slots<PyTransformed>),
                            "A function transformed by grad, value_and_grad, vmap or checkpoint.")
      .def("__call__", &PyTransformed::call);
  m.def("eval", [](nb::args trees) { eval_trees(trees, false); },
        "Evaluates the arrays in the given trees (releases the GIL while computing).");
  m.def("async_eval", [](nb::args trees) { eval_trees(trees, true); },
        "Starts evaluating the arrays in the given trees and returns at once.");
  m.def(
      "value_and_grad",
      [](nb::callable fun, const std::optional<IntOrVec>& argnums, const StrOrVec& argnames) {
        return make_value_and_grad(std::move(fun), grad_spec(argnums, argnames), false);
      },
      "fun"_a, "argnums"_a = nb::none(), "argnames"_a = std::vector<std::string>{},
      "A function returning (fun's value, its gradient w.r.t. the arguments in argnums / "
      "argnames). fun returns a scalar array or a tuple whose first element is one.");
  m.def(
      "grad",
      [](nb::callable fun, const std::optional<IntOrVec>& argnums, const StrOrVec& argnames) {
        return make_value_and_grad(std::move(fun), grad_spec(argnums, argnames), true);
      },
      "fun"_a, "argnums"_a = nb::none(), "argnames"_a = std::vector<std::string>{},
      "A function returning the gradient of fun (which returns a scalar array) w.r.t. argnums /\n"
      "argnames.");
  m.def(
      "vjp",
      [](nb::callable fun, const std::vector<array>& primals, const std::vector<array>& cotangents) {
        return vjp(vec_fn(std::move(fun), "[vjp]"), primals, cotangents);
      },
      "fun"_a, "primals"_a, "cotangents"_a,
      "(fun(*primals), the vector-Jacobian products of the cotangents).");
  m.def(
      "jvp",
      [](nb::callable fun, const std::vector<array>& primals, const std::vector<array>& tangents) {
        return jvp(vec_fn(std::move(fun), "[jvp]"), primals, tangents);
      },
      "fun"_a, "primals"_a, "tangents"_a,
      "(fun(*primals), the Jacobian-vector products of the tangents).");
  m.def("vmap", &make_vmap, "fun"_a, "in_axes"_a = 0, "out_axes"_a = 0,
        "fun vectorised over the axes in_axes of its inputs (None: not batched), with the batch "
        "at out_axes of its outputs.");
  m.def(
      "checkpoint",
      [](nb::callable fun) {
        return transformed(std::move(fun), [](nb::handle fun, nb::args args, nb::kwargs kwargs) {
          // Positional and keyword arguments' arrays are the inputs (as MLX).
          nb::object all = nb::make_tuple(args, kwargs);
          auto leaves = tree_arrays(all);
          // The backward pass calls the function again, after this call returned (PyRef).
          PyRef out_tree, args_obj(all), f(nb::borrow(fun));
          auto outs = checkpoint([f, args_obj, out_tree](const std::vector<array>& xs) {
            nb::gil_scoped_acquire gil;
            nb::object a = tree_replace(*args_obj, xs);
            *out_tree = (*f)(*nb::borrow<nb::tuple>(a[0]), **nb::borrow<nb::dict>(a[1]));
            return tree_arrays(*out_tree);
          })(leaves);
          return tree_replace(*out_tree, outs);
        });
      },
      "fun"_a, "fun, recomputing its intermediates in the backward pass instead of keeping them.");

  nb::class_<PyCustomFunction>(m, "custom_function", nb::type_slots(gc_slots<PyCustomFunction>),
                               "A function with its own vjp / jvp / vmap rules (decorator).")
      .def(nb::init<nb::callable>(), "fun"_a)
      .def("__call__", &PyCustomFunction::call)
      .def("vjp", [](PyCustomFunction& self, nb::callable rule) { self.vjp_rule = rule; return rule; },
           "rule"_a, "Decorates rule(primals, cotangents, outputs) -> the primals' cotangents.")
      .def("jvp", [](PyCustomFunction& self, nb::callable rule) { self.jvp_rule = rule; return rule; },
           "rule"_a, "Decorates rule(primals, tangents) -> the outputs' tangents.")
      .def("vmap", [](PyCustomFunction& self, nb::callable rule) { self.vmap_rule = rule; return rule; },
           "rule"_a, "Decorates rule(inputs, axes) -> (outputs, out_axes).");
}

}  // namespace tessera::python
