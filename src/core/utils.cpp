// MLX's small utilities (tessera/utils.h): broadcast_shapes, result_type, finfo / iinfo,
// normalize_axis_index and StreamContext, over the engine's own dtype and stream machinery.
#include "tessera/utils.h"

#include <limits>
#include <stdexcept>
#include <variant>

#include "core/shape_checks.h"
#include "tessera/device.h"

namespace tessera {

Shape broadcast_shapes(const Shape& s1, const Shape& s2) {
  return detail::broadcast_shapes("broadcast_shapes", s1, s2);
}

Dtype result_type(const std::vector<array>& arrays) {
  Dtype t = bool_;
  for (const auto& a : arrays) t = promote_types(t, a.dtype());
  return t;
}

int normalize_axis_index(int axis, int ndim, const std::string& msg_prefix) {
  if (axis < -ndim || axis >= ndim) {
    throw std::invalid_argument(msg_prefix + "axis " + std::to_string(axis) +
                                " is out of bounds for an array with " + std::to_string(ndim) +
                                " dimensions (valid: " + std::to_string(-ndim) + ".." +
                                std::to_string(ndim - 1) + ")");
  }
  return axis < 0 ? axis + ndim : axis;
}

namespace {

template <typename T>
void fill_finfo(finfo& f) {
  f.bits = static_cast<int>(8 * sizeof(T));
  f.min = static_cast<double>(std::numeric_limits<T>::lowest());
  f.max = static_cast<double>(std::numeric_limits<T>::max());
  f.eps = static_cast<double>(std::numeric_limits<T>::epsilon());
  f.smallest_normal = static_cast<double>(std::numeric_limits<T>::min());
}

template <typename T>
void fill_iinfo(iinfo& i) {
  i.min = static_cast<int64_t>(std::numeric_limits<T>::min());
  i.max = static_cast<uint64_t>(std::numeric_limits<T>::max());
}

}  // namespace

finfo::finfo(Dtype t) : dtype(t == complex64 ? float32 : t) {
  switch (dtype.val()) {
    case Dtype::Val::float16:
      bits = 16, min = -65504.0, max = 65504.0, eps = 0.0009765625, smallest_normal = 6.103515625e-05;
      return;
    case Dtype::Val::bfloat16:  // 8 exponent bits, 7 mantissa bits
      bits = 16, min = -3.3895313892515355e38, max = 3.3895313892515355e38, eps = 0.0078125,
      smallest_normal = 1.1754943508222875e-38;
      return;
    case Dtype::Val::float32: fill_finfo<float>(*this); return;
    case Dtype::Val::float64: fill_finfo<double>(*this); return;
    default:
      throw std::invalid_argument("[finfo] dtype " + dtype_name(t) +
                                  " is not inexact; use iinfo for integer dtypes");
  }
}

iinfo::iinfo(Dtype t) : dtype(t) {
  switch (t.val()) {
    case Dtype::Val::uint8: fill_iinfo<uint8_t>(*this); return;
    case Dtype::Val::uint16: fill_iinfo<uint16_t>(*this); return;
    case Dtype::Val::uint32: fill_iinfo<uint32_t>(*this); return;
    case Dtype::Val::uint64: fill_iinfo<uint64_t>(*this); return;
    case Dtype::Val::int8: fill_iinfo<int8_t>(*this); return;
    case Dtype::Val::int16: fill_iinfo<int16_t>(*this); return;
    case Dtype::Val::int32: fill_iinfo<int32_t>(*this); return;
    case Dtype::Val::int64: fill_iinfo<int64_t>(*this); return;
    default:
      throw std::invalid_argument("[iinfo] only integer dtypes have integer limits, got " +
                                  dtype_name(t) + (t == bool_ ? "" : "; use finfo"));
  }
}

StreamContext::StreamContext(StreamOrDevice s) : saved_(default_stream(default_device())) {
  if (std::holds_alternative<std::monostate>(s)) {
    throw std::runtime_error("[StreamContext] give it a stream or a device");
  }
  Stream st = to_stream(s);
  set_default_device(st.device);
  set_default_stream(st);
}

StreamContext::~StreamContext() {
  set_default_device(saved_.device);
  set_default_stream(saved_);
}

}  // namespace tessera
