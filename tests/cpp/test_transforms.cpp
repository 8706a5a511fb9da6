// vjp, jvp, value_and_grad, grad, custom_function / custom_vjp and checkpoint: values against
// closed forms or finite differences, error messages, deep graphs, nesting.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "tessera/graph_utils.h"
#include "tessera/scheduler.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

std::vector<double> to_vec(const array& a) {
  array c = contiguous(astype(a, float64));
  c.eval();
  return std::vector<double>(c.data<double>(), c.data<double>() + c.size());
}

void expect_near(const array& a, const std::vector<double>& want, double tol = 1e-6) {
  auto got = to_vec(a);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
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

// ---- vjp ----

TEST(Vjp, SquareGivesTwiceTheInputTimesCotangent) {
  array x({1.0, 2.0, 3.0});
  auto [out, g] = vjp([](const array& a) { return multiply(a, a); }, x, array({1.0, 0.5, -1.0}));
  expect_near(out, {1, 4, 9});
  expect_near(g, {2, 2, -6});
}

// The tracers vjp puts in front of its inputs share the inputs' buffers (a training step does
// not copy every parameter), and ops that could reuse a buffer in place never take a shared one.
TEST(Vjp, TracersShareTheInputsBufferAndLeaveItIntact) {
  array x = arange(0, 4096, 1) * 0.001f;
  eval(x);
  const std::vector<double> before = to_vec(x);
  const void* data = x.raw_data();
  std::optional<array> tracer;
  auto f = [&tracer](const std::vector<array>& in) {
    tracer = in[0];
    // exp(t) + 1: the add could write into exp's buffer, never into t's (x's).
    return std::vector<array>{exp(in[0]) + 1.0f, in[0] * 2.0f};
  };
  auto [outs, grads] = vjp(f, {x}, {ones({4096}), ones({4096})});
  eval(outs);
  eval(grads);
  ASSERT_TRUE(tracer.has_value());
  eval(*tracer);
  EXPECT_EQ(tracer->raw_data(), data);  // the tracer is a view of x, not a copy
  EXPECT_EQ(x.raw_data(), data);
  EXPECT_EQ(to_vec(x), before);
  const auto g = to_vec(grads[0]);  // d/dx of sum(exp(x) + 1) + sum(2x)
  for (size_t i = 0; i < g.size(); i += 511) EXPECT_NEAR(g[i], std::exp(before[i]) + 2.0, 1e-5 * g[i]);
}

// A transform's own ops (tracer copies, zeros for a missing cotangent, sums of cotangents, casts)
// run on the streams of the arrays they belong to, as MLX's do: a vjp of work on stream s2
// finishes while the default stream is held by a task (which gives up after 5 s, so a vjp that
// waits for it shows as a slow one instead of hanging).
TEST(Vjp, ItsOwnOpsRunOnTheStreamsOfTheirArrays) {
  auto s1 = default_stream(Device::cpu);
  auto s2 = new_stream(Device::cpu);
  auto release = std::make_shared<std::promise<void>>();
  auto released = release->get_future().share();
  scheduler::enqueue(s1, [released] { released.wait_for(std::chrono::seconds(5)); });
  const auto start = std::chrono::steady_clock::now();
  auto fn = [s2](const std::vector<array>& in) {
    // in[0] is used twice (cotangents sum), in[1] not at all (zeros), the output is float16
    // against a float32 cotangent (a cast).
    return std::vector<array>{astype(add(in[0], multiply(in[0], in[0], s2), s2), float16, s2)};
  };
  auto x = full({4}, 3.0f, s2);
  auto y = full({4}, 1.0f, s2);
  auto [outs, grads] = vjp(fn, {x, y}, {full({4}, 2.0f, s2)});
  eval(outs[0], grads[0], grads[1]);
  const auto waited = std::chrono::steady_clock::now() - start;
  release->set_value();
  EXPECT_LT(waited, std::chrono::seconds(3)) << "the vjp waited for the default stream";
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(grads[0].data<float>()[i], 2.0f * (1.0f + 2.0f * 3.0f));
    EXPECT_EQ(grads[1].data<float>()[i], 0.0f);
  }
  synchronize(s1);
}

TEST(Vjp, SeveralConsumersAccumulate) {
  // f(x, y) = x*y + x + exp(x): df/dx = y + 1 + exp(x), df/dy = x.
  array x({0.5, -1.0});
  array y({2.0, 3.0});
  auto [outs, gs] = vjp(
      [](const std::vector<array>& in) {
        return std::vector<array>{add(add(multiply(in[0], in[1]), in[0]), exp(in[0]))};
      },
      {x, y}, {ones({2}, float64)});
  expect_near(gs[0], {2 + 1 + std::exp(0.5), 3 + 1 + std::exp(-1.0)});
  expect_near(gs[1], {0.5, -1.0});
}

TEST(Vjp, SameArrayPassedTwiceGetsSeparateGradients) {
  array x({3.0});
  auto [outs, gs] = vjp(
      [](const std::vector<array>& in) { return std::vector<array>{multiply(in[0], square(in[1]))}; },
      {x, x}, {ones({1}, float64)});
  expect_near(gs[0], {9});
  expect_near(gs[1], {18});
}

TEST(Vjp, InputWithoutPathGetsZeros) {
  array x({1.0, 2.0});
  array y({5.0, 6.0, 7.0});
  auto [outs, gs] = vjp(
      [](const std::vector<array>& in) { return std::vector<array>{sin(in[0])}; }, {x, y},
      {ones({2}, float64)});
  EXPECT_EQ(gs[1].shape(), Shape{3});
  expect_near(gs[1], {0, 0, 0});
  expect_near(gs[0], {std::cos(1.0), std::cos(2.0)});
}

TEST(Vjp, SeveralOutputsEachWithACotangent) {
  array x({1.0, 2.0});
  auto [outs, gs] = vjp(
      [](const std::vector<array>& in) {
        return std::vector<array>{square(in[0]), multiply(in[0], array(3.0))};
      },
      {x}, {array({1.0, 1.0}), array({2.0, 0.0})});
  ASSERT_EQ(outs.size(), 2u);
  expect_near(gs[0], {2 * 1 + 6, 2 * 2 + 0});
}

TEST(Vjp, IdentityFunctionReturnsTheCotangent) {
  array x({1.0, 2.0});
  auto [out, g] = vjp([](const array& a) { return a; }, x, array({4.0, 5.0}));
  expect_near(g, {4, 5});
}

TEST(Vjp, CotangentIsCastToTheOutputDtype) {
  array x({1.0f, 2.0f});
  auto [out, g] = vjp([](const array& a) { return multiply(a, a); }, x, array({1.0, 1.0}));
  EXPECT_EQ(g.dtype(), float32);
  expect_near(g, {2, 4});
}

TEST(Vjp, StopGradientBlocksThePath) {
  array x({2.0});
  auto [out, g] = vjp(
      [](const array& a) { return add(multiply(a, stop_gradient(a)), stop_gradient(exp(a))); }, x,
      array({1.0}));
  expect_near(g, {2});  // only the unstopped factor contributes
}

TEST(Vjp, ClosureArraysAreConstants) {
  array w({3.0, 4.0});
  array x({1.0, 2.0});
  auto [out, g] = vjp([&w](const array& a) { return multiply(a, w); }, x, array({1.0, 1.0}));
  expect_near(g, {3, 4});
}

TEST(Vjp, CotangentCountMismatchIsNamed) {
  array x({1.0});
  auto msg = error_of([&] {
    vjp([](const std::vector<array>& in) { return std::vector<array>{in[0], in[0]}; }, {x},
        {array({1.0})});
  });
  EXPECT_NE(msg.find("2 outputs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 cotangents"), std::string::npos) << msg;
}

TEST(Vjp, CotangentShapeMismatchIsNamed) {
  array x({1.0, 2.0});
  auto msg = error_of([&] {
    vjp([](const array& a) { return a; }, x, array({1.0, 2.0, 3.0}));
  });
  EXPECT_NE(msg.find("(2)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(3)"), std::string::npos) << msg;
}

TEST(Vjp, DeepChainDoesNotRecurse) {
  // 20000 nodes: y = ((x + 1) * 1) + 1 ... ; dy/dx = 1.
  array x({0.5});
  auto [out, g] = vjp(
      [](const array& a) {
        array y = a;
        for (int i = 0; i < 10000; ++i) y = multiply(add(y, array(1.0)), array(1.0));
        return y;
      },
      x, array({2.0}));
  expect_near(out, {10000.5});
  expect_near(g, {2.0});
}

TEST(Vjp, WorksWhenTheFunctionEvaluatesIntermediates) {
  array x({0.5, 1.5});
  auto [out, g] = vjp(
      [](const array& a) {
        array e = exp(a);
        e.eval();  // partly evaluated graph must still be walkable
        return multiply(e, a);
      },
      x, array({1.0, 1.0}));
  expect_near(g, {std::exp(0.5) * 1.5, std::exp(1.5) * 2.5});
}

TEST(Vjp, ResultsAreOrdinaryArraysAfterTheTransform) {
  array x({1.0, 2.0});
  auto [out, g] = vjp([](const array& a) { return sin(a); }, x, array({1.0, 1.0}));
  EXPECT_FALSE(out.is_tracer());
  EXPECT_FALSE(g.is_tracer());
  EXPECT_FALSE(x.is_tracer());
}

TEST(Vjp, MultiOutputPrimitiveWithSomeOutputsUnused) {
  // split gives three outputs of one node; the middle one is dropped at once.
  auto f = [](const array& a) {
    auto parts = split(a, 3, 0);
    array first = parts[0];
    array last = parts[2];
    parts.clear();
    return add(sum(multiply(first, array(2.0))), sum(exp(last)));
  };
  array x({0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, float64);
  auto g = grad(f)(x);
  expect_near(g, {2, 2, 0, 0, std::exp(0.5), std::exp(0.6)});
  auto [y, t] = jvp(f, x, array({1.0, 0.0, 5.0, 5.0, 1.0, 1.0}, float64));
  EXPECT_NEAR(t.item<double>(), 2 + std::exp(0.5) + std::exp(0.6), 1e-12);
}

TEST(Vjp, TrainingLoopLeavesNoGraphBehind) {
  // After eval, updated parameters are plain data: the graph of earlier steps is not kept.
  auto loss = [](const array& w) { return sum(square(subtract(w, array(3.0)))); };
  auto g = grad(loss);
  array w({0.0, 1.0}, float64);
  for (int step = 0; step < 50; ++step) {
    w = subtract(w, multiply(g(w), array(0.1, float64)));
    eval(w);
    ASSERT_FALSE(w.has_primitive()) << "step " << step;
    ASSERT_FALSE(w.is_tracer()) << "step " << step;
  }
  // w_k = 3 - 0.8^k (3 - w_0).
  expect_near(w, {3 - std::pow(0.8, 50) * 3, 3 - std::pow(0.8, 50) * 2}, 1e-9);
}

TEST(Vjp, EmptyAndScalarPrimals) {
  auto g = grad([](const std::vector<array>& in) {
    return add(sum(exp(in[0])), multiply(in[1], in[1]));
  }, std::vector<int>{0, 1})({zeros({0, 3}, float64), array(1.5)});
  EXPECT_EQ(g[0].shape(), (Shape{0, 3}));
  EXPECT_EQ(g[1].shape(), Shape{});
  EXPECT_NEAR(g[1].item<double>(), 3.0, 1e-12);
}

TEST(Vjp, StopGradientOutputsTakeNoCotangent) {
  array x({2.0});
  auto [outs, gs] = vjp(
      [](const std::vector<array>& in) {
        return std::vector<array>{stop_gradient(in[0]), square(in[0])};
      },
      {x}, {array({1.0})});
  ASSERT_EQ(outs.size(), 2u);
  expect_near(gs[0], {4});
}

// ---- jvp ----

TEST(Jvp, ProductRule) {
  // f(x, y) = sin(x) * y; df = cos(x) y dx + sin(x) dy.
  array x({0.3, 1.2});
  array y({2.0, -1.0});
  auto [outs, ts] = jvp(
      [](const std::vector<array>& in) { return std::vector<array>{multiply(sin(in[0]), in[1])}; },
      {x, y}, {array({1.0, 0.5}), array({0.0, 2.0})});
  expect_near(outs[0], {std::sin(0.3) * 2, std::sin(1.2) * -1});
  expect_near(ts[0], {std::cos(0.3) * 2 * 1, std::cos(1.2) * -1 * 0.5 + std::sin(1.2) * 2});
}

TEST(Jvp, OutputWithoutPathGetsZeroTangent) {
  array x({1.0});
  auto [outs, ts] = jvp(
      [](const std::vector<array>& in) { return std::vector<array>{exp(in[0]), array({7.0, 8.0})}; },
      {x}, {array({1.0})});
  expect_near(ts[0], {std::exp(1.0)});
  expect_near(ts[1], {0, 0});
}

TEST(Jvp, SingleArrayOverload) {
  auto [y, t] = jvp([](const array& a) { return square(a); }, array(3.0), array(2.0));
  EXPECT_NEAR(y.item<double>(), 9.0, 1e-12);
  EXPECT_NEAR(t.item<double>(), 12.0, 1e-12);
}

TEST(Jvp, MismatchedTangentsAreNamed) {
  array x({1.0, 2.0});
  auto msg = error_of([&] {
    jvp([](const std::vector<array>& in) { return in; }, {x}, {array({1.0, 2.0}), array({1.0})});
  });
  EXPECT_NE(msg.find("1 primals but 2 tangents"), std::string::npos) << msg;
  msg = error_of([&] { jvp([](const array& a) { return a; }, x, array({1.0})); });
  EXPECT_NE(msg.find("(2)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(1)"), std::string::npos) << msg;
}

// ---- value_and_grad / grad ----

TEST(ValueAndGrad, ScalarFunction) {
  auto vg = value_and_grad([](const array& a) { return sum(square(a)); });
  auto [v, g] = vg(array({1.0, -2.0, 3.0}));
  EXPECT_NEAR(v.item<double>(), 14.0, 1e-12);
  expect_near(g, {2, -4, 6});
}

TEST(ValueAndGrad, SeveralArgnumsInSortedOrderAndNegativeArgnum) {
  auto f = [](const std::vector<array>& in) {
    return sum(add(multiply(in[0], in[1]), multiply(in[2], in[2])));
  };
  array a({1.0, 2.0}), b({3.0, 4.0}), c({5.0, 6.0});
  auto [v, gs] = value_and_grad(f, std::vector<int>{2, 0})({a, b, c});
  EXPECT_NEAR(v.item<double>(), 3 + 8 + 25 + 36, 1e-12);
  ASSERT_EQ(gs.size(), 2u);
  expect_near(gs[0], {3, 4});    // d/da
  expect_near(gs[1], {10, 12});  // d/dc
  auto gneg = grad(f, -2)({a, b, c});
  expect_near(gneg[0], {1, 2});  // d/db
}

TEST(ValueAndGrad, AuxiliaryOutputsAreReturnedNotDifferentiated) {
  auto vg = value_and_grad(
      [](const std::vector<array>& in) {
        return std::vector<array>{sum(exp(in[0])), multiply(in[0], array(2.0))};
      },
      0);
  auto [outs, gs] = vg({array({0.0, 1.0})});
  ASSERT_EQ(outs.size(), 2u);
  expect_near(outs[1], {0, 2});
  expect_near(gs[0], {1, std::exp(1.0)});
}

TEST(ValueAndGrad, NonScalarOutputIsAnErrorNamingTheShape) {
  auto vg = value_and_grad([](const array& a) { return multiply(a, a); });
  auto msg = error_of([&] { vg(array({1.0, 2.0})); });
  EXPECT_NE(msg.find("scalar"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(2)"), std::string::npos) << msg;
}

TEST(ValueAndGrad, BadArgnumsAreNamed) {
  auto f = [](const std::vector<array>& in) { return sum(in[0]); };
  auto msg = error_of([&] { grad(f, 3)({array({1.0}), array({2.0})}); });
  EXPECT_NE(msg.find("argnum 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2 inputs"), std::string::npos) << msg;
  msg = error_of([&] { grad(f, std::vector<int>{0, -2})({array({1.0}), array({2.0})}); });
  EXPECT_NE(msg.find("repeated"), std::string::npos) << msg;
  EXPECT_THROW(value_and_grad(f, std::vector<int>{}), std::invalid_argument);
}

TEST(Grad, SecondDerivativeOfSinIsMinusSin) {
  auto d1 = grad([](const array& a) { return sin(a); });
  auto d2 = grad(d1);
  auto d3 = grad(d2);
  for (double x : {0.3, 1.1, -2.0}) {
    EXPECT_NEAR(d1(array(x, float64)).item<double>(), std::cos(x), 1e-12);
    EXPECT_NEAR(d2(array(x, float64)).item<double>(), -std::sin(x), 1e-12);
    EXPECT_NEAR(d3(array(x, float64)).item<double>(), -std::cos(x), 1e-12);
  }
}

TEST(Grad, SecondDerivativeOfAProduct) {
  // f(x) = x^3 exp(x); f'' = (6x + 6x^2 + x^3) exp(x).
  auto f = [](const array& a) { return multiply(multiply(a, square(a)), exp(a)); };
  double x = 0.7;
  double want = (6 * x + 6 * x * x + x * x * x) * std::exp(x);
  EXPECT_NEAR(grad(grad(f))(array(x, float64)).item<double>(), want, 1e-10);
}

TEST(ValueAndGrad, TinyMlpLossMatchesFiniteDifferences) {
  auto loss = [](const std::vector<array>& p) {
    const array& w1 = p[0];
    const array& b1 = p[1];
    const array& w2 = p[2];
    array x = reshape(linspace(-1.0, 1.0, 15, float64), {5, 3});
    array y = reshape(linspace(0.5, -0.5, 10, float64), {5, 2});
    array h = tanh(add(matmul(x, w1), b1));
    array d = subtract(matmul(h, w2), y);
    return mean(square(d));
  };
  std::vector<array> params = {
      reshape(linspace(-0.6, 0.7, 12, float64), {3, 4}),
      linspace(-0.1, 0.2, 4, float64),
      reshape(linspace(0.4, -0.5, 8, float64), {4, 2}),
  };
  auto [v, gs] = value_and_grad(loss, std::vector<int>{0, 1, 2})(params);
  EXPECT_NEAR(v.item<double>(), loss(params).item<double>(), 1e-14);
  const double h = 1e-6;
  for (size_t k = 0; k < params.size(); ++k) {
    auto base = to_vec(params[k]);
    auto g = to_vec(gs[k]);
    ASSERT_EQ(g.size(), base.size());
    for (size_t j = 0; j < base.size(); ++j) {
      auto p = base, m = base;
      p[j] += h;
      m[j] -= h;
      auto args = params;
      args[k] = array(p, params[k].shape(), float64);
      double fp = loss(args).item<double>();
      args[k] = array(m, params[k].shape(), float64);
      double fm = loss(args).item<double>();
      EXPECT_NEAR(g[j], (fp - fm) / (2 * h), 1e-7) << "param " << k << " element " << j;
    }
  }
}

// ---- custom rules ----

TEST(CustomVjp, ReplacesTheGradient) {
  // Forward: sin(x); backward deliberately 10 * cotangent instead of cos(x) * cotangent.
  auto f = custom_vjp(
      [](const std::vector<array>& in) { return std::vector<array>{sin(in[0])}; },
      [](const std::vector<array>&, const std::vector<array>& cot, const std::vector<array>&) {
        return std::vector<array>{multiply(cot[0], array(10.0))};
      });
  array x({0.5, 1.0}, float64);
  auto outs = f({x});
  expect_near(outs[0], {std::sin(0.5), std::sin(1.0)});
  auto g = grad([&f](const array& a) { return sum(f({a})[0]); })(x);
  expect_near(g, {10, 10});
  // Composition: the custom rule is applied in the middle of a chain.
  auto g2 = grad([&f](const array& a) { return sum(square(f({multiply(a, array(2.0))})[0])); })(x);
  expect_near(g2, {2 * std::sin(1.0) * 10 * 2, 2 * std::sin(2.0) * 10 * 2});
}

TEST(CustomVjp, RuleSeesPrimalsAndOutputs) {
  // d/dx exp(x) computed from the saved output instead of recomputing exp.
  auto f = custom_vjp(
      [](const std::vector<array>& in) { return std::vector<array>{exp(in[0])}; },
      [](const std::vector<array>& primals, const std::vector<array>& cot,
         const std::vector<array>& outs) {
        EXPECT_EQ(primals.size(), 1u);
        EXPECT_EQ(outs.size(), 1u);
        return std::vector<array>{multiply(cot[0], outs[0])};
      });
  auto g = grad([&f](const array& a) { return sum(f({a})[0]); })(array({0.0, 1.0}));
  expect_near(g, {1, std::exp(1.0)});
}

TEST(CustomVjp, WrongNumberOfCotangentsIsNamed) {
  auto f = custom_vjp(
      [](const std::vector<array>& in) { return std::vector<array>{add(in[0], in[1])}; },
      [](const std::vector<array>&, const std::vector<array>& cot, const std::vector<array>&) {
        return std::vector<array>{cot[0]};
      });
  auto msg = error_of([&] {
    grad([&f](const std::vector<array>& in) { return sum(f(in)[0]); })({array({1.0}), array({2.0})});
  });
  EXPECT_NE(msg.find("returned 1 cotangents"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2 inputs"), std::string::npos) << msg;
}

TEST(CustomFunction, CustomJvpIsUsedAndDefaultsFallBackOnTheFunction) {
  auto f = custom_function(
      [](const std::vector<array>& in) { return std::vector<array>{square(in[0])}; }, std::nullopt,
      [](const std::vector<array>&, const std::vector<array>& tans, const std::vector<int>&) {
        return std::vector<array>{multiply(tans[0], array(100.0))};
      });
  array x({3.0});
  auto [outs, ts] = jvp(f, {x}, {array({1.0})});
  expect_near(outs[0], {9});
  expect_near(ts[0], {100});
  // No custom vjp: the gradient is the function's own (2x).
  auto [o2, gs] = vjp(f, {x}, {array({1.0})});
  expect_near(gs[0], {6});
  // No custom vmap: batching falls back on vmapping the function.
  auto vf = vmap(f);
  expect_near(vf({array({1.0, 2.0, 3.0}, Shape{3, 1})})[0], {1, 4, 9});
}

TEST(CustomFunction, CustomVmapIsUsed) {
  auto f = custom_function(
      [](const std::vector<array>& in) { return std::vector<array>{negative(in[0])}; },
      std::nullopt, std::nullopt,
      [](const std::vector<array>& in, const std::vector<int>& axes) {
        // Deliberately different from the function so the test sees which ran.
        return std::make_pair(std::vector<array>{multiply(in[0], array(2.0))},
                              std::vector<int>{axes[0]});
      });
  auto out = vmap(f)({array({1.0, 2.0}, Shape{2, 1})})[0];
  expect_near(out, {2, 4});
}

TEST(CustomFunction, NoRulesReturnsTheFunctionItself) {
  VecFn fn = [](const std::vector<array>& in) { return std::vector<array>{exp(in[0])}; };
  auto f = custom_function(fn);
  expect_near(f({array({0.0})})[0], {1});
}

TEST(Checkpoint, SameGradientAsWithout) {
  auto block = [](const std::vector<array>& in) {
    array h = tanh(matmul(in[0], in[1]));
    return std::vector<array>{sum(multiply(h, exp(in[0])))};
  };
  auto ck = checkpoint(block);
  array x = reshape(linspace(-1.0, 1.0, 6, float64), {2, 3});
  array w = reshape(linspace(0.5, -0.3, 9, float64), {3, 3});
  auto loss = [](const VecFn& fn) {
    return [fn](const std::vector<array>& in) { return square(fn(in)[0]); };
  };
  auto [v1, g1] = value_and_grad(loss(block), std::vector<int>{0, 1})({x, w});
  auto [v2, g2] = value_and_grad(loss(ck), std::vector<int>{0, 1})({x, w});
  EXPECT_NEAR(v1.item<double>(), v2.item<double>(), 1e-14);
  expect_near(g2[0], to_vec(g1[0]), 1e-12);
  expect_near(g2[1], to_vec(g1[1]), 1e-12);
}

TEST(Checkpoint, BackwardPassRecomputesTheFunction) {
  int calls = 0;
  auto ck = checkpoint([&calls](const std::vector<array>& in) {
    ++calls;
    return std::vector<array>{exp(in[0])};
  });
  auto g = grad([&ck](const array& a) { return sum(ck({a})[0]); })(array({0.0, 1.0}));
  expect_near(g, {1, std::exp(1.0)});
  EXPECT_EQ(calls, 2);  // once forward, once again inside the vjp
}

TEST(Checkpoint, SecondOrderThroughCheckpoint) {
  auto ck = checkpoint([](const std::vector<array>& in) { return std::vector<array>{sin(in[0])}; });
  auto d2 = grad(grad([&ck](const array& a) { return sum(ck({a})[0]); }));
  EXPECT_NEAR(d2(array(0.4, float64)).item<double>(), -std::sin(0.4), 1e-12);
}

}  // namespace

namespace {

// As MLX: a function whose output is stop_gradient(...) has zero derivatives, and the cotangent
// given for that output is accepted (unused); more cotangents than outputs is an error.
TEST(Vjp, StopGradientOutputTakesItsCotangentAndGivesZero) {
  auto x = array(1.0f);
  auto stopped = [](const array& in) { return stop_gradient(add(in, in)); };
  EXPECT_EQ(vjp(stopped, x, array(1.0f)).second.item<float>(), 0.0f);
  EXPECT_EQ(jvp(stopped, x, array(1.0f)).second.item<float>(), 0.0f);
  auto half = [](const array& in) { return add(in, stop_gradient(in)); };
  EXPECT_EQ(vjp(half, x, array(1.0f)).second.item<float>(), 1.0f);
  auto two = [](const std::vector<array>& in) { return std::vector<array>{exp(in[0])}; };
  EXPECT_THROW(vjp(two, {x}, {array(1.0f), array(1.0f)}), std::invalid_argument);
  EXPECT_THROW(vjp(two, {x}, {}), std::invalid_argument);
}

}  // namespace

namespace {

int copies_in_graph(const array& a) {
  std::ostringstream os;
  print_graph(os, a);
  const std::string g = os.str();
  int n = 0;
  for (size_t p = g.find("\nCopy "); p != std::string::npos; p = g.find("\nCopy ", p + 1)) ++n;
  return n;
}

}  // namespace

// A closure that keeps the transform's input and passes it back next call (a container of
// parameters updated in place) holds one copy, not one more per call.
TEST(Vjp, InputsFedBackDoNotGrowACopyChain) {
  std::vector<array> kept = {array(1.0f)};
  auto g = grad([&kept](const std::vector<array>& in) {
    kept[0] = in[0];
    return sum(multiply(in[0], in[1]));
  });
  auto x = array({1.0f, 2.0f, 3.0f});
  for (int i = 0; i < 5; ++i) expect_near(g({kept[0], x})[0], {6.0});
  EXPECT_EQ(copies_in_graph(kept[0]), 1);
  for (int i = 0; i < 5; ++i) {
    jvp([&kept](const std::vector<array>& in) {
      kept[0] = in[0];
      return std::vector<array>{in[0]};
    }, {kept[0]}, {array(1.0f)});
  }
  EXPECT_EQ(copies_in_graph(kept[0]), 1);
}

// Peeling a stale copy never cuts an enclosing transform's path: d/dx of (d/dy x*y^2 at y=x)
// through a copy made inside the outer function.
TEST(Grad, NestedTransformThroughAUserCopy) {
  auto outer = [](const array& x) {
    auto inner = grad([&x](const array& y) { return multiply(x, square(y)); });
    return inner(copy(x));  // 2 x * x
  };
  EXPECT_NEAR(grad(outer)(array(1.5, float64)).item<double>(), 4 * 1.5, 1e-12);
}

// Complex vjps follow MLX: the cotangent times the conjugate of the derivative; a real input
// takes the real part.
TEST(Vjp, ComplexCotangentTimesConjugateDerivative) {
  using C = std::complex<float>;
  const C z{0.5f, -0.75f}, w{1.25f, 0.5f}, ct{2.0f, 3.0f};
  auto check = [&](const std::function<array(const std::vector<array>&)>& f,
                   std::vector<array> primals, int arg, C want) {
    auto got = vjp([&](const std::vector<array>& x) { return std::vector<array>{f(x)}; },
                   primals, {array(complex64_t{ct.real(), ct.imag()})})
                   .second[static_cast<size_t>(arg)];
    auto v = astype(got, complex64).item<complex64_t>();
    EXPECT_NEAR(v.real(), want.real(), 1e-5);
    EXPECT_NEAR(v.imag(), want.imag(), 1e-5);
  };
  const array za(complex64_t{z.real(), z.imag()}), wa(complex64_t{w.real(), w.imag()});
  check([](auto& x) { return exp(x[0]); }, {za}, 0, ct * std::conj(std::exp(z)));
  check([](auto& x) { return sin(x[0]); }, {za}, 0, ct * std::conj(std::cos(z)));
  check([](auto& x) { return square(x[0]); }, {za}, 0, ct * std::conj(C(2) * z));
  check([](auto& x) { return multiply(x[0], x[1]); }, {za, wa}, 0, ct * std::conj(w));
  check([](auto& x) { return divide(x[0], x[1]); }, {za, wa}, 1, ct * std::conj(-z / (w * w)));
  check([](auto& x) { return multiply(x[0], x[1]); }, {za, array(3.0f)}, 1,
        C((ct * std::conj(z)).real(), 0));
  // |z| is real: its cotangent (real) goes back along sign(z).
  auto g = vjp([](const std::vector<array>& x) { return std::vector<array>{abs(x[0])}; }, {za},
               {array(2.0f)}).second[0].item<complex64_t>();
  EXPECT_NEAR(g.real(), 2 * z.real() / std::abs(z), 1e-5);
  EXPECT_NEAR(g.imag(), 2 * z.imag() / std::abs(z), 1e-5);
}
