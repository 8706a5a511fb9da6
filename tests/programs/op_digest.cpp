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
  return 0;
}
