// Affine quantization in C++: packing round trips, and quantized_matmul against the product with
// the dequantized matrix (both orientations, a 3-bit format whose values straddle bytes), under
// pool sizes 1, 2 and 3. Bit-compatibility with MLX is tested in tests/python/test_quantized.py.
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
