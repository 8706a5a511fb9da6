// Names MLX's C++ API has that code ported from MLX calls: utilities (broadcast_shapes,
// result_type, finfo / iinfo, normalize_axis_index, StreamContext), full_like's overloads, array
// iteration, array::Data, and diagonal / diag / trace, checked against loops and closed forms.
#include <gtest/gtest.h>

#include <sys/utsname.h>

#include <cfloat>
#include <cstdint>
#include <fstream>
#include <string>
#include <limits>
#include <sstream>

#include "test_util.h"

using namespace tessera;
using tessera::test_util::values;

namespace {

// a[i][j] = 10 * i + j for a rows x cols float32 matrix.
array grid(int rows, int cols) {
  return astype(add(multiply(reshape(arange(rows), {rows, 1}), array(10)),
                    reshape(arange(cols), {1, cols})),
                float32);
}

}  // namespace

TEST(MlxUtils, BroadcastShapesAndResultType) {
  EXPECT_EQ(broadcast_shapes({1}, {0}), Shape{0});
  EXPECT_EQ(broadcast_shapes({2, 1}, {3}), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({}, {4, 1}), (Shape{4, 1}));
  EXPECT_THROW(broadcast_shapes({2}, {3}), std::invalid_argument);
  EXPECT_EQ(result_type(array(1, int8), array(1.0f, float16)), float16);
  EXPECT_EQ(result_type(array(1, uint8), array(1, int8)), int16);
  EXPECT_EQ(result_type(array(true), array(1, uint8), array(1.0f)), float32);
  EXPECT_EQ(result_type(std::vector<array>{}), bool_);
}

TEST(MlxUtils, FinfoAndIinfoMatchNumericLimits) {
  finfo f32(float32);
  EXPECT_EQ(f32.bits, 32);
  EXPECT_EQ(f32.eps, static_cast<double>(FLT_EPSILON));
  EXPECT_EQ(f32.max, static_cast<double>(FLT_MAX));
  EXPECT_EQ(f32.min, -static_cast<double>(FLT_MAX));
  EXPECT_EQ(f32.smallest_normal, static_cast<double>(FLT_MIN));
  EXPECT_EQ(finfo(float64).eps, DBL_EPSILON);
  finfo f16(float16);
  EXPECT_EQ(f16.max, 65504.0);
  EXPECT_EQ(f16.eps, std::ldexp(1.0, -10));
  EXPECT_EQ(f16.smallest_normal, std::ldexp(1.0, -14));
  finfo bf(bfloat16);
  EXPECT_EQ(bf.eps, std::ldexp(1.0, -7));
  EXPECT_EQ(bf.smallest_normal, static_cast<double>(FLT_MIN));
  EXPECT_EQ(finfo(complex64).dtype, float32);
  EXPECT_THROW(finfo{int32}, std::invalid_argument);
  EXPECT_EQ(iinfo(int8).min, -128);
  EXPECT_EQ(iinfo(int8).max, 127u);
  EXPECT_EQ(iinfo(uint64).max, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(iinfo(uint64).min, 0);
  EXPECT_EQ(iinfo(int64).min, std::numeric_limits<int64_t>::min());
  EXPECT_THROW(iinfo{bool_}, std::invalid_argument);
  EXPECT_THROW(iinfo{float32}, std::invalid_argument);
}

TEST(MlxUtils, NormalizeAxisIndex) {
  EXPECT_EQ(normalize_axis_index(-1, 3), 2);
  EXPECT_EQ(normalize_axis_index(0, 1), 0);
  try {
    normalize_axis_index(3, 3, "[myop] ");
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[myop] axis 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(normalize_axis_index(-4, 3), std::invalid_argument);
}

TEST(MlxUtils, StreamContextSetsAndRestoresTheDefault) {
  const Stream before = default_stream(default_device());
  Stream other = new_stream(Device::cpu);
  {
    StreamContext ctx(other);
    EXPECT_EQ(default_stream(default_device()), other);
    EXPECT_EQ(values(add(array(1.0f), array(2.0f)))[0], 3.0);  // ops run on it
  }
  EXPECT_EQ(default_stream(default_device()), before);
  EXPECT_THROW(StreamContext{StreamOrDevice{}}, std::runtime_error);
}

TEST(MlxCreation, FullLikeBroadcastsAndTakesADtype) {
  auto a = zeros({3, 1}, int32);
  auto f = full_like(a, 2.5f);
  EXPECT_EQ(f.dtype(), int32);  // a's dtype: 2.5 becomes 2
  EXPECT_EQ(values(f), (std::vector<double>{2, 2, 2}));
  auto g = full_like(a, array({1.0f, 2.0f}));
  EXPECT_EQ(g.shape(), (Shape{3, 2}));
  EXPECT_EQ(values(g), (std::vector<double>{1, 2, 1, 2, 1, 2}));
  auto h = full_like(a, 1.5, float16);
  EXPECT_EQ(h.dtype(), float16);
  EXPECT_EQ(values(h), (std::vector<double>{1.5, 1.5, 1.5}));
}

TEST(MlxArray, IteratesOverTheFirstAxis) {
  auto x = grid(3, 2);
  int i = 0;
  for (auto row : x) {
    EXPECT_EQ(row.shape(), Shape{2});
    EXPECT_EQ(values(row), (std::vector<double>{10.0 * i, 10.0 * i + 1})) << i;
    ++i;
  }
  EXPECT_EQ(i, 3);
  EXPECT_THROW(array(1.0f).begin(), std::invalid_argument);
  auto buf = std::make_shared<array::Data>(allocator::malloc(16));
  EXPECT_NE(buf->buffer.raw_ptr(), nullptr);
}

TEST(MlxOps, DiagonalMatchesALoop) {
  auto a = grid(3, 4);
  for (int off : {0, 1, 3, 4, -1, -2, -3, -5}) {
    std::vector<double> want;
    for (int r = 0; r < 3; ++r) {
      int c = r + off;
      if (c >= 0 && c < 4) want.push_back(10.0 * r + c);
    }
    auto d = diagonal(a, off);
    EXPECT_EQ(d.shape(), Shape{static_cast<int>(want.size())}) << off;
    EXPECT_EQ(values(d), want) << off;
    EXPECT_EQ(values(diag(a, off)), want) << off;
    double t = 0;
    for (double v : want) t += v;
    EXPECT_EQ(values(trace(a, off, 0, 1))[0], t) << off;
  }
  // Swapped axes read the transpose; a 3-D stack keeps its leading axis first.
  EXPECT_EQ(values(diagonal(a, 1, 1, 0)), (std::vector<double>{10, 21}));
  auto b = reshape(arange(24), {2, 3, 4});
  auto db = diagonal(b, 0, 1, 2);
  EXPECT_EQ(db.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(db), (std::vector<double>{0, 5, 10, 12, 17, 22}));
  auto d02 = diagonal(b, 0, 0, 2);  // b[i][j][i] for i < 2: shape (3, 2)
  EXPECT_EQ(d02.shape(), (Shape{3, 2}));
  EXPECT_EQ(values(d02), (std::vector<double>{0, 13, 4, 17, 8, 21}));
  EXPECT_THROW(diagonal(arange(3)), std::invalid_argument);
  EXPECT_THROW(diagonal(a, 0, 0, 2), std::out_of_range);
  EXPECT_THROW(diagonal(a, 0, 1, -1), std::invalid_argument);
  EXPECT_THROW(trace(a, 0, 0, 5), std::out_of_range);
}

TEST(MlxOps, DiagOfAVectorAndTraceDtypes) {
  auto v = array({1.0f, 2.0f, 3.0f});
  for (int k : {0, 1, -2}) {
    const int n = 3 + std::abs(k);
    auto m = diag(v, k);
    EXPECT_EQ(m.shape(), (Shape{n, n})) << k;
    auto got = values(m);
    for (int r = 0; r < n; ++r) {
      for (int c = 0; c < n; ++c) {
        double want = (c - r == k) ? 1.0 + std::min(r, c) : 0.0;
        EXPECT_EQ(got[r * n + c], want) << "k " << k << " at " << r << "," << c;
      }
    }
  }
  EXPECT_EQ(values(diag(array({}, float32))).size(), 0u);
  EXPECT_THROW(diag(zeros({2, 2, 2})), std::invalid_argument);
  auto i16 = astype(grid(3, 3), int16);
  EXPECT_EQ(trace(i16).dtype(), int32);  // sum widens small integers
  EXPECT_EQ(values(trace(i16))[0], 0.0 + 11 + 22);
  EXPECT_EQ(trace(grid(2, 2), 0, 0, 1, float64).dtype(), float64);
}

// slice_update_<op>: the slice combined with the (broadcast, cast) update; a loop over the
// slice's positions is the reference. Overlapping calls compose.
TEST(MlxOps, SliceUpdatesThatCombine) {
  auto src = astype(arange(10), float32);
  auto upd = array({1.0f, 2.0f, 3.0f});
  auto check = [&](const array& got, auto combine) {
    std::vector<double> want = values(src);
    const auto u = values(upd);
    for (int k = 0; k < 3; ++k) want[1 + 3 * k] = combine(want[1 + 3 * k], u[k]);
    EXPECT_EQ(values(got), want);
  };
  check(slice_update_add(src, upd, {1}, {8}, {3}), [](double a, double b) { return a + b; });
  check(slice_update_prod(src, upd, {1}, {8}, {3}), [](double a, double b) { return a * b; });
  check(slice_update_max(src, upd, {1}, {8}, {3}), [](double a, double b) { return std::max(a, b); });
  check(slice_update_min(src, upd, {1}, {8}, {3}), [](double a, double b) { return std::min(a, b); });
  // Overlapping calls, an int32 source with a float update (cast), a broadcast update, 2-D.
  auto twice = slice_update_add(slice_update_add(zeros({5}, int32), array({1, 1, 1}), {0}, {3}),
                                array(2.5f), {2}, {5});
  EXPECT_EQ(twice.dtype(), int32);
  EXPECT_EQ(values(twice), (std::vector<double>{1, 1, 3, 2, 2}));
  auto m = slice_update_max(zeros({2, 3}), array({-1.0f, 4.0f, 0.5f}), {1, 0}, {2, 3});
  EXPECT_EQ(values(m), (std::vector<double>{0, 0, 0, 0, 4, 0.5}));
  // The gradient flows to both: d/dsrc is 1 everywhere, d/dupd 1 on the slice (add).
  auto g = grad([](const std::vector<array>& in) {
    return sum(multiply(slice_update_add(in[0], in[1], {1}, {3}), array(2.0f)));
  }, std::vector<int>{0, 1})({zeros({4}), zeros({2})});
  EXPECT_EQ(values(g[0]), (std::vector<double>{2, 2, 2, 2}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{2, 2}));
}

// masked_scatter: true positions take the source's elements in order; the mask covers the
// leading dims and broadcasts over the rest. Reference: a loop with a running source index.
TEST(MlxOps, MaskedScatterFillsTruePositionsInOrder) {
  auto out = masked_scatter(zeros({4}, int32), array({true, true, false, true}), array({1, 2, 4}));
  EXPECT_EQ(values(out), (std::vector<double>{1, 2, 0, 4}));
  auto none = masked_scatter(zeros({4}, int32), array({false, false, false, false}), array({1, 2}));
  EXPECT_EQ(values(none), (std::vector<double>{0, 0, 0, 0}));
  auto rows = masked_scatter(zeros({2, 2}, int32), array({true, false}), array({5, 6, 7, 8}, {2, 2}));
  EXPECT_EQ(values(rows), (std::vector<double>{5, 6, 0, 0}));
  // A larger random case against the loop.
  auto a = astype(arange(60), float32);
  std::vector<bool> mv;
  for (int i = 0; i < 60; ++i) mv.push_back(i % 3 == 0 || i % 7 == 1);
  auto src = astype(arange(100, 160), float32);
  std::vector<double> want(60);
  int k = 0;
  for (int i = 0; i < 60; ++i) want[i] = mv[i] ? 100.0 + k++ : static_cast<double>(i);
  std::vector<int> mi(mv.begin(), mv.end());
  auto mask = astype(array(mi.begin(), Shape{60}, int32), bool_);
  EXPECT_EQ(values(masked_scatter(a, mask, src)), want);
  EXPECT_THROW(masked_scatter(zeros({2}), array({1, 2}), array({1.0f})), std::invalid_argument);
  EXPECT_THROW(masked_scatter(zeros({2, 2}), array({true, false, true, false}, {4, 1}), array({1.0f})),
               std::invalid_argument);
  // Too few source elements: an error naming the op when evaluated.
  try {
    eval(masked_scatter(zeros({3}), array({true, true, true}), array({1.0f})));
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("[masked_scatter]"), std::string::npos) << e.what();
  }
}

TEST(MlxCreation, LinspaceWithoutTheEndpoint) {
  // (stop - start) / num apart, stop left out; integer dtypes truncate, as MLX.
  EXPECT_EQ(values(linspace(0, 10, 5, false)), (std::vector<double>{0, 2, 4, 6, 8}));
  EXPECT_EQ(values(linspace(0, 10, 5, true, int32)), (std::vector<double>{0, 2, 5, 7, 10}));
  EXPECT_EQ(values(linspace(0, 10, 5, false, int32)), (std::vector<double>{0, 2, 4, 6, 8}));
  EXPECT_EQ(values(linspace(0, 10, 5)), (std::vector<double>{0, 2.5, 5, 7.5, 10}));
}

TEST(MlxDevices, NoMetalNoCudaAndStreamsClear) {
  EXPECT_FALSE(metal::is_available());
  EXPECT_FALSE(cuda::is_available());
  auto x = add(ones({1000}), ones({1000}));
  async_eval({x});
  clear_streams();  // everything queued has run
  EXPECT_TRUE(x.is_available());
  auto view = slice(x, {10}, {20});
  eval(view);
  EXPECT_EQ(view.data_shared_ptr(), x.data_shared_ptr());  // one buffer, shared by the view
}

// print_graph: inputs, outputs, then one line per node, inputs before their users; names in
// first-met order (A, B, ...). export_to_dot: sources, boxes, sinks.
TEST(MlxGraph, PrintGraphAndExportToDot) {
  auto x = array({1.0f, 2.0f});
  auto y = array({3.0f, 4.0f});
  eval(x, y);
  auto z = exp(add(x, y));
  std::ostringstream os;
  print_graph(os, z);
  const std::string got = os.str();
  EXPECT_EQ(got, "Inputs: A [(2), float32], B [(2), float32]\n"
                 "Outputs: C [(2), float32]\n"
                 "Add A [(2), float32], B [(2), float32] -> D [(2), float32]\n"
                 "Exp D [(2), float32] -> C [(2), float32]\n")
      << got;
  NodeNamer namer;
  namer.set_name(x, "x");
  std::ostringstream dot;
  export_to_dot(dot, namer, {z});
  const std::string d = dot.str();
  EXPECT_EQ(d.rfind("digraph {", 0), 0u) << d;
  EXPECT_NE(d.find("{ rank=source; \"x\"; }"), std::string::npos) << d;
  EXPECT_NE(d.find("rank=sink;"), std::string::npos) << d;
  EXPECT_NE(d.find("shape=rectangle"), std::string::npos) << d;
  // A long chain prints without recursion limits.
  auto c = x;
  for (int i = 0; i < 100000; ++i) c = negative(c);
  std::ostringstream big;
  print_graph(big, c);
  const std::string text = big.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 100002);
}

TEST(MlxDevices, DeviceInfoNamesTheCpuAndItsArchitecture) {
  const DeviceInfo& info = device_info();
  // The model name is /proc/cpuinfo's, read independently here.
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown";
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(": ") + 2);
      break;
    }
  }
  EXPECT_EQ(std::get<std::string>(info.at("device_name")), model);
  utsname u{};
  ASSERT_EQ(uname(&u), 0);
  EXPECT_EQ(std::get<std::string>(info.at("architecture")), u.machine);
  EXPECT_EQ(&device_info(Device::cpu), &info);
  EXPECT_THROW(device_info(Device::gpu), std::invalid_argument);
}
