// Kernels whose path depends on a size: every block, grain and lane threshold, one below, at and
// one above, plus 2^20 + 3, checked against naive loops. ctest runs this binary (like every op
// test) with pool sizes 1, 2 and 3, so a path that only one pool size takes cannot hide.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "core/thread_pool.h"
#include "test_util.h"

namespace mx = tessera;
using tessera::test_util::seeded_values;
using tessera::test_util::values;

namespace {

// Thresholds in src/backend/cpu: reduce lanes (2 x 16), reduce blocks (2 x 2^14, 4 x 2^14), the
// elementwise grain (2^15), softmax rows (2^14), random's grain (4096 word pairs).
std::vector<size_t> straddling_sizes() {
  std::vector<size_t> out;
  for (size_t t : {size_t{32}, size_t{8192}, size_t{16384}, size_t{32768}, size_t{65536}}) {
    out.insert(out.end(), {t - 1, t, t + 1});
  }
  out.push_back((size_t{1} << 20) + 3);
  return out;
}

mx::array from(const std::vector<double>& v, mx::Dtype d) {
  return mx::astype(mx::array(v, {static_cast<int>(v.size())}), d);
}

// ctest sets the pool size per registration; make sure it took effect (else the sweep is moot).
TEST(Thresholds, PoolHasTheConfiguredSize) {
  const char* want = std::getenv("TESSERA_NUM_THREADS");
  if (want == nullptr || std::atoi(want) <= 0) GTEST_SKIP() << "pool size not set";
  EXPECT_EQ(tessera::detail::num_threads(), std::atoi(want));
}

class Thresholds : public ::testing::TestWithParam<size_t> {};

TEST_P(Thresholds, FullReductionsOfOnes) {
  const size_t n = GetParam();
  const int len = static_cast<int>(n);
  auto ones = mx::ones({len});
  auto bools = mx::ones({len}, mx::bool_);
  EXPECT_EQ(values(mx::min(ones))[0], 1.0) << n;
  EXPECT_EQ(values(mx::max(ones))[0], 1.0) << n;
  EXPECT_EQ(values(mx::prod(ones))[0], 1.0) << n;
  EXPECT_EQ(values(mx::sum(ones))[0], static_cast<double>(n)) << n;
  EXPECT_EQ(values(mx::all(bools))[0], 1.0) << n;
  EXPECT_EQ(values(mx::any(mx::zeros({len}, mx::bool_)))[0], 0.0) << n;
  EXPECT_EQ(values(mx::sum(mx::ones({len}, mx::int32)))[0], static_cast<double>(n)) << n;
  EXPECT_TRUE(mx::array_equal(ones, mx::full({len}, 1.0f)).item<bool>()) << n;
  EXPECT_TRUE(mx::allclose(ones, ones).item<bool>()) << n;
  EXPECT_FALSE(mx::array_equal(ones, mx::zeros({len})).item<bool>()) << n;
}

TEST_P(Thresholds, ReductionsMatchNaiveLoops) {
  const size_t n = GetParam();
  auto v = seeded_values(n, n);
  // The last element is the extreme one, so a partial that is lost or left at its identity shows.
  v.back() = 3.0;
  v.front() = -3.0;
  auto a = from(v, mx::float32);
  std::vector<float> f(v.begin(), v.end());
  double want_sum = 0;
  for (float x : f) want_sum += x;
  EXPECT_NEAR(values(mx::sum(a))[0], want_sum, 1e-4 * std::sqrt(static_cast<double>(n)) + 1e-4)
      << n;
  EXPECT_EQ(values(mx::max(a))[0], 3.0) << n;
  EXPECT_EQ(values(mx::min(a))[0], -3.0) << n;
  EXPECT_EQ(values(mx::argmax(a))[0], static_cast<double>(n - 1)) << n;
  EXPECT_EQ(values(mx::argmin(a))[0], 0.0) << n;
  double m = *std::max_element(f.begin(), f.end()), lse = 0;
  for (float x : f) lse += std::exp(static_cast<double>(x) - m);
  EXPECT_NEAR(values(mx::logsumexp(a))[0], m + std::log(lse), 1e-4) << n;
  // Rows: 2 rows (fewer than most pools) and 3 rows of n each, reduced along the last axis.
  for (int rows : {2, 3}) {
    auto r = mx::reshape(mx::concatenate(std::vector<mx::array>(rows, a)), {rows, static_cast<int>(n)});
    auto s = values(mx::sum(r, 1));
    auto mn = values(mx::min(r, 1));
    for (int i = 0; i < rows; ++i) {
      EXPECT_NEAR(s[i], want_sum, 1e-4 * std::sqrt(static_cast<double>(n)) + 1e-4) << n;
      EXPECT_EQ(mn[i], -3.0) << n;
    }
  }
}

TEST_P(Thresholds, ElementwiseScanSoftmaxSort) {
  const size_t n = GetParam();
  const int len = static_cast<int>(n);
  auto v = seeded_values(n, 7 * n + 1);
  auto a = from(v, mx::float32);
  auto b = mx::arange(len, mx::int32);
  std::vector<float> f(v.begin(), v.end());
  // Binary with a scalar, unary, and both operands contiguous.
  auto add = values(mx::add(a, mx::array(2.0f)));
  auto ex = values(mx::exp(a));
  auto prod = values(mx::multiply(a, a));
  auto cs = values(mx::cumsum(mx::ones({len}, mx::int32)));
  auto cast = values(mx::astype(b, mx::float32));
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(add[i], static_cast<double>(f[i] + 2.0f)) << n << " at " << i;
    ASSERT_NEAR(ex[i], std::exp(static_cast<double>(f[i])), 1e-6 * std::exp(1.0)) << n << " at " << i;
    ASSERT_EQ(prod[i], static_cast<double>(f[i] * f[i])) << n << " at " << i;
    ASSERT_EQ(cs[i], static_cast<double>(i + 1)) << n << " at " << i;
    ASSERT_EQ(cast[i], static_cast<double>(i)) << n << " at " << i;
  }
  auto sm = values(mx::softmax(a));
  double m = *std::max_element(f.begin(), f.end()), z = 0;
  for (float x : f) z += std::exp(static_cast<double>(x) - m);
  for (size_t i = 0; i < n; i += std::max<size_t>(1, n / 97)) {
    ASSERT_NEAR(sm[i], std::exp(static_cast<double>(f[i]) - m) / z, 1e-6) << n << " at " << i;
  }
  auto sorted = values(mx::sort(a));
  std::vector<float> ref = f;
  std::sort(ref.begin(), ref.end());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], static_cast<double>(ref[i])) << n << " at " << i;
  // A transposed copy (strided path) of a (2, n) array.
  auto t = values(mx::transpose(mx::reshape(mx::concatenate({a, a}), {2, len})));
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(t[2 * i], static_cast<double>(f[i])) << n;
    ASSERT_EQ(t[2 * i + 1], static_cast<double>(f[i])) << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, Thresholds, ::testing::ValuesIn(straddling_sizes()),
                         [](const ::testing::TestParamInfo<size_t>& i) {
                           return "n" + std::to_string(i.param);
                         });

}  // namespace
