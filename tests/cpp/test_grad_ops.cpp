// Every differentiable op's vjp and jvp against central finite differences, in float64: a small
// helper builds the full Jacobian numerically and compares J^T v (vjp) and J u (jvp). One table
// row per op.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <ostream>
#include <string>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

using Fn = std::function<array(const std::vector<array>&)>;

std::vector<double> to_vec(const array& a) {
  array c = contiguous(astype(a, float64));
  c.eval();
  return std::vector<double>(c.data<double>(), c.data<double>() + c.size());
}

array from_vec(const std::vector<double>& v, const Shape& s) { return array(v, s, float64); }

// Deterministic, well spread values in [lo, hi] (no two equal, so max/sort have no ties).
array values(const Shape& shape, double lo, double hi, int seed) {
  size_t n = 1;
  for (auto d : shape) n *= static_cast<size_t>(d);
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    double t = std::fmod(0.6180339887 * static_cast<double>(i * 7 + static_cast<size_t>(seed) * 13 + 1),
                         1.0);
    v[i] = lo + (hi - lo) * t;
  }
  return from_vec(v, shape);
}

struct Case {
  std::string name;
  std::vector<array> inputs;
  Fn f;
};

// gtest prints a failing parameter with this instead of its bytes.
[[maybe_unused]] void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

constexpr double kStep = 1e-6;
constexpr double kTol = 1e-6;

// d f / d inputs[k], as an (out_size x in_size) row-major matrix.
std::vector<double> numeric_jacobian(const Fn& f, const std::vector<array>& inputs, size_t k,
                                     size_t out_size) {
  auto x = to_vec(inputs[k]);
  std::vector<double> jac(out_size * x.size());
  for (size_t j = 0; j < x.size(); ++j) {
    auto args = inputs;
    auto xp = x, xm = x;
    xp[j] += kStep;
    xm[j] -= kStep;
    args[k] = from_vec(xp, inputs[k].shape());
    auto fp = to_vec(f(args));
    args[k] = from_vec(xm, inputs[k].shape());
    auto fm = to_vec(f(args));
    for (size_t i = 0; i < out_size; ++i) jac[i * x.size() + j] = (fp[i] - fm[i]) / (2 * kStep);
  }
  return jac;
}

::testing::AssertionResult close(const std::vector<double>& got, const std::vector<double>& want,
                                 const std::string& what) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << what << ": " << got.size() << " values, expected "
                                         << want.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= kTol * (1.0 + std::abs(want[i])))) {
      return ::testing::AssertionFailure() << what << "[" << i << "] = " << got[i]
                                           << ", finite differences give " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

void check_gradients(const Case& c) {
  const auto out = c.f(c.inputs);
  const size_t m = out.size();
  ASSERT_GT(m, 0u);
  std::vector<std::vector<double>> jac;
  for (size_t k = 0; k < c.inputs.size(); ++k) jac.push_back(numeric_jacobian(c.f, c.inputs, k, m));

  VecFn vf = [&c](const std::vector<array>& in) { return std::vector<array>{c.f(in)}; };

  // Reverse mode: grads[k] = J_k^T v.
  array v = values(out.shape(), -1.0, 1.0, 5);
  auto [outs, grads] = vjp(vf, c.inputs, {v});
  ASSERT_EQ(grads.size(), c.inputs.size());
  EXPECT_TRUE(close(to_vec(outs[0]), to_vec(out), "vjp output"));
  auto vv = to_vec(v);
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    EXPECT_EQ(grads[k].shape(), c.inputs[k].shape()) << "cotangent shape of input " << k;
    EXPECT_EQ(grads[k].dtype(), float64) << "cotangent dtype of input " << k;
    size_t n = c.inputs[k].size();
    std::vector<double> want(n, 0.0);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) want[j] += jac[k][i * n + j] * vv[i];
    EXPECT_TRUE(close(to_vec(grads[k]), want, "vjp of input " + std::to_string(k)));
  }

  // Forward mode: tangent = sum_k J_k u_k.
  std::vector<array> tangents;
  for (size_t k = 0; k < c.inputs.size(); ++k)
    tangents.push_back(values(c.inputs[k].shape(), -1.0, 1.0, 11 + static_cast<int>(k)));
  auto [jouts, jtans] = jvp(vf, c.inputs, tangents);
  ASSERT_EQ(jtans.size(), 1u);
  EXPECT_EQ(jtans[0].shape(), out.shape());
  std::vector<double> want(m, 0.0);
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    auto u = to_vec(tangents[k]);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < u.size(); ++j) want[i] += jac[k][i * u.size() + j] * u[j];
  }
  EXPECT_TRUE(close(to_vec(jtans[0]), want, "jvp"));
}

array V(const Shape& s, double lo, double hi, int seed = 0) { return values(s, lo, hi, seed); }

Case unary(const std::string& name, std::function<array(const array&)> op, double lo, double hi) {
  return {name, {V({2, 3}, lo, hi)}, [op](const std::vector<array>& x) { return op(x[0]); }};
}
Case binary(const std::string& name, std::function<array(const array&, const array&)> op,
            double lo, double hi) {
  // Broadcasting (2,3) with (3) checks that the cotangents are summed back to each shape.
  return {name, {V({2, 3}, lo, hi, 1), V({3}, lo, hi, 2)},
          [op](const std::vector<array>& x) { return op(x[0], x[1]); }};
}
Case one(const std::string& name, const Shape& shape, double lo, double hi,
         std::function<array(const array&)> op) {
  return {name, {V(shape, lo, hi)}, [op](const std::vector<array>& x) { return op(x[0]); }};
}

std::vector<Case> cases() {
  std::vector<Case> c;
  // ---- unary ----
  c.push_back(unary("abs", [](auto& a) { return abs(a); }, 0.2, 1.5));
  c.push_back(unary("abs_negative", [](auto& a) { return abs(a); }, -1.5, -0.2));
  c.push_back(unary("negative", [](auto& a) { return negative(a); }, -1, 1));
  c.push_back(unary("square", [](auto& a) { return square(a); }, -1, 1));
  c.push_back(unary("sqrt", [](auto& a) { return sqrt(a); }, 0.5, 2));
  c.push_back(unary("rsqrt", [](auto& a) { return rsqrt(a); }, 0.5, 2));
  c.push_back(unary("reciprocal", [](auto& a) { return reciprocal(a); }, 0.5, 2));
  c.push_back(unary("exp", [](auto& a) { return exp(a); }, -1, 1));
  c.push_back(unary("expm1", [](auto& a) { return expm1(a); }, -1, 1));
  c.push_back(unary("log", [](auto& a) { return log(a); }, 0.5, 2));
  c.push_back(unary("log2", [](auto& a) { return log2(a); }, 0.5, 2));
  c.push_back(unary("log10", [](auto& a) { return log10(a); }, 0.5, 2));
  c.push_back(unary("log1p", [](auto& a) { return log1p(a); }, -0.5, 2));
  c.push_back(unary("sin", [](auto& a) { return sin(a); }, -2, 2));
  c.push_back(unary("cos", [](auto& a) { return cos(a); }, -2, 2));
  c.push_back(unary("tan", [](auto& a) { return tan(a); }, -1, 1));
  c.push_back(unary("arcsin", [](auto& a) { return arcsin(a); }, -0.8, 0.8));
  c.push_back(unary("arccos", [](auto& a) { return arccos(a); }, -0.8, 0.8));
  c.push_back(unary("arctan", [](auto& a) { return arctan(a); }, -2, 2));
  c.push_back(unary("sinh", [](auto& a) { return sinh(a); }, -1, 1));
  c.push_back(unary("cosh", [](auto& a) { return cosh(a); }, -1, 1));
  c.push_back(unary("tanh", [](auto& a) { return tanh(a); }, -1, 1));
  c.push_back(unary("arcsinh", [](auto& a) { return arcsinh(a); }, -2, 2));
  c.push_back(unary("arccosh", [](auto& a) { return arccosh(a); }, 1.2, 3));
  c.push_back(unary("arctanh", [](auto& a) { return arctanh(a); }, -0.8, 0.8));
  c.push_back(unary("sigmoid", [](auto& a) { return sigmoid(a); }, -2, 2));
  c.push_back(unary("erf", [](auto& a) { return erf(a); }, -1.5, 1.5));
  c.push_back(unary("erfinv", [](auto& a) { return erfinv(a); }, -0.8, 0.8));
  c.push_back(unary("degrees", [](auto& a) { return degrees(a); }, -1, 1));
  c.push_back(unary("radians", [](auto& a) { return radians(a); }, -1, 1));
  c.push_back(unary("floor", [](auto& a) { return floor(a); }, 0.1, 0.9));
  c.push_back(unary("ceil", [](auto& a) { return ceil(a); }, 0.1, 0.9));
  c.push_back(unary("round", [](auto& a) { return round(a); }, 0.1, 0.4));
  c.push_back(unary("sign", [](auto& a) { return sign(a); }, 0.1, 0.9));
  c.push_back(unary("positive", [](auto& a) { return positive(a); }, -1, 1));
  c.push_back(unary("copy", [](auto& a) { return copy(a); }, -1, 1));
  c.push_back(unary("astype_roundtrip", [](auto& a) { return astype(astype(a, float64), float64); },
                    -1, 1));
  c.push_back(unary("nan_to_num", [](auto& a) { return nan_to_num(a); }, -1, 1));
  c.push_back(unary("clip", [](auto& a) { return clip(a, array(-0.5), array(0.55)); }, -1, 1));
  // ---- binary ----
  c.push_back(binary("add", [](auto& a, auto& b) { return add(a, b); }, -1, 1));
  c.push_back(binary("subtract", [](auto& a, auto& b) { return subtract(a, b); }, -1, 1));
  c.push_back(binary("multiply", [](auto& a, auto& b) { return multiply(a, b); }, -1, 1));
  c.push_back(binary("divide", [](auto& a, auto& b) { return divide(a, b); }, 0.5, 2));
  c.push_back(binary("power", [](auto& a, auto& b) { return power(a, b); }, 0.5, 2));
  c.push_back(binary("maximum", [](auto& a, auto& b) { return maximum(a, b); }, -1, 1));
  c.push_back(binary("minimum", [](auto& a, auto& b) { return minimum(a, b); }, -1, 1));
  c.push_back(binary("arctan2", [](auto& a, auto& b) { return arctan2(a, b); }, 0.3, 2));
  c.push_back(binary("logaddexp", [](auto& a, auto& b) { return logaddexp(a, b); }, -1, 1));
  c.push_back(binary("remainder", [](auto& a, auto& b) { return remainder(a, b); }, 1.1, 1.9));
  c.push_back({"where",
               {V({2, 3}, -1, 1, 1), V({2, 3}, -1, 1, 2)},
               [](const std::vector<array>& x) {
                 array cond(std::initializer_list<bool>{true, false, true, false, false, true},
                            Shape{2, 3});
                 return where(cond, x[0], x[1]);
               }});
  c.push_back({"operators",
               {V({3}, 0.5, 2, 1), V({3}, 0.5, 2, 2)},
               [](const std::vector<array>& x) { return (x[0] * x[1] - x[0]) / x[1] + 2.0 * x[0]; }});
  // ---- reductions ----
  c.push_back(one("sum_all", {2, 3}, -1, 1, [](auto& a) { return sum(a); }));
  c.push_back(one("sum_axis", {2, 3}, -1, 1, [](auto& a) { return sum(a, 1); }));
  c.push_back(one("sum_keepdims", {2, 3, 2}, -1, 1,
                  [](auto& a) { return sum(a, std::vector<int>{0, 2}, true); }));
  c.push_back(one("prod", {2, 3}, 0.5, 1.5, [](auto& a) { return prod(a, 1); }));
  c.push_back(one("prod_all", {2, 3}, 0.5, 1.5, [](auto& a) { return prod(a); }));
  c.push_back(one("mean", {2, 3}, -1, 1, [](auto& a) { return mean(a, 0); }));
  c.push_back(one("max", {2, 3}, -1, 1, [](auto& a) { return max(a, 1); }));
  c.push_back(one("max_all", {2, 3}, -1, 1, [](auto& a) { return max(a); }));
  c.push_back(one("min", {2, 3}, -1, 1, [](auto& a) { return min(a, 0); }));
  c.push_back(one("logsumexp", {2, 3}, -1, 1, [](auto& a) { return logsumexp(a, 1); }));
  c.push_back(one("logsumexp_all", {2, 3}, -1, 1, [](auto& a) { return logsumexp(a); }));
  c.push_back(one("softmax", {2, 3}, -1, 1, [](auto& a) { return softmax(a, -1); }));
  c.push_back(one("softmax_precise", {2, 3}, -1, 1, [](auto& a) { return softmax(a, -1, true); }));
  c.push_back(one("softmax_axis0", {2, 3}, -1, 1, [](auto& a) { return softmax(a, 0); }));
  c.push_back(one("var", {2, 3}, -1, 1, [](auto& a) { return var(a, 1); }));
  c.push_back(one("var_ddof", {2, 3}, -1, 1, [](auto& a) { return var(a, 1, false, 1); }));
  c.push_back(one("std", {2, 3}, -1, 1, [](auto& a) { return tessera::std(a, 0); }));
  c.push_back(one("cumsum", {2, 3}, -1, 1, [](auto& a) { return cumsum(a, 1); }));
  c.push_back(one("cumsum_reverse", {2, 3}, -1, 1, [](auto& a) { return cumsum(a, 1, true); }));
  c.push_back(one("cumsum_exclusive", {2, 3}, -1, 1,
                  [](auto& a) { return cumsum(a, 1, false, false); }));
  c.push_back(one("cumprod", {2, 3}, 0.5, 1.5, [](auto& a) { return cumprod(a, 1); }));
  c.push_back(one("cummax", {2, 3}, -1, 1, [](auto& a) { return cummax(a, 1); }));
  c.push_back(one("cummin", {2, 3}, -1, 1, [](auto& a) { return cummin(a, 1); }));
  // Exclusive scans start with the identity (-inf / inf): sliced off, it has no derivative.
  c.push_back(one("cummax_exclusive", {2, 4}, -1, 1, [](auto& a) {
    return slice(cummax(a, 1, false, false), {0, 1}, {2, 4});
  }));
  c.push_back(one("cummin_exclusive_reverse", {2, 4}, -1, 1, [](auto& a) {
    return slice(cummin(a, 1, true, false), {0, 0}, {2, 3});
  }));
  c.push_back(one("logcumsumexp", {2, 3}, -1, 1, [](auto& a) { return logcumsumexp(a, 1); }));
  // ---- shape ----
  // Overlapping windows: an element read by several outputs collects each one's cotangent.
  c.push_back(one("as_strided_overlapping", {9}, -1, 1,
                  [](auto& a) { return as_strided(a, {3, 4}, {2, 1}, 1); }));
  c.push_back(one("reshape", {2, 3}, -1, 1, [](auto& a) { return reshape(a, {3, 2}); }));
  c.push_back(one("flatten", {2, 3}, -1, 1, [](auto& a) { return flatten(a); }));
  c.push_back(one("transpose", {2, 3, 2}, -1, 1, [](auto& a) { return transpose(a, {2, 0, 1}); }));
  c.push_back(one("transpose_then_exp", {2, 3}, -1, 1, [](auto& a) { return exp(transpose(a)); }));
  c.push_back(one("swapaxes", {2, 3}, -1, 1, [](auto& a) { return swapaxes(a, 0, 1); }));
  c.push_back(one("moveaxis", {2, 3, 2}, -1, 1, [](auto& a) { return moveaxis(a, 0, 2); }));
  c.push_back(one("broadcast_to", {3}, -1, 1, [](auto& a) { return broadcast_to(a, {2, 3}); }));
  c.push_back(one("expand_dims", {2, 3}, -1, 1, [](auto& a) { return expand_dims(a, 1); }));
  c.push_back(one("unflatten", {6}, -1, 1, [](auto& a) { return unflatten(a, 0, {2, 3}); }));
  c.push_back(one("atleast_3d", {3}, -1, 1, [](auto& a) { return atleast_3d(a); }));
  c.push_back(one("contiguous_of_transpose", {2, 3}, -1, 1,
                  [](auto& a) { return contiguous(transpose(a)); }));
  c.push_back(one("squeeze", {2, 1, 3}, -1, 1, [](auto& a) { return squeeze(a, 1); }));
  c.push_back({"concatenate",
               {V({2, 3}, -1, 1, 1), V({1, 3}, -1, 1, 2)},
               [](const std::vector<array>& x) { return concatenate({x[0], x[1]}, 0); }});
  c.push_back({"stack",
               {V({2, 3}, -1, 1, 1), V({2, 3}, -1, 1, 2)},
               [](const std::vector<array>& x) { return stack({x[0], x[1]}, 1); }});
  c.push_back(one("split", {4, 3}, -1, 1, [](auto& a) { return split(a, 2, 0)[1]; }));
  c.push_back(one("split_indices", {5, 3}, -1, 1,
                  [](auto& a) { return split(a, Shape{1, 3}, 0)[1]; }));
  c.push_back(one("unstack", {2, 3}, -1, 1, [](auto& a) { return unstack(a, 1)[2]; }));
  c.push_back({"broadcast_arrays",
               {V({2, 1}, -1, 1, 1), V({3}, -1, 1, 2)},
               [](const std::vector<array>& x) {
                 auto b = broadcast_arrays({x[0], x[1]});
                 return multiply(b[0], b[1]);
               }});
  c.push_back({"meshgrid",
               {V({2}, -1, 1, 1), V({3}, -1, 1, 2)},
               [](const std::vector<array>& x) {
                 auto m = meshgrid({x[0], x[1]});
                 return add(m[0], multiply(m[1], m[1]));
               }});
  c.push_back(one("pad", {2, 3}, -1, 1,
                  [](auto& a) { return pad(a, {{1, 0}, {0, 2}}, array(0.5)); }));
  c.push_back(one("slice", {4, 3}, -1, 1, [](auto& a) { return slice(a, {1, 0}, {3, 2}); }));
  c.push_back(one("slice_strided", {5, 3}, -1, 1,
                  [](auto& a) { return slice(a, Shape{0, 0}, Shape{5, 3}, Shape{2, 2}); }));
  c.push_back({"slice_update",
               {V({4, 3}, -1, 1, 1), V({2, 3}, -1, 1, 2)},
               [](const std::vector<array>& x) {
                 return slice_update(x[0], x[1], {1, 0}, {3, 3});
               }});
  c.push_back(one("slice_dynamic", {4, 3}, -1, 1, [](auto& a) {
    return slice(a, array({1}, int32), std::vector<int>{0}, Shape{2, 3});
  }));
  c.push_back(one("flip", {2, 3}, -1, 1, [](auto& a) { return flip(a, 1); }));
  c.push_back(one("roll", {2, 3}, -1, 1, [](auto& a) { return roll(a, 1, 1); }));
  c.push_back(one("repeat", {2, 3}, -1, 1, [](auto& a) { return repeat(a, 2, 1); }));
  c.push_back(one("tile", {2, 3}, -1, 1, [](auto& a) { return tile(a, {2, 1}); }));
  c.push_back(one("tril", {3, 3}, -1, 1, [](auto& a) { return tril(a); }));
  c.push_back(one("triu", {3, 3}, -1, 1, [](auto& a) { return triu(a, 1); }));
  // ---- indexing ----
  c.push_back(one("take", {4, 3}, -1, 1, [](auto& a) {
    return take(a, array({2, 0, 2}, int32), 0);
  }));
  c.push_back(one("take_flat", {4, 3}, -1, 1, [](auto& a) {
    return take(a, array({5, 1, 11, 5}, int32));
  }));
  c.push_back(one("take_along_axis", {2, 3}, -1, 1, [](auto& a) {
    return take_along_axis(a, array({2, 0, 1, 1}, Shape{2, 2}, int32), 1);
  }));
  c.push_back({"put_along_axis",
               {V({2, 3}, -1, 1, 1), V({2, 1}, -1, 1, 2)},
               [](const std::vector<array>& x) {
                 return put_along_axis(x[0], array({2, 0}, Shape{2, 1}, int32), x[1], 1);
               }});
  c.push_back({"scatter_add",
               {V({4, 3}, -1, 1, 1), V({2, 1, 3}, -1, 1, 2)},
               [](const std::vector<array>& x) {
                 return scatter_add(x[0], array({1, 3}, int32), x[1], 0);
               }});
  c.push_back({"scatter",
               {V({4, 3}, -1, 1, 1), V({2, 1, 3}, -1, 1, 2)},
               [](const std::vector<array>& x) {
                 return scatter(x[0], array({2, 0}, int32), x[1], 0);
               }});
  c.push_back(one("gather", {4, 3}, -1, 1, [](auto& a) {
    return gather(a, array({3, 1}, int32), 0, {1, 3});
  }));
  // ---- sorting ----
  c.push_back(one("sort", {2, 4}, -1, 1, [](auto& a) { return sort(a, 1); }));
  c.push_back(one("topk", {2, 4}, -1, 1, [](auto& a) { return topk(a, 2, 1); }));
  // ---- linear algebra ----
  c.push_back({"matmul",
               {V({2, 3}, -1, 1, 1), V({3, 4}, -1, 1, 2)},
               [](const std::vector<array>& x) { return matmul(x[0], x[1]); }});
  c.push_back({"matmul_batched_broadcast",
               {V({2, 2, 3}, -1, 1, 1), V({3, 2}, -1, 1, 2)},
               [](const std::vector<array>& x) { return matmul(x[0], x[1]); }});
  c.push_back({"matmul_vector",
               {V({3}, -1, 1, 1), V({3, 2}, -1, 1, 2)},
               [](const std::vector<array>& x) { return matmul(x[0], x[1]); }});
  c.push_back({"addmm",
               {V({2, 4}, -1, 1, 0), V({2, 3}, -1, 1, 1), V({3, 4}, -1, 1, 2)},
               [](const std::vector<array>& x) { return addmm(x[0], x[1], x[2], 0.5f, 2.0f); }});
  // An operand used transposed (nn.Linear's x @ W.T): its cotangent is made transposed.
  c.push_back({"matmul_rhs_transposed",
               {V({2, 3}, -1, 1, 1), V({4, 3}, -1, 1, 2)},
               [](const std::vector<array>& x) { return matmul(x[0], transpose(x[1])); }});
  c.push_back({"matmul_lhs_transposed",
               {V({3, 2}, -1, 1, 1), V({3, 4}, -1, 1, 2)},
               [](const std::vector<array>& x) { return matmul(transpose(x[0]), x[1]); }});
  c.push_back({"addmm_rhs_transposed",
               {V({2, 4}, -1, 1, 0), V({2, 3}, -1, 1, 1), V({4, 3}, -1, 1, 2)},
               [](const std::vector<array>& x) {
                 return addmm(x[0], x[1], transpose(x[2]), 0.5f, 2.0f);
               }});
  c.push_back({"inner",
               {V({2, 3}, -1, 1, 1), V({3}, -1, 1, 2)},
               [](const std::vector<array>& x) { return inner(x[0], x[1]); }});
  c.push_back({"outer",
               {V({2}, -1, 1, 1), V({3}, -1, 1, 2)},
               [](const std::vector<array>& x) { return outer(x[0], x[1]); }});
  c.push_back({"tensordot",
               {V({2, 3, 2}, -1, 1, 1), V({3, 2}, -1, 1, 2)},
               [](const std::vector<array>& x) { return tensordot(x[0], x[1], 2); }});
  c.push_back(one("norm", {2, 3}, 0.1, 1, [](auto& a) { return linalg::norm(a); }));
  c.push_back(one("norm_axis", {2, 3}, 0.1, 1, [](auto& a) { return linalg::norm(a, 1); }));
  c.push_back(one("norm_fro", {2, 3}, 0.1, 1, [](auto& a) { return linalg::norm(a, "fro"); }));
  c.push_back(one("norm_ord1", {2, 3}, 0.1, 1,
                  [](auto& a) { return linalg::norm(a, 1.0, std::vector<int>{1}); }));
  return c;
}

class GradOps : public ::testing::TestWithParam<Case> {};

TEST_P(GradOps, VjpAndJvpMatchFiniteDifferences) { check_gradients(GetParam()); }

INSTANTIATE_TEST_SUITE_P(AllOps, GradOps, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// A 0-d input and output go through the same machinery.
TEST(GradOpsEdges, ScalarInputAndOutput) {
  check_gradients({"scalar", {array(0.7, float64)}, [](const std::vector<array>& x) {
                     return multiply(sin(x[0]), exp(x[0]));
                   }});
}

// A non-contiguous primal (a transposed view) differentiates like its dense equal.
TEST(GradOpsEdges, NonContiguousPrimal) {
  array base = V({3, 2}, -1, 1, 3);
  array xt = transpose(base);
  check_gradients({"noncontig", {xt}, [](const std::vector<array>& x) {
                     return multiply(tanh(x[0]), x[0]);
                   }});
}

// A weight used transposed (y = x @ W.T, as nn.Linear) gets a row-contiguous gradient (not a
// column-major view every consumer would read strided), equal to 2 y^T x in double.
TEST(GradOpsEdges, AnOperandUsedTransposedGetsARowContiguousGradient) {
  const int n = 48, in = 20, out = 40;
  array x = astype(values({n, in}, -1, 1, 5), float32);
  array w = astype(values({out, in}, -1, 1, 6), float32);
  array c = astype(values({n, out}, -1, 1, 7), float32);
  const std::vector<double> xv = to_vec(x), wv = to_vec(w), cv = to_vec(c);
  for (bool with_bias : {false, true}) {
    auto loss = [&](const array& wt) {
      array y = with_bias ? addmm(c, x, transpose(wt)) : matmul(x, transpose(wt));
      return sum(y * y);
    };
    array g = grad(loss)(w);
    g.eval();
    EXPECT_TRUE(g.flags().row_contiguous) << "bias " << with_bias;
    const std::vector<double> gv = to_vec(g);
    for (int o = 0; o < out; ++o) {
      for (int i = 0; i < in; ++i) {
        double want = 0;
        for (int r = 0; r < n; ++r) {
          double y = with_bias ? cv[r * out + o] : 0.0;
          for (int k = 0; k < in; ++k) y += xv[r * in + k] * wv[o * in + k];
          want += 2 * y * xv[r * in + i];
        }
        ASSERT_NEAR(gv[o * in + i], want, 1e-4 * (1 + std::fabs(want))) << o << "," << i;
      }
    }
  }
  // The left operand used transposed: d sum((A^T B)^2) / dA = 2 B (A^T B)^T.
  array a = astype(values({in, n}, -1, 1, 8), float32);
  array ga = grad([&](const array& av) {
    array y = matmul(transpose(av), transpose(w));
    return sum(y * y);
  })(a);
  ga.eval();
  EXPECT_TRUE(ga.flags().row_contiguous);
}

// float32 inputs get float32 cotangents.
TEST(GradOpsEdges, CotangentDtypeFollowsInput) {
  array x({0.5f, 1.0f, 2.0f});
  auto g = grad([](const array& a) { return sum(log(a)); })(x);
  EXPECT_EQ(g.dtype(), float32);
  auto v = to_vec(g);
  EXPECT_NEAR(v[0], 2.0, 1e-6);
  EXPECT_NEAR(v[1], 1.0, 1e-6);
  EXPECT_NEAR(v[2], 0.5, 1e-6);
}

}  // namespace
