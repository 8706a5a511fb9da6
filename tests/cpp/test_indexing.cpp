// Indexing family: slice / slice_update views and copies, take / take_along_axis / gather and the
// scatter family, checked against naive loops and hand-computed values; derivative rules of the
// primitives are called directly.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>

#include "tessera/primitive.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

// Evaluated values of `x` in row-major order (any layout), as double (complex: real part).
std::vector<double> vals(array x) {
  eval(x);
  std::vector<double> out(x.size());
  detail::dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data<T>();
    std::vector<int64_t> idx(x.ndim(), 0);
    for (size_t i = 0; i < x.size(); ++i) {
      int64_t off = 0;
      for (size_t d = 0; d < x.ndim(); ++d) off += idx[d] * x.strides()[d];
      out[i] = detail::cast_scalar<double, T>(p[off]);
      for (size_t d = x.ndim(); d-- > 0;) {
        if (++idx[d] < x.shape()[d]) break;
        idx[d] = 0;
      }
    }
  });
  return out;
}

std::vector<double> iota(size_t n, double start = 0) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// 0, 1, 2, ... reshaped and cast (bool: 0, 1, 1, ...).
array ramp(const Shape& shape, Dtype dt = float32) {
  size_t n = 1;
  for (auto d : shape) n *= d;
  return astype(reshape(arange(0, static_cast<int>(n), 1), shape), dt);
}

template <typename F>
void expect_throw_with(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
  }
}

const Dtype kIndexDtypes[] = {int8, uint8, int16, uint16, int32, uint32, int64, uint64};

}  // namespace

// ---------------------------------------------------------------- slice

TEST(Slice, StridedRangeIsAViewOfTheInput) {
  auto a = ramp({10});
  eval(a);
  auto b = slice(a, Shape{2}, {9}, {3});
  eval(b);
  EXPECT_EQ(b.shape(), Shape{3});
  EXPECT_EQ(vals(b), (std::vector<double>{2, 5, 8}));
  EXPECT_EQ(b.data<float>(), a.data<float>() + 2);  // shares the buffer
  EXPECT_EQ(b.strides(), Strides{3});
  // Braced lists select the static overloads.
  EXPECT_EQ(vals(slice(a, {1}, {3}, {1})), (std::vector<double>{1, 2}));
  EXPECT_EQ(vals(slice_update(a, array(0.0f), {0}, {9}, {2})),
            (std::vector<double>{0, 1, 0, 3, 0, 5, 0, 7, 0, 9}));
}

TEST(Slice, TwoDimsMatchNaiveLoop) {
  auto a = ramp({5, 7}, int64);
  auto b = slice(a, Shape{1, 2}, {4, 7}, {2, 2});
  auto v = vals(b);
  ASSERT_EQ(b.shape(), (Shape{2, 3}));
  std::vector<double> ref;
  for (int i = 1; i < 4; i += 2)
    for (int j = 2; j < 7; j += 2) ref.push_back(i * 7 + j);
  EXPECT_EQ(v, ref);
}

TEST(Slice, NegativeStepsWalkBackwards) {
  auto a = ramp({6});
  EXPECT_EQ(vals(slice(a, Shape{5}, {-7}, {-1})), (std::vector<double>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(vals(slice(a, Shape{-1}, {0}, {-2})), (std::vector<double>{5, 3, 1}));
  EXPECT_EQ(vals(slice(a, Shape{4}, {1}, {-1})), (std::vector<double>{4, 3, 2}));
  auto m = ramp({3, 4}, int32);
  auto r = slice(m, Shape{2, 3}, {-4, -5}, {-1, -1});
  EXPECT_EQ(vals(r), (std::vector<double>{11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  // A reversed view of a reversed view is the original order.
  EXPECT_EQ(vals(slice(r, Shape{2, 3}, {-4, -5}, {-1, -1})), iota(12));
}

TEST(Slice, OutOfRangeStartsAndStopsClampLikeNumpy) {
  auto a = ramp({5});
  EXPECT_EQ(vals(slice(a, Shape{-100}, {100})), iota(5));
  EXPECT_EQ(slice(a, Shape{7}, {9}).shape(), Shape{0});
  EXPECT_EQ(slice(a, Shape{3}, {1}).shape(), Shape{0});
  EXPECT_EQ(vals(slice(a, Shape{100}, {-100}, {-2})), (std::vector<double>{4, 2, 0}));
  EXPECT_EQ(vals(slice(a, Shape{-2}, {100})), (std::vector<double>{3, 4}));
}

TEST(Slice, EmptyAndZeroDimensional) {
  auto z = array(3.0f);
  auto s = slice(z, Shape{}, {});
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.item<float>(), 3.0f);
  auto e = zeros({0, 4});
  auto se = slice(e, Shape{0, 1}, {0, 3});
  EXPECT_EQ(se.shape(), (Shape{0, 2}));
  eval(se);
  auto a = ramp({4, 4});
  auto empty = slice(a, Shape{2, 0}, {2, 4});
  EXPECT_EQ(empty.shape(), (Shape{0, 4}));
  EXPECT_TRUE(vals(empty).empty());
}

TEST(Slice, NonContiguousInputs) {
  auto row = ramp({4});
  auto b = broadcast_to(row, {3, 4});  // 0 stride rows
  auto s = slice(b, Shape{1, 1}, {3, 4}, {1, 2});
  EXPECT_EQ(vals(s), (std::vector<double>{1, 3, 1, 3}));
  // A slice of a strided slice composes offsets and strides.
  auto a = ramp({20}, int16);
  auto s1 = slice(a, Shape{1}, {20}, {2});     // 1,3,...,19
  auto s2 = slice(s1, Shape{8}, {0}, {-3});    // 17, 11, 5
  EXPECT_EQ(vals(s2), (std::vector<double>{17, 11, 5}));
}

TEST(Slice, EveryDtype) {
  for (Dtype dt : kAllDtypes) {
    auto a = ramp({3, 4}, dt);
    auto ref = vals(a);
    auto s = slice(a, Shape{2, 3}, {-4, 0}, {-1, -2});
    std::vector<double> expect;
    for (int i = 2; i >= 0; --i)
      for (int j = 3; j > 0; j -= 2) expect.push_back(ref[i * 4 + j]);
    EXPECT_EQ(vals(s), expect) << dtype_name(dt);
  }
}

TEST(Slice, ErrorsNameTheValues) {
  auto a = ramp({3, 4});
  expect_throw_with([&] { slice(a, Shape{0}, {1}); }, {"[slice]", "2 dimensions"});
  expect_throw_with([&] { slice(a, Shape{0, 0}, {1, 1}, {1, 0}); }, {"[slice]", "stride", "(1,0)"});
}

TEST(Slice, ResultFeedsCopies) {
  auto a = ramp({4, 6}, float64);
  auto s = slice(a, Shape{0, 1}, {4, 6}, {2, 2});  // (2,3), non-contiguous
  EXPECT_EQ(vals(reshape(s, {6})), (std::vector<double>{1, 3, 5, 13, 15, 17}));
  // Flat take of a non-contiguous view follows its logical (row-major) order.
  EXPECT_EQ(vals(take(s, array({4, 0}, int32))), (std::vector<double>{15, 1}));
  auto c = astype(s, int32);
  EXPECT_EQ(vals(c), (std::vector<double>{1, 3, 5, 13, 15, 17}));
}

// ---------------------------------------------------------------- slice_update

TEST(SliceUpdate, ReplacesStridedRegion) {
  auto src = zeros({4, 5}, int32);
  auto upd = astype(reshape(arange(1, 7, 1), {2, 3}), int32);
  auto out = slice_update(src, upd, {1, 0}, {4, 5}, {2, 2});
  auto v = vals(out);
  std::vector<double> ref(20, 0);
  int k = 1;
  for (int i = 1; i < 4; i += 2)
    for (int j = 0; j < 5; j += 2) ref[i * 5 + j] = k++;
  EXPECT_EQ(v, ref);
}

TEST(SliceUpdate, NegativeStepsAndBroadcastScalar) {
  auto src = ramp({6});
  auto out = slice_update(src, array({10.0f, 20.0f, 30.0f}), {5}, {-7}, {-2});
  EXPECT_EQ(vals(out), (std::vector<double>{0, 30, 2, 20, 4, 10}));
  auto out2 = slice_update(src, array(-1), {1}, {4});  // int scalar cast to float32
  EXPECT_EQ(out2.dtype(), float32);
  EXPECT_EQ(vals(out2), (std::vector<double>{0, -1, -1, -1, 4, 5}));
  // Source untouched.
  EXPECT_EQ(vals(src), iota(6));
}

TEST(SliceUpdate, DonatedSourceStillGivesRightValues) {
  auto out = slice_update(ramp({5}, int64), array({7, 8}, int64), {3}, {5});
  EXPECT_EQ(vals(out), (std::vector<double>{0, 1, 2, 7, 8}));
}

TEST(SliceUpdate, NonContiguousSourceAndUpdate) {
  auto src = broadcast_to(ramp({3}), {2, 3});
  auto upd = slice(ramp({4}), Shape{3}, {-5}, {-2});  // 3, 1
  auto out = slice_update(src, reshape(upd, {2, 1}), {0, 1}, {2, 2});
  EXPECT_EQ(vals(out), (std::vector<double>{0, 3, 2, 0, 1, 2}));
}

TEST(SliceUpdate, WholeArrayAndEmptyRegion) {
  auto src = ramp({3});
  EXPECT_EQ(vals(slice_update(src, array(5.0f), {0}, {3})), (std::vector<double>{5, 5, 5}));
  EXPECT_EQ(vals(slice_update(src, zeros({0}), {2}, {1})), iota(3));
}

TEST(SliceUpdate, EveryDtype) {
  for (Dtype dt : kAllDtypes) {
    auto src = zeros({2, 3}, dt);
    auto out = slice_update(src, ones({2, 1}, dt), {0, 2}, {2, 3});
    EXPECT_EQ(vals(out), (std::vector<double>{0, 0, 1, 0, 0, 1})) << dtype_name(dt);
  }
}

TEST(SliceUpdate, MismatchedUpdateShapeNamesShapes) {
  auto src = zeros({4, 4});
  expect_throw_with([&] { slice_update(src, zeros({3}), {0, 0}, {2, 2}); },
                    {"[slice_update]", "(3)", "(2,2)"});
  expect_throw_with([&] { slice_update(src, zeros({1, 2, 2}), {0, 0}, {2, 2}); },
                    {"[slice_update]", "(1,2,2)"});
}

// ---------------------------------------------------------------- dynamic slice

TEST(DynamicSlice, StartReadFromArrayAndClamped) {
  auto a = ramp({4, 5}, int32);
  auto s = slice(a, array({1, 2}, int32), {0, 1}, {2, 3});
  EXPECT_EQ(vals(s), (std::vector<double>{7, 8, 9, 12, 13, 14}));
  auto c = slice(a, array({3}, int64), {1}, {4, 3});  // start 3 clamped to 2
  EXPECT_EQ(vals(c), (std::vector<double>{2, 3, 4, 7, 8, 9, 12, 13, 14, 17, 18, 19}));
  auto n = slice(a, array({-1}, int8), {0}, {1, 5});  // wraps to the last row
  EXPECT_EQ(vals(n), (std::vector<double>{15, 16, 17, 18, 19}));
  expect_throw_with([&] { slice(a, array({1.0f}), {0}, {1, 5}); }, {"[slice]", "float32"});
}

// ---------------------------------------------------------------- take

TEST(Take, EveryAxisMatchesNaiveLoop) {
  auto a = ramp({3, 4, 5}, float64);
  auto av = vals(a);
  auto idx = array({2, 0, -1, 1, 1}, int32);
  std::vector<int> iv{2, 0, -1, 1, 1};
  for (int axis = 0; axis < 3; ++axis) {
    auto out = take(a, idx, axis);
    Shape expect_shape{3, 4, 5};
    expect_shape[axis] = 5;
    ASSERT_EQ(out.shape(), expect_shape) << axis;
    auto v = vals(out);
    size_t p = 0;
    for (int i = 0; i < expect_shape[0]; ++i)
      for (int j = 0; j < expect_shape[1]; ++j)
        for (int k = 0; k < 5; ++k) {
          int src[3] = {i, j, k};
          int n = Shape{3, 4, 5}[axis];
          src[axis] = (iv[src[axis]] + n) % n;
          EXPECT_EQ(v[p++], av[(src[0] * 4 + src[1]) * 5 + src[2]]) << axis;
        }
  }
}

TEST(Take, MultiDimIndicesPlaceTheirShapeAtTheAxis) {
  auto a = ramp({2, 3});
  auto idx = reshape(array({0, 2, 1, 1}, int64), {2, 2});
  auto out = take(a, idx, 1);
  ASSERT_EQ(out.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(vals(out), (std::vector<double>{0, 2, 1, 1, 3, 5, 4, 4}));
  auto flat = take(a, idx);
  ASSERT_EQ(flat.shape(), (Shape{2, 2}));
  EXPECT_EQ(vals(flat), (std::vector<double>{0, 2, 1, 1}));
  auto scalar_idx = take(a, array(-1, int16), 0);
  ASSERT_EQ(scalar_idx.shape(), (Shape{3}));
  EXPECT_EQ(vals(scalar_idx), (std::vector<double>{3, 4, 5}));
}

TEST(Take, EveryDataDtype) {
  for (Dtype dt : kAllDtypes) {
    auto a = ramp({4, 3}, dt);
    auto av = vals(a);
    auto out = take(a, array({3, -4, 1}, int32), 0);
    std::vector<double> ref;
    for (int r : {3, 0, 1})
      for (int c = 0; c < 3; ++c) ref.push_back(av[r * 3 + c]);
    EXPECT_EQ(vals(out), ref) << dtype_name(dt);
    auto out1 = take(a, array({2, 0}, int32), 1);
    std::vector<double> ref1;
    for (int r = 0; r < 4; ++r)
      for (int c : {2, 0}) ref1.push_back(av[r * 3 + c]);
    EXPECT_EQ(vals(out1), ref1) << dtype_name(dt);
  }
}

TEST(Take, ComplexValuesKeepBothParts) {
  std::vector<complex64_t> data{{1, 2}, {3, 4}, {5, 6}};
  array a(data.begin(), Shape{3}, complex64);
  auto out = take(a, array({2, 0}, int32));
  eval(out);
  EXPECT_EQ(out.data<complex64_t>()[0], complex64_t(5, 6));
  EXPECT_EQ(out.data<complex64_t>()[1], complex64_t(1, 2));
}

TEST(Take, EveryIndexDtype) {
  auto a = ramp({6}, int32);
  for (Dtype it : kIndexDtypes) {
    auto out = take(a, astype(array({5, 0, 3}, int32), it));
    EXPECT_EQ(vals(out), (std::vector<double>{5, 0, 3})) << dtype_name(it);
  }
  for (Dtype it : {int8, int16, int32, int64}) {
    auto out = take(a, astype(array({-1, -6}, int32), it));
    EXPECT_EQ(vals(out), (std::vector<double>{5, 0})) << dtype_name(it);
  }
}

TEST(Take, IntIndexAndNegativeWrap) {
  auto a = ramp({3, 4});
  auto r = take(a, 1, 0);
  EXPECT_EQ(r.shape(), Shape{4});
  EXPECT_EQ(vals(r), (std::vector<double>{4, 5, 6, 7}));
  EXPECT_EQ(vals(take(a, -1, 1)), (std::vector<double>{3, 7, 11}));
  EXPECT_EQ(take(a, -12).item<float>(), 0.0f);
  EXPECT_EQ(take(a, 11).item<float>(), 11.0f);
  EXPECT_EQ(take(array(7.0f), 0).item<float>(), 7.0f);
}

TEST(Take, NonContiguousInputs) {
  auto b = broadcast_to(ramp({1, 4}), {3, 4});
  EXPECT_EQ(vals(take(b, array({3, 1}, int32), 1)), (std::vector<double>{3, 1, 3, 1, 3, 1}));
  auto rev = slice(ramp({3, 4}), Shape{2, 0}, {-4, 4}, {-1, 2});  // rows 2,1,0; cols 0,2
  EXPECT_EQ(vals(take(rev, array({1, 0}, int32), 1)), (std::vector<double>{10, 8, 6, 4, 2, 0}));
  EXPECT_EQ(vals(take(rev, array({2}, int32), 0)), (std::vector<double>{0, 2}));
  // Broadcast (non-contiguous) indices.
  auto bi = broadcast_to(array({1, 0}, int32), {2, 2});
  EXPECT_EQ(vals(take(ramp({3}), bi)), (std::vector<double>{1, 0, 1, 0}));
}

TEST(Take, EmptyIndicesAndEmptyArrays) {
  auto a = ramp({3, 4});
  auto e = take(a, zeros({0}, int32), 1);
  EXPECT_EQ(e.shape(), (Shape{3, 0}));
  EXPECT_TRUE(vals(e).empty());
  auto z = zeros({0, 4});
  auto ez = take(z, array({1, 2}, int32), 1);
  EXPECT_EQ(ez.shape(), (Shape{0, 2}));
  EXPECT_TRUE(vals(ez).empty());
  expect_throw_with([&] { take(z, array({0}, int32), 0); }, {"[take]", "size 0"});
}

TEST(Take, ErrorsNameTheValues) {
  auto a = ramp({3, 4});
  expect_throw_with([&] { take(a, 4, 1); }, {"[take]", "index 4", "axis 1", "size 4"});
  expect_throw_with([&] { take(a, -4, 0); }, {"[take]", "index -4", "size 3"});
  expect_throw_with([&] { take(a, 0, 2); }, {"[take]", "axis 2"});
  expect_throw_with([&] { take(a, array({1.0f}), 0); }, {"[take]", "integer", "float32"});
  expect_throw_with([&] { take(a, array({true}), 0); }, {"[take]", "boolean"});
  // Array indices are checked when the kernel runs.
  auto bad = take(a, array({0, 5}, int32), 1);
  expect_throw_with([&] { eval(bad); }, {"index 5", "axis 1", "size 4"});
  auto bad_u = take(a, array({7}, uint64), 0);
  expect_throw_with([&] { eval(bad_u); }, {"index 7", "size 3"});
}

// ---------------------------------------------------------------- gather

TEST(Gather, TwoAxesWithSlicesMatchNaiveLoop) {
  auto a = ramp({4, 5, 3}, int32);
  auto av = vals(a);
  auto i0 = array({0, 3, 2}, int32);
  auto i1 = reshape(array({4, -5}, int64), {2, 1});  // broadcast -> (2,3)
  auto out = gather(a, {i0, i1}, {0, 1}, {1, 1, 2});
  ASSERT_EQ(out.shape(), (Shape{2, 3, 1, 1, 2}));
  auto v = vals(out);
  std::vector<int> r0{0, 3, 2}, r1{4, 0};
  size_t p = 0;
  for (int x = 0; x < 2; ++x)
    for (int y = 0; y < 3; ++y)
      for (int k = 0; k < 2; ++k) EXPECT_EQ(v[p++], av[(r0[y] * 5 + r1[x]) * 3 + k]);
}

TEST(Gather, SliceAlongNonIndexedAxesStartsAtZero) {
  auto a = ramp({3, 4});
  auto out = gather(a, array({2, 1}, uint8), 0, {1, 3});
  ASSERT_EQ(out.shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(vals(out), (std::vector<double>{8, 9, 10, 4, 5, 6}));
  auto nothing = gather(a, std::vector<array>{}, std::vector<int>{}, {2, 2});
  ASSERT_EQ(nothing.shape(), (Shape{2, 2}));
  EXPECT_EQ(vals(nothing), (std::vector<double>{0, 1, 4, 5}));
}

TEST(Gather, ErrorsNameTheValues) {
  auto a = ramp({3, 4});
  expect_throw_with([&] { gather(a, array({0}, int32), 0, {1}); }, {"[gather]", "(1)", "(3,4)"});
  expect_throw_with([&] { gather(a, array({0}, int32), 0, {1, 5}); },
                    {"[gather]", "(1,5)", "(3,4)"});
  expect_throw_with([&] { gather(a, array({0.5f}), 0, {1, 4}); }, {"[gather]", "float32"});
  expect_throw_with([&] { gather(a, {array({0}, int32)}, {0, 1}, {1, 4}); }, {"[gather]", "axes"});
}

// ---------------------------------------------------------------- scatter

TEST(Scatter, AddAccumulatesDuplicatesInEveryDtype) {
  for (Dtype dt : kAllDtypes) {
    if (dt == bool_) continue;
    auto a = ones({5}, dt);
    auto idx = array({1, 3, 1, 1}, int32);
    auto upd = reshape(astype(array({1, 2, 3, 4}, int32), dt), {4, 1});
    auto out = scatter_add(a, idx, upd, 0);
    EXPECT_EQ(vals(out), (std::vector<double>{1, 9, 1, 3, 1})) << dtype_name(dt);
  }
  auto b = scatter_add(zeros({3}, bool_), array({2, 2}, int32), reshape(array({true, false}), {2, 1}), 0);
  EXPECT_EQ(vals(b), (std::vector<double>{0, 0, 1}));
}

TEST(Scatter, PlainScatterLastWriteWins) {
  auto a = zeros({4}, int64);
  auto out = scatter(a, array({2, 0, 2}, int32), reshape(array({5, 6, 7}, int64), {3, 1}), 0);
  EXPECT_EQ(vals(out), (std::vector<double>{6, 0, 7, 0}));
  EXPECT_EQ(vals(a), (std::vector<double>{0, 0, 0, 0}));
}

TEST(Scatter, ProdMaxMin) {
  auto a = full({4}, 2.0f);
  auto idx = array({0, 0, 3}, int32);
  auto upd = reshape(array({3.0f, -1.0f, 5.0f}), {3, 1});
  EXPECT_EQ(vals(scatter_prod(a, idx, upd, 0)), (std::vector<double>{-6, 2, 2, 10}));
  EXPECT_EQ(vals(scatter_max(a, idx, upd, 0)), (std::vector<double>{3, 2, 2, 5}));
  EXPECT_EQ(vals(scatter_min(a, idx, upd, 0)), (std::vector<double>{-1, 2, 2, 2}));
  auto ai = astype(array({4, 4}, int32), uint8);
  auto mx = scatter_max(ai, array({1}, int32), reshape(array({9}, int32), {1, 1}), 0);
  EXPECT_EQ(mx.dtype(), uint8);
  EXPECT_EQ(vals(mx), (std::vector<double>{4, 9}));
}

TEST(Scatter, SlicesOverTwoAxesMatchNaiveLoop) {
  auto a = zeros({4, 5, 3}, float32);
  auto i0 = array({3, 0, 3}, int16);
  auto i1 = array({-1, 2, 4}, int64);
  auto upd = ramp({3, 1, 1, 2}, float32);
  auto out = scatter_add(a, {i0, i1}, upd, {0, 1});
  std::vector<double> ref(60, 0);
  std::vector<int> r0{3, 0, 3}, r1{4, 2, 4};
  for (int n = 0; n < 3; ++n)
    for (int k = 0; k < 2; ++k) ref[(r0[n] * 5 + r1[n]) * 3 + k] += n * 2 + k;
  EXPECT_EQ(vals(out), ref);
}

TEST(Scatter, NonContiguousInputAndUpdates) {
  auto a = broadcast_to(ramp({3}), {2, 3});
  auto upd = broadcast_to(array(10.0f), {2, 1, 1});  // 0-stride updates
  auto out = scatter(a, {array({1, 0}, int32), array({2, 0}, int32)}, upd, {0, 1});
  EXPECT_EQ(vals(out), (std::vector<double>{10, 1, 2, 0, 1, 10}));
}

TEST(Scatter, EveryIndexDtypeAndZeroDimIndex) {
  for (Dtype it : kIndexDtypes) {
    auto out = scatter(zeros({3}), astype(array(2), it), reshape(array(1.0f), {1}), 0);
    EXPECT_EQ(vals(out), (std::vector<double>{0, 0, 1})) << dtype_name(it);
  }
}

TEST(Scatter, EmptyUpdatesLeaveInputUnchanged) {
  auto out = scatter_add(ramp({3}), zeros({0}, int32), zeros({0, 1}), 0);
  EXPECT_EQ(vals(out), iota(3));
}

TEST(Scatter, ErrorsNameTheValues) {
  auto a = zeros({4, 3});
  auto idx = array({0, 1}, int32);
  expect_throw_with([&] { scatter(a, idx, zeros({2, 3}), 0); },
                    {"[scatter]", "(2,3)", "expected 3"});
  expect_throw_with([&] { scatter_add(a, idx, zeros({3, 1, 3}), 0); },
                    {"[scatter_add]", "(3,1,3)", "(2)"});
  expect_throw_with([&] { scatter_max(a, idx, zeros({2, 1, 4}), 0); },
                    {"[scatter_max]", "(2,1,4)", "(4,3)"});
  expect_throw_with([&] { scatter(a, array({0.0f}), zeros({1, 1, 3}), 0); },
                    {"[scatter]", "float32"});
  auto bad = scatter(a, array({4}, int32), zeros({1, 1, 3}), 0);
  expect_throw_with([&] { eval(bad); }, {"[scatter]", "index 4", "size 4"});
}

// ---------------------------------------------------------------- along axis

TEST(AlongAxis, TakeMatchesNaiveLoopAndBroadcasts) {
  auto a = ramp({3, 4}, int32);
  auto idx = reshape(array({3, 0, -1, 1, 2, 2}, int32), {3, 2});
  auto out = take_along_axis(a, idx, 1);
  ASSERT_EQ(out.shape(), (Shape{3, 2}));
  EXPECT_EQ(vals(out), (std::vector<double>{3, 0, 7, 5, 10, 10}));
  // Indices of shape (1,2) broadcast over rows.
  auto b = take_along_axis(a, reshape(array({1, 2}, uint16), {1, 2}), 1);
  EXPECT_EQ(vals(b), (std::vector<double>{1, 2, 5, 6, 9, 10}));
  auto c = take_along_axis(a, reshape(array({2, 0, 1, 0}, int8), {1, 4}), 0);
  EXPECT_EQ(vals(c), (std::vector<double>{8, 1, 6, 3}));
  expect_throw_with([&] { take_along_axis(a, array({1}, int32), 1); },
                    {"[take_along_axis]", "(1)", "(3,4)"});
}

TEST(AlongAxis, EveryDtypeOnTransposedLikeView) {
  for (Dtype dt : kAllDtypes) {
    auto a = slice(ramp({4, 3}, dt), Shape{3, 0}, {-5, 3}, {-1, 1});  // reversed rows
    auto av = vals(a);
    auto idx = reshape(array({0, 3, 1}, int32), {1, 3});
    auto out = take_along_axis(a, idx, 0);
    std::vector<double> ref{av[0 * 3 + 0], av[3 * 3 + 1], av[1 * 3 + 2]};
    EXPECT_EQ(vals(out), ref) << dtype_name(dt);
  }
}

TEST(AlongAxis, PutAndScatterAdd) {
  auto a = zeros({2, 3}, int32);
  auto idx = reshape(array({2, 2, 0, 1}, int64), {2, 2});
  auto vals_in = reshape(array({1, 2, 3, 4}, int32), {2, 2});
  EXPECT_EQ(vals(put_along_axis(a, idx, vals_in, 1)), (std::vector<double>{0, 0, 2, 3, 4, 0}));
  EXPECT_EQ(vals(scatter_add_axis(a, idx, vals_in, 1)), (std::vector<double>{0, 0, 3, 3, 4, 0}));
  // A scalar value broadcast to the indices.
  EXPECT_EQ(vals(scatter_add_axis(a, idx, array(5), 1)), (std::vector<double>{0, 0, 10, 5, 5, 0}));
  // Negative indices and float values cast to int.
  EXPECT_EQ(vals(put_along_axis(a, reshape(array({-1}, int32), {1, 1}), array(7.9f), 0)),
            (std::vector<double>{0, 0, 0, 7, 7, 7}));
  auto bad = put_along_axis(a, reshape(array({3}, int32), {1, 1}), array(1), 1);
  expect_throw_with([&] { eval(bad); }, {"put_along_axis", "index 3", "size 3"});
}

// ---------------------------------------------------------------- derivative rules

namespace {
array vjp_of(const array& out, const std::vector<array>& cot, int argnum) {
  return out.primitive().vjp(out.inputs(), cot, {argnum}, {out})[0];
}
array jvp_of(const array& out, const std::vector<array>& tangents, std::vector<int> argnums) {
  return out.primitive().jvp(out.inputs(), tangents, argnums)[0];
}
}  // namespace

TEST(IndexingGrad, SliceVjpPlacesCotangentAndJvpSlices) {
  auto a = ramp({5});
  auto s = slice(a, Shape{4}, {0}, {-2});  // 4, 2
  auto g = vjp_of(s, {array({1.0f, 2.0f})}, 0);
  EXPECT_EQ(vals(g), (std::vector<double>{0, 0, 2, 0, 1}));
  auto t = jvp_of(s, {ramp({5}, float32)}, {0});
  EXPECT_EQ(vals(t), (std::vector<double>{4, 2}));
}

TEST(IndexingGrad, SliceUpdateVjpSplitsCotangent) {
  auto src = zeros({4});
  auto out = slice_update(src, array({1.0f, 2.0f}), {1}, {3});
  auto cot = array({10.0f, 20.0f, 30.0f, 40.0f});
  EXPECT_EQ(vals(vjp_of(out, {cot}, 0)), (std::vector<double>{10, 0, 0, 40}));
  EXPECT_EQ(vals(vjp_of(out, {cot}, 1)), (std::vector<double>{20, 30}));
  auto t = jvp_of(out, {array({5.0f, 6.0f})}, {1});
  EXPECT_EQ(vals(t), (std::vector<double>{0, 5, 6, 0}));
}

TEST(IndexingGrad, GatherVjpIsScatterAddOfCotangent) {
  auto a = ramp({4});
  auto out = gather(a, array({1, 3, 1}, int32), 0, {1});
  auto g = vjp_of(out, {reshape(array({1.0f, 2.0f, 3.0f}), {3, 1})}, 0);
  EXPECT_EQ(vals(g), (std::vector<double>{0, 4, 0, 2}));
  auto t = jvp_of(out, {ramp({4}, float32)}, {0});
  EXPECT_EQ(vals(t), (std::vector<double>{1, 3, 1}));
  EXPECT_THROW(vjp_of(out, {zeros({3, 1})}, 1), std::invalid_argument);
}

TEST(IndexingGrad, ScatterVjpForSourceAndUpdates) {
  auto a = ramp({4});
  auto idx = array({2, 0}, int32);
  auto upd = reshape(array({5.0f, 6.0f}), {2, 1});
  auto cot = array({10.0f, 20.0f, 30.0f, 40.0f});
  auto s = scatter(a, idx, upd, 0);
  EXPECT_EQ(vals(vjp_of(s, {cot}, 0)), (std::vector<double>{0, 20, 0, 40}));
  EXPECT_EQ(vals(vjp_of(s, {cot}, 2)), (std::vector<double>{30, 10}));
  auto sa = scatter_add(a, idx, upd, 0);
  EXPECT_EQ(vals(vjp_of(sa, {cot}, 0)), (std::vector<double>{10, 20, 30, 40}));
  EXPECT_EQ(vals(vjp_of(sa, {cot}, 2)), (std::vector<double>{30, 10}));
  auto t = jvp_of(sa, {ones({4}), reshape(array({1.0f, 2.0f}), {2, 1})}, {0, 2});
  EXPECT_EQ(vals(t), (std::vector<double>{3, 1, 2, 1}));
}

TEST(IndexingGrad, AlongAxisVjps) {
  auto a = ramp({2, 3});
  auto idx = reshape(array({0, 0, 2, 1}, int32), {2, 2});
  auto out = take_along_axis(a, idx, 1);
  auto cot = reshape(array({1.0f, 2.0f, 3.0f, 4.0f}), {2, 2});
  EXPECT_EQ(vals(vjp_of(out, {cot}, 0)), (std::vector<double>{3, 0, 0, 0, 4, 3}));
  auto p = put_along_axis(a, idx, array(9.0f), 1);
  auto c6 = reshape(array({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}), {2, 3});
  EXPECT_EQ(vals(vjp_of(p, {c6}, 0)), (std::vector<double>{0, 2, 3, 4, 0, 0}));
  EXPECT_EQ(vals(vjp_of(p, {c6}, 2)), (std::vector<double>{1, 1, 6, 5}));
  auto sa = scatter_add_axis(a, idx, cot, 1);
  EXPECT_EQ(vals(vjp_of(sa, {c6}, 0)), vals(c6));
  EXPECT_EQ(vals(vjp_of(sa, {c6}, 2)), (std::vector<double>{1, 1, 6, 5}));
}

TEST(IndexingGrad, SliceAndGatherVmap) {
  auto a = ramp({3, 5});  // batch of 3 rows along axis 0
  auto s = slice(ramp({5}), Shape{1}, {5}, {2});
  auto [outs, axes] = s.primitive().vmap({a}, {0});
  ASSERT_EQ(axes[0], 0);
  EXPECT_EQ(vals(outs[0]), (std::vector<double>{1, 3, 6, 8, 11, 13}));
  auto g = gather(ramp({5}), array({4, 0}, int32), 0, {1});
  auto [gouts, gaxes] = g.primitive().vmap({a, g.inputs()[1]}, {0, -1});
  // out shape (2, 3, 1) batched along axis 1.
  ASSERT_EQ(gaxes[0], 1);
  EXPECT_EQ(gouts[0].shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(vals(gouts[0]), (std::vector<double>{4, 9, 14, 0, 5, 10}));
}

TEST(IndexingGrad, VmapWithEverythingBatched) {
  // gather: a batched along 1, indices along 0 -> out[b, i] = a[idx[b, i], b].
  auto a = ramp({4, 2});  // a[:, b] is batch b
  auto idx = reshape(array({3, 0, 1, 1}, int32), {2, 2});
  auto g = gather(ramp({4}), array({0, 0}, int32), 0, {1});
  auto [gouts, gaxes] = g.primitive().vmap({a, idx}, {1, 0});
  ASSERT_EQ(gaxes[0], 0);
  ASSERT_EQ(gouts[0].shape(), (Shape{2, 2, 1}));
  // b=0: a[3,0]=6, a[0,0]=0; b=1: a[1,1]=3, a[1,1]=3
  EXPECT_EQ(vals(gouts[0]), (std::vector<double>{6, 0, 3, 3}));

  // take_along_axis with a batched along 0 and indices unbatched.
  auto t = take_along_axis(ramp({3}), array({2, 0}, int32), 0);
  auto [touts, taxes] = t.primitive().vmap({ramp({2, 3}), t.inputs()[1]}, {0, -1});
  ASSERT_EQ(taxes[0], 0);
  EXPECT_EQ(vals(touts[0]), (std::vector<double>{2, 0, 5, 3}));

  // slice_update with src batched along 0 and update batched along 1.
  auto su = slice_update(zeros({3}), zeros({2}), Shape{0}, {2});
  auto upd = reshape(array({1.0f, 2.0f, 3.0f, 4.0f}), {2, 2});  // upd[:, b]
  auto [souts, saxes] = su.primitive().vmap({zeros({2, 3}), upd}, {0, 1});
  ASSERT_EQ(saxes[0], 0);
  EXPECT_EQ(vals(souts[0]), (std::vector<double>{1, 3, 0, 2, 4, 0}));

  // scatter_add_axis with only the values batched.
  auto sa = scatter_add_axis(zeros({3}), array({1, 1}, int32), zeros({2}), 0);
  auto [aouts, aaxes] =
      sa.primitive().vmap({sa.inputs()[0], sa.inputs()[1], ramp({2, 2})}, {-1, -1, 0});
  ASSERT_EQ(aaxes[0], 0);
  EXPECT_EQ(vals(aouts[0]), (std::vector<double>{0, 1, 0, 0, 5, 0}));
}

// Through the public transforms (they also exercise reshape/transpose/squeeze derivatives).
TEST(IndexingTransforms, VjpOfTakeAndSliceThroughTheGraph) {
  auto x = ramp({2, 3});
  auto idx = array({2, 2, 0}, int32);
  auto [out, g] = vjp([&](const array& a) { return take(a, idx, 1); }, x, ones({2, 3}));
  EXPECT_EQ(vals(out), (std::vector<double>{2, 2, 0, 5, 5, 3}));
  EXPECT_EQ(vals(g), (std::vector<double>{1, 0, 2, 1, 0, 2}));
  auto [o2, g2] = vjp([](const array& a) { return slice(a, Shape{1, 2}, {2, -4}, {1, -2}); }, x,
                      array({10.0f, 20.0f}, Shape{1, 2}));
  EXPECT_EQ(vals(o2), (std::vector<double>{5, 3}));
  EXPECT_EQ(vals(g2), (std::vector<double>{0, 0, 0, 20, 0, 10}));
  auto [o3, t3] = jvp([&](const array& a) { return take_along_axis(a, reshape(idx, {1, 3}), 1); },
                      x, ones({2, 3}));
  EXPECT_EQ(vals(o3), (std::vector<double>{2, 2, 0, 5, 5, 3}));
  EXPECT_EQ(vals(t3), std::vector<double>(6, 1.0));
}

TEST(IndexingTransforms, VmapOfSliceAndTake) {
  auto f = vmap([](const array& a) { return slice(a, Shape{2}, {-5}, {-2}); });  // 2, 0
  EXPECT_EQ(vals(f(ramp({2, 4}))), (std::vector<double>{2, 0, 6, 4}));
  auto g = vmap([](const array& a) { return take(a, array({1, 1}, int32), 0); }, 1, 0);
  EXPECT_EQ(vals(g(ramp({3, 2}))), (std::vector<double>{2, 2, 3, 3}));
}

TEST(Take, TransposedInputAndLargeParallelPaths) {
  auto a = ramp({300, 200}, float32);
  auto av = vals(a);
  std::vector<int32_t> iv(150);
  for (size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<int32_t>((i * 37) % 200) - 100;
  array idx(iv.begin(), Shape{150}, int32);
  auto o1 = vals(take(a, idx, 1));
  for (int r = 0; r < 300; ++r)
    for (int j = 0; j < 150; ++j) ASSERT_EQ(o1[r * 150 + j], av[r * 200 + (iv[j] + 200) % 200]);
  auto o0 = vals(take(a, idx, 0));  // rows: -100..99 wrap within 300
  for (int j = 0; j < 150; ++j)
    for (int c = 0; c < 200; ++c) ASSERT_EQ(o0[j * 200 + c], av[((iv[j] + 300) % 300) * 200 + c]);
  auto t = transpose(a, {1, 0});  // (200, 300) view
  auto ot = vals(take(t, idx, 0));
  for (int j = 0; j < 150; ++j)
    for (int r = 0; r < 300; ++r) ASSERT_EQ(ot[j * 300 + r], av[r * 200 + (iv[j] + 200) % 200]);
  auto bad = take(a, array({0, 250}, int32), 1);
  expect_throw_with([&] { eval(bad); }, {"index 250", "size 200"});
}

TEST(Scatter, TransposedTargetAndLargeUpdates) {
  auto a = transpose(ramp({3, 2}, int32), {1, 0});  // [[0,2,4],[1,3,5]]
  auto upd3 = reshape(array({10, 20, 30, 1, 2, 3}, int32), {2, 1, 3});
  auto out = scatter_add(a, array({1, 1}, int32), upd3, 0);
  EXPECT_EQ(vals(out), (std::vector<double>{0, 2, 4, 12, 25, 38}));
  // Slices bigger than the parallel grain.
  auto big = zeros({3, 40000});
  auto upd = ones({2, 1, 40000});
  auto o = vals(scatter_add(big, array({2, 2}, int32), upd, 0));
  EXPECT_EQ(o[0], 0);
  EXPECT_EQ(o[2 * 40000 + 39999], 2);
  auto su = vals(slice_update(big, ones({3, 20000}), Shape{0, 1}, {3, 40000}, {1, 2}));
  EXPECT_EQ(su[1], 1);
  EXPECT_EQ(su[2], 0);
  EXPECT_EQ(su[2 * 40000 + 39999], 1);
}

TEST(IndexingGrad, ScatterMaxVjpFollowsTheWinner) {
  auto a = array({1.0f, 5.0f, 2.0f});
  auto idx = array({0, 1}, int32);
  auto upd = reshape(array({3.0f, 4.0f}), {2, 1});
  auto s = scatter_max(a, idx, upd, 0);  // [3, 5, 2]
  auto cot = array({10.0f, 20.0f, 30.0f});
  auto ga = s.primitive().vjp(s.inputs(), {cot}, {0}, {s})[0];
  auto gu = s.primitive().vjp(s.inputs(), {cot}, {2}, {s})[0];
  EXPECT_EQ(vals(s), (std::vector<double>{3, 5, 2}));
  EXPECT_EQ(vals(ga), (std::vector<double>{0, 20, 30}));
  EXPECT_EQ(vals(gu), (std::vector<double>{10, 0}));
}

TEST(IndexingGrad, ScatterVmapBatchesSourceAndUpdates) {
  // Unbatched: scatter_add(zeros(3), idx=[2, 2], upd (2,1)).
  auto s = scatter_add(zeros({3}), array({2, 2}, int32), zeros({2, 1}), 0);
  // a batched along 1 (shape (3, 2)), updates batched along 0 (shape (2, 2, 1)), idx unbatched.
  auto a = reshape(array({0.0f, 100.0f, 0.0f, 100.0f, 0.0f, 100.0f}), {3, 2});
  auto upd = reshape(array({1.0f, 2.0f, 3.0f, 4.0f}), {2, 2, 1});
  auto [outs, oaxes] = s.primitive().vmap({a, s.inputs()[1], upd}, {1, -1, 0});
  ASSERT_EQ(oaxes[0], 0);
  EXPECT_EQ(vals(outs[0]), (std::vector<double>{0, 0, 3, 100, 100, 107}));
}

TEST(DynamicSlice, UpdateAndDerivatives) {
  auto src = zeros({3, 4}, int32);
  auto out = slice_update(src, array({7, 8}, int32), array({1, 5}, int32), {0, 1});
  // Row 1; column start 5 clamped to 2.
  EXPECT_EQ(vals(out), (std::vector<double>{0, 0, 0, 0, 0, 0, 7, 8, 0, 0, 0, 0}));
  // A 1-d update on a 2-d source covers every row except along the given axis.
  auto col = slice_update(zeros({2, 3}), array({5.0f}), array(-1, int64), {1});
  EXPECT_EQ(vals(col), (std::vector<double>{0, 0, 5, 0, 0, 5}));
  auto a = ramp({4});
  auto s = slice(a, array({1}, int32), {0}, {2});
  auto g = s.primitive().vjp(s.inputs(), {array({10.0f, 20.0f})}, {0}, {s})[0];
  auto t = s.primitive().jvp(s.inputs(), {ramp({4})}, {0})[0];
  EXPECT_EQ(vals(g), (std::vector<double>{0, 10, 20, 0}));
  EXPECT_EQ(vals(t), (std::vector<double>{1, 2}));
  auto u = slice_update(zeros({4}), array({1.0f, 2.0f}), array({2}, int32), {0});
  auto cot = array({1.0f, 2.0f, 3.0f, 4.0f});
  auto gs = u.primitive().vjp(u.inputs(), {cot}, {0}, {u})[0];
  auto gu = u.primitive().vjp(u.inputs(), {cot}, {1}, {u})[0];
  EXPECT_EQ(vals(gs), (std::vector<double>{1, 2, 0, 0}));
  EXPECT_EQ(vals(gu), (std::vector<double>{3, 4}));
  expect_throw_with([&] { slice_update(src, zeros({2}), array({0.5f}), {0}); },
                    {"[slice_update]", "float32"});
}

// Errors name the op the user called, not the op it is built on (take is a gather, full a
// broadcast, clip a maximum/minimum), also when the error comes from the kernel at eval.
TEST(OpNames, ErrorsNameTheOpTheUserCalled) {
  auto message = [](auto f) {
    try {
      f();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto starts = [](const std::string& m, const std::string& op) { return m.rfind("[" + op + "]", 0) == 0; };
  auto m = message([] { eval(take(arange(5), array({7}), 0)); });
  EXPECT_TRUE(starts(m, "take")) << m;
  m = message([] { eval(take(reshape(arange(6), {2, 3}), array({5}), 1)); });
  EXPECT_TRUE(starts(m, "take")) << m;
  m = message([] { eval(take(arange(5), array({-9}))); });
  EXPECT_TRUE(starts(m, "take")) << m;
  m = message([] { eval(gather(arange(5), {array({7})}, {0}, {1})); });
  EXPECT_TRUE(starts(m, "gather")) << m;
  m = message([] { eval(take_along_axis(arange(5), array({7}), 0)); });
  EXPECT_TRUE(starts(m, "take_along_axis")) << m;
  m = message([] { full({2, 3}, array({1.0f, 2.0f})); });
  EXPECT_TRUE(starts(m, "full")) << m;
  m = message([] { full({3}, zeros({3, 1})); });
  EXPECT_TRUE(starts(m, "full")) << m;
  m = message([] { clip(zeros({3}), zeros({2}), std::nullopt); });
  EXPECT_TRUE(starts(m, "clip")) << m;
  // Valid calls still work.
  EXPECT_EQ(take(arange(5), array({4, 0}), 0).shape(), Shape{2});
  EXPECT_EQ(full({2, 3}, array({1.0f, 2.0f, 3.0f})).shape(), (Shape{2, 3}));
}
