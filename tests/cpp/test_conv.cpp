// Convolutions against a direct loop over the definition (2-D, every parameter): the forward
// pass, and the input and weight gradients as the loop's adjoints. Sizes span several of the
// kernels' blocks and partial sums, and run under pool sizes 1, 2 and 3 (CMakeLists).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "test_util.h"
#include "tessera/tessera.h"

using namespace tessera;
using test_util::random_array;
using test_util::values;

namespace {

struct Case {
  int n, h, w, c, o, kh, kw;
  std::vector<int> stride, lo, hi, kdil, idil;
  int groups;
  bool flip;
};

// For each (output, input, weight) index triple the definition pairs, f(y_index, x_index,
// w_index) over flat row-major offsets.
template <typename F>
void for_each_product(const Case& k, const Shape& y, F f) {
  const int cg = k.c / k.groups, og = k.o / k.groups;
  for (int n = 0; n < y[0]; ++n)
    for (int a = 0; a < y[1]; ++a)
      for (int b = 0; b < y[2]; ++b)
        for (int o = 0; o < k.o; ++o)
          for (int i = 0; i < k.kh; ++i)
            for (int j = 0; j < k.kw; ++j) {
              const int ii = k.flip ? k.kh - 1 - i : i, jj = k.flip ? k.kw - 1 - j : j;
              const int ph = a * k.stride[0] + ii * k.kdil[0] - k.lo[0];
              const int pw = b * k.stride[1] + jj * k.kdil[1] - k.lo[1];
              if (ph < 0 || pw < 0 || ph % k.idil[0] || pw % k.idil[1]) continue;
              const int xh = ph / k.idil[0], xw = pw / k.idil[1];
              if (xh >= k.h || xw >= k.w) continue;
              for (int c = 0; c < cg; ++c) {
                const int xc = (o / og) * cg + c;
                f(((size_t(n) * y[1] + a) * y[2] + b) * k.o + o,
                  ((size_t(n) * k.h + xh) * k.w + xw) * k.c + xc,
                  ((size_t(o) * k.kh + i) * k.kw + j) * cg + c);
              }
            }
}

array conv(const Case& k, const array& x, const array& w) {
  return conv_general(x, w, k.stride, k.lo, k.hi, k.kdil, k.idil, k.groups, k.flip);
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 1.0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * scale) << "at flat index " << i;
  }
}

void check_case(const Case& k, Dtype dt, double tol) {
  array x = random_array({k.n, k.h, k.w, k.c}, dt, 1);
  array w = random_array({k.o, k.kh, k.kw, k.c / k.groups}, dt, 2);
  array y = conv(k, x, w);
  eval(y);
  array dy = random_array(y.shape(), dt, 3);
  const std::vector<double> xv = values(x), wv = values(w), dyv = values(dy);
  std::vector<double> want_y(y.size(), 0.0), want_dx(x.size(), 0.0), want_dw(w.size(), 0.0);
  for_each_product(k, y.shape(), [&](size_t yi, size_t xi, size_t wi) {
    want_y[yi] += xv[xi] * wv[wi];
    want_dx[xi] += dyv[yi] * wv[wi];
    want_dw[wi] += dyv[yi] * xv[xi];
  });
  expect_near_all(values(y), want_y, tol);
  auto [outs, grads] = vjp([&](const std::vector<array>& in) { return std::vector<array>{conv(k, in[0], in[1])}; },
                           {x, w}, {dy});
  ASSERT_EQ(grads[0].dtype(), dt);
  expect_near_all(values(grads[0]), want_dx, tol);
  expect_near_all(values(grads[1]), want_dw, tol);
}

}  // namespace

TEST(Conv, StridedPaddedDilatedGroupedMatchesTheDefinition) {
  // 2 x 16 x 16 positions x 3*3*32 taps: several im2col blocks and weight-gradient partial sums.
  Case k{2, 17, 16, 64, 8, 3, 3, {1, 2}, {1, 0}, {2, 1}, {1, 2}, {1, 1}, 2, false};
  check_case(k, float32, 2e-5);
  check_case(k, float64, 1e-12);
}

TEST(Conv, SixteenWideGroupsUseTheRegisterTileAndUnitStridesTheForwardInputGrad) {
  // O / G = 32 takes the AVX2 tile kernel (where the CPU has it); 3 x 7 = 21 output positions
  // leave rows outside the 6-row tiles; unit strides send dx through the forward kernel, with
  // the kernel flipped, dilated and asymmetrically (also negatively) padded.
  Case k{1, 6, 9, 8, 64, 3, 2, {1, 1}, {1, 0}, {0, -1}, {2, 1}, {1, 1}, 2, false};
  check_case(k, float32, 2e-5);
  check_case(k, float64, 1e-12);
  k.flip = true;
  check_case(k, float32, 2e-5);
  check_case(k, float16, 2e-2);
}

TEST(Conv, InputDilationFlipAndNegativePadding) {
  Case k{3, 6, 7, 4, 6, 2, 3, {2, 1}, {-1, 2}, {1, -2}, {1, 1}, {3, 2}, 1, true};
  check_case(k, float64, 1e-12);
}

TEST(Conv, OneByOneKernelReadsTheInputInPlace) {
  Case k{2, 9, 5, 12, 6, 1, 1, {1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, 3, false};
  check_case(k, float32, 2e-5);
}

TEST(Conv, HalfPrecisionAccumulatesInFloat32) {
  Case k{2, 8, 8, 16, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, false};
  check_case(k, float16, 4e-3);
  check_case(k, bfloat16, 3e-2);
}

TEST(Conv, ShapesOfTheWrappersAndTransposes) {
  EXPECT_EQ(conv1d(ones({2, 10, 3}), ones({4, 3, 3}), 2, 1).shape(), (Shape{2, 5, 4}));
  EXPECT_EQ(conv3d(ones({1, 5, 6, 7, 2}), ones({3, 2, 3, 3, 2})).shape(), (Shape{1, 4, 4, 5, 3}));
  // (L - 1) * stride - 2 * padding + dilation * (K - 1) + 1 + output_padding.
  EXPECT_EQ(conv_transpose2d(ones({1, 4, 5, 2}), ones({3, 3, 2, 2}), {2, 3}, {1, 0}, {1, 2},
                             {1, 2})
                .shape(),
            (Shape{1, 8, 17, 3}));
  EXPECT_THROW(conv2d(ones({1, 4, 4, 3}), ones({2, 5, 5, 3})), std::invalid_argument);
  EXPECT_THROW(conv2d(ones({1, 4, 4, 3}), ones({2, 2, 2, 3}), {1, 1}, {0, 0}, {1, 1}, 2),
               std::invalid_argument);
}

TEST(Conv, ParametersWhoseShapesLeaveInt32AreOverflowErrors) {
  const int big = INT32_MAX, low = INT32_MIN;
  const array x = zeros({1, 6, 6, 1}), w = zeros({1, 3, 3, 1});
  // The padded input (6 + 2 * big) would give an output past int32.
  EXPECT_THROW(conv_general(x, w, {1, 1}, {big, 0}, {big, 0}, {1, 1}, {1, 1}), std::overflow_error);
  // So would the input dilated by `big`.
  EXPECT_THROW(conv_general(x, w, {1, 1}, {0, 0}, {0, 0}, {1, 1}, {big, 1}), std::overflow_error);
  // A crop by INT32_MIN has no int32 size.
  EXPECT_THROW(conv_general(x, w, {1, 1}, {low, 0}, {0, 0}, {1, 1}, {1, 1}), std::overflow_error);
  // The transposed convolution's padding, k - 1 - padding, leaves int32.
  EXPECT_THROW(conv_transpose2d(x, w, {1, 1}, {0, 0}, {big, 1}, {0, 0}), std::overflow_error);
  // A kernel dilated past the input is the ordinary size error, and in-range shapes still work.
  EXPECT_THROW(conv_general(x, w, {1, 1}, {0, 0}, {0, 0}, {big, 1}, {1, 1}), std::invalid_argument);
  EXPECT_EQ(conv_general(x, w, {1, 1}, {1, 1}, {1, 1}, {2, 2}, {1, 1}).shape(), (Shape{1, 4, 4, 1}));
}
