// Tessera's own float32 GEMM (backend/cpu/gemm.h) against a scalar reference written here: for
// every output element, one std::fma chain per K block, added into C as gemm.h defines. The bytes
// must be equal: for every transpose, ragged shapes (tile and block edges), K across blocks,
// alpha / beta, padded leading dims, each vector width this CPU has, and (the suite runs under
// pools 1, 2 and 3) every pool size. A double-precision product checks the reference itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/amx_tiles.h"
#include "backend/cpu/gemm.h"
#include "tessera/tessera.h"
#include "test_util.h"

using namespace tessera;
using cpu::GemmIsa;

namespace {

struct Problem {
  int64_t m, n, k;
  bool ta, tb;
  int64_t lda, ldb, ldc;
  std::vector<float> a, b, c;

  float at_a(int64_t i, int64_t l) const { return ta ? a[l * lda + i] : a[i * lda + l]; }
  float at_b(int64_t l, int64_t j) const { return tb ? b[j * ldb + l] : b[l * ldb + j]; }
};

Problem make_problem(int64_t m, int64_t n, int64_t k, bool ta, bool tb, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Problem p{m, n, k, ta, tb, 0, 0, 0, {}, {}, {}};
  // Leading dims with a few elements of padding, as a view into a wider matrix has.
  p.lda = (ta ? m : k) + 3;
  p.ldb = (tb ? k : n) + 5;
  p.ldc = n + 2;
  p.a.resize(static_cast<size_t>((ta ? k : m) * p.lda));
  p.b.resize(static_cast<size_t>((tb ? n : k) * p.ldb));
  p.c.resize(static_cast<size_t>(m * p.ldc));
  for (float& v : p.a) v = dist(gen);
  for (float& v : p.b) v = dist(gen);
  for (float& v : p.c) v = dist(gen);
  return p;
}

// gemm.h's arithmetic, one element at a time.
std::vector<float> reference(const Problem& p, float alpha, float beta) {
  std::vector<float> c = p.c;
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      float& out = c[i * p.ldc + j];
      for (int64_t k0 = 0; k0 < p.k; k0 += cpu::kGemmKBlock) {
        float acc = 0.0f;
        for (int64_t l = k0; l < std::min(p.k, k0 + cpu::kGemmKBlock); ++l) {
          acc = std::fma(p.at_a(i, l), p.at_b(l, j), acc);
        }
        if (k0 > 0) {
          out = std::fma(alpha, acc, out);
        } else if (beta == 0.0f) {
          out = alpha * acc;
        } else {
          out = std::fma(alpha, acc, beta * out);
        }
      }
    }
  }
  return c;
}

std::vector<GemmIsa> supported_isas() {
  std::vector<GemmIsa> out;
  for (GemmIsa isa : {GemmIsa::Avx2, GemmIsa::Avx512}) {
    if (cpu::gemm_supported(isa)) out.push_back(isa);
  }
  return out;
}

const char* name(GemmIsa isa) { return isa == GemmIsa::Avx512 ? "AVX-512" : "AVX2"; }

}  // namespace

TEST(Gemm, EveryTransposeAndRaggedShapeHasTheBitsOfTheFmaChainReference) {
  if (!cpu::gemm_supported()) GTEST_SKIP() << "this CPU has neither AVX2 + FMA nor AVX-512";
  struct Shape3 {
    int64_t m, n, k;
  };
  // Tile edges (m % 12 of 1, 3, 4, 5, 8 and 10 rows: the 4-, 8- and 12-row edge kernels, into C
  // or a scratch tile; m % 6, n % 32, n % 16), a task's 96 rows and 256 columns, one K block
  // exactly, K across two and three blocks, a K of 1.
  const Shape3 shapes[] = {{8, 16, 1},     {13, 33, 7},    {37, 50, 300}, {96, 256, 256},
                           {101, 70, 513}, {25, 17, 600},  {200, 300, 64}, {64, 64, 20},
                           {22, 40, 9},    {15, 32, 260}};
  const float ab[][2] = {{1.0f, 0.0f}, {2.0f, 0.5f}, {-0.75f, 1.0f}};
  uint32_t seed = 1;
  for (const Shape3& s : shapes) {
    for (int t = 0; t < 4; ++t) {
      const Problem p = make_problem(s.m, s.n, s.k, t & 1, t & 2, seed++);
      for (const auto& [alpha, beta] : ab) {
        const std::vector<float> want = reference(p, alpha, beta);
        for (GemmIsa isa : supported_isas()) {
          SCOPED_TRACE(testing::Message() << s.m << "x" << s.n << "x" << s.k << " ta " << p.ta
                                          << " tb " << p.tb << " alpha " << alpha << " beta "
                                          << beta << " " << name(isa));
          std::vector<float> got = p.c;
          if (beta == 0.0f) {
            // beta == 0 never reads C: NaN there must not reach the result.
            for (float& v : got) v = std::numeric_limits<float>::quiet_NaN();
          }
          cpu::sgemm(p.ta, p.tb, p.m, p.n, p.k, alpha, p.a.data(), p.lda, p.b.data(), p.ldb,
                     beta, got.data(), p.ldc, isa);
          for (int64_t i = 0; i < p.m; ++i) {
            ASSERT_EQ(std::memcmp(got.data() + i * p.ldc, want.data() + i * p.ldc,
                                  sizeof(float) * p.n), 0)
                << "row " << i;
            // The padding between rows of C is left alone.
            for (int64_t j = p.n; j < p.ldc && beta != 0.0f; ++j) {
              ASSERT_EQ(got[i * p.ldc + j], p.c[i * p.ldc + j]);
            }
          }
        }
      }
      // The reference itself against a double-precision product.
      const std::vector<float> want = reference(p, 1.0f, 0.0f);
      for (int64_t i = 0; i < p.m; ++i) {
        for (int64_t j = 0; j < p.n; ++j) {
          double exact = 0.0, mag = 0.0;
          for (int64_t l = 0; l < p.k; ++l) {
            exact += double(p.at_a(i, l)) * p.at_b(l, j);
            mag += std::abs(double(p.at_a(i, l)) * p.at_b(l, j));
          }
          ASSERT_NEAR(want[i * p.ldc + j], exact, 1e-6 * mag + 1e-30);
        }
      }
    }
  }
}

TEST(Gemm, InfinitiesAndNanPropagateAsTheReference) {
  if (!cpu::gemm_supported()) GTEST_SKIP() << "this CPU has neither AVX2 + FMA nor AVX-512";
  Problem p = make_problem(20, 40, 30, false, false, 99);
  p.a[3 * p.lda + 5] = std::numeric_limits<float>::infinity();
  p.a[7 * p.lda + 1] = std::numeric_limits<float>::quiet_NaN();
  p.b[2 * p.ldb + 9] = -std::numeric_limits<float>::infinity();
  const std::vector<float> want = reference(p, 1.0f, 0.0f);
  for (GemmIsa isa : supported_isas()) {
    SCOPED_TRACE(name(isa));
    std::vector<float> got(p.c.size(), 0.0f);
    cpu::sgemm(false, false, p.m, p.n, p.k, 1.0f, p.a.data(), p.lda, p.b.data(), p.ldb, 0.0f,
               got.data(), p.ldc, isa);
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        const float w = want[i * p.ldc + j], g = got[i * p.ldc + j];
        if (std::isnan(w)) {
          ASSERT_TRUE(std::isnan(g)) << i << "," << j;
        } else {
          ASSERT_EQ(g, w) << i << "," << j;
        }
      }
    }
  }
}

TEST(Gemm, MatmulAndAddmmTakeTheKernelForFloat32) {
  if (!cpu::gemm_supported()) GTEST_SKIP() << "this CPU has neither AVX2 + FMA nor AVX-512";
  // A batch of 3 products (70 x 300) @ (300 x 40)^T-view, and addmm's alpha / beta.
  array a = test_util::random_array({3, 70, 300}, float32, 7);
  array bt = test_util::random_array({40, 300}, float32, 8);
  array c = test_util::random_array({70, 40}, float32, 9);
  array out = addmm(c, a, transpose(bt), 1.5f, -0.5f);
  eval(out);
  const std::vector<double> av = test_util::values(a), bv = test_util::values(bt),
                            cv = test_util::values(c), got = test_util::values(out);
  for (int64_t batch = 0; batch < 3; ++batch) {
    Problem p{70, 40, 300, false, true, 300, 300, 40, {}, {}, {}};
    p.a.assign(av.begin() + batch * 70 * 300, av.begin() + (batch + 1) * 70 * 300);
    p.b.assign(bv.begin(), bv.end());
    p.c.assign(cv.begin(), cv.end());
    const std::vector<float> want = reference(p, 1.5f, -0.5f);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(static_cast<float>(got[batch * 70 * 40 + i]), want[i]) << batch << ", " << i;
    }
  }
}

TEST(Gemm, BadCallsRaise) {
  float x = 0.0f;
  EXPECT_THROW(cpu::sgemm(false, false, 2, 2, 0, 1.0f, &x, 1, &x, 1, 0.0f, &x, 1),
               std::invalid_argument);
  if (!cpu::gemm_supported(GemmIsa::Avx512)) {
    EXPECT_THROW(cpu::sgemm(false, false, 1, 1, 1, 1.0f, &x, 1, &x, 1, 0.0f, &x, 1,
                            GemmIsa::Avx512),
                 std::invalid_argument);
  }
}

// ---- half-precision operands (hgemm) ----

namespace {

// p's operands rounded to T, and back to float (the values hgemm sees).
template <typename T>
struct HalfProblem {
  Problem widened;
  std::vector<T> a, b;
};

template <typename T>
HalfProblem<T> make_half_problem(int64_t m, int64_t n, int64_t k, bool ta, bool tb, uint32_t seed,
                                 int64_t pad) {
  HalfProblem<T> h{make_problem(m, n, k, ta, tb, seed), {}, {}};
  Problem& p = h.widened;
  // Leading dims of either parity: odd ones take the packers' element-by-element paths.
  p.lda = (ta ? m : k) + pad;
  p.ldb = (tb ? k : n) + pad;
  p.a.resize(static_cast<size_t>((ta ? k : m) * p.lda));
  p.b.resize(static_cast<size_t>((tb ? n : k) * p.ldb));
  for (auto [src, dst] : {std::pair{&p.a, &h.a}, std::pair{&p.b, &h.b}}) {
    dst->resize(src->size());
    for (size_t i = 0; i < src->size(); ++i) {
      (*dst)[i] = T(std::sin(static_cast<float>(i) * 0.7f + static_cast<float>(seed)));
      (*src)[i] = static_cast<float>((*dst)[i]);
    }
  }
  return h;
}

template <typename T>
void check_half_gemm(cpu::HalfKernel kernel) {
  struct Shape3 {
    int64_t m, n, k;
  };
  // Tile and block edges as above, odd K (a pair with one value), K across blocks (the tiles'
  // blocks are 2,048 values).
  const Shape3 shapes[] = {{13, 33, 7},  {37, 50, 301}, {96, 64, 256},
                           {25, 17, 513}, {64, 40, 1},   {33, 20, 2100}};
  // alpha 1 with beta 0, 1 and another: the tiles' three ways of starting C.
  const float ab[][2] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {1.0f, 0.5f}, {-0.75f, 0.5f}};
  uint32_t seed = 11;
  for (const Shape3& s : shapes) {
    for (int t = 0; t < 4; ++t) {
      for (int64_t pad : {2, 3}) {
        const HalfProblem<T> h = make_half_problem<T>(s.m, s.n, s.k, t & 1, t & 2, seed++, pad);
        const Problem& p = h.widened;
        for (const auto& [alpha, beta] : ab) {
          SCOPED_TRACE(testing::Message() << s.m << "x" << s.n << "x" << s.k << " ta " << p.ta
                                          << " tb " << p.tb << " pad " << pad << " alpha "
                                          << alpha << " beta " << beta << " kernel "
                                          << int(kernel));
          std::vector<float> got = p.c;
          if (beta == 0.0f) {
            for (float& v : got) v = std::numeric_limits<float>::quiet_NaN();
          }
          cpu::hgemm<T>(p.ta, p.tb, p.m, p.n, p.k, alpha, h.a.data(), p.lda, h.b.data(), p.ldb,
                        beta, got.data(), p.ldc, kernel);
          const std::vector<float> want = reference(p, alpha, beta);
          for (int64_t i = 0; i < p.m; ++i) {
            if (kernel == cpu::HalfKernel::Widen) {  // sgemm's bits on the widened operands
              ASSERT_EQ(std::memcmp(got.data() + i * p.ldc, want.data() + i * p.ldc,
                                    sizeof(float) * p.n), 0)
                  << "row " << i;
              continue;
            }
            // Pairs and tiles: other summation orders; within float32 rounding of the exact sum.
            for (int64_t j = 0; j < p.n; ++j) {
              double exact = beta * double(p.c[i * p.ldc + j]), mag = std::abs(exact);
              for (int64_t l = 0; l < p.k; ++l) {
                exact += alpha * double(p.at_a(i, l)) * p.at_b(l, j);
                mag += std::abs(alpha * double(p.at_a(i, l)) * p.at_b(l, j));
              }
              ASSERT_NEAR(got[i * p.ldc + j], exact, double(p.k + 4) * 0x1p-24 * mag + 1e-30)
                  << i << "," << j;
            }
          }
        }
      }
    }
  }
}

}  // namespace

TEST(Gemm, HalfOperandsWidenedAsPackedHaveSgemmsBits) {
  if (!cpu::gemm_supported()) GTEST_SKIP() << "this CPU has neither AVX2 + FMA nor AVX-512";
  check_half_gemm<float16_t>(cpu::HalfKernel::Widen);
  check_half_gemm<bfloat16_t>(cpu::HalfKernel::Widen);
}

TEST(Gemm, BfloatPairsMatchTheExactSum) {
  if (!cpu::gemm_supported() || !cpu::hgemm_supported(cpu::HalfKernel::Pairs)) {
    GTEST_SKIP() << "this CPU has no AVX512_BF16";
  }
  check_half_gemm<bfloat16_t>(cpu::HalfKernel::Pairs);
}

TEST(Gemm, BfloatTilesMatchTheExactSum) {
  if (!cpu::gemm_supported() || !cpu::hgemm_supported(cpu::HalfKernel::Tiles)) {
    GTEST_SKIP() << "this CPU (or its kernel) has no AMX-BF16";
  }
  check_half_gemm<bfloat16_t>(cpu::HalfKernel::Tiles);
}

// matmul / addmm / a batched product of bfloat16 and float16 with more than 16 rows (the GEMM,
// not the skinny path) against a float64 product of the same half values, rounded once.
TEST(Gemm, HalfMatmulOfManyRowsMatchesFloat64) {
  for (Dtype dt : {bfloat16, float16}) {
    SCOPED_TRACE(dtype_name(dt));
    array a = astype(test_util::random_array({2, 70, 300}, float32, 17), dt);
    array bt = astype(test_util::random_array({40, 300}, float32, 18), dt);
    array c = astype(test_util::random_array({70, 40}, float32, 19), dt);
    array out = addmm(c, a, transpose(bt), 1.5f, -0.5f);
    array a2 = astype(test_util::random_array({70, 300}, float32, 20), dt);
    array b2 = astype(test_util::random_array({300, 40}, float32, 21), dt);
    array prod = matmul(transpose(b2), transpose(a2));  // (40 x 300) @ (300 x 70): ta and tb views
    eval({out, prod});
    const std::vector<double> av = test_util::values(a), bv = test_util::values(bt),
                              cv = test_util::values(c), got = test_util::values(out),
                              a2v = test_util::values(a2), b2v = test_util::values(b2),
                              got2 = test_util::values(prod);
    const double ulp = dt == bfloat16 ? 0x1p-8 : 0x1p-11;
    for (int64_t batch = 0; batch < 2; ++batch) {
      for (int64_t i = 0; i < 70; ++i) {
        for (int64_t j = 0; j < 40; ++j) {
          double s = 0.0, mag = 0.0;
          for (int64_t l = 0; l < 300; ++l) {
            const double t = av[(batch * 70 + i) * 300 + l] * bv[j * 300 + l];
            s += t;
            mag += std::abs(t);
          }
          const double want = 1.5 * s - 0.5 * cv[i * 40 + j];
          ASSERT_NEAR(got[(batch * 70 + i) * 40 + j], want, ulp * std::abs(want) + 1e-5 * (1.5 * mag + 1.0))
              << batch << ", " << i << ", " << j;
          if (batch == 0) {
            double s2 = 0.0, mag2 = 0.0;
            for (int64_t l = 0; l < 300; ++l) {
              s2 += b2v[l * 40 + j] * a2v[i * 300 + l];
              mag2 += std::abs(b2v[l * 40 + j] * a2v[i * 300 + l]);
            }
            ASSERT_NEAR(got2[j * 70 + i], s2, ulp * std::abs(s2) + 1e-5 * mag2) << j << ", " << i;
          }
        }
      }
    }
  }
}

#if defined(__x86_64__)
// amx_tiles.h's packers and product (bfloat16 attention's products) against a float64 product of
// the same values: b given as rows of b^T (pairs_of_transpose: odd k, an unaligned start) and as
// rows of b (pairs_of_rows), sizes that are not whole tiles (zero padding), with accumulation.
TEST(Gemm, TileProductOfPackedPairsMatchesFloat64) {
  if (!cpu::hgemm_supported(cpu::HalfKernel::Tiles)) GTEST_SKIP() << "no AMX-BF16 here";
  const int m = 37, n = 45, k = 71, mp = 48, np = 48, kp = 96;
  std::vector<bfloat16_t> a(static_cast<size_t>(mp) * kp), bt(1 + n * k), b(k * n);
  for (int i = 0; i < m; ++i) {
    for (int l = 0; l < k; ++l) a[i * kp + l] = bfloat16_t(std::sin(0.3f * i + 0.7f * l));
  }
  for (int j = 0; j < n; ++j) {
    for (int l = 0; l < k; ++l) {
      b[l * n + j] = bt[1 + j * k + l] = bfloat16_t(std::cos(0.9f * j - 0.4f * l));
    }
  }
  for (int from_rows = 0; from_rows < 2; ++from_rows) {
    SCOPED_TRACE(from_rows ? "pairs_of_rows" : "pairs_of_transpose (unaligned, odd k)");
    std::vector<uint32_t> pairs(static_cast<size_t>(kp / 2) * np, 0xDEADBEEFu);
    if (from_rows) {
      cpu::pairs_of_rows(b.data(), n, k, n, np, kp, pairs.data(), np);
    } else {
      cpu::pairs_of_transpose(bt.data() + 1, k, n, k, np, kp, pairs.data(), np);
    }
    std::vector<float> c(static_cast<size_t>(mp) * np, 0.5f);
    {
      cpu::TileScope scope;
      cpu::tile_product(mp, np, kp, a.data(), kp, pairs.data(), np, true, c.data(), np);
    }
    for (int i = 0; i < mp; ++i) {
      for (int j = 0; j < np; ++j) {
        double want = 0.5, mag = 0.5;
        for (int l = 0; l < k && i < m && j < n; ++l) {
          const double t = double(float(a[i * kp + l])) * double(float(b[l * n + j]));
          want += t;
          mag += std::abs(t);
        }
        ASSERT_NEAR(c[i * np + j], want, (k + 2) * 0x1p-24 * mag) << i << "," << j;
      }
    }
  }
}
#endif
