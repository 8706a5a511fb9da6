// tessera.core.linalg: include/tessera/linalg.h's routines with MLX's signatures.
#include "convert.h"

#include <string>

namespace tessera::python {

void init_linalg(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("linalg", "Linear algebra routines.");

  m.def(
      "norm",
      [](const array& a, const std::variant<std::monostate, int, double, std::string>& ord,
         const std::variant<std::monostate, int, std::vector<int>>& axis, bool keepdims,
         StreamOrDevice s) {
        std::optional<std::vector<int>> axes;
        if (auto* i = std::get_if<int>(&axis)) axes = std::vector<int>{*i};
        if (auto* v = std::get_if<std::vector<int>>(&axis)) axes = *v;
        if (auto* name = std::get_if<std::string>(&ord)) {
          return linalg::norm(a, *name, axes, keepdims, s);
        }
        if (auto* i = std::get_if<int>(&ord)) {
          return linalg::norm(a, static_cast<double>(*i), axes, keepdims, s);
        }
        if (auto* d = std::get_if<double>(&ord)) return linalg::norm(a, *d, axes, keepdims, s);
        return linalg::norm(a, axes, keepdims, s);
      },
      nb::arg(), "ord"_a = nb::none(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(),
      "Vector or matrix norm.\n\n"
      "With neither ``ord`` nor ``axis``, the 2-norm of the flattened input. With\n"
      "one axis, a vector norm; with two, a matrix norm.\n\n"
      "Args:\n"
      "    a (array): Input array (1-D or 2-D when ``ord`` is given without\n"
      "      ``axis``).\n"
      "    ord (int, float or str, optional): The norm: for vectors ``inf``,\n"
      "      ``-inf``, ``0`` or any p; for matrices ``1``, ``-1``, ``inf``,\n"
      "      ``-inf`` or ``'fro'``. Default: ``None`` (2-norm / Frobenius).\n"
      "    axis (int or list(int), optional): One or two axes to reduce.\n"
      "    keepdims (bool, optional): Keep the reduced axes. Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The norm.\n");
}

}  // namespace tessera::python
