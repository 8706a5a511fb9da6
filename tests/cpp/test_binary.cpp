// Binary and ternary elementwise ops against naive reference loops: every dtype, type
// promotion (including C++ scalars on either side), broadcasting, 0-d, empty, non-contiguous
// inputs, NumPy's floor semantics for integer division, shifts, NaN handling, errors, vjp/jvp/vmap.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tessera/tessera.h"
#include "test_util.h"

using namespace tessera;

namespace {

using test_util::values;

const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

array make(const std::vector<double>& v, Dtype dtype, Shape shape = {}) {
  if (shape.empty() && v.size() != 1) shape = {static_cast<int>(v.size())};
  return array(v.begin(), shape, dtype);
}

double rounded(double v, Dtype d) { return make({v}, d).item<double>(); }

double tol(Dtype d) {
  if (d == float16) return 2e-3;
  if (d == bfloat16) return 1.6e-2;
  if (d == float64) return 1e-12;
  if (d == float32) return 2e-6;
  return 0;
}

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

// Wrap v into the range of an integer dtype (two's complement), as a C++ cast would.
double wrap(double v, Dtype d) {
  if (d == uint64 && v < 0) return v + std::pow(2.0, 64.0);
  if (!issubdtype(d, integer) || d == int64) return v;  // test values fit in int64
  const double mod = std::pow(2.0, 8.0 * size_of(d));
  double r = std::fmod(v, mod);
  if (r < 0) r += mod;
  if (issubdtype(d, signedinteger) && r >= mod / 2) r -= mod;
  return r;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no std::invalid_argument thrown)";
}

const std::vector<Dtype> kRealDtypes = {bool_, uint8, uint16, uint32, uint64, int8, int16,
                                        int32, int64, float16, float32, float64, bfloat16};

// Small inputs valid in every real dtype (non-negative for unsigned, 0/1 for bool).
std::pair<std::vector<double>, std::vector<double>> inputs_for(Dtype d) {
  if (d == bool_) return {{0, 1, 1, 0}, {0, 0, 1, 1}};
  if (issubdtype(d, unsignedinteger)) return {{7, 0, 12, 5}, {3, 4, 5, 9}};
  if (issubdtype(d, integer)) return {{7, -7, 12, -5}, {3, 3, -5, -9}};
  return {{7.5, -7.25, 12.0, -5.5}, {3.0, 2.5, -5.0, 9.0}};
}

}  // namespace

TEST(BinaryArith, AddSubtractMultiplyEveryDtype) {
  for (Dtype d : kRealDtypes) {
    auto [av, bv] = inputs_for(d);
    auto a = make(av, d), b = make(bv, d);
    std::vector<double> ws, wd, wm;
    for (size_t i = 0; i < av.size(); ++i) {
      double x = rounded(av[i], d), y = rounded(bv[i], d);
      if (d == bool_) {
        ws.push_back(x || y);
        wd.push_back(x != y);
        wm.push_back(x && y);
      } else {
        ws.push_back(wrap(x + y, d));
        wd.push_back(wrap(x - y, d));
        wm.push_back(wrap(x * y, d));
      }
    }
    EXPECT_EQ(add(a, b).dtype(), d);
    expect_close(values(a + b), ws, 2 * tol(d), "add " + dtype_name(d));
    expect_close(values(a - b), wd, 2 * tol(d), "subtract " + dtype_name(d));
    expect_close(values(a * b), wm, 2 * tol(d), "multiply " + dtype_name(d));
  }
  auto za = array({complex64_t(1, 2), complex64_t(-1, 0.5f)});
  auto zb = array({complex64_t(3, -1), complex64_t(2, 2)});
  auto zm = multiply(za, zb);
  eval(zm);
  EXPECT_EQ(zm.dtype(), complex64);
  EXPECT_EQ(zm.data<complex64_t>()[0], complex64_t(5, 5));
  auto zd = divide(za, zb);
  eval(zd);
  auto want = std::complex<float>(-1, 0.5f) / std::complex<float>(2, 2);
  EXPECT_NEAR(zd.data<complex64_t>()[1].real(), want.real(), 1e-6);
}

TEST(BinaryArith, DivideIsTrueDivisionAndIntegersGiveFloat32) {
  for (Dtype d : kRealDtypes) {
    auto [av, bv] = inputs_for(d);
    if (d == bool_) bv = {1, 1, 1, 1};
    auto q = divide(make(av, d), make(bv, d));
    Dtype want_dtype = is_floating_point(d) ? d : float32;
    EXPECT_EQ(q.dtype(), want_dtype) << dtype_name(d);
    std::vector<double> want;
    for (size_t i = 0; i < av.size(); ++i) want.push_back(rounded(av[i], d) / rounded(bv[i], d));
    expect_close(values(q), want, 2 * std::max(tol(want_dtype), 1e-7), "divide " + dtype_name(d));
  }
  auto z = values(divide(make({1.0, -1.0, 0.0}, float32), make({0.0, 0.0, 0.0}, float32)));
  EXPECT_EQ(z[0], kInf);
  EXPECT_EQ(z[1], -kInf);
  EXPECT_TRUE(std::isnan(z[2]));
}

TEST(BinaryArith, FloorDivideAndRemainderFollowNumpySigns) {
  for (Dtype d : {int8, int16, int32, int64, float16, float32, float64, bfloat16}) {
    const std::vector<double> av = {7, -7, 7, -7, 0, 5, -6};
    const std::vector<double> bv = {2, 2, -2, -2, 3, 5, 4};
    auto a = make(av, d), b = make(bv, d);
    auto fd = floor_divide(a, b), r = remainder(a, b);
    EXPECT_EQ(fd.dtype(), d);
    EXPECT_EQ(r.dtype(), d);
    std::vector<double> wq, wr;
    for (size_t i = 0; i < av.size(); ++i) {
      double q = std::floor(av[i] / bv[i]);
      wq.push_back(q);
      wr.push_back(av[i] - q * bv[i]);
    }
    expect_close(values(fd), wq, 0, "floor_divide " + dtype_name(d));
    expect_close(values(r), wr, 0, "remainder " + dtype_name(d));
    expect_close(values(a % b), wr, 0, "operator% " + dtype_name(d));
    auto dm = divmod(a, b);
    ASSERT_EQ(dm.size(), 2u);
    expect_close(values(dm[0]), wq, 0, "divmod q " + dtype_name(d));
    expect_close(values(dm[1]), wr, 0, "divmod r " + dtype_name(d));
  }
  for (Dtype d : {uint8, uint16, uint32, uint64}) {
    auto a = make({7, 9, 200}, d), b = make({2, 3, 7}, d);
    expect_close(values(floor_divide(a, b)), {3, 3, 28}, 0, "floor_divide " + dtype_name(d));
    expect_close(values(remainder(a, b)), {1, 0, 4}, 0, "remainder " + dtype_name(d));
  }
}

TEST(BinaryArith, IntegerDivisionByZeroAndOverflowDoNotTrap) {
  auto a = make({5, -5, -128}, int8), b = make({0, 0, -1}, int8);
  expect_close(values(floor_divide(a, b)), {0, 0, -128}, 0, "x // 0 and MIN // -1");
  expect_close(values(remainder(a, b)), {0, 0, 0}, 0, "x % 0");
  auto big = make({static_cast<double>(std::numeric_limits<int64_t>::min())}, int64);
  auto q = floor_divide(big, make({-1}, int64));
  eval(q);
  EXPECT_EQ(q.data<int64_t>()[0], std::numeric_limits<int64_t>::min());
}

TEST(BinaryArith, FloatRemainderOfSpecialValues) {
  auto r = values(remainder(make({5.5, -5.5, 1.0, kInf}, float32), make({2, 2, 0, 2}, float32)));
  EXPECT_FLOAT_EQ(r[0], 1.5);
  EXPECT_FLOAT_EQ(r[1], 0.5);
  EXPECT_TRUE(std::isnan(r[2]));
  EXPECT_TRUE(std::isnan(r[3]));
}

TEST(BinaryArith, PowerIntegersAndFloats) {
  auto pi = power(make({2, -3, 5, 1, -1, 2}, int32), make({10, 3, 0, -4, -3, -1}, int32));
  EXPECT_EQ(pi.dtype(), int32);
  expect_close(values(pi), {1024, -27, 1, 1, -1, 0}, 0, "int power");
  expect_close(values(power(make({3}, uint8), make({5}, uint8))), {243}, 0, "uint8");
  for (Dtype d : {float16, float32, float64, bfloat16}) {
    auto p = power(make({2.0, 9.0, 0.5, 0.0}, d), make({0.5, 0.5, -2.0, 0.0}, d));
    expect_close(values(p), {std::sqrt(2.0), 3.0, 4.0, 1.0}, 2 * tol(d), dtype_name(d));
  }
  // Mixed: int array with float exponent promotes to float32.
  auto m = power(make({4}, int32), array(0.5f));
  EXPECT_EQ(m.dtype(), float32);
  EXPECT_FLOAT_EQ(m.item<float>(), 2.0f);
}

TEST(BinaryArith, MaximumMinimumPropagateNan) {
  for (Dtype d : {float16, float32, float64, bfloat16}) {
    auto a = make({1.0, kNan, 3.0, kNan, -kInf}, d);
    auto b = make({2.0, 1.0, kNan, kNan, 0.0}, d);
    expect_close(values(maximum(a, b)), {2, kNan, kNan, kNan, 0}, 0, "max " + dtype_name(d));
    expect_close(values(minimum(a, b)), {1, kNan, kNan, kNan, -kInf}, 0, "min " + dtype_name(d));
  }
  for (Dtype d : {bool_, uint8, uint64, int8, int32, int64}) {
    auto [av, bv] = inputs_for(d);
    std::vector<double> wmax, wmin;
    for (size_t i = 0; i < av.size(); ++i) {
      wmax.push_back(std::max(av[i], bv[i]));
      wmin.push_back(std::min(av[i], bv[i]));
    }
    expect_close(values(maximum(make(av, d), make(bv, d))), wmax, 0, "max " + dtype_name(d));
    expect_close(values(minimum(make(av, d), make(bv, d))), wmin, 0, "min " + dtype_name(d));
  }
}

TEST(BinaryArith, Arctan2AndLogaddexp) {
  const std::vector<double> y = {1.0, -1.0, 0.0, 2.0, -3.0};
  const std::vector<double> x = {1.0, -2.0, -1.0, 0.0, 0.5};
  for (Dtype d : {float16, float32, float64, bfloat16}) {
    std::vector<double> wa, wl;
    for (size_t i = 0; i < y.size(); ++i) {
      double a = rounded(y[i], d), b = rounded(x[i], d);
      wa.push_back(std::atan2(a, b));
      wl.push_back(std::log(std::exp(a) + std::exp(b)));
    }
    expect_close(values(arctan2(make(y, d), make(x, d))), wa, 2 * tol(d), dtype_name(d));
    expect_close(values(logaddexp(make(y, d), make(x, d))), wl, 2 * tol(d), dtype_name(d));
  }
  auto l = values(logaddexp(make({-kInf, 1000.0, kNan}, float32), make({-kInf, 1000.0, 0.0}, float32)));
  EXPECT_EQ(l[0], -kInf);
  EXPECT_NEAR(l[1], 1000.0 + std::log(2.0), 1e-3);
  EXPECT_TRUE(std::isnan(l[2]));
  // An infinite larger argument is the answer (not inf - inf = nan).
  auto li = values(logaddexp(make({kInf, -kInf, kInf}, float32), make({kInf, kInf, 2.0}, float32)));
  EXPECT_EQ(li, (std::vector<double>{kInf, kInf, kInf}));
  // Complex: log(e^x + e^y) of complex numbers, against std::complex.
  const complex64_t zx{0.3f, 1.2f}, zy{-0.4f, 0.5f};
  const complex64_t want = std::log(std::exp(zx) + std::exp(zy));
  auto lc = logaddexp(array(zx), array(zy)).item<complex64_t>();
  EXPECT_NEAR(lc.real(), want.real(), 1e-5);
  EXPECT_NEAR(lc.imag(), want.imag(), 1e-5);
  const float ninf = -std::numeric_limits<float>::infinity();
  auto lm = logaddexp(array(complex64_t{1, 1}), array(complex64_t{ninf, ninf})).item<complex64_t>();
  EXPECT_EQ(lm, (complex64_t{1, 1}));
  EXPECT_EQ(arctan2(make({1}, int32), make({1}, int32)).dtype(), float32);
}

TEST(BinaryCompare, ComparisonsEveryDtypeGiveBool) {
  for (Dtype d : kRealDtypes) {
    auto [av, bv] = inputs_for(d);
    av[1] = bv[1];  // one equal pair
    auto a = make(av, d), b = make(bv, d);
    std::vector<double> weq, wne, wlt, wle, wgt, wge;
    for (size_t i = 0; i < av.size(); ++i) {
      double x = rounded(av[i], d), y = rounded(bv[i], d);
      weq.push_back(x == y);
      wne.push_back(x != y);
      wlt.push_back(x < y);
      wle.push_back(x <= y);
      wgt.push_back(x > y);
      wge.push_back(x >= y);
    }
    EXPECT_EQ((a == b).dtype(), bool_);
    expect_close(values(a == b), weq, 0, "== " + dtype_name(d));
    expect_close(values(a != b), wne, 0, "!= " + dtype_name(d));
    expect_close(values(a < b), wlt, 0, "< " + dtype_name(d));
    expect_close(values(a <= b), wle, 0, "<= " + dtype_name(d));
    expect_close(values(a > b), wgt, 0, "> " + dtype_name(d));
    expect_close(values(a >= b), wge, 0, ">= " + dtype_name(d));
  }
  auto n = make({kNan, 1.0}, float32);
  expect_close(values(n == n), {0, 1}, 0, "nan == nan");
  expect_close(values(n != n), {1, 0}, 0, "nan != nan");
  expect_close(values(n < n), {0, 0}, 0, "nan < nan");
  auto z = array({complex64_t(1, 2), complex64_t(1, 3)});
  expect_close(values(equal(z, array(complex64_t(1, 2)))), {1, 0}, 0, "complex ==");
}

TEST(BinaryCompare, MixedDtypesComparePromoted) {
  // int8 -1 vs uint8 255: promoted to int16, so -1 < 255.
  expect_close(values(less(make({-1}, int8), make({255}, uint8))), {1}, 0, "int8 < uint8");
  expect_close(values(equal(make({0.5}, float32), make({0}, int32))), {0}, 0, "float vs int");
  expect_close(values(greater(make({1}, bool_), make({0.5}, float16))), {1}, 0, "bool vs half");
}

TEST(BinaryLogic, LogicalAndOrXorCastToBool) {
  auto a = make({0, 1, 2, 0}, int32), b = make({0.0, 0.0, 0.5, 3.0}, float32);
  EXPECT_EQ(logical_and(a, b).dtype(), bool_);
  expect_close(values(logical_and(a, b)), {0, 0, 1, 0}, 0, "and");
  expect_close(values(logical_or(a, b)), {0, 1, 1, 1}, 0, "or");
  expect_close(values(logical_xor(a, b)), {0, 1, 0, 1}, 0, "xor");
  expect_close(values(a && b), {0, 0, 1, 0}, 0, "&&");
  expect_close(values(a || b), {0, 1, 1, 1}, 0, "||");
}

TEST(BinaryBitwise, AndOrXorEveryIntegerDtype) {
  for (Dtype d : {bool_, uint8, uint16, uint32, uint64, int8, int16, int32, int64}) {
    std::vector<double> av = {12, 10, 0, 7}, bv = {10, 6, 5, 7};
    if (d == bool_) av = {1, 1, 0, 0}, bv = {1, 0, 1, 0};
    auto a = make(av, d), b = make(bv, d);
    std::vector<double> wa, wo, wx;
    for (size_t i = 0; i < av.size(); ++i) {
      auto x = static_cast<int64_t>(av[i]), y = static_cast<int64_t>(bv[i]);
      wa.push_back(static_cast<double>(x & y));
      wo.push_back(static_cast<double>(x | y));
      wx.push_back(static_cast<double>(x ^ y));
    }
    EXPECT_EQ((a & b).dtype(), d);
    expect_close(values(a & b), wa, 0, "& " + dtype_name(d));
    expect_close(values(a | b), wo, 0, "| " + dtype_name(d));
    expect_close(values(a ^ b), wx, 0, "^ " + dtype_name(d));
  }
  auto n = make({-1, -8}, int16);
  expect_close(values(bitwise_and(n, make({0xff, 0x0f}, int16))), {255, 8}, 0, "negative &");
}

TEST(BinaryBitwise, ShiftsIncludingOversizedAndNegativeAmounts) {
  auto l = left_shift(make({1, 3, 1, 5, 1}, int32), make({4, 2, 31, 32, -1}, int32));
  EXPECT_EQ(l.dtype(), int32);
  expect_close(values(l), {16, 12, static_cast<double>(std::numeric_limits<int32_t>::min()), 0, 0},
               0, "<<");
  auto r = right_shift(make({256, -16, -1, 7, -7}, int32), make({4, 2, 40, 40, -1}, int32));
  expect_close(values(r), {16, -4, -1, 0, -1}, 0, ">>");
  expect_close(values(make({0x81}, uint8) << make({1}, uint8)), {2}, 0, "uint8 << wraps");
  expect_close(values(make({0x80}, uint8) >> make({7}, uint8)), {1}, 0, "uint8 >>");
  // Bool shifts are done in uint8.
  auto b = left_shift(make({1}, bool_), make({1}, bool_));
  EXPECT_EQ(b.dtype(), uint8);
  EXPECT_EQ(b.item<int>(), 2);
  EXPECT_EQ((make({1}, int64) << 40).item<int64_t>(), int64_t{1} << 40);
}

TEST(BinaryBitwise, FloatInputsAreAnErrorNamingOpAndDtypes) {
  auto msg = message_of([] { bitwise_and(make({1}, float32), make({1}, int32)); });
  EXPECT_NE(msg.find("[bitwise_and]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("int32"), std::string::npos) << msg;
  EXPECT_THROW(left_shift(make({1.0}, float16), make({1}, int8)), std::invalid_argument);
  EXPECT_THROW(bitwise_xor(make({1.0}, float64), make({1.0}, float64)), std::invalid_argument);
}

TEST(BinaryPromotion, ArrayArrayPromotesAsMlx) {
  EXPECT_EQ(add(make({1}, int32), make({1}, float32)).dtype(), float32);
  EXPECT_EQ(add(make({1}, int8), make({1}, uint8)).dtype(), int16);
  EXPECT_EQ(add(make({1}, uint32), make({1}, int32)).dtype(), int64);
  EXPECT_EQ(add(make({1}, float16), make({1}, bfloat16)).dtype(), float32);
  EXPECT_EQ(add(make({1}, bool_), make({1}, int8)).dtype(), int8);
  EXPECT_EQ(multiply(make({1}, float32), make({1}, float64)).dtype(), float64);
  EXPECT_EQ(add(make({1}, float32), array({complex64_t(1, 1)})).dtype(), complex64);
  auto v = add(make({100}, int8), make({100}, uint8));
  EXPECT_EQ(v.item<int>(), 200);  // no int8 overflow after promotion to int16
}

// As MLX's C++ API: a scalar is an array of its own C++ type (double -> float32, int -> int32),
// promoted with the other operand as two arrays are.
TEST(BinaryPromotion, CppScalarsAreArraysOfTheirOwnType) {
  auto f32 = make({1.5, 2.0}, float32);
  EXPECT_EQ((f32 * 2.0).dtype(), float32);
  EXPECT_EQ((2.0 * f32).dtype(), float32);
  EXPECT_EQ((f32 + 1).dtype(), float32);
  auto f16 = make({1.5}, float16);
  EXPECT_EQ((f16 * 2.0).dtype(), float32);
  EXPECT_EQ((f16 * 2.0f).dtype(), float32);
  EXPECT_EQ((f16 + 3).dtype(), float16);
  EXPECT_EQ((f16 / 2).dtype(), float32);
  EXPECT_EQ((f16 * float16_t(2.0f)).dtype(), float16);
  auto i8 = make({100, -3}, int8);
  EXPECT_EQ((i8 + 1).dtype(), int32);
  EXPECT_EQ((i8 + int8_t(1)).dtype(), int8);
  // The scalar keeps its value: it is not cast to int8 (or uint8) before comparing.
  EXPECT_EQ(values(i8 < 300), (std::vector<double>{1, 1}));
  EXPECT_EQ((make({1}, int32) + int64_t(1)).dtype(), int64);
  EXPECT_EQ((make({1}, uint32) + 1).dtype(), int64);
  EXPECT_EQ((i8 * 0.5).dtype(), float32);
  EXPECT_EQ((i8 / 2).dtype(), float32);
  auto u8 = make({3}, uint8);
  EXPECT_EQ((u8 - 1).dtype(), int32);
  EXPECT_EQ(values(u8 > -1), (std::vector<double>{1}));
  auto b = make({1, 0}, bool_);
  EXPECT_EQ((b + 1).dtype(), int32);
  EXPECT_EQ((b + true).dtype(), bool_);
  EXPECT_EQ((b * 1.5).dtype(), float32);
  EXPECT_EQ((i8 + complex64_t(1, 0)).dtype(), complex64);
  EXPECT_EQ((f32 > 1).dtype(), bool_);
  EXPECT_EQ((f32 == 2.0).dtype(), bool_);
  EXPECT_EQ((make({1}, int64) * 3).dtype(), int64);
  expect_close(values(10.0 - f32), {8.5, 8.0}, 0, "scalar - array");
  expect_close(values(f32 / 2), {0.75, 1.0}, 0, "array / scalar");
  expect_close(values(3.0 / f32), {2.0, 1.5}, 0, "scalar / array");
  expect_close(values(i8 % 7), {2, 4}, 0, "array % scalar");
  expect_close(values(i8 < 0), {0, 1}, 0, "array < scalar");
  expect_close(values(0 >= i8), {0, 1}, 0, "scalar >= array");
  expect_close(values(make({6}, int32) & 3), {2}, 0, "array & scalar");
  expect_close(values(1 << make({3}, int32)), {8}, 0, "scalar << array");
}

TEST(BinaryBroadcast, ShapesBroadcastAndMismatchesNameTheOpAndShapes) {
  auto a = make({1, 2, 3}, float32, {3, 1});
  auto b = make({10, 20, 30, 40}, float32);
  auto c = add(a, b);
  EXPECT_EQ(c.shape(), (Shape{3, 4}));
  auto got = values(c);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(got[i * 4 + j], (i + 1) + 10.0 * (j + 1));
  auto d = subtract(b, a);
  auto gd = values(d);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(gd[i * 4 + j], 10.0 * (j + 1) - (i + 1));
  // 0-d with n-d, and (2,1,3) with (4,1).
  expect_close(values(multiply(array(2.0f), b)), {20, 40, 60, 80}, 0, "0-d * (4)");
  auto e = add(zeros({2, 1, 3}, int32), ones({4, 1}, int32));
  EXPECT_EQ(e.shape(), (Shape{2, 4, 3}));
  expect_close(values(e), std::vector<double>(24, 1.0), 0, "(2,1,3)+(4,1)");
  auto msg = message_of([] { add(zeros({2, 3}), zeros({4})); });
  EXPECT_NE(msg.find("[add]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(2,3)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(4)"), std::string::npos) << msg;
  auto msg2 = message_of([] { less(zeros({3}), zeros({2})); });
  EXPECT_NE(msg2.find("[less]"), std::string::npos) << msg2;
}

TEST(BinaryLayout, ZeroDimEmptyAndNonContiguousInputs) {
  auto s = add(array(2, int32), array(3, int32));
  EXPECT_EQ(s.ndim(), 0u);
  EXPECT_EQ(s.item<int>(), 5);
  auto e = multiply(zeros({0, 4}), ones({4}));
  eval(e);
  EXPECT_EQ(e.shape(), (Shape{0, 4}));
  auto e2 = add(zeros({3, 0}), array(1.0f));
  eval(e2);
  EXPECT_EQ(e2.shape(), (Shape{3, 0}));
  // Transposed with row-major, transposed with transposed, transposed with broadcast.
  std::vector<double> v(12);
  for (int i = 0; i < 12; ++i) v[i] = i * 1.5 - 4;
  auto m = make(v, float32, {3, 4});
  auto t = transpose(m);                  // (4,3), column-major
  auto r = make(v, float32, {4, 3});      // row-major
  auto tv = values(t), rv = values(r);
  auto g1 = values(subtract(t, r));
  auto g2 = values(multiply(t, t));
  auto g3 = values(add(t, make({1, 2, 3}, float32)));
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(g1[i], tv[i] - rv[i]);
    EXPECT_EQ(g2[i], tv[i] * tv[i]);
    EXPECT_EQ(g3[i], tv[i] + (i % 3 + 1));
  }
  // A large transposed pair takes the parallel strided path.
  const int n = 600;
  auto big = reshape(arange(0.0, n * n * 1.0, 1.0, float32), {n, n});
  auto bt = transpose(big);
  auto diff = values(subtract(bt, big));
  for (int i = 0; i < n; i += 37)
    for (int j = 0; j < n; j += 41) EXPECT_EQ(diff[i * n + j], (j * n + i) - (i * n + j) * 1.0);
}

TEST(BinaryLayout, LargeContiguousAndScalarFastPaths) {
  const int n = (1 << 18) + 3;
  auto x = arange(0.0, static_cast<double>(n), 1.0, float32);
  auto y = arange(0.0, static_cast<double>(n), 1.0, float32);
  auto gs = values(add(x, y));
  auto ga = values(x * 2.0f);
  auto gb = values(1.0f - x);
  auto gc = values(x > 100000.0f);
  for (int i = 0; i < n; i += 1231) {
    EXPECT_EQ(gs[i], 2.0 * i);
    EXPECT_EQ(ga[i], 2.0 * i);
    EXPECT_EQ(gb[i], 1.0 - i);
    EXPECT_EQ(gc[i], i > 100000 ? 1.0 : 0.0);
  }
}

TEST(Where, SelectsBroadcastsAndPromotes) {
  auto c = make({1, 0, 1}, bool_);
  auto w = where(c, make({1, 2, 3}, int32), make({10, 20, 30}, float32));
  EXPECT_EQ(w.dtype(), float32);
  expect_close(values(w), {1, 20, 3}, 0, "where");
  // Condition of another dtype, scalar branches, broadcasting (3,1) against (4).
  auto cc = make({0, 2, -1}, int32, {3, 1});
  auto w2 = where(cc, make({1, 2, 3, 4}, int8), array(int8_t(-1)));
  EXPECT_EQ(w2.shape(), (Shape{3, 4}));
  EXPECT_EQ(w2.dtype(), int8);
  expect_close(values(w2), {-1, -1, -1, -1, 1, 2, 3, 4, 1, 2, 3, 4}, 0, "broadcast where");
  for (Dtype d : kRealDtypes) {
    auto x = make({1, 0}, d), y = make({0, 1}, d);
    expect_close(values(where(make({1, 0}, bool_), x, y)), {1, 1}, 0, "where " + dtype_name(d));
  }
  auto msg = message_of([] { where(zeros({2}), zeros({3}), zeros({3})); });
  EXPECT_NE(msg.find("[where]"), std::string::npos) << msg;
  auto nc = where(transpose(make({1, 0, 0, 1}, bool_, {2, 2})), make({1, 2, 3, 4}, float32, {2, 2}),
                  array(0.0f));
  expect_close(values(nc), {1, 0, 0, 4}, 0, "transposed condition");
}

TEST(Isclose, TolerancesInfinitiesAndNan) {
  auto a = make({1.0, 1.0, kInf, kInf, kNan, 1e10}, float32);
  auto b = make({1.0 + 1e-6, 1.1, kInf, -kInf, kNan, 1.000001e10}, float32);
  expect_close(values(isclose(a, b)), {1, 0, 1, 0, 0, 1}, 0, "isclose");
  expect_close(values(isclose(a, b, 1e-5, 1e-8, true)), {1, 0, 1, 0, 1, 1}, 0, "equal_nan");
  expect_close(values(isclose(make({1, 2}, int32), make({1, 3}, int32))), {1, 0}, 0, "ints");
  EXPECT_TRUE(allclose(make({1.0, 2.0}, float32), make({1.0, 2.0 + 1e-7}, float32)).item<bool>());
  EXPECT_FALSE(allclose(make({1.0, 2.0}, float32), make({1.0, 2.1}, float32)).item<bool>());
  EXPECT_TRUE(allclose(make({1.0, 2.1}, float32), make({1.0, 2.0}, float32), 0.1).item<bool>());
}

TEST(ArrayEqual, ShapesDtypesAndNan) {
  EXPECT_TRUE(array_equal(make({1, 2}, int32), make({1, 2}, float32)).item<bool>());
  EXPECT_FALSE(array_equal(make({1, 2}, int32), make({1, 3}, int32)).item<bool>());
  EXPECT_FALSE(array_equal(make({1, 2}, int32), make({1, 2, 3}, int32)).item<bool>());
  auto n = make({kNan, 1.0}, float32);
  EXPECT_FALSE(array_equal(n, n).item<bool>());
  EXPECT_TRUE(array_equal(n, n, true).item<bool>());
}

TEST(BinaryGrad, VjpAndJvpMatchFiniteDifferences) {
  using F2 = std::function<array(const array&, const array&)>;
  struct G {
    const char* name;
    F2 f;
    double a, b;
  };
  std::vector<G> cases = {
      {"add", [](const array& a, const array& b) { return add(a, b); }, 1.3, -0.7},
      {"subtract", [](const array& a, const array& b) { return subtract(a, b); }, 1.3, -0.7},
      {"multiply", [](const array& a, const array& b) { return multiply(a, b); }, 1.3, -0.7},
      {"divide", [](const array& a, const array& b) { return divide(a, b); }, 1.3, -0.7},
      {"remainder", [](const array& a, const array& b) { return remainder(a, b); }, 5.3, 1.7},
      {"power", [](const array& a, const array& b) { return power(a, b); }, 1.3, 2.2},
      {"maximum", [](const array& a, const array& b) { return maximum(a, b); }, 1.3, -0.7},
      {"minimum", [](const array& a, const array& b) { return minimum(a, b); }, 1.3, -0.7},
      {"arctan2", [](const array& a, const array& b) { return arctan2(a, b); }, 1.3, -0.7},
      {"logaddexp", [](const array& a, const array& b) { return logaddexp(a, b); }, 1.3, -0.7},
  };
  for (const auto& c : cases) {
    const double h = 1e-6;
    auto ev = [&](double a, double b) {
      return c.f(array(a, float64), array(b, float64)).item<double>();
    };
    double da = (ev(c.a + h, c.b) - ev(c.a - h, c.b)) / (2 * h);
    double db = (ev(c.a, c.b + h) - ev(c.a, c.b - h)) / (2 * h);
    VecFn vf = [&](const std::vector<array>& in) { return std::vector<array>{c.f(in[0], in[1])}; };
    std::vector<array> primals{array(c.a, float64), array(c.b, float64)};
    auto [outs, grads] = vjp(vf, primals, {array(1.0, float64)});
    EXPECT_NEAR(grads[0].item<double>(), da, 1e-6 * std::max(1.0, std::abs(da))) << c.name;
    EXPECT_NEAR(grads[1].item<double>(), db, 1e-6 * std::max(1.0, std::abs(db))) << c.name;
    auto [o2, tans] = jvp(vf, primals, {array(1.0, float64), array(2.0, float64)});
    EXPECT_NEAR(tans[0].item<double>(), da + 2 * db, 1e-5 * std::max(1.0, std::abs(da + 2 * db)))
        << c.name;
  }
}

TEST(BinaryGrad, BroadcastInputGetsSummedCotangentAndWhereSplitsIt) {
  VecFn f = [](const std::vector<array>& in) {
    return std::vector<array>{multiply(in[0], in[1])};
  };
  auto a = make({1, 2, 3}, float32, {3, 1});
  auto b = make({10, 20}, float32);
  auto [outs, grads] = vjp(f, {a, b}, {ones({3, 2})});
  EXPECT_EQ(grads[0].shape(), (Shape{3, 1}));
  EXPECT_EQ(grads[1].shape(), (Shape{2}));
  expect_close(values(grads[0]), {30, 30, 30}, 0, "d/da");
  expect_close(values(grads[1]), {6, 6}, 0, "d/db");
  VecFn w = [](const std::vector<array>& in) {
    return std::vector<array>{where(in[0], in[1], in[2])};
  };
  auto cond = make({1, 0, 1}, bool_);
  auto [o2, g2] = vjp(w, {cond, make({1, 2, 3}, float32), make({4, 5, 6}, float32)},
                      {make({7, 8, 9}, float32)});
  expect_close(values(g2[1]), {7, 0, 9}, 0, "d/dx");
  expect_close(values(g2[2]), {0, 8, 0}, 0, "d/dy");
  // Comparisons have zero gradient.
  VecFn cmp = [](const std::vector<array>& in) {
    return std::vector<array>{multiply(astype(less(in[0], in[1]), float32), in[0])};
  };
  auto [o3, g3] = vjp(cmp, {make({1, 5}, float32), make({2, 2}, float32)}, {ones({2})});
  expect_close(values(g3[1]), {0, 0}, 0, "d/db of less");
}

TEST(BinaryVmap, BatchAxesAlignAndUnbatchedInputsBroadcast) {
  auto x = make({1, 2, 3, 4, 5, 6}, float32, {2, 3});  // batch along axis 1 (size 3)
  auto y = make({10, 20, 30}, float32);                // batch along axis 0
  auto f = [](const array& a, const array& b) { return add(a, b); };
  auto out = vmap(f, 1, 0, 0)(x, y);
  EXPECT_EQ(out.shape(), (Shape{3, 2}));
  auto got = values(out);
  auto xv = values(x);
  for (int bi = 0; bi < 3; ++bi)
    for (int j = 0; j < 2; ++j) EXPECT_EQ(got[bi * 2 + j], xv[j * 3 + bi] + 10.0 * (bi + 1));
  VecFn g = [](const std::vector<array>& in) {
    return std::vector<array>{where(greater(in[0], in[1]), in[0], in[1])};
  };
  auto outs = vmap(g, {0, -1})({make({1, 5, 3, 2}, float32, {2, 2}), make({2, 2}, float32)});
  expect_close(values(outs[0]), {2, 5, 3, 2}, 0, "vmap where with an unbatched input");
}
