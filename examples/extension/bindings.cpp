// The Python module tessera_sample_extensions._ext. It takes and returns tessera.core.array:
// nanobind finds the array, Stream and Device types that tessera.core registered, which needs
// this module built with the nanobind version and options of tessera.core (README.md).
#include <nanobind/nanobind.h>
#include <nanobind/stl/variant.h>

#include "axpby/axpby.h"

namespace nb = nanobind;
using namespace nb::literals;

NB_MODULE(_ext, m) {
  m.doc() = "A sample C++ extension of Tessera: one primitive with a CPU kernel and its vjp";
  m.def("axpby", &tessera_ext::axpby, "x"_a, "y"_a, "alpha"_a, "beta"_a, nb::kw_only(),
        "stream"_a = nb::none(),
        "alpha * x + beta * y, broadcast, in x's and y's promoted floating type.");
}
