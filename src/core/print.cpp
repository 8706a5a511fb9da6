// Printing arrays and shapes as MLX does (tessera/utils.h): `array([1, 2, 3], dtype=int32)`,
// rows on their own lines indented to the bracket depth, and any dimension longer than 6 shown
// as its first 3 and last 3 entries around `...`.
#include <atomic>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tessera/utils.h"

namespace tessera {

namespace {

constexpr int kEdgeItems = 3;

std::atomic<int> g_precision{-1};  // PrintOptions::precision

template <typename T>
void print_value(std::ostream& os, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    os << (v ? "True" : "False");
  } else if constexpr (std::is_same_v<T, int8_t>) {
    os << static_cast<int>(v);
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    os << static_cast<unsigned>(v);
  } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
    os << static_cast<float>(v);
  } else if constexpr (std::is_same_v<T, complex64_t>) {
    os << v.real();
    if (v.imag() >= 0 || std::isnan(v.imag())) {
      os << "+" << v.imag() << "j";
    } else {
      os << "-" << -v.imag() << "j";
    }
  } else {
    os << v;
  }
}

template <typename T>
void print_dim(std::ostream& os, const array& a, int64_t index, int dim) {
  const int n = a.shape(dim);
  const int64_t stride = a.strides()[dim];
  const bool last = dim == static_cast<int>(a.ndim()) - 1;
  const std::string indent = last ? "" : std::string(7 + dim, ' ');
  const char* sep = last ? ", " : ",\n";
  os << "[";
  for (int i = 0; i < n; ++i) {
    if (i > 0) os << indent;
    if (i == kEdgeItems && n > 2 * kEdgeItems) {
      os << "...";
      // Jump to the last kEdgeItems entries.
      index += stride * (n - 2 * kEdgeItems - 1);
      i = n - kEdgeItems - 1;
    } else if (last) {
      print_value(os, a.data<T>()[index]);
    } else {
      print_dim<T>(os, a, index, dim + 1);
    }
    if (i != n - 1) os << sep;
    index += stride;
  }
  os << "]";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, array a) {
  a.eval();
  // Format into a private stream so the caller's flags (precision, boolalpha) play no part.
  std::ostringstream out;
  if (const int p = g_precision.load(std::memory_order_relaxed); p >= 0) {
    out << std::fixed << std::setprecision(p);  // floats only: integers ignore both
  }
  out << "array(";
  detail::dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (a.ndim() == 0) {
      print_value(out, a.data<T>()[0]);
    } else {
      print_dim<T>(out, a, 0, 0);
    }
  });
  out << ", dtype=" << dtype_name(a.dtype()) << ")";
  return os << out.str();
}

void set_printoptions(PrintOptions options) {
  if (options.precision < -1) {
    throw std::invalid_argument("[set_printoptions] precision must be -1 (the default format) or "
                                "a number of digits >= 0, got " +
                                std::to_string(options.precision));
  }
  g_precision.store(options.precision, std::memory_order_relaxed);
}

PrintOptions get_printoptions() { return {g_precision.load(std::memory_order_relaxed)}; }

std::ostream& operator<<(std::ostream& os, const Shape& s) {
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  return os << ")";
}

}  // namespace tessera
