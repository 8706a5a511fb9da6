// mx.start_trace / mx.stop_trace: the timeline trace (tessera/trace.h, docs/compile.md).
#include "common.h"

namespace tessera::python {

void init_trace(nb::module_& m) {
  m.def("start_trace", &start_trace, "path"_a,
        "Start recording a timeline of every kernel and collective (a Chrome trace / Perfetto "
        "JSON file, written to ``path`` by :func:`stop_trace` or at exit).");
  m.def("stop_trace", &stop_trace,
        "Write the trace started by :func:`start_trace` (or ``TESSERA_TRACE``) and stop "
        "recording. Returns the path written, or an empty string when nothing was recorded.");
  m.def("is_tracing", &is_tracing, "Whether a timeline trace is being recorded.");
}

}  // namespace tessera::python
