// Sorting: sort/argsort (stable, NaN last), partition/argpartition (the kth element in place),
// topk, on every axis, dtypes, flattened versions, views and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "tessera/tessera.h"
#include "test_util.h"

using namespace tessera;

namespace {

using test_util::values;

// Lines of row-major x (shape) along axis: lines[line][i].
std::vector<std::vector<double>> lines(const std::vector<double>& x, const Shape& shape, int axis) {
  size_t outer = 1, n = shape[axis], inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<std::vector<double>> out;
  for (size_t o = 0; o < outer; ++o)
    for (size_t j = 0; j < inner; ++j) {
      std::vector<double> l;
      for (size_t i = 0; i < n; ++i) l.push_back(x[(o * n + i) * inner + j]);
      out.push_back(l);
    }
  return out;
}

bool nan_last_less(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return !std::isnan(a) && std::isnan(b);
  return a < b;
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

}  // namespace

TEST(Sort, EveryAxisAndDtypeMatchesStdSort) {
  const Shape shape{4, 3, 5};
  std::vector<double> x(60);
  for (size_t i = 0; i < 60; ++i) x[i] = static_cast<double>((i * 37) % 11);
  for (Dtype dt : kAllDtypes) {
    auto a = array(x.begin(), shape, dt);
    for (int axis : {0, 1, 2, -1}) {
      int ax = axis < 0 ? axis + 3 : axis;
      auto got = lines(values(sort(a, axis)), shape, ax);
      auto want = lines(values(a), shape, ax);
      for (auto& l : want) std::sort(l.begin(), l.end());
      EXPECT_EQ(got, want) << dtype_name(dt) << " axis " << axis;
      auto idx = argsort(a, axis);
      EXPECT_EQ(idx.dtype(), uint32);
      auto il = lines(values(idx), shape, ax);
      auto xl = lines(values(a), shape, ax);
      for (size_t k = 0; k < il.size(); ++k) {
        for (size_t i = 0; i < il[k].size(); ++i) {
          EXPECT_EQ(xl[k][static_cast<size_t>(il[k][i])], want[k][i])
              << dtype_name(dt) << " argsort axis " << axis;
        }
      }
    }
  }
}

TEST(Sort, NanSortsLastAndFlattenedVersion) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  float inf = std::numeric_limits<float>::infinity();
  auto a = array({3.0f, nan, -inf, 1.0f, nan, inf}, Shape{2, 3});
  auto s = values(sort(a));
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[0], -INFINITY);
  EXPECT_EQ(s[1], 1.0);
  EXPECT_EQ(s[2], 3.0);
  EXPECT_EQ(s[3], INFINITY);
  EXPECT_TRUE(std::isnan(s[4]) && std::isnan(s[5]));
  EXPECT_EQ(values(argsort(a)), (std::vector<double>{2, 3, 0, 5, 1, 4}));
  auto rows = values(sort(a, 1));
  EXPECT_EQ(rows[0], -INFINITY);
  EXPECT_EQ(rows[1], 3.0);
  EXPECT_TRUE(std::isnan(rows[2]));
  EXPECT_EQ(rows[3], 1.0);
  EXPECT_EQ(rows[4], INFINITY);
  EXPECT_TRUE(std::isnan(rows[5]));
}

TEST(Sort, ArgsortIsStable) {
  auto a = array({2, 1, 2, 1, 0, 2, 1}, int32);
  EXPECT_EQ(values(argsort(a)), (std::vector<double>{4, 1, 3, 6, 0, 2, 5}));
  std::vector<double> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i % 3);
  auto b = array(x.begin(), Shape{1000}, float16);
  auto idx = values(argsort(b));
  for (size_t i = 1; i < idx.size(); ++i) {
    double p = x[static_cast<size_t>(idx[i - 1])], q = x[static_cast<size_t>(idx[i])];
    ASSERT_TRUE(p < q || (p == q && idx[i - 1] < idx[i])) << "position " << i;
  }
}

TEST(Partition, KthElementInPlaceOnEveryAxis) {
  const Shape shape{5, 6};
  std::vector<double> x(30);
  for (size_t i = 0; i < 30; ++i) x[i] = static_cast<double>((i * 13) % 17) - 5;
  x[7] = NAN;
  auto a = array(x.begin(), shape, float32);
  for (int axis : {0, 1}) {
    int n = shape[axis];
    for (int kth : {0, 2, n - 1, -1, -3}) {
      int k = kth < 0 ? kth + n : kth;
      auto pl = lines(values(partition(a, kth, axis)), shape, axis);
      auto il = lines(values(argpartition(a, kth, axis)), shape, axis);
      auto xl = lines(x, shape, axis);
      for (size_t line = 0; line < pl.size(); ++line) {
        auto sorted = xl[line];
        std::sort(sorted.begin(), sorted.end(), nan_last_less);
        ASSERT_TRUE(same(pl[line][k], sorted[k])) << "axis " << axis << " kth " << kth;
        for (int i = 0; i < k; ++i) EXPECT_FALSE(nan_last_less(pl[line][k], pl[line][i]));
        for (int i = k + 1; i < n; ++i) EXPECT_FALSE(nan_last_less(pl[line][i], pl[line][k]));
        // partition and argpartition agree element for element.
        for (int i = 0; i < n; ++i) {
          EXPECT_TRUE(same(xl[line][static_cast<size_t>(il[line][i])], pl[line][i]));
        }
      }
    }
  }
  auto flat = values(partition(array({5, 1, 4, 2, 3}, int32), 2));
  EXPECT_EQ(flat[2], 3);
  EXPECT_EQ(argpartition(a, 1).dtype(), uint32);
  EXPECT_EQ(argpartition(a, 1).shape(), Shape{30});
}

TEST(TopK, LargestKAsASet) {
  auto a = array({5.0f, 1.0f, 9.0f, 3.0f, 7.0f, 2.0f, 8.0f, 0.0f}, Shape{2, 4});
  auto t = values(topk(a, 3));
  std::sort(t.begin(), t.end());
  EXPECT_EQ(t, (std::vector<double>{7, 8, 9}));
  auto r = topk(a, 2, 1);
  EXPECT_EQ(r.shape(), (Shape{2, 2}));
  auto rv = values(r);
  std::sort(rv.begin(), rv.begin() + 2);
  std::sort(rv.begin() + 2, rv.end());
  EXPECT_EQ(rv, (std::vector<double>{5, 9, 7, 8}));
  auto c = topk(a, 1, 0);
  EXPECT_EQ(c.shape(), (Shape{1, 4}));
  EXPECT_EQ(values(c), (std::vector<double>{7, 2, 9, 3}));
  EXPECT_EQ(topk(a, 4, 1).shape(), (Shape{2, 4}));
  EXPECT_EQ(topk(a, 0, 1).shape(), (Shape{2, 0}));
  try {
    topk(a, 5, 1);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("k=5"), std::string::npos) << e.what();
  }
}

TEST(Sort, ViewsEmptyAndErrors) {
  auto m = array({3.0f, 1.0f, 2.0f, 6.0f, 5.0f, 4.0f}, Shape{2, 3});
  auto t = transpose(m);  // (3,2): [[3,6],[1,5],[2,4]]
  EXPECT_EQ(values(sort(t, 0)), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(values(argsort(t, 1)), (std::vector<double>{0, 1, 0, 1, 0, 1}));
  auto b = broadcast_to(array({2, 1, 3}, int32), {2, 3});
  EXPECT_EQ(values(sort(b, 1)), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(sort(zeros({0, 3}), 0).shape(), (Shape{0, 3}));
  EXPECT_EQ(argsort(zeros({2, 0}), 1).shape(), (Shape{2, 0}));
  EXPECT_EQ(values(sort(array(3.0f))), (std::vector<double>{3}));
  EXPECT_THROW(sort(m, 2), std::invalid_argument);
  EXPECT_THROW(argsort(m, -3), std::invalid_argument);
  try {
    partition(m, 3, 1);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("kth 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(argpartition(m, -4, 1), std::invalid_argument);
}

TEST(SortGrad, CotangentsReturnToTheirSourcePositions) {
  auto x = array({3.0f, 1.0f, 2.0f});
  auto w = array({1.0f, 10.0f, 100.0f});
  // sort -> [1, 2, 3] from positions [1, 2, 0].
  auto g = grad([&](const array& a) { return sum(multiply(w, sort(a))); })(x);
  EXPECT_EQ(values(g), (std::vector<double>{100, 1, 10}));
  auto [out, tan] = jvp([](const array& a) { return sort(a); }, x, w);
  EXPECT_EQ(values(tan), (std::vector<double>{10, 100, 1}));
  g = grad([](const array& a) { return sum(topk(a, 2)); })(x);
  EXPECT_EQ(values(g), (std::vector<double>{1, 0, 1}));
}

TEST(SortVmap, BatchedSortsMatchPerItemResults) {
  auto x = array({3.0f, 1.0f, 2.0f, 0.0f, 5.0f, 4.0f}, Shape{2, 3});
  EXPECT_EQ(values(vmap([](const array& a) { return sort(a, 0); })(x)),
            (std::vector<double>{1, 2, 3, 0, 4, 5}));
  EXPECT_EQ(values(vmap([](const array& a) { return argsort(a, 0); }, 1, 1)(x)),
            (std::vector<double>{1, 0, 0, 0, 1, 1}));
}
