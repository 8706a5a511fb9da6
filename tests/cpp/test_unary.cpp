// Unary elementwise ops against naive reference loops (std:: math in double): every dtype the op
// accepts, dtype rules, 0-d, empty, non-contiguous views, errors, and donation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tessera/memory.h"
#include "tessera/tessera.h"
#include "test_util.h"

using namespace tessera;

namespace {

using test_util::values;

const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

std::vector<complex64_t> cvalues(array a) {
  eval(a);
  a = contiguous(a);
  eval(a);
  return std::vector<complex64_t>(a.data<complex64_t>(), a.data<complex64_t>() + a.size());
}

array make(const std::vector<double>& v, Dtype dtype, Shape shape = {}) {
  if (shape.empty() && v.size() != 1) shape = {static_cast<int>(v.size())};
  return array(v.begin(), shape, dtype);
}

// Relative tolerance that matches the precision of `dtype`.
double tol(Dtype d) {
  if (d == float16) return 2e-3;
  if (d == bfloat16) return 1.6e-2;
  if (d == float64) return 1e-12;
  return 2e-6;
}

// The value a dtype stores for v (what the op actually receives).
double rounded(double v, Dtype d) { return make({v}, d).item<double>(); }

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i << ": got " << got[i];
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " at " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], rtol * std::max(1.0, std::abs(want[i])))
          << what << " at " << i;
    }
  }
}

const std::vector<Dtype> kFloatDtypes = {float16, bfloat16, float32, float64};
const std::vector<Dtype> kRealDtypes = {bool_, uint8, uint16, uint32, uint64, int8, int16,
                                        int32, int64, float16, float32, float64, bfloat16};

struct FloatCase {
  const char* name;
  std::function<array(const array&)> op;
  std::function<double(double)> ref;
  std::vector<double> inputs;
};

std::vector<FloatCase> float_cases() {
  const std::vector<double> any = {-3.0, -1.25, -0.5, 0.0, 0.3, 1.0, 2.5};
  const std::vector<double> pos = {0.125, 0.5, 1.0, 2.0, 7.5, 100.0};
  const std::vector<double> unit = {-0.99, -0.5, 0.0, 0.25, 0.75, 0.999};
  return {
      {"exp", [](const array& a) { return exp(a); }, [](double x) { return std::exp(x); }, any},
      {"expm1", [](const array& a) { return expm1(a); }, [](double x) { return std::expm1(x); },
       any},
      {"log", [](const array& a) { return log(a); }, [](double x) { return std::log(x); }, pos},
      {"log2", [](const array& a) { return log2(a); }, [](double x) { return std::log2(x); }, pos},
      {"log10", [](const array& a) { return log10(a); }, [](double x) { return std::log10(x); },
       pos},
      {"log1p", [](const array& a) { return log1p(a); }, [](double x) { return std::log1p(x); },
       pos},
      {"sqrt", [](const array& a) { return sqrt(a); }, [](double x) { return std::sqrt(x); }, pos},
      {"rsqrt", [](const array& a) { return rsqrt(a); },
       [](double x) { return 1.0 / std::sqrt(x); }, pos},
      {"sin", [](const array& a) { return sin(a); }, [](double x) { return std::sin(x); }, any},
      {"cos", [](const array& a) { return cos(a); }, [](double x) { return std::cos(x); }, any},
      {"tan", [](const array& a) { return tan(a); }, [](double x) { return std::tan(x); }, any},
      {"arcsin", [](const array& a) { return arcsin(a); }, [](double x) { return std::asin(x); },
       unit},
      {"arccos", [](const array& a) { return arccos(a); }, [](double x) { return std::acos(x); },
       unit},
      {"arctan", [](const array& a) { return arctan(a); }, [](double x) { return std::atan(x); },
       any},
      {"sinh", [](const array& a) { return sinh(a); }, [](double x) { return std::sinh(x); }, any},
      {"cosh", [](const array& a) { return cosh(a); }, [](double x) { return std::cosh(x); }, any},
      {"tanh", [](const array& a) { return tanh(a); }, [](double x) { return std::tanh(x); }, any},
      {"arcsinh", [](const array& a) { return arcsinh(a); },
       [](double x) { return std::asinh(x); }, any},
      {"arccosh", [](const array& a) { return arccosh(a); },
       [](double x) { return std::acosh(x); }, {1.0, 1.5, 2.0, 10.0}},
      {"arctanh", [](const array& a) { return arctanh(a); },
       [](double x) { return std::atanh(x); }, unit},
      {"sigmoid", [](const array& a) { return sigmoid(a); },
       [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, any},
      {"erf", [](const array& a) { return erf(a); }, [](double x) { return std::erf(x); }, any},
      {"degrees", [](const array& a) { return degrees(a); },
       [](double x) { return x * 180.0 / M_PI; }, any},
      {"radians", [](const array& a) { return radians(a); },
       [](double x) { return x * M_PI / 180.0; }, any},
      {"reciprocal", [](const array& a) { return reciprocal(a); },
       [](double x) { return 1.0 / x; }, pos},
  };
}

}  // namespace

TEST(UnaryFloat, EveryOpMatchesStdMathInEveryFloatDtype) {
  for (const auto& c : float_cases()) {
    for (Dtype d : kFloatDtypes) {
      auto x = make(c.inputs, d);
      auto y = c.op(x);
      EXPECT_EQ(y.dtype(), d) << c.name;
      std::vector<double> want;
      for (double v : c.inputs) want.push_back(c.ref(rounded(v, d)));
      // The result is rounded to d once more.
      expect_close(values(y), want, 2 * tol(d), std::string(c.name) + " " + dtype_name(d));
    }
  }
}

// float32 sin and cos within 2 units in the last place of double libm's, over |x| <= 2^14 (the
// vectorised kernel's range) sampled densely, and next to multiples of pi/2 where the reduction
// cancels; beyond it libm's float result.
TEST(UnaryFloat, SinAndCosAreWithinTwoUlpOfDoubleLibm) {
  std::vector<float> xs;
  for (float x = -16384.0f; x <= 16384.0f; x += std::max(1e-3f, std::fabs(x) * 1e-4f)) xs.push_back(x);
  for (int k = 1; k < 10430; k += 3) {
    float m = static_cast<float>(k * 1.5707963267948966);
    for (int d = 0; d < 3; ++d, m = std::nextafter(m, 1e9f)) xs.push_back(m);
  }
  for (float big : {2e4f, 3e7f, -1e30f}) xs.push_back(big);
  array x(xs.begin(), Shape{static_cast<int32_t>(xs.size())}, float32);
  auto s = values(sin(x)), c = values(cos(x));
  auto ulps = [](double got, double want) {
    const float w = static_cast<float>(want);
    const double ulp = w == 0.0f ? std::ldexp(1.0, -149)
                                 : std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
    return std::fabs(got - want) / ulp;
  };
  double worst_s = 0, worst_c = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    worst_s = std::max(worst_s, ulps(s[i], std::sin(static_cast<double>(xs[i]))));
    worst_c = std::max(worst_c, ulps(c[i], std::cos(static_cast<double>(xs[i]))));
  }
  EXPECT_LE(worst_s, 2.0) << "sin";
  EXPECT_LE(worst_c, 2.0) << "cos";
}

// float32 exp, tanh, sigmoid, sin and cos: the contiguous kernel (16-lane forms on AVX-512
// builds, a masked last vector) and the strided one (the scalar functor per element) give the
// same bits, and both are within a few units in the last place of double libm. The inputs: a
// spread of bit patterns over every sign and exponent, and the edges (zeros, subnormals, the
// overflow and underflow thresholds, infinities, NaN).
TEST(UnaryFloat, FastFloat32OpsGiveTheSameBitsInEveryLayoutAndStayWithinUlpsOfLibm) {
  std::vector<float> xs;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 65521) {
    const uint32_t u = static_cast<uint32_t>(b);
    float f;
    std::memcpy(&f, &u, 4);
    xs.push_back(f);
  }
  for (float f : {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-40f, 88.72f, 88.73f, 89.0f, 89.5f, -87.3f,
                  -103.9f, -104.0f, -110.0f, 9.0f, 9.03f, -9.1f, 0.3466f, 0.625f, 16384.0f,
                  16385.0f, static_cast<float>(kInf), static_cast<float>(-kInf),
                  static_cast<float>(kNan)}) {
    xs.push_back(f);
  }
  const int n = static_cast<int>(xs.size());  // not a multiple of 16
  array x(xs.begin(), Shape{n}, float32);
  // The same values at a stride of 2: the strided loop of the kernel.
  array wide = reshape(stack({x, zeros_like(x)}, 1), {2 * n});
  array xs2 = slice(wide, {0}, {2 * n}, {2});
  struct Case {
    const char* name;
    std::function<array(const array&)> op;
    std::function<double(double)> ref;
    double max_ulps;
    double fast_max = 3.4e38;  // |x| above which the op takes libm's float function
  };
  const std::vector<Case> cases = {
      {"exp", [](const array& a) { return exp(a); }, [](double v) { return std::exp(v); }, 1.5},
      {"tanh", [](const array& a) { return tanh(a); }, [](double v) { return std::tanh(v); }, 3},
      {"sigmoid", [](const array& a) { return sigmoid(a); },
       [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, 3},
      {"sin", [](const array& a) { return sin(a); }, [](double v) { return std::sin(v); }, 2,
       16384},
      {"cos", [](const array& a) { return cos(a); }, [](double v) { return std::cos(v); }, 2,
       16384},
  };
  for (const auto& c : cases) {
    array flat = c.op(x), strided = c.op(xs2);
    eval({flat, strided});
    ASSERT_FALSE(xs2.flags().row_contiguous);
    const float* f = flat.data<float>();
    const float* g = strided.data<float>();
    double worst = 0;
    float worst_x = 0;
    // A native build runs the same arithmetic in both loops: the same bits. In a baseline
    // (wheel) build the contiguous loop is a copy compiled for this CPU's AVX2 / AVX-512, whose
    // multiply-adds are fused where the baseline strided loop's are not: each layout is held to
    // the accuracy bound on its own.
    const bool same_bits = TESSERA_NATIVE_KERNELS;
    for (int i = 0; i < n; ++i) {
      uint32_t a, b;
      std::memcpy(&a, f + i, 4);
      std::memcpy(&b, g + i, 4);
      if (same_bits) {
        ASSERT_EQ(a, b) << c.name << " of " << xs[i] << ": " << f[i] << " vs " << g[i];
      }
      const double want = c.ref(static_cast<double>(xs[i]));
      for (const float v : {f[i], g[i]}) {
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(v)) << c.name << " of " << xs[i];
          continue;
        }
        const float w = static_cast<float>(want);
        if (std::isinf(w)) {
          EXPECT_EQ(v, w) << c.name << " of " << xs[i];
          continue;
        }
        const double ulp = w == 0.0f ? std::ldexp(1.0, -149)
                                     : std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
        const double u = std::fabs(v - want) / ulp;
        if (std::fabs(xs[i]) > c.fast_max) {  // libm's float function
          EXPECT_LE(u, 1.0) << c.name << " of " << xs[i];
        } else if (u > worst) {
          worst = u, worst_x = xs[i];
        }
      }
    }
    EXPECT_LE(worst, c.max_ulps) << c.name << " at " << worst_x;
  }
}

TEST(UnaryFloat, IntegerAndBoolInputsPromoteToFloat32) {
  for (Dtype d : {bool_, uint8, uint16, uint32, uint64, int8, int16, int32, int64}) {
    auto x = make({0, 1, 2, 1}, d);
    if (d == bool_) x = make({0, 1, 1, 0}, d);
    auto ref_in = values(x);
    for (const auto& c : float_cases()) {
      if (std::string(c.name) == "arccosh" || std::string(c.name) == "arctanh" ||
          std::string(c.name) == "arcsin" || std::string(c.name) == "arccos") {
        continue;
      }
      auto y = c.op(x);
      EXPECT_EQ(y.dtype(), float32) << c.name << " " << dtype_name(d);
      std::vector<double> want;
      for (double v : ref_in) want.push_back(c.ref(v));
      expect_close(values(y), want, 4e-6, std::string(c.name) + " " + dtype_name(d));
    }
  }
}

TEST(UnaryFloat, ErfinvInvertsErfInEveryFloatDtype) {
  const std::vector<double> in = {-0.999, -0.9, -0.3, 0.0, 0.1, 0.5, 0.95, 0.99999};
  for (Dtype d : kFloatDtypes) {
    auto y = erfinv(make(in, d));
    auto got = values(y);
    for (size_t i = 0; i < in.size(); ++i) {
      // erf(erfinv(x)) == x, checked in double.
      double x = rounded(in[i], d);
      double back = std::erf(got[i]);
      double slack = d == float64 ? 1e-12 : (d == float32 ? 2e-6 : 2e-2);
      EXPECT_NEAR(back, x, slack * std::max(1.0, std::abs(got[i]) * 3)) << dtype_name(d);
    }
  }
  auto edges = values(erfinv(make({1.0, -1.0, 1.5, kNan}, float32)));
  EXPECT_EQ(edges[0], kInf);
  EXPECT_EQ(edges[1], -kInf);
  EXPECT_TRUE(std::isnan(edges[2]));
  EXPECT_TRUE(std::isnan(edges[3]));
}

TEST(UnaryFloat, SpecialValuesFollowIeee) {
  auto x = make({kNan, kInf, -kInf, 0.0, -0.0}, float32);
  auto e = values(exp(x));
  EXPECT_TRUE(std::isnan(e[0]));
  EXPECT_EQ(e[1], kInf);
  EXPECT_EQ(e[2], 0.0);
  EXPECT_EQ(e[3], 1.0);
  auto l = values(log(make({0.0, -1.0}, float32)));
  EXPECT_EQ(l[0], -kInf);
  EXPECT_TRUE(std::isnan(l[1]));
  auto s = values(sigmoid(make({-200.0, 200.0}, float32)));
  EXPECT_EQ(s[0], 0.0);
  EXPECT_EQ(s[1], 1.0);
}

TEST(UnaryArith, AbsNegativeSignSquareEveryRealDtype) {
  for (Dtype d : kRealDtypes) {
    std::vector<double> in = {0, 1, 2, 5, 3};
    if (d == bool_) in = {0, 1, 1, 0, 1};
    if (!issubdtype(d, unsignedinteger) && d != bool_) in = {-3, 0, 2, -1, 5};
    auto x = make(in, d);
    auto a = abs(x), sg = sign(x), sq = square(x);
    EXPECT_EQ(a.dtype(), d);
    EXPECT_EQ(sg.dtype(), d);
    EXPECT_EQ(sq.dtype(), d);
    std::vector<double> wa, ws, wq;
    for (double v : in) {
      wa.push_back(std::abs(v));
      ws.push_back(d == bool_ ? v : (v > 0) - (v < 0));
      wq.push_back(d == bool_ ? v : v * v);
    }
    expect_close(values(a), wa, 0, "abs " + dtype_name(d));
    expect_close(values(sg), ws, 0, "sign " + dtype_name(d));
    expect_close(values(sq), wq, 0, "square " + dtype_name(d));
    if (d != bool_) {
      auto n = negative(x);
      EXPECT_EQ(n.dtype(), d);
      auto got = values(n);
      for (size_t i = 0; i < in.size(); ++i) {
        if (issubdtype(d, unsignedinteger)) {
          // Unsigned negation wraps modulo 2^bits.
          double mod = std::pow(2.0, 8.0 * size_of(d));
          EXPECT_EQ(got[i], in[i] == 0 ? 0 : mod - in[i]) << dtype_name(d);
        } else {
          EXPECT_EQ(got[i], -in[i]) << dtype_name(d);
        }
      }
      expect_close(values(-x), got, 0, "operator- " + dtype_name(d));
    }
  }
}

TEST(UnaryArith, SignOfFloatsKeepsNanAndZero) {
  auto got = values(sign(make({-2.5, -0.0, 0.0, 3.0, kNan, -kInf}, float32)));
  EXPECT_EQ(got[0], -1.0);
  EXPECT_EQ(got[1], 0.0);
  EXPECT_EQ(got[2], 0.0);
  EXPECT_EQ(got[3], 1.0);
  EXPECT_TRUE(std::isnan(got[4]));
  EXPECT_EQ(got[5], -1.0);
}

TEST(UnaryArith, NegativeOfBoolIsAnErrorNamingTheOp) {
  try {
    negative(array(true));
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[negative]"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("bool"), std::string::npos);
  }
}

TEST(UnaryRounding, FloorCeilRoundKeepIntegerDtypes) {
  for (Dtype d : {uint8, int8, int16, int32, int64, uint64}) {
    auto x = make({0, 3, 7}, d);
    for (auto* f : {static_cast<array (*)(const array&, StreamOrDevice)>(floor),
                    static_cast<array (*)(const array&, StreamOrDevice)>(ceil)}) {
      auto y = f(x, {});
      EXPECT_EQ(y.dtype(), d);
      expect_close(values(y), {0, 3, 7}, 0, dtype_name(d));
    }
    auto r = round(x);
    EXPECT_EQ(r.dtype(), d);
    expect_close(values(r), {0, 3, 7}, 0, "round " + dtype_name(d));
  }
}

TEST(UnaryRounding, FloatsRoundHalfToEvenAndFloorCeilInEveryFloatDtype) {
  const std::vector<double> in = {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.25, -1.75};
  for (Dtype d : kFloatDtypes) {
    auto x = make(in, d);
    std::vector<double> wf, wc, wr;
    for (double v : in) {
      wf.push_back(std::floor(v));
      wc.push_back(std::ceil(v));
      wr.push_back(std::nearbyint(v));
    }
    expect_close(values(floor(x)), wf, 0, "floor " + dtype_name(d));
    expect_close(values(ceil(x)), wc, 0, "ceil " + dtype_name(d));
    expect_close(values(round(x)), wr, 0, "round " + dtype_name(d));
  }
}

TEST(UnaryRounding, RoundWithDecimals) {
  expect_close(values(round(make({1.234, -5.678, 2.5}, float32), 2)), {1.23, -5.68, 2.5}, 1e-6,
               "decimals 2");
  auto r = round(make({1234, -5678}, int32), -2);
  EXPECT_EQ(r.dtype(), int32);
  expect_close(values(r), {1200, -5700}, 0, "decimals -2");
}

TEST(UnaryLogic, LogicalNotAndBitwiseInvert) {
  auto ln = logical_not(make({0, 2, -1, 0}, int32));
  EXPECT_EQ(ln.dtype(), bool_);
  expect_close(values(ln), {1, 0, 0, 1}, 0, "logical_not");
  expect_close(values(logical_not(make({0.0, 0.5}, float32))), {1, 0}, 0, "logical_not float");
  auto bi = bitwise_invert(make({0, 5, -1}, int8));
  EXPECT_EQ(bi.dtype(), int8);
  expect_close(values(bi), {-1, -6, 0}, 0, "invert int8");
  expect_close(values(~make({0, 5}, uint8)), {255, 250}, 0, "invert uint8");
  expect_close(values(~make({0, 1}, bool_)), {1, 0}, 0, "invert bool");
  try {
    bitwise_invert(make({1.0}, float32));
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[bitwise_invert]"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("float32"), std::string::npos);
  }
}

TEST(UnaryPredicates, IsnanIsinfIsfiniteEveryDtype) {
  for (Dtype d : kFloatDtypes) {
    auto x = make({kNan, kInf, -kInf, 1.0, 0.0}, d);
    EXPECT_EQ(isnan(x).dtype(), bool_);
    expect_close(values(isnan(x)), {1, 0, 0, 0, 0}, 0, "isnan " + dtype_name(d));
    expect_close(values(isinf(x)), {0, 1, 1, 0, 0}, 0, "isinf " + dtype_name(d));
    expect_close(values(isposinf(x)), {0, 1, 0, 0, 0}, 0, "isposinf " + dtype_name(d));
    expect_close(values(isneginf(x)), {0, 0, 1, 0, 0}, 0, "isneginf " + dtype_name(d));
    expect_close(values(isfinite(x)), {0, 0, 0, 1, 1}, 0, "isfinite " + dtype_name(d));
  }
  for (Dtype d : {bool_, uint8, int32, int64}) {
    auto x = make({1, 0}, d);
    expect_close(values(isnan(x)), {0, 0}, 0, "isnan int");
    expect_close(values(isinf(x)), {0, 0}, 0, "isinf int");
    expect_close(values(isfinite(x)), {1, 1}, 0, "isfinite int");
    EXPECT_EQ(isfinite(x).dtype(), bool_);
  }
  auto c = array({complex64_t(1, kInf), complex64_t(1, 2), complex64_t(kNan, 0)});
  expect_close(values(isinf(c)), {1, 0, 0}, 0, "isinf complex");
  expect_close(values(isnan(c)), {0, 0, 1}, 0, "isnan complex");
}

TEST(UnaryPredicates, NanToNumDefaultsAndExplicitValues) {
  auto x = make({kNan, kInf, -kInf, 2.0}, float32);
  auto got = values(nan_to_num(x));
  EXPECT_EQ(got[0], 0.0);
  EXPECT_EQ(got[1], std::numeric_limits<float>::max());
  EXPECT_EQ(got[2], -std::numeric_limits<float>::max());
  EXPECT_EQ(got[3], 2.0);
  expect_close(values(nan_to_num(x, 5.0f, 10.0f, -10.0f)), {5, 10, -10, 2}, 0, "explicit");
  auto h = values(nan_to_num(make({kInf}, float16)));
  EXPECT_EQ(h[0], 65504.0);
  auto i = make({1, 2}, int32);
  EXPECT_EQ(nan_to_num(i).dtype(), int32);
  expect_close(values(nan_to_num(i)), {1, 2}, 0, "int");
}

TEST(UnaryPredicates, ClipWithOneOrTwoBounds) {
  auto x = make({-5, -1, 0, 3, 9}, float32);
  expect_close(values(clip(x, array(-2.0f), array(4.0f))), {-2, -1, 0, 3, 4}, 0, "both");
  expect_close(values(clip(x, array(0.0f))), {0, 0, 0, 3, 9}, 0, "min only");
  expect_close(values(clip(x, std::nullopt, array(1.0f))), {-5, -1, 0, 1, 1}, 0, "max only");
  auto xi = make({-5, 5}, int32);
  auto ci = clip(xi, array(0, int32), array(3, int32));
  EXPECT_EQ(ci.dtype(), int32);
  expect_close(values(ci), {0, 3}, 0, "int");
  EXPECT_THROW(clip(x), std::invalid_argument);
}

TEST(UnaryComplex, AbsExpRealImagConjugate) {
  auto z = array({complex64_t(3, 4), complex64_t(0, 1), complex64_t(-1, 0)});
  auto a = abs(z);
  EXPECT_EQ(a.dtype(), float32);
  expect_close(values(a), {5, 1, 1}, 1e-6, "abs complex");
  auto e = cvalues(exp(z));
  for (size_t i = 0; i < 3; ++i) {
    auto want = std::exp(std::complex<double>(cvalues(z)[i]));
    EXPECT_NEAR(e[i].real(), want.real(), 1e-5);
    EXPECT_NEAR(e[i].imag(), want.imag(), 1e-5);
  }
  EXPECT_EQ(real(z).dtype(), float32);
  expect_close(values(real(z)), {3, 0, -1}, 0, "real");
  expect_close(values(imag(z)), {4, 1, 0}, 0, "imag");
  auto cj = cvalues(conjugate(z));
  EXPECT_EQ(cj[0], complex64_t(3, -4));
  // Real inputs: real is the identity, imag is zeros, conjugate the identity.
  auto r = make({1.5, 2}, float32);
  expect_close(values(imag(r)), {0, 0}, 0, "imag of real");
  expect_close(values(conjugate(r)), {1.5, 2}, 0, "conj of real");
  auto sq = cvalues(sqrt(array({complex64_t(-4, 0)})));
  EXPECT_NEAR(sq[0].imag(), 2.0f, 1e-6);
}

TEST(UnaryComplex, UnsupportedOpsNameTheOp) {
  auto z = array({complex64_t(1, 1)});
  for (auto [name, f] : std::vector<std::pair<std::string, std::function<array(const array&)>>>{
           {"expm1", [](const array& a) { return expm1(a); }},
           {"sigmoid", [](const array& a) { return sigmoid(a); }},
           {"erf", [](const array& a) { return erf(a); }},
           {"erfinv", [](const array& a) { return erfinv(a); }},
           {"floor", [](const array& a) { return floor(a); }},
           {"ceil", [](const array& a) { return ceil(a); }}}) {
    try {
      f(z);
      FAIL() << name;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("[" + name + "]"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("complex64"), std::string::npos) << e.what();
    }
  }
}

TEST(UnaryComplex, RoundRoundsEachPartHalfToEven) {
  const array r = round(array({complex64_t(2.5f, -1.5f), complex64_t(-0.4f, 3.6f)}));
  eval({r});
  ASSERT_EQ(r.dtype(), complex64);
  EXPECT_EQ(r.data<complex64_t>()[0], complex64_t(2.0f, -2.0f));
  EXPECT_EQ(r.data<complex64_t>()[1], complex64_t(-0.0f, 4.0f));
}

TEST(UnaryLayout, ZeroDimAndEmptyArrays) {
  auto s = exp(array(1.0f));
  EXPECT_EQ(s.ndim(), 0u);
  EXPECT_NEAR(s.item<float>(), std::exp(1.0f), 1e-6);
  EXPECT_EQ(abs(array(-3, int32)).item<int>(), 3);
  auto e = sin(zeros({0, 3}, float32));
  eval(e);
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  EXPECT_EQ(e.size(), 0u);
  auto en = negative(zeros({2, 0}, int64));
  eval(en);
  EXPECT_EQ(en.shape(), (Shape{2, 0}));
}

TEST(UnaryLayout, BroadcastAndTransposedViews) {
  // Broadcast view: every row reads the same buffer.
  auto row = make({0.5, 1.0, 2.0}, float32);
  auto b = broadcast_to(row, {4, 3});
  auto got = values(log(b));
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(got[r * 3 + c], std::log(values(row)[c]), 1e-6);
  // Transposed view (column-major dense) and a strided view of it.
  std::vector<double> v(12);
  for (int i = 0; i < 12; ++i) v[i] = i - 5.5;
  auto m = make(v, float32, {3, 4});
  auto t = transpose(m);
  auto tv = values(t);
  auto gt = values(square(t));
  for (size_t i = 0; i < tv.size(); ++i) EXPECT_EQ(gt[i], tv[i] * tv[i]);
  auto bt = broadcast_to(reshape(t, {1, 4, 3}), {2, 4, 3});
  auto btv = values(bt);
  auto gbt = values(abs(bt));
  for (size_t i = 0; i < btv.size(); ++i) EXPECT_EQ(gbt[i], std::abs(btv[i]));
}

TEST(UnaryLayout, LargeInputsSplitOverThreadsMatchSerialReference) {
  const int n = (1 << 18) + 7;
  auto x = arange(0.0, static_cast<double>(n), 1.0, float32);
  auto y = sin(multiply(x, array(1e-3f)));
  auto got = values(y);
  for (int i = 0; i < n; i += 997) {
    EXPECT_NEAR(got[i], std::sin(static_cast<float>(i) * 1e-3f), 2e-6) << i;
  }
  // The same through a transposed (non-contiguous) view.
  auto m = reshape(x, {n, 1});
  auto tm = transpose(broadcast_to(m, {n, 2}));
  auto g2 = values(negative(tm));
  EXPECT_EQ(g2[n - 1], -(n - 1.0));
  EXPECT_EQ(g2[n + 5], -5.0);
}

TEST(UnaryMemory, RepeatedExpReusesTheDonatedBuffer) {
  array x = ones({1 << 16}, float32);
  eval(x);
  x = exp(multiply(x, array(0.0f)));  // a uniquely held buffer
  eval(x);
  size_t before = get_active_memory();
  for (int i = 0; i < 20; ++i) {
    x = negative(x);
    eval(x);
  }
  EXPECT_LE(get_active_memory(), before + (1u << 16));
  EXPECT_EQ(values(x)[0], 1.0);
}

TEST(UnaryGrad, DerivativesMatchFiniteDifferences) {
  struct G {
    const char* name;
    std::function<array(const array&)> f;
    double x;
  };
  std::vector<G> cases = {
      {"exp", [](const array& a) { return exp(a); }, 0.7},
      {"log", [](const array& a) { return log(a); }, 1.7},
      {"log2", [](const array& a) { return log2(a); }, 1.7},
      {"log10", [](const array& a) { return log10(a); }, 1.7},
      {"log1p", [](const array& a) { return log1p(a); }, 0.4},
      {"sqrt", [](const array& a) { return sqrt(a); }, 2.3},
      {"rsqrt", [](const array& a) { return rsqrt(a); }, 2.3},
      {"sin", [](const array& a) { return sin(a); }, 0.9},
      {"cos", [](const array& a) { return cos(a); }, 0.9},
      {"tan", [](const array& a) { return tan(a); }, 0.4},
      {"arcsin", [](const array& a) { return arcsin(a); }, 0.3},
      {"arccos", [](const array& a) { return arccos(a); }, 0.3},
      {"arctan", [](const array& a) { return arctan(a); }, 0.3},
      {"sinh", [](const array& a) { return sinh(a); }, 0.3},
      {"cosh", [](const array& a) { return cosh(a); }, 0.3},
      {"tanh", [](const array& a) { return tanh(a); }, 0.3},
      {"arcsinh", [](const array& a) { return arcsinh(a); }, 0.3},
      {"arccosh", [](const array& a) { return arccosh(a); }, 1.3},
      {"arctanh", [](const array& a) { return arctanh(a); }, 0.3},
      {"sigmoid", [](const array& a) { return sigmoid(a); }, 0.3},
      {"erf", [](const array& a) { return erf(a); }, 0.3},
      {"erfinv", [](const array& a) { return erfinv(a); }, 0.3},
      {"expm1", [](const array& a) { return expm1(a); }, 0.3},
      {"square", [](const array& a) { return square(a); }, -1.3},
      {"abs", [](const array& a) { return abs(a); }, -1.3},
      {"negative", [](const array& a) { return negative(a); }, -1.3},
  };
  for (const auto& c : cases) {
    auto x = array(c.x, float64);
    const double h = 1e-6;
    double fd = (c.f(array(c.x + h, float64)).item<double>() -
                 c.f(array(c.x - h, float64)).item<double>()) /
                (2 * h);
    auto [out, g] = vjp(c.f, x, array(1.0, float64));
    EXPECT_NEAR(g.item<double>(), fd, 1e-6 * std::max(1.0, std::abs(fd))) << c.name << " vjp";
    auto [out2, t] = jvp(c.f, x, array(1.0, float64));
    EXPECT_NEAR(t.item<double>(), fd, 1e-6 * std::max(1.0, std::abs(fd))) << c.name << " jvp";
  }
  // Piecewise-constant ops and stop_gradient have zero derivatives.
  for (auto f : std::vector<std::function<array(const array&)>>{
           [](const array& a) { return floor(a); }, [](const array& a) { return ceil(a); },
           [](const array& a) { return round(a); }, [](const array& a) { return sign(a); },
           [](const array& a) { return multiply(stop_gradient(a), array(2.0f)); }}) {
    auto [o, g] = vjp(f, array(1.3f), array(1.0f));
    EXPECT_EQ(g.item<float>(), 0.0f);
  }
  // d/dx (x * stop_gradient(x)) treats the second factor as a constant.
  auto [o, g] = vjp([](const array& a) { return multiply(a, stop_gradient(a)); }, array(3.0f),
                    array(1.0f));
  EXPECT_EQ(g.item<float>(), 3.0f);
}

TEST(UnaryVmap, BatchesOverAnyAxis) {
  auto x = make({0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, float32, {2, 3});
  auto f = [](const array& a) { return exp(a); };
  auto y = vmap(f, 1, 0)(x);
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  auto got = values(y);
  auto in = values(x);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) EXPECT_NEAR(got[i * 2 + j], std::exp(in[j * 3 + i]), 1e-6);
}

TEST(UnaryFloat, Float32ExpLogTanhSigmoidAccurateOverTheWholeRange) {
  // A sweep of float bit patterns (both signs, subnormals to the largest finite values).
  std::vector<float> xs;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 40009) {
    uint32_t bits = static_cast<uint32_t>(b);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    if (!std::isnan(f)) xs.push_back(f);
  }
  const int n = static_cast<int>(xs.size());
  auto x = array(xs.data(), Shape{n}, float32);
  auto check = [&](const char* name, const array& y, double (*ref)(double), bool positive_only) {
    eval(y);
    const float* got = y.data<float>();
    int bad = 0;
    for (int i = 0; i < n; ++i) {
      if (positive_only && xs[i] < 0) continue;
      const float want = static_cast<float>(ref(static_cast<double>(xs[i])));
      if (std::isnan(want) || std::isinf(want) || want == 0.0f) {
        if (!(std::isnan(want) ? std::isnan(got[i]) : got[i] == want)) ++bad;
        continue;
      }
      // 4 ulp, or 2 subnormal steps near 0.
      const double slack = std::max(4.0 * std::abs(want) * 1.2e-7, 3e-45);
      if (std::abs(static_cast<double>(got[i]) - want) > slack) ++bad;
    }
    EXPECT_EQ(bad, 0) << name;
  };
  check("exp", exp(x), [](double v) { return std::exp(v); }, false);
  check("log", log(x), [](double v) { return std::log(v); }, true);
  check("tanh", tanh(x), [](double v) { return std::tanh(v); }, false);
  check("sigmoid", sigmoid(x), [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, false);
}

namespace {

// Distance in units in the last place between two non-NaN floats (sign-magnitude ordered).
int64_t ulp_distance(float a, float b) {
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
  };
  return std::abs(ordered(a) - ordered(b));
}

std::vector<uint32_t> bits_of(array a) {
  eval(a);
  std::vector<uint32_t> out(a.size());
  std::memcpy(out.data(), a.data<float>(), a.nbytes());
  return out;
}

array from_bits(const std::vector<uint32_t>& b) {
  std::vector<float> f(b.size());
  std::memcpy(f.data(), b.data(), b.size() * sizeof(float));
  return array(f.data(), Shape{static_cast<int>(f.size())}, float32);
}

}  // namespace

// The vectorised float32 sin, cos (reduction in double up to 2^20, libm beyond), expm1 and log1p
// against std:: in double rounded to float: within 1 ulp; NaN, infinities and signed zeros exact.
TEST(UnaryFloat, Float32SinCosExpm1Log1pWithinOneUlpOverTheWholeRange) {
  std::vector<float> xs;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 40009) {
    uint32_t bits = static_cast<uint32_t>(b);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    xs.push_back(f);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float f : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e-45f,
                  -1e-45f, 1e-38f, 1048576.0f, -1048576.0f, 1048576.125f, 3.14159265f,
                  1.57079633f, -1.0f, std::nextafter(-1.0f, 0.0f), -1.5f, 88.7f, 89.0f, -104.0f})
    xs.push_back(f);
  const int n = static_cast<int>(xs.size());
  auto x = array(xs.data(), Shape{n}, float32);
  auto check = [&](const char* name, const array& y, double (*ref)(double)) {
    eval(y);
    const float* got = y.data<float>();
    int bad = 0;
    for (int i = 0; i < n; ++i) {
      const float want = static_cast<float>(ref(static_cast<double>(xs[i])));
      bool ok;
      if (std::isnan(want)) {
        ok = std::isnan(got[i]);
      } else if (std::isinf(want) || want == 0.0f) {
        ok = got[i] == want && std::signbit(got[i]) == std::signbit(want);
      } else {
        ok = !std::isnan(got[i]) && ulp_distance(got[i], want) <= 1;
      }
      if (!ok && bad++ < 5) {
        ADD_FAILURE() << name << "(" << xs[i] << ") = " << got[i] << ", want " << want;
      }
    }
    EXPECT_EQ(bad, 0) << name;
  };
  check("sin", sin(x), [](double v) { return std::sin(v); });
  check("cos", cos(x), [](double v) { return std::cos(v); });
  check("expm1", expm1(x), [](double v) { return std::expm1(v); });
  check("log1p", log1p(x), [](double v) { return std::log1p(v); });
}

// Blocks mixing small and huge arguments (the huge ones go to libm), in every layout.
TEST(UnaryFloat, SinCosOfHugeArgumentsAmongSmallOnes) {
  std::vector<float> xs(3000);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i) * 0.37f - 500.0f;
  xs[10] = 3.0e38f;
  xs[1500] = -1.0e7f;
  xs[2999] = std::numeric_limits<float>::infinity();
  auto x = array(xs.data(), Shape{3000}, float32);
  for (int k = 0; k < 2; ++k) {
    auto y = k == 0 ? sin(x) : cos(x);
    // Transposed view: the strided path computes the same values.
    auto yt = k == 0 ? sin(transpose(reshape(x, {60, 50}))) : cos(transpose(reshape(x, {60, 50})));
    auto got = values(y);
    auto got_t = values(yt);
    for (size_t i = 0; i < xs.size(); ++i) {
      const double v = xs[i];
      const double want = k == 0 ? std::sin(v) : std::cos(v);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[i])) << i;
        continue;
      }
      EXPECT_NEAR(got[i], want, 1.2e-7) << (k == 0 ? "sin " : "cos ") << v;
      const size_t r = i / 50, c = i % 50;  // x[r, c] lands at yt[c, r]
      EXPECT_EQ(got_t[c * 60 + r], got[i]) << i;
    }
  }
}

// float32 erf, erfinv and log give MLX 0.32.4's CPU results bit for bit (values from
// mlx.core on Linux x86-64); erf keeps MLX's absolute error (up to about 4e-7).
TEST(UnaryFloat, Float32ErfErfinvLogBitIdenticalToMLX) {
  const float inf = std::numeric_limits<float>::infinity();
  auto erf_in = array({0.0f, -0.0f, 1e-3f, -0.25f, 0.5f, -1.5f, 2.0f, 3.9f, -10.0f, inf, -inf,
                       1e-30f});
  EXPECT_EQ(bits_of(erf(erf_in)),
            (std::vector<uint32_t>{0x80000000, 0x80000000, 0x3a93e72e, 0xbe8d7a9d, 0x3f053f7f,
                                   0xbf7752ad, 0x3f7ecd6f, 0x3f7fffff, 0xbf800000, 0x3f800000,
                                   0xbf800000, 0x00000000}));
  auto erfinv_in = array({0.0f, 0.5f, -0.9f, 0.999999f, -0.3f, 1e-20f, 0.9999999f, -0.99f});
  EXPECT_EQ(bits_of(erfinv(erfinv_in)),
            (std::vector<uint32_t>{0x00000000, 0x3ef430fe, 0xbf94e009, 0x405d40b7, 0xbe8b803d,
                                   0x1e27674d, 0x406f9c68, 0xbfe92331}));
  auto log_in = array({1e-40f, 1e-20f, 0.1f, 0.7f, 1.0f, 1.5f, 2.0f, 10.0f, 123456.7f, 3e38f});
  EXPECT_EQ(bits_of(log(log_in)),
            (std::vector<uint32_t>{0xc2b834f2, 0xc23834f1, 0xc0135d8e, 0xbeb69e1a, 0x00000000,
                                   0x3ecf991f, 0x3f317218, 0x40135d8e, 0x413b940e, 0x42b13196}));
  // 16-bit floats compute in float, then round: MLX's float16 results.
  std::vector<uint16_t> hb(8);
  auto hv = astype(erfinv(astype(erfinv_in, float16)), float16);
  eval(hv);
  std::memcpy(hb.data(), hv.data<float16_t>(), hb.size() * sizeof(uint16_t));
  EXPECT_EQ(hb, (std::vector<uint16_t>{0, 14242, 48295, 31744, 46172, 0, 31744, 48975}));
  // Float32 log is libm's logf everywhere (MLX on Linux calls it).
  std::vector<uint32_t> sweep;
  for (uint64_t b = 0; b < (uint64_t{1} << 31); b += 30011) sweep.push_back(static_cast<uint32_t>(b));
  auto lx = from_bits(sweep);
  auto lb = bits_of(log(lx));
  int bad = 0;
  for (size_t i = 0; i < sweep.size(); ++i) {
    float f, want;
    std::memcpy(&f, &sweep[i], sizeof f);
    want = std::log(f);
    uint32_t wb;
    std::memcpy(&wb, &want, sizeof wb);
    bad += lb[i] != wb;
  }
  EXPECT_EQ(bad, 0);
  // erf accuracy is MLX's formula's: absolute error within 5e-7 of erf in double over [-6, 6].
  std::vector<float> e(24001);
  for (size_t i = 0; i < e.size(); ++i) e[i] = -6.0f + static_cast<float>(i) * 5e-4f;
  auto eg = values(erf(array(e.data(), Shape{static_cast<int>(e.size())}, float32)));
  double worst = 0;
  for (size_t i = 0; i < e.size(); ++i) worst = std::max(worst, std::abs(eg[i] - std::erf(double(e[i]))));
  EXPECT_LT(worst, 5e-7);
}

// The most negative integer has no positive counterpart: negative/abs wrap to it (as NumPy),
// without undefined behaviour (the sanitizer build checks that).
TEST(UnaryIntegers, NegativeAndAbsOfMinimumWrap) {
  array a({std::numeric_limits<int64_t>::min(), int64_t{-5}, int64_t{7}}, int64);
  auto n = negative(a);
  auto m = abs(a);
  eval(n, m);
  EXPECT_EQ(n.data<int64_t>()[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(n.data<int64_t>()[1], 5);
  EXPECT_EQ(n.data<int64_t>()[2], -7);
  EXPECT_EQ(m.data<int64_t>()[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(m.data<int64_t>()[1], 5);
  array b({std::numeric_limits<int32_t>::min(), 3}, int32);
  auto nb = negative(b);
  eval(nb);
  EXPECT_EQ(nb.data<int32_t>()[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(nb.data<int32_t>()[1], -3);
}
