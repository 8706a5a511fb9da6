// mx.compile (MLX's signature: fun, inputs=None, outputs=None, shapeless=False), usable as a
// decorator with or without arguments and on methods; disable_compile / enable_compile.
// Arguments are pytrees: their arrays are the compiled function's inputs, every other leaf (int,
// float, bool, str, None) is a constant of the signature, so a new value traces again. State
// named by `inputs` / `outputs` (e.g. a model and an optimizer) is read before and written back
// after every call, as MLX does.
#include <nanobind/stl/function.h>

#include <bit>
#include <unordered_map>

#include "convert.h"
#include "trees.h"

namespace tessera::python {

namespace {

enum Tag : uint64_t { kList = 1, kTuple, kDict, kArray, kInt, kFloat, kBool, kNone, kStr, kEnd };

// The signature of a tree's structure and non-array leaves; arrays are collected in order.
void signature(nb::handle t, std::vector<uint64_t>& sig, std::vector<array>& arrays) {
  if (nb::isinstance<array>(t)) {
    sig.push_back(kArray);
    arrays.push_back(nb::cast<array>(t));
  } else if (nb::isinstance<nb::list>(t) || nb::isinstance<nb::tuple>(t)) {
    sig.push_back(nb::isinstance<nb::list>(t) ? kList : kTuple);
    for (nb::handle e : t) signature(e, sig, arrays);
    sig.push_back(kEnd);
  } else if (nb::isinstance<nb::dict>(t)) {
    sig.push_back(kDict);
    for (auto [k, v] : nb::borrow<nb::dict>(t)) {
      sig.push_back(static_cast<uint64_t>(nb::hash(k)));
      signature(v, sig, arrays);
    }
    sig.push_back(kEnd);
  } else if (nb::isinstance<nb::bool_>(t)) {
    sig.insert(sig.end(), {kBool, nb::cast<bool>(t) ? 1u : 0u});
  } else if (nb::isinstance<nb::int_>(t)) {
    sig.insert(sig.end(), {kInt, static_cast<uint64_t>(nb::hash(t))});
  } else if (nb::isinstance<nb::float_>(t)) {
    sig.insert(sig.end(), {kFloat, std::bit_cast<uint64_t>(nb::cast<double>(t))});
  } else if (nb::isinstance<nb::str>(t)) {
    sig.insert(sig.end(), {kStr, static_cast<uint64_t>(nb::hash(t))});
  } else if (t.is_none()) {
    sig.push_back(kNone);
  } else {
    throw std::invalid_argument(
        "[compile] the arguments of a compiled function must be trees (lists, tuples, dicts) of "
        "arrays and constants (int, float, bool, str, None); got an object of type " +
        nb::cast<std::string>(nb::str(t.type().attr("__name__"))) +
        ". Pass its arrays, or capture it in the function.");
  }
}

// Replaces, in place, the arrays of the state trees compile was given by leaves[0]...
void fill_state(nb::handle t, const std::vector<array>& leaves) {
  tree_fill_state(t, leaves, "[compile] state in `inputs` / `outputs` must be held in lists or "
                  "dicts (a tuple's arrays cannot be updated in place)");
}

// A tree with the structure of `t` whose arrays are stand-ins (what a replay fills in).
nb::object structure_of(nb::handle t) {
  const size_t n = tree_arrays(t).size();
  return tree_replace(t, std::vector<array>(n, array(0.0f)));
}

struct PyCompiled {
  nb::object fun;
  nb::object inputs, outputs;  // state trees (or None)
  bool shapeless;
  std::uintptr_t id;
  // Output structure (and how many of the outputs are the function's own) per signature.
  std::unordered_map<std::string, std::pair<nb::object, size_t>> structures;

  PyCompiled(nb::callable f, nb::object in, nb::object out, bool sl)
      : fun(std::move(f)), inputs(std::move(in)), outputs(std::move(out)), shapeless(sl) {
    static std::atomic<std::uintptr_t> next{(std::uintptr_t{1} << 62) + (std::uintptr_t{1} << 61)};
    id = next++;
  }
  ~PyCompiled() { detail::compile_erase(id); }

  template <class F>
  void visit_refs(F&& f) {
    f(fun);
    f(inputs);
    f(outputs);
  }

  nb::object call(nb::args args, nb::kwargs kwargs) {
    std::vector<uint64_t> sig;
    std::vector<array> arrays;
    signature(args, sig, arrays);
    signature(kwargs, sig, arrays);
    const size_t n_args = arrays.size();
    const std::vector<array> state = inputs.is_none() ? std::vector<array>{} : tree_arrays(inputs);
    arrays.insert(arrays.end(), state.begin(), state.end());
    // The key of the output structure: the signature and the inputs' dtypes and shapes (ranks).
    std::string key(reinterpret_cast<const char*>(sig.data()), sig.size() * sizeof(uint64_t));
    for (auto& a : arrays) {
      key += static_cast<char>(a.dtype().val());
      key += static_cast<char>(a.ndim());
      if (!shapeless) key.append(reinterpret_cast<const char*>(a.shape().data()), a.ndim() * 4);
    }
    VecFn traced = [&](const std::vector<array>& xs) {
      std::vector<array> arg_leaves(xs.begin(), xs.begin() + static_cast<long>(n_args));
      std::vector<array> state_leaves(xs.begin() + static_cast<long>(n_args), xs.end());
      size_t pos = 0;
      nb::object a = tree_replace(args, arg_leaves, &pos);
      nb::object kw = tree_replace(kwargs, arg_leaves, &pos);
      // The containers hold no stand-ins afterwards (state the function added is replaced when
      // the outputs are written back).
      auto restore = [&] {
        if (!inputs.is_none() && tree_arrays(inputs).size() == state.size()) fill_state(inputs, state);
      };
      if (!inputs.is_none()) fill_state(inputs, state_leaves);
      nb::object result;
      std::vector<array> outs, new_state;
      try {
        result = fun(*nb::borrow<nb::tuple>(a), **nb::borrow<nb::dict>(kw));
        outs = tree_arrays(result);
        if (!outputs.is_none()) new_state = tree_arrays(outputs);
      } catch (...) {
        restore();
        throw;
      }
      restore();
      structures[key] = {structure_of(result), outs.size()};
      outs.insert(outs.end(), new_state.begin(), new_state.end());
      return outs;
    };
    std::vector<array> outs = detail::compile(traced, id, shapeless, sig)(arrays);
    auto it = structures.find(key);
    if (it == structures.end()) {
      // Compilation is disabled, or the graph was traced by an earlier object of the same id.
      throw std::logic_error("[compile] no output structure recorded for this signature");
    }
    const size_t n_out = it->second.second;
    if (!outputs.is_none()) {
      fill_state(outputs, std::vector<array>(outs.begin() + static_cast<long>(n_out), outs.end()));
    }
    outs.erase(outs.begin() + static_cast<long>(n_out), outs.end());
    return tree_replace(it->second.first, outs);
  }
};

nb::object bind_method(nb::handle self, nb::handle instance) {
  if (instance.is_none()) return nb::borrow(self);
  return nb::module_::import_("functools").attr("partial")(self, instance);
}

}  // namespace

void init_compile(nb::module_& m) {
  nb::class_<PyCompiled>(m, "_CompiledFunction", nb::type_slots(gc_slots<PyCompiled>),
                         "A function compiled by :func:`compile`; call it as the original.")
      .def("__call__", &PyCompiled::call)
      .def("__get__", [](nb::handle self, nb::handle instance, nb::handle) {
        return bind_method(self, instance);
      }, "instance"_a.none(), "owner"_a.none() = nb::none())
      .def_prop_ro("__wrapped__", [](const PyCompiled& c) { return c.fun; })
      // The original's docstring, name and qualified name (instances of the class have no
      // __name__ of their own, so __getattr__ supplies it).
      .def_prop_ro("__doc__", [](const PyCompiled& c) { return nb::getattr(c.fun, "__doc__", nb::none()); })
      .def("__getattr__", [](const PyCompiled& c, const std::string& name) -> nb::object {
        if (name == "__name__" || name == "__qualname__") return nb::getattr(c.fun, name.c_str());
        throw nb::attribute_error(("'_CompiledFunction' object has no attribute '" + name + "'").c_str());
      });


  m.def(
      "compile",
      [](nb::object fun, nb::object inputs, nb::object outputs, bool shapeless) -> nb::object {
        auto make = [inputs, outputs, shapeless](nb::object f) -> nb::object {
          if (!PyCallable_Check(f.ptr())) {
            throw nb::type_error("[compile] expected a function to compile");
          }
          return nb::cast(new PyCompiled(nb::borrow<nb::callable>(f), inputs, outputs, shapeless),
                          nb::rv_policy::take_ownership);
        };
        if (fun.is_none()) return nb::cpp_function(make);  // @mx.compile(shapeless=True)
        return make(fun);
      },
      "fun"_a = nb::none(), "inputs"_a = nb::none(), "outputs"_a = nb::none(),
      "shapeless"_a = false,
      R"(Returns a compiled function which produces the same output as ``fun``.

Args:
    fun (Callable): A function which takes a variable number of :class:`array` or trees of
        :class:`array` and returns a variable number of :class:`array` or trees of
        :class:`array`. Without it, ``compile`` returns a decorator.
    inputs (list or dict, optional): These inputs will be captured during the function
        compilation along with the inputs to ``fun``. The ``inputs`` can be a :obj:`list` or a
        :obj:`dict` containing arbitrarily nested lists, dictionaries, or arrays. Leaf nodes
        that are not :obj:`array` are ignored. Default: ``None``
    outputs (list or dict, optional): These outputs will be captured and updated in a
        compiled function. The ``outputs`` can be a :obj:`list` or a :obj:`dict` containing
        arbitrarily nested lists, dictionaries, or arrays. Leaf nodes that are not
        :obj:`array` are ignored. Default: ``None``
    shapeless (bool, optional): A function compiled with the ``shapeless`` option enabled will
        not be recompiled when the input shape changes. Not all functions can be compiled with
        ``shapeless`` enabled. Attempting to compile such functions with shapeless enabled
        will throw. Default: ``False``

Returns:
    Callable: A compiled function which has the same input arguments as ``fun`` and returns
    the same output(s).)");
  m.def("disable_compile", &disable_compile,
        "Globally disable compilation. Setting the environment variable ``MLX_DISABLE_COMPILE`` "
        "(or ``TESSERA_DISABLE_COMPILE``) to 1 also disables it.");
  m.def("enable_compile", &enable_compile,
        "Globally enable compilation. This will override the environment variable "
        "``MLX_DISABLE_COMPILE``.");
}

}  // namespace tessera::python
