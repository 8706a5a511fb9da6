// The array handle, lazy evaluation, streams and error propagation.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "tessera/tessera.h"

using namespace tessera;

TEST(ArrayConstruct, ScalarsListsAndShapes) {
  array a(3.5f);
  EXPECT_EQ(a.ndim(), 0u);
  EXPECT_EQ(a.item<float>(), 3.5f);
  array b({1, 2, 3}, int64);
  EXPECT_EQ(b.shape(), Shape{3});
  EXPECT_EQ(b.dtype(), int64);
  EXPECT_EQ(b.data<int64_t>()[2], 3);
  // As MLX, C++ doubles make float32 unless float64 is asked for.
  std::vector<double> v{1, 2, 3, 4, 5, 6};
  array c(v.data(), Shape{2, 3});
  EXPECT_EQ(c.dtype(), float32);
  EXPECT_EQ(c.strides(), (Strides{3, 1}));
  EXPECT_EQ(c.data<float>()[5], 6.0f);
  EXPECT_EQ(array(1.0).dtype(), float32);
  EXPECT_EQ(array({1.0, 2.0}).dtype(), float32);
  EXPECT_EQ(full({2}, 2.0).dtype(), float32);
  EXPECT_EQ(array(1.0, float64).dtype(), float64);
  EXPECT_EQ(array(v.data(), Shape{6}, float64).data<double>()[5], 6.0);
  EXPECT_THROW(array({1.0f, 2.0f}, Shape{3}), std::invalid_argument);
  EXPECT_THROW(c.item<float>(), std::invalid_argument);
}

TEST(ArrayConstruct, WrapsCallerMemoryAndRunsDeleter) {
  bool freed = false;
  {
    auto* p = new float[4]{1, 2, 3, 4};
    array a(p, Shape{2, 2}, float32, [&](void* q) {
      delete[] static_cast<float*>(q);
      freed = true;
    });
    EXPECT_EQ(a.data<float>()[3], 4.0f);
  }
  EXPECT_TRUE(freed);
}

TEST(Eval, ArangeAndAstypeAreLazyUntilEvaluated) {
  auto a = arange(0.0, 10.0, 2.0);
  EXPECT_EQ(a.status(), array::Status::unscheduled);
  EXPECT_EQ(a.shape(), Shape{5});
  auto b = astype(a, int32);
  eval(b);
  EXPECT_EQ(b.status(), array::Status::available);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b.data<int32_t>()[i], 2 * i);
  EXPECT_FALSE(b.has_primitive());  // detached after evaluation
}

TEST(Eval, ArangeSizesFollowNumpy) {
  EXPECT_EQ(arange(0.0, 1.0, 0.3).size(), 4u);
  EXPECT_EQ(arange(5.0, 1.0, 1.0).size(), 0u);
  EXPECT_EQ(arange(5, 1, -2).size(), 2u);
  EXPECT_THROW(arange(0.0, 1.0, 0.0), std::invalid_argument);
  EXPECT_THROW(arange(0.0, 3.0, bool_), std::invalid_argument);
}

TEST(Eval, HundredThousandNodeChainEvaluates) {
  array x = zeros({4}, float32);
  for (int i = 0; i < 100000; ++i) x = astype(x, i % 2 ? float32 : float64);
  eval(x);
  EXPECT_EQ(x.dtype(), float32);
  EXPECT_EQ(x.data<float>()[3], 0.0f);
}

TEST(Eval, MillionNodeChainIsFreedWithoutRecursion) {
  array x = zeros({1}, float32);
  for (int i = 0; i < 1000000; ++i) x = astype(x, i % 2 ? float32 : float64);
  x = array(0.0f);  // drops the whole unevaluated chain
  SUCCEED();
}

TEST(Eval, GraphsOutliveTheThreadThatBuiltThem) {
  // Descriptors and nodes come from per-thread free lists: a graph built on a thread that has
  // exited, then evaluated and dropped on this one, and graphs dropped on other threads. (The
  // graph is on a thread-unsafe stream: a thread's own streams end with it.)
  constexpr int kOps = 3000;
  std::vector<array> built(2, array(0.0f));
  const Stream shared = new_thread_unsafe_stream(Device::cpu);
  for (int t = 0; t < 2; ++t) {
    std::thread([&built, t, shared] {
      StreamContext on_shared(shared);
      array z = full({5}, static_cast<float>(t), float32);
      eval(z);
      for (int i = 0; i < kOps; ++i) z = z + 1.0f;
      built[t] = z;
    }).join();
  }
  for (int t = 0; t < 2; ++t) {
    eval(built[t]);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(built[t].data<float>()[i], t + kOps);
  }
  array here = zeros({3}, float32) * 2.0f;
  std::thread([dropped = std::move(here)]() mutable { dropped = array(1.0f); }).join();
  built.clear();
  array after = arange(4, float32) + 1.0f;  // the lists still hand out sound blocks
  eval(after);
  EXPECT_EQ(after.data<float>()[3], 4.0f);
}

TEST(Eval, ComputedOperandsAreBroadcastAsViewsOutsideTransforms) {
  array x = array({1.0f, 2.0f, 3.0f});
  array one = array(2.0f);
  eval(x);
  array y = x + one;  // the scalar's broadcast is a view of its buffer, not a Broadcast node
  ASSERT_EQ(y.inputs().size(), 2u);
  const array& b = y.inputs()[1];
  EXPECT_FALSE(b.has_primitive());
  EXPECT_TRUE(b.is_available());
  EXPECT_EQ(b.shape(), (Shape{3}));
  EXPECT_EQ(b.strides(), (Strides{0}));
  EXPECT_EQ(b.data<float>(), one.data<float>());
  array lazy = exp(array(0.0f));  // not computed yet: a node, as before
  EXPECT_TRUE((x + lazy).inputs()[1].has_primitive());
  // A 3-deep chain of z + scalar evaluates to the closed form, z = x + 3 * 2.
  array z = x;
  for (int i = 0; i < 3; ++i) z = z + one;
  eval(z);
  EXPECT_EQ(std::vector<float>(z.data<float>(), z.data<float>() + 3),
            (std::vector<float>{7.0f, 8.0f, 9.0f}));
  // While a transform traces, the broadcast stays a node (its derivative rule needs it).
  bool traced_as_node = false;
  auto [outs, grads] = vjp(
      [&](const std::vector<array>& in) {
        array r = in[0] + one;
        traced_as_node = r.inputs()[1].has_primitive();
        return std::vector<array>{r};
      },
      {x}, {ones({3})});
  EXPECT_TRUE(traced_as_node);
  eval(grads[0]);
  EXPECT_EQ(std::vector<float>(grads[0].data<float>(), grads[0].data<float>() + 3),
            (std::vector<float>{1.0f, 1.0f, 1.0f}));
}

TEST(Eval, AsyncEvalReturnsAndWaitBlocks) {
  auto a = astype(arange(0.0, 1000.0), float64);
  async_eval(a);
  a.wait();
  EXPECT_EQ(a.data<double>()[999], 999.0);
}

TEST(Eval, SynchronizeRaisesTheFirstErrorOfWorkAsyncEvalStarted) {
  Stream s = new_stream(Device::cpu);
  size_t old = set_memory_limit(1 << 20);
  auto big = zeros({1 << 20}, float32, s);  // the kernel's malloc throws: over the limit
  auto after = exp(ones({3}, float32, s), s);
  async_eval({astype(big, float64, s), after});
  EXPECT_THROW(synchronize(s), std::runtime_error);
  set_memory_limit(old);
  EXPECT_NO_THROW(synchronize(s));  // raised once
  EXPECT_FLOAT_EQ(after.data<float>()[2], std::exp(1.0f));  // later work on the stream ran
  // A blocking eval's error goes to its caller only.
  set_memory_limit(1 << 20);
  EXPECT_THROW(eval(zeros({1 << 20}, float32, s)), std::runtime_error);
  set_memory_limit(old);
  EXPECT_NO_THROW(synchronize(s));
}

TEST(Eval, KernelErrorReachesTheWaitingThreadAndDependents) {
  size_t old = set_memory_limit(1 << 20);
  auto big = zeros({1 << 20}, float32);  // 4 MiB > 1 MiB limit: the kernel's malloc throws
  auto dep = astype(big, float64);
  try {
    eval(dep);
    ADD_FAILURE() << "expected an out-of-memory error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("memory limit"), std::string::npos) << e.what();
  }
  EXPECT_THROW(big.wait(), std::runtime_error);  // the failed input reports it too
  set_memory_limit(old);
  auto ok = zeros({4}, float32);
  eval(ok);  // the engine keeps working after an error
  EXPECT_EQ(ok.data<float>()[0], 0.0f);
}

TEST(Streams, NewStreamRunsWorkAndSynchronizes) {
  auto s = new_stream(Device::cpu);
  auto a = astype(arange(0.0, 100.0, 1.0, float32, s), int32, s);
  auto b = astype(a, float64);  // crosses back to the default stream
  eval(b);
  EXPECT_EQ(b.data<double>()[42], 42.0);
  synchronize(s);
  synchronize();
  EXPECT_THROW(new_stream(Device::gpu), std::invalid_argument);
  EXPECT_FALSE(is_available(Device::gpu));
}

TEST(Views, ReshapeOfContiguousSharesBuffer) {
  auto a = astype(arange(0.0, 12.0), float32);
  auto b = reshape(a, {3, -1});
  eval(a, b);
  EXPECT_EQ(b.shape(), (Shape{3, 4}));
  EXPECT_EQ(a.data<float>(), b.data<float>());
  EXPECT_THROW(reshape(a, {5, -1}), std::invalid_argument);
  EXPECT_THROW(reshape(a, {-1, -1}), std::invalid_argument);
}

TEST(Views, BroadcastHasZeroStridesAndCopyIsDense) {
  array a({1.0f, 2.0f, 3.0f});
  auto b = broadcast_to(a, {2, 3});
  auto c = copy(b);
  eval(b, c);
  EXPECT_EQ(b.strides(), (Strides{0, 1}));
  EXPECT_EQ(c.strides(), (Strides{3, 1}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c.data<float>()[i], static_cast<float>(i % 3 + 1));
  try {
    broadcast_to(a, {2, 4});
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("(3)"), std::string::npos) << e.what();
  }
}

TEST(Full, FillsEveryDtype) {
  for (auto t : kAllDtypes) {
    auto a = full({3, 2}, array(1), t);
    eval(a);
    EXPECT_EQ(a.dtype(), t);
    auto d = astype(a, float64);
    eval(d);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(d.data<double>()[i], 1.0) << dtype_name(t);
  }
}
