// Reductions (sum, prod, max, min, all, any, argmax/argmin, mean, var, std, logsumexp, softmax,
// count_nonzero) against naive double-precision loops written here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

// Elements of `a` (any layout) as doubles, in row-major order.
std::vector<double> values(array a) {
  a.eval();
  std::vector<double> out;
  out.reserve(a.size());
  detail::dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = a.data<T>();
    std::vector<int> idx(a.ndim(), 0);
    for (size_t k = 0; k < a.size(); ++k) {
      int64_t off = 0;
      for (size_t d = 0; d < a.ndim(); ++d) off += idx[d] * a.strides()[d];
      if constexpr (std::is_same_v<T, complex64_t>) {
        out.push_back(p[off].real());
      } else {
        out.push_back(static_cast<double>(p[off]));
      }
      for (int d = static_cast<int>(a.ndim()) - 1; d >= 0; --d) {
        if (++idx[d] < a.shape(d)) break;
        idx[d] = 0;
      }
    }
  });
  return out;
}

enum class Op { Sum, Prod, Max, Min };

// Naive reduction over `axes` of row-major `x` of `shape`; returns the keepdims-shaped result.
std::vector<double> naive_reduce(const std::vector<double>& x, const Shape& shape,
                                 std::vector<int> axes, Op op) {
  int nd = static_cast<int>(shape.size());
  for (auto& a : axes) a = a < 0 ? a + nd : a;
  Shape oshape = shape;
  for (int a : axes) oshape[a] = 1;
  size_t osize = 1;
  for (int d : oshape) osize *= d;
  double init = op == Op::Sum ? 0 : op == Op::Prod ? 1
              : op == Op::Max ? -INFINITY : INFINITY;
  std::vector<double> out(osize, init);
  std::vector<int> idx(nd, 0);
  for (size_t k = 0; k < x.size(); ++k) {
    size_t o = 0;
    for (int d = 0; d < nd; ++d) o = o * oshape[d] + (oshape[d] == 1 ? 0 : idx[d]);
    double v = x[k];
    double& r = out[o];
    switch (op) {
      case Op::Sum: r += v; break;
      case Op::Prod: r *= v; break;
      case Op::Max: r = (std::isnan(v) || std::isnan(r)) ? NAN : std::max(r, v); break;
      case Op::Min: r = (std::isnan(v) || std::isnan(r)) ? NAN : std::min(r, v); break;
    }
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

array from_doubles(const std::vector<double>& v, const Shape& shape, Dtype dt) {
  return array(v.begin(), shape, dt);
}

void expect_near_vec(const std::vector<double>& got, const std::vector<double>& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i;
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " at " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << what << " at " << i;
    }
  }
}

const std::vector<std::vector<int>> kAxesLists = {{0},    {1},    {2},       {-1},   {0, 1},
                                                  {0, 2}, {1, 2}, {0, 1, 2}, {-3, -1}};

}  // namespace

TEST(Reduce, EveryDtypeEveryAxesListMatchesNaiveLoop) {
  const Shape shape{3, 4, 5};
  std::vector<double> x(60);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>((i * 7) % 5);  // 0..4
  std::vector<double> small(60);  // 1..2 keeps products of 60 elements representable
  for (size_t i = 0; i < small.size(); ++i) small[i] = (i % 7 == 0) ? 2.0 : 1.0;
  for (Dtype dt : kAllDtypes) {
    if (dt == bool_) continue;
    auto a = from_doubles(x, shape, dt);
    auto b = from_doubles(small, shape, dt);
    for (const auto& axes : kAxesLists) {
      for (bool keep : {false, true}) {
        std::string what = dtype_name(dt) + " axes " + std::to_string(axes[0]) + "/" +
                           std::to_string(axes.size()) + (keep ? " keepdims" : "");
        auto s = sum(a, axes, keep);
        auto mx = max(a, axes, keep);
        auto mn = min(a, axes, keep);
        auto p = prod(b, axes, keep);
        Shape want_shape;
        Shape keep_shape = shape;
        for (int ax : axes) keep_shape[ax < 0 ? ax + 3 : ax] = 1;
        for (int d = 0; d < 3; ++d) {
          bool red = false;
          for (int ax : axes) red |= (ax < 0 ? ax + 3 : ax) == d;
          if (!red || keep) want_shape.push_back(keep_shape[d]);
        }
        EXPECT_EQ(s.shape(), want_shape) << what;
        double tol = (dt == float16 || dt == bfloat16) ? 1e-2 : 1e-6;
        expect_near_vec(values(s), naive_reduce(x, shape, axes, Op::Sum), tol, "sum " + what);
        expect_near_vec(values(mx), naive_reduce(x, shape, axes, Op::Max), tol, "max " + what);
        expect_near_vec(values(mn), naive_reduce(x, shape, axes, Op::Min), tol, "min " + what);
        expect_near_vec(values(p), naive_reduce(small, shape, axes, Op::Prod), tol,
                        "prod " + what);
      }
    }
  }
}

TEST(Reduce, OutputDtypesFollowMlx) {
  auto z = [](Dtype t) { return zeros({2, 3}, t); };
  EXPECT_EQ(sum(z(bool_)).dtype(), int32);
  EXPECT_EQ(sum(z(int8)).dtype(), int32);
  EXPECT_EQ(sum(z(int16)).dtype(), int32);
  EXPECT_EQ(sum(z(int32)).dtype(), int32);
  EXPECT_EQ(sum(z(int64)).dtype(), int64);
  EXPECT_EQ(sum(z(uint8)).dtype(), uint32);
  EXPECT_EQ(sum(z(uint16)).dtype(), uint32);
  EXPECT_EQ(sum(z(uint64)).dtype(), uint64);
  EXPECT_EQ(sum(z(float16)).dtype(), float16);
  EXPECT_EQ(sum(z(bfloat16)).dtype(), bfloat16);
  EXPECT_EQ(prod(z(int8)).dtype(), int32);
  EXPECT_EQ(prod(z(bool_)).dtype(), int32);
  EXPECT_EQ(max(z(int8)).dtype(), int8);
  EXPECT_EQ(min(z(uint16)).dtype(), uint16);
  EXPECT_EQ(all(z(float32)).dtype(), bool_);
  EXPECT_EQ(any(z(int32)).dtype(), bool_);
  EXPECT_EQ(argmax(z(float16)).dtype(), uint32);
  EXPECT_EQ(argmin(z(int8), 1).dtype(), uint32);
  EXPECT_EQ(mean(z(int32)).dtype(), float32);
  EXPECT_EQ(mean(z(float16)).dtype(), float16);
  EXPECT_EQ(var(z(uint8)).dtype(), float32);
}

TEST(Reduce, BoolSumCountsTrueAndSmallIntsDoNotOverflow) {
  auto b = array({true, false, true, true});
  EXPECT_EQ(sum(b).item<int32_t>(), 3);
  std::vector<int8_t> v(1000, 100);
  auto a = array(v.begin(), Shape{1000}, int8);
  EXPECT_EQ(sum(a).item<int32_t>(), 100000);
  std::vector<uint8_t> u(300, 255);
  EXPECT_EQ(sum(array(u.begin(), Shape{300}, uint8)).item<uint32_t>(), 76500u);
}

TEST(Reduce, ComplexSumProdMaxMin) {
  std::vector<complex64_t> v{{1, 2}, {3, -1}, {1, 5}};
  auto a = array(v.begin(), Shape{3});
  auto s = sum(a).item<complex64_t>();
  EXPECT_EQ(s, complex64_t(5, 6));
  auto p = prod(a).item<complex64_t>();
  auto want = v[0] * v[1] * v[2];
  EXPECT_NEAR(p.real(), want.real(), 1e-5);
  EXPECT_NEAR(p.imag(), want.imag(), 1e-5);
  EXPECT_EQ(max(a).item<complex64_t>(), complex64_t(3, -1));
  EXPECT_EQ(min(a).item<complex64_t>(), complex64_t(1, 2));  // lexicographic
}

TEST(Reduce, LargeFloat32SumIsAccurateAllAndAlongEachAxis) {
  const int rows = 1000, cols = 3001;
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> dist(-1.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(rows) * cols);
  for (auto& f : v) f = dist(gen);
  auto a = array(v.begin(), Shape{rows, cols});
  double total = 0;
  std::vector<double> r0(cols, 0), r1(rows, 0);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      double x = v[static_cast<size_t>(i) * cols + j];
      total += x;
      r0[j] += x;
      r1[i] += x;
    }
  EXPECT_NEAR(sum(a).item<float>(), total, 1e-5 * std::abs(total) + 1e-2);
  expect_near_vec(values(sum(a, 0)), r0, 1e-5, "axis 0");
  expect_near_vec(values(sum(a, 1)), r1, 1e-5, "axis 1");
  // 3 Mi ones: a single running float32 sum would stall at 2^24; blocks keep it exact.
  auto ones3 = ones({3 << 20}, float32);
  EXPECT_EQ(sum(ones3).item<float>(), static_cast<float>(3 << 20));
  std::vector<float> big(20 << 20, 1.0f);
  big[12345677] = 7.5f;
  auto b = array(big.begin(), Shape{static_cast<int>(big.size())});
  EXPECT_EQ(max(b).item<float>(), 7.5f);
  EXPECT_EQ(argmax(b).item<uint32_t>(), 12345677u);
}

TEST(Reduce, MaxMinPropagateNan) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  auto a = array({1.0f, nan, 3.0f, 2.0f, 5.0f, 0.0f}, Shape{2, 3});
  EXPECT_TRUE(std::isnan(max(a).item<float>()));
  EXPECT_TRUE(std::isnan(min(a).item<float>()));
  auto m0 = values(max(a, 0));
  EXPECT_EQ(m0[0], 2.0);
  EXPECT_TRUE(std::isnan(m0[1]));
  EXPECT_EQ(m0[2], 3.0);
  auto m1 = values(min(a, 1));
  EXPECT_TRUE(std::isnan(m1[0]));
  EXPECT_EQ(m1[1], 0.0);
  // NaN in the middle of a long contiguous run.
  std::vector<double> v(100000, 1.0);
  v[77777] = NAN;
  EXPECT_TRUE(std::isnan(max(array(v.begin(), Shape{100000})).item<double>()));
}

// The vectorised max/min (lanes of 16, 32 or 64 bytes by build, four accumulators, a tail, then
// parallel blocks claimed several at a time): every length up to past four 64-byte vectors, and
// lengths over many blocks, each with the extreme, a NaN or an infinity placed at the start, in
// the middle, in the tail and at the end, against std::max/std::min over the values.
template <typename T>
void check_minmax_lengths() {
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  std::vector<size_t> lengths;
  for (size_t n = 1; n <= 140; ++n) lengths.push_back(n);
  for (size_t n : {size_t{32768}, size_t{32769}, size_t{16384} * 41 + 7}) lengths.push_back(n);
  for (size_t n : lengths) {
    for (size_t where : {size_t{0}, n / 2, n - 1 - (n > 3 ? n % 3 : 0), n - 1}) {
      for (int special = 0; special < 4; ++special) {  // big, NaN, +inf, -inf
        std::vector<T> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>((i * 7919) % 1000) - T(500);
        v[where] = special == 0 ? T(1e6) : special == 1 ? nan : special == 2 ? inf : -inf;
        T want_max = v[0], want_min = v[0];
        bool has_nan = false;
        for (T x : v) {
          has_nan |= std::isnan(x);
          want_max = std::max(want_max, x);
          want_min = std::min(want_min, x);
        }
        auto a = array(v.begin(), Shape{static_cast<int>(n)});
        T got_max = max(a).item<T>(), got_min = min(a).item<T>();
        std::string what = "n=" + std::to_string(n) + " at " + std::to_string(where) +
                           " special " + std::to_string(special);
        if (has_nan) {
          EXPECT_TRUE(std::isnan(got_max)) << what;
          EXPECT_TRUE(std::isnan(got_min)) << what;
        } else {
          EXPECT_EQ(got_max, want_max) << what;
          EXPECT_EQ(got_min, want_min) << what;
        }
      }
    }
  }
}

TEST(Reduce, MaxMinEveryLengthWithNanAndInfinities) {
  check_minmax_lengths<float>();
  check_minmax_lengths<double>();
}

TEST(Reduce, ZeroDimAndSizeOneAxes) {
  auto s = array(2.5f);
  EXPECT_EQ(sum(s).item<float>(), 2.5f);
  EXPECT_EQ(sum(s).ndim(), 0u);
  EXPECT_EQ(max(s).item<float>(), 2.5f);
  EXPECT_EQ(prod(array(3, int8)).dtype(), int8);  // no axes to reduce: the input, as MLX
  EXPECT_EQ(argmax(s).item<uint32_t>(), 0u);
  EXPECT_EQ(argmax(s, true).ndim(), 0u);
  auto a = array({1.0f, 2.0f, 3.0f}, Shape{1, 3});
  EXPECT_EQ(sum(a, 0).shape(), Shape{3});
  EXPECT_EQ(values(sum(a, 0)), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(sum(a, 0, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(values(argmax(a, 0)), (std::vector<double>{0, 0, 0}));
  // Empty axes list: the input itself.
  EXPECT_EQ(sum(a, std::vector<int>{}).shape(), (Shape{1, 3}));
}

TEST(Reduce, EmptyArraysUseIdentityOrThrow) {
  auto e = zeros({0, 3}, float32);
  EXPECT_EQ(values(sum(e, 0)), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(values(prod(e, 0)), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(values(all(e, 0)), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(values(any(e, 0)), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(sum(e, 1).shape(), Shape{0});
  EXPECT_EQ(max(e, 1).shape(), Shape{0});
  EXPECT_EQ(sum(e).item<float>(), 0.0f);
  EXPECT_TRUE(std::isnan(mean(e).item<float>()));
  try {
    max(e, 0);
    FAIL() << "max over an empty axis must throw";
  } catch (const std::invalid_argument& err) {
    EXPECT_NE(std::string(err.what()).find("axis 0"), std::string::npos) << err.what();
  }
  EXPECT_THROW(min(e), std::invalid_argument);
  EXPECT_THROW(argmax(e), std::invalid_argument);
  EXPECT_THROW(argmin(e, 1), std::invalid_argument);
  EXPECT_THROW(logsumexp(e), std::invalid_argument);
}

// As MLX: an axis outside the array is std::out_of_range, a repeated axis std::invalid_argument.
TEST(Reduce, BadAxesThrowNamingTheAxis) {
  auto a = zeros({2, 3});
  try {
    sum(a, 2);
    FAIL();
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("axis 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[sum]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(max(a, -3), std::out_of_range);
  EXPECT_THROW(sum(a, {0, 0}), std::invalid_argument);
  EXPECT_THROW(sum(a, {0, -2}), std::invalid_argument);
  EXPECT_THROW(argmax(a, 5), std::out_of_range);
  EXPECT_THROW(mean(a, 3), std::out_of_range);
  EXPECT_THROW(var(a, -3), std::out_of_range);
}

TEST(Reduce, BroadcastInputsAreReducedCorrectly) {
  auto row = array({1.0f, 2.0f, 3.0f, 4.0f}, Shape{1, 4});
  auto b = broadcast_to(row, {3, 4});
  EXPECT_EQ(values(sum(b, 0)), (std::vector<double>{3, 6, 9, 12}));
  EXPECT_EQ(values(sum(b, 1)), (std::vector<double>{10, 10, 10}));
  EXPECT_EQ(values(max(b, 0)), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(sum(b).item<float>(), 30.0f);
  EXPECT_EQ(values(argmax(b, 1)), (std::vector<double>{3, 3, 3}));
  auto sc = broadcast_to(array(2, int32), {5, 7});
  EXPECT_EQ(sum(sc).item<int32_t>(), 70);
}

TEST(Reduce, TransposedInputsMatchNaiveLoop) {
  std::vector<double> x(24);
  std::iota(x.begin(), x.end(), 0.0);
  auto a = array(x.begin(), Shape{2, 3, 4}, float32);
  auto t = transpose(a, {2, 0, 1});  // shape (4, 2, 3)
  std::vector<double> tx(24);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) tx[(i * 2 + j) * 3 + k] = x[(j * 3 + k) * 4 + i];
  for (const auto& axes : kAxesLists) {
    expect_near_vec(values(sum(t, axes)), naive_reduce(tx, {4, 2, 3}, axes, Op::Sum), 1e-6,
                    "transposed sum");
    expect_near_vec(values(max(t, axes)), naive_reduce(tx, {4, 2, 3}, axes, Op::Max), 1e-6,
                    "transposed max");
  }
  EXPECT_EQ(values(argmax(t, 0)), std::vector<double>(6, 3));
}

TEST(Reduce, AllAnyOverEveryDtype) {
  for (Dtype dt : kAllDtypes) {
    auto a = array({1.0, 0.0, 2.0, 3.0, 4.0, 5.0}, Shape{2, 3}, dt);
    EXPECT_FALSE(all(a).item<bool>()) << dtype_name(dt);
    EXPECT_TRUE(any(a).item<bool>()) << dtype_name(dt);
    EXPECT_EQ(values(all(a, 0)), (std::vector<double>{1, 0, 1})) << dtype_name(dt);
    EXPECT_EQ(values(all(a, 1)), (std::vector<double>{0, 1})) << dtype_name(dt);
    EXPECT_EQ(values(any(zeros({2, 3}, dt), 1)), (std::vector<double>{0, 0})) << dtype_name(dt);
  }
}

TEST(ArgReduce, FirstIndexOnTiesAlongEveryAxis) {
  auto a = array({3, 1, 3, 0, 2, 2, 3, 0, 1, 0, 2, 0}, Shape{3, 4}, int32);
  // Row maxima: row0 [3,1,3,0] -> 0; row1 [2,2,3,0] -> 2; row2 [1,0,2,0] -> 2.
  EXPECT_EQ(values(argmax(a, 1)), (std::vector<double>{0, 2, 2}));
  EXPECT_EQ(values(argmin(a, 1)), (std::vector<double>{3, 3, 1}));
  // Column maxima: [3,2,1] -> 0; [1,2,0] -> 1; [3,3,2] -> 0; [0,0,0] -> 0.
  EXPECT_EQ(values(argmax(a, 0)), (std::vector<double>{0, 1, 0, 0}));
  EXPECT_EQ(values(argmin(a, 0)), (std::vector<double>{2, 2, 2, 0}));
  EXPECT_EQ(argmax(a, 0, true).shape(), (Shape{1, 4}));
  EXPECT_EQ(argmax(a, -1, true).shape(), (Shape{3, 1}));
  EXPECT_EQ(argmax(a).item<uint32_t>(), 0u);
  EXPECT_EQ(argmin(a).item<uint32_t>(), 3u);
  EXPECT_EQ(argmax(a, true).shape(), (Shape{1, 1}));
  for (Dtype dt : kAllDtypes) {
    if (dt == bool_) continue;
    auto b = array({1.0, 4.0, 4.0, -0.0, 2.0}, Shape{5}, dt);
    EXPECT_EQ(argmax(b).item<uint32_t>(), 1u) << dtype_name(dt);
  }
  EXPECT_EQ(argmax(array({false, true, true})).item<uint32_t>(), 1u);
}

TEST(Mean, VarStdMatchClosedForms) {
  auto a = array({1.0f, 2.0f, 3.0f, 4.0f, 6.0f, 8.0f}, Shape{2, 3});
  EXPECT_FLOAT_EQ(mean(a).item<float>(), 4.0f);
  EXPECT_EQ(values(mean(a, 0)), (std::vector<double>{2.5, 4, 5.5}));
  EXPECT_EQ(values(mean(a, 1)), (std::vector<double>{2, 6}));
  EXPECT_EQ(mean(a, 1, true).shape(), (Shape{2, 1}));
  // var over all: mean 4, squared deviations 9,4,1,0,4,16 -> 34.
  EXPECT_NEAR(var(a).item<float>(), 34.0 / 6, 1e-5);
  EXPECT_NEAR(var(a, false, 1).item<float>(), 34.0 / 5, 1e-5);
  EXPECT_NEAR(tessera::std(a).item<float>(), std::sqrt(34.0 / 6), 1e-5);
  expect_near_vec(values(var(a, 1)), {2.0 / 3, 8.0 / 3}, 1e-6, "var axis 1");
  expect_near_vec(values(tessera::std(a, 0, false, 1)), {std::sqrt(4.5), std::sqrt(8.0), std::sqrt(12.5)},
                  1e-6, "std axis 0 ddof 1");
  auto i = array({1, 2, 4}, int32);
  EXPECT_FLOAT_EQ(mean(i).item<float>(), 7.0f / 3);
  // ddof >= n gives inf (division by a clamped 0), as MLX/NumPy.
  EXPECT_TRUE(std::isinf(var(array({1.0f, 2.0f}), false, 2).item<float>()));
}

TEST(Mean, CountNonzero) {
  auto a = array({0, 1, 2, 0, 0, 3}, Shape{2, 3}, int32);
  EXPECT_EQ(count_nonzero(a).item<int32_t>(), 3);
  EXPECT_EQ(count_nonzero(a).dtype(), int32);
  EXPECT_EQ(values(count_nonzero(a, 0)), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(values(count_nonzero(a, 1, true)), (std::vector<double>{2, 1}));
}

TEST(LogSumExp, MatchesNaiveAndHandlesInfinities) {
  std::vector<double> x{1, 2, 3, -1, 0.5, 4};
  auto a = array(x.begin(), Shape{2, 3}, float32);
  auto lse = [](std::vector<double> v) {
    double m = *std::max_element(v.begin(), v.end());
    double s = 0;
    for (double e : v) s += std::exp(e - m);
    return m + std::log(s);
  };
  EXPECT_NEAR(logsumexp(a).item<float>(), lse(x), 1e-5);
  expect_near_vec(values(logsumexp(a, 1)), {lse({1, 2, 3}), lse({-1, 0.5, 4})}, 1e-6, "axis 1");
  expect_near_vec(values(logsumexp(a, 0)), {lse({1, -1}), lse({2, 0.5}), lse({3, 4})}, 1e-6,
                  "axis 0");
  EXPECT_EQ(logsumexp(a, 1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(logsumexp(a, 0, true).shape(), (Shape{1, 3}));
  float inf = std::numeric_limits<float>::infinity();
  auto b = array({-inf, -inf, 1.0f, inf}, Shape{2, 2});
  auto r = values(logsumexp(b, 1));
  EXPECT_TRUE(std::isinf(r[0]) && r[0] < 0);
  EXPECT_TRUE(std::isinf(r[1]) && r[1] > 0);
  auto r0 = values(logsumexp(b, 0));
  EXPECT_NEAR(r0[0], 1.0, 1e-6);
  EXPECT_TRUE(std::isinf(r0[1]) && r0[1] > 0);
  EXPECT_EQ(logsumexp(array({1, 2}, int32)).dtype(), float32);
  EXPECT_NEAR(logsumexp(array(1000.0f)).item<float>(), 1000.0f, 1e-3);
}

TEST(Softmax, RowsSumToOneAndMatchNaive) {
  std::vector<double> x{1, 2, 3, 1000, 1001, 1002};
  auto a = array(x.begin(), Shape{2, 3}, float32);
  auto y = values(softmax(a, -1));
  double e1 = std::exp(-2.0), e2 = std::exp(-1.0), z = e1 + e2 + 1;
  expect_near_vec(y, {e1 / z, e2 / z, 1 / z, e1 / z, e2 / z, 1 / z}, 1e-6, "softmax");
  auto y0 = values(softmax(a, 0));
  EXPECT_NEAR(y0[0], 0.0, 1e-6);
  EXPECT_NEAR(y0[3], 1.0, 1e-6);
  auto all_axes = values(softmax(array({0.0f, 0.0f, 0.0f, 0.0f}, Shape{2, 2})));
  expect_near_vec(all_axes, {0.25, 0.25, 0.25, 0.25}, 1e-7, "whole");
  EXPECT_EQ(softmax(array({1, 2}, int32), -1).dtype(), float32);
  auto h = softmax(array({1.0, 2.0, 3.0}, float16), -1, true);
  EXPECT_EQ(h.dtype(), float16);
  EXPECT_NEAR(values(h)[2], 1 / (e1 + e2 + 1), 1e-3);
  EXPECT_EQ(softmax(zeros({0, 3}), -1).shape(), (Shape{0, 3}));
}

TEST(ReduceGrad, SumMeanMaxProdClosedForms) {
  auto x = array({1.0f, 3.0f, 2.0f, 3.0f, 0.5f, 4.0f}, Shape{2, 3});
  auto g = grad([](const array& a) { return sum(a); })(x);
  EXPECT_EQ(values(g), std::vector<double>(6, 1.0));
  g = grad([](const array& a) { return sum(mean(a, 1)); })(x);
  expect_near_vec(values(g), std::vector<double>(6, 1.0 / 3), 1e-7, "mean");
  // Row 0 has a tie at 3 (positions 1 and 3 are in different rows; row1 = [3, 0.5, 4]).
  g = grad([](const array& a) { return sum(max(a, 1)); })(x);
  EXPECT_EQ(values(g), (std::vector<double>{0, 1, 0, 0, 0, 1}));
  auto tie = array({2.0f, 5.0f, 5.0f});
  g = grad([](const array& a) { return max(a); })(tie);
  EXPECT_EQ(values(g), (std::vector<double>{0, 0.5, 0.5}));
  g = grad([](const array& a) { return sum(min(a, 0)); })(x);
  EXPECT_EQ(values(g), (std::vector<double>{1, 0, 1, 0, 1, 0}));
  // d prod / d x_i = product of the others, exact with a zero present.
  auto p = array({2.0f, 0.0f, 3.0f, 4.0f}, Shape{2, 2});
  g = grad([](const array& a) { return sum(prod(a, 1)); })(p);
  EXPECT_EQ(values(g), (std::vector<double>{0, 2, 4, 3}));
  g = grad([](const array& a) { return prod(a); })(p);
  EXPECT_EQ(values(g), (std::vector<double>{0, 24, 0, 0}));
  auto [out, tan] = jvp([](const array& a) { return sum(a, 0); }, x, ones({2, 3}));
  EXPECT_EQ(values(tan), (std::vector<double>{2, 2, 2}));
}

TEST(ReduceGrad, VarLogSumExpSoftmaxClosedForms) {
  std::vector<double> v{1, 2, 4, 0.5};
  auto x = array(v.begin(), Shape{4}, float32);
  // d var / dx_i = 2 (x_i - mean) / n.
  auto g = grad([](const array& a) { return var(a); })(x);
  double m = (1 + 2 + 4 + 0.5) / 4;
  std::vector<double> want;
  for (double e : v) want.push_back(2 * (e - m) / 4);
  expect_near_vec(values(g), want, 1e-6, "var");
  // d logsumexp = softmax.
  g = grad([](const array& a) { return logsumexp(a); })(x);
  double z = 0;
  for (double e : v) z += std::exp(e);
  want.clear();
  for (double e : v) want.push_back(std::exp(e) / z);
  expect_near_vec(values(g), want, 1e-6, "logsumexp");
  // Non-trailing axes take the composite path.
  auto x2 = reshape(x, {2, 2});
  g = grad([](const array& a) { return sum(logsumexp(a, 0)); })(x2);
  double z0 = std::exp(1) + std::exp(4), z1 = std::exp(2) + std::exp(0.5);
  expect_near_vec(values(g), {std::exp(1) / z0, std::exp(2) / z1, std::exp(4) / z0, std::exp(0.5) / z1},
                  1e-6, "logsumexp axis 0");
  // Several trailing axes are merged into one for the fused kernel.
  g = grad([](const array& a) { return logsumexp(a); })(x2);
  want.clear();
  for (double e : v) want.push_back(std::exp(e) / z);
  expect_near_vec(values(g), want, 1e-6, "logsumexp all axes of 2-D");
  EXPECT_EQ(logsumexp(array(2, int32)).dtype(), float32);
  // d sum(w * softmax(x)) / dx_i = s_i (w_i - sum_j s_j w_j).
  auto w = array({1.0f, -2.0f, 0.5f, 3.0f});
  g = grad([&](const array& a) { return sum(multiply(w, softmax(a, -1))); })(x);
  std::vector<double> s, wv{1, -2, 0.5, 3};
  double sw = 0;
  for (size_t i = 0; i < 4; ++i) {
    s.push_back(std::exp(v[i]) / z);
    sw += s[i] * wv[i];
  }
  want.clear();
  for (size_t i = 0; i < 4; ++i) want.push_back(s[i] * (wv[i] - sw));
  expect_near_vec(values(g), want, 1e-6, "softmax");
}

TEST(ReduceVmap, BatchedReductionsMatchPerItemResults) {
  auto x = array({1.0f, 5.0f, 3.0f, 4.0f, 2.0f, 6.0f}, Shape{2, 3});
  EXPECT_EQ(values(vmap([](const array& a) { return sum(a); })(x)), (std::vector<double>{9, 12}));
  EXPECT_EQ(values(vmap([](const array& a) { return sum(a); }, 1)(x)),
            (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(values(vmap([](const array& a) { return max(a, 0); }, 1)(x)),
            (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(values(vmap([](const array& a) { return argmax(a, 0); })(x)),
            (std::vector<double>{1, 2}));
  EXPECT_EQ(values(vmap([](const array& a) { return argmin(a, 0); }, 1)(x)),
            (std::vector<double>{0, 1, 0}));
  auto sm = values(vmap([](const array& a) { return softmax(a, -1); }, 1, 1)(x));
  // Columns [1,4], [5,2], [3,6] each softmaxed, laid back out as (2,3).
  double e3 = std::exp(3.0);
  expect_near_vec(sm, {1 / (1 + e3), e3 / (1 + e3), 1 / (1 + e3), e3 / (1 + e3), 1 / (1 + e3),
                       e3 / (1 + e3)},
                  1e-6, "vmapped softmax");
  auto l = values(vmap([](const array& a) { return logsumexp(a, 0); }, 1)(x));
  expect_near_vec(l, {4 + std::log1p(std::exp(-3.0)), 5 + std::log1p(std::exp(-3.0)),
                      6 + std::log1p(std::exp(-3.0))},
                  1e-6, "vmapped logsumexp");
}

TEST(ArgReduce, LongRowsMatchSequentialFirstIndexRule) {
  // The rule (as MLX's CPU backend): the first index whose value beats every earlier one
  // strictly; a NaN never beats anything, so only a NaN at index 0 is returned.
  auto naive = [](const std::vector<double>& v, bool is_max) {
    size_t bi = 0;
    for (size_t i = 1; i < v.size(); ++i) {
      if (is_max ? v[i] > v[bi] : v[i] < v[bi]) bi = i;
    }
    return static_cast<double>(bi);
  };
  for (Dtype dt : {float32, float64, float16, int32}) {
    for (size_t n : {5u, 37u, 1000u, 1003u}) {
      std::vector<double> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * 7919) % 13);
      v[n / 2] = 20;
      v[n / 3] = 20;  // earlier tie
      v[n - 1] = -5;
      v[n / 4] = -5;  // earlier tie for argmin
      if (dt != int32) v[2] = NAN;
      std::vector<double> rows = v;
      rows.insert(rows.end(), v.begin(), v.end());
      rows[n] = dt != int32 ? NAN : rows[n];  // second row starts with NaN
      auto a = array(rows.begin(), Shape{2, static_cast<int>(n)}, dt);
      std::vector<double> r1(rows.begin() + static_cast<long>(n), rows.end());
      EXPECT_EQ(values(argmax(a, 1)), (std::vector<double>{naive(v, true), naive(r1, true)}))
          << dtype_name(dt) << " n=" << n;
      EXPECT_EQ(values(argmin(a, 1)), (std::vector<double>{naive(v, false), naive(r1, false)}))
          << dtype_name(dt) << " n=" << n;
    }
  }
}

// Long float32 rows take the vectorised kernels (lane-wise max / exp / sum, rows over threads):
// rows of odd lengths against a naive double reference, plus rows with NaN / -inf / +inf.
TEST(Softmax, LongFloat32RowsMatchDoubleReference) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> dist(-30.0f, 30.0f);
  for (int n : {1, 15, 16, 17, 1000, 4099}) {
    const int rows = 37;
    std::vector<float> x(static_cast<size_t>(rows) * n);
    for (auto& v : x) v = dist(gen);
    if (n > 2) {
      x[3 * n + n / 2] = nan;   // row 3: all NaN
      x[5 * n] = -inf;          // row 5: exp(-inf) = 0
      x[6 * n + n - 1] = inf;   // row 6: +inf - inf -> NaN
      for (int i = 0; i < n; ++i) x[7 * n + i] = -inf;  // row 7: all -inf -> NaN
    }
    auto a = array(x.data(), Shape{rows, n}, float32);
    auto y = values(softmax(a, -1));
    auto l = values(logsumexp(a, -1));
    for (int r = 0; r < rows; ++r) {
      const float* xr = x.data() + static_cast<size_t>(r) * n;
      double m = -INFINITY;
      bool has_nan = false;
      for (int i = 0; i < n; ++i) {
        has_nan |= std::isnan(xr[i]);
        m = std::max(m, static_cast<double>(xr[i]));
      }
      double s = 0;
      for (int i = 0; i < n; ++i) s += std::exp(static_cast<double>(xr[i]) - m);
      const bool nan_row = has_nan || std::isinf(m);
      for (int i = 0; i < n; ++i) {
        const double got = y[static_cast<size_t>(r) * n + i];
        if (nan_row) {
          ASSERT_TRUE(std::isnan(got)) << "n " << n << " row " << r << " i " << i;
          continue;
        }
        const double shift = static_cast<double>(xr[i]) - m;
        const double want = std::exp(shift) / s;
        // x - m is rounded to float first: a relative error of |x - m| * 2^-24 in the result.
        const double rel = std::isinf(shift) ? 0.0 : 2e-6 + 1.2e-7 * std::abs(shift);
        ASSERT_NEAR(got, want, rel * want + 1e-37) << "n " << n << " row " << r << " i " << i;
      }
      const double lwant = has_nan ? NAN : (std::isinf(m) ? m : m + std::log(s));
      if (std::isnan(lwant)) {
        EXPECT_TRUE(std::isnan(l[r])) << "n " << n << " row " << r;
      } else if (std::isinf(lwant)) {
        EXPECT_EQ(l[r], lwant) << "n " << n << " row " << r;
      } else {
        EXPECT_NEAR(l[r], lwant, 2e-6 * std::max(1.0, std::abs(lwant))) << "n " << n << " row " << r;
      }
    }
  }
}

// max/min of a whole array larger than a few reduction blocks (the blocks run on every
// thread): the extreme and a NaN found wherever they are.
TEST(Reduce, LargeFloat32MaxMinFindExtremaAndNanInAnyBlock) {
  const size_t n = (size_t{1} << 20) + 12345;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 2654435761u) % 1000003) * 1e-3f;
  for (size_t pos : {size_t{0}, size_t{16383}, size_t{16384}, n / 2 + 7, n - 1}) {
    auto y = x;
    y[pos] = 5000.0f;
    auto a = array(y.data(), Shape{static_cast<int>(n)}, float32);
    EXPECT_EQ(max(a).item<float>(), 5000.0f) << pos;
    y[pos] = -5000.0f;
    a = array(y.data(), Shape{static_cast<int>(n)}, float32);
    EXPECT_EQ(min(a).item<float>(), -5000.0f) << pos;
    y[pos] = std::numeric_limits<float>::quiet_NaN();
    a = array(y.data(), Shape{static_cast<int>(n)}, float32);
    EXPECT_TRUE(std::isnan(max(a).item<float>())) << pos;
    EXPECT_TRUE(std::isnan(min(a).item<float>())) << pos;
  }
  // The same in double.
  std::vector<double> d(x.begin(), x.end());
  d[n - 3] = 2000.0;
  EXPECT_EQ(max(array(d.begin(), Shape{static_cast<int>(n)}, float64)).item<double>(), 2000.0);
}
