// The public Primitive (tessera/primitive.h): a primitive of one's own, written as MLX's extension
// guide writes one, evaluated, differentiated and compiled; and the primitive classes programs
// name (tessera/primitives.h), inspected as MLX's compile tests inspect them. Public headers
// only: what an installed Tessera offers (the install check builds docs/architecture.md's
// snippet against an installed tree).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <typeinfo>

#include "tessera/primitives.h"
#include "tessera/tessera.h"

namespace {

using namespace tessera;

std::atomic<int> cube_evals{0};

// x^3 of a float32 array, with both derivatives; no vmap (the base class refuses, naming it).
class Cube : public UnaryPrimitive {
 public:
  explicit Cube(Stream s) : UnaryPrimitive(s) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override {
    ++cube_evals;
    const float* x = inputs[0].data<float>();  // the front end made it row-contiguous
    out.set_data(allocator::malloc(out.nbytes()));
    float* y = out.data<float>();
    for (size_t i = 0; i < out.size(); ++i) y[i] = x[i] * x[i] * x[i];
  }
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>&, const std::vector<array>&) override {
    return {multiply(cotangents[0], slope(primals[0]), stream())};
  }
  std::vector<array> jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                         const std::vector<int>&) override {
    return {multiply(tangents[0], slope(primals[0]), stream())};
  }
  const char* name() const override { return "Cube"; }
  bool is_equivalent(const Primitive& other) const override {
    return typeid(other) == typeid(Cube);
  }

 private:
  array slope(const array& x) { return multiply(array(3.0f), square(x, stream()), stream()); }
};

array cube(const array& x, StreamOrDevice s = {}) {
  if (x.dtype() != float32) throw std::invalid_argument("[cube] float32 only");
  array in = contiguous(x, false, s);
  return array(in.shape(), float32, std::make_shared<Cube>(to_stream(s)), {in});
}

std::vector<float> to_vector(array a) {
  a = contiguous(a);
  eval(a);
  return std::vector<float>(a.data<float>(), a.data<float>() + a.size());
}

TEST(PublicPrimitive, OwnPrimitiveEvaluatesOnAStridedInput) {
  array x = transpose(reshape(astype(arange(6), float32), {2, 3}));  // a strided view
  std::vector<float> got = to_vector(cube(x));
  const std::vector<float> xs = {0, 3, 1, 4, 2, 5};  // x row by row
  ASSERT_EQ(got.size(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(got[i], xs[i] * xs[i] * xs[i]) << i;
  EXPECT_EQ(cube(x).primitive().name(), std::string("Cube"));
}

TEST(PublicPrimitive, GradJvpAndTheRefusalsNameIt) {
  array x = array({-1.5f, 0.5f, 2.0f});
  auto g = grad([](const array& a) { return sum(cube(a)); })(x);
  auto jv = jvp([](const std::vector<array>& a) { return std::vector<array>{cube(a[0])}; }, {x},
                {array({1.0f, 2.0f, -1.0f})});
  std::vector<float> gs = to_vector(g), js = to_vector(jv.second[0]);
  const float xs[] = {-1.5f, 0.5f, 2.0f}, ts[] = {1.0f, 2.0f, -1.0f};
  for (int i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(gs[i], 3 * xs[i] * xs[i]);
    EXPECT_FLOAT_EQ(js[i], 3 * xs[i] * xs[i] * ts[i]);
  }
  try {
    vmap([](const array& a) { return cube(a); })(reshape(x, {3, 1}));
    FAIL() << "vmap of a primitive without vmap";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Cube"), std::string::npos) << e.what();
  }
  array on_gpu = array({2}, float32, std::make_shared<Cube>(Stream(0, Device::gpu)), {x});
  EXPECT_THROW(on_gpu.eval(), std::runtime_error);  // no eval_gpu: the base class refuses
}

TEST(PublicPrimitive, CompileKeepsItAsANodeAndFusesAroundIt) {
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{exp(negative(cube(abs(in[0]))))};
  };
  array x = array({-1.0f, 0.5f, 1.25f});
  const int before = cube_evals;
  array out = compile(f)({x})[0];
  std::vector<float> got = to_vector(out);
  for (int i = 0; i < 3; ++i) {
    const float a = std::abs(to_vector(x)[i]);
    EXPECT_FLOAT_EQ(got[i], std::exp(-a * a * a));
  }
  EXPECT_GE(cube_evals - before, 1);
}

// MLX's compile cases name these classes: a lone op stays itself, a run of them fuses into
// Compiled. A reduction inside the run is fused too (CompiledRows, a kind of Compiled), where
// MLX leaves a Reduce node beside the fused run (docs/mlx-differences.md).
TEST(PublicPrimitives, CompiledGraphsAsMlxTestsInspectThem) {
  array x = array(2.0f);
  array lone = compile([](const std::vector<array>& in) {
    return std::vector<array>{exp(in[0])};
  })({x})[0];
  EXPECT_EQ(typeid(lone.primitive()), typeid(Exp));
  EXPECT_EQ(lone.inputs()[0].id(), x.id());

  auto run = [](const std::vector<array>& in) { return std::vector<array>{exp(abs(in[0]))}; };
  array fused = compile(run)({x})[0];
  EXPECT_EQ(typeid(fused.primitive()), typeid(Compiled));

  array v = array({1.0f, -2.0f});
  array after = compile([](const std::vector<array>& in) {
    return std::vector<array>{exp(abs(negative(sum(in[0], true))))};
  })({v})[0];
  EXPECT_NE(dynamic_cast<const Compiled*>(&after.primitive()), nullptr);
  EXPECT_EQ(after.inputs()[0].id(), v.id());
  EXPECT_FLOAT_EQ(after.item<float>(), std::exp(1.0f));
  array unfused = sum(exp(v), true);  // eager: a Reduce of an Exp
  EXPECT_EQ(typeid(unfused.primitive()), typeid(Reduce));
  EXPECT_EQ(typeid(unfused.inputs()[0].primitive()), typeid(Exp));

  // Equal programs are equivalent nodes; another op is not.
  array again = compile([](const std::vector<array>& in) {
    return std::vector<array>{exp(abs(in[0]))};
  })({array(1.0f)})[0];
  array other = compile([](const std::vector<array>& in) {
    return std::vector<array>{exp(negative(in[0]))};
  })({array(1.0f)})[0];
  EXPECT_TRUE(fused.primitive().is_equivalent(again.primitive()));
  EXPECT_FALSE(fused.primitive().is_equivalent(other.primitive()));

  // Evaluating detaches the graph: the values are there, the primitive is not.
  EXPECT_FLOAT_EQ(fused.item<float>(), std::exp(2.0f));
  EXPECT_FALSE(fused.has_primitive());
  EXPECT_THROW(fused.primitive(), std::invalid_argument);
}

TEST(PublicPrimitives, ANodeBuiltFromAPrimitiveClass) {
  array x = array({3.0f, 1.0f, 4.0f, 1.0f, 5.0f, 9.0f}, {2, 3});
  array y = array({2, 1}, uint32,  // ArgReduce keeps the axis as a size-1 dim
                  std::make_shared<ArgReduce>(default_stream(Device::cpu), ArgReduce::ArgMax, 1),
                  {x});
  eval(y);
  EXPECT_EQ(y.data<uint32_t>()[0], 2u);  // row 0: 3 1 4
  EXPECT_EQ(y.data<uint32_t>()[1], 2u);  // row 1: 1 5 9
}

}  // namespace
