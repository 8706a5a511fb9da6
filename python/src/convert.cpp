// Python values <-> arrays (see convert.h).
#include "convert.h"

#include "tessera/interrupt.h"

#include <nanobind/ndarray.h>

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <complex>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <thread>

namespace tessera::python {

namespace {

// ---- nested lists ----

// What a nested list holds, in promotion order.
enum class Kind { none, boolean, integer, wide_integer, floating, complex };

struct ListScan {
  Shape shape;               // the dims seen so far; final once leaf_fixed
  bool leaf_fixed = false;   // a scalar or an array was seen: elements sit at depth shape.size()
  Kind kind = Kind::none;
  bool has_arrays = false;   // elements that are tessera arrays (stacked)
};

bool is_sequence(nb::handle h) { return nb::isinstance<nb::list>(h) || nb::isinstance<nb::tuple>(h); }

Kind scalar_kind(nb::handle h) {
  if (nb::isinstance<nb::bool_>(h)) return Kind::boolean;
  if (nb::isinstance<nb::int_>(h)) {
    int64_t v = 0;
    if (!nb::try_cast<int64_t>(h, v)) {
      throw std::invalid_argument("[array] the integer " + nb::cast<std::string>(nb::str(h)) +
                                  " does not fit in 64 bits");
    }
    return v > std::numeric_limits<int32_t>::max() || v < std::numeric_limits<int32_t>::min()
               ? Kind::wide_integer
               : Kind::integer;
  }
  if (nb::isinstance<nb::float_>(h)) return Kind::floating;
  if (PyComplex_Check(h.ptr())) return Kind::complex;
  return Kind::none;
}

[[noreturn]] void ragged(const std::string& what) {
  throw std::invalid_argument("[array] ragged input: " + what);
}

// A dimension of length n at `depth` (a list, or a dim of an array standing for nested lists).
void scan_dim(size_t depth, int32_t n, ListScan& out) {
  if (depth == out.shape.size() && !out.leaf_fixed) {
    out.shape.push_back(n);
  } else if (depth >= out.shape.size()) {
    ragged("a list at depth " + std::to_string(depth) + " where other elements are scalars");
  } else if (out.shape[depth] != n) {
    ragged("lists of different lengths at depth " + std::to_string(depth) + " (" +
           std::to_string(out.shape[depth]) + " and " + std::to_string(n) + ")");
  }
}

// The elements (scalars, or the scalars inside an array) sit at `depth`.
void scan_leaf(size_t depth, ListScan& out) {
  if (depth < out.shape.size()) {
    ragged("a scalar at depth " + std::to_string(depth) + " where other elements are lists");
  }
  out.shape.resize(depth);
  out.leaf_fixed = true;
}

void scan(nb::handle h, size_t depth, ListScan& out) {
  if (is_sequence(h)) {
    scan_dim(depth, static_cast<int32_t>(nb::len(h)), out);
    for (nb::handle e : h) scan(e, depth + 1, out);
    return;
  }
  if (nb::isinstance<array>(h)) {  // as MLX: an array stands for the nested lists of its shape
    const array& a = nb::cast<const array&>(h);
    for (size_t i = 0; i < a.ndim(); ++i) scan_dim(depth + i, a.shape()[i], out);
    scan_leaf(depth + a.ndim(), out);
    out.has_arrays = true;
    return;
  }
  Kind k = scalar_kind(h);
  if (k == Kind::none) {
    throw std::invalid_argument("[array] cannot convert an element of type " +
                                nb::cast<std::string>(nb::str(h.type().attr("__name__"))) +
                                " (expected bool, int, float, complex or array)");
  }
  scan_leaf(depth, out);
  if (static_cast<int>(k) > static_cast<int>(out.kind)) out.kind = k;
}

template <typename T>
void fill(nb::handle h, std::vector<T>& out) {
  if (is_sequence(h)) {
    for (nb::handle e : h) fill(e, out);
    return;
  }
  if constexpr (std::is_same_v<T, std::complex<double>>) {
    out.push_back(nb::cast<std::complex<double>>(h));
  } else if constexpr (std::is_same_v<T, double>) {
    out.push_back(nb::cast<double>(h));
  } else {
    out.push_back(nb::cast<T>(h));
  }
}

array stack_nested(nb::handle h, std::optional<Dtype> dtype) {
  if (!is_sequence(h)) return to_array(h, dtype);
  std::vector<array> parts;
  for (nb::handle e : h) parts.push_back(stack_nested(e, dtype));
  return stack(parts, 0);
}

array from_list(nb::handle h, std::optional<Dtype> dtype) {
  ListScan sc;
  scan(h, 0, sc);
  if (sc.has_arrays) return stack_nested(h, dtype);
  Shape shape = sc.shape;
  switch (sc.kind) {
    case Kind::none:  // empty: MLX makes float32
    case Kind::floating: {
      std::vector<double> v;
      fill(h, v);
      return array(v.begin(), shape, dtype.value_or(float32));
    }
    case Kind::boolean: {
      std::vector<bool> v;
      fill(h, v);
      std::vector<uint8_t> b(v.begin(), v.end());
      return astype(array(b.begin(), shape, uint8), dtype.value_or(bool_));
    }
    case Kind::integer:
    case Kind::wide_integer: {
      std::vector<int64_t> v;
      fill(h, v);
      Dtype d = dtype.value_or(sc.kind == Kind::wide_integer ? int64 : int32);
      if (d == uint64) {
        std::vector<uint64_t> u(v.begin(), v.end());
        return array(u.begin(), shape, d);
      }
      return array(v.begin(), shape, d);
    }
    case Kind::complex: {
      std::vector<std::complex<double>> v;
      fill(h, v);
      std::vector<complex64_t> c;
      c.reserve(v.size());
      for (auto& z : v) c.emplace_back(static_cast<float>(z.real()), static_cast<float>(z.imag()));
      return array(c.begin(), shape, dtype.value_or(complex64));
    }
  }
  throw std::logic_error("[array] unreachable list kind");
}

// ---- NumPy arrays and the buffer protocol ----

using AnyArray = nb::ndarray<nb::ro, nb::device::cpu>;

std::optional<Dtype> dtype_of(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  const auto code = static_cast<C>(t.code);
  if (t.lanes != 1) return std::nullopt;
  if (code == C::Bool) return bool_;
  if (code == C::UInt) {
    switch (t.bits) {
      case 8: return uint8;
      case 16: return uint16;
      case 32: return uint32;
      case 64: return uint64;
    }
  }
  if (code == C::Int) {
    switch (t.bits) {
      case 8: return int8;
      case 16: return int16;
      case 32: return int32;
      case 64: return int64;
    }
  }
  if (code == C::Float) {
    switch (t.bits) {
      case 16: return float16;
      case 32: return float32;
      case 64: return float64;
    }
  }
  if (code == C::Bfloat && t.bits == 16) return bfloat16;
  if (code == C::Complex && (t.bits == 64 || t.bits == 128)) return complex64;
  return std::nullopt;
}

// Copies the (any-strided) elements into a new row-contiguous buffer at memory speed: the
// innermost contiguous run is one memcpy.
void strided_copy(const char* src, char* dst, const Shape& shape, const std::vector<int64_t>& bstrides,
                  size_t item, size_t dim, size_t& written) {
  if (dim == shape.size()) {
    std::memcpy(dst + written, src, item);
    written += item;
    return;
  }
  if (dim + 1 == shape.size() && bstrides[dim] == static_cast<int64_t>(item)) {
    const size_t n = static_cast<size_t>(shape[dim]) * item;
    std::memcpy(dst + written, src, n);
    written += n;
    return;
  }
  for (int32_t i = 0; i < shape[dim]; ++i) {
    strided_copy(src + i * bstrides[dim], dst, shape, bstrides, item, dim + 1, written);
  }
}

array from_ndarray(const AnyArray& nd, std::optional<Dtype> dtype) {
  auto src_dtype = dtype_of(nd.dtype());
  if (!src_dtype) {
    throw std::invalid_argument("[array] unsupported buffer element type (DLPack code " +
                                std::to_string(nd.dtype().code) + ", " +
                                std::to_string(nd.dtype().bits) + " bits)");
  }
  const bool complex128 = nd.dtype().code == static_cast<uint8_t>(nb::dlpack::dtype_code::Complex) &&
                          nd.dtype().bits == 128;
  Shape shape;
  std::vector<int64_t> bstrides;
  const size_t item = nd.dtype().bits / 8;
  for (size_t i = 0; i < nd.ndim(); ++i) {
    if (nd.shape(i) > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      throw std::overflow_error("[array] shape dimension " + std::to_string(nd.shape(i)) +
                                " (axis " + std::to_string(i) + ") is outside int32 "
                                "[-2147483648, 2147483647] (Tessera shapes hold 32-bit dimensions, "
                                "as MLX)");
    }
    shape.push_back(static_cast<int32_t>(nd.shape(i)));
    bstrides.push_back(nd.stride(i) * static_cast<int64_t>(item));
  }
  // float64 / complex128 come in as float32 / complex64 unless asked (as MLX).
  Dtype native = complex128 ? complex64 : *src_dtype;
  Dtype want = dtype.value_or(native == float64 ? float32 : native);
  size_t n = 1;
  for (auto d : shape) n *= static_cast<size_t>(d);
  const size_t bytes = n * item;
  auto buf = allocator::malloc(bytes);
  size_t written = 0;
  if (n > 0) {
    without_gil([&] {
      strided_copy(static_cast<const char*>(nd.data()), static_cast<char*>(buf.raw_ptr()), shape,
                   bstrides, item, 0, written);
    });
  }
  if (complex128) {  // narrow in place: each complex<double> becomes a complex<float>
    auto* z = static_cast<std::complex<double>*>(buf.raw_ptr());
    auto* c = static_cast<complex64_t*>(buf.raw_ptr());
    for (size_t i = 0; i < n; ++i) c[i] = complex64_t(static_cast<float>(z[i].real()), static_cast<float>(z[i].imag()));
  }
  array a(buf, shape, native, allocator::free);
  return want == native ? a : astype(a, want);
}

// The copy of a DLPack / buffer import that keeps its layout (MLX's choice): the bytes its
// elements span, with its strides, when those are non-negative and span at most twice the
// elements (a transposed or stepped view); nullopt otherwise (from_ndarray compacts it).
std::optional<array> copy_keeping_layout(const AnyArray& nd) {
  auto dt = dtype_of(nd.dtype());
  const size_t item = nd.dtype().bits / 8;
  // float64 comes in as float32 (as MLX), so from_ndarray converts it.
  if (!dt || *dt == float64 || item != dt->size() || nd.ndim() == 0) return std::nullopt;
  Shape shape;
  Strides strides;
  size_t size = 1, span = 1;
  for (size_t i = 0; i < nd.ndim(); ++i) {
    if (nd.shape(i) > static_cast<size_t>(std::numeric_limits<int32_t>::max()) || nd.stride(i) < 0) {
      return std::nullopt;
    }
    shape.push_back(static_cast<int32_t>(nd.shape(i)));
    strides.push_back(nd.stride(i));
    size *= nd.shape(i);
    span += (nd.shape(i) - 1) * static_cast<size_t>(nd.stride(i));
  }
  if (size == 0 || span > 2 * size) return std::nullopt;
  // Flags of the layout: dense (no gaps), and row- / column-major order (size-1 dims aside).
  auto ordered = [&](bool rows) {
    int64_t expect = 1;
    for (size_t k = 0; k < shape.size(); ++k) {
      const size_t i = rows ? shape.size() - 1 - k : k;
      if (shape[i] == 1) continue;
      if (strides[i] != expect) return false;
      expect *= shape[i];
    }
    return true;
  };
  array::Flags flags{span == size, ordered(true), ordered(false)};
  auto buf = allocator::malloc(span * item);
  without_gil([&] { std::memcpy(buf.raw_ptr(), nd.data(), span * item); });
  array a(allocator::Buffer(), shape, *dt, Deleter{});  // its data comes next, with the layout
  a.set_data(buf, span, std::move(strides), flags, allocator::free);
  return a;
}

// A NumPy array in non-native byte order (or anything NumPy can read that DLPack cannot):
// made native by NumPy first.
nb::object native_numpy(nb::handle obj) {
  nb::module_ np = nb::module_::import_("numpy");
  nb::object a = np.attr("asarray")(obj);
  nb::object dt = a.attr("dtype");
  if (!nb::cast<bool>(dt.attr("isnative"))) a = a.attr("astype")(dt.attr("newbyteorder")("="));
  return a;
}

// An object that only Python's number protocol converts (a Fraction, a Decimal, a mock): the
// narrowest of int (__index__), float (__float__) and complex (__complex__), or a null object
// for anything else, containers and array-likes included. (MLX goes through __complex__ first,
// which makes a Fraction a complex64 operand.)
nb::object as_python_number(nb::handle obj) {
  PyObject* p = obj.ptr();
  if (is_sequence(obj) || PyObject_CheckBuffer(p) || nb::hasattr(obj, "__mlx_array__") ||
      nb::hasattr(obj, "__array__") || nb::hasattr(obj, "__array_interface__")) {
    return {};
  }
  if (PyIndex_Check(p)) {
    PyObject* v = PyNumber_Index(p);
    if (v == nullptr) throw nb::python_error();
    return nb::steal(v);
  }
  const PyNumberMethods* methods = Py_TYPE(p)->tp_as_number;
  if (methods != nullptr && methods->nb_float != nullptr) {
    const double v = PyFloat_AsDouble(p);
    if (v == -1.0 && PyErr_Occurred()) throw nb::python_error();
    return nb::float_(v);
  }
  if (nb::hasattr(obj, "__complex__")) {
    const Py_complex z = PyComplex_AsCComplex(p);
    if (z.real == -1.0 && PyErr_Occurred()) throw nb::python_error();
    return nb::steal(PyComplex_FromCComplex(z));
  }
  return {};
}

}  // namespace

array to_array(nb::handle obj, std::optional<Dtype> dtype) {
  if (nb::isinstance<array>(obj)) {
    const array& a = nb::cast<const array&>(obj);
    return dtype && *dtype != a.dtype() ? astype(a, *dtype) : a;
  }
  if (nb::isinstance<nb::bool_>(obj)) return array(nb::cast<bool>(obj), dtype.value_or(bool_));
  if (nb::isinstance<nb::int_>(obj)) {
    Kind k = scalar_kind(obj);
    Dtype d = dtype.value_or(k == Kind::wide_integer ? int64 : int32);
    if (d == uint64) return array(nb::cast<uint64_t>(obj), d);
    if (is_floating_point(d) && d != complex64) return array(nb::cast<double>(obj), d);
    return array(nb::cast<int64_t>(obj), d);
  }
  if (nb::isinstance<nb::float_>(obj)) return array(nb::cast<double>(obj), dtype.value_or(float32));
  if (PyComplex_Check(obj.ptr())) {
    auto z = nb::cast<std::complex<double>>(obj);
    return array(complex64_t(static_cast<float>(z.real()), static_cast<float>(z.imag())),
                 dtype.value_or(complex64));
  }
  if (is_sequence(obj)) return from_list(obj, dtype);
  if (nb::hasattr(obj, "__mlx_array__")) return to_array(obj.attr("__mlx_array__")(), dtype);  // MLX's protocol
  AnyArray nd;
  if (nb::try_cast<AnyArray>(obj, nd)) return from_ndarray(nd, dtype);
  if (nb::hasattr(obj, "__array__") || nb::hasattr(obj, "__array_interface__")) {
    nb::object native = native_numpy(obj);
    if (nb::try_cast<AnyArray>(native, nd)) return from_ndarray(nd, dtype);
  }
  if (nb::object number = as_python_number(obj); number.is_valid()) return to_array(number, dtype);
  throw std::invalid_argument("[array] cannot convert an object of type " +
                              nb::cast<std::string>(nb::str(obj.type().attr("__name__"))) +
                              " to an array (expected a scalar, a nested list, an array or an "
                              "object with the buffer protocol / __array__)");
}

array from_dlpack(nb::handle obj, std::optional<bool> copy) {
  if (copy && !*copy) {
    throw std::invalid_argument("[from_dlpack] copy=False cannot be honoured: Tessera's arrays "
                                "live in memory it allocates, so an import is always a copy (MLX "
                                "on the CPU refuses too); pass copy=None or copy=True");
  }
  AnyArray nd;
  if (nb::try_cast<AnyArray>(obj, nd)) {
    if (auto kept = copy_keeping_layout(nd)) return *kept;
  }
  return to_array(obj);
}

namespace {

// A Python float or int operand as a 0-d array of dtype `d`, from a small per-thread cache:
// `z = z + 1.0` in a loop would otherwise make the same constant for every op. A cached array is
// only ever an input of graphs (never handed to Python as an object), arrays are immutable, and
// the cache's own reference keeps kernels from donating its buffer, so the sharing is invisible.
array constant_operand(nb::handle obj, Dtype d) {
  const bool is_float = nb::isinstance<nb::float_>(obj);
  uint64_t bits = 0;
  if (is_float) {
    const double v = nb::cast<double>(obj);
    std::memcpy(&bits, &v, sizeof(bits));  // exact: 0.0 and -0.0, NaN payloads stay apart
  } else {
    int64_t v = 0;
    if (!nb::try_cast<int64_t>(obj, v)) return to_array(obj, d);
    bits = static_cast<uint64_t>(v);
  }
  struct Entry {
    bool is_float = false;
    uint64_t bits = 0;
    Dtype dtype = float32;
    std::optional<array> value;
  };
  struct Cache {
    std::array<Entry, 4> entries;
    size_t next = 0;  // the entry replaced next
  };
  thread_local Cache kept;
  Cache& cache = kept;
  for (const Entry& e : cache.entries) {
    if (e.value && e.is_float == is_float && e.bits == bits && e.dtype == d) return *e.value;
  }
  Entry& e = cache.entries[cache.next];
  cache.next = (cache.next + 1) % cache.entries.size();
  e = Entry{is_float, bits, d, to_array(obj, d)};
  return *e.value;
}

}  // namespace

array to_array_like(nb::handle obj, const array& like) {
  if (nb::isinstance<array>(obj)) return nb::cast<const array&>(obj);
  const Dtype d = like.dtype();
  if (nb::isinstance<nb::bool_>(obj)) return to_array(obj);
  if (nb::isinstance<nb::int_>(obj)) {
    if (d == bool_) return to_array(obj);
    if (is_integral(d)) {
      // As MLX: a Python int that does not fit the array's integer dtype is an error, not a
      // wrapped value.
      const iinfo lim(d);
      int64_t v = 0;
      uint64_t u = 0;
      const bool fits = nb::try_cast<int64_t>(obj, v)
                            ? (v >= 0 ? static_cast<uint64_t>(v) <= lim.max : v >= lim.min)
                            : (nb::try_cast<uint64_t>(obj, u) && u <= lim.max);
      if (!fits) {
        throw std::invalid_argument("[array] the Python int " + nb::cast<std::string>(nb::str(obj)) +
                                    " does not fit the array's dtype " + dtype_name(d) +
                                    "; convert the array first (astype) or pass an array");
      }
    }
    return constant_operand(obj, d);
  }
  if (nb::isinstance<nb::float_>(obj)) {
    return constant_operand(obj, is_floating_point(d) ? d : float32);
  }
  if (PyComplex_Check(obj.ptr())) return to_array(obj, complex64);
  // A number of another type takes part as the Python scalar it converts to (weakly typed).
  if (nb::object number = as_python_number(obj); number.is_valid()) {
    return to_array_like(number, like);
  }
  return to_array(obj);  // MLX's __mlx_array__ protocol included
}

std::pair<array, array> to_arrays(const ArrayLike& a, const ArrayLike& b) {
  const bool a_arr = nb::isinstance<array>(a.obj), b_arr = nb::isinstance<array>(b.obj);
  if (a_arr && !b_arr) {
    const array& x = nb::cast<const array&>(a.obj);
    return {x, to_array_like(b.obj, x)};
  }
  if (b_arr && !a_arr) {
    const array& y = nb::cast<const array&>(b.obj);
    return {to_array_like(a.obj, y), y};
  }
  return {to_array(a.obj), to_array(b.obj)};
}

// ---- back to Python ----

namespace {

template <typename T>
nb::object py_value(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return nb::bool_(v);
  } else if constexpr (std::is_same_v<T, complex64_t>) {
    return nb::cast(std::complex<double>(v.real(), v.imag()));
  } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
    return nb::float_(static_cast<double>(static_cast<float>(v)));
  } else if constexpr (std::is_floating_point_v<T>) {
    return nb::float_(static_cast<double>(v));
  } else {
    return nb::int_(v);
  }
}

void eval_nogil(array& a) {
  blocking([&] { a.eval(); });
}

template <typename T>
nb::object list_of(const array& a, size_t dim, int64_t offset) {
  const T* p = a.data<T>();
  if (dim == a.ndim()) return py_value(p[offset]);
  nb::list out;
  for (int i = 0; i < a.shape(static_cast<int>(dim)); ++i) {
    out.append(list_of<T>(a, dim + 1, offset + i * a.strides()[dim]));
  }
  return out;
}

}  // namespace

nb::object to_scalar(array a) {
  if (a.size() != 1) {
    throw std::invalid_argument("[item] only an array of one element can be converted to a "
                                "Python scalar; this one has shape " +
                                nb::cast<std::string>(nb::str(nb::cast(a.shape()))));
  }
  eval_nogil(a);
  return detail::dispatch_dtype(a.dtype(), [&](auto tag) -> nb::object {
    using T = decltype(tag);
    return py_value(*a.data<T>());
  });
}

nb::object to_list(array a) {
  eval_nogil(a);
  return detail::dispatch_dtype(a.dtype(), [&](auto tag) -> nb::object {
    using T = decltype(tag);
    return list_of<T>(a, 0, 0);
  });
}

nb::object to_numpy(array a) {
  if (a.dtype() == bfloat16) {
    throw nb::type_error("[array] bfloat16 has no NumPy dtype: convert with "
                         "a.astype(tessera.core.float32) first");
  }
  eval_nogil(a);
  nb::dlpack::dtype dt;
  dt.lanes = 1;
  dt.bits = static_cast<uint8_t>(a.itemsize() * 8);
  using C = nb::dlpack::dtype_code;
  switch (kindof(a.dtype())) {
    case Dtype::Kind::b: dt.code = static_cast<uint8_t>(C::Bool); break;
    case Dtype::Kind::u: dt.code = static_cast<uint8_t>(C::UInt); break;
    case Dtype::Kind::i: dt.code = static_cast<uint8_t>(C::Int); break;
    case Dtype::Kind::f: dt.code = static_cast<uint8_t>(C::Float); break;
    case Dtype::Kind::c: dt.code = static_cast<uint8_t>(C::Complex); break;
    default: throw nb::type_error("[array] this dtype has no NumPy equivalent");
  }
  std::vector<size_t> shape(a.shape().begin(), a.shape().end());
  std::vector<int64_t> strides(a.strides().begin(), a.strides().end());
  // The capsule owns a handle to the array: the buffer lives as long as the NumPy view does.
  auto* keep = new array(a);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<array*>(p); });
  nb::ndarray<nb::numpy> nd(a.raw_data(), shape.size(), shape.data(), owner, strides.data(), dt);
  return nb::cast(nd, nb::rv_policy::reference);
}

// ---- SIGINT during blocking calls ----

namespace {

std::atomic<int> g_blocking{0};  // blocking calls in progress (any thread)
struct sigaction g_python_sigint {};  // Python's own handler, which ours chains to

void on_sigint(int sig) {
  if (g_blocking.load(std::memory_order_relaxed) > 0) detail::request_interrupt();
  if (g_python_sigint.sa_handler != SIG_DFL && g_python_sigint.sa_handler != SIG_IGN &&
      g_python_sigint.sa_handler != nullptr) {
    g_python_sigint.sa_handler(sig);  // Python's trampoline: sets its flag (signal-safe)
  }
}

}  // namespace

std::atomic<bool> g_exiting{false};  // the interpreter is exiting (the atexit hook ran)
std::atomic<int> g_retaking{0};      // threads between begin_retake and end_retake

namespace blocking_detail {
bool begin_retake() noexcept {
  if (g_exiting.load()) return false;
  g_retaking.fetch_add(1);
  if (!g_exiting.load()) return true;  // seen before the hook's store: the hook waits for us
  g_retaking.fetch_sub(1);
  return false;
}
void end_retake() noexcept { g_retaking.fetch_sub(1); }
void park() noexcept {
  for (;;) ::pause();
}
void enter() noexcept { g_blocking.fetch_add(1, std::memory_order_relaxed); }
void leave() noexcept { g_blocking.fetch_sub(1, std::memory_order_relaxed); }
void check_signals() {
  if (!detail::interrupt_requested()) return;
  if (g_blocking.load(std::memory_order_relaxed) == 0) detail::clear_interrupt();
  if (PyErr_CheckSignals() != 0) throw nb::python_error();
}
}  // namespace blocking_detail

void install_exit_hook() {
  nb::module_::import_("atexit").attr("register")(nb::cpp_function([] {
    g_exiting.store(true);
    PyThreadState* saved = PyEval_SaveThread();
    for (int i = 0; i < 2000 && g_retaking.load() > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    PyEval_RestoreThread(saved);
  }));
}

void install_sigint_handler() {
  struct sigaction cur {};
  if (sigaction(SIGINT, nullptr, &cur) != 0 || cur.sa_handler == on_sigint) return;
  if ((cur.sa_flags & SA_SIGINFO) != 0) return;  // not Python's plain handler: leave it alone
  g_python_sigint = cur;
  struct sigaction ours {};
  ours.sa_handler = on_sigint;
  sigemptyset(&ours.sa_mask);
  ours.sa_flags = cur.sa_flags;
  sigaction(SIGINT, &ours, nullptr);
}

std::vector<int> axes_or_all(const OptAxes& axis, const array& a) {
  if (!axis) {
    std::vector<int> all(a.ndim());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    return all;
  }
  if (auto* i = std::get_if<int>(&*axis)) return {*i};
  return std::get<std::vector<int>>(*axis);
}

}  // namespace tessera::python
