// Half-precision products with few rows (backend/cpu/half_gemm.h): every instruction-set path this
// CPU runs, both layouts of b, odd sizes (k not a multiple of any vector width, n not a multiple
// of the 4-row blocks), alpha / beta, against a float64 product of the same half values; and the
// matmul, addmm and gather_mm ops that route decode-sized products there.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/half_gemm.h"
#include "test_util.h"
#include "tessera/tessera.h"

namespace tessera {
namespace {

using cpu::HalfIsa;

std::vector<HalfIsa> isas() {
  std::vector<HalfIsa> out{HalfIsa::scalar};
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  if (avx2) out.push_back(HalfIsa::avx2);
  if (avx512) out.push_back(HalfIsa::avx512);
  if (avx512 && __builtin_cpu_supports("avx512bf16")) out.push_back(HalfIsa::avx512_bf16);
#endif
  return out;
}

template <typename T>
std::vector<T> random_half(size_t n, std::mt19937& gen) {
  std::normal_distribution<float> d;
  std::vector<T> v(n);
  for (auto& x : v) x = T(d(gen));
  return v;
}

// Relative bound of rounding one float32 result to T, and of float32 accumulation over k terms.
template <typename T>
double rounding() {
  return std::is_same_v<T, bfloat16_t> ? std::ldexp(1.0, -8) : std::ldexp(1.0, -10);
}

template <typename T>
void check_all_paths() {
  std::mt19937 gen(7);
  struct Case {
    int m, n, k;
    float alpha, beta;
  };
  const Case cases[] = {{1, 37, 67, 1.0f, 0.0f}, {3, 64, 576, 1.0f, 0.0f},
                        {5, 9, 1, 0.5f, 2.0f},   {16, 70, 129, 1.0f, 1.0f},
                        {4, 1, 33, 1.0f, 0.0f},  {1, 130, 2048, -2.0f, 0.5f}};
  for (HalfIsa isa : isas()) {
    for (bool rows_are_n : {true, false}) {
      for (const Case& c : cases) {
        SCOPED_TRACE(std::string(cpu::half_isa_name(isa)) +
                     (rows_are_n ? " W.T" : " row-major") +
                     " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                     " k=" + std::to_string(c.k));
        const int64_t lda = c.k + 3, ldb = (rows_are_n ? c.k : c.n) + 5, ldo = c.n + 2;
        auto a = random_half<T>(c.m * lda, gen);
        auto b = random_half<T>((rows_are_n ? c.n : c.k) * ldb, gen);
        auto out = random_half<T>(c.m * ldo, gen);
        const auto before = out;
        cpu::half_skinny_gemm<T>(isa, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb,
                                 rows_are_n, c.beta, out.data(), ldo);
        for (int i = 0; i < c.m; ++i) {
          for (int j = 0; j < c.n; ++j) {
            double s = 0.0, mag = 0.0;
            for (int p = 0; p < c.k; ++p) {
              const double w = rows_are_n ? double(b[j * ldb + p]) : double(b[p * ldb + j]);
              s += double(a[i * lda + p]) * w;
              mag += std::abs(double(a[i * lda + p]) * w);
            }
            const double old = c.beta != 0.0f ? c.beta * double(before[i * ldo + j]) : 0.0;
            const double want = c.alpha * s + old;
            const double tol = rounding<T>() * std::abs(want) +
                               std::ldexp(1.0, -24) * c.k * std::abs(c.alpha) * mag +
                               std::ldexp(1.0, -20) * std::abs(old);
            ASSERT_NEAR(double(out[i * ldo + j]), want, tol) << "at " << i << ", " << j;
          }
          for (int j = c.n; j < ldo; ++j) {  // the pitch's padding is left alone
            ASSERT_EQ(out[i * ldo + j].bits, before[i * ldo + j].bits);
          }
        }
      }
    }
  }
}

TEST(HalfGemm, EveryPathMatchesFloat64Bfloat16) { check_all_paths<bfloat16_t>(); }
TEST(HalfGemm, EveryPathMatchesFloat64Float16) { check_all_paths<float16_t>(); }

// The ops: a decode step's Linear (x @ W.T), a row-major weight, a bias through addmm, a batch
// of matrices and gather_mm, against the float64 product of the same rounded values.
TEST(HalfGemm, MatmulAddmmGatherMmOfFewRows) {
  using test_util::random_array;
  for (Dtype dt : {bfloat16, float16}) {
    SCOPED_TRACE(dtype_name(dt));
    const double rtol = dt == bfloat16 ? 1.0 / 128 : 1.0 / 512;
    auto check = [&](const array& got, const array& x, const array& w) {
      array want = matmul(astype(x, float64), astype(w, float64));
      ASSERT_EQ(got.shape(), want.shape());
      EXPECT_EQ(got.dtype(), dt);
      EXPECT_TRUE(allclose(astype(got, float64), want, rtol, 1e-2).item<bool>());
    };
    array x = random_array({3, 200}, dt, 1), w = random_array({150, 200}, dt, 2);
    check(matmul(x, transpose(w)), x, transpose(w));
    array wr = random_array({200, 150}, dt, 3);
    check(matmul(x, wr), x, wr);
    array xb = random_array({2, 4, 200}, dt, 4);
    check(matmul(xb, transpose(w)), xb, transpose(w));
    array bias = random_array({150}, dt, 5);
    array got = addmm(bias, x, transpose(w), 1.0f, 1.0f);
    array want = matmul(astype(x, float64), astype(transpose(w), float64)) + astype(bias, float64);
    EXPECT_TRUE(allclose(astype(got, float64), want, rtol, 1e-2).item<bool>());
    array experts = random_array({3, 150, 200}, dt, 6);
    array g = gather_mm(x, swapaxes(experts, -1, -2), std::nullopt, array({2, 0, 1}, uint32));
    for (int e = 0; e < 3; ++e) {
      const int expert[] = {2, 0, 1};
      check(take(g, array(e), 0), x, transpose(take(experts, array(expert[e]), 0)));
    }
  }
}

}  // namespace
}  // namespace tessera
