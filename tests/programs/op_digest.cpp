// Prints one line per op: its name and a hash of the result's bytes. The pool-size test
// (tests/cpp/test_thread_pool.cpp) runs it under TESSERA_NUM_THREADS=1, 2 and 3 and requires the
// same lines: results may depend on an op's sizes, never on how many threads computed them.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace mx = tessera;

namespace {

uint64_t fnv1a(const mx::array& a) {
  const auto* p = static_cast<const unsigned char*>(a.data<void>());
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < a.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void show(const char* name, mx::array a) {
  a = mx::copy(a);  // row-contiguous, so the bytes hashed are the logical elements
  mx::eval(a);
  std::printf("%s %016llx\n", name, static_cast<unsigned long long>(fnv1a(a)));
}

}  // namespace

int main() {
  const int n = (1 << 20) + 3;
  auto key = mx::random::key(42);
  auto x = mx::random::normal({n}, mx::float32, 0.0f, 1.0f, key);
  auto rows2 = mx::reshape(mx::slice(x, {0}, {2 * 65537}), {2, 65537});
  auto rows3 = mx::reshape(mx::slice(x, {0}, {3 * 200001}), {3, 200001});
  auto cols = mx::reshape(mx::slice(x, {0}, {1024 * 1000}), {1024, 1000});
  show("normal", x);
  show("sum", mx::sum(x));
  show("prod", mx::prod(mx::add(mx::multiply(x, mx::array(1e-3f)), mx::array(1.0f))));
  show("mean", mx::mean(x));
  show("var", mx::var(x));
  show("sum_rows2", mx::sum(rows2, 1));
  show("sum_rows3", mx::sum(rows3, 1));
  show("sum_axis0", mx::sum(cols, 0));
  show("sum_axis1", mx::sum(cols, 1));
  show("max_rows2", mx::max(rows2, 1));
  show("logsumexp", mx::logsumexp(x));
  show("logsumexp_rows", mx::logsumexp(cols, 1));
  show("softmax_rows", mx::softmax(cols, std::vector<int>{1}));
  show("cumsum", mx::cumsum(x));
  show("cumsum_axis0", mx::cumsum(cols, 0));
  show("exp", mx::exp(x));
  show("sin", mx::sin(x));
  show("argmax_rows", mx::argmax(cols, 1));
  show("sort", mx::sort(x));
  show("matmul", mx::matmul(cols, mx::transpose(cols)));
  show("uniform", mx::random::uniform({n}, mx::float32, key));

  // Decode-sized products in bfloat16 (1 and 6 rows, columns split over the pool): the dense one
  // and the 4-bit one of mlx-lm's quantized models.
  auto w_half = mx::astype(mx::reshape(mx::slice(x, {0}, {1000 * 576}), {1000, 576}), mx::bfloat16);
  auto wq = mx::quantize(w_half, 64, 4);
  for (int m : {1, 6}) {
    auto xr = mx::astype(mx::reshape(mx::slice(x, {5}, {5 + m * 576}), {m, 576}), mx::bfloat16);
    const std::string tag = "_rows" + std::to_string(m);
    show(("matmul_bf16" + tag).c_str(), mx::matmul(xr, mx::transpose(w_half)));
    show(("quantized_matmul_bf16" + tag).c_str(),
         mx::quantized_matmul(xr, wq[0], wq[1], wq[2], true, 64, 4));
  }

  // The fused kernels of tessera::fast and their gradients, in float32 and bfloat16: rows, key
  // blocks and the norms' 16-row weight sums split over the pool.
  auto rows = mx::reshape(mx::slice(x, {0}, {300 * 1000}), {300, 1000});  // 19 weight blocks
  auto w = mx::slice(x, {1000}, {2000});
  auto qkv = mx::reshape(mx::slice(x, {0}, {2 * 6 * 300 * 32}), {2, 6, 300, 32});
  auto kv = mx::reshape(mx::slice(x, {3}, {3 + 2 * 2 * 300 * 32}), {2, 2, 300, 32});
  auto targets = mx::astype(mx::multiply(mx::abs(mx::slice(x, {0}, {300})), mx::array(300.0f)),
                            mx::int32);
  for (auto dt : {mx::float32, mx::bfloat16}) {
    const std::string tag = dt == mx::float32 ? "_f32" : "_bf16";
    auto r = mx::astype(rows, dt), wt = mx::astype(w, dt), q = mx::astype(qkv, dt);
    auto k = mx::astype(kv, dt);
    auto norms = [&](const std::vector<mx::array>& a) {
      return std::vector<mx::array>{mx::fast::layer_norm(a[0], a[1], a[1], 1e-5f),
                                    mx::fast::rms_norm(a[0], a[1], 1e-5f)};
    };
    auto [norm_out, norm_grads] = mx::vjp(norms, {r, wt}, {r, r});
    show(("layer_norm" + tag).c_str(), norm_out[0]);
    show(("norm_grad_x" + tag).c_str(), norm_grads[0]);
    show(("norm_grad_w" + tag).c_str(), norm_grads[1]);
    show(("rope" + tag).c_str(), mx::fast::rope(q, 32, false, 10000.0f, 1.0f, 5));
    auto attn = [&](const std::vector<mx::array>& a) {
      return std::vector<mx::array>{
          mx::fast::scaled_dot_product_attention(a[0], a[1], a[2], 0.2f, "causal")};
    };
    auto [attn_out, attn_grads] = mx::vjp(attn, {q, k, k}, {q});
    show(("attention" + tag).c_str(), attn_out[0]);
    // Decoding: one query position per head against 300 keys (chunks of keys over the pool).
    auto q1 = mx::slice(q, {0, 0, 299, 0}, {2, 6, 300, 32});
    show(("attention_decode" + tag).c_str(),
         mx::fast::scaled_dot_product_attention(q1, k, k, 0.2f, ""));
    for (int i = 0; i < 3; ++i) {
      show(("attention_grad" + std::to_string(i) + tag).c_str(), attn_grads[i]);
    }
    auto ce = [&](const std::vector<mx::array>& a) {
      return std::vector<mx::array>{mx::fast::cross_entropy(a[0], targets)};
    };
    auto [ce_out, ce_grads] = mx::vjp(ce, {r}, {mx::slice(x, {0}, {300})});
    show(("cross_entropy" + tag).c_str(), ce_out[0]);
    show(("cross_entropy_grad" + tag).c_str(), ce_grads[0]);
  }
  return 0;
}
