// Creation extras: linspace, eye/identity, tri, tril/triu, view (bit reinterpretation),
// as_strided, contiguous — values against closed forms and naive loops, views share buffers.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <numeric>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

template <typename T>
std::vector<T> vals(array a) {
  eval(a);
  std::vector<T> out;
  if (a.size() == 0) return out;
  const T* base = a.data<T>();
  std::vector<int> idx(a.ndim(), 0);
  for (size_t k = 0; k < a.size(); ++k) {
    int64_t off = 0;
    for (size_t d = 0; d < a.ndim(); ++d) off += idx[d] * a.strides()[d];
    out.push_back(base[off]);
    for (int d = static_cast<int>(a.ndim()) - 1; d >= 0; --d) {
      if (++idx[d] < a.shape()[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

array iota_f(const Shape& shape) {
  size_t n = 1;
  for (int d : shape) n *= d;
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 1.0f);
  return array(v.begin(), shape);
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no invalid_argument thrown>";
}

}  // namespace

TEST(Linspace, EndpointsAndSpacing) {
  auto a = linspace(0.0, 1.0, 5);
  EXPECT_EQ(a.dtype(), float32);
  EXPECT_EQ(vals<float>(a), (std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f, 1.0f}));
  EXPECT_EQ(linspace(0.0, 1.0).size(), 50u);
  auto d = linspace(-1.0, 2.0, 7, float64);
  auto dv = vals<double>(d);
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(dv[i], -1.0 + 0.5 * i, 1e-15);
  EXPECT_EQ(vals<float>(linspace(3.0, 9.0, 1)), (std::vector<float>{3.0f}));
  EXPECT_EQ(linspace(0.0, 1.0, 0).size(), 0u);
  EXPECT_EQ(vals<int>(linspace(0.0, 10.0, 4, int32)), (std::vector<int>{0, 3, 6, 10}));
  auto r = linspace(5.0, 1.0, 3, float16);
  EXPECT_EQ(vals<float16_t>(r)[1], float16_t(3.0f));
  auto m = error_of([] { linspace(0.0, 1.0, -3); });
  EXPECT_NE(m.find("[linspace]"), std::string::npos) << m;
  EXPECT_NE(m.find("-3"), std::string::npos) << m;
}

TEST(Eye, DiagonalsAndOverloads) {
  auto e = eye(3, 4, 1, int32);
  std::vector<int> expect(12, 0);
  for (int i = 0; i < 3; ++i)
    if (i + 1 < 4) expect[i * 4 + i + 1] = 1;
  EXPECT_EQ(vals<int>(e), expect);
  auto neg = eye(3, 3, -2);
  EXPECT_EQ(vals<float>(neg), (std::vector<float>{0, 0, 0, 0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(vals<float>(eye(2)), (std::vector<float>{1, 0, 0, 1}));
  EXPECT_EQ(vals<float>(eye(2, 3)), (std::vector<float>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(vals<float>(eye(2, 2, 5)), (std::vector<float>(4, 0.0f)));
  EXPECT_EQ(eye(0).shape(), (Shape{0, 0}));
  EXPECT_EQ(vals<double>(identity(2, float64)), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(identity(3).dtype(), float32);
  auto b = eye(2, bool_);
  EXPECT_EQ(vals<bool>(b), (std::vector<bool>{true, false, false, true}));
  auto c = vals<complex64_t>(eye(2, complex64));
  EXPECT_EQ(c[0], complex64_t(1, 0));
  EXPECT_EQ(c[1], complex64_t(0, 0));
  auto m = error_of([] { eye(-1, 2); });
  EXPECT_NE(m.find("[eye]"), std::string::npos) << m;
  EXPECT_NE(m.find("n=-1"), std::string::npos) << m;
}

TEST(Tri, OnesOnAndBelowDiagonalK) {
  for (int k : {-2, -1, 0, 1, 3}) {
    auto t = tri(3, 4, k, int32);
    auto v = vals<int>(t);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) EXPECT_EQ(v[i * 4 + j], j <= i + k ? 1 : 0) << k;
  }
  EXPECT_EQ(vals<float>(tri(2, float32)), (std::vector<float>{1, 0, 1, 1}));
  EXPECT_THROW(tri(2, -1, 0, float32), std::invalid_argument);
}

TEST(Tril, AndTriuMatchNaiveMaskOnBatchedAndTransposedInputs) {
  auto x = iota_f({2, 3, 4});
  auto xv = vals<float>(x);
  for (int k : {-1, 0, 2}) {
    auto lo = vals<float>(tril(x, k));
    auto up = vals<float>(triu(x, k));
    for (int b = 0; b < 2; ++b)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j) {
          int p = (b * 3 + i) * 4 + j;
          EXPECT_EQ(lo[p], j - i <= k ? xv[p] : 0.0f);
          EXPECT_EQ(up[p], j - i >= k ? xv[p] : 0.0f);
        }
  }
  auto t = transpose(iota_f({3, 3}));  // [[1,4,7],[2,5,8],[3,6,9]]
  EXPECT_EQ(vals<float>(tril(t)), (std::vector<float>{1, 0, 0, 2, 5, 0, 3, 6, 9}));
  EXPECT_EQ(vals<float>(triu(t, 1)), (std::vector<float>{0, 4, 7, 0, 0, 8, 0, 0, 0}));
  EXPECT_EQ(vals<int>(tril(array({1, 2, 3, 4}, {2, 2}, int32))), (std::vector<int>{1, 0, 3, 4}));
  EXPECT_EQ(tril(zeros({0, 3})).shape(), (Shape{0, 3}));
  auto m = error_of([] { tril(zeros({3})); });
  EXPECT_NE(m.find("[tril] the array must be at least 2-D, got shape (3)"), std::string::npos)
      << m;
  m = error_of([] { triu(array(1.0f)); });
  EXPECT_NE(m.find("[triu]"), std::string::npos) << m;
}

TEST(Tril, GradientIsMasked) {
  auto x = iota_f({2, 2});
  auto ct = array({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2});
  auto [y, g] = vjp([](const array& a) { return tril(a); }, x, ct);
  EXPECT_EQ(vals<float>(g), (std::vector<float>{1, 0, 3, 4}));
  auto [y2, jt] = jvp([](const array& a) { return triu(a); }, x, ct);
  EXPECT_EQ(vals<float>(jt), (std::vector<float>{1, 2, 0, 4}));
  auto batched = vmap([](const array& a) { return tril(a); }, 2, 0)(iota_f({2, 2, 3}));
  // batch along the last axis: element b is x[:, :, b].
  auto bv = vals<float>(batched);
  auto src = vals<float>(iota_f({2, 2, 3}));
  for (int b = 0; b < 3; ++b)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j)
        EXPECT_EQ(bv[(b * 2 + i) * 2 + j], j <= i ? src[(i * 2 + j) * 3 + b] : 0.0f);
}

TEST(View, ReinterpretsBitsAndSharesTheBuffer) {
  auto a = array({1.0f, -2.0f}, float32);
  eval(a);
  auto u = view(a, uint32);
  eval(u);
  EXPECT_EQ(u.data<uint32_t>(), static_cast<const void*>(a.data<float>()));
  EXPECT_EQ(vals<uint32_t>(u),
            (std::vector<uint32_t>{std::bit_cast<uint32_t>(1.0f), std::bit_cast<uint32_t>(-2.0f)}));
  auto h = view(a, uint16);  // smaller items: last dim grows
  EXPECT_EQ(h.shape(), (Shape{4}));
  auto hv = vals<uint16_t>(h);
  EXPECT_EQ(hv[1], std::bit_cast<uint32_t>(1.0f) >> 16);
  auto d = view(array({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2}), float64);  // larger items
  EXPECT_EQ(d.shape(), (Shape{2, 1}));
  float pair[2] = {1.0f, 2.0f};
  double expect;
  std::memcpy(&expect, pair, 8);
  EXPECT_EQ(vals<double>(d)[0], expect);
  EXPECT_EQ(view(array(1.0f), int32).item<int>(), std::bit_cast<int>(1.0f));
  EXPECT_EQ(vals<uint8_t>(view(array({true, false}), uint8)), (std::vector<uint8_t>{1, 0}));
}

TEST(View, OfTransposedCopiesFirst) {
  auto t = transpose(array({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2}));  // [[1,3],[2,4]]
  auto d = view(t, float64);
  float pair[2] = {1.0f, 3.0f};
  double expect;
  std::memcpy(&expect, pair, 8);
  EXPECT_EQ(d.shape(), (Shape{2, 1}));
  EXPECT_EQ(vals<double>(d)[0], expect);
  auto same = view(t, int32);  // equal item sizes: a view with the same strides
  EXPECT_EQ(vals<int>(same)[1], std::bit_cast<int>(3.0f));
}

TEST(View, Errors) {
  auto m = error_of([] { view(array({1.0f, 2.0f, 3.0f}), float64); });
  EXPECT_NE(m.find("[view]"), std::string::npos) << m;
  EXPECT_NE(m.find("(3)"), std::string::npos) << m;
  m = error_of([] { view(array(1.0f), float64); });
  EXPECT_NE(m.find("0-d"), std::string::npos) << m;
}

TEST(AsStrided, SlidingWindowsShareTheBuffer) {
  auto a = iota_f({6});
  eval(a);
  auto w = as_strided(a, {4, 3}, {1, 1}, 0);
  eval(w);
  EXPECT_EQ(w.data<float>(), a.data<float>());
  EXPECT_EQ(vals<float>(w), (std::vector<float>{1, 2, 3, 2, 3, 4, 3, 4, 5, 4, 5, 6}));
  auto o = as_strided(a, {2}, {2}, 1);
  EXPECT_EQ(vals<float>(o), (std::vector<float>{2, 4}));
  auto r = as_strided(a, {3}, {-2}, 5);
  EXPECT_EQ(vals<float>(r), (std::vector<float>{6, 4, 2}));
  // A non-contiguous input is laid out row-major first.
  auto t = transpose(iota_f({2, 3}));  // flattened: 1,4,2,5,3,6
  EXPECT_EQ(vals<float>(as_strided(t, {2, 2}, {2, 1}, 1)), (std::vector<float>{4, 2, 5, 3}));
  auto m = error_of([&] { as_strided(a, {4}, {2}, 0); });
  EXPECT_NE(m.find("[as_strided]"), std::string::npos) << m;
  EXPECT_NE(m.find("[0, 6]"), std::string::npos) << m;
  EXPECT_THROW(as_strided(a, {-1}, {1}, 0), std::invalid_argument);
  EXPECT_EQ(as_strided(a, {0, 3}, {1, 1}, 0).size(), 0u);
}

TEST(Contiguous, SharesDenseInputsAndCopiesOthers) {
  auto a = iota_f({3, 4});
  eval(a);
  auto c = contiguous(a);
  eval(c);
  EXPECT_EQ(c.data<float>(), a.data<float>());
  auto t = transpose(a);
  auto ct = contiguous(t);
  eval(ct, t);
  EXPECT_NE(ct.data<float>(), a.data<float>());
  EXPECT_TRUE(ct.flags().row_contiguous);
  EXPECT_EQ(ct.strides(), (Strides{3, 1}));
  EXPECT_EQ(vals<float>(ct), vals<float>(t));
  auto col = contiguous(t, true);
  eval(col);
  EXPECT_EQ(col.data<float>(), a.data<float>());
  EXPECT_TRUE(col.flags().col_contiguous);
  auto b = contiguous(broadcast_to(array(2.0f), {2, 2}));
  eval(b);
  EXPECT_TRUE(b.flags().row_contiguous);
  EXPECT_EQ(vals<float>(b), (std::vector<float>(4, 2.0f)));
}

// Integer arange as MLX: start and start + step in the output type, then a running sum of their
// difference, so a fractional step truncates to 0 (all zeros), and a negative one counts down.
TEST(Arange, IntegerDtypesAccumulateInTheOutputTypeAsMlx) {
  auto z = arange(0.0, 5.0, 0.5, int32);
  ASSERT_EQ(z.size(), 10u);
  eval(z);
  for (size_t i = 0; i < z.size(); ++i) EXPECT_EQ(z.data<int32_t>()[i], 0) << i;
  auto d = arange(10.0, 0.0, -3.0, int32);
  eval(d);
  std::vector<int32_t> want{10, 7, 4, 1};
  ASSERT_EQ(d.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(d.data<int32_t>()[i], want[i]);
  auto u = arange(1.5, 9.0, 2.5, uint8);  // start 1, next int(4.0) = 4: step 3
  eval(u);
  std::vector<uint8_t> wu{1, 4, 7};
  ASSERT_EQ(u.size(), wu.size());
  for (size_t i = 0; i < wu.size(); ++i) EXPECT_EQ(u.data<uint8_t>()[i], wu[i]);
}
