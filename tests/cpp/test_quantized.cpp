// Quantization in C++: affine packing round trips, the fp modes storing representable matrices
// exactly, and quantized_matmul against the product with the dequantized matrix (both
// orientations, a 3-bit format whose values straddle bytes, the fp modes), under pool sizes 1, 2
// and 3. Bit-compatibility with MLX is tested in tests/python/test_quantized.py and
// test_quantized_fp.py.
#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"
#include "tessera/tessera.h"

using namespace tessera;
using test_util::random_array;
using test_util::values;

TEST(Quantized, DequantizedValuesAreOnTheGroupGrid) {
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    SCOPED_TRACE("bits " + std::to_string(bits));
    array w = random_array({5, 128}, float32, 40 + bits);
    auto q = quantize(w, 32, bits);
    ASSERT_EQ(q[0].shape(), (Shape{5, 128 * bits / 32}));
    array back = dequantize(q[0], q[1], q[2], 32, bits);
    const auto wv = values(w), bv = values(back), sv = values(q[1]), biv = values(q[2]);
    for (size_t i = 0; i < wv.size(); ++i) {
      const size_t g = i / 32;
      const double step = std::abs(sv[g]);
      // On the grid: (back - bias) / scale is an integer in [0, 2^bits - 1].
      const double level = (bv[i] - biv[g]) / sv[g];
      ASSERT_NEAR(level, std::round(level), 1e-3) << i;
      ASSERT_GE(std::round(level), 0.0);
      ASSERT_LE(std::round(level), double((1 << bits) - 1));
      ASSERT_LE(std::abs(bv[i] - wv[i]), 1.5 * step + 1e-6) << i;
    }
  }
}

TEST(Quantized, MatmulMatchesTheDequantizedProduct) {
  for (bool transpose : {true, false}) {
    SCOPED_TRACE(transpose ? "transposed" : "plain");
    const Shape wshape = transpose ? Shape{40, 256} : Shape{256, 128};
    auto q = quantize(random_array(wshape, float32, 7), 64, 3);
    array wd = dequantize(q[0], q[1], q[2], 64, 3);
    array x = random_array({3, 256}, float32, 8);
    array got = quantized_matmul(x, q[0], q[1], q[2], transpose, 64, 3);
    array want = matmul(astype(x, float64), astype(transpose ? tessera::transpose(wd) : wd, float64));
    const auto gv = values(got), rv = values(want);
    ASSERT_EQ(gv.size(), rv.size());
    for (size_t i = 0; i < gv.size(); ++i) ASSERT_NEAR(gv[i], rv[i], 1e-3 * (1 + std::abs(rv[i])));
  }
}

// MLX's fp modes. A matrix whose groups hold only values of the format times one power of two,
// with the group's maximum at the format's largest value, is stored exactly.
TEST(Quantized, FPModesStoreRepresentableMatricesExactly) {
  const std::vector<double> fp4 = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (const char* mode : {"mxfp4", "mxfp8", "nvfp4"}) {
    SCOPED_TRACE(mode);
    const int gs = std::string(mode) == "nvfp4" ? 16 : 32;
    const bool fp8 = std::string(mode) == "mxfp8";
    const int rows = 3, k = 4 * gs;
    std::vector<double> w(static_cast<size_t>(rows * k));
    for (size_t i = 0; i < w.size(); ++i) {
      const size_t g = i / gs, j = i % gs;
      // nvfp4's scale is an fp8 value (1.25 * 2^g here); the mx modes' a power of two.
      const double scale = std::string(mode) == "nvfp4" ? 1.25 * std::ldexp(1.0, int(g % 5) - 2)
                                                        : std::ldexp(1.0, int(g % 7) - 3);
      double v = fp8 ? (j == 0 ? 448.0 : std::ldexp(1.0 + (i * 7 % 8) / 8.0, int(i % 9) - 4))
                     : (j == 0 ? 6.0 : fp4[i * 5 % 8]);
      if ((i * 3) % 5 == 1) v = -v;
      w[i] = v * scale;
    }
    array wa = astype(array(w, {rows, k}, float64), float32);
    auto q = quantize(wa, std::nullopt, std::nullopt, mode);
    ASSERT_EQ(q.size(), 2u);
    ASSERT_EQ(q[1].dtype(), uint8);
    ASSERT_EQ(q[1].shape(), (Shape{rows, k / gs}));
    array back = dequantize(q[0], q[1], std::nullopt, std::nullopt, std::nullopt, mode,
                            std::nullopt, float32);
    const auto bv = values(back);
    for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(bv[i], w[i]) << i;
  }
}

// quantized_matmul in the fp modes against x @ dequantize(w) in float64: one row (the packed
// matrix-vector path) and eight (dequantized tiles and gemm), both orientations.
TEST(Quantized, FPMatmulMatchesTheDequantizedProduct) {
  for (const char* mode : {"mxfp4", "mxfp8", "nvfp4"}) {
    for (bool transpose : {true, false}) {
      for (int m : {1, 8}) {
        SCOPED_TRACE(std::string(mode) + (transpose ? " transposed " : " plain ") +
                     std::to_string(m));
        const Shape wshape = transpose ? Shape{40, 128} : Shape{128, 64};
        auto q = quantize(random_array(wshape, float32, 11), std::nullopt, std::nullopt, mode);
        array wd = dequantize(q[0], q[1], std::nullopt, std::nullopt, std::nullopt, mode,
                              std::nullopt, float64);
        array x = random_array({m, 128}, float32, 12);
        array got = quantized_matmul(x, q[0], q[1], std::nullopt, transpose, std::nullopt,
                                     std::nullopt, mode);
        array want = matmul(astype(x, float64), transpose ? tessera::transpose(wd) : wd);
        const auto gv = values(got), rv = values(want);
        ASSERT_EQ(gv.size(), rv.size());
        for (size_t i = 0; i < gv.size(); ++i) {
          ASSERT_NEAR(gv[i], rv[i], 1e-4 * (1 + std::abs(rv[i])));
        }
      }
    }
  }
}
