// CPU kernel of Scan (cumsum, cumprod, cummax, cummin, logcumsumexp). The input is viewed
// row-contiguous as (outer, n, inner): inner == 1 scans each contiguous row; otherwise whole
// inner rows are combined at once (contiguous, vectorisable).
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>

#include "backend/cpu/copy.h"
#include "backend/cpu/numeric.h"
#include "backend/cpu/strided.h"
#include "core/thread_pool.h"
#include "tessera/primitives/reduce.h"

namespace tessera {

namespace {

using cpu::AccOf;
using cpu::is_complex_v;
using cpu::is_half_v;
using cpu::is_nan;
using cpu::less_than;
using cpu::wrap_add;
using cpu::wrap_mul;

template <typename A>
A nan_value() {
  if constexpr (is_complex_v<A>) {
    float n = std::numeric_limits<float>::quiet_NaN();
    return A(n, n);
  } else {
    return std::numeric_limits<A>::quiet_NaN();
  }
}

template <typename A>
A lowest() {
  if constexpr (is_complex_v<A>) {
    float inf = std::numeric_limits<float>::infinity();
    return A(-inf, -inf);
  } else if constexpr (std::is_floating_point_v<A>) {
    return -std::numeric_limits<A>::infinity();
  } else {
    return std::numeric_limits<A>::lowest();
  }
}
template <typename A>
A highest() {
  if constexpr (is_complex_v<A>) {
    float inf = std::numeric_limits<float>::infinity();
    return A(inf, inf);
  } else if constexpr (std::is_floating_point_v<A>) {
    return std::numeric_limits<A>::infinity();
  } else {
    return std::numeric_limits<A>::max();
  }
}

template <typename A>
struct SumScan {
  static A init() { return A(0); }
  static A combine(A acc, A x) {
    if constexpr (std::is_same_v<A, bool>) {
      return acc || x;
    } else {
      return wrap_add(acc, x);
    }
  }
};
template <typename A>
struct ProdScan {
  static A init() { return A(1); }
  static A combine(A acc, A x) {
    if constexpr (std::is_same_v<A, bool>) {
      return acc && x;
    } else {
      return wrap_mul(acc, x);
    }
  }
};
template <typename A>
struct MaxScan {
  static A init() { return lowest<A>(); }
  static A combine(A acc, A x) {
    if constexpr (std::is_floating_point_v<A> || is_complex_v<A>) {
      if (is_nan(acc) || is_nan(x)) return nan_value<A>();
    }
    return less_than(acc, x) ? x : acc;
  }
};
template <typename A>
struct MinScan {
  static A init() { return highest<A>(); }
  static A combine(A acc, A x) {
    if constexpr (std::is_floating_point_v<A> || is_complex_v<A>) {
      if (is_nan(acc) || is_nan(x)) return nan_value<A>();
    }
    return less_than(x, acc) ? x : acc;
  }
};
template <typename A>
struct LogAddExpScan {
  static A init() { return lowest<A>(); }
  static A combine(A a, A b) {
    if constexpr (std::is_floating_point_v<A>) {
      if (a != a || b != b) return nan_value<A>();
      A m = std::max(a, b);
      if (m == -std::numeric_limits<A>::infinity()) return m;
      if (m == std::numeric_limits<A>::infinity()) return m;
      return m + std::log1p(std::exp(std::min(a, b) - m));
    } else {
      double da = static_cast<double>(a), db = static_cast<double>(b);
      double m = std::max(da, db);
      return static_cast<A>(m + std::log1p(std::exp(std::min(da, db) - m)));
    }
  }
};

template <template <typename> class Op, typename T, typename Out>
void scan_typed(const array& in_any, array& out, int axis, bool reverse, bool inclusive) {
  using A = AccOf<Out>;
  using O = Op<A>;
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  array in = cpu::ensure_row_contiguous(in_any);
  const T* x = in.data<T>();
  Out* y = out.data<Out>();
  size_t outer = 1, n = static_cast<size_t>(in.shape(axis)), inner = 1;
  for (int d = 0; d < axis; ++d) outer *= static_cast<size_t>(in.shape(d));
  for (int d = axis + 1; d < static_cast<int>(in.ndim()); ++d) inner *= static_cast<size_t>(in.shape(d));
  auto load = [](const T& v) { return detail::cast_scalar<A, T>(v); };
  if (inner == 1) {
    size_t grain = std::max<size_t>(1, (size_t{1} << 15) / n);
    detail::parallel_for(outer, grain, [&](size_t b, size_t e) {
      for (size_t o = b; o < e; ++o) {
        const T* xr = x + o * n;
        Out* yr = y + o * n;
        A acc = O::init();
        for (size_t k = 0; k < n; ++k) {
          size_t i = reverse ? n - 1 - k : k;
          if (inclusive) {
            acc = O::combine(acc, load(xr[i]));
            yr[i] = static_cast<Out>(acc);
          } else {
            yr[i] = static_cast<Out>(acc);
            acc = O::combine(acc, load(xr[i]));
          }
        }
      }
    });
    return;
  }
  size_t grain = std::max<size_t>(64, (size_t{1} << 15) / n);
  detail::parallel_for(outer * inner, grain, [&](size_t b, size_t e) {
    auto acc = std::make_unique<A[]>(std::min(inner, e - b));
    for (size_t p = b; p < e;) {
      size_t o = p / inner, j0 = p % inner;
      size_t len = std::min(inner - j0, e - p);
      A* a = acc.get();
      for (size_t j = 0; j < len; ++j) a[j] = O::init();
      for (size_t k = 0; k < n; ++k) {
        size_t i = reverse ? n - 1 - k : k;
        const T* xr = x + (o * n + i) * inner + j0;
        Out* yr = y + (o * n + i) * inner + j0;
        if (inclusive) {
          for (size_t j = 0; j < len; ++j) {
            a[j] = O::combine(a[j], load(xr[j]));
            yr[j] = static_cast<Out>(a[j]);
          }
        } else {
          for (size_t j = 0; j < len; ++j) {
            yr[j] = static_cast<Out>(a[j]);
            a[j] = O::combine(a[j], load(xr[j]));
          }
        }
      }
      p += len;
    }
  });
}

}  // namespace

void Scan::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  detail::dispatch_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      if (out.dtype() == int32) {
        scan_typed<SumScan, bool, int32_t>(in, out, axis_, reverse_, inclusive_);
        return;
      }
    }
    switch (type_) {
      case Sum: scan_typed<SumScan, T, T>(in, out, axis_, reverse_, inclusive_); break;
      case Prod: scan_typed<ProdScan, T, T>(in, out, axis_, reverse_, inclusive_); break;
      case Max: scan_typed<MaxScan, T, T>(in, out, axis_, reverse_, inclusive_); break;
      case Min: scan_typed<MinScan, T, T>(in, out, axis_, reverse_, inclusive_); break;
      case LogAddExp:
        if constexpr (is_complex_v<T>) {
          throw std::invalid_argument("[logcumsumexp] complex inputs are not supported");
        } else {
          scan_typed<LogAddExpScan, T, T>(in, out, axis_, reverse_, inclusive_);
        }
        break;
    }
  });
}

}  // namespace tessera
