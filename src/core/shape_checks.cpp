// Shape and axis checks shared by the core and the op front ends (see shape_checks.h).
#include "core/shape_checks.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <stdexcept>

#include "tessera/utils.h"

namespace tessera::detail {

int32_t checked_dim(const char* op, int64_t n, const std::string& what) {
  if (n > INT32_MAX || n < INT32_MIN) {
    throw std::overflow_error(std::string("[") + op + "] " + what + " would have " +
                              std::to_string(n) + " elements, more than a dimension holds (" +
                              std::to_string(INT32_MAX) + ")");
  }
  return static_cast<int32_t>(n);
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << s;  // tessera/utils.h: "(2,3)"
  return os.str();
}

int normalize_axis(const char* op, int axis, int ndim) {
  int a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a >= ndim) {
    throw std::invalid_argument(std::string("[") + op + "] axis " + std::to_string(axis) +
                                " is out of bounds for an array with " + std::to_string(ndim) +
                                " dimensions");
  }
  return a;
}

int normalize_axis_in_range(const char* op, int axis, int ndim) {
  if (axis < -ndim || axis >= ndim) {
    throw std::out_of_range(std::string("[") + op + "] axis " + std::to_string(axis) +
                            " is out of bounds for an array with " + std::to_string(ndim) +
                            " dimensions");
  }
  return axis < 0 ? axis + ndim : axis;
}

std::vector<int> normalize_axes(const char* op, const std::vector<int>& axes, int ndim) {
  std::vector<int> out;
  for (int a : axes) out.push_back(normalize_axis(op, a, ndim));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    throw std::invalid_argument(std::string("[") + op + "] repeated axis in the axes argument");
  }
  return out;
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      throw std::invalid_argument(std::string("[") + op + "] shapes " + shape_str(a) + " and " +
                                  shape_str(b) + " cannot be broadcast");
    }
  }
  return out;
}

Shape broadcast_shapes(const char* op, const std::vector<array>& arrays) {
  if (arrays.empty()) return {};
  Shape s = arrays[0].shape();
  for (size_t i = 1; i < arrays.size(); ++i) s = broadcast_shapes(op, s, arrays[i].shape());
  return s;
}

void check_same_shape(const char* op, const array& a, const array& b) {
  if (a.shape() != b.shape()) {
    throw std::invalid_argument(std::string("[") + op + "] shapes " + shape_str(a.shape()) +
                                " and " + shape_str(b.shape()) + " must be equal");
  }
}

}  // namespace tessera::detail
