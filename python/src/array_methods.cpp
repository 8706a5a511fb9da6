// The methods of array that are functions of tessera.core applied to the array, as MLX's:
// a.sum(axis) is mx.sum(a, axis). One table, and one definition per op: each method is the
// module function itself, bound as a method (the instance becomes its first argument), so a
// method has the function's signature, docstring and checks, and cannot drift from them.
#include "common.h"

namespace tessera::python {

namespace {

// a.NAME(...) is tessera.core.NAME(a, ...).
constexpr const char* kFunctionsAsMethods[] = {
    // reductions
    "sum", "prod", "max", "min", "mean", "all", "any", "logsumexp", "var", "std", "argmax",
    "argmin",
    // elementwise
    "abs", "square", "sqrt", "rsqrt", "reciprocal", "exp", "log", "log2", "log10", "log1p", "sin",
    "cos", "conj", "round",
    // scans
    "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp",
    // shapes and views
    "flatten", "squeeze", "moveaxis", "swapaxes", "split", "diagonal", "diag", "view"};

}  // namespace

void init_array_methods(nb::module_& m) {
  nb::handle cls = nb::type<array>();
  for (const char* name : kFunctionsAsMethods) {
    nb::object function = m.attr(name);
    nb::object method = nb::steal(PyInstanceMethod_New(function.ptr()));
    if (!method.is_valid()) throw nb::python_error();
    nb::setattr(cls, name, method);
  }
}

}  // namespace tessera::python
