// Printing arrays exactly as MLX does (mlx/utils.cpp): element formats per dtype, nested rows
// indented to the bracket depth, dims longer than 6 summarised with `...`.
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <sstream>

#include "tessera/tessera.h"
#include "tessera/utils.h"

using namespace tessera;

namespace {
template <typename T>
std::string str(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
}  // namespace

TEST(Print, ScalarsAndVectorsPerDtype) {
  EXPECT_EQ(str(array({4.0f, 4.0f, 4.0f})), "array([4, 4, 4], dtype=float32)");
  EXPECT_EQ(str(array(1.5f)), "array(1.5, dtype=float32)");
  EXPECT_EQ(str(array({true, false})), "array([True, False], dtype=bool)");
  EXPECT_EQ(str(array(true)), "array(True, dtype=bool)");
  EXPECT_EQ(str(array({1, -2, 3}, int32)), "array([1, -2, 3], dtype=int32)");
  EXPECT_EQ(str(array({-5, 7}, int8)), "array([-5, 7], dtype=int8)");
  EXPECT_EQ(str(array({200, 3}, uint8)), "array([200, 3], dtype=uint8)");
  EXPECT_EQ(str(array({1, 2}, int64)), "array([1, 2], dtype=int64)");
  EXPECT_EQ(str(array({0.5, 2.0}, float64)), "array([0.5, 2], dtype=float64)");
  EXPECT_EQ(str(array({1.5f}, float16)), "array([1.5], dtype=float16)");
  EXPECT_EQ(str(array(0.1f, float16)), "array(0.0999756, dtype=float16)");
  EXPECT_EQ(str(array(1.5f, bfloat16)), "array(1.5, dtype=bfloat16)");
  EXPECT_EQ(str(array(complex64_t(1, -2))), "array(1-2j, dtype=complex64)");
  EXPECT_EQ(str(array(complex64_t(0.5f, 0))), "array(0.5+0j, dtype=complex64)");
}

TEST(Print, FloatFormattingUsesSixSignificantDigits) {
  float inf = std::numeric_limits<float>::infinity();
  float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(str(array({0.1f, 1.0f / 3, 1e-7f, 123456789.0f})),
            "array([0.1, 0.333333, 1e-07, 1.23457e+08], dtype=float32)");
  EXPECT_EQ(str(array({inf, -inf, nan})), "array([inf, -inf, nan], dtype=float32)");
}

TEST(Print, NestedRowsAreIndentedToTheBracketDepth) {
  EXPECT_EQ(str(array({1, 2, 3, 4}, Shape{2, 2}, int32)),
            "array([[1, 2],\n       [3, 4]], dtype=int32)");
  EXPECT_EQ(str(reshape(arange(8), {2, 2, 2})),
            "array([[[0, 1],\n        [2, 3]],\n       [[4, 5],\n        [6, 7]]], dtype=int32)");
}

TEST(Print, LongDimsAreSummarised) {
  EXPECT_EQ(str(arange(6)), "array([0, 1, 2, 3, 4, 5], dtype=int32)");
  EXPECT_EQ(str(arange(10)), "array([0, 1, 2, ..., 7, 8, 9], dtype=int32)");
  EXPECT_EQ(str(reshape(arange(16), {8, 2})),
            "array([[0, 1],\n       [2, 3],\n       [4, 5],\n       ...,\n       [10, 11],\n"
            "       [12, 13],\n       [14, 15]], dtype=int32)");
  EXPECT_EQ(str(reshape(arange(14), {2, 7})),
            "array([[0, 1, 2, ..., 4, 5, 6],\n       [7, 8, 9, ..., 11, 12, 13]], dtype=int32)");
}

TEST(Print, ViewsEmptyAndLazyArrays) {
  auto m = array({1, 2, 3, 4, 5, 6}, Shape{2, 3}, int32);
  EXPECT_EQ(str(transpose(m)), "array([[1, 4],\n       [2, 5],\n       [3, 6]], dtype=int32)");
  EXPECT_EQ(str(broadcast_to(array(7, int32), {2})), "array([7, 7], dtype=int32)");
  EXPECT_EQ(str(zeros({0})), "array([], dtype=float32)");
  EXPECT_EQ(str(zeros({2, 0})), "array([[],\n       []], dtype=float32)");
  auto lazy = sum(ones({3, 3}), 0);
  EXPECT_EQ(str(lazy), "array([3, 3, 3], dtype=float32)");
}

TEST(Print, Shapes) {
  EXPECT_EQ(str(Shape{2, 3}), "(2,3)");
  EXPECT_EQ(str(Shape{}), "()");
  EXPECT_EQ(str(Shape{5}), "(5)");
}

namespace {

// Restores the print options a test changed, even when an expectation fails.
struct SavedPrintOptions {
  PrintOptions saved = get_printoptions();
  ~SavedPrintOptions() { set_printoptions(saved); }
};

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

TEST(Print, PrecisionGivesFixedDigitsForFloatsOnly) {
  SavedPrintOptions restore;
  EXPECT_EQ(get_printoptions().precision, -1);
  const float x = 1.123456789f, y = -2.5f;
  auto a = array({x, y});
  EXPECT_EQ(str(a), "array([1.12346, -2.5], dtype=float32)");  // six significant digits
  for (int p : {0, 2, 4, 9}) {
    set_printoptions({p});
    EXPECT_EQ(get_printoptions().precision, p);
    EXPECT_EQ(str(a), "array([" + fixed(x, p) + ", " + fixed(y, p) + "], dtype=float32)");
    EXPECT_EQ(str(array({3, 4}, int32)), "array([3, 4], dtype=int32)");  // integers as they are
    EXPECT_EQ(str(array(complex64_t(1.5f, -0.25f))),
              "array(" + fixed(1.5, p) + "-" + fixed(0.25, p) + "j, dtype=complex64)");
  }
  set_printoptions({-1});
  EXPECT_EQ(str(a), "array([1.12346, -2.5], dtype=float32)");
  EXPECT_THROW(set_printoptions({-2}), std::invalid_argument);
  EXPECT_EQ(get_printoptions().precision, -1);
}
