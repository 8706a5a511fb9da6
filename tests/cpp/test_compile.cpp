// compile: compiled results equal eager ones (fused kernels call the eager kernels' functors and
// round where they round; only a contracted a*b+c may differ), tracing once per signature, simplification, composition
// with the transforms, and the kernel cache on disk.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "backend/cpu/compiled/codegen.h"
#include "backend/cpu/compiled/jit.h"
#include "backend/device.h"
#include "tessera/primitives/compiled.h"
#include "tessera/primitive.h"
#include "test_util.h"
#include "tessera/compile.h"
#include "tessera/config.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using test_util::random_array;
using test_util::values;

// One kernel cache for the suite's processes (the pool-size runs share it, built once).
class CacheDir : public ::testing::Environment {
 public:
  void SetUp() override {
    config::set_override("TESSERA_COMPILE_CACHE_DIR",
                         std::string(TESSERA_BIN_DIR) + "/test-compile-cache");
  }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new CacheDir);

// The elements' bytes in row-major order (any layout), for bitwise comparison.
std::string bytes_of(array a) {
  eval(a);
  std::string out;
  const size_t item = a.itemsize();
  const char* p = static_cast<const char*>(a.raw_data());
  for (size_t i = 0; i < a.size(); ++i) {
    size_t rem = i;
    int64_t off = 0;
    for (int d = static_cast<int>(a.ndim()) - 1; d >= 0; --d) {
      off += static_cast<int64_t>(rem % a.shape()[d]) * a.strides()[d];
      rem /= a.shape()[d];
    }
    out.append(p + off * static_cast<int64_t>(item), item);
  }
  return out;
}

void expect_bitwise_equal(const array& a, const array& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  const std::string x = bytes_of(a), y = bytes_of(b);
  const size_t item = a.itemsize();
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(x.data() + i * item, y.data() + i * item, item) != 0 && differ++ == 0) first = i;
  }
  if (differ) {
    auto xv = test_util::values(a), yv = test_util::values(b);
    ADD_FAILURE() << what << ": " << differ << " of " << a.size() << " elements differ, first at "
                  << first << ": " << xv[first] << " vs " << yv[first];
  }
}

// Integer and bool results must be equal bit for bit. Floating-point ones may differ where the
// fused loop contracts a*b+c into one FMA (docs/compile.md): within 4 units in the last place of
// the element plus 4 of the largest element (the scale an error carried through a cancellation
// has); NaN and infinity where eager has them.
void expect_close_to_eager(const array& got, const array& want, const std::string& what) {
  if (!issubdtype(want.dtype(), inexact)) {
    expect_bitwise_equal(got, want, what);
    return;
  }
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  if (want.dtype() == complex64) {
    expect_close_to_eager(real(got), real(want), what + " (real part)");
    expect_close_to_eager(imag(got), imag(want), what + " (imaginary part)");
    return;
  }
  const double eps = want.dtype() == float64    ? 0x1p-52
                     : want.dtype() == float32  ? 0x1p-23
                     : want.dtype() == float16  ? 0x1p-10
                                                : 0x1p-7;
  auto g = test_util::values(got), w = test_util::values(want);
  double scale = 0;
  for (double v : w) {
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  }
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const bool ok = std::isnan(w[i]) ? std::isnan(g[i])
                    : std::isinf(w[i]) ? g[i] == w[i]
                                       : std::fabs(g[i] - w[i]) <= 4 * eps * (std::fabs(w[i]) + scale);
    if (!ok && bad++ == 0) first = i;
  }
  if (bad) {
    ADD_FAILURE() << what << ": " << bad << " of " << w.size() << " elements differ, first at "
                  << first << ": compiled " << g[first] << ", eager " << w[first];
  }
}

// The compiled and the eager results of `f` on `inputs`, output by output.
void expect_same_as_eager(const CompileFn& f, const std::vector<array>& inputs,
                          const std::string& what, bool shapeless = false) {
  auto eager = f(inputs);
  auto compiled = compile(f, shapeless)(inputs);
  ASSERT_EQ(eager.size(), compiled.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    expect_close_to_eager(compiled[i], eager[i], what + " output " + std::to_string(i));
  }
}

// How many nodes of each primitive the graph behind `a` has (stops at evaluated arrays).
std::map<std::string, int> primitive_counts(const array& a) {
  std::map<std::string, int> counts;
  std::set<std::uintptr_t> seen;
  std::vector<array> stack{a};
  while (!stack.empty()) {
    array x = stack.back();
    stack.pop_back();
    if (!x.has_primitive() || x.is_available() || !seen.insert(x.primitive_id()).second) continue;
    ++counts[x.primitive().name()];
    for (auto& in : x.inputs()) stack.push_back(in);
  }
  return counts;
}

// The CompiledRows nodes behind `outs`, each of whose kernels must build (a kernel that fails to
// build would run step by step with the same values, unnoticed by the comparisons).
int row_kernels_build(const std::vector<array>& outs) {
  int n = 0;
  std::set<std::uintptr_t> seen;
  std::vector<array> stack(outs.begin(), outs.end());
  while (!stack.empty()) {
    array x = stack.back();
    stack.pop_back();
    if (!x.has_primitive() || x.is_available() || !seen.insert(x.primitive_id()).second) continue;
    if (auto* rows = dynamic_cast<CompiledRows*>(&x.primitive())) {
      ++n;
      EXPECT_NO_THROW(cpu::jit::load(cpu::fused_rows_source(*rows)));
    }
    for (auto& in : x.inputs()) stack.push_back(in);
  }
  return n;
}

std::vector<array> chain(const std::vector<array>& in) {
  const array& v = in[0];
  return {tanh(exp(-v * v) * 0.5f + sin(v) - cos(v) * v / 3.0f + 1.0f)};
}

TEST(Compile, ChainMatchesEagerBitwiseForEveryShape) {
  for (const Shape& s : std::vector<Shape>{{}, {0}, {1}, {7}, {1000, 33}, {2, 3, 0}}) {
    array x = random_array(s, float32, 1) * 4.0f;
    expect_same_as_eager(chain, {x}, "shape " + std::to_string(s.size()));
  }
}

TEST(Compile, TheChainBecomesOneCompiledNode) {
  array x = random_array({64}, float32, 2);
  auto out = compile(chain)({x})[0];
  auto counts = primitive_counts(out);
  EXPECT_EQ(out.primitive().name(), std::string("Compiled"));
  EXPECT_EQ(counts["Compiled"], 1);
  EXPECT_EQ(counts["Sin"] + counts["Exp"] + counts["Multiply"], 0);
  auto& c = dynamic_cast<Compiled&>(out.primitive());
  EXPECT_EQ(c.steps().size(), 12u);  // every op of the chain, in one loop
}

TEST(Compile, ArgumentsOutsideTheFastRangeOfSinAndCosMatch) {
  // Values beyond 2^14 take libm's sin/cos, in the same blocks as values that do not.
  array x = array({1.0f, 3e7f, -2.5f, 1e30f, 0.25f, -4e9f}) * 1.0f;
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{sin(in[0]) * 2.0f + cos(in[0])};
  };
  expect_same_as_eager(f, {x}, "large arguments");
}

TEST(Compile, AFastPassOverADonatedInputRerunsFromTheInput) {
  // The output takes over the buffer of an input nothing else holds. The fast sin/cos pass then
  // must not write the output in place, since the exact rerun of a block with an argument past
  // 2^14 reads that input again.
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{sin(in[0]) * 2.0f + cos(in[0])};
  };
  std::vector<float> vals(3000);
  for (size_t i = 0; i < vals.size(); ++i) vals[i] = (i % 7 == 3) ? 3e7f + i : 0.01f * i - 10.0f;
  const Shape shape{static_cast<int>(vals.size())};
  array want = f({array(vals.begin(), shape, float32)})[0];
  eval(want);
  array in = array(vals.begin(), shape, float32) * 1.0f;
  eval(in);
  const void* buffer = in.data<void>();
  array out = compile(f)({std::move(in)})[0];
  eval(out);
  EXPECT_EQ(out.data<void>(), buffer);  // the input was donated
  expect_close_to_eager(out, want, "donated input");
}

// Every fusable op applied to x (and y), each result an output of one fused function.
std::vector<array> unary_all(const std::vector<array>& in, bool is_float, bool is_complex) {
  const array x = in[0] + zeros_like(in[0]);  // the op's input is itself a fused value
  std::vector<array> r{abs(x), negative(x), sign(x), square(x), astype(x, float32),
                       astype(x, int32), astype(x, bool_), stop_gradient(x)};
  if (is_float || is_complex) {
    for (auto& v : {exp(x), log1p(abs(x)), sin(x), cos(x), tan(x), sinh(x), cosh(x), tanh(x),
                    arcsinh(x), sqrt(abs(x)), rsqrt(abs(x) + 1.0f), log(abs(x) + 1.0f),
                    log2(abs(x) + 1.0f), log10(abs(x) + 1.0f)}) {
      r.push_back(v);
    }
  }
  if (is_float) {
    for (auto& v : {arcsin(x * 0.5f), arccos(x * 0.5f), arctan(x), arccosh(abs(x) + 1.0f),
                    arctanh(x * 0.5f), expm1(x), sigmoid(x), erf(x), erfinv(x * 0.5f), floor(x),
                    ceil(x), round(x)}) {
      r.push_back(v);
    }
  }
  if (is_complex) {
    for (auto& v : {conjugate(x), real(x), imag(x)}) r.push_back(v);
  }
  return r;
}

std::vector<array> binary_all(const std::vector<array>& in, bool is_float, bool is_int) {
  const array x = in[0] + zeros_like(in[0]);
  const array y = in[1] + zeros_like(in[1]);
  std::vector<array> r{add(x, y),   subtract(x, y), multiply(x, y),  maximum(x, y),
                       minimum(x, y), equal(x, y),  not_equal(x, y), less(x, y),
                       less_equal(x, y), greater(x, y), greater_equal(x, y),
                       where(greater(x, y), x, y)};
  if (is_float) {
    for (auto& v : {divide(x, y), power(abs(x), y), arctan2(x, y), logaddexp(x, y),
                    remainder(x, y), floor_divide(x, y)}) {
      r.push_back(v);
    }
  }
  if (is_int) {
    const array shift = astype(abs(y) % 9, y.dtype());
    for (auto& v : {floor_divide(x, y), remainder(x, y), bitwise_and(x, y), bitwise_or(x, y),
                    bitwise_xor(x, y), bitwise_invert(x), left_shift(x, shift),
                    right_shift(x, shift)}) {
      r.push_back(v);
    }
  }
  return r;
}

TEST(Compile, EveryFusableOpMatchesEagerForEveryDtype) {
  for (Dtype d : {float32, float16, bfloat16, float64}) {
    array x = random_array({257}, d, 3) * 3.0f;
    array y = random_array({257}, d, 4) * 3.0f + 0.25f;  // divisors away from 0
    auto un = [](const std::vector<array>& in) { return unary_all(in, true, false); };
    auto bin = [](const std::vector<array>& in) { return binary_all(in, true, false); };
    expect_same_as_eager(un, {x}, std::string("unary ") + dtype_name(d));
    expect_same_as_eager(bin, {astype(x, d), astype(y, d)}, std::string("binary ") + dtype_name(d));
  }
  {
    array x = astype(random_array({100}, float32, 5), complex64) * array(complex64_t(1.5f, -0.5f));
    auto un = [](const std::vector<array>& in) { return unary_all(in, false, true); };
    expect_same_as_eager(un, {x}, "unary complex64");
  }
  for (Dtype d : {int32, int64, uint8, int8, uint32}) {
    array x = astype(random_array({300}, float32, 6) * 100.0f, d);
    array y = astype(random_array({300}, float32, 7) * 20.0f, d);
    y = where(equal(y, zeros_like(y)), ones_like(y), y);  // no division by zero
    auto un = [](const std::vector<array>& in) { return unary_all(in, false, false); };
    auto bin = [](const std::vector<array>& in) { return binary_all(in, false, true); };
    expect_same_as_eager(un, {x}, std::string("unary ") + dtype_name(d));
    expect_same_as_eager(bin, {x, y}, std::string("binary ") + dtype_name(d));
  }
  {
    array x = greater(random_array({50}, float32, 8), array(0.0f));
    array y = greater(random_array({50}, float32, 9), array(0.0f));
    auto f = [](const std::vector<array>& in) {
      const array a = logical_not(logical_not(in[0])), b = in[1];
      return std::vector<array>{logical_and(a, b), logical_or(a, b), logical_not(a),
                                add(a, b), astype(a, float32) * 2.0f};
    };
    expect_same_as_eager(f, {x, y}, "bool");
  }
}

TEST(Compile, ElementwiseProducersFuseIntoSumMaxAndMin) {
  auto f = [](const std::vector<array>& in) {
    const array& x = in[0];
    return std::vector<array>{sum(x * x), max(exp(x) - 1.0f, -1), min(x * 3.0f, {0}),
                              sum(abs(x), -1, true)};
  };
  for (const Shape& s : std::vector<Shape>{{1 << 20}, {64, 1000}, {3, 70000}, {5, 1}}) {
    array x = random_array(s, float32, 21);
    expect_same_as_eager(f, {x}, "reductions " + std::to_string(s[0]));
    expect_same_as_eager(f, {astype(x, float64)}, "float64 reductions");
  }
  // The value reduced over all axes is never materialised: one node, no Multiply kernel.
  array x = random_array({1000}, float32, 22);
  auto fused = compile([](const std::vector<array>& in) {
    return std::vector<array>{sum(in[0] * in[0])};
  })({x})[0];
  auto counts = primitive_counts(fused);
  EXPECT_EQ(counts["CompiledReduce"], 1);
  EXPECT_EQ(counts["Multiply"] + counts["Sum"], 0);
  // Against a closed form: sum of squares of 0..n-1.
  array r = arange(0, 3000, 1, float64);
  auto sq = compile([](const std::vector<array>& in) {
    return std::vector<array>{sum(in[0] * in[0])};
  })({r})[0];
  EXPECT_EQ(sq.item<double>(), 2999.0 * 3000.0 * 5999.0 / 6.0);
  auto empty = compile([](const std::vector<array>& in) {
    return std::vector<array>{sum(in[0] * in[0])};
  })({zeros({0})})[0];
  EXPECT_EQ(empty.item<float>(), 0.0f);
  // NaN propagates through a fused max; a transposed input takes the step-by-step path.
  array nan_in = array({1.0f, NAN, 3.0f, 2.0f});
  auto m = compile([](const std::vector<array>& in) {
    return std::vector<array>{max(in[0] * 2.0f)};
  })({nan_in})[0];
  EXPECT_TRUE(std::isnan(m.item<float>()));
  array t = transpose(random_array({30, 40}, float32, 23));
  expect_same_as_eager(f, {t}, "transposed");
  // Its derivative goes through the unfused steps.
  array red = fused.inputs()[0];  // sum without keepdims reshapes the reduced output
  auto& c = dynamic_cast<Compiled&>(red.primitive());
  auto g = c.vjp(red.inputs(), {ones({1})}, {0}, {red});
  EXPECT_TRUE(allclose(g[0], 2.0f * x).item<bool>());
}

// Softmax, logsumexp and a normalisation written with elementwise ops and reductions of the
// last axes: one CompiledRows node each (nothing of the row shape written between the
// reductions), the same values as eager (each row's reductions combine in the eager order),
// against a per-row reference in double, with the step-by-step path where the kernel does not
// apply (rows over 2^15 elements, a transposed input) and through grad.
std::vector<array> row_graphs(const std::vector<array>& in) {
  const array& x = in[0];
  const array m = max(x, -1, true);
  const array e = exp(x - m);
  const array soft = e / sum(e, -1, true);
  const array lse = m + log(sum(e, -1, true));
  const array mu = mean(x, std::vector<int>{-1}, true);
  const array norm = (x - mu) / sqrt(mean(square(x - mu), std::vector<int>{-1}, true) + 1e-5f);
  return {soft, lse, norm, x / sum(abs(x), -1, true)};
}

TEST(Compile, RowShapedGraphsFuseIntoOneKernelPerRow) {
  for (const Shape& s : std::vector<Shape>{{64, 1000}, {3, 5, 70}, {2, 31}, {4, 33}, {1, 4096},
                                           {3, 40000}, {7}}) {
    array x = random_array(s, float32, 31) * 6.0f;
    const std::string what = "rows of " + std::to_string(s.back());
    expect_same_as_eager(row_graphs, {x}, what);
    expect_same_as_eager(row_graphs, {astype(x, float64)}, what + " float64");
  }
  // Against a per-row reference in double.
  array x = random_array({37, 300}, float32, 32) * 8.0f;
  auto out = compile(row_graphs)({x});
  auto xv = test_util::values(x), soft = test_util::values(out[0]), lse = test_util::values(out[1]);
  for (size_t r = 0; r < 37; ++r) {
    double mx = -INFINITY, total = 0;
    for (size_t j = 0; j < 300; ++j) mx = std::max(mx, xv[r * 300 + j]);
    for (size_t j = 0; j < 300; ++j) total += std::exp(xv[r * 300 + j] - mx);
    EXPECT_NEAR(lse[r], mx + std::log(total), 1e-5 * std::fabs(mx + std::log(total)));
    for (size_t j = 0; j < 300; ++j) {
      const double want = std::exp(xv[r * 300 + j] - mx) / total;
      ASSERT_NEAR(soft[r * 300 + j], want, 1e-6 * want + 1e-12) << "row " << r << " col " << j;
    }
  }
  // One kernel per graph: no node of the ops it replaced is left.
  auto softmax_only = compile([](const std::vector<array>& in) {
    return std::vector<array>{row_graphs(in)[0]};
  });
  auto counts = primitive_counts(softmax_only({x})[0]);
  EXPECT_EQ(counts["CompiledRows"], 1);
  EXPECT_EQ(row_kernels_build(compile(row_graphs)({x})), 3);  // softmax with logsumexp, norm, x / sum
  EXPECT_EQ(counts["Exp"] + counts["Max"] + counts["Sum"] + counts["Divide"] + counts["Broadcast"],
            0);
  // A NaN in a row makes that row NaN and leaves the others.
  array with_nan = concatenate({array({1.0f, NAN, 2.0f}, {1, 3}), array({1.0f, 2.0f, 3.0f}, {1, 3})}, 0);
  auto sn = test_util::values(softmax_only({with_nan})[0]);
  EXPECT_TRUE(std::isnan(sn[0]) && std::isnan(sn[1]) && std::isnan(sn[2]));
  EXPECT_NEAR(sn[3] + sn[4] + sn[5], 1.0, 1e-6);
  // Layouts the kernel does not take, the shapeless replay with other rows, and the gradient.
  expect_same_as_eager(row_graphs, {transpose(random_array({50, 20}, float32, 33))}, "transposed");
  expect_same_as_eager(row_graphs, {random_array({6, 10}, float32, 34)}, "shapeless", true);
  auto shapeless = compile(row_graphs, true);
  for (const Shape& s : std::vector<Shape>{{6, 10}, {9, 130}}) {
    array y = random_array(s, float32, 35);
    auto got = shapeless({y});
    auto want = row_graphs({y});
    for (size_t i = 0; i < got.size(); ++i) expect_close_to_eager(got[i], want[i], "replayed");
  }
  auto loss = [](const std::vector<array>& in) {
    auto o = row_graphs(in);
    return std::vector<array>{sum(o[0] * in[0]) + sum(o[1]) + sum(o[2] * o[2] * in[0])};
  };
  array y = random_array({5, 40}, float32, 36);
  auto g_eager = grad([&](const std::vector<array>& in) { return loss(in)[0]; })({y});
  auto compiled_loss = compile(loss);
  auto g_comp = grad([&](const std::vector<array>& in) { return compiled_loss(in)[0]; })({y});
  EXPECT_TRUE(allclose(g_comp[0], g_eager[0], 1e-5, 1e-6).item<bool>());
  // Batched by vmap (through the unfused steps): each batch element's rows as the whole's.
  array z = random_array({3, 4, 40}, float32, 39);
  auto batched = vmap(compile(row_graphs), {0}, {0, 0, 0, 0})({z});
  auto whole = row_graphs({z});
  for (size_t i = 0; i < whole.size(); ++i) expect_close_to_eager(batched[i], whole[i], "vmap");
}

// Random row graphs: elementwise ops on rows and on per-row values, sums, maxima and minima of
// rows (of inputs and of computed values, in up to three phases), per-row inputs and scalars,
// outputs of both levels: the row-fused kernel against eager, each graph on three shapes (one
// below the 32-element sequential limit).
TEST(Compile, RandomRowGraphsMatchEager) {
  int fused = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    auto f = [seed](const std::vector<array>& in) {
      uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
      auto pick = [&](size_t n) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<size_t>((state >> 33) % n);
      };
      std::vector<array> rows{in[0], in[1]}, per_row{in[2]};
      for (int k = 0; k < 10; ++k) {
        const array& a = rows[pick(rows.size())];
        const array& w = per_row[pick(per_row.size())];
        switch (pick(8)) {
          case 0: rows.push_back(tanh(a) * 2.0f + w); break;
          case 1: rows.push_back(a - w); break;
          case 2: rows.push_back(exp(a - max(a, -1, true))); break;
          case 3: per_row.push_back(sum(a, -1, true)); break;
          case 4: per_row.push_back(max(a * rows[pick(rows.size())], -1, true)); break;
          case 5: per_row.push_back(min(abs(a), -1, true) + log1p(abs(w))); break;
          case 6: rows.push_back(maximum(a, rows[pick(rows.size())]) / (abs(w) + 1.0f)); break;
          default: rows.push_back(a * in[3]); break;
        }
      }
      return std::vector<array>{rows.back(), per_row.back(), rows[rows.size() / 2]};
    };
    for (const Shape& s : std::vector<Shape>{{3, 20}, {5, 300}, {2, 3, 97}}) {
      Shape w = s;
      w.back() = 1;
      std::vector<array> in{random_array(s, float32, seed + 40), random_array(s, float32, seed + 41),
                            random_array(w, float32, seed + 42), array(0.75f)};
      expect_same_as_eager(f, in, "random row graph " + std::to_string(seed));
    }
    auto out = compile(f)({random_array({4, 50}, float32, 1), random_array({4, 50}, float32, 2),
                           random_array({4, 1}, float32, 3), array(0.5f)});
    fused += row_kernels_build(out) > 0;
  }
  EXPECT_GE(fused, 8) << "of 12 random graphs took the row kernel";
}

// Values of a row group read by other nodes come out of it; a broadcast of a reduction that is
// returned stays a node of its own.
TEST(Compile, RowGroupHandsOutWhatOthersRead) {
  auto f = [](const std::vector<array>& in) {
    const array& x = in[0];
    const array m = max(x, -1, true);
    const array mb = broadcast_to(m, x.shape());
    const array e = exp(x - mb);
    const array s = sum(e, -1, true);
    return std::vector<array>{e / s, m, e, mb, s * 2.0f + in[1]};
  };
  array x = random_array({12, 77}, float32, 37), b = random_array({12, 1}, float32, 38);
  expect_same_as_eager(f, {x, b}, "hand out");
  auto out = compile(f)({x, b});
  EXPECT_EQ(primitive_counts(out[0])["CompiledRows"], 1);
}

TEST(Compile, StridedBroadcastAndScalarInputs) {
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{tanh(in[0] * in[1] + in[1]) - in[2]};
  };
  array m = random_array({40, 30}, float32, 10);
  array t = transpose(random_array({30, 40}, float32, 11));            // strided
  array row = broadcast_to(random_array({30}, float32, 12), {40, 30});  // stride 0 outer
  array col = broadcast_to(random_array({40, 1}, float32, 13), {40, 30});
  array step = slice(random_array({80, 30}, float32, 14), {0, 0}, {80, 30}, {2, 1});
  array one = broadcast_to(array(0.5f), {40, 30});
  for (auto& [a, b, c] : std::vector<std::tuple<array, array, array>>{
           {m, m, m}, {t, row, col}, {step, one, t}, {col, t, one}, {row, col, step}}) {
    expect_same_as_eager(f, {a, b, c}, "layouts");
  }
}

TEST(Compile, TracesOncePerSignature) {
  int calls = 0;
  auto f = [&calls](const std::vector<array>& in) {
    ++calls;
    return std::vector<array>{in[0] * in[1] + in[0]};
  };
  auto cf = compile(f);
  array a = random_array({4}, float32, 1), b = random_array({4}, float32, 2);
  cf({a, b});
  cf({b, a});
  EXPECT_EQ(calls, 1);
  cf({astype(a, float16), astype(b, float16)});  // dtype change
  EXPECT_EQ(calls, 2);
  cf({random_array({5}, float32, 3), random_array({5}, float32, 4)});  // shape change
  EXPECT_EQ(calls, 3);

  int shapeless_calls = 0;
  auto g = [&shapeless_calls](const std::vector<array>& in) {
    ++shapeless_calls;
    return std::vector<array>{exp(in[0]) * in[1] + in[0]};
  };
  auto sg = compile(g, true);
  for (int n : {3, 8, 1, 100}) {
    array x = random_array({n, 2}, float32, 5), y = random_array({n, 2}, float32, 6);
    expect_close_to_eager(sg({x, y})[0], g({x, y})[0], "shapeless n=" + std::to_string(n));
  }
  EXPECT_EQ(shapeless_calls, 1 + 4);  // one trace; the 4 eager reference calls
  // Broadcasts the ops insert (scalars, a bias row) follow the other operand's new shape.
  auto h = [](const std::vector<array>& in) {
    return std::vector<array>{where(in[0] > 0.0f, in[0] * 2.0f + in[1], in[1] - 1.0f)};
  };
  auto sh = compile(h, true);
  for (int n : {2, 7}) {
    array x = random_array({n, 3}, float32, 9), bias = random_array({3}, float32, 10);
    expect_close_to_eager(sh({x, bias})[0], h({x, bias})[0], "shapeless broadcast n=" +
                                                                 std::to_string(n));
  }
  sg({random_array({2}, float32, 7), random_array({2}, float32, 8)});  // rank change
  EXPECT_EQ(shapeless_calls, 6);
}

// Row means, column variances (ddof 1) and the mean of the squares (fused into one reduction),
// from the shapes of each call: the divisors are nodes of the graph, not
// the traced shape's counts. The reference is computed here in double from the elements.
TEST(Compile, ShapelessMeanAndVarDivideByTheNewCount) {
  auto f = [](const std::vector<array>& in) {
    const array& x = in[0];
    return std::vector<array>{mean(x, 1), var(x, 0, false, 1), mean(x * x)};
  };
  auto cf = compile(f, true);
  for (auto [r, c] : std::vector<std::pair<int, int>>{{3, 4}, {6, 9}, {2, 2}}) {
    const std::string what = std::to_string(r) + "x" + std::to_string(c);
    array x = random_array({r, c}, float32, r * 10 + c);
    auto out = cf({x});
    auto v = test_util::values(x);
    std::vector<double> rows(r, 0), cols(c, 0), cvar(c, 0);
    double sq = 0;
    for (int i = 0; i < r; ++i) {
      for (int j = 0; j < c; ++j) {
        rows[i] += v[i * c + j] / c;
        cols[j] += v[i * c + j] / r;
        sq += v[i * c + j] * v[i * c + j] / (r * c);
      }
    }
    for (int i = 0; i < r; ++i) {
      for (int j = 0; j < c; ++j) cvar[j] += std::pow(v[i * c + j] - cols[j], 2) / (r - 1);
    }
    auto near = [&](const array& got, const std::vector<double>& want, const std::string& name) {
      auto g = test_util::values(got);
      ASSERT_EQ(g.size(), want.size()) << what << " " << name;
      for (size_t k = 0; k < want.size(); ++k) {
        EXPECT_NEAR(g[k], want[k], 1e-5 * (1 + std::fabs(want[k]))) << what << " " << name << " " << k;
      }
    };
    near(out[0], rows, "mean axis 1");
    near(out[1], cvar, "var axis 0 ddof 1");
    near(out[2], {sq}, "mean(x * x)");
  }
  // vmap inside the shapeless function: the count is of the per-example shape.
  auto g = [](const std::vector<array>& in) {
    auto row_mean = [](const std::vector<array>& a) { return std::vector<array>{mean(a[0])}; };
    return vmap(VecFn(row_mean))(in);
  };
  auto cg = compile(g, true);
  for (int n : {3, 8}) {
    array x = random_array({2, n}, float32, n);
    auto got = test_util::values(cg({x})[0]);
    auto v = test_util::values(x);
    for (int b = 0; b < 2; ++b) {
      double want = 0;
      for (int j = 0; j < n; ++j) want += v[b * n + j] / n;
      EXPECT_NEAR(got[b], want, 1e-5) << "vmap(mean), n=" << n;
    }
  }
}

// Gradients traced inside a shapeless function follow the new shapes too: the broadcasts and
// fills of the backward pass take their shapes from the forward values. The gradient of a row
// mean is 1/columns (closed form); the others equal the eager gradient.
TEST(Compile, ShapelessGradientsFollowTheNewShapes) {
  std::vector<std::pair<std::string, std::function<array(const array&)>>> fns = {
      {"sum(mean(x, 1))", [](const array& x) { return sum(mean(x, 1)); }},
      {"sum(x * 2)", [](const array& x) { return sum(x * 2.0f); }},
      {"softmax", [](const array& x) { return sum(softmax(x, std::vector<int>{1}) * x); }},
      {"logsumexp", [](const array& x) { return sum(logsumexp(x, std::vector<int>{1})); }},
      {"where", [](const array& x) { return sum(where(x > 0.0f, x, x * x)); }},
      {"prod", [](const array& x) { return sum(prod(x + 2.0f, 1)); }},
      {"max", [](const array& x) { return sum(max(x, 0)); }},
  };
  // First called under grad (its inputs tracers), then on a new shape: the broadcast of the
  // constant follows the input (it is a node of the graph, not a traced constant).
  auto relu = compile([](const std::vector<array>& in) {
    return std::vector<array>{maximum(in[0], array(0.0f))};
  }, true);
  array w = random_array({3, 5}, float32, 1);
  grad([&](const array& x) { return sum(relu({matmul(x, w)})[0]); })(random_array({2, 3}, float32, 2));
  array x4 = random_array({4, 5}, float32, 3);
  expect_close_to_eager(relu({x4})[0], maximum(x4, array(0.0f)), "relu traced under grad, new shape");
  for (auto& [name, fn] : fns) {
    auto f = fn;
    auto cf = compile([f](const std::vector<array>& in) { return std::vector<array>{grad(f)(in[0])}; },
                      true);
    for (auto [r, c] : std::vector<std::pair<int, int>>{{2, 3}, {5, 4}}) {
      array x = random_array({r, c}, float32, r + c);
      const std::string what = name + " " + std::to_string(r) + "x" + std::to_string(c);
      array got = cf({x})[0];
      if (name == "sum(mean(x, 1))") {
        ASSERT_EQ(got.shape(), x.shape()) << what;
        for (double v : test_util::values(got)) EXPECT_NEAR(v, 1.0 / c, 1e-7) << what;
      } else {
        expect_close_to_eager(got, grad(f)(x), what);
      }
    }
  }
}

// A reshape given a -1 dim recomputes it for each call's size; a fixed target that no longer
// fits is an error naming the shapes, never a silent traced shape.
TEST(Compile, ShapelessReshapeInfersItsMinusOneDim) {
  auto f = [](const std::vector<array>& in) {
    const array& x = in[0];
    return std::vector<array>{reshape(x, {x.shape(0) * x.shape(1), -1}) * 2.0f};
  };
  auto cf = compile(f, true);
  for (auto shape : std::vector<Shape>{{2, 3, 4}, {2, 3, 8}, {1, 6, 1}}) {
    array x = random_array(shape, float32, shape[2]);
    array got = cf({x})[0];
    ASSERT_EQ(got.shape(), (Shape{6, shape[2]}));
    auto v = test_util::values(x), g = test_util::values(got);
    for (size_t i = 0; i < v.size(); ++i) EXPECT_FLOAT_EQ(g[i], 2 * v[i]);
  }
  EXPECT_THROW(cf({random_array({5, 5, 5}, float32, 9)}), std::invalid_argument);
  // A reshape with no -1 keeps its traced target: a new size is refused.
  auto fixed = compile([](const std::vector<array>& in) {
    return std::vector<array>{reshape(in[0], {4, 3})};
  }, true);
  EXPECT_EQ(fixed({random_array({2, 6}, float32, 1)})[0].shape(), (Shape{4, 3}));
  EXPECT_EQ(fixed({random_array({3, 4}, float32, 2)})[0].shape(), (Shape{4, 3}));
  try {
    fixed({random_array({2, 5}, float32, 3)});
    ADD_FAILURE() << "a traced target of another size was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("(4,3)"), std::string::npos) << e.what();
  }
}

// A reduction over a dim of size 1 at trace time is still a reduction in the graph: replayed
// on a larger gather (indices of another length), every reduction gives its new value.
TEST(Compile, ShapelessReductionsOverTracedSizeOneDimsStayReductions) {
  array buf = array({10.0f, 20.0f, 30.0f, 40.0f, 50.0f});
  std::vector<std::pair<std::string, std::function<array(const array&)>>> reductions = {
      {"sum", [](const array& x) { return sum(x); }},
      {"mean", [](const array& x) { return mean(x); }},
      {"prod", [](const array& x) { return prod(x); }},
      {"min", [](const array& x) { return min(x); }},
      {"max", [](const array& x) { return max(x); }},
      {"all", [](const array& x) { return all(x > 25.0f); }},
      {"any", [](const array& x) { return any(x > 25.0f); }},
      {"argmin", [](const array& x) { return argmin(x); }},
      {"argmax", [](const array& x) { return argmax(x); }},
  };
  for (auto& [name, red] : reductions) {
    auto r = red;
    auto f = [r](const std::vector<array>& in) { return std::vector<array>{r(take(in[0], in[1], 0))}; };
    auto cf = compile(f, true);
    for (auto idx : {array({2}, {1}, int32), array({0, 3, 1}, {3}, int32), array({4, 1}, {2}, int32)}) {
      array got = cf({buf, idx})[0];
      array want = f({buf, idx})[0];  // eager
      EXPECT_EQ(got.shape(), want.shape()) << name;
      EXPECT_TRUE(array_equal(got, want).item<bool>())
          << name << " with " << idx.size() << " indices: " << got << " vs " << want;
    }
  }
}

TEST(Compile, CommonSubexpressionsAndEqualConstantsMerge) {
  set_compile_mode(CompileMode::no_fuse);
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{exp(in[0]) * 2.0f + exp(in[0]) * 2.0f + log2(in[0]) + log10(in[0])};
  };
  array x = random_array({16}, float32, 1) + 2.0f;
  auto out = compile(f)({x})[0];
  auto counts = primitive_counts(out);
  set_compile_mode(CompileMode::enabled);
  EXPECT_EQ(counts["Exp"], 1);
  EXPECT_EQ(counts["Multiply"], 1);
  EXPECT_EQ(counts["Log2"], 1);  // Log keeps its base: log2 and log10 do not merge
  EXPECT_EQ(counts["Log10"], 1);
  expect_close_to_eager(out, f({x})[0], "simplified");
}

TEST(Compile, AnExpandDimsThatUndoesASqueezeIsDroppedAndRowsFuse) {
  // max / sum without keepdims, indexed back with expand_dims: the softmax of a row kernel.
  auto softmax = [](const std::vector<array>& in) {
    array e = exp(in[0] - expand_dims(max(in[0], -1), -1));
    return std::vector<array>{e / expand_dims(sum(e, -1), 1)};
  };
  // (VecFn: a new compile cache entry each time, where a function pointer would share one.)
  set_compile_mode(CompileMode::no_fuse);
  array x = random_array({9, 50}, float32, 5) * 4.0f;
  eval(x);
  auto plain = primitive_counts(compile(VecFn(softmax))({x})[0]);
  set_compile_mode(CompileMode::enabled);
  EXPECT_EQ(plain["Squeeze"] + plain["ExpandDims"], 0);
  EXPECT_EQ(plain["Max"], 1);
  auto fused = compile(VecFn(softmax))({x})[0];
  EXPECT_EQ(primitive_counts(fused)["CompiledRows"], 1);
  EXPECT_EQ(row_kernels_build({fused}), 1);
  expect_same_as_eager(softmax, {x}, "softmax without keepdims");
  expect_same_as_eager(softmax, {random_array({13, 21}, float32, 6)}, "shapeless", true);
  // Other axes back, or a squeezed value read as well: kept, values unchanged.
  auto other = [](const std::vector<array>& in) {
    array m = max(in[0], std::vector<int>{1}, true);   // (n, 1, 1)
    array back = expand_dims(squeeze(m, 1), 2);        // (n, 1, 1) again, other axis: kept
    array flat = squeeze(m, std::vector<int>{1, 2});   // (n) read as well
    return std::vector<array>{in[0] - back, expand_dims(flat, 1) + reshape(flat, {-1, 1})};
  };
  array y = random_array({5, 6, 1}, float32, 7);
  eval(y);
  set_compile_mode(CompileMode::no_fuse);
  auto kept = compile(VecFn(other))({y});
  set_compile_mode(CompileMode::enabled);
  EXPECT_EQ(primitive_counts(kept[0])["ExpandDims"], 1);
  expect_close_to_eager(kept[0], other({y})[0], "other axis");
  expect_close_to_eager(kept[1], other({y})[1], "squeezed read");
  expect_same_as_eager(other, {y}, "fused");
}

TEST(Compile, ComposesWithTheTransforms) {
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{sum(sin(in[0]) * in[0] + exp(-in[0] * in[1]))};
  };
  array x = random_array({6}, float32, 1), y = random_array({6}, float32, 2);
  auto scalar = [](const VecFn& fn) {
    return [fn](const std::vector<array>& in) { return fn(in)[0]; };
  };
  // grad of a compiled function
  auto g_eager = grad(scalar(f), {0, 1})({x, y});
  auto g_comp = grad(scalar(compile(f)), {0, 1})({x, y});
  for (int i = 0; i < 2; ++i) expect_close_to_eager(g_comp[i], g_eager[i], "grad(compile)");
  // compile of a function that calls grad (the backward pass fuses too)
  auto gf = [f, scalar](const std::vector<array>& in) { return grad(scalar(f), {0, 1})(in); };
  auto cg = compile(gf)({x, y});
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(allclose(cg[i], g_eager[i], 1e-6, 1e-6).item<bool>()) << "compile(grad)";
  }
  // vmap of a compiled function, and compile inside compile
  auto h = [](const std::vector<array>& in) { return std::vector<array>{cos(in[0]) * in[0] + 1.0f}; };
  array batch = random_array({3, 5}, float32, 3);
  expect_close_to_eager(vmap(compile(h))({batch})[0], vmap(VecFn(h))({batch})[0], "vmap(compile)");
  auto outer = [h](const std::vector<array>& in) {
    return std::vector<array>{compile(h)({in[0] * 2.0f})[0] - 1.0f};
  };
  expect_same_as_eager(outer, {batch}, "compile(compile)");
}

TEST(Compile, FusedNodeDifferentiatesThroughItsSteps) {
  array x = random_array({5}, float32, 4);
  auto out = compile(chain)({x})[0];
  auto& c = dynamic_cast<Compiled&>(out.primitive());
  array cot = random_array({5}, float32, 5);
  auto g = c.vjp(out.inputs(), {cot}, {0}, {out});
  auto ref = vjp(chain, {x}, {cot}).second;
  EXPECT_TRUE(allclose(g[0], ref[0], 1e-6, 1e-6).item<bool>());
}

TEST(Compile, EvaluatingInsideTheTracedFunctionIsAnError) {
  auto f = [](const std::vector<array>& in) {
    array s = sum(in[0]);
    eval(s);
    return std::vector<array>{s};
  };
  try {
    compile(f)({array({1.0f, 2.0f})});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[compile]"), std::string::npos) << e.what();
  }
  // Arrays that do not depend on the inputs evaluate as usual (constants of the graph).
  auto g = [](const std::vector<array>& in) {
    array c = full({1}, 3.0f);
    return std::vector<array>{in[0] * c.item<float>()};
  };
  expect_same_as_eager(g, {array({1.0f, 2.0f})}, "constant evaluated while tracing");
}

TEST(Compile, DisabledCompileCallsTheFunctionEveryTime) {
  int calls = 0;
  auto f = [&calls](const std::vector<array>& in) {
    ++calls;
    return std::vector<array>{in[0] + 1.0f};
  };
  auto cf = compile(f);
  disable_compile();
  cf({array(1.0f)});
  cf({array(1.0f)});
  enable_compile();
  EXPECT_EQ(calls, 2);
  cf({array(1.0f)});
  cf({array(1.0f)});
  EXPECT_EQ(calls, 3);
}

TEST(Compile, AnEmptyFunctionIsRefusedUnlessCompileIsDisabled) {
  using Fn = std::vector<array> (*)(const std::vector<array>&);
  EXPECT_THROW(compile(Fn{nullptr}), std::invalid_argument);
  EXPECT_THROW(compile(CompileFn{}), std::invalid_argument);
  disable_compile();
  EXPECT_NO_THROW(compile(Fn{nullptr}));  // compile(f) is f, as MLX's
  enable_compile();
}

TEST(Compile, EqualBroadcastsOfOneConstantMergeUnlessShapeless) {
  set_compile_mode(CompileMode::no_fuse);
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{maximum(in[0], array(0.0f)), maximum(-in[1], array(0.0f))};
  };
  auto out = compile(f)({array({-1.0f, 2.0f}), array({3.0f, -4.0f})});
  EXPECT_EQ(out[0].inputs()[1].id(), out[1].inputs()[1].id());  // one broadcast of 0
  EXPECT_EQ(values(out[0]), (std::vector<double>{0, 2}));
  EXPECT_EQ(values(out[1]), (std::vector<double>{0, 4}));
  // Shapeless, the two inputs may take different shapes later: the broadcasts stay apart.
  auto g = compile(f, /*shapeless=*/true);
  g({array({-1.0f, 2.0f}), array({3.0f, -4.0f})});
  auto later = g({array({-1.0f, 2.0f, 5.0f}), array({-3.0f})});
  EXPECT_EQ(values(later[0]), (std::vector<double>{0, 2, 5}));
  EXPECT_EQ(values(later[1]), (std::vector<double>{3}));
  set_compile_mode(CompileMode::enabled);
}

// Copies and stop_gradients are nothing to evaluate: the graph a call replays goes without them
// (as MLX's simplify), while the transforms still see stop_gradient.
TEST(Compile, EvaluationDropsCopiesAndStopGradientsTheTransformsKeepThem) {
  set_compile_mode(CompileMode::no_fuse);
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{copy(stop_gradient(exp(stop_gradient(in[0])))),
                              in[0] * stop_gradient(in[0])};
  };
  auto cf = compile(f);
  array a({1.0f, 2.0f});
  auto out = cf({a});
  EXPECT_EQ(out[0].inputs()[0].id(), a.id());  // exp(a) itself
  EXPECT_EQ(out[1].inputs()[0].id(), a.id());
  EXPECT_EQ(out[1].inputs()[1].id(), a.id());
  EXPECT_NEAR(values(out[0])[1], std::exp(2.0), 1e-6);
  auto identity = compile([](const std::vector<array>& in) {
    return std::vector<array>{copy(in[0])};
  });
  EXPECT_EQ(identity({a})[0].id(), a.id());
  // d/dx (x * stop_gradient(x)) = stop_gradient(x): the plain graph keeps the stop.
  auto g = grad([&](const std::vector<array>& in) { return sum(cf(in)[1]); });
  EXPECT_EQ(values(g({a})[0]), (std::vector<double>{1, 2}));
  set_compile_mode(CompileMode::enabled);
  auto g_fused = grad([&](const std::vector<array>& in) { return sum(cf(in)[1]); });
  EXPECT_EQ(values(g_fused({a})[0]), (std::vector<double>{1, 2}));
  EXPECT_EQ(values(cf({a})[1]), (std::vector<double>{1, 4}));
}

TEST(Compile, OpsRunOnTheCallersDefaultStream) {
  auto f = [](const std::vector<array>& in) { return std::vector<array>{in[0] * in[1] + 1.0f}; };
  auto cf = compile(f);
  array out = cf({array(2.0f), array(3.0f)})[0];
  EXPECT_EQ(out.primitive().stream(), default_stream(default_device()));
  Stream s = new_stream(default_device());
  {
    StreamContext context(s);
    array on_s = cf({array(2.0f), array(3.0f)})[0];
    EXPECT_EQ(on_s.primitive().stream(), s);  // traced again for this stream
    EXPECT_EQ(on_s.item<float>(), 7.0f);
  }
  EXPECT_EQ(cf({array(2.0f), array(3.0f)})[0].primitive().stream(),
            default_stream(default_device()));
  EXPECT_EQ(out.item<float>(), 7.0f);
}

// A private cache directory for one test.
struct PrivateCache {
  std::string dir;
  PrivateCache() {
    dir = std::string(TESSERA_BIN_DIR) + "/test-compile-cache-" + std::to_string(getpid());
    fs::remove_all(dir);
    config::set_override("TESSERA_COMPILE_CACHE_DIR", dir);
    detail::compile_clear_cache();
  }
  ~PrivateCache() {
    config::set_override("TESSERA_COMPILE_CACHE_DIR", std::string(TESSERA_BIN_DIR) +
                                                          "/test-compile-cache");
    config::set_override("TESSERA_COMPILE_CACHE_MAX_MB", std::nullopt);
    detail::compile_clear_cache();
    fs::remove_all(dir);
  }
  std::vector<fs::path> kernels() const {
    std::vector<fs::path> k;
    for (auto& e : fs::directory_iterator(dir)) k.push_back(e.path());
    return k;
  }
};

// A kernel no other test builds (its constant differs per process).
std::vector<array> private_kernel(const std::vector<array>& in) {
  return {exp(in[0]) * in[1] + in[1]};
}

TEST(Compile, KernelsComeFromTheDiskCacheAndACorruptedFileIsRebuilt) {
  PrivateCache cache;
  array x = random_array({100}, float32, 1), y = random_array({100}, float32, 2);
  const array want = private_kernel({x, y})[0];
  const auto s0 = detail::compile_stats();
  expect_close_to_eager(compile(private_kernel)({x, y})[0], want, "cached kernel");
  const auto s1 = detail::compile_stats();
  EXPECT_EQ(s1.kernel_builds, s0.kernel_builds + 1);
  auto files = cache.kernels();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].extension(), ".so");

  // As a new process would: the traced graphs and loaded kernels forgotten, the file reused.
  detail::compile_clear_cache();
  expect_close_to_eager(compile(private_kernel)({x, y})[0], want, "cached kernel");
  const auto s2 = detail::compile_stats();
  EXPECT_EQ(s2.kernel_builds, s1.kernel_builds);
  EXPECT_EQ(s2.disk_hits, s1.disk_hits + 1);

  // Truncated, then one byte flipped: detected, rebuilt, right values. (The damaged copy
  // replaces the file, as a crashed writer's would; this process still maps the old one.)
  for (int damage = 0; damage < 2; ++damage) {
    std::string bytes;
    {
      std::ifstream f(files[0], std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(f), {});
    }
    if (damage == 0) {
      bytes.resize(bytes.size() / 2);
    } else {
      bytes[bytes.size() / 3] ^= 0x5a;
    }
    const std::string tmp = cache.dir + "/damaged";
    std::ofstream(tmp, std::ios::binary) << bytes;
    fs::rename(tmp, files[0]);
    detail::compile_clear_cache();
    const auto before = detail::compile_stats();
    expect_close_to_eager(compile(private_kernel)({x, y})[0], want, "cached kernel");
    EXPECT_EQ(detail::compile_stats().kernel_builds, before.kernel_builds + 1) << damage;
  }
  EXPECT_EQ(cache.kernels().size(), 1u);  // no temporary files left
}

TEST(Compile, CacheIsBoundedLeastRecentlyUsedFirst) {
  PrivateCache cache;
  fs::create_directories(cache.dir);
  // Three 600 KiB files: the oldest two go when a new kernel makes the total pass 1 MiB.
  const auto now = fs::file_time_type::clock::now();
  for (int i = 0; i < 3; ++i) {
    const std::string p = cache.dir + "/old" + std::to_string(i) + ".so";
    std::ofstream(p) << std::string(600 << 10, 'x');
    fs::last_write_time(p, now - std::chrono::hours(10 - i));
  }
  config::set_override("TESSERA_COMPILE_CACHE_MAX_MB", "1");
  array x = random_array({10}, float32, 1);
  eval(compile(private_kernel)({x, x})[0]);
  std::set<std::string> names;
  for (auto& p : cache.kernels()) names.insert(p.filename().string());
  EXPECT_EQ(names.count("old0.so"), 0u);
  EXPECT_EQ(names.count("old1.so"), 0u);
  EXPECT_EQ(names.count("old2.so"), 1u);
  EXPECT_EQ(names.size(), 2u);
}

TEST(Primitive, EvalOnAGpuStreamNamesThePrimitive) {
  class Probe : public UnaryPrimitive {
   public:
    using UnaryPrimitive::UnaryPrimitive;
    void eval_cpu(const std::vector<array>&, array&) override {}
    const char* name() const override { return "Probe"; }
  };
  Probe p(Stream{0, Device(Device::gpu)});
  std::vector<array> in, out{array(0.0f)};  // a one-output primitive gets one output
  try {
    backend::evaluate(p, in, out);  // no GPU back end installed: eval_gpu's error
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("Probe"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
