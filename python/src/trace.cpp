// mx.start_trace / mx.stop_trace: the timeline trace (tessera/trace.h, docs/compile.md); and
// mx.export_to_dot (tessera/graph_utils.h).
#include <fstream>
#include <sstream>

#include "common.h"
#include "tessera/graph_utils.h"
#include "trees.h"

namespace tessera::python {

void init_trace(nb::module_& m) {
  m.def("start_trace", &start_trace, "path"_a,
        "Start recording a timeline of every kernel and collective (a Chrome trace / Perfetto "
        "JSON file, written to ``path`` by :func:`stop_trace` or at exit).");
  m.def("stop_trace", &stop_trace,
        "Write the trace started by :func:`start_trace` (or ``TESSERA_TRACE``) and stop "
        "recording. Returns the path written, or an empty string when nothing was recorded.");
  m.def("is_tracing", &is_tracing, "Whether a timeline trace is being recorded.");

  m.def(
      "export_to_dot",
      [](nb::handle file, nb::args args, nb::kwargs kwargs) {
        // The outputs are every array of args and kwargs; kwargs name theirs.
        std::vector<array> outputs = tree_arrays(nb::make_tuple(args, kwargs));
        NodeNamer namer;
        for (auto [k, v] : kwargs) {
          if (nb::isinstance<array>(v)) {
            namer.set_name(nb::cast<const array&>(v), nb::cast<std::string>(k));
          }
        }
        std::ostringstream text;
        export_to_dot(text, std::move(namer), outputs);
        if (nb::isinstance<nb::str>(file)) {
          const std::string path = nb::cast<std::string>(file);
          std::ofstream out(path);
          out << text.str();
          if (!out) throw std::runtime_error("[export_to_dot] cannot write " + path);
        } else if (nb::hasattr(file, "write")) {
          file.attr("write")(text.str());
        } else {
          throw std::invalid_argument("[export_to_dot] file must be a path or an object with write()");
        }
      },
      "file"_a, "args"_a, "kwargs"_a,
      nb::sig("def export_to_dot(file: str | typing.Any, *args: array, **kwargs: array) -> None"),
      "Writes the lazy graph behind the given arrays as Graphviz DOT (evaluated arrays are its\n"
      "sources), to a path or a file object; keyword arguments name their arrays.\n\n"
      "Args:\n"
      "    file (str or file): Where to write.\n"
      "    *args (array): The output arrays.\n"
      "    **kwargs (array): Named arrays of the graph.\n");
}

}  // namespace tessera::python
