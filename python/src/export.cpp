// export_function, import_function, exporter and FunctionExporter (tessera/export.h), with MLX
// 0.32.4's Python conventions: inputs are positional and keyword arrays, or one tuple / list of
// arrays and / or one dict of arrays; an imported function returns a tuple.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unordered_map.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "tessera/export.h"

namespace tessera::python {

namespace {

std::pair<Args, Kwargs> inputs_of(const nb::args& args, const nb::kwargs& kwargs,
                                  const char* who) {
  auto fail = [who] {
    throw std::invalid_argument(
        std::string(who) +
        " Inputs can either be a variable number of positional and keyword arrays or a single "
        "tuple and/or dictionary of arrays.");
  };
  Args a;
  Kwargs k;
  auto array_list = [&](nb::handle seq) {
    if (!nb::isinstance<nb::tuple>(seq) && !nb::isinstance<nb::list>(seq)) return false;
    for (nb::handle x : seq) {
      if (!nb::isinstance<array>(x)) fail();
      a.push_back(nb::cast<array>(x));
    }
    return true;
  };
  auto array_dict = [&](nb::handle d) {
    if (!nb::isinstance<nb::dict>(d)) return false;
    for (auto [key, v] : nb::borrow<nb::dict>(d)) {
      if (!nb::isinstance<nb::str>(key) || !nb::isinstance<array>(v)) fail();
      k.insert_or_assign(nb::cast<std::string>(key), nb::cast<array>(v));
    }
    return true;
  };
  if (args.size() == 0 || nb::isinstance<array>(args[0])) {
    for (nb::handle x : args) {
      if (!nb::isinstance<array>(x)) fail();
      a.push_back(nb::cast<array>(x));
    }
    if (!array_dict(kwargs)) fail();
  } else if (args.size() == 1 && kwargs.size() == 0) {
    if (!array_list(args[0]) && !array_dict(args[0])) fail();
  } else if (args.size() == 2 && kwargs.size() == 0) {
    if (!array_list(args[0]) || !array_dict(args[1])) fail();
  } else {
    fail();
  }
  return {std::move(a), std::move(k)};
}

ExportFn wrap(nb::callable fun) {
  return [fun = std::move(fun)](const Args& args, const Kwargs& kwargs) {
    nb::gil_scoped_acquire gil;
    nb::tuple py_args(nb::cast(args));
    nb::dict py_kwargs;
    for (const auto& [k, v] : kwargs) py_kwargs[k.c_str()] = nb::cast(v);
    nb::object out = fun(*py_args, **py_kwargs);
    std::vector<array> outputs;
    if (nb::isinstance<array>(out)) {
      outputs.push_back(nb::cast<array>(out));
    } else if (!nb::try_cast(out, outputs)) {
      throw std::invalid_argument(
          "[export_function] Outputs can be either a single array, a tuple, or a list of arrays.");
    }
    return outputs;
  };
}

// The exporter object: holds the function (a Python reference) until closed.
struct PyExporter {
  std::optional<FunctionExporter> exporter;
  void close() {
    if (exporter) exporter->close();
  }
};

}  // namespace

void init_export(nb::module_& m) {
  m.def(
      "export_function",
      [](nb::object file, nb::callable fun, nb::args args, bool shapeless,
         std::optional<std::string> metadata, nb::kwargs kwargs) {
        if (!nb::isinstance<nb::str>(file) && !nb::hasattr(file, "__fspath__")) {
          throw std::invalid_argument(
              "[export_function] Tessera exports to a file (a str or os.PathLike path); MLX's "
              "callback form (a callable receiving the graph) is not supported");
        }
        auto path = nb::cast<std::string>(nb::module_::import_("os").attr("fspath")(file));
        auto [a, k] = inputs_of(args, kwargs, "[export_function]");
        export_function(path, wrap(fun), a, k, shapeless, metadata.value_or(""));
      },
      nb::arg("file"), nb::arg("fun"), nb::arg("args"), nb::kw_only(),
      nb::arg("shapeless") = false, nb::arg("metadata") = nb::none(), nb::arg("kwargs"),
      nb::sig("def export_function(file_or_callback: str | Callable, fun: Callable, *args, "
              "shapeless: bool = False, metadata: str | None = None, **kwargs) -> None"),
      "Export a function to a file: traced on the example arrays (*args, **kwargs, or one "
      "tuple and/or dict of arrays); ``shapeless`` lets the file take other shapes of the same "
      "ranks; ``metadata`` is a string kept in the file (import_function(..., "
      "return_metadata=True)).");
  m.def(
      "import_function",
      [](nb::object file, bool return_metadata) -> nb::object {
        auto path = nb::cast<std::string>(nb::module_::import_("os").attr("fspath")(file));
        auto imported = import_function(path);
        std::string metadata = imported.metadata();
        nb::object fn = nb::cpp_function(
            [imported = std::move(imported)](nb::args args, nb::kwargs kwargs) {
              auto [a, k] = inputs_of(args, kwargs, "[import_function::call]");
              return nb::tuple(nb::cast(imported(a, k)));
            },
            nb::arg("args"), nb::arg("kwargs"));
        if (return_metadata) return nb::make_tuple(fn, metadata);
        return fn;
      },
      nb::arg("file"), nb::arg("return_metadata") = false,
      nb::sig("def import_function(file: str, return_metadata: bool = False) -> "
              "Callable | tuple[Callable, str]"),
      "Import a function export_function wrote; it returns a tuple of arrays.");
  nb::class_<PyExporter>(m, "FunctionExporter",
                         "Exports several traces of one function to one file (mx.exporter).")
      .def("close", &PyExporter::close)
      .def("__enter__", [](nb::object self) { return self; })
      .def(
          "__exit__",
          [](PyExporter& e, nb::handle, nb::handle, nb::handle) { e.close(); },
          nb::arg("exc_type") = nb::none(), nb::arg("exc_value") = nb::none(),
          nb::arg("traceback") = nb::none())
      .def("__call__", [](PyExporter& e, nb::args args, nb::kwargs kwargs) {
        auto [a, k] = inputs_of(args, kwargs, "[export_function]");
        (*e.exporter)(a, k);
      });
  m.def(
      "exporter",
      [](nb::object file, nb::callable fun, bool shapeless, std::optional<std::string> metadata) {
        auto path = nb::cast<std::string>(nb::module_::import_("os").attr("fspath")(file));
        return PyExporter{exporter(path, wrap(std::move(fun)), shapeless, metadata.value_or(""))};
      },
      nb::arg("file"), nb::arg("fun"), nb::kw_only(), nb::arg("shapeless") = false,
      nb::arg("metadata") = nb::none(),
      nb::sig("def exporter(file: str, fun: Callable, *, shapeless: bool = False, "
              "metadata: str | None = None) -> FunctionExporter"),
      "An exporter: call it with example inputs to add a trace to ``file``; close it (or use "
      "it as a context manager) when done.");
  // For the tests: the primitive keys import can rebuild, and those a file uses.
  m.def("_exportable_primitives", &detail::exportable_primitives);
  m.def("_exported_primitives", [](nb::object file) {
    return detail::exported_primitives(
        nb::cast<std::string>(nb::module_::import_("os").attr("fspath")(file)));
  });
}

}  // namespace tessera::python
