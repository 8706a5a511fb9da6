// Dtypes as Python objects (tessera.core.float32, ...), their categories, issubdtype, finfo,
// iinfo, and the module's constants (pi, e, inf, nan, newaxis, euler_gamma).
#include <cmath>
#include <limits>
#include <sstream>

#include "convert.h"

namespace tessera::python {

void init_dtype(nb::module_& m) {
  nb::class_<Dtype>(m, "Dtype", "The element type of an array (see tessera.core.float32, ...).")
      .def_prop_ro("size", &Dtype::size, "Size of one element in bytes.")
      .def("__repr__", [](const Dtype& t) { return "tessera.core." + dtype_name(t); })
      .def("__eq__", [](const Dtype& t, nb::handle other) {
        return nb::isinstance<Dtype>(other) && t == nb::cast<Dtype>(other);
      }, "other"_a.none())
      .def("__hash__", [](const Dtype& t) { return static_cast<int64_t>(t.val()); })
      // Pickled by name: the module attribute tessera.core.<name>.
      .def("__reduce__", [](const Dtype& t) { return t == bool_ ? std::string("bool_") : dtype_name(t); });
  for (Dtype d : kAllDtypes) m.attr(dtype_name(d) == "bool" ? "bool_" : dtype_name(d).c_str()) = nb::cast(d);

  nb::enum_<Dtype::Category>(m, "DtypeCategory", "A kind of dtype, for issubdtype.")
      .value("complexfloating", complexfloating)
      .value("floating", floating)
      .value("inexact", inexact)
      .value("signedinteger", signedinteger)
      .value("unsignedinteger", unsignedinteger)
      .value("integer", integer)
      .value("number", number)
      .value("generic", generic);
  for (const char* c : {"complexfloating", "floating", "inexact", "signedinteger",
                        "unsignedinteger", "integer", "number", "generic"}) {
    m.attr(c) = m.attr("DtypeCategory").attr(c);
  }
  using DorC = std::variant<Dtype, Dtype::Category>;
  m.def(
      "issubdtype",
      [](const DorC& a, const DorC& b) {
        return std::visit([](const auto& x, const auto& y) { return issubdtype(x, y); }, a, b);
      },
      "arg1"_a, "arg2"_a,
      "Whether arg1 is a sub-type of arg2 in the hierarchy generic > number > (integer > "
      "signed/unsigned, inexact > floating, complexfloating) > dtype.");

  m.def(
      "result_type",
      [](nb::args items) {
        // Arrays and dtypes promote as binary ops do (a dtype counts as an array of it).
        std::vector<array> arrays;
        for (nb::handle h : items) {
          if (nb::isinstance<Dtype>(h)) {
            arrays.push_back(zeros({0}, nb::cast<Dtype>(h)));
          } else {
            arrays.push_back(nb::cast<array>(h));
          }
        }
        if (arrays.empty()) {
          throw std::invalid_argument("[result_type] needs at least one array or dtype");
        }
        return tessera::result_type(arrays);
      },
      "The dtype that arrays and dtypes promote to together.");
  m.def(
      "can_cast",
      [](nb::handle from, const Dtype& to) {
        Dtype d = bool_;
        if (nb::isinstance<array>(from)) {
          d = nb::cast<const array&>(from).dtype();
        } else if (nb::isinstance<Dtype>(from)) {
          d = nb::cast<Dtype>(from);
        } else {
          throw std::invalid_argument("[can_cast] from_ must be an array or a dtype, not " +
                                      nb::cast<std::string>(nb::str(from.type().attr("__name__"))));
        }
        return promote_types(d, to) == to;
      },
      "from_"_a, "to"_a, nb::sig("def can_cast(from_: array | Dtype, to: Dtype) -> bool"),
      "Whether ``from_`` (a dtype, or an array's) casts to ``to`` without loss by the promotion\n"
      "rules: promoting the two gives ``to``.\n\n"
      "Args:\n"
      "    from_ (array or Dtype): The source.\n"
      "    to (Dtype): The destination dtype.\n\n"
      "Returns:\n"
      "    bool: Whether the cast is safe.\n");
  m.def(
      "isdtype",
      [](const Dtype& dtype, nb::handle kind) {
        auto one = [&](nb::handle k) {
          if (nb::isinstance<Dtype>(k)) return dtype == nb::cast<Dtype>(k);
          if (!nb::isinstance<nb::str>(k)) {
            throw std::invalid_argument(
                "[isdtype] kind must be a dtype, a kind name or a tuple of them");
          }
          const std::string s = nb::cast<std::string>(k);
          if (s == "bool") return dtype == bool_;
          if (s == "signed integer") return issubdtype(dtype, signedinteger);
          if (s == "unsigned integer") return issubdtype(dtype, unsignedinteger);
          if (s == "integral") return issubdtype(dtype, integer);
          if (s == "real floating") return issubdtype(dtype, floating);
          if (s == "complex floating") return issubdtype(dtype, complexfloating);
          if (s == "numeric") return issubdtype(dtype, number);
          throw std::invalid_argument(
              "[isdtype] unknown kind '" + s + "'; the kinds are 'bool', 'signed integer', "
              "'unsigned integer', 'integral', 'real floating', 'complex floating', 'numeric'");
        };
        if (nb::isinstance<nb::tuple>(kind)) {
          for (nb::handle k : kind) {
            if (one(k)) return true;
          }
          return false;
        }
        return one(kind);
      },
      "dtype"_a, "kind"_a,
      nb::sig("def isdtype(dtype: Dtype, kind: Dtype | str | tuple[Dtype | str, ...]) -> bool"),
      "Whether ``dtype`` is of ``kind`` (the Array API's isdtype): a dtype, one of 'bool',\n"
      "'signed integer', 'unsigned integer', 'integral', 'real floating', 'complex floating',\n"
      "'numeric', or a tuple of these (any matches).\n\n"
      "Args:\n"
      "    dtype (Dtype): The dtype.\n"
      "    kind (Dtype or str or tuple): The kind(s).\n\n"
      "Returns:\n"
      "    bool: Whether it is.\n");
  m.def(
      "asarray",
      [](nb::handle a, std::optional<Dtype> dtype, std::optional<bool> copy) {
        if (copy && !*copy) {
          // As MLX: no promise that the result shares memory with `a` can be kept.
          throw std::invalid_argument(
              "[asarray] copy=False is not supported (the result may not share memory with the "
              "input); pass copy=None or copy=True");
        }
        array out = python::to_array(a, dtype);
        // copy=True: a new array even when `a` is one already of that dtype.
        if (copy.value_or(false) && nb::isinstance<array>(a) && out.id() == nb::cast<const array&>(a).id()) {
          out = tessera::copy(out);
        }
        return out;
      },
      "a"_a, "dtype"_a = nb::none(), "copy"_a = nb::none(),
      "An array from ``a`` (an array of that dtype is returned as is unless ``copy=True``).");
  m.def("from_dlpack", &python::from_dlpack, "x"_a, nb::kw_only(), "copy"_a = nb::none(),
        "An array from an object with __dlpack__ (copied into Tessera's memory; a transposed or\n"
        "stepped view keeps its strides). copy=False raises: nothing is ever shared.");
  m.def(
      "broadcast_shapes",
      [](nb::args shapes) {
        if (shapes.size() == 0) throw std::invalid_argument("[broadcast_shapes] no shapes given");
        Shape out = nb::cast<Shape>(shapes[0]);
        for (size_t i = 1; i < shapes.size(); ++i) out = broadcast_shapes(out, nb::cast<Shape>(shapes[i]));
        nb::list l;
        for (auto d : out) l.append(d);
        return nb::tuple(l);
      },
      "The shape NumPy broadcasting gives the shapes, as a tuple.");

  nb::class_<finfo>(m, "finfo", "Limits of a floating dtype.")
      .def(nb::init<Dtype>(), "dtype"_a)
      .def_ro("bits", &finfo::bits, "Bits in one value.")
      .def_ro("min", &finfo::min, "The most negative finite value.")
      .def_ro("max", &finfo::max, "The largest finite value.")
      .def_ro("eps", &finfo::eps, "The gap between 1.0 and the next larger value.")
      .def_ro("smallest_normal", &finfo::smallest_normal, "The smallest positive normal value.")
      .def_ro("dtype", &finfo::dtype, "The dtype.")
      .def("__repr__", [](const finfo& f) {
        std::ostringstream os;
        os << "finfo(min=" << f.min << ", max=" << f.max << ", dtype=" << dtype_name(f.dtype) << ")";
        return os.str();
      });
  nb::class_<iinfo>(m, "iinfo", "Limits of an integer dtype.")
      .def(nb::init<Dtype>(), "dtype"_a)
      .def_ro("min", &iinfo::min, "The smallest value.")
      .def_ro("max", &iinfo::max, "The largest value.")
      .def_ro("dtype", &iinfo::dtype, "The dtype.")
      .def("__repr__", [](const iinfo& i) {
        std::ostringstream os;
        os << "iinfo(min=" << i.min << ", max=" << i.max << ", dtype=" << dtype_name(i.dtype) << ")";
        return os.str();
      });

  m.attr("pi") = M_PI;
  m.attr("e") = M_E;
  m.attr("euler_gamma") = 0.57721566490153286060651209008240243104215933593992;
  m.attr("inf") = std::numeric_limits<double>::infinity();
  m.attr("nan") = std::numeric_limits<double>::quiet_NaN();
  m.attr("newaxis") = nb::none();
}

}  // namespace tessera::python
