// tessera::fast (rms_norm, layer_norm, rope, scaled_dot_product_attention) against naive loops
// in double written here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/tessera.h"
#include "test_util.h"

using namespace tessera;

namespace {

using test_util::numel;
using test_util::random_array;
using test_util::seeded_values;
// Row-major values of any array (rounded to its dtype), read straight from its buffer.
const auto& to_vec = test_util::values;

void expect_all_near(const std::vector<double>& got, const std::vector<double>& ref, double tol) {
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_NEAR(got[i], ref[i], tol * (1 + std::abs(ref[i]))) << "at flat index " << i;
  }
}

template <typename F>
void expect_throws_with(F&& f, const std::string& needle) {
  try {
    f();
    FAIL() << "expected std::invalid_argument containing '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Normalise rows of length d: (x - mu) / sqrt(var + eps) (center=false: x / sqrt(ms + eps)).
std::vector<double> naive_norm(const std::vector<double>& x, int d, double eps, bool center,
                               const std::vector<double>* w, const std::vector<double>* b) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    const double* row = x.data() + r * d;
    double mu = 0, var = 0;
    if (center) {
      for (int i = 0; i < d; ++i) mu += row[i];
      mu /= d;
    }
    for (int i = 0; i < d; ++i) var += (row[i] - mu) * (row[i] - mu);
    var /= d;
    for (int i = 0; i < d; ++i) {
      double y = (row[i] - mu) / std::sqrt(var + eps);
      if (w) y *= (*w)[i];
      if (b) y += (*b)[i];
      out[r * d + i] = y;
    }
  }
  return out;
}

}  // namespace

TEST(RmsNorm, MatchesNaiveLoopWithAndWithoutWeight) {
  array x = random_array({2, 3, 8}, float32, 1), w = random_array({8}, float32, 2);
  auto xv = to_vec(x), wv = to_vec(w);
  expect_all_near(to_vec(fast::rms_norm(x, w, 1e-5f)), naive_norm(xv, 8, 1e-5, false, &wv, nullptr),
                  1e-5);
  expect_all_near(to_vec(fast::rms_norm(x, std::nullopt, 1e-2f)),
                  naive_norm(xv, 8, 1e-2, false, nullptr, nullptr), 1e-5);
  // A transposed (non-contiguous) input normalises along its own last axis.
  array xt = transpose(random_array({8, 5}, float32, 3));
  expect_all_near(to_vec(fast::rms_norm(xt, std::nullopt, 1e-5f)),
                  naive_norm(to_vec(xt), 8, 1e-5, false, nullptr, nullptr), 1e-5);
}

TEST(RmsNorm, DtypesAndErrors) {
  array xh = random_array({4, 16}, float16, 4);
  array out = fast::rms_norm(xh, std::nullopt, 1e-5f);
  EXPECT_EQ(out.dtype(), float16);
  expect_all_near(to_vec(out), naive_norm(to_vec(xh), 16, 1e-5, false, nullptr, nullptr), 2e-3);
  EXPECT_EQ(fast::rms_norm(random_array({4, 16}, bfloat16, 5), ones({16}, float32), 1e-5f).dtype(),
            float32);
  EXPECT_EQ(fast::rms_norm(ones({2, 3}, float64), std::nullopt, 1e-5f).dtype(), float64);
  expect_throws_with([] { fast::rms_norm(array(1.0f), std::nullopt, 1e-5f); }, "rms_norm");
  expect_throws_with([] { fast::rms_norm(ones({2, 3}), ones({2, 3}), 1e-5f); }, "(2,3)");
  expect_throws_with([] { fast::rms_norm(ones({2, 3}), ones({4}), 1e-5f); }, "(4)");
  expect_throws_with([] { fast::rms_norm(ones({2, 3}, int32), std::nullopt, 1e-5f); }, "int32");
}

TEST(LayerNorm, MatchesNaiveLoopForEveryAffineCombination) {
  array x = random_array({3, 5, 12}, float32, 11);
  array w = random_array({12}, float32, 12), b = random_array({12}, float32, 13);
  auto xv = to_vec(x), wv = to_vec(w), bv = to_vec(b);
  expect_all_near(to_vec(fast::layer_norm(x, w, b, 1e-5f)), naive_norm(xv, 12, 1e-5, true, &wv, &bv),
                  1e-5);
  expect_all_near(to_vec(fast::layer_norm(x, w, std::nullopt, 1e-5f)),
                  naive_norm(xv, 12, 1e-5, true, &wv, nullptr), 1e-5);
  expect_all_near(to_vec(fast::layer_norm(x, std::nullopt, b, 1e-5f)),
                  naive_norm(xv, 12, 1e-5, true, nullptr, &bv), 1e-5);
  expect_all_near(to_vec(fast::layer_norm(x, std::nullopt, std::nullopt, 0.5f)),
                  naive_norm(xv, 12, 0.5, true, nullptr, nullptr), 1e-5);
}

TEST(LayerNorm, DtypesAndErrors) {
  array xb = random_array({2, 32}, bfloat16, 14);
  array out = fast::layer_norm(xb, std::nullopt, std::nullopt, 1e-5f);
  EXPECT_EQ(out.dtype(), bfloat16);
  expect_all_near(to_vec(out), naive_norm(to_vec(xb), 32, 1e-5, true, nullptr, nullptr), 1e-2);
  EXPECT_EQ(fast::layer_norm(ones({2, 4}, float16), ones({4}, float32), ones({4}, float64), 1e-5f)
                .dtype(),
            float64);
  expect_throws_with([] { fast::layer_norm(array(1.0f), std::nullopt, std::nullopt, 1e-5f); },
                     "layer_norm");
  expect_throws_with([] { fast::layer_norm(ones({2, 3}), std::nullopt, ones({2}), 1e-5f); },
                     "bias");
  expect_throws_with([] { fast::layer_norm(ones({2, 3}), ones({1, 3}), std::nullopt, 1e-5f); },
                     "weight");
  expect_throws_with(
      [] { fast::layer_norm(ones({2, 3}, uint8), std::nullopt, std::nullopt, 1e-5f); }, "uint8");
}

namespace {

// RoPE on (B, N, T, D) data in double. offsets: one per batch (or one for all).
std::vector<double> naive_rope(const std::vector<double>& x, int B, int N, int T, int D, int dims,
                               bool traditional, double base, double scale,
                               const std::vector<int>& offsets, const std::vector<double>* freqs) {
  std::vector<double> out = x;
  int half = dims / 2;
  for (int b = 0; b < B; ++b)
    for (int n = 0; n < N; ++n)
      for (int t = 0; t < T; ++t) {
        size_t row = ((static_cast<size_t>(b) * N + n) * T + t) * D;
        double pos = (offsets[offsets.size() == 1 ? 0 : b] + t) * scale;
        for (int i = 0; i < half; ++i) {
          double inv = freqs ? 1.0 / (*freqs)[i] : std::exp(-i * std::log(base) / half);
          double th = pos * inv;
          int i1 = traditional ? 2 * i : i, i2 = traditional ? 2 * i + 1 : i + half;
          double x1 = x[row + i1], x2 = x[row + i2];
          out[row + i1] = x1 * std::cos(th) - x2 * std::sin(th);
          out[row + i2] = x1 * std::sin(th) + x2 * std::cos(th);
        }
      }
  return out;
}

}  // namespace

TEST(Rope, MatchesNaiveLoopBothLayouts) {
  for (bool traditional : {false, true}) {
    SCOPED_TRACE(traditional ? "traditional" : "halves");
    array x = random_array({2, 3, 5, 8}, float32, 21);
    auto xv = to_vec(x);
    // Full rotation, offset 3, scale 0.5.
    expect_all_near(to_vec(fast::rope(x, 8, traditional, 10000.0f, 0.5f, 3)),
                    naive_rope(xv, 2, 3, 5, 8, 8, traditional, 10000.0, 0.5, {3}, nullptr), 1e-5);
    // Partial rotation: the last 4 features pass through.
    expect_all_near(to_vec(fast::rope(x, 4, traditional, 100.0f, 1.0f, 0)),
                    naive_rope(xv, 2, 3, 5, 8, 4, traditional, 100.0, 1.0, {0}, nullptr), 1e-5);
    // Per-batch offsets from an array.
    expect_all_near(
        to_vec(fast::rope(x, 8, traditional, 10000.0f, 1.0f, array({2, 7}, int32))),
        naive_rope(xv, 2, 3, 5, 8, 8, traditional, 10000.0, 1.0, {2, 7}, nullptr), 1e-5);
    // Explicit frequencies.
    array freqs = array({1.0f, 2.5f, 9.0f, 40.0f});
    std::vector<double> fv{1.0, 2.5, 9.0, 40.0};
    expect_all_near(to_vec(fast::rope(x, 8, traditional, std::nullopt, 1.0f, 1, freqs)),
                    naive_rope(xv, 2, 3, 5, 8, 8, traditional, 0.0, 1.0, {1}, &fv), 1e-5);
  }
}

TEST(Rope, RanksDtypesAndErrors) {
  // 3-D input (B, T, D) and 5-D input (B, A, N, T, D).
  array x3 = random_array({2, 4, 6}, float32, 22);
  array r3 = fast::rope(x3, 6, false, 10000.0f, 1.0f, 0);
  EXPECT_EQ(r3.shape(), x3.shape());
  expect_all_near(to_vec(r3), naive_rope(to_vec(x3), 2, 1, 4, 6, 6, false, 10000.0, 1.0, {0}, nullptr),
                  1e-5);
  array x5 = random_array({2, 2, 3, 4, 6}, float32, 23);
  array r5 = fast::rope(x5, 6, true, 10000.0f, 1.0f, 2);
  EXPECT_EQ(r5.shape(), x5.shape());
  expect_all_near(to_vec(r5), naive_rope(to_vec(x5), 2, 6, 4, 6, 6, true, 10000.0, 1.0, {2}, nullptr),
                  1e-5);
  array xh = random_array({1, 2, 3, 8}, float16, 24);
  array rh = fast::rope(xh, 8, false, 10000.0f, 1.0f, 0);
  EXPECT_EQ(rh.dtype(), float16);
  expect_all_near(to_vec(rh), naive_rope(to_vec(xh), 1, 2, 3, 8, 8, false, 10000.0, 1.0, {0}, nullptr),
                  5e-3);

  array x = ones({1, 2, 3, 8});
  expect_throws_with([] { fast::rope(ones({3, 8}), 8, false, 10000.0f, 1.0f, 0); }, "(3,8)");
  expect_throws_with([&] { fast::rope(x, 5, false, 10000.0f, 1.0f, 0); }, "5");
  expect_throws_with([&] { fast::rope(x, 10, false, 10000.0f, 1.0f, 0); }, "10");
  expect_throws_with([&] { fast::rope(x, 8, false, std::nullopt, 1.0f, 0); }, "base");
  expect_throws_with([&] { fast::rope(x, 8, false, 1.0f, 1.0f, 0, ones({4})); }, "base");
  expect_throws_with([&] { fast::rope(x, 8, false, std::nullopt, 1.0f, 0, ones({3})); }, "(3)");
  expect_throws_with([&] { fast::rope(x, 8, false, 1e4f, 1.0f, array(1.5f)); }, "float32");
  expect_throws_with([&] { fast::rope(x, 8, false, 1e4f, 1.0f, array({1, 2, 3}, int32)); }, "(3)");
  expect_throws_with([] { fast::rope(ones({1, 2, 8}, int32), 8, false, 1e4f, 1.0f, 0); }, "int32");
}

namespace {

// Attention in double. mask: optional (B, Hq, Lq, Lk) additive values (-inf excludes).
std::vector<double> naive_sdpa(const std::vector<double>& q, const std::vector<double>& k,
                               const std::vector<double>& v, int B, int Hq, int Hkv, int Lq,
                               int Lk, int D, int Dv, double scale, bool causal,
                               const std::vector<double>* mask, const std::vector<double>* sinks) {
  std::vector<double> out(static_cast<size_t>(B) * Hq * Lq * Dv, 0.0);
  int rep = Hq / Hkv;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < Hq; ++h)
      for (int i = 0; i < Lq; ++i) {
        int hk = h / rep;
        std::vector<double> sc(Lk);
        double mx = sinks ? (*sinks)[h] : -INFINITY;
        for (int j = 0; j < Lk; ++j) {
          double acc = 0;
          for (int d = 0; d < D; ++d)
            acc += q[((b * Hq + h) * Lq + i) * D + d] * k[((b * Hkv + hk) * Lk + j) * D + d];
          acc *= scale;
          if (causal && j > i + (Lk - Lq)) acc = -INFINITY;
          if (mask) acc += (*mask)[((b * Hq + h) * Lq + i) * Lk + j];
          sc[j] = acc;
          mx = std::max(mx, acc);
        }
        double z = sinks ? std::exp((*sinks)[h] - mx) : 0.0;
        for (int j = 0; j < Lk; ++j) z += std::exp(sc[j] - mx);
        for (int j = 0; j < Lk; ++j) {
          double p = std::exp(sc[j] - mx) / z;
          for (int d = 0; d < Dv; ++d)
            out[((b * Hq + h) * Lq + i) * Dv + d] += p * v[((b * Hkv + hk) * Lk + j) * Dv + d];
        }
      }
  return out;
}

}  // namespace

TEST(ScaledDotProductAttention, NoMaskAndCausal) {
  const int B = 2, H = 3, Lq = 4, Lk = 6, D = 8, Dv = 5;
  array q = random_array({B, H, Lq, D}, float32, 31), k = random_array({B, H, Lk, D}, float32, 32);
  array v = random_array({B, H, Lk, Dv}, float32, 33);
  auto qv = to_vec(q), kv = to_vec(k), vv = to_vec(v);
  float scale = 1.0f / std::sqrt(static_cast<float>(D));
  array out = fast::scaled_dot_product_attention(q, k, v, scale);
  EXPECT_EQ(out.shape(), (Shape{B, H, Lq, Dv}));
  expect_all_near(to_vec(out),
                  naive_sdpa(qv, kv, vv, B, H, H, Lq, Lk, D, Dv, scale, false, nullptr, nullptr),
                  1e-5);
  expect_all_near(to_vec(fast::scaled_dot_product_attention(q, k, v, scale, "causal")),
                  naive_sdpa(qv, kv, vv, B, H, H, Lq, Lk, D, Dv, scale, true, nullptr, nullptr),
                  1e-5);
}

TEST(ScaledDotProductAttention, BoolAndAdditiveMasks) {
  const int B = 1, H = 2, Lq = 3, Lk = 5, D = 4;
  array q = random_array({B, H, Lq, D}, float32, 41), k = random_array({B, H, Lk, D}, float32, 42);
  array v = random_array({B, H, Lk, D}, float32, 43);
  auto qv = to_vec(q), kv = to_vec(k), vv = to_vec(v);
  // A bool mask of shape (Lq, Lk) broadcast over batch and heads; every row keeps a key.
  std::vector<bool> keep;
  std::vector<double> additive_ref;
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < Lq; ++i)
      for (int j = 0; j < Lk; ++j) {
        bool kp = (i + j) % 3 != 1;
        if (h == 0) keep.push_back(kp);
        additive_ref.push_back(kp ? 0.0 : -INFINITY);
      }
  std::vector<uint8_t> keep_bytes(keep.begin(), keep.end());
  array mask = astype(array(keep_bytes.data(), Shape{Lq, Lk}), bool_);
  expect_all_near(
      to_vec(fast::scaled_dot_product_attention(q, k, v, 0.7f, "", mask)),
      naive_sdpa(qv, kv, vv, B, H, H, Lq, Lk, D, D, 0.7, false, &additive_ref, nullptr), 1e-5);
  // An additive float mask per head.
  array add_mask = random_array({H, Lq, Lk}, float32, 44);
  auto am = to_vec(add_mask);
  expect_all_near(to_vec(fast::scaled_dot_product_attention(q, k, v, 0.7f, "array", add_mask)),
                  naive_sdpa(qv, kv, vv, B, H, H, Lq, Lk, D, D, 0.7, false, &am, nullptr), 1e-5);
}

// Keys over several of the kernel's blocks (256) and queries over several of its tiles, with
// grouped heads: the online softmax's rescaling between blocks, and each tile's causal limit.
TEST(ScaledDotProductAttention, LongKeysStreamThroughBlocks) {
  const int B = 1, Hq = 6, Hkv = 2, Lq = 70, Lk = 600, D = 16;
  array q = random_array({B, Hq, Lq, D}, float32, 61), k = random_array({B, Hkv, Lk, D}, float32, 62);
  array v = random_array({B, Hkv, Lk, D}, float32, 63);
  auto qv = to_vec(q), kv = to_vec(k), vv = to_vec(v);
  for (bool causal : {false, true}) {
    expect_all_near(
        to_vec(fast::scaled_dot_product_attention(q, k, v, 0.6f, causal ? "causal" : "")),
        naive_sdpa(qv, kv, vv, B, Hq, Hkv, Lq, Lk, D, D, 0.6, causal, nullptr, nullptr), 1e-5);
  }
  // bfloat16 (its products on AMX tiles where the CPU has them), with a mask and with sinks:
  // against the float64 attention of the same rounded values, to bfloat16's rounding.
  array qb = astype(q, bfloat16), kb = astype(k, bfloat16), vb = astype(v, bfloat16);
  auto qbv = to_vec(qb), kbv = to_vec(kb), vbv = to_vec(vb);
  array add_mask = random_array({Hq, Lq, Lk}, bfloat16, 66);
  array bsinks = random_array({Hq}, bfloat16, 67);
  auto amv = to_vec(add_mask), bsv = to_vec(bsinks);
  std::vector<double> mask_ref;  // broadcast over the batch (B = 1)
  for (double m : amv) mask_ref.push_back(m);
  expect_all_near(to_vec(fast::scaled_dot_product_attention(qb, kb, vb, 0.6f, "causal")),
                  naive_sdpa(qbv, kbv, vbv, B, Hq, Hkv, Lq, Lk, D, D, 0.6, true, nullptr, nullptr),
                  1e-2);
  expect_all_near(
      to_vec(fast::scaled_dot_product_attention(qb, kb, vb, 0.6f, "array", add_mask, bsinks)),
      naive_sdpa(qbv, kbv, vbv, B, Hq, Hkv, Lq, Lk, D, D, 0.6, false, &mask_ref, &bsv), 1e-2);
  // One query (decode) against all of them, with sinks.
  array q1 = random_array({B, Hq, 1, D}, float32, 64), sinks = random_array({Hq}, float32, 65);
  auto q1v = to_vec(q1), sv = to_vec(sinks);
  expect_all_near(
      to_vec(fast::scaled_dot_product_attention(q1, k, v, 0.6f, "", std::nullopt, sinks)),
      naive_sdpa(q1v, kv, vv, B, Hq, Hkv, 1, Lk, D, D, 0.6, false, nullptr, &sv), 1e-5);
}

TEST(ScaledDotProductAttention, GroupedQueryHeadsAndSinks) {
  const int B = 2, Hq = 4, Hkv = 2, L = 5, D = 6;
  array q = random_array({B, Hq, L, D}, float32, 51), k = random_array({B, Hkv, L, D}, float32, 52);
  array v = random_array({B, Hkv, L, D}, float32, 53);
  auto qv = to_vec(q), kv = to_vec(k), vv = to_vec(v);
  expect_all_near(to_vec(fast::scaled_dot_product_attention(q, k, v, 0.5f, "causal")),
                  naive_sdpa(qv, kv, vv, B, Hq, Hkv, L, L, D, D, 0.5, true, nullptr, nullptr), 1e-5);
  array sinks = random_array({Hq}, float32, 54);
  auto sv = to_vec(sinks);
  expect_all_near(
      to_vec(fast::scaled_dot_product_attention(q, k, v, 0.5f, "", std::nullopt, sinks)),
      naive_sdpa(qv, kv, vv, B, Hq, Hkv, L, L, D, D, 0.5, false, nullptr, &sv), 1e-5);
  // Half precision follows the inputs' dtype.
  array qh = astype(q, float16), kh = astype(k, float16), vh = astype(v, float16);
  array oh = fast::scaled_dot_product_attention(qh, kh, vh, 0.5f);
  EXPECT_EQ(oh.dtype(), float16);
  expect_all_near(to_vec(oh),
                  naive_sdpa(to_vec(qh), to_vec(kh), to_vec(vh), B, Hq, Hkv, L, L, D, D, 0.5, false,
                             nullptr, nullptr),
                  1e-2);
}

TEST(ScaledDotProductAttention, Errors) {
  array q = ones({1, 4, 3, 8}), k = ones({1, 2, 5, 8}), v = ones({1, 2, 5, 8});
  expect_throws_with([&] { fast::scaled_dot_product_attention(ones({4, 3, 8}), k, v, 1.0f); },
                     "(4,3,8)");
  expect_throws_with([&] { fast::scaled_dot_product_attention(q, k, v, 1.0f, "sliding"); },
                     "sliding");
  expect_throws_with(
      [&] { fast::scaled_dot_product_attention(q, k, v, 1.0f, "causal", ones({3, 5}, bool_)); },
      "causal");
  expect_throws_with(
      [&] { fast::scaled_dot_product_attention(q, ones({1, 2, 5, 7}), v, 1.0f); }, "(1,2,5,7)");
  expect_throws_with(
      [&] { fast::scaled_dot_product_attention(ones({1, 3, 3, 8}), k, v, 1.0f); }, "multiple");
  expect_throws_with(
      [&] { fast::scaled_dot_product_attention(q, k, ones({2, 2, 5, 8}), 1.0f); }, "batch");
  expect_throws_with(
      [&] { fast::scaled_dot_product_attention(q, k, v, 1.0f, "", ones({3, 5}, float64)); },
      "float64");
  expect_throws_with(
      [&] {
        fast::scaled_dot_product_attention(q, k, v, 1.0f, "", std::nullopt, ones({3}));
      },
      "sinks");
  expect_throws_with(
      [&] {
        fast::scaled_dot_product_attention(ones({1, 1, 2, 2}, int32), ones({1, 1, 2, 2}, int32),
                                           ones({1, 1, 2, 2}, int32), 1.0f);
      },
      "int32");
}

TEST(Fast, GradientsFlowThroughComposites) {
  // d/dx sum(rms_norm(x)) for one row x in R^n, r = sqrt(mean(x^2) + eps):
  // dy_i/dx_j = delta_ij / r - x_i x_j / (n r^3)  ->  g_j = 1/r - x_j * sum(x) / (n r^3).
  array x = random_array({6}, float32, 61);
  auto g = grad([](const array& a) { return sum(fast::rms_norm(a, std::nullopt, 1e-5f)); })(x);
  auto xv = to_vec(x), gv = to_vec(g);
  double ms = 0, sx = 0;
  for (double e : xv) {
    ms += e * e / 6;
    sx += e;
  }
  double r = std::sqrt(ms + 1e-5);
  for (int j = 0; j < 6; ++j) EXPECT_NEAR(gv[j], 1 / r - xv[j] * sx / (6 * r * r * r), 1e-4);
  // Attention: gradient w.r.t. v of sum(out) is the column sums of the softmax weights; with one
  // query, those are the weights themselves.
  array q = random_array({1, 1, 1, 4}, float32, 62), k = random_array({1, 1, 3, 4}, float32, 63);
  array v = random_array({1, 1, 3, 2}, float32, 64);
  auto gvv = grad(
      [&](const std::vector<array>& in) {
        return sum(fast::scaled_dot_product_attention(in[0], in[1], in[2], 1.0f));
      },
      2)({q, k, v});
  auto qv = to_vec(q), kv = to_vec(k), gvv0 = to_vec(gvv[0]);
  std::vector<double> w(3);
  double z = 0;
  for (int j = 0; j < 3; ++j) {
    double sc = 0;
    for (int d = 0; d < 4; ++d) sc += qv[d] * kv[j * 4 + d];
    w[j] = std::exp(sc);
    z += w[j];
  }
  for (int j = 0; j < 3; ++j)
    for (int d = 0; d < 2; ++d) EXPECT_NEAR(gvv0[j * 2 + d], w[j] / z, 1e-5);
}
