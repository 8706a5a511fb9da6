// Printing arrays as MLX does (`array([4, 4, 4], dtype=float32)`, summarised when large), and
// MLX's small utilities (mlx/utils.h): broadcast_shapes, result_type, finfo / iinfo,
// normalize_axis_index, StreamContext.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {

// Evaluates the array if needed.
std::ostream& operator<<(std::ostream& os, array a);

// How arrays print, as MLX's: floating and complex values with `precision` digits after the
// point (fixed notation); -1, the default, prints them as an ostream does by default (six
// significant digits). Process-wide; set_printoptions throws std::invalid_argument below -1.
struct PrintOptions {
  int precision = -1;
};
void set_printoptions(PrintOptions options);
PrintOptions get_printoptions();
std::ostream& operator<<(std::ostream& os, const Shape& s);

// NumPy broadcasting of two shapes; throws std::invalid_argument naming both.
Shape broadcast_shapes(const Shape& s1, const Shape& s2);

// The dtype the arrays promote to (bool_ for none), as binary ops compute it.
Dtype result_type(const std::vector<array>& arrays);
inline Dtype result_type(const array& a, const array& b) { return result_type({a, b}); }
inline Dtype result_type(const array& a, const array& b, const array& c) {
  return result_type({a, b, c});
}

// `axis` made non-negative for an `ndim`-dim array; throws std::invalid_argument (prefixed with
// msg_prefix) when it is outside [-ndim, ndim).
int normalize_axis_index(int axis, int ndim, const std::string& msg_prefix = "");

// Limits of a floating dtype (complex64 reports its float32 parts); throws std::invalid_argument
// for other dtypes.
struct finfo {
  explicit finfo(Dtype dtype);
  Dtype dtype;
  int bits;
  double min;
  double max;
  double eps;
  double smallest_normal;
};

// Limits of an integer dtype (not bool); throws std::invalid_argument for other dtypes.
struct iinfo {
  explicit iinfo(Dtype dtype);
  Dtype dtype;
  int64_t min;
  uint64_t max;
};

// Makes `s` (a stream, or a device's default stream) the default for the scope, restoring the
// previous default device and stream on destruction. Throws std::runtime_error for an empty s.
struct StreamContext {
 public:
  StreamContext(StreamOrDevice s);
  ~StreamContext();
  StreamContext(const StreamContext&) = delete;
  StreamContext& operator=(const StreamContext&) = delete;

 private:
  Stream saved_;
};

}  // namespace tessera
