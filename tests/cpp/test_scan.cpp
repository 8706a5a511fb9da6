// Scans (cumsum, cumprod, cummax, cummin, logcumsumexp) against naive loops: every axis,
// reverse, exclusive, dtypes, NaN, 0-d/empty and non-contiguous inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <numeric>

#include "tessera/tessera.h"
#include "test_util.h"

using namespace tessera;

namespace {

using test_util::values;

using Combine = std::function<double(double, double)>;

// Naive scan of row-major x (shape) along axis.
std::vector<double> naive_scan(const std::vector<double>& x, const Shape& shape, int axis,
                               bool reverse, bool inclusive, double init, const Combine& f) {
  size_t outer = 1, n = shape[axis], inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<double> out(x.size());
  for (size_t o = 0; o < outer; ++o)
    for (size_t j = 0; j < inner; ++j) {
      double acc = init;
      for (size_t k = 0; k < n; ++k) {
        size_t i = reverse ? n - 1 - k : k;
        size_t p = (o * n + i) * inner + j;
        if (inclusive) {
          acc = f(acc, x[p]);
          out[p] = acc;
        } else {
          out[p] = acc;
          acc = f(acc, x[p]);
        }
      }
    }
  return out;
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

const Combine kAdd = [](double a, double b) { return a + b; };
const Combine kMul = [](double a, double b) { return a * b; };
const Combine kMax = [](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); };
const Combine kMin = [](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); };

}  // namespace

TEST(Scan, EveryAxisDirectionAndInclusivityMatchesNaive) {
  const Shape shape{3, 4, 5};
  std::vector<double> x(60), small(60);
  for (size_t i = 0; i < 60; ++i) {
    x[i] = static_cast<double>((i * 11) % 7) - 3;  // -3..3
    small[i] = (i % 3 == 0) ? 2.0 : (i % 5 == 0 ? -1.0 : 1.0);
  }
  auto a = array(x.begin(), shape, float32);
  auto b = array(small.begin(), shape, float32);
  for (int axis : {0, 1, 2, -1}) {
    int ax = axis < 0 ? axis + 3 : axis;
    for (bool rev : {false, true}) {
      for (bool inc : {true, false}) {
        std::string what = "axis " + std::to_string(axis) + (rev ? " rev" : "") + (inc ? "" : " excl");
        expect_near_vec(values(cumsum(a, axis, rev, inc)), naive_scan(x, shape, ax, rev, inc, 0, kAdd),
                        1e-6, "cumsum " + what);
        expect_near_vec(values(cumprod(b, axis, rev, inc)),
                        naive_scan(small, shape, ax, rev, inc, 1, kMul), 1e-6, "cumprod " + what);
        expect_near_vec(values(cummax(a, axis, rev, inc)),
                        naive_scan(x, shape, ax, rev, inc, -INFINITY, kMax), 1e-6, "cummax " + what);
        expect_near_vec(values(cummin(a, axis, rev, inc)),
                        naive_scan(x, shape, ax, rev, inc, INFINITY, kMin), 1e-6, "cummin " + what);
      }
    }
  }
}

TEST(Scan, CumsumOverEveryDtype) {
  std::vector<double> x{1, 0, 2, 3, 1, 1};
  for (Dtype dt : kAllDtypes) {
    auto a = array(x.begin(), Shape{2, 3}, dt);
    auto c = cumsum(a, 1);
    EXPECT_EQ(c.dtype(), dt == bool_ ? int32 : dt) << dtype_name(dt);
    std::vector<double> want = dt == bool_ ? std::vector<double>{1, 1, 2, 1, 2, 3}
                                           : std::vector<double>{1, 1, 3, 3, 4, 5};
    EXPECT_EQ(values(c), want) << dtype_name(dt);
    auto m = cummax(a, 0);
    EXPECT_EQ(m.dtype(), dt);
    EXPECT_EQ(values(m), (dt == bool_ ? std::vector<double>{1, 0, 1, 1, 1, 1}
                                      : std::vector<double>{1, 0, 2, 3, 1, 2}))
        << dtype_name(dt);
  }
}

TEST(Scan, DtypeArgumentAndFlattenedVersions) {
  auto a = array({100, 100, 100}, int8);
  EXPECT_EQ(cumsum(a, 0, false, true, int32).dtype(), int32);
  EXPECT_EQ(values(cumsum(a, 0, false, true, int32)), (std::vector<double>{100, 200, 300}));
  auto m = array({1.0f, 2.0f, 3.0f, 4.0f}, Shape{2, 2});
  EXPECT_EQ(cumsum(m).shape(), Shape{4});
  EXPECT_EQ(values(cumsum(m)), (std::vector<double>{1, 3, 6, 10}));
  EXPECT_EQ(values(cumprod(m, true)), (std::vector<double>{24, 24, 12, 4}));
  EXPECT_EQ(values(cummax(m, false, false)),
            (std::vector<double>{-INFINITY, 1, 2, 3}));
  EXPECT_EQ(values(cummin(m)), (std::vector<double>{1, 1, 1, 1}));
}

TEST(Scan, CummaxPropagatesNan) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  auto a = array({1.0f, nan, 3.0f});
  auto r = values(cummax(a));
  EXPECT_EQ(r[0], 1.0);
  EXPECT_TRUE(std::isnan(r[1]));
  EXPECT_TRUE(std::isnan(r[2]));
  auto m = values(cummin(a, 0, true));
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_EQ(m[2], 3.0);
}

TEST(Scan, LogCumSumExpMatchesNaive) {
  std::vector<double> x{0.5, -1, 2, 700, 3, -INFINITY};
  auto a = array(x.begin(), Shape{6}, float64);
  auto lae = [](double p, double q) {
    double m = std::max(p, q);
    if (std::isinf(m)) return m;
    return m + std::log(std::exp(p - m) + std::exp(q - m));
  };
  expect_near_vec(values(logcumsumexp(a)), naive_scan(x, {6}, 0, false, true, -INFINITY, lae), 1e-12,
                  "forward");
  expect_near_vec(values(logcumsumexp(a, 0, true, false)),
                  naive_scan(x, {6}, 0, true, false, -INFINITY, lae), 1e-12, "reverse exclusive");
  // Complex inputs: log of the running sum of exponentials, here with parts far from zero so
  // that a naive exp would overflow float32 (e^100).
  const std::vector<std::complex<double>> z = {{100.0, 1.0}, {101.0, -0.5}, {-3.0, 2.0}};
  array zc(std::vector<complex64_t>{complex64_t(100.0f, 1.0f), complex64_t(101.0f, -0.5f),
                                    complex64_t(-3.0f, 2.0f)},
           {3}, complex64);
  const array got = logcumsumexp(zc);
  eval({got});
  std::complex<double> run = 0.0;
  for (int i = 0; i < 3; ++i) {
    run += std::exp(z[i] - 101.0);
    const std::complex<double> want = std::log(run) + 101.0;
    const complex64_t g = got.data<complex64_t>()[i];
    EXPECT_NEAR(g.real(), want.real(), 1e-4) << i;
    EXPECT_NEAR(std::remainder(g.imag() - want.imag(), 2 * M_PI), 0.0, 1e-4) << i;
  }
}

TEST(Scan, NonContiguousZeroDimEmptyAndErrors) {
  auto row = array({1.0f, 2.0f, 3.0f}, Shape{1, 3});
  auto b = broadcast_to(row, {2, 3});
  EXPECT_EQ(values(cumsum(b, 0)), (std::vector<double>{1, 2, 3, 2, 4, 6}));
  EXPECT_EQ(values(cumsum(b, 1)), (std::vector<double>{1, 3, 6, 1, 3, 6}));
  auto t = transpose(array({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, Shape{2, 3}));  // (3,2)
  EXPECT_EQ(values(cumsum(t, 0)), (std::vector<double>{1, 4, 3, 9, 6, 15}));
  EXPECT_EQ(values(cumsum(t, 1)), (std::vector<double>{1, 5, 2, 7, 3, 9}));
  EXPECT_EQ(cumsum(zeros({0, 3}), 0).shape(), (Shape{0, 3}));
  EXPECT_EQ(cumsum(zeros({2, 0}), 1).shape(), (Shape{2, 0}));
  EXPECT_EQ(cumsum(array(5.0f)).shape(), Shape{1});  // flattened 0-d
  try {
    cumsum(zeros({2, 3}), 2);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("axis 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cummax(array(1.0f), 0), std::invalid_argument);
}

TEST(Scan, LongRowsAndLongColumns) {
  const int n = 100000;
  auto a = ones({n}, float32);
  auto c = values(cumsum(a));
  EXPECT_EQ(c[n - 1], n);
  EXPECT_EQ(c[12344], 12345);
  auto m = ones({1000, 300}, int32);
  auto r = values(cumsum(m, 0));
  EXPECT_EQ(r[999 * 300 + 7], 1000);
  auto rr = values(cumsum(m, 0, true));
  EXPECT_EQ(rr[7], 1000);
}

TEST(ScanGrad, CumsumCumprodCummaxClosedForms) {
  auto x = array({1.0f, 2.0f, 3.0f, 4.0f});
  auto w = array({1.0f, 10.0f, 100.0f, 1000.0f});
  // d sum(w * cumsum(x)) / dx_i = sum_{j >= i} w_j.
  auto g = grad([&](const array& a) { return sum(multiply(w, cumsum(a))); })(x);
  EXPECT_EQ(values(g), (std::vector<double>{1111, 1110, 1100, 1000}));
  g = grad([&](const array& a) { return sum(multiply(w, cumsum(a, 0, true, false))); })(x);
  EXPECT_EQ(values(g), (std::vector<double>{0, 1, 11, 111}));
  // cumprod of [2, 0, 3]: outputs [2, 0, 0]; d/dx0 = 1, d/dx1 = 2 + 2*3 = 8, d/dx2 = 0.
  auto z = array({2.0f, 0.0f, 3.0f});
  g = grad([](const array& a) { return sum(cumprod(a)); })(z);
  EXPECT_EQ(values(g), (std::vector<double>{1, 8, 0}));
  auto y = array({2.0f, 1.0f, 3.0f});
  // cumprod [2, 2, 6]: d/dx0 = 1 + 1 + 3 = 5, d/dx1 = 2 + 6 = 8, d/dx2 = 2.
  g = grad([](const array& a) { return sum(cumprod(a)); })(y);
  EXPECT_EQ(values(g), (std::vector<double>{5, 8, 2}));
  // cummax [2, 2, 3]: x0 owns positions 0 and 1.
  g = grad([&](const array& a) { return sum(multiply(array({1.0f, 10.0f, 100.0f}), cummax(a))); })(y);
  EXPECT_EQ(values(g), (std::vector<double>{11, 0, 100}));
  g = grad([](const array& a) { return sum(cummin(a, 0, true)); })(y);  // cummin rev [1, 1, 3]
  EXPECT_EQ(values(g), (std::vector<double>{0, 2, 1}));
}

TEST(ScanVmap, BatchedScansMatchPerItemResults) {
  auto x = array({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, Shape{2, 3});
  EXPECT_EQ(values(vmap([](const array& a) { return cumsum(a, 0); })(x)),
            (std::vector<double>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(values(vmap([](const array& a) { return cumsum(a, 0); }, 1, 1)(x)),
            (std::vector<double>{1, 2, 3, 5, 7, 9}));
}

TEST(ScanGrad, CumprodAndLogcumsumexpJvpMatchClosedForms) {
  // cumprod [2, 0, 3] -> [2, 0, 0]; tangent t: d out = [t0, 2 t1, 2*3 t1... only t1's term]
  auto z = array({2.0f, 0.0f, 3.0f});
  auto t = array({1.0f, 10.0f, 100.0f});
  auto [o1, d1] = jvp([](const array& a) { return cumprod(a); }, z, t);
  EXPECT_EQ(values(d1), (std::vector<double>{1, 20, 60}));
  auto y = array({2.0f, 1.0f, 3.0f});
  // out = [2, 2, 6]: d = [t0, t0*1 + 2*t1, 3*(t0 + 2 t1) + 2*t2] = [1, 21, 263].
  auto [o2, d2] = jvp([](const array& a) { return cumprod(a); }, y, t);
  EXPECT_EQ(values(d2), (std::vector<double>{1, 21, 263}));
  auto [o3, d3] = jvp([](const array& a) { return cumprod(a, 0, true, false); }, y, t);
  // reverse exclusive: out = [3, 3, 1]; d = [t1*3 + t2*1, t2, 0] = [130, 100, 0].
  EXPECT_EQ(values(d3), (std::vector<double>{130, 100, 0}));
  // logcumsumexp: d out_i = sum_{j<=i} softmax weights * t_j.
  auto x = array({0.0f, 1.0f, -1.0f});
  auto tt = array({1.0f, -2.0f, 3.0f});
  auto [o4, d4] = jvp([](const array& a) { return logcumsumexp(a); }, x, tt);
  double e0 = 1, e1 = std::exp(1.0), e2 = std::exp(-1.0);
  std::vector<double> want{1, (e0 * 1 + e1 * -2) / (e0 + e1), (e0 - 2 * e1 + 3 * e2) / (e0 + e1 + e2)};
  auto got = values(d4);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(got[i], want[i], 1e-5);
}
