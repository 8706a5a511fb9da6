// CPU kernels of Reduce and ArgReduce. The input is viewed row-contiguous and its dims merged
// into runs of reduced / kept dims; the common layouts (everything, trailing dims, leading or
// middle dims) get flat, vectorisable loops; anything else is permuted (kept dims first) into a
// scratch buffer and reduced as rows.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

#include "backend/cpu/copy.h"
#include "backend/cpu/numeric.h"
#include "backend/cpu/simd.h"
#include "backend/cpu/elementwise.h"
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

// Output type of sum/prod for input T (MLX: small ints widen to 32 bits, bool sums to int32).
template <typename T>
using SumOutOf = std::conditional_t<
    std::is_same_v<T, bool>, int32_t,
    std::conditional_t<std::is_integral_v<T> && std::is_signed_v<T>,
                       std::conditional_t<(sizeof(T) <= 4), int32_t, int64_t>,
                       std::conditional_t<std::is_integral_v<T>,
                                          std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>,
                                          T>>>;


// Each op: its accumulator type A, identity, combine, and the conversion from an input value.
template <typename T>
struct SumOp {
  using Out = SumOutOf<T>;
  using A = AccOf<Out>;
  static A init() { return A(0); }
  static A load(const T& x) { return detail::cast_scalar<A, T>(x); }
  static A combine(A a, A b) { return wrap_add(a, b); }
};
template <typename T>
struct ProdOp {
  using Out = SumOutOf<T>;
  using A = AccOf<Out>;
  static A init() { return A(1); }
  static A load(const T& x) { return detail::cast_scalar<A, T>(x); }
  static A combine(A a, A b) { return wrap_mul(a, b); }
};
template <typename T>
struct AndOp {
  using Out = bool;
  using A = bool;
  static A init() { return true; }
  static A load(const T& x) { return x != T(0); }
  static A combine(A a, A b) { return a && b; }
};
template <typename T>
struct OrOp {
  using Out = bool;
  using A = bool;
  static A init() { return false; }
  static A load(const T& x) { return x != T(0); }
  static A combine(A a, A b) { return a || b; }
};
// max/min: NaN wins (checked on the final value as well, so lanes stay branch-free).
template <typename T>
struct MaxOp {
  using Out = T;
  using A = AccOf<T>;
  static A init() {
    if constexpr (is_complex_v<A>) {
      float inf = std::numeric_limits<float>::infinity();
      return A(-inf, -inf);
    } else if constexpr (std::is_floating_point_v<A>) {
      return -std::numeric_limits<A>::infinity();
    } else {
      return std::numeric_limits<A>::lowest();
    }
  }
  static A load(const T& x) { return static_cast<A>(x); }
  static A combine(A a, A b) {
    if constexpr (std::is_floating_point_v<A>) {
      return ((b > a) | (b != b)) ? b : a;
    } else {
      return less_than(a, b) || is_nan(b) ? b : a;
    }
  }
};
template <typename T>
struct MinOp {
  using Out = T;
  using A = AccOf<T>;
  static A init() {
    if constexpr (is_complex_v<A>) {
      float inf = std::numeric_limits<float>::infinity();
      return A(inf, inf);
    } else if constexpr (std::is_floating_point_v<A>) {
      return std::numeric_limits<A>::infinity();
    } else {
      return std::numeric_limits<A>::max();
    }
  }
  static A load(const T& x) { return static_cast<A>(x); }
  static A combine(A a, A b) {
    if constexpr (std::is_floating_point_v<A>) {
      return ((b < a) | (b != b)) ? b : a;
    } else {
      return less_than(b, a) || is_nan(b) ? b : a;
    }
  }
};

constexpr int kLanes = 16;
constexpr size_t kBlock = size_t{1} << 14;  // elements per partial result of a long reduction

// Reduce n contiguous values serially with kLanes independent accumulators (vectorisable and a
// little more accurate than one running sum).
template <typename Op, typename T>
typename Op::A reduce_run(const T* x, size_t n) {
  using A = typename Op::A;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (n >= cpu::kMinMaxVectorFrom) {
      if constexpr (std::is_same_v<Op, MaxOp<T>>) return cpu::minmax_run<true>(x, n);
      if constexpr (std::is_same_v<Op, MinOp<T>>) return cpu::minmax_run<false>(x, n);
    }
  }
  if (n < kLanes) {  // short rows: no full set of lanes
    A acc = Op::init();
    for (size_t i = 0; i < n; ++i) acc = Op::combine(acc, Op::load(x[i]));
    return acc;
  }
  A lanes[kLanes];
  for (auto& l : lanes) l = Op::init();
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] = Op::combine(lanes[l], Op::load(x[i + l]));
  }
  A acc = Op::init();
  for (; i < n; ++i) acc = Op::combine(acc, Op::load(x[i]));
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int l = 0; l < w; ++l) lanes[l] = Op::combine(lanes[l], lanes[l + w]);
  }
  return Op::combine(lanes[0], acc);
}

// Reduce n contiguous values, in parallel blocks when large (partials combined in order). How the
// values are blocked and combined depends on n alone, never on the pool's size, so ranks with
// different CPU counts compute the same bits. Called from inside a pool chunk, it runs serially.
template <typename Op, typename T>
typename Op::A reduce_contiguous(const T* x, size_t n) {
  using A = typename Op::A;
  if (n <= 2 * kBlock) return reduce_run<Op>(x, n);
  size_t nblocks = (n + kBlock - 1) / kBlock;
  // Not std::vector: for bool (all/any) that packs partials into shared words, and threads
  // writing neighbouring partials would race (array_equal/allclose then said false at random).
  auto partial = std::make_unique<A[]>(nblocks);
  // Blocks are taken from a shared counter (a late or slow thread does fewer); each partial
  // has its fixed slot, so the result does not depend on the timing.
  cpu::parallel_blocks(n, kBlock, [&](size_t lo, size_t hi) {
    partial[lo / kBlock] = reduce_run<Op>(x + lo, hi - lo);
  });
  // Pairwise combination of the partials.
  for (size_t w = 1; w < nblocks; w *= 2) {
    for (size_t k = 0; k + w < nblocks; k += 2 * w) partial[k] = Op::combine(partial[k], partial[k + w]);
  }
  return partial[0];
}

template <typename Op>
inline typename Op::Out store(typename Op::A a) {
  return static_cast<typename Op::Out>(a);
}

// out[o * I + j] = reduce over r of x[(o * R + r) * I + j], for I > 1.
template <typename Op, typename T>
void reduce_strided_rows(const T* x, typename Op::Out* out, size_t O, size_t R, size_t I) {
  using A = typename Op::A;
  size_t grain = std::max<size_t>(64, (size_t{1} << 15) / std::max<size_t>(R, 1));
  detail::parallel_for(O * I, grain, [&](size_t b, size_t e) {
    // (std::vector<bool> has no data(), hence a plain buffer.)
    auto acc = std::make_unique<A[]>(std::min(I, e - b));
    for (size_t p = b; p < e;) {
      size_t o = p / I, j0 = p % I;
      size_t j1 = std::min(I, j0 + (e - p));
      size_t len = j1 - j0;
      A* a = acc.get();
      for (size_t j = 0; j < len; ++j) a[j] = Op::init();
      const T* base = x + o * R * I + j0;
      for (size_t r = 0; r < R; ++r) {
        const T* row = base + r * I;
        for (size_t j = 0; j < len; ++j) a[j] = Op::combine(a[j], Op::load(row[j]));
      }
      for (size_t j = 0; j < len; ++j) out[o * I + j0 + j] = store<Op>(acc[j]);
      p += len;
    }
  });
}

// out[o] = reduce of the contiguous row x[o * R, (o + 1) * R). The pool's size only chooses
// whether threads share out rows or the blocks of each row; every row is reduced the same way.
template <typename Op, typename T>
void reduce_rows(const T* x, typename Op::Out* out, size_t O, size_t R) {
  if (O >= static_cast<size_t>(detail::num_threads()) || R < 4 * kBlock) {
    size_t grain = std::max<size_t>(1, (size_t{1} << 15) / std::max<size_t>(R, 1));
    detail::parallel_for(O, grain, [&](size_t b, size_t e) {
      for (size_t o = b; o < e; ++o) out[o] = store<Op>(reduce_contiguous<Op>(x + o * R, R));
    });
  } else {
    for (size_t o = 0; o < O; ++o) out[o] = store<Op>(reduce_contiguous<Op>(x + o * R, R));
  }
}

template <typename Op, typename T>
void reduce_typed(const array& in_any, array& out, const std::vector<int>& axes) {
  using Out = typename Op::Out;
  out.set_data(allocator::malloc(out.nbytes()));
  Out* o = out.data<Out>();
  if (out.size() == 0) return;
  if (in_any.size() == 0) {
    std::fill(o, o + out.size(), store<Op>(Op::init()));
    return;
  }
  array in = cpu::ensure_row_contiguous(in_any);
  const T* x = in.data<T>();
  // Merge dims into alternating runs (size, reduced?), dropping size-1 dims.
  std::vector<size_t> sizes;
  std::vector<bool> red;
  for (int d = 0; d < static_cast<int>(in.ndim()); ++d) {
    size_t n = static_cast<size_t>(in.shape(d));
    if (n == 1) continue;
    bool r = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!red.empty() && red.back() == r) {
      sizes.back() *= n;
    } else {
      sizes.push_back(n);
      red.push_back(r);
    }
  }
  const size_t total = in.size();
  if (sizes.empty() || (sizes.size() == 1 && red[0])) {  // everything (or a single element)
    o[0] = store<Op>(reduce_contiguous<Op>(x, total));
    return;
  }
  if (sizes.size() == 1) {  // nothing reduced (only size-1 axes)
    for (size_t i = 0; i < total; ++i) o[i] = store<Op>(Op::load(x[i]));
    return;
  }
  if (sizes.size() == 2 && !red[0]) {  // (kept, reduced): rows
    reduce_rows<Op>(x, o, sizes[0], sizes[1]);
    return;
  }
  if (sizes.size() == 2) {  // (reduced, kept)
    reduce_strided_rows<Op>(x, o, 1, sizes[0], sizes[1]);
    return;
  }
  if (sizes.size() == 3 && !red[0]) {  // (kept, reduced, kept)
    reduce_strided_rows<Op>(x, o, sizes[0], sizes[1], sizes[2]);
    return;
  }
  // General: permute kept dims first, reduced dims last, into scratch; then reduce rows.
  Shape pshape;
  Strides pstrides;
  auto st = in.strides();
  size_t kept = 1;
  for (int pass = 0; pass < 2; ++pass) {
    for (int d = 0; d < static_cast<int>(in.ndim()); ++d) {
      bool r = std::find(axes.begin(), axes.end(), d) != axes.end();
      if (r != (pass == 1)) continue;
      pshape.push_back(in.shape(d));
      pstrides.push_back(st[d]);
      if (!r) kept *= static_cast<size_t>(in.shape(d));
    }
  }
  auto scratch = std::make_unique<T[]>(total);
  auto v = cpu::collapse<2>(pshape, {pstrides, detail::row_strides(pshape)});
  detail::parallel_for(total, cpu::kElementwiseGrain, [&](size_t b, size_t e) {
    cpu::for_each_run<2>(v, b, e, [&](const std::array<int64_t, 2>& off, int64_t len,
                                      const std::array<int64_t, 2>& s) {
      for (int64_t i = 0; i < len; ++i) scratch[off[1] + i * s[1]] = x[off[0] + i * s[0]];
    });
  });
  reduce_rows<Op>(scratch.get(), o, kept, total / kept);
}

// ---- ArgReduce ----

template <bool IsMax, typename T>
inline bool better(const T& x, const T& best) {
  if constexpr (is_half_v<T>) {
    return IsMax ? static_cast<float>(x) > static_cast<float>(best)
                 : static_cast<float>(x) < static_cast<float>(best);
  } else {
    return IsMax ? less_than(best, x) : less_than(x, best);
  }
}

template <bool IsMax, typename T>
void arg_reduce_typed(const array& in_any, array& out, int axis) {
  out.set_data(allocator::malloc(out.nbytes()));
  uint32_t* o = out.data<uint32_t>();
  if (out.size() == 0) return;
  array in = cpu::ensure_row_contiguous(in_any);
  const T* x = in.data<T>();
  size_t O = 1, R = static_cast<size_t>(in.shape(axis)), I = 1;
  for (int d = 0; d < axis; ++d) O *= static_cast<size_t>(in.shape(d));
  for (int d = axis + 1; d < static_cast<int>(in.ndim()); ++d) I *= static_cast<size_t>(in.shape(d));
  if (I == 1) {  // contiguous rows
    size_t grain = std::max<size_t>(1, (size_t{1} << 15) / std::max<size_t>(R, 1));
    detail::parallel_for(O, grain, [&](size_t b, size_t e) {
      for (size_t oo = b; oo < e; ++oo) {
        const T* row = x + oo * R;
        T best = row[0];
        uint32_t bi = 0;
        size_t r = 1;
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          // Lane l tracks its own first best over r = 1 + l (mod W); lanes then merge by value,
          // ties to the smaller index, which equals the sequential first-index answer. Every
          // lane starts from row[0], so a NaN there wins (as sequentially) and later NaNs never do.
          using V = typename cpu::VecOf<T>::V;
          using IV = typename cpu::VecOf<T>::I;
          constexpr size_t W = cpu::kVecBytes / sizeof(T);
          V vb;
          IV vi, cur, step;
          for (size_t l = 0; l < W; ++l) {
            vb[l] = row[0];
            vi[l] = 0;
            cur[l] = 1 + l;
            step[l] = W;
          }
          for (; r + W <= R; r += W) {
            V v;
            std::memcpy(&v, row + r, sizeof(V));
            auto m = IsMax ? (v > vb) : (v < vb);
            vb = m ? v : vb;
            vi = m ? cur : vi;
            cur += step;
          }
          for (size_t l = 0; l < W; ++l) {
            uint32_t li = static_cast<uint32_t>(vi[l]);
            if (better<IsMax>(vb[l], best) || (vb[l] == best && li < bi)) {
              best = vb[l];
              bi = li;
            }
          }
        }
        for (; r < R; ++r) {
          if (better<IsMax>(row[r], best)) {
            best = row[r];
            bi = static_cast<uint32_t>(r);
          }
        }
        o[oo] = bi;
      }
    });
    return;
  }
  size_t grain = std::max<size_t>(16, (size_t{1} << 15) / std::max<size_t>(R, 1));
  detail::parallel_for(O * I, grain, [&](size_t b, size_t e) {
    auto best = std::make_unique<T[]>(std::min(I, e - b));
    for (size_t p = b; p < e;) {
      size_t oo = p / I, j0 = p % I;
      size_t len = std::min(I - j0, e - p);
      const T* base = x + oo * R * I + j0;
      uint32_t* idx = o + oo * I + j0;
      std::copy(base, base + len, best.get());
      std::fill(idx, idx + len, 0u);
      for (size_t r = 1; r < R; ++r) {
        const T* row = base + r * I;
        for (size_t j = 0; j < len; ++j) {
          if (better<IsMax>(row[j], best[j])) {
            best[j] = row[j];
            idx[j] = static_cast<uint32_t>(r);
          }
        }
      }
      p += len;
    }
  });
}

}  // namespace

void NumberOfElements::eval_cpu(const std::vector<array>& inputs, array& out) {
  const double v = inputs.empty() ? bound_ : value(inputs[0].shape());
  out.set_data(allocator::malloc(out.nbytes()));
  detail::dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    *out.data<T>() = detail::cast_scalar<T, double>(v);
  });
}

void Reduce::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  detail::dispatch_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    switch (type_) {
      case And: reduce_typed<AndOp<T>, T>(in, out, axes_); break;
      case Or: reduce_typed<OrOp<T>, T>(in, out, axes_); break;
      case Sum: reduce_typed<SumOp<T>, T>(in, out, axes_); break;
      case Prod: reduce_typed<ProdOp<T>, T>(in, out, axes_); break;
      case Max: reduce_typed<MaxOp<T>, T>(in, out, axes_); break;
      case Min: reduce_typed<MinOp<T>, T>(in, out, axes_); break;
    }
  });
}

void ArgReduce::eval_cpu(const std::vector<array>& inputs, array& out) {
  detail::dispatch_dtype(inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (type_ == ArgMax) {
      arg_reduce_typed<true, T>(inputs[0], out, axis_);
    } else {
      arg_reduce_typed<false, T>(inputs[0], out, axis_);
    }
  });
}

}  // namespace tessera
