// vmap: a function mapped over a batch axis against a loop over the batch; axes, unbatched
// inputs and outputs, nesting with grad, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <ostream>
#include <string>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

std::vector<double> to_vec(const array& a) {
  array c = contiguous(astype(a, float64));
  c.eval();
  return std::vector<double>(c.data<double>(), c.data<double>() + c.size());
}

void expect_same(const array& got, const array& want, double tol = 1e-12) {
  ASSERT_EQ(got.shape(), want.shape());
  auto g = to_vec(got);
  auto w = to_vec(want);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], tol) << "element " << i;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no std::invalid_argument thrown)";
}

array seq(const Shape& shape, double lo, double hi) {
  int n = 1;
  for (auto d : shape) n *= d;
  return reshape(linspace(lo, hi, n, float64), shape);
}

// The reference: apply `f` to each slice along `in_axis` and stack along `out_axis`.
array loop(const std::function<array(const array&)>& f, const array& x, int in_axis,
           int out_axis) {
  std::vector<array> outs;
  for (int b = 0; b < x.shape(in_axis); ++b) outs.push_back(f(take(x, b, in_axis)));
  return stack(outs, out_axis);
}

TEST(Vmap, ElementwiseChainMatchesLoop) {
  auto f = [](const array& a) { return add(multiply(sin(a), exp(a)), array(1.0)); };
  array x = seq({4, 3}, -1, 1);
  expect_same(vmap(f)(x), loop(f, x, 0, 0));
}

TEST(Vmap, ReductionAndMatmulMatchLoop) {
  array w = seq({3, 2}, -0.5, 0.7);
  auto f = [w](const array& a) { return sum(tanh(matmul(a, w)), 0); };  // a: (2,3) -> (2)
  array x = seq({5, 2, 3}, -1, 1);
  expect_same(vmap(f)(x), loop(f, x, 0, 0));
}

TEST(Vmap, InAxisAndOutAxis) {
  auto f = [](const array& a) { return multiply(a, sum(a)); };  // a: (4) -> (4)
  array x = seq({4, 3}, -1, 1);  // batch along axis 1
  auto got = vmap(f, 1, 1)(x);
  EXPECT_EQ(got.shape(), (Shape{4, 3}));
  expect_same(got, loop(f, x, 1, 1));
  expect_same(vmap(f, 1, 0)(x), loop(f, x, 1, 0));
}

TEST(Vmap, TwoInputsOneUnbatched) {
  auto f = [](const array& a, const array& b) { return subtract(multiply(a, b), b); };
  array x = seq({3, 4}, -1, 1);
  array y = seq({4}, 0.5, 2);
  auto got = vmap(f, 0, -1)(x, y);
  std::vector<array> rows;
  for (int i = 0; i < 3; ++i) rows.push_back(f(take(x, i, 0), y));
  expect_same(got, stack(rows, 0));
}

TEST(Vmap, TwoInputsDifferentAxes) {
  auto f = [](const array& a, const array& b) { return add(a, b); };
  array x = seq({3, 2}, -1, 1);  // batch on axis 0
  array y = seq({2, 3}, 2, 3);   // batch on axis 1
  auto got = vmap(f, 0, 1)(x, y);
  std::vector<array> rows;
  for (int i = 0; i < 3; ++i) rows.push_back(f(take(x, i, 0), take(y, i, 1)));
  expect_same(got, stack(rows, 0));
}

TEST(Vmap, OutputsWithoutBatchDependenceAreRepeated) {
  array c({1.0, 2.0});
  auto f = [c](const std::vector<array>& in) {
    return std::vector<array>{multiply(in[0], array(2.0)), c, in[0]};
  };
  array x = seq({3, 2}, -1, 1);
  auto outs = vmap(f)({x});
  ASSERT_EQ(outs.size(), 3u);
  expect_same(outs[0], multiply(x, array(2.0)));
  expect_same(outs[1], broadcast_to(c, {3, 2}));
  expect_same(outs[2], x);  // returning the input itself
}

TEST(Vmap, NestedVmapIsAnOuterProduct) {
  auto f = [](const array& a, const array& b) { return multiply(a, b); };
  auto inner = vmap(f, -1, 0);    // a scalar, b batched -> (n)
  auto outer = vmap(inner, 0, -1);  // a batched -> (m, n)
  array a({1.0, 2.0, 3.0});
  array b({10.0, 20.0});
  auto got = outer(a, b);
  EXPECT_EQ(got.shape(), (Shape{3, 2}));
  expect_same(got, array({10.0, 20.0, 20.0, 40.0, 30.0, 60.0}, Shape{3, 2}));
}

TEST(Vmap, PerExampleGradientsMatchLoop) {
  // vmap(grad(f)): the gradient of each example's loss separately.
  array w = seq({3}, -0.5, 0.5);
  auto loss = [w](const array& x) { return sum(square(tanh(multiply(x, w)))); };
  auto g = grad(loss);
  array xs = seq({4, 3}, -1, 1);
  expect_same(vmap(g)(xs), loop(g, xs, 0, 0), 1e-12);
}

TEST(Vmap, GradOfVmappedFunction) {
  auto f = vmap([](const array& a) { return sum(exp(a)); });  // (B, n) -> (B)
  auto g = grad([&f](const array& x) { return sum(f(x)); })(seq({2, 3}, -1, 1));
  expect_same(g, exp(seq({2, 3}, -1, 1)));
}

// A value computed from a batched input differs across the batch: reading it while traced
// would hand element 0's value to every element, so it is an error. Values of unbatched inputs
// evaluate as usual.
TEST(Vmap, EvaluatingABatchedValueWhileTracedIsAnError) {
  auto scale_by_sum = [](const std::vector<array>& in) {
    const double k = sum(in[0]).item<double>();
    return std::vector<array>{multiply(in[1], array(k))};
  };
  array x = seq({3, 2}, -1, 1);
  auto msg = error_of([&] { vmap(scale_by_sum)({x, x}); });
  EXPECT_NE(msg.find("cannot evaluate an array computed from a batched input"),
            std::string::npos) << msg;
  array w = seq({2}, 0.5, 1);  // unbatched: its sum is one number
  expect_same(vmap(scale_by_sum, {-1, 0})({w, x})[0],
              multiply(x, array(sum(w).item<double>())));
}

TEST(Vmap, EmptyBatch) {
  auto out = vmap([](const array& a) { return sum(exp(a)); })(zeros({0, 3}, float64));
  EXPECT_EQ(out.shape(), Shape{0});
  out.eval();
}

TEST(Vmap, BatchSizesMustAgree) {
  auto f = [](const array& a, const array& b) { return add(a, b); };
  auto msg = error_of([&] { vmap(f)(seq({3, 2}, 0, 1), seq({4, 2}, 0, 1)); });
  EXPECT_NE(msg.find("3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("different sizes"), std::string::npos) << msg;
}

VecFn h_of() {
  return [](const std::vector<array>& in) { return std::vector<array>{in[0]}; };
}

TEST(Vmap, AxisErrorsAreNamed) {
  auto f = [](const array& a) { return a; };
  auto msg = error_of([&] { vmap(f, 2)(seq({3, 2}, 0, 1)); });
  EXPECT_NE(msg.find("in_axes[0] = 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(3,2)"), std::string::npos) << msg;
  msg = error_of([&] { vmap(f)(array(1.0)); });
  EXPECT_NE(msg.find("0-d"), std::string::npos) << msg;
  msg = error_of([&] { vmap(f, 0, 2)(seq({3, 2}, 0, 1)); });
  EXPECT_NE(msg.find("out_axes[0] = 2"), std::string::npos) << msg;
  auto g = [](const array& a, const array& b) { return add(a, b); };
  // Axes that batch nothing on one side are refused when the function is made, as MLX does.
  msg = error_of([&] { vmap(g, -1, -1); });
  EXPECT_NE(msg.find("no input is batched (every in_axis is -1)"), std::string::npos) << msg;
  msg = error_of([&] { vmap(f, 0, -1); });
  EXPECT_NE(msg.find("no output is batched (every out_axis is -1)"), std::string::npos) << msg;
  msg = error_of([&] { vmap(h_of(), {-1, -1}, {-1}); });
  EXPECT_EQ(msg, "(no std::invalid_argument thrown)");  // consistent, refused at the call
  msg = error_of([&] { vmap(h_of(), {-1, -1}, {-1})({array({1.0}), array({1.0})}); });
  EXPECT_NE(msg.find("at least one input"), std::string::npos) << msg;
  VecFn h = [](const std::vector<array>& in) { return in; };
  msg = error_of([&] { vmap(h, {0})({array({1.0}), array({1.0})}); });
  EXPECT_NE(msg.find("1 in_axes"), std::string::npos) << msg;
}

// A start array that differs per batch element is refused with a way out, not mis-sliced.
TEST(Vmap, BatchedSliceStartIsRefusedWithTheAlternative) {
  VecFn f = [](const std::vector<array>& in) {
    return std::vector<array>{slice(in[0], in[1], {0}, {2})};
  };
  auto msg = error_of([&] { vmap(f, {-1, 0})({seq({5}, 0, 1), array({0, 1, 2}, {3, 1})}); });
  EXPECT_NE(msg.find("start array that is batched"), std::string::npos) << msg;
  EXPECT_NE(msg.find("take_along_axis"), std::string::npos) << msg;
}

// ---- every op's batching rule: vmap over axis 0 and over the last axis vs a loop ----

using Fn = std::function<array(const std::vector<array>&)>;

struct OpCase {
  std::string name;
  std::vector<Shape> shapes;  // unbatched input shapes
  double lo, hi;
  Fn f;
};

[[maybe_unused]] void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

// Batch of 3 along `axis` of each input (-1 leaves that input unbatched).
void check_op_vmap(const OpCase& c, const std::vector<int>& axes) {
  std::vector<array> batched;
  for (size_t k = 0; k < c.shapes.size(); ++k) {
    Shape s = c.shapes[k];
    if (axes[k] >= 0) s.insert(s.begin() + axes[k], 3);
    batched.push_back(seq(s, c.lo + 0.01 * k, c.hi - 0.013 * k));
  }
  VecFn vf = [&c](const std::vector<array>& in) { return std::vector<array>{c.f(in)}; };
  array got = vmap(vf, axes, {0})(batched)[0];
  std::vector<array> rows;
  for (int b = 0; b < 3; ++b) {
    std::vector<array> args;
    for (size_t k = 0; k < batched.size(); ++k)
      args.push_back(axes[k] >= 0 ? take(batched[k], b, axes[k]) : batched[k]);
    rows.push_back(c.f(args));
  }
  expect_same(got, stack(rows, 0), 1e-10);
}

class VmapOps : public ::testing::TestWithParam<OpCase> {};

TEST_P(VmapOps, MatchesLoopOverBatch) {
  const auto& c = GetParam();
  std::vector<int> first(c.shapes.size(), 0);
  {
    SCOPED_TRACE("batch axis 0");
    check_op_vmap(c, first);
  }
  std::vector<int> last;
  for (auto& s : c.shapes) last.push_back(static_cast<int>(s.size()));
  {
    SCOPED_TRACE("batch axis last");
    check_op_vmap(c, last);
  }
  if (c.shapes.size() > 1) {
    std::vector<int> partial(c.shapes.size(), -1);
    partial[0] = 0;
    {
      SCOPED_TRACE("only input 0 batched");
      check_op_vmap(c, partial);
    }
    // The unbatched inputs must line up with the element dims, not with the batch axis.
    partial[0] = static_cast<int>(c.shapes[0].size());
    SCOPED_TRACE("only input 0 batched, along its last axis");
    check_op_vmap(c, partial);
  }
}

OpCase un(const std::string& n, double lo, double hi, std::function<array(const array&)> op,
          Shape shape = {2, 3}) {
  return {n, {shape}, lo, hi, [op](const std::vector<array>& x) { return op(x[0]); }};
}
OpCase bin(const std::string& n, double lo, double hi,
           std::function<array(const array&, const array&)> op, Shape a = {2, 3},
           Shape b = {3}) {
  return {n, {a, b}, lo, hi, [op](const std::vector<array>& x) { return op(x[0], x[1]); }};
}

std::vector<OpCase> op_cases() {
  std::vector<OpCase> c;
  c.push_back(un("exp", -1, 1, [](auto& a) { return exp(a); }));
  c.push_back(un("log", 0.5, 2, [](auto& a) { return log(a); }));
  c.push_back(un("sqrt", 0.5, 2, [](auto& a) { return sqrt(a); }));
  c.push_back(un("tanh", -1, 1, [](auto& a) { return tanh(a); }));
  c.push_back(un("sigmoid", -1, 1, [](auto& a) { return sigmoid(a); }));
  c.push_back(un("abs", -1, 1, [](auto& a) { return abs(a); }));
  c.push_back(un("erf", -1, 1, [](auto& a) { return erf(a); }));
  c.push_back(un("astype", -1, 1, [](auto& a) { return astype(astype(a, float32), float64); }));
  c.push_back(un("stop_gradient", -1, 1, [](auto& a) { return stop_gradient(a); }));
  c.push_back(bin("add", -1, 1, [](auto& a, auto& b) { return add(a, b); }));
  c.push_back(bin("multiply", -1, 1, [](auto& a, auto& b) { return multiply(a, b); }));
  c.push_back(bin("divide", 0.5, 2, [](auto& a, auto& b) { return divide(a, b); }));
  c.push_back(bin("power", 0.5, 2, [](auto& a, auto& b) { return power(a, b); }));
  c.push_back(bin("maximum", -1, 1, [](auto& a, auto& b) { return maximum(a, b); }));
  c.push_back(bin("arctan2", 0.5, 2, [](auto& a, auto& b) { return arctan2(a, b); }));
  c.push_back(bin("greater", -1, 1, [](auto& a, auto& b) { return astype(greater(a, b), float64); }));
  c.push_back({"where", {{2, 3}, {2, 3}}, -1, 1, [](const std::vector<array>& x) {
                 return where(greater(x[0], x[1]), x[0], x[1]);
               }});
  c.push_back(un("sum_all", -1, 1, [](auto& a) { return sum(a); }));
  c.push_back(un("sum_axis1", -1, 1, [](auto& a) { return sum(a, 1); }));
  c.push_back(un("sum_keepdims", -1, 1, [](auto& a) { return sum(a, 0, true); }));
  c.push_back(un("mean", -1, 1, [](auto& a) { return mean(a, -1); }));
  c.push_back(un("prod", 0.5, 1.5, [](auto& a) { return prod(a, 0); }));
  c.push_back(un("max", -1, 1, [](auto& a) { return max(a, 1); }));
  c.push_back(un("argmax", -1, 1, [](auto& a) { return astype(argmax(a, 1), float64); }));
  c.push_back(un("logsumexp", -1, 1, [](auto& a) { return logsumexp(a, 1); }));
  c.push_back(un("softmax", -1, 1, [](auto& a) { return softmax(a, -1); }));
  c.push_back(un("var", -1, 1, [](auto& a) { return var(a, 0); }));
  c.push_back(un("cumsum", -1, 1, [](auto& a) { return cumsum(a, 1); }));
  c.push_back(un("reshape", -1, 1, [](auto& a) { return reshape(a, {3, 2}); }));
  c.push_back(un("flatten", -1, 1, [](auto& a) { return flatten(a); }));
  c.push_back(un("transpose", -1, 1, [](auto& a) { return transpose(a); }));
  c.push_back(un("expand_dims", -1, 1, [](auto& a) { return expand_dims(a, 0); }));
  c.push_back(un("squeeze", -1, 1, [](auto& a) { return squeeze(a, 1); }, {2, 1, 3}));
  c.push_back(un("broadcast_to", -1, 1, [](auto& a) { return broadcast_to(a, {4, 2, 3}); }));
  c.push_back(bin("concatenate", -1, 1, [](auto& a, auto& b) { return concatenate({a, b}, 0); },
                  {2, 3}, {1, 3}));
  c.push_back(bin("stack", -1, 1, [](auto& a, auto& b) { return stack({a, b}, 1); }, {2, 3},
                  {2, 3}));
  c.push_back(un("split", -1, 1, [](auto& a) { return split(a, 3, 1)[2]; }));
  c.push_back(un("slice", -1, 1, [](auto& a) { return slice(a, {0, 1}, {2, 3}); }));
  c.push_back(un("pad", -1, 1, [](auto& a) { return pad(a, {{1, 1}, {0, 1}}); }));
  c.push_back(un("flip", -1, 1, [](auto& a) { return flip(a, 1); }));
  c.push_back(un("take", -1, 1, [](auto& a) { return take(a, array({2, 0}, int32), 1); }));
  // A 0-d fill value computed from the input: one fill per batch element.
  c.push_back(un("full_of_a_sum", -1, 1, [](auto& a) { return full({2, 4}, sum(a)); }));
  // Slices at a start held in an array (not batched: the same start for every element).
  c.push_back(un("slice_dynamic", -1, 1,
                 [](auto& a) { return slice(a, array({1}, int32), {1}, {2, 2}); }));
  c.push_back(bin("slice_update_dynamic", -1, 1,
                  [](auto& a, auto& b) { return slice_update(a, b, array({1}, int32), {1}); },
                  {2, 3}, {2, 1}));
  // Updates of shape (index dims..., slice dims...): batched source, unbatched updates
  // ("only input 0 batched") and both batched.
  c.push_back(bin("scatter", -1, 1,
                  [](auto& a, auto& b) {
                    return scatter(a, {array({2, 0}, int32)}, reshape(b, {2, 1, 3}), {0});
                  },
                  {3, 3}, {6}));
  c.push_back(bin("scatter_add_two_axes", -1, 1,
                  [](auto& a, auto& b) {
                    return scatter_add(a, {array({1}, int32), array({2}, int32)},
                                       reshape(b, {1, 1, 1}), {0, 1});
                  },
                  {2, 3}, {1}));
  c.push_back(un("take_along_axis", -1, 1, [](auto& a) {
    return take_along_axis(a, array({2, 0, 1, 1}, Shape{2, 2}, int32), 1);
  }));
  c.push_back(un("sort", -1, 1, [](auto& a) { return sort(a, 1); }));
  c.push_back(bin("matmul", -1, 1, [](auto& a, auto& b) { return matmul(a, b); }, {2, 3},
                  {3, 2}));
  c.push_back(bin("matmul_vector", -1, 1, [](auto& a, auto& b) { return matmul(a, b); }, {3},
                  {3, 2}));
  return c;
}

INSTANTIATE_TEST_SUITE_P(AllOps, VmapOps, ::testing::ValuesIn(op_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return info.param.name;
                         });

TEST(Vmap, ResultsAreOrdinaryArraysAfterTheTransform) {
  auto out = vmap([](const array& a) { return exp(a); })(seq({2, 2}, 0, 1));
  EXPECT_FALSE(out.is_tracer());
}

}  // namespace
