// NumPy-style indexing (see indexing.h). An index is parsed into one entry per dimension of
// the array (None dims are added to the array first, Ellipsis expanded); basic entries become
// one strided slice, integer-array entries one gather / scatter.
#include "indexing.h"

#include <algorithm>
#include <limits>
#include <string>

#include "convert.h"

namespace tessera::python {

namespace {

struct Entry {
  enum Kind { full, slice, integer, indices } kind = full;
  int32_t start = 0, stop = 0, step = 1;  // slice: normalised, as Tessera's slice() reads them
  int64_t value = 0;                      // integer
  std::optional<array> idx;               // indices (integer dtype)
};

struct Parsed {
  array base;                // the array with a size-1 dim for every None
  std::vector<Entry> dims;   // one per dim of base
  std::vector<int> adv;      // dims indexed by arrays (ints count too when arrays are present)
  bool adv_adjacent = true;  // the advanced dims are next to each other in the index
};

[[noreturn]] void index_error(const std::string& what) { throw nb::index_error(what.c_str()); }

// An index of the wrong form (more indices than dims, two ellipses): NumPy raises IndexError
// and MLX ValueError, so the type is both (tessera.core.IndexingError) and code written for
// either catches it.
PyObject* indexing_error_type() {
  static PyObject* type = [] {
    nb::object bases = nb::make_tuple(nb::handle(PyExc_IndexError), nb::handle(PyExc_ValueError));
    return PyErr_NewException("tessera.core.IndexingError", bases.ptr(), nullptr);
  }();
  return type;
}

[[noreturn]] void malformed_index(const std::string& what) {
  PyErr_SetString(indexing_error_type(), what.c_str());
  throw nb::python_error();
}

// An integer index or slice bound: shapes are 32-bit, so a value outside int32 is refused (a
// ValueError, as MLX) rather than clamped.
void check_int32(nb::handle h, const char* op) {
  if (h.is_none() || !nb::isinstance<nb::int_>(h)) return;
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
  if (overflow != 0 || v > std::numeric_limits<int32_t>::max() ||
      v < std::numeric_limits<int32_t>::min()) {
    throw std::invalid_argument(std::string("[") + op + "] index " +
                                nb::cast<std::string>(nb::str(h)) +
                                " is outside the 32-bit range of array dimensions [-2147483648, "
                                "2147483647]");
  }
}

std::string py_type_name(nb::handle h) { return nb::cast<std::string>(nb::str(h.type().attr("__name__"))); }

bool is_index_array(nb::handle h) {
  return nb::isinstance<array>(h) || nb::isinstance<nb::list>(h) || nb::hasattr(h, "__array__");
}

array index_array(nb::handle h) {
  array a = to_array(h);
  if (a.dtype() == bool_) {
    throw std::invalid_argument("[getitem] boolean masks are not supported as indices (as in "
                                "MLX): use tessera.core.where(mask, ...) or index with the "
                                "positions of the True elements");
  }
  if (!is_integral(a.dtype())) {
    throw std::invalid_argument("[getitem] arrays used as indices must be integers, got " +
                                dtype_name(a.dtype()));
  }
  return a;
}

Entry slice_entry(nb::handle h, int32_t n, const char* op) {
  for (const char* part : {"start", "stop", "step"}) check_int32(h.attr(part), op);
  Py_ssize_t start = 0, stop = 0, step = 0;
  if (PySlice_Unpack(h.ptr(), &start, &stop, &step) < 0) throw nb::python_error();
  const Py_ssize_t len = PySlice_AdjustIndices(n, &start, &stop, step);
  Entry e;
  e.kind = Entry::slice;
  if (len == 0) {
    e.start = 0, e.stop = 0, e.step = 1;
    return e;
  }
  if (step == 1 && start == 0 && len == n) {
    e.kind = Entry::full;
    return e;
  }
  // Absolute bounds; a negative end of a backward slice means "before 0", which slice() reads
  // as counting from the end unless pushed below -n.
  const int64_t end = static_cast<int64_t>(start) + static_cast<int64_t>(step) * len;
  e.start = static_cast<int32_t>(start);
  e.step = static_cast<int32_t>(step);
  e.stop = static_cast<int32_t>(end < 0 ? end - n : std::min<int64_t>(end, n));
  return e;
}

Parsed parse(const array& a, nb::handle index, const char* op) {
  std::vector<nb::handle> items;
  nb::tuple tup;
  if (nb::isinstance<nb::tuple>(index)) {
    tup = nb::borrow<nb::tuple>(index);
    for (nb::handle h : tup) items.push_back(h);
  } else {
    items.push_back(index);
  }
  // Ellipsis, then None: new size-1 dims in the array, indexed by ':'.
  int consumed = 0, ellipses = 0;
  for (nb::handle h : items) {
    if (h.is(Py_Ellipsis)) {
      ++ellipses;
    } else if (!h.is_none()) {
      if (nb::isinstance<nb::bool_>(h)) {
        throw std::invalid_argument(std::string("[") + op + "] a Python bool is not a valid index");
      }
      check_int32(h, op);
      ++consumed;
    }
  }
  if (ellipses > 1) malformed_index("an index can only have a single ellipsis ('...')");
  if (consumed > static_cast<int>(a.ndim())) {
    malformed_index("too many indices for array: array is " + std::to_string(a.ndim()) +
                "-dimensional, but " + std::to_string(consumed) + " were indexed");
  }
  std::vector<nb::object> full_items;  // one per dim of the result of adding the None dims
  std::vector<int> new_dims;
  nb::object colon = nb::steal(PySlice_New(nullptr, nullptr, nullptr));
  for (nb::handle h : items) {
    if (h.is(Py_Ellipsis)) {
      for (int k = 0; k < static_cast<int>(a.ndim()) - consumed; ++k) full_items.push_back(colon);
    } else if (h.is_none()) {
      new_dims.push_back(static_cast<int>(full_items.size()));
      full_items.push_back(colon);
    } else {
      full_items.push_back(nb::borrow(h));
    }
  }
  const size_t total = a.ndim() + new_dims.size();
  while (full_items.size() < total) full_items.push_back(colon);
  Parsed p{new_dims.empty() ? a : expand_dims(a, new_dims), {}, {}, true};
  bool any_array = false;
  for (auto& h : full_items) any_array |= is_index_array(h);
  int last_adv = -2;
  for (size_t d = 0; d < full_items.size(); ++d) {
    nb::handle h = full_items[d];
    const int32_t n = p.base.shape(static_cast<int>(d));
    Entry e;
    if (PySlice_Check(h.ptr())) {
      e = slice_entry(h, n, op);
    } else if (nb::isinstance<nb::int_>(h) || (nb::isinstance<array>(h) && nb::cast<const array&>(h).ndim() == 0 &&
                                               is_integral(nb::cast<const array&>(h).dtype()) && !any_array)) {
      int64_t v = nb::isinstance<nb::int_>(h) ? nb::cast<int64_t>(h)
                                              : nb::cast<int64_t>(to_scalar(nb::cast<array>(h)));
      if (v < -static_cast<int64_t>(n) || v >= n) {
        index_error("index " + std::to_string(v) + " is out of bounds for axis " +
                    std::to_string(d) + " with size " + std::to_string(n));
      }
      if (v < 0) v += n;
      if (any_array) {
        e.kind = Entry::indices;
        e.idx = array(static_cast<int32_t>(v));
      } else {
        e.kind = Entry::integer;
        e.value = v;
      }
    } else if (is_index_array(h)) {
      e.kind = Entry::indices;
      array idx = index_array(h);
      // Negative positions count from the end, as NumPy's.
      if (!issubdtype(idx.dtype(), unsignedinteger)) {
        idx = where(less(idx, array(0, idx.dtype())), add(idx, array(n, idx.dtype())), idx);
      }
      e.idx = idx;
    } else {
      throw std::invalid_argument(std::string("[") + op + "] cannot index with an object of type " +
                                  py_type_name(h) +
                                  " (expected int, slice, None, Ellipsis or an integer array)");
    }
    if (e.kind == Entry::indices) {
      if (last_adv >= 0 && last_adv != static_cast<int>(d) - 1) p.adv_adjacent = false;
      last_adv = static_cast<int>(d);
      p.adv.push_back(static_cast<int>(d));
    }
    p.dims.push_back(std::move(e));
  }
  return p;
}

// The basic part: one strided slice over the dims with slice / integer entries.
array apply_slices(const Parsed& p, Shape* start_out = nullptr, Shape* stop_out = nullptr,
                   Shape* step_out = nullptr) {
  const size_t nd = p.dims.size();
  Shape start(nd, 0), stop = p.base.shape(), step(nd, 1);
  bool any = false;
  for (size_t d = 0; d < nd; ++d) {
    const Entry& e = p.dims[d];
    if (e.kind == Entry::slice) {
      start[d] = e.start, stop[d] = e.stop, step[d] = e.step;
      any = true;
    } else if (e.kind == Entry::integer) {
      start[d] = static_cast<int32_t>(e.value), stop[d] = static_cast<int32_t>(e.value + 1);
      any = true;
    }
  }
  if (start_out) *start_out = start, *stop_out = stop, *step_out = step;
  return any ? slice(p.base, start, stop, step) : p.base;
}

std::vector<int> integer_dims(const Parsed& p) {
  std::vector<int> out;
  for (size_t d = 0; d < p.dims.size(); ++d) {
    if (p.dims[d].kind == Entry::integer) out.push_back(static_cast<int>(d));
  }
  return out;
}

// Where NumPy puts the broadcast index dims: in place of the first advanced dim when the
// advanced dims are adjacent, else first.
int adv_position(const Parsed& p) {
  if (!p.adv_adjacent) return 0;
  int pos = 0;
  for (int d = 0; d < p.adv.front(); ++d) pos += p.dims[static_cast<size_t>(d)].kind == Entry::integer ? 0 : 1;
  return pos;
}

std::vector<array> broadcast_indices(const Parsed& p) {
  std::vector<array> idx;
  for (int d : p.adv) idx.push_back(*p.dims[static_cast<size_t>(d)].idx);
  return broadcast_arrays(idx);
}

// `v` broadcast to `shape`, after dropping leading size-1 dims it has beyond it (NumPy lets
// a[0] = [[1, 2]] fill a row).
array fit_value(array v, const Shape& shape) {
  while (v.ndim() > shape.size() && v.shape(0) == 1) v = squeeze(v, 0);
  return broadcast_to(v, shape);
}

// `v` laid out as scatter takes updates for sub[index]: the index dims first, then sub's dims
// with size 1 at the advanced ones. v broadcasts against the shape sub[index] has.
array scatter_updates(const Parsed& p, const array& sub, const std::vector<array>& idx,
                      const array& v) {
  const int idx_nd = static_cast<int>(idx[0].ndim());
  Shape rest;
  for (size_t d = 0; d < sub.ndim(); ++d) {
    if (std::find(p.adv.begin(), p.adv.end(), static_cast<int>(d)) == p.adv.end()) {
      rest.push_back(sub.shape()[d]);
    }
  }
  const int pos = adv_position(p);
  Shape got(rest.begin(), rest.begin() + pos);
  got.insert(got.end(), idx[0].shape().begin(), idx[0].shape().end());
  got.insert(got.end(), rest.begin() + pos, rest.end());
  array b = fit_value(v, got);
  if (pos > 0 && idx_nd > 0) {
    std::vector<int> perm;
    for (int k = pos; k < pos + idx_nd; ++k) perm.push_back(k);
    for (int k = 0; k < pos; ++k) perm.push_back(k);
    for (int k = pos + idx_nd; k < static_cast<int>(b.ndim()); ++k) perm.push_back(k);
    b = transpose(b, perm);
  }
  std::vector<int> ones;
  for (int d : p.adv) ones.push_back(idx_nd + d);
  return expand_dims(b, ones);
}

// The updated sub-array written back into the (None-expanded) base, reshaped to a's shape.
array write_back(const Parsed& p, const array& a, const array& sub, const array& updated,
                 const Shape& start, const Shape& stop, const Shape& step) {
  array out = sub.id() == p.base.id() ? updated : slice_update(p.base, updated, start, stop, step);
  return p.base.ndim() != a.ndim() ? reshape(out, a.shape()) : out;
}

}  // namespace

array get_item(const array& a, nb::handle index) {
  Parsed p = parse(a, index, "getitem");
  array v = apply_slices(p);
  if (p.adv.empty()) {
    auto ints = integer_dims(p);
    return ints.empty() ? v : squeeze(v, ints);
  }
  auto idx = broadcast_indices(p);
  const int idx_nd = static_cast<int>(idx[0].ndim());
  Shape sizes = v.shape();
  for (int d : p.adv) sizes[static_cast<size_t>(d)] = 1;
  array g = gather(v, idx, p.adv, sizes);  // idx dims, then v's dims (1 at the advanced ones)
  std::vector<int> drop;
  for (int d : p.adv) drop.push_back(idx_nd + d);
  g = squeeze(g, drop);
  const int pos = adv_position(p);
  if (pos == 0 || idx_nd == 0) return g;
  // Move the index dims from the front to `pos`.
  std::vector<int> perm;
  for (int k = idx_nd; k < idx_nd + pos; ++k) perm.push_back(k);
  for (int k = 0; k < idx_nd; ++k) perm.push_back(k);
  for (int k = idx_nd + pos; k < static_cast<int>(g.ndim()); ++k) perm.push_back(k);
  return transpose(g, perm);
}

namespace {

// a[mask] = value for a boolean mask covering a's leading dims.
array set_masked(const array& a, const array& mask, nb::handle value) {
  if (mask.ndim() > a.ndim()) {
    throw std::invalid_argument("[setitem] a boolean mask of shape " + nb::cast<std::string>(nb::str(nb::cast(mask.shape()))) +
                                " has more dimensions than the array");
  }
  for (size_t d = 0; d < mask.ndim(); ++d) {
    if (mask.shape()[d] != a.shape()[d]) {
      throw std::invalid_argument("[setitem] the boolean mask's dimension " + std::to_string(d) +
                                  " has size " + std::to_string(mask.shape()[d]) +
                                  " but the array's has " + std::to_string(a.shape()[d]));
    }
  }
  Shape ms = mask.shape();
  while (ms.size() < a.ndim()) ms.push_back(1);
  array m = broadcast_to(reshape(mask, ms), a.shape());
  array v = to_array_like(value, a);
  if (v.size() == 1) return where(m, astype(reshape(v, {}), a.dtype()), a);
  return masked_scatter(a, m, astype(v, a.dtype()));
}

}  // namespace

array set_item(const array& a, nb::handle index, nb::handle value) {
  if (nb::isinstance<nb::bool_>(index)) {  // a[True] = v: a 0-d mask, as MLX
    return set_masked(a, array(nb::cast<bool>(index)), value);
  }
  if (!nb::isinstance<nb::tuple>(index) && is_index_array(index)) {
    array m = to_array(index);
    if (m.dtype() == bool_) return set_masked(a, m, value);
  }
  Parsed p = parse(a, index, "setitem");
  array v = astype(to_array_like(value, a), a.dtype());
  Shape start, stop, step;
  array sub = apply_slices(p, &start, &stop, &step);
  array updated = sub;
  if (p.adv.empty()) {
    // The value broadcasts against a[index] (integer dims squeezed); restore them as size 1.
    auto ints = integer_dims(p);
    Shape target = sub.shape();
    Shape squeezed;
    for (size_t d = 0; d < target.size(); ++d) {
      if (std::find(ints.begin(), ints.end(), static_cast<int>(d)) == ints.end()) squeezed.push_back(target[d]);
    }
    updated = reshape(fit_value(v, squeezed), target);
  } else {
    auto idx = broadcast_indices(p);
    updated = scatter(sub, idx, scatter_updates(p, sub, idx, v), p.adv);
  }
  return write_back(p, a, sub, updated, start, stop, step);
}

namespace {

// a.at[index]: an update object whose add / subtract / ... return the updated array, where
// repeated indices accumulate (unlike a[index] += v).
struct ArrayAt {
  array a;
  nb::object index;
  bool indexed = false;  // a.at alone has no index (a.at[None] has one: None)
};


array at_update(const ArrayAt& at, nb::handle value, const char* op) {
  const std::string name(op);
  if (!at.indexed) {
    throw std::invalid_argument("[at] " + name + " needs an index first: a.at[index]." + name +
                                "(value)");
  }
  Parsed p = parse(at.a, at.index, "at");
  array v = astype(to_array_like(value, at.a), at.a.dtype());
  if (p.adv.empty()) {
    // Basic indices touch each element once: combine and write back.
    array cur = get_item(at.a, at.index);
    array b = fit_value(v, cur.shape());
    array nv = name == "add" ? add(cur, b) : name == "subtract" ? subtract(cur, b)
             : name == "multiply" ? multiply(cur, b) : name == "divide" ? divide(cur, b)
             : name == "maximum" ? maximum(cur, b) : minimum(cur, b);
    return set_item(at.a, at.index, nb::cast(astype(nv, at.a.dtype())));
  }
  Shape start, stop, step;
  array sub = apply_slices(p, &start, &stop, &step);
  auto idx = broadcast_indices(p);
  array b = scatter_updates(p, sub, idx, v);
  array updated = name == "add"        ? scatter_add(sub, idx, b, p.adv)
                  : name == "subtract" ? scatter_add(sub, idx, negative(b), p.adv)
                  : name == "multiply" ? scatter_prod(sub, idx, b, p.adv)
                  : name == "divide"   ? scatter_prod(sub, idx, reciprocal(b), p.adv)
                  : name == "maximum"  ? scatter_max(sub, idx, b, p.adv)
                                       : scatter_min(sub, idx, b, p.adv);
  return write_back(p, at.a, sub, updated, start, stop, step);
}

}  // namespace

void init_indexing(nb::module_& m, nb::class_<array>& cls) {
  m.attr("IndexingError") = nb::borrow(indexing_error_type());
  cls.def("__getitem__", &get_item, "index"_a.none(), "a[index], with NumPy's rules.");
  cls.def(
      "__setitem__",
      [](array& a, nb::handle index, nb::handle value) { a = set_item(a, index, value); },
      "index"_a.none(), "value"_a.none(),
      "a[index] = value: the object now holds the updated array (repeated indices: one wins).");
  nb::class_<ArrayAt> at(m, "ArrayAt",
                         "A helper object to apply updates at specific indices: a.at[index], "
                         "whose updates accumulate over repeated indices.");
  at.def("__getitem__", [](const ArrayAt& self, nb::handle index) {
    return ArrayAt{self.a, nb::borrow(index), true};
  }, "index"_a.none());
  for (const char* op : {"add", "subtract", "multiply", "divide", "maximum", "minimum"}) {
    at.def(op, [op](const ArrayAt& self, nb::handle value) { return at_update(self, value, op); },
           "value"_a, "The array with value combined into a[index] (each repeat counts).");
  }
  cls.def_prop_ro("at", [](const array& a) { return ArrayAt{a, nb::none()}; },
                  "Indexed updates that accumulate: a.at[idx].add(v).");
}

}  // namespace tessera::python
