// The array class of tessera.core: construction, properties, conversion out (item, tolist,
// NumPy / buffer protocol / DLPack, pickling), operators with reflected and in-place forms, and
// MLX's method aliases. Indexing lives in indexing.cpp.
#include <nanobind/ndarray.h>

#include <sstream>
#include <utility>
#include <string_view>

#include "convert.h"
#include "indexing.h"

namespace tessera::python {

namespace {

// ---- buffer protocol: a zero-copy view that keeps its own handle to the buffer ----

struct BufferView {
  array keep;  // in-place ops may rebind the Python object's array; this one stays
  std::vector<Py_ssize_t> shape, strides;
  std::string format;
};

int array_getbuffer(PyObject* obj, Py_buffer* view, int) {
  try {
    array& a = *nb::inst_ptr<array>(obj);
    const char* fmt = dtype_buffer_format(a.dtype());
    blocking([&] { a.eval(); });
    auto* bv = new BufferView{a, {}, {}, fmt};
    for (size_t i = 0; i < a.ndim(); ++i) {
      bv->shape.push_back(a.shape()[i]);
      bv->strides.push_back(static_cast<Py_ssize_t>(a.strides()[i] * static_cast<int64_t>(a.itemsize())));
    }
    view->buf = a.raw_data();
    view->obj = obj;
    Py_INCREF(obj);
    view->len = static_cast<Py_ssize_t>(a.nbytes());
    view->readonly = 0;
    view->itemsize = static_cast<Py_ssize_t>(a.itemsize());
    view->format = bv->format.data();
    view->ndim = static_cast<int>(a.ndim());
    view->shape = bv->shape.data();
    view->strides = bv->strides.data();
    view->suboffsets = nullptr;
    view->internal = bv;
    return 0;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return -1;
  }
}

void array_releasebuffer(PyObject*, Py_buffer* view) { delete static_cast<BufferView*>(view->internal); }

PyType_Slot array_slots[] = {{Py_bf_getbuffer, reinterpret_cast<void*>(array_getbuffer)},
                             {Py_bf_releasebuffer, reinterpret_cast<void*>(array_releasebuffer)},
                             {0, nullptr}};

// mx.printoptions(...): the options for a `with` block, restored at its end.
struct PrintOptionsContext {
  PrintOptions options, saved;
};

void init_printoptions(nb::module_& m) {
  nb::class_<PrintOptions>(m, "PrintOptions", "How arrays print (see set_printoptions).")
      .def(nb::init<int>(), "precision"_a = -1)
      .def_rw("precision", &PrintOptions::precision,
              "Digits after the point for floating values; -1 prints six significant digits.");
  m.def(
      "set_printoptions", [](int precision) { set_printoptions({precision}); }, "precision"_a = -1,
      "Sets how arrays print: ``precision`` digits after the point for floating and complex\n"
      "values (fixed notation), or -1 for six significant digits (the default).");
  m.def("get_printoptions", &get_printoptions, "The current print options.");
  nb::class_<PrintOptionsContext>(m, "_PrintOptionsContext")
      .def("__enter__",
           [](PrintOptionsContext& c) {
             c.saved = get_printoptions();
             set_printoptions(c.options);
             return c.options;
           })
      .def("__exit__", [](PrintOptionsContext& c, nb::args) { set_printoptions(c.saved); });
  m.def(
      "printoptions",
      [](int precision) {
        if (precision < -1) set_printoptions({precision});  // its error now, not at `with`
        return PrintOptionsContext{{precision}, {}};
      },
      "precision"_a = -1, "A context manager: print options for the body of a ``with`` block.");
}

std::string repr_of(array a) {
  std::ostringstream os;
  blocking([&] { os << a; });
  return os.str();
}

nb::tuple shape_tuple(const array& a) {
  nb::list l;
  for (auto d : a.shape()) l.append(d);
  return nb::tuple(l);
}

// Pickling: (dtype name, shape, raw bytes of the row-contiguous data).
nb::tuple get_state(array a) {
  array c = contiguous(a);
  blocking([&] { c.eval(); });
  return nb::make_tuple(dtype_name(a.dtype()), shape_tuple(a),
                        nb::bytes(static_cast<const char*>(c.raw_data()), c.nbytes()));
}

void set_state(array* self, const nb::tuple& state) {
  if (nb::len(state) != 3) throw std::invalid_argument("[array] bad pickle state");
  Dtype d = dtype_from_name(nb::cast<std::string>(state[0]));
  Shape shape = nb::cast<Shape>(state[1]);
  nb::bytes data = nb::cast<nb::bytes>(state[2]);
  size_t n = 1;
  for (auto s : shape) n *= static_cast<size_t>(s);
  if (data.size() != n * d.size()) {
    throw std::invalid_argument("[array] pickle state holds " + std::to_string(data.size()) +
                                " bytes for " + std::to_string(n) + " elements of " + dtype_name(d));
  }
  auto buf = allocator::malloc(data.size());
  std::memcpy(buf.raw_ptr(), data.c_str(), data.size());
  new (self) array(buf, shape, d, allocator::free);
}

using BinaryFn = array (*)(const array&, const array&, StreamOrDevice);

// Forward, reflected and in-place forms of one operator. In-place keeps the Python object (its
// array handle is rebound), as MLX.
// An operator's other operand: a scalar, an array or a NumPy array; a list or tuple is refused
// as MLX refuses it (its meaning, elementwise or not, would be a guess).
array operand(nb::handle b, const array& a, const char* op) {
  if (nb::isinstance<nb::list>(b) || nb::isinstance<nb::tuple>(b) || nb::isinstance<nb::str>(b)) {
    throw std::invalid_argument(std::string("[") + op + "] an array cannot be combined with a " +
                                nb::cast<std::string>(nb::str(b.type().attr("__name__"))) +
                                "; wrap it in tessera.core.array(...) first");
  }
  return to_array_like(b, a);
}

// `a <op>= b`: the Python object `a` keeps its identity and holds the result.
template <BinaryFn F>
void apply_inplace(array& a, nb::handle b, const char* inplace) {
  array r = F(a, operand(b, a, inplace), {});
  if (std::string_view(inplace) == "__itruediv__" && !is_floating_point(a.dtype())) {
    // As MLX: `a /= b` would turn an integer (or bool) array into a floating one.
    throw std::invalid_argument(std::string("[") + inplace + "] in-place division of a " +
                                dtype_name(a.dtype()) + " array would change its dtype to " +
                                dtype_name(r.dtype()) + "; use a = a / b");
  }
  a = std::move(r);
}

template <BinaryFn F>
void def_operator(nb::class_<array>& cls, const char* fwd, const char* rev, const char* inplace) {
  cls.def(fwd, [fwd](const array& a, const ArrayLike& b) { return F(a, operand(b.obj, a, fwd), {}); },
          "other"_a.none());
  if (rev) {
    cls.def(rev, [rev](const array& a, const ArrayLike& b) { return F(operand(b.obj, a, rev), a, {}); },
            "other"_a.none());
  }
  if (inplace) {
    cls.def(
        inplace,
        [inplace](array& a, const ArrayLike& b) -> array& {
          apply_inplace<F>(a, b.obj, inplace);
          return a;
        },
        "other"_a.none(), nb::rv_policy::none);
  }
}

// ---- operator slots ----
// `a + b` reaches the methods above through CPython's generic slot, which looks `__add__` up
// and goes through nanobind's overload dispatch: about a tenth of an eager op's cost. The type's
// number slots call the same code directly (the methods stay, for a.__add__(b) and the stubs).

// The C++ exception being handled, raised as the Python error nanobind raises for it: a bound
// function rethrows it, so its translation is exactly the methods'.
thread_local std::exception_ptr slot_error;

PyObject* raise_slot_error() noexcept {
  slot_error = std::current_exception();
  PyObject* mod = PyImport_ImportModule("tessera.core");
  if (!mod) return nullptr;
  PyObject* r = PyObject_CallMethod(mod, "_raise_operator_error", nullptr);
  Py_DECREF(mod);
  Py_XDECREF(r);
  return nullptr;
}

struct OperatorNames {
  const char* fwd;
  const char* rev;
  const char* inplace;
};

template <BinaryFn F, const OperatorNames& N>
PyObject* binary_slot(PyObject* l, PyObject* r) noexcept {
  try {
    const nb::handle lh(l), rh(r);
    if (nb::isinstance<array>(lh)) {
      const array& a = nb::cast<const array&>(lh);
      return nb::cast(F(a, operand(rh, a, N.fwd), {})).release().ptr();
    }
    const array& b = nb::cast<const array&>(rh);
    return nb::cast(F(operand(lh, b, N.rev), b, {})).release().ptr();
  } catch (...) {
    return raise_slot_error();
  }
}

template <BinaryFn F, const OperatorNames& N>
PyObject* inplace_slot(PyObject* l, PyObject* r) noexcept {
  try {
    // CPython calls a type's in-place slot with an instance of the type on the left.
    apply_inplace<F>(*nb::inst_ptr<array>(nb::handle(l)), nb::handle(r), N.inplace);
    Py_INCREF(l);
    return l;
  } catch (...) {
    return raise_slot_error();
  }
}

constexpr OperatorNames kAdd{"__add__", "__radd__", "__iadd__"};
constexpr OperatorNames kSub{"__sub__", "__rsub__", "__isub__"};
constexpr OperatorNames kMul{"__mul__", "__rmul__", "__imul__"};
constexpr OperatorNames kDiv{"__truediv__", "__rtruediv__", "__itruediv__"};

void install_operator_slots(nb::class_<array>& cls) {
  PyNumberMethods* n = reinterpret_cast<PyTypeObject*>(cls.ptr())->tp_as_number;
  n->nb_add = binary_slot<add, kAdd>;
  n->nb_subtract = binary_slot<subtract, kSub>;
  n->nb_multiply = binary_slot<multiply, kMul>;
  n->nb_true_divide = binary_slot<divide, kDiv>;
  n->nb_inplace_add = inplace_slot<add, kAdd>;
  n->nb_inplace_subtract = inplace_slot<subtract, kSub>;
  n->nb_inplace_multiply = inplace_slot<multiply, kMul>;
  n->nb_inplace_true_divide = inplace_slot<divide, kDiv>;
}

// As MLX, == and != compare elementwise only with arrays and scalars: anything else (None, a
// list, a string) is simply not equal.
bool array_like(nb::handle h) {
  return nb::isinstance<array>(h) || nb::isinstance<nb::int_>(h) || nb::isinstance<nb::float_>(h) ||
         nb::isinstance<nb::bool_>(h) || PyComplex_Check(h.ptr()) ||
         (!nb::isinstance<nb::list>(h) && !nb::isinstance<nb::tuple>(h) && nb::hasattr(h, "__array__"));
}


// `reshape(2, 3)` and `reshape((2, 3))` both work, as MLX's methods do.
Shape shape_from_args(const nb::args& args) {
  if (args.size() == 1 && !nb::isinstance<nb::int_>(args[0])) return nb::cast<Shape>(args[0]);
  return nb::cast<Shape>(args);
}

// iter(a): the sub-arrays along the first axis, each taken when it is reached.
struct ArrayIterator {
  array a;
  int index = 0;
};

// MLX's marker type for objects with the __mlx_array__ protocol (used in its signatures).
struct ArrayLikeMarker {
  nb::object obj;
};

}  // namespace

void init_array(nb::module_& m) {
  auto cls = nb::class_<array>(m, "array", "An N-dimensional array, evaluated lazily.",
                               nb::type_slots(array_slots), nb::is_weak_referenceable());
  cls.def(
         "__init__",
         [](array* self, nb::handle val, std::optional<Dtype> dtype) {
           new (self) array(to_array(val, dtype));
         },
         "val"_a, "dtype"_a = nb::none(),
         "An array from a scalar, a (nested) list or tuple, a NumPy array or a buffer.")
      .def_prop_ro("size", &array::size, "Number of elements.")
      .def_prop_ro("ndim", &array::ndim, "Number of dimensions.")
      .def_prop_ro("itemsize", &array::itemsize, "Bytes per element.")
      .def_prop_ro("nbytes", &array::nbytes, "Bytes of all the elements.")
      .def_prop_ro("shape", &shape_tuple, "The dimensions, as a tuple.")
      .def_prop_ro("dtype", &array::dtype, "The element type.")
      .def_prop_ro("T", [](const array& a) { return transpose(a); }, "The transpose.")
      .def_prop_ro("mT", [](const array& a) {
        if (a.ndim() < 2) {
          throw std::invalid_argument("[matrix_transpose] Input array must have at least 2 "
                                      "dimensions; this one has " + std::to_string(a.ndim()));
        }
        return swapaxes(a, -1, -2);
      }, "The last two axes swapped (a stack of matrices, each transposed).")
      .def_prop_ro("real", [](const array& a) { return real(a); }, "The real part.")
      .def_prop_ro("imag", [](const array& a) { return imag(a); }, "The imaginary part.")
      .def("item", &to_scalar, "The single element as a Python scalar.")
      .def("tolist", &to_list, "The elements as nested Python lists (a scalar for a 0-d array).")
      .def(
          "astype",
          [](const array& a, Dtype dtype, StreamOrDevice s) { return astype(a, dtype, s); },
          "dtype"_a, "stream"_a = nb::none(), "A copy converted to dtype.")
      .def(
          "__array__",
          [](const array& a, std::optional<nb::object> dtype, std::optional<bool>) {
            nb::object out = to_numpy(a);
            if (dtype && !dtype->is_none()) out = out.attr("astype")(*dtype);
            return out;
          },
          "dtype"_a = nb::none(), "copy"_a = nb::none(),
          "A NumPy view of the (evaluated) array that keeps its buffer alive.")
      .def(
          "__dlpack__",
          [](const array& a, nb::kwargs) { return to_numpy(a).attr("__dlpack__")(); },
          "The array as a DLPack capsule (a view of its buffer).")
      .def("__dlpack_device__", [](const array&) { return nb::make_tuple(1, 0); },
           "(kDLCPU, 0): arrays live in host memory.")
      .def(
          "__array_namespace__",
          [](const array&, nb::handle) { return nb::module_::import_("tessera.core"); },
          nb::kw_only(), "api_version"_a = nb::none(),
          "The module of the array's functions (the Array API's namespace): tessera.core.")
      .def("__len__", [](const array& a) {
        if (a.ndim() == 0) throw nb::type_error("len() of a 0-d array");
        return a.shape(0);
      })
      .def("__iter__", [](const array& a) {
        if (a.ndim() == 0) throw nb::type_error("iteration over a 0-d array");
        return ArrayIterator{a};
      })
      .def("__bool__", [](const array& a) {
        if (a.size() != 1) {
          throw std::invalid_argument("[array] the truth value of an array with more than one "
                                      "element is ambiguous; use .any() or .all()");
        }
        return nb::cast<bool>(nb::bool_(to_scalar(a)));
      })
      .def("__int__", [](const array& a) { return nb::int_(to_scalar(a)); })
      .def("__float__", [](const array& a) { return nb::float_(to_scalar(a)); })
      .def("__complex__", [](const array& a) { return nb::cast<std::complex<double>>(nb::module_::import_("builtins").attr("complex")(to_scalar(a))); })
      .def("__index__", [](const array& a) {
        // TypeError (NumPy's) for anything but one integer: bytes(a) then reads the buffer.
        if (!is_integral(a.dtype()) || a.size() != 1) {
          throw nb::type_error("only integer arrays of one element can be used as an index");
        }
        return nb::int_(to_scalar(a));
      })
      .def("__repr__", &repr_of)
      .def("__str__", &repr_of)
      .def("__format__", [](const array& a, const std::string& spec) {
        // As MLX (and NumPy): a format spec applies to a 0-d array's value; for any other array
        // it is a TypeError, as for an object without __format__.
        if (spec.empty()) return repr_of(a);
        if (a.ndim() != 0) {
          throw nb::type_error(("unsupported format string '" + spec + "' for an array of " +
                                std::to_string(a.ndim()) + " dimensions; format a.item() or a 0-d array")
                                   .c_str());
        }
        return nb::cast<std::string>(nb::module_::import_("builtins").attr("format")(to_scalar(a), spec));
      })
      .def("__hash__", [](const array& a) { return static_cast<int64_t>(a.id()); })
      .def("__copy__", [](const array& a) { return copy(a); })
      .def("__deepcopy__", [](const array& a, nb::handle) { return copy(a); }, "memo"_a)
      .def("__getstate__", &get_state)
      .def("__setstate__", &set_state);

  def_operator<add>(cls, "__add__", "__radd__", "__iadd__");
  def_operator<subtract>(cls, "__sub__", "__rsub__", "__isub__");
  def_operator<multiply>(cls, "__mul__", "__rmul__", "__imul__");
  def_operator<divide>(cls, "__truediv__", "__rtruediv__", "__itruediv__");
  def_operator<floor_divide>(cls, "__floordiv__", "__rfloordiv__", "__ifloordiv__");
  def_operator<remainder>(cls, "__mod__", "__rmod__", "__imod__");
  def_operator<power>(cls, "__pow__", "__rpow__", "__ipow__");
  def_operator<matmul>(cls, "__matmul__", "__rmatmul__", "__imatmul__");
  def_operator<bitwise_and>(cls, "__and__", "__rand__", "__iand__");
  def_operator<bitwise_or>(cls, "__or__", "__ror__", "__ior__");
  def_operator<bitwise_xor>(cls, "__xor__", "__rxor__", "__ixor__");
  def_operator<left_shift>(cls, "__lshift__", "__rlshift__", "__ilshift__");
  def_operator<right_shift>(cls, "__rshift__", "__rrshift__", "__irshift__");
  def_operator<less>(cls, "__lt__", nullptr, nullptr);
  def_operator<less_equal>(cls, "__le__", nullptr, nullptr);
  def_operator<greater>(cls, "__gt__", nullptr, nullptr);
  def_operator<greater_equal>(cls, "__ge__", nullptr, nullptr);
  cls.def("__eq__", [](const array& a, nb::handle b) -> nb::object {
    if (!array_like(b)) return nb::bool_(false);
    return nb::cast(equal(a, to_array_like(b, a)));
  }, "other"_a.none());
  cls.def("__ne__", [](const array& a, nb::handle b) -> nb::object {
    if (!array_like(b)) return nb::bool_(true);
    return nb::cast(not_equal(a, to_array_like(b, a)));
  }, "other"_a.none());
  cls.def("__neg__", [](const array& a) { return negative(a); })
      .def("__pos__", [](const array& a) { return a; })
      .def("__abs__", [](const array& a) { return abs(a); })
      .def("__invert__", [](const array& a) {
        return a.dtype() == bool_ ? logical_not(a) : bitwise_invert(a);
      });

  // ---- MLX's method aliases: the module functions (array_methods.cpp), but these two ----
  cls.def(
         "reshape",
         [](const array& a, nb::args shape, StreamOrDevice s) { return reshape(a, shape_from_args(shape), s); },
         "shape"_a, "stream"_a = nb::none(),
         "The array with a new shape (given as a tuple or as separate ints).")
      .def(
          "transpose",
          [](const array& a, nb::args axes, StreamOrDevice s) {
            if (axes.size() == 0) return transpose(a, s);
            Shape ax = shape_from_args(axes);
            return transpose(a, std::vector<int>(ax.begin(), ax.end()), s);
          },
          "axes"_a, "stream"_a = nb::none(),
          "The array with its axes permuted (reversed when none are given).");

  init_indexing(m, cls);
  nb::class_<ArrayIterator>(m, "ArrayIterator",
                            "A helper object to iterate over the 1st dimension of an array.")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__next__", [](ArrayIterator& it) {
        if (it.index >= it.a.shape(0)) throw nb::stop_iteration();
        return take(it.a, it.index++, 0);
      });
  nb::class_<ArrayLikeMarker>(m, "ArrayLike",
                              "Any Python object which has an ``__mlx_array__`` method that "
                              "returns an :obj:`array` (a marker type for signatures).")
      .def(nb::init<nb::object>(), "arg"_a);
  init_printoptions(m);
  m.def("_raise_operator_error", [] {
    std::exception_ptr e = std::exchange(slot_error, nullptr);
    if (!e) throw std::logic_error("[_raise_operator_error] no operator error is pending");
    std::rethrow_exception(e);
  });
  install_operator_slots(cls);  // last: defining a method afterwards would reset its slot
}

}  // namespace tessera::python
