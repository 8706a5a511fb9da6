// Shared by the binding files of tessera.core (one per area, mirroring include/tessera/): the
// nanobind headers, the argument types MLX's Python API takes, and each file's init function.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/complex.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "tessera/tessera.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace tessera::python {

// "(2,3)" in error messages, as the library writes a shape.
inline std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

// `scalar | array` as MLX's ops take it: a Python bool / int / float / complex, a tessera array,
// or anything convertible (a NumPy array, a nested list). Converted by to_array / to_arrays
// (convert.h), which give Python scalars the dtype of the array they meet (MLX's weak typing).
struct ArrayLike {
  nb::object obj;
};

// `int | Sequence[int]` shape arguments (anything with __index__ counts as an int). Read by
// to_shape (ops_common.h), which raises OverflowError naming an entry outside int32 (as MLX's
// shape caster) rather than letting the call fail as "incompatible function arguments".
struct ShapeLike {
  nb::object obj;
};

// A Python object held by C++ closures that outlive the call that made them (custom_function
// rules, checkpointed functions live in the graph): copies share it without touching Python's
// refcounts, and the last one releases it with the GIL held, on whichever thread frees the graph.
class PyRef {
 public:
  PyRef() : PyRef(nb::none()) {}
  explicit PyRef(nb::object o)
      : p_(new nb::object(std::move(o)), [](nb::object* x) {
          nb::gil_scoped_acquire gil;
          delete x;
        }) {}
  nb::object& operator*() const { return *p_; }
  nb::object* operator->() const { return p_.get(); }

 private:
  std::shared_ptr<nb::object> p_;
};

// Type slots that let Python's cycle collector see the Python objects a bound C++ object holds.
// A transformed function holds the user's function, whose closure often holds the transformed
// function (`d["f"] = mx.grad(f)` with `f` reading `d`): without these slots such a cycle, and
// every array it reaches, is never freed. T has `void visit_refs(F)`, calling F(nb::object&) on
// each held object; clearing sets them to None (a call afterwards is a TypeError, not a crash).
template <class T>
int gc_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));  // a heap type's instances own a reference to it
  if (!nb::inst_ready(self)) return 0;
  int r = 0;
  nb::inst_ptr<T>(self)->visit_refs([&](nb::object& o) {
    if (r == 0 && o.ptr() != nullptr) r = visit(o.ptr(), arg);
  });
  return r;
}
template <class T>
int gc_clear(PyObject* self) {
  nb::inst_ptr<T>(self)->visit_refs([](nb::object& o) { o = nb::none(); });
  return 0;
}
template <class T>
inline PyType_Slot gc_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(gc_traverse<T>)},
                                 {Py_tp_clear, reinterpret_cast<void*>(gc_clear<T>)},
                                 {0, nullptr}};

// `axis: None | int | Sequence[int]`.
using OptAxes = std::optional<std::variant<int, std::vector<int>>>;
// Every axis for None, else the given ones (not normalised: the C++ op checks them).
std::vector<int> axes_or_all(const OptAxes& axis, const array& a);

// One per binding file (module.cpp calls them in order).
void init_dtype(nb::module_& m);
void init_device(nb::module_& m);
void init_array(nb::module_& m);
void init_ops(nb::module_& m);
// After init_ops: the array methods that are module functions (array_methods.cpp).
void init_array_methods(nb::module_& m);
void init_transforms(nb::module_& m);
void init_compile(nb::module_& m);
void init_trace(nb::module_& m);
void init_random(nb::module_& m);
void init_linalg(nb::module_& m);
void init_fft(nb::module_& m);
void init_fast(nb::module_& m);
void init_memory(nb::module_& m);
void init_io(nb::module_& m);
void init_export(nb::module_& m);
void init_distributed(nb::module_& m);

// The implicit key (mx.random.state) back to the one this process started with (random.cpp).
void reset_random_state();

}  // namespace tessera::python

namespace nanobind::detail {

template <>
struct type_caster<tessera::python::ArrayLike> {
  NB_TYPE_CASTER(tessera::python::ArrayLike, const_name("bool | int | float | complex | array"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    if (!src.is_valid() || src.is_none()) return false;
    value.obj = borrow(src);
    return true;
  }
  static handle from_cpp(const tessera::python::ArrayLike& v, rv_policy, cleanup_list*) noexcept {
    return v.obj.inc_ref();
  }
};

template <>
struct type_caster<tessera::python::ShapeLike> {
  NB_TYPE_CASTER(tessera::python::ShapeLike, const_name("int | collections.abc.Sequence[int]"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    if (!src.is_valid() || PyUnicode_Check(src.ptr()) || PyBytes_Check(src.ptr())) return false;
    if (!PyIndex_Check(src.ptr()) && !PySequence_Check(src.ptr())) return false;
    value.obj = borrow(src);
    return true;
  }
  static handle from_cpp(const tessera::python::ShapeLike& v, rv_policy, cleanup_list*) noexcept {
    return v.obj.inc_ref();
  }
};

}  // namespace nanobind::detail
