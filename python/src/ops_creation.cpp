// Creation and indexing ops of tessera.core with MLX's signatures: arange, linspace, full, zeros,
// ones, eye, tri*, astype, view, take, take_along_axis, put_along_axis, slice, slice_update,
// diagonal, trace.
#include "ops_common.h"

namespace tessera::python {

namespace ops_detail {

Shape to_shape(const ShapeLike& shape, const char* op) {
  auto dim = [&](nb::handle v) -> int32_t {
    if (!PyIndex_Check(v.ptr())) {
      throw nb::type_error(("[" + std::string(op) + "] shape entries must be integers, got " +
                            nb::cast<std::string>(nb::repr(v)))
                               .c_str());
    }
    nb::object i = nb::steal(PyNumber_Index(v.ptr()));
    if (!i.is_valid()) throw nb::python_error();
    int overflow = 0;
    const long long n = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
    if (overflow != 0 || n < INT32_MIN || n > INT32_MAX) {
      throw std::overflow_error("[" + std::string(op) + "] shape dimension " +
                                nb::cast<std::string>(nb::str(i)) +
                                " is outside int32 [-2147483648, 2147483647] (Tessera shapes "
                                "hold 32-bit dimensions, as MLX)");
    }
    return static_cast<int32_t>(n);
  };
  if (PyIndex_Check(shape.obj.ptr())) return Shape{dim(shape.obj)};
  Shape out;
  for (nb::handle v : shape.obj) out.push_back(dim(v));
  return out;
}

}  // namespace ops_detail

using namespace ops_detail;

void init_ops_creation(nb::module_& m) {
  // ---------------------------------------------------------------- creation
  m.def(
      "arange",
      [](Scalar start, std::optional<Scalar> stop, const std::optional<Scalar>& step,
         const std::optional<Dtype>& dtype, StreamOrDevice s) {
        if (!stop) {
          stop = start;
          start = int64_t{0};
        }
        Dtype t = dtype
                      ? *dtype
                      : promote_types(scalar_dtype(start),
                                      step ? promote_types(scalar_dtype(*stop), scalar_dtype(*step))
                                           : scalar_dtype(*stop));
        return arange(scalar_value(start), scalar_value(*stop), step ? scalar_value(*step) : 1.0, t,
                      s);
      },
      "start"_a.noconvert(), "stop"_a.noconvert().none(), "step"_a.noconvert().none() = nb::none(),
      "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Evenly spaced values in ``[start, stop)``.\n\n"
      "Args:\n"
      "    start (float or int, optional): First value. Default: ``0``.\n"
      "    stop (float or int): End of the interval (not included).\n"
      "    step (float or int, optional): Spacing. Default: ``1``.\n"
      "    dtype (Dtype, optional): Result dtype; by default int32 when every\n"
      "      argument is an int, else float32.\n\n"
      "Returns:\n"
      "    array: The values.\n");
  m.def(
      "arange",
      [](Scalar stop, const std::optional<Scalar>& step, const std::optional<Dtype>& dtype,
         StreamOrDevice s) {
        Dtype t = dtype ? *dtype
                        : (step ? promote_types(scalar_dtype(stop), scalar_dtype(*step))
                                : scalar_dtype(stop));
        return arange(0.0, scalar_value(stop), step ? scalar_value(*step) : 1.0, t, s);
      },
      "stop"_a.noconvert(), "step"_a.noconvert().none() = nb::none(), "dtype"_a = nb::none(),
      nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "linspace",
      [](double start, double stop, int num, bool endpoint, std::optional<Dtype> dtype,
         StreamOrDevice s) {
        return linspace(start, stop, num, endpoint, dtype.value_or(float32), s);
      },
      "start"_a, "stop"_a, "num"_a = 50, "endpoint"_a = true, "dtype"_a.none() = float32,
      "stream"_a = nb::none(),
      "``num`` evenly spaced values from ``start`` to ``stop``.\n\n"
      "Args:\n"
      "    start (scalar): First value.\n"
      "    stop (scalar): Last value (included when ``endpoint``).\n"
      "    num (int, optional): Number of values. Default: ``50``.\n"
      "    endpoint (bool, optional): Include ``stop``. Default: ``True``.\n"
      "    dtype (Dtype, optional): Result dtype. Default: ``float32``.\n\n"
      "Returns:\n"
      "    array: The values.\n");
  m.def(
      "full",
      [](const ShapeLike& shape, const ArrayLike& vals, std::optional<Dtype> dtype,
         StreamOrDevice s) { return full(to_shape(shape, "full"), to_array(vals.obj, dtype), s); },
      "shape"_a, "vals"_a, "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "An array of the given shape filled with ``vals`` (broadcast).\n\n"
      "Args:\n"
      "    shape (int or list(int)): The shape.\n"
      "    vals (float or int or array): The fill value(s).\n"
      "    dtype (Dtype, optional): Result dtype; by default that of ``vals``.\n\n"
      "Returns:\n"
      "    array: The filled array.\n");
  m.def(
      "full_like",
      [](const array& a, const ArrayLike& vals, std::optional<Dtype> dtype, StreamOrDevice s) {
        Dtype t = dtype.value_or(a.dtype());
        return full_like(a, to_array(vals.obj, t), t, s);
      },
      nb::arg(), "vals"_a, "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "An array shaped like ``a`` filled with ``vals``.\n\n"
      "Args:\n"
      "    a (array): Gives the shape (and the default dtype).\n"
      "    vals (float or int or array): The fill value(s).\n"
      "    dtype (Dtype, optional): Result dtype; by default ``a``'s.\n\n"
      "Returns:\n"
      "    array: The filled array.\n");
  m.def(
      "zeros",
      [](const ShapeLike& shape, std::optional<Dtype> dtype, StreamOrDevice s) {
        return zeros(to_shape(shape, "zeros"), dtype.value_or(float32), s);
      },
      "shape"_a, "dtype"_a.none() = float32, nb::kw_only(), "stream"_a = nb::none(),
      "An array of zeros.\n\n"
      "Args:\n"
      "    shape (int or list(int)): The shape.\n"
      "    dtype (Dtype, optional): Result dtype. Default: ``float32``.\n\n"
      "Returns:\n"
      "    array: The zeros.\n");
  m.def(
      "zeros_like",
      [](const array& a, std::optional<Dtype> dtype, StreamOrDevice s) {
        return zeros_like(a, dtype.value_or(a.dtype()), s);
      },
      nb::arg(), "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Zeros with the shape (and by default the dtype) of ``a``.\n\n"
      "Args:\n"
      "    a (array): The array to take the shape from.\n"
      "    dtype (Dtype, optional): Result dtype; by default ``a``'s.\n\n"
      "Returns:\n"
      "    array: The zeros.\n");
  m.def(
      "ones",
      [](const ShapeLike& shape, std::optional<Dtype> dtype, StreamOrDevice s) {
        return ones(to_shape(shape, "ones"), dtype.value_or(float32), s);
      },
      "shape"_a, "dtype"_a.none() = float32, nb::kw_only(), "stream"_a = nb::none(),
      "An array of ones.\n\n"
      "Args:\n"
      "    shape (int or list(int)): The shape.\n"
      "    dtype (Dtype, optional): Result dtype. Default: ``float32``.\n\n"
      "Returns:\n"
      "    array: The ones.\n");
  m.def(
      "ones_like",
      [](const array& a, std::optional<Dtype> dtype, StreamOrDevice s) {
        return ones_like(a, dtype.value_or(a.dtype()), s);
      },
      nb::arg(), "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Ones with the shape (and by default the dtype) of ``a``.\n\n"
      "Args:\n"
      "    a (array): The array to take the shape from.\n"
      "    dtype (Dtype, optional): Result dtype; by default ``a``'s.\n\n"
      "Returns:\n"
      "    array: The ones.\n");
  m.def(
      "eye",
      [](int n, std::optional<int> m_, int k, std::optional<Dtype> dtype, StreamOrDevice s) {
        return eye(n, m_.value_or(n), k, dtype.value_or(float32), s);
      },
      "n"_a, "m"_a = nb::none(), "k"_a = 0, "dtype"_a.none() = float32, nb::kw_only(),
      "stream"_a = nb::none(),
      "A 2-D array with ones on a diagonal and zeros elsewhere.\n\n"
      "Args:\n"
      "    n (int): Number of rows.\n"
      "    m (int, optional): Number of columns. Default: ``n``.\n"
      "    k (int, optional): The diagonal (0: main, > 0: above). Default: ``0``.\n"
      "    dtype (Dtype, optional): Result dtype. Default: ``float32``.\n\n"
      "Returns:\n"
      "    array: The matrix.\n");
  m.def(
      "identity",
      [](int n, std::optional<Dtype> dtype, StreamOrDevice s) {
        return identity(n, dtype.value_or(float32), s);
      },
      "n"_a, "dtype"_a.none() = float32, nb::kw_only(), "stream"_a = nb::none(),
      "The ``n`` x ``n`` identity matrix.\n\n"
      "Args:\n"
      "    n (int): Number of rows and columns.\n"
      "    dtype (Dtype, optional): Result dtype. Default: ``float32``.\n\n"
      "Returns:\n"
      "    array: The identity matrix.\n");
  m.def(
      "tri",
      [](int n, std::optional<int> m_, int k, std::optional<Dtype> dtype, StreamOrDevice s) {
        return tri(n, m_.value_or(n), k, dtype.value_or(float32), s);
      },
      "n"_a, "m"_a = nb::none(), "k"_a = 0, "dtype"_a.none() = float32, nb::kw_only(),
      "stream"_a = nb::none(),
      "A matrix of ones at and below a diagonal, zeros above.\n\n"
      "Args:\n"
      "    n (int): Number of rows.\n"
      "    m (int, optional): Number of columns. Default: ``n``.\n"
      "    k (int, optional): The diagonal. Default: ``0``.\n"
      "    dtype (Dtype, optional): Result dtype. Default: ``float32``.\n\n"
      "Returns:\n"
      "    array: The triangular matrix.\n");
  m.def(
      "tril", [](const array& x, int k, StreamOrDevice s) { return tril(x, k, s); }, "x"_a,
      "k"_a = 0, nb::kw_only(), "stream"_a = nb::none(),
      "Zero the elements above the ``k``-th diagonal.\n\n"
      "Args:\n"
      "    x (array): Input array (at least 2-D).\n"
      "    k (int, optional): The diagonal. Default: ``0``.\n\n"
      "Returns:\n"
      "    array: The lower triangle.\n");
  m.def(
      "triu", [](const array& x, int k, StreamOrDevice s) { return triu(x, k, s); }, "x"_a,
      "k"_a = 0, nb::kw_only(), "stream"_a = nb::none(),
      "Zero the elements below the ``k``-th diagonal.\n\n"
      "Args:\n"
      "    x (array): Input array (at least 2-D).\n"
      "    k (int, optional): The diagonal. Default: ``0``.\n\n"
      "Returns:\n"
      "    array: The upper triangle.\n");
  m.def(
      "astype", [](const array& a, Dtype dtype, StreamOrDevice s) { return astype(a, dtype, s); },
      nb::arg(), "dtype"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Convert an array to another dtype.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    dtype (Dtype): The target dtype.\n\n"
      "Returns:\n"
      "    array: The converted array.\n");
  m.def(
      "view",
      [](const ArrayLike& a, const Dtype& dtype, StreamOrDevice s) {
        return view(to_array(a), dtype, s);
      },
      nb::arg(), "dtype"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Reinterpret the bytes of an array as another dtype.\n\n"
      "The last axis scales by the ratio of the two element sizes.\n\n"
      "Args:\n"
      "    a (array): Input array or scalar.\n"
      "    dtype (Dtype): The dtype to read the bytes as.\n\n"
      "Returns:\n"
      "    array: The reinterpreted array.\n");
  m.def(
      "as_strided",
      [](const array& a, std::optional<Shape> shape, std::optional<Strides> strides, size_t offset,
         StreamOrDevice s) {
        Shape sh = shape ? *shape : a.shape();
        Strides st;
        if (strides) {
          st = *strides;
        } else {
          // Row-contiguous strides for `sh`.
          st.assign(sh.size(), 1);
          for (size_t i = sh.size(); i-- > 1;) st[i - 1] = st[i] * sh[i];
        }
        return as_strided(a, std::move(sh), std::move(st), offset, s);
      },
      nb::arg(), "shape"_a = nb::none(), "strides"_a = nb::none(), "offset"_a = 0, nb::kw_only(),
      "stream"_a = nb::none(),
      "A view of an array's buffer with any shape and strides.\n\n"
      "Nothing is checked: a view reaching outside the buffer reads garbage.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    shape (list(int), optional): The view's shape. Default: ``a.shape``.\n"
      "    strides (list(int), optional): Its strides, in elements. Default:\n"
      "      row-contiguous strides for ``shape``.\n"
      "    offset (int): Elements to skip at the start. Default: ``0``.\n\n"
      "Returns:\n"
      "    array: The strided view.\n");
  m.def(
      "contiguous",
      [](const array& a, bool allow_col_major, StreamOrDevice s) {
        return contiguous(a, allow_col_major, s);
      },
      nb::arg(), "allow_col_major"_a = false, nb::kw_only(), "stream"_a = nb::none(),
      "A row-contiguous array equal to ``a``.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    allow_col_major (bool): Keep a column-major input as it is.\n"
      "      Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The contiguous array.\n");

  // ---------------------------------------------------------------- indexing
  m.def(
      "take",
      [](const array& a, const std::variant<int, array>& indices, std::optional<int> axis,
         StreamOrDevice s) {
        if (auto* i = std::get_if<int>(&indices))
          return axis ? take(a, *i, *axis, s) : take(a, *i, s);
        const array& idx = std::get<array>(indices);
        return axis ? take(a, idx, *axis, s) : take(a, idx, s);
      },
      nb::arg(), "indices"_a, "axis"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Elements of an array at the given indices along an axis.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    indices (int or array): Integer indices (negative ones count from the\n"
      "      end).\n"
      "    axis (int, optional): The axis to index; ``None`` (the default)\n"
      "      indexes the flattened array.\n\n"
      "Returns:\n"
      "    array: The selected elements.\n");
  m.def(
      "take_along_axis",
      [](const array& a, const array& indices, std::optional<int> axis, StreamOrDevice s) {
        if (axis) return take_along_axis(a, indices, *axis, s);
        return take_along_axis(reshape(a, {-1}, s), indices, 0, s);
      },
      nb::arg(), "indices"_a, "axis"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
      "Pick values along an axis with indices broadcast against the array.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    indices (array): Integer indices (as many dims as ``a``).\n"
      "    axis (int, optional): The axis; ``None`` (the default) uses the\n"
      "      flattened array.\n\n"
      "Returns:\n"
      "    array: The selected values.\n");
  m.def(
      "put_along_axis",
      [](const array& a, const array& indices, const array& values, std::optional<int> axis,
         StreamOrDevice s) {
        if (axis) return put_along_axis(a, indices, values, *axis, s);
        return reshape(put_along_axis(reshape(a, {-1}, s), indices, values, 0, s), a.shape(), s);
      },
      nb::arg(), "indices"_a, "values"_a, "axis"_a.none(), nb::kw_only(), "stream"_a = nb::none(),
      "A copy of ``a`` with values written at indices along an axis.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    indices (array): Integer indices (as many dims as ``a``).\n"
      "    values (array): The values to write (broadcast to ``indices``).\n"
      "    axis (int or None): The axis; ``None`` uses the flattened array.\n\n"
      "Returns:\n"
      "    array: The updated array.\n");
  m.def(
      "slice",
      [](const array& a, const array& start_indices, std::vector<int> axes, Shape slice_size,
         StreamOrDevice s) {
        return slice_dynamic(a, start_indices, std::move(axes), std::move(slice_size), s);
      },
      nb::arg(), "start_indices"_a, "axes"_a, "slice_size"_a, nb::kw_only(),
      "stream"_a = nb::none(),
      "A slice whose start is read from an array when evaluated.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    start_indices (array): Start of the slice along each of ``axes``.\n"
      "    axes (list(int)): The axes ``start_indices`` refers to.\n"
      "    slice_size (list(int)): The slice's shape.\n\n"
      "Returns:\n"
      "    array: The slice.\n");
  m.def(
      "slice_update",
      [](const array& a, const array& update, const array& start_indices, std::vector<int> axes,
         StreamOrDevice s) {
        return slice_update_dynamic(a, update, start_indices, std::move(axes), s);
      },
      nb::arg(), "update"_a, "start_indices"_a, "axes"_a, nb::kw_only(), "stream"_a = nb::none(),
      "A copy of ``a`` with a slice, whose start is read from an array when\n"
      "evaluated, replaced by ``update``.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    update (array): The new values of the slice.\n"
      "    start_indices (array): Start of the slice along each of ``axes``.\n"
      "    axes (list(int)): The axes ``start_indices`` refers to.\n\n"
      "Returns:\n"
      "    array: The updated array.\n");
  m.def(
      "diagonal",
      [](const array& a, int offset, int axis1, int axis2, StreamOrDevice s) {
        return diagonal(a, offset, axis1, axis2, s);
      },
      "a"_a, "offset"_a = 0, "axis1"_a = 0, "axis2"_a = 1, "stream"_a = nb::none(),
      "A diagonal of the planes spanned by two axes, as a new last axis.\n\n"
      "Args:\n"
      "    a (array): Input array (at least 2-D).\n"
      "    offset (int, optional): The diagonal (> 0: above the main one).\n"
      "      Default: ``0``.\n"
      "    axis1 (int, optional): First axis of the planes. Default: ``0``.\n"
      "    axis2 (int, optional): Second axis of the planes. Default: ``1``.\n\n"
      "Returns:\n"
      "    array: The diagonals.\n");
  m.def(
      "diag", [](const array& a, int k, StreamOrDevice s) { return diag(a, k, s); }, nb::arg(),
      "k"_a = 0, nb::kw_only(), "stream"_a = nb::none(),
      "Extract a diagonal of a 2-D array, or build a diagonal matrix from a 1-D one.\n\n"
      "Args:\n"
      "    a (array): A 1-D or 2-D array.\n"
      "    k (int, optional): The diagonal. Default: ``0``.\n\n"
      "Returns:\n"
      "    array: The diagonal, or the matrix.\n");
  m.def(
      "trace",
      [](const array& a, int offset, int axis1, int axis2, std::optional<Dtype> dtype,
         StreamOrDevice s) {
        return dtype ? trace(a, offset, axis1, axis2, *dtype, s)
                     : trace(a, offset, axis1, axis2, s);
      },
      nb::arg(), "offset"_a = 0, "axis1"_a = 0, "axis2"_a = 1, "dtype"_a = nb::none(),
      nb::kw_only(), "stream"_a = nb::none(),
      "Sum along a diagonal.\n\n"
      "Args:\n"
      "    a (array): Input array (at least 2-D).\n"
      "    offset (int, optional): The diagonal. Default: ``0``.\n"
      "    axis1 (int, optional): First axis of the planes. Default: ``0``.\n"
      "    axis2 (int, optional): Second axis of the planes. Default: ``1``.\n"
      "    dtype (Dtype, optional): Accumulation and result dtype.\n\n"
      "Returns:\n"
      "    array: The sums.\n");

  for (auto [name, fn, what] : std::initializer_list<std::tuple<const char*, array (*)(int, StreamOrDevice), const char*>>{
           {"hanning", &hanning, "The Hanning window of M points."},
           {"hamming", &hamming, "The Hamming window of M points."},
           {"bartlett", &bartlett, "The Bartlett (triangular) window of M points."},
           {"blackman", &blackman, "The Blackman window of M points."}}) {
    m.def(name, fn, "M"_a, nb::kw_only(), "stream"_a = nb::none(), what);
  }
}

}  // namespace tessera::python
