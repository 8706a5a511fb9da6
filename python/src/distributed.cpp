// tessera.core.distributed: is_available, init, Group (rank / size / split) and the collectives,
// with MLX's names and keywords (group=, stream=). Collectives are lazy; the blocking happens
// in eval, which releases the GIL.
#include "convert.h"

namespace tessera::python {

namespace dist = tessera::distributed;

void init_distributed(nb::module_& parent) {
  auto m = parent.def_submodule("distributed", "Communication between the processes of a job.");
  nb::class_<dist::Group>(m, "Group", "A group of ranks that communicate.")
      .def("rank", &dist::Group::rank, "This process's rank in the group.")
      .def("size", &dist::Group::size, "How many ranks the group has.")
      .def("split", &dist::Group::split, "color"_a, "key"_a = -1,
           "Ranks passing the same color form a new group, ordered by key (-1: by rank).");
  m.def("is_available", [](std::optional<std::string> backend) {
    return backend ? dist::is_available(*backend) : dist::is_available();
  }, "backend"_a = nb::none(), "Whether a communication backend (any, or the one named) exists.");
  m.def(
      "init",
      [](bool strict, const std::string& backend, std::optional<nb::callable> all_gather_factory) {
        // MLX's side channel for JACCL's set-up; Tessera has no JACCL, so the factory is
        // validated as MLX does and jaccl then fails (strict) or gives a group of one.
        if (all_gather_factory && backend != "jaccl") {
          throw std::invalid_argument("[distributed] all_gather_factory is only supported with "
                                      "backend='jaccl', but backend='" + backend + "' was given");
        }
        std::optional<dist::Group> g;
        blocking([&] { g = dist::init(strict, backend); });  // connecting may take a while
        return *g;
      },
      "strict"_a = false, "backend"_a = "any", nb::kw_only(), "all_gather_factory"_a = nb::none(),
      "The group of this job's ranks (a group of one when nothing is configured and strict is "
      "False). Raises naming the problem when a configuration is broken.");
  using Coll = array (*)(const array&, std::optional<dist::Group>, StreamOrDevice);
  auto def_coll = [&m](const char* name, Coll f, const char* doc) {
    m.def(name, [f](const ArrayLike& x, std::optional<dist::Group> g, StreamOrDevice s) {
      return f(to_array(x), g, s);
    }, "x"_a, nb::kw_only(), "group"_a = nb::none(), "stream"_a = nb::none(), doc);
  };
  def_coll("all_sum", [](const array& x, std::optional<dist::Group> g, StreamOrDevice s) {
    return dist::all_sum(x, g, s); }, "The sum of x over every rank, on every rank.");
  def_coll("all_mean", [](const array& x, std::optional<dist::Group> g, StreamOrDevice s) {
    return dist::all_mean(x, g, s); },
    "The mean of x over every rank (beyond MLX): the bits of all_sum(x) / group.size() in one "
    "operation. Floating dtypes.");
  def_coll("all_max", [](const array& x, std::optional<dist::Group> g, StreamOrDevice s) {
    return dist::all_max(x, g, s); }, "The elementwise maximum of x over every rank.");
  def_coll("all_min", [](const array& x, std::optional<dist::Group> g, StreamOrDevice s) {
    return dist::all_min(x, g, s); }, "The elementwise minimum of x over every rank.");
  def_coll("all_gather", [](const array& x, std::optional<dist::Group> g, StreamOrDevice s) {
    return dist::all_gather(x, g, s); }, "Every rank's x concatenated along axis 0, in rank order.");
  def_coll("sum_scatter", [](const array& x, std::optional<dist::Group> g, StreamOrDevice s) {
    return dist::sum_scatter(x, g, s); }, "This rank's block (along axis 0) of the sum over ranks.");
  def_coll("all_to_all", [](const array& x, std::optional<dist::Group> g, StreamOrDevice s) {
    return dist::all_to_all(x, g, s); }, "Block r of x (along axis 0) goes to rank r.");
  m.def("send", [](const ArrayLike& x, int dst, std::optional<dist::Group> g, StreamOrDevice s) {
    return dist::send(to_array(x), dst, g, s);
  }, "x"_a, "dst"_a, nb::kw_only(), "group"_a = nb::none(), "stream"_a = nb::none(),
        "Sends x to rank dst; the result is x (evaluate it to send).");
  m.def("recv", [](const Shape& shape, Dtype dtype, int src, std::optional<dist::Group> g, StreamOrDevice s) {
    return dist::recv(shape, dtype, src, g, s);
  }, "shape"_a, "dtype"_a, "src"_a, nb::kw_only(), "group"_a = nb::none(), "stream"_a = nb::none(),
        "An array of shape and dtype received from rank src.");
  m.def("recv_like", [](const array& x, int src, std::optional<dist::Group> g, StreamOrDevice s) {
    return dist::recv_like(x, src, g, s);
  }, "x"_a, "src"_a, nb::kw_only(), "group"_a = nb::none(), "stream"_a = nb::none(),
        "An array like x received from rank src.");
  m.def("broadcast", [](const ArrayLike& x, int root, std::optional<dist::Group> g, StreamOrDevice s) {
    return dist::broadcast(to_array(x), root, g, s);
  }, "x"_a, "root"_a, nb::kw_only(), "group"_a = nb::none(), "stream"_a = nb::none(),
        "Rank root's x on every rank.");
  m.def("barrier", [](std::optional<dist::Group> g, StreamOrDevice s) {
    blocking([&] { dist::barrier(g, s); });
  }, nb::kw_only(), "group"_a = nb::none(), "stream"_a = nb::none(),
        "Returns once every rank of the group has called it.");
}

}  // namespace tessera::python
