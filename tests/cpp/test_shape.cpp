// Shape ops: views share the input buffer and see the right elements, copies match naive
// loops, every dtype through the copy paths, 0-d / empty / non-contiguous inputs, errors, and
// the primitives' vjp/jvp/vmap rules.
#include <gtest/gtest.h>

#include <numeric>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

// The elements of `a` in row-major order, read through its strides (an independent reader).
template <typename T>
std::vector<T> values(array a) {
  eval(a);
  std::vector<T> out;
  const size_t n = a.size();
  if (n == 0) return out;
  const T* base = a.data<T>();
  std::vector<int> idx(a.ndim(), 0);
  for (size_t k = 0; k < n; ++k) {
    int64_t off = 0;
    for (size_t d = 0; d < a.ndim(); ++d) off += idx[d] * a.strides()[d];
    out.push_back(base[off]);
    for (int d = static_cast<int>(a.ndim()) - 1; d >= 0; --d) {
      if (++idx[d] < a.shape()[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

array iota_array(const Shape& shape, Dtype dtype = float32) {
  size_t n = 1;
  for (int d : shape) n *= d;
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return array(v.begin(), shape, dtype);
}

std::vector<float> iota_vec(int n, float start = 0) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no invalid_argument thrown>";
}

const std::vector<Dtype> kShapeTestDtypes = {bool_,  uint8,   uint16,  uint32,   uint64,
                                       int8,   int16,   int32,   int64,    float16,
                                       float32, float64, bfloat16, complex64};

}  // namespace

// ---- transpose / swapaxes / moveaxis ----

TEST(Transpose, IsAViewWithPermutedStrides) {
  auto a = iota_array({2, 3, 4});
  eval(a);
  auto t = transpose(a, {2, 0, 1});
  eval(t);
  EXPECT_EQ(t.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(t.strides(), (Strides{1, 12, 4}));
  EXPECT_EQ(t.data<float>(), a.data<float>());
  auto v = values<float>(t);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(v[(i * 2 + j) * 3 + k], j * 12 + k * 4 + i);
}

TEST(Transpose, FlagsOfTwoDimTransposeAreColContiguous) {
  auto a = iota_array({3, 5});
  auto t = transpose(a);
  eval(t);
  EXPECT_TRUE(t.flags().contiguous);
  EXPECT_TRUE(t.flags().col_contiguous);
  EXPECT_FALSE(t.flags().row_contiguous);
  EXPECT_EQ(t.data_size(), 15u);
  auto tt = transpose(t);
  eval(tt);
  EXPECT_TRUE(tt.flags().row_contiguous);
  // A 3-d permutation that is neither C nor Fortran order is still dense.
  auto p = transpose(iota_array({2, 3, 4}), {1, 0, 2});
  eval(p);
  EXPECT_TRUE(p.flags().contiguous);
  EXPECT_FALSE(p.flags().row_contiguous);
  EXPECT_FALSE(p.flags().col_contiguous);
}

TEST(Transpose, NegativeAxesDefaultReverseAndZeroDim) {
  auto a = iota_array({2, 3, 4});
  EXPECT_EQ(transpose(a, {-1, -3, -2}).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(transpose(a).shape(), (Shape{4, 3, 2}));
  auto s = array(7.0f);
  EXPECT_EQ(transpose(s).ndim(), 0u);
  EXPECT_EQ(transpose(s).item<float>(), 7.0f);
  auto e = transpose(zeros({0, 3}));
  eval(e);
  EXPECT_EQ(e.shape(), (Shape{3, 0}));
}

// Copies of transposed layouts large enough to go in tiles (dims of 32 or more, ragged edges,
// extra outer dims, every dtype, a cast on the way) hold the elements that the view's strides
// point at, read one by one.
TEST(Transpose, TiledCopiesOfTransposedLayoutsMatchTheStridedReader) {
  const std::vector<std::pair<Shape, std::vector<int>>> cases = {
      {{67, 45}, {1, 0}},       {{32, 32}, {1, 0}},          {{3, 40, 33}, {2, 1, 0}},
      {{3, 40, 33}, {0, 2, 1}}, {{40, 3, 36}, {2, 0, 1}},    {{2, 35, 5, 34}, {0, 3, 2, 1}},
      {{33, 31}, {1, 0}},       {{5, 64, 2, 70}, {1, 3, 0, 2}}};
  for (const auto& [shape, perm] : cases) {
    for (Dtype dt : kShapeTestDtypes) {
      auto t = transpose(iota_array(shape, dt), perm);
      auto c = contiguous(t);
      tessera::detail::dispatch_dtype(dt, [&](auto tag) {
        using T = decltype(tag);
        ASSERT_EQ(values<T>(c), values<T>(t)) << dtype_name(dt);
      });
      ASSERT_TRUE(c.flags().row_contiguous);
    }
    auto t = transpose(iota_array(shape, int16), perm);
    std::vector<float> want;
    for (int16_t v : values<int16_t>(t)) want.push_back(static_cast<float>(v));
    ASSERT_EQ(values<float>(astype(t, float32)), want) << "cast while copying";
  }
}

TEST(Transpose, ErrorsNameTheAxes) {
  auto a = iota_array({2, 3});
  auto m = error_of([&] { transpose(a, {0}); });
  EXPECT_NE(m.find("[transpose]"), std::string::npos) << m;
  EXPECT_NE(m.find("(0)"), std::string::npos) << m;
  m = error_of([&] { transpose(a, {0, 2}); });
  EXPECT_NE(m.find("axis 2"), std::string::npos) << m;
  m = error_of([&] { transpose(a, {1, -1}); });
  EXPECT_NE(m.find("repeated"), std::string::npos) << m;
}

TEST(Swapaxes, AndMoveaxisAreTransposes) {
  auto a = iota_array({2, 3, 4});
  eval(a);
  auto s = swapaxes(a, 0, -1);
  EXPECT_EQ(s.shape(), (Shape{4, 3, 2}));
  auto v = values<float>(s);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) EXPECT_EQ(v[(i * 3 + j) * 2 + k], k * 12 + j * 4 + i);
  EXPECT_EQ(s.data<float>(), a.data<float>());
  auto m = moveaxis(a, 0, 2);
  EXPECT_EQ(m.shape(), (Shape{3, 4, 2}));
  auto mv = values<float>(m);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 2; ++k) EXPECT_EQ(mv[(i * 4 + j) * 2 + k], k * 12 + i * 4 + j);
  EXPECT_EQ(moveaxis(a, -1, 0).shape(), (Shape{4, 2, 3}));
  // As MLX: an axis outside the array is std::out_of_range.
  auto out_of_range_message = [](auto f) {
    try {
      f();
    } catch (const std::out_of_range& e) {
      return std::string(e.what());
    }
    return std::string("<no out_of_range thrown>");
  };
  auto e = out_of_range_message([&] { swapaxes(a, 0, 3); });
  EXPECT_NE(e.find("[swapaxes] axis 3"), std::string::npos) << e;
  e = out_of_range_message([&] { moveaxis(a, -4, 0); });
  EXPECT_NE(e.find("[moveaxis] axis -4"), std::string::npos) << e;
}

// ---- expand_dims / squeeze ----

TEST(ExpandDims, InsertsUnitDimsAsAView) {
  auto a = iota_array({2, 3});
  eval(a);
  auto e = expand_dims(a, {0, -1});
  eval(e);
  EXPECT_EQ(e.shape(), (Shape{1, 2, 3, 1}));
  EXPECT_EQ(e.data<float>(), a.data<float>());
  EXPECT_TRUE(e.flags().row_contiguous);
  EXPECT_EQ(values<float>(e), iota_vec(6));
  EXPECT_EQ(expand_dims(a, 1).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(expand_dims(a, -2).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(expand_dims(array(1.0f), 0).shape(), (Shape{1}));
  EXPECT_EQ(expand_dims(zeros({0}), 1).shape(), (Shape{0, 1}));
}

TEST(ExpandDims, OfTransposedKeepsElements) {
  auto t = transpose(iota_array({2, 3}));
  auto e = expand_dims(t, 1);
  eval(e);
  EXPECT_EQ(e.shape(), (Shape{3, 1, 2}));
  EXPECT_TRUE(e.flags().col_contiguous);
  EXPECT_EQ(values<float>(e), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(ExpandDims, Errors) {
  auto a = iota_array({2, 3});
  auto m = error_of([&] { expand_dims(a, 3); });
  EXPECT_NE(m.find("[expand_dims] axis 3"), std::string::npos) << m;
  m = error_of([&] { expand_dims(a, {0, 0}); });
  EXPECT_NE(m.find("[expand_dims] repeated"), std::string::npos) << m;
}

TEST(Squeeze, RemovesUnitDimsAsAView) {
  auto a = iota_array({1, 3, 1, 2});
  eval(a);
  auto s = squeeze(a);
  eval(s);
  EXPECT_EQ(s.shape(), (Shape{3, 2}));
  EXPECT_EQ(s.data<float>(), a.data<float>());
  EXPECT_EQ(values<float>(s), iota_vec(6));
  EXPECT_EQ(squeeze(a, 0).shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(squeeze(a, -2).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(squeeze(a, {0, 2}).shape(), (Shape{3, 2}));
  EXPECT_EQ(squeeze(zeros({1, 1})).ndim(), 0u);
  EXPECT_EQ(squeeze(zeros({1, 0})).shape(), (Shape{0}));
  auto t = squeeze(transpose(a, {1, 0, 3, 2}));
  EXPECT_EQ(values<float>(t), (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST(Squeeze, ErrorsNameAxisAndSize) {
  auto a = iota_array({1, 3});
  auto m = error_of([&] { squeeze(a, 1); });
  EXPECT_NE(m.find("[squeeze] cannot squeeze axis 1 of size 3"), std::string::npos) << m;
  m = error_of([&] { squeeze(a, 2); });
  EXPECT_NE(m.find("[squeeze] axis 2"), std::string::npos) << m;
  m = error_of([&] { squeeze(a, {0, -2}); });
  EXPECT_NE(m.find("repeated"), std::string::npos) << m;
}

// ---- concatenate / stack ----

TEST(Concatenate, AlongEachAxisMatchesNaiveLoop) {
  const Shape sa = {2, 3, 4};
  auto a = iota_array(sa);
  for (int ax = 0; ax < 3; ++ax) {
    Shape sb = sa;
    sb[ax] = 2;
    std::vector<float> bv(detail::shape_size(sb));
    std::iota(bv.begin(), bv.end(), 100.0f);
    array b(bv.begin(), sb);
    auto c = concatenate({a, b}, ax);
    Shape sc = sa;
    sc[ax] += 2;
    ASSERT_EQ(c.shape(), sc);
    auto got = values<float>(c);
    size_t k = 0;
    for (int i = 0; i < sc[0]; ++i)
      for (int j = 0; j < sc[1]; ++j)
        for (int l = 0; l < sc[2]; ++l, ++k) {
          int idx[3] = {i, j, l};
          float expect;
          if (idx[ax] < sa[ax]) {
            expect = static_cast<float>((idx[0] * sa[1] + idx[1]) * sa[2] + idx[2]);
          } else {
            idx[ax] -= sa[ax];
            expect = 100.0f + static_cast<float>((idx[0] * sb[1] + idx[1]) * sb[2] + idx[2]);
          }
          ASSERT_EQ(got[k], expect) << "axis " << ax << " at " << k;
        }
  }
}

TEST(Concatenate, EveryDtypeAndNegativeAxis) {
  for (Dtype dt : kShapeTestDtypes) {
    std::vector<int> av{1, 0, 1, 1, 0, 1}, bv{0, 1, 1, 0};
    array a(av.begin(), Shape{2, 3}, dt), b(bv.begin(), Shape{2, 2}, dt);
    auto c = concatenate({a, b}, -1);
    ASSERT_EQ(c.dtype(), dt);
    ASSERT_EQ(c.shape(), (Shape{2, 5}));
    auto c64 = values<double>(astype(c, float64));
    std::vector<double> expect{1, 0, 1, 0, 1, 1, 0, 1, 1, 0};
    EXPECT_EQ(c64, expect) << "dtype " << dt;
  }
}

TEST(Concatenate, TransposedAndBroadcastInputs) {
  auto a = transpose(iota_array({3, 2}));       // (2,3): [[0,2,4],[1,3,5]]
  auto b = broadcast_to(array({7.0f, 8.0f, 9.0f}), {2, 3});
  auto c = concatenate({a, b}, 0);
  EXPECT_EQ(values<float>(c), (std::vector<float>{0, 2, 4, 1, 3, 5, 7, 8, 9, 7, 8, 9}));
  auto d = concatenate({a, b}, 1);
  EXPECT_EQ(values<float>(d), (std::vector<float>{0, 2, 4, 7, 8, 9, 1, 3, 5, 7, 8, 9}));
  eval(d);
  EXPECT_TRUE(d.flags().row_contiguous);
}

TEST(Concatenate, PromotesDtypesAndFlattens) {
  array a({1, 2}, int32);
  array b({0.5f});
  auto c = concatenate({a, b}, 0);
  EXPECT_EQ(c.dtype(), float32);
  EXPECT_EQ(values<float>(c), (std::vector<float>{1, 2, 0.5f}));
  auto f = concatenate({iota_array({2, 2}), array(9.0f)});
  EXPECT_EQ(values<float>(f), (std::vector<float>{0, 1, 2, 3, 9}));
}

TEST(Concatenate, EmptyPartsAndEmptyResult) {
  auto c = concatenate({zeros({0, 3}), iota_array({2, 3}), zeros({0, 3})}, 0);
  EXPECT_EQ(values<float>(c), iota_vec(6));
  auto e = concatenate({zeros({2, 0}), zeros({2, 0})}, 1);
  eval(e);
  EXPECT_EQ(e.shape(), (Shape{2, 0}));
}

TEST(Concatenate, LargeInputsUseManyThreads) {
  auto a = iota_array({300, 700});
  auto b = transpose(iota_array({700, 300}));
  auto c = concatenate({a, b}, 1);
  auto v = values<float>(c);
  for (int i = 0; i < 300; i += 37) {
    for (int j = 0; j < 1400; j += 53) {
      float expect = j < 700 ? i * 700 + j : (j - 700) * 300 + i;
      ASSERT_EQ(v[i * 1400 + j], expect);
    }
  }
}

TEST(Concatenate, ErrorsNameShapesAndAxis) {
  auto m = error_of([] { concatenate(std::vector<array>{}, 0); });
  EXPECT_NE(m.find("[concatenate]"), std::string::npos) << m;
  m = error_of([] { concatenate({zeros({2, 3}), zeros({3, 3})}, 1); });
  EXPECT_NE(m.find("[concatenate]"), std::string::npos) << m;
  EXPECT_NE(m.find("(2,3), (3,3)"), std::string::npos) << m;
  m = error_of([] { concatenate({zeros({2, 3}), zeros({3})}, 0); });
  EXPECT_NE(m.find("same number of dimensions"), std::string::npos) << m;
  m = error_of([] { concatenate({zeros({2}), zeros({3})}, 1); });
  EXPECT_NE(m.find("[concatenate] axis 1"), std::string::npos) << m;
  m = error_of([] { concatenate({array(1.0f), array(2.0f)}, 0); });
  EXPECT_NE(m.find("0-d"), std::string::npos) << m;
}

TEST(Stack, NewAxisAtEachPosition) {
  auto a = iota_array({2, 3});
  auto b = iota_array({2, 3}, int32);
  auto s0 = stack({a, astype(b, float32)});
  EXPECT_EQ(s0.shape(), (Shape{2, 2, 3}));
  auto s1 = stack({a, a}, 1);
  EXPECT_EQ(s1.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(values<float>(s1), (std::vector<float>{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}));
  auto s2 = stack({a, a}, -1);
  EXPECT_EQ(s2.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(values<float>(s2), (std::vector<float>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5}));
  auto sc = stack({array(1.0f), array(2.0f)});
  EXPECT_EQ(values<float>(sc), (std::vector<float>{1, 2}));
  auto m = error_of([&] { stack({a, zeros({3, 2})}); });
  EXPECT_NE(m.find("[stack]"), std::string::npos) << m;
  EXPECT_NE(m.find("(3,2)"), std::string::npos) << m;
}

// ---- reshape / flatten / unflatten ----

TEST(Reshape, OfRowContiguousIsAView) {
  auto a = iota_array({2, 3, 4});
  eval(a);
  auto r = reshape(a, {4, -1});
  eval(r);
  EXPECT_EQ(r.shape(), (Shape{4, 6}));
  EXPECT_EQ(r.data<float>(), a.data<float>());
  EXPECT_TRUE(r.flags().row_contiguous);
  EXPECT_EQ(values<float>(r), iota_vec(24));
  EXPECT_EQ(reshape(array(3.0f), {1, 1}).shape(), (Shape{1, 1}));
  EXPECT_EQ(reshape(zeros({0, 4}), {2, 0, 3}).shape(), (Shape{2, 0, 3}));
  EXPECT_THROW(reshape(zeros({0, 4}), {2, 0, -1}), std::invalid_argument);  // as NumPy
}

TEST(Reshape, OfTransposedCopiesWhenDimsMerge) {
  auto a = iota_array({2, 3});
  eval(a);
  auto t = transpose(a);  // (3,2) = [[0,3],[1,4],[2,5]]
  auto r = reshape(t, {6});
  eval(r);
  EXPECT_NE(r.data<float>(), a.data<float>());
  EXPECT_TRUE(r.flags().row_contiguous);
  EXPECT_EQ(values<float>(r), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  // Splitting one dim of a transposed array needs no copy.
  auto big = transpose(iota_array({4, 6}));  // (6,4), strides (1,6)
  auto sp = reshape(big, {2, 3, 4});
  eval(sp, big);
  EXPECT_EQ(sp.data<float>(), big.data<float>());
  EXPECT_EQ(sp.strides(), (Strides{3, 1, 6}));
  auto v = values<float>(sp);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(v[(i * 3 + j) * 4 + k], k * 6 + i * 3 + j);
}

TEST(Reshape, OfBroadcastKeepsZeroStrides) {
  auto b = broadcast_to(array({1.0f, 2.0f}), {3, 2});
  auto r = reshape(b, {3, 1, 2});
  eval(r);
  EXPECT_EQ(values<float>(r), (std::vector<float>{1, 2, 1, 2, 1, 2}));
  auto f = reshape(b, {6});  // merging a 0-stride dim with a dense one must copy
  EXPECT_EQ(values<float>(f), (std::vector<float>{1, 2, 1, 2, 1, 2}));
}

TEST(Reshape, ErrorsNameShapes) {
  auto a = iota_array({2, 3});
  auto m = error_of([&] { reshape(a, {4}); });
  EXPECT_NE(m.find("[reshape]"), std::string::npos) << m;
  EXPECT_NE(m.find("(2,3)"), std::string::npos) << m;
  EXPECT_NE(m.find("(4)"), std::string::npos) << m;
  m = error_of([&] { reshape(a, {-1, -1}); });
  EXPECT_NE(m.find("only one dimension can be -1"), std::string::npos) << m;
  m = error_of([&] { reshape(a, {4, -1}); });
  EXPECT_NE(m.find("cannot infer"), std::string::npos) << m;
}

TEST(Flatten, RangesAndDefaults) {
  auto a = iota_array({2, 3, 4});
  EXPECT_EQ(flatten(a).shape(), (Shape{24}));
  EXPECT_EQ(flatten(a, 1).shape(), (Shape{2, 12}));
  EXPECT_EQ(flatten(a, 0, 1).shape(), (Shape{6, 4}));
  EXPECT_EQ(flatten(a, -2, -1).shape(), (Shape{2, 12}));
  EXPECT_EQ(flatten(a, 1, 1).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(flatten(array(1.0f)).shape(), (Shape{1}));
  EXPECT_EQ(values<float>(flatten(transpose(iota_array({2, 2})))),
            (std::vector<float>{0, 2, 1, 3}));
  auto m = error_of([&] { flatten(a, 2, 1); });
  EXPECT_NE(m.find("[flatten]"), std::string::npos) << m;
  m = error_of([&] { flatten(a, 3); });
  EXPECT_NE(m.find("start_axis 3"), std::string::npos) << m;
}

TEST(Unflatten, SplitsOneAxis) {
  auto a = iota_array({2, 12});
  EXPECT_EQ(unflatten(a, 1, {3, 4}).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(unflatten(a, -1, {-1, 6}).shape(), (Shape{2, 2, 6}));
  EXPECT_EQ(unflatten(a, 0, {2, 1}).shape(), (Shape{2, 1, 12}));
  EXPECT_EQ(values<float>(unflatten(a, 1, {3, 4})), iota_vec(24));
  auto m = error_of([&] { unflatten(a, 1, {5, -1}); });
  EXPECT_NE(m.find("[unflatten]"), std::string::npos) << m;
  m = error_of([&] { unflatten(a, 1, {5, 2}); });
  EXPECT_NE(m.find("size 12"), std::string::npos) << m;
  EXPECT_THROW(unflatten(a, 1, {}), std::invalid_argument);
}

// ---- broadcast ----

TEST(BroadcastTo, IsAZeroStrideView) {
  auto a = array({1.0f, 2.0f, 3.0f}, {3, 1});
  eval(a);
  auto b = broadcast_to(a, {2, 3, 2});
  eval(b);
  EXPECT_EQ(b.strides(), (Strides{0, 1, 0}));
  EXPECT_EQ(b.data<float>(), a.data<float>());
  // As MLX: the data read is one dense block of 3 (broadcasting aside), not row-contiguous.
  EXPECT_TRUE(b.flags().contiguous);
  EXPECT_FALSE(b.flags().row_contiguous);
  EXPECT_EQ(b.data_size(), 3u);
  EXPECT_EQ(values<float>(b), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  auto sc = broadcast_to(array(5), {2, 2});
  eval(sc);
  EXPECT_EQ(sc.data_size(), 1u);
  EXPECT_EQ(values<int>(sc), (std::vector<int>{5, 5, 5, 5}));
  // As MLX: a size-1 input dim reads stride 0 even where the output keeps size 1.
  auto k = broadcast_to(zeros({2, 1, 2}), {4, 2, 1, 2});
  eval(k);
  EXPECT_EQ(k.strides(), (Strides{0, 2, 0, 1}));
  EXPECT_TRUE(k.flags().contiguous);
  auto m = error_of([&] { broadcast_to(a, {3, 2, 2}); });
  EXPECT_NE(m.find("[broadcast_to]"), std::string::npos) << m;
  EXPECT_NE(m.find("(3,1)"), std::string::npos) << m;
  EXPECT_THROW(broadcast_to(a, {-1, 1}), std::invalid_argument);
}

TEST(BroadcastArrays, CommonShape) {
  auto out = broadcast_arrays({array({1, 2, 3}, int32), array({4}, {1, 1}, int32), array(7)});
  for (auto& o : out) EXPECT_EQ(o.shape(), (Shape{1, 3}));
  EXPECT_EQ(values<int>(out[1]), (std::vector<int>{4, 4, 4}));
  EXPECT_THROW(broadcast_arrays({zeros({2}), zeros({3})}), std::invalid_argument);
}

// ---- split / unstack ----

TEST(Split, EqualPartsAreViews) {
  auto a = iota_array({4, 6});
  eval(a);
  auto parts = split(a, 3, 1);
  ASSERT_EQ(parts.size(), 3u);
  for (int p = 0; p < 3; ++p) {
    eval(parts[p]);
    EXPECT_EQ(parts[p].shape(), (Shape{4, 2}));
    EXPECT_EQ(parts[p].data<float>(), a.data<float>() + 2 * p);
    auto v = values<float>(parts[p]);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 2; ++j) EXPECT_EQ(v[i * 2 + j], i * 6 + 2 * p + j);
  }
  auto rows = split(a, 2);
  eval(rows[1]);
  EXPECT_TRUE(rows[1].flags().row_contiguous);
  EXPECT_EQ(values<float>(rows[1]), iota_vec(12, 12));
}

TEST(Split, AtIndicesLikeNumpy) {
  auto a = iota_array({7});
  auto p = split(a, Shape{2, 5});
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(values<float>(p[0]), (std::vector<float>{0, 1}));
  EXPECT_EQ(values<float>(p[1]), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(values<float>(p[2]), (std::vector<float>{5, 6}));
  // Out of range and negative indices clamp / wrap; decreasing gives an empty part.
  auto q = split(a, Shape{-2, 10}, 0);
  EXPECT_EQ(values<float>(q[0]), (std::vector<float>{0, 1, 2, 3, 4}));
  EXPECT_EQ(values<float>(q[1]), (std::vector<float>{5, 6}));
  EXPECT_EQ(q[2].size(), 0u);
  auto r = split(a, Shape{4, 2});
  EXPECT_EQ(r[1].size(), 0u);
  EXPECT_EQ(values<float>(r[2]), (std::vector<float>{2, 3, 4, 5, 6}));
  EXPECT_EQ(split(a, Shape{}).size(), 1u);
}

TEST(Split, OfTransposedAndErrors) {
  auto t = transpose(iota_array({2, 4}));  // (4,2)
  auto p = split(t, 2, 0);
  EXPECT_EQ(values<float>(p[1]), (std::vector<float>{2, 6, 3, 7}));
  auto m = error_of([&] { split(t, 3, 0); });
  EXPECT_NE(m.find("[split] cannot split axis 0 of size 4"), std::string::npos) << m;
  m = error_of([&] { split(t, 0, 0); });
  EXPECT_NE(m.find("num_splits must be positive, got 0"), std::string::npos) << m;
  m = error_of([&] { split(t, 2, 2); });
  EXPECT_NE(m.find("[split] axis 2"), std::string::npos) << m;
}

TEST(Unstack, RemovesTheAxis) {
  auto a = iota_array({2, 3});
  auto u = unstack(a, 1);
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(u[2].shape(), (Shape{2}));
  EXPECT_EQ(values<float>(u[2]), (std::vector<float>{2, 5}));
  EXPECT_EQ(unstack(a).size(), 2u);
  EXPECT_TRUE(unstack(zeros({0, 3})).empty());
}

// ---- flip ----

TEST(Flip, IsANegativeStrideView) {
  auto a = iota_array({2, 3});
  eval(a);
  auto f = flip(a, 1);
  eval(f);
  EXPECT_EQ(f.strides(), (Strides{3, -1}));
  EXPECT_EQ(f.data<float>(), a.data<float>() + 2);
  EXPECT_FALSE(f.flags().contiguous);
  EXPECT_EQ(values<float>(f), (std::vector<float>{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(values<float>(flip(a)), (std::vector<float>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(values<float>(flip(a, std::vector<int>{-2})), (std::vector<float>{3, 4, 5, 0, 1, 2}));
  EXPECT_EQ(flip(array(1.0f)).item<float>(), 1.0f);
  EXPECT_EQ(flip(zeros({0, 2})).size(), 0u);
  auto m = error_of([&] { flip(a, 2); });
  EXPECT_NE(m.find("[flip] axis 2"), std::string::npos) << m;
}

TEST(Flip, FeedsEveryStridedKernel) {
  auto f = flip(iota_array({3, 4}), std::vector<int>{0, 1});
  // copy, astype, contiguous, reshape-copy, concatenate, pad all walk negative strides.
  std::vector<float> rev(12);
  for (int i = 0; i < 12; ++i) rev[i] = static_cast<float>(11 - i);
  EXPECT_EQ(values<float>(copy(f)), rev);
  EXPECT_EQ(values<double>(astype(f, float64)), std::vector<double>(rev.begin(), rev.end()));
  EXPECT_EQ(values<float>(contiguous(f)), rev);
  EXPECT_EQ(values<float>(reshape(f, {12})), rev);
  auto c = concatenate({f, f}, 1);
  auto cv = values<float>(c);
  EXPECT_EQ(cv[0], 11.0f);
  EXPECT_EQ(cv[4], 11.0f);
  EXPECT_EQ(cv[23], 0.0f);
  auto p = pad(f, 1);
  auto pv = values<float>(p);
  EXPECT_EQ(pv[7], 11.0f);  // row 1, col 1
  EXPECT_EQ(pv[0], 0.0f);
}

// ---- pad ----

TEST(Pad, ConstantAllOverloads) {
  auto a = array({1, 2, 3, 4}, {2, 2}, int32);
  auto p = pad(a, 1);
  EXPECT_EQ(p.shape(), (Shape{4, 4}));
  EXPECT_EQ(values<int>(p), (std::vector<int>{0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0}));
  auto q = pad(a, std::pair<int, int>{0, 1}, array(9));
  EXPECT_EQ(values<int>(q), (std::vector<int>{1, 2, 9, 3, 4, 9, 9, 9, 9}));
  auto r = pad(a, std::vector<std::pair<int, int>>{{1, 0}, {0, 2}}, array(7.9f));
  EXPECT_EQ(r.dtype(), int32);
  EXPECT_EQ(values<int>(r), (std::vector<int>{7, 7, 7, 7, 1, 2, 7, 7, 3, 4, 7, 7}));
  auto s = pad(a, std::vector<int>{-1}, Shape{2}, Shape{0});
  EXPECT_EQ(values<int>(s), (std::vector<int>{0, 0, 1, 2, 0, 0, 3, 4}));
}

TEST(Pad, EveryDtypeAndTransposedInput) {
  for (Dtype dt : kShapeTestDtypes) {
    std::vector<int> v{1, 2, 3, 4, 5, 6};
    auto a = transpose(array(v.begin(), Shape{2, 3}, dt));  // (3,2): [[1,4],[2,5],[3,6]]
    auto p = pad(a, std::vector<int>{1}, Shape{1}, Shape{1}, array(1));
    ASSERT_EQ(p.dtype(), dt);
    auto got = values<double>(astype(p, float64));
    std::vector<double> expect{1, 1, 4, 1, 1, 2, 5, 1, 1, 3, 6, 1};
    if (dt == bool_) expect = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    EXPECT_EQ(got, expect) << dt;
  }
}

TEST(Pad, EdgeMode) {
  auto a = array({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2});
  auto p = pad(a, std::vector<std::pair<int, int>>{{1, 0}, {1, 2}}, array(0), "edge");
  EXPECT_EQ(p.shape(), (Shape{3, 5}));
  EXPECT_EQ(values<float>(p),
            (std::vector<float>{1, 1, 2, 2, 2, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4}));
  auto one = pad(array({5.0f}), 2, array(0), "edge");
  EXPECT_EQ(values<float>(one), (std::vector<float>{5, 5, 5, 5, 5}));
  auto m = error_of([&] { pad(zeros({0}), 1, array(0), "edge"); });
  EXPECT_NE(m.find("empty axis"), std::string::npos) << m;
}

// Reference: fold the index back into range one mirror at a time (NumPy pads this way, a
// reflection per pass), not the closed form with a period that pad() uses.
int folded_index(int j, int n, bool symmetric) {
  if (n == 1) return 0;
  while (j < 0 || j >= n) {
    if (j < 0) j = symmetric ? -j - 1 : -j;
    if (j >= n) j = symmetric ? 2 * n - 1 - j : 2 * (n - 1) - j;
  }
  return j;
}

TEST(Pad, ReflectAndSymmetricModesMatchRepeatedFolding) {
  for (const bool symmetric : {false, true}) {
    for (int n : {1, 2, 3, 5}) {
      for (auto [lo, hi] : std::vector<std::pair<int, int>>{{0, 0}, {2, 2}, {0, 3}, {7, 5}}) {
        auto x = array(iota_vec(n, 1), {n});
        auto p = pad(x, {{lo, hi}}, array(0.0f), symmetric ? "symmetric" : "reflect");
        std::vector<float> want;
        for (int q = 0; q < n + lo + hi; ++q) want.push_back(1.0f + folded_index(q - lo, n, symmetric));
        EXPECT_EQ(values<float>(p), want) << (symmetric ? "symmetric" : "reflect") << " n=" << n
                                          << " pad=(" << lo << "," << hi << ")";
      }
    }
  }
  // Two axes at once, one of them unpadded.
  auto a = array(iota_vec(6), {2, 3});
  auto p = pad(a, std::vector<std::pair<int, int>>{{1, 0}, {0, 2}}, array(0), "reflect");
  EXPECT_EQ(values<float>(p), (std::vector<float>{3, 4, 5, 4, 3, 0, 1, 2, 1, 0, 3, 4, 5, 4, 3}));
  auto m = error_of([&] { pad(zeros({0}), 1, array(0), "symmetric"); });
  EXPECT_NE(m.find("empty axis"), std::string::npos) << m;
  m = error_of([&] { pad(zeros({2}), 1, array(0), "wrap"); });
  EXPECT_NE(m.find("\"reflect\""), std::string::npos) << m;
}

TEST(Pad, ZeroDimEmptyAndErrors) {
  EXPECT_EQ(pad(array(3.0f), 2).item<float>(), 3.0f);
  auto e = pad(zeros({0, 2}), 1, array(5.0f));
  EXPECT_EQ(values<float>(e), std::vector<float>(8, 5.0f));
  auto a = zeros({2, 2});
  auto m = error_of([&] { pad(a, -1); });
  EXPECT_NE(m.find("[pad] padding sizes must be non-negative, got (-1, -1)"), std::string::npos)
      << m;
  m = error_of([&] { pad(a, 1, array(0), "mirror"); });
  EXPECT_NE(m.find("invalid mode \"mirror\""), std::string::npos) << m;
  m = error_of([&] { pad(a, std::vector<int>{0, 1}, Shape{1}, Shape{1}); });
  EXPECT_NE(m.find("[pad] got 2 axes"), std::string::npos) << m;
  m = error_of([&] { pad(a, std::vector<std::pair<int, int>>{{1, 1}, {1, 1}, {1, 1}}); });
  EXPECT_NE(m.find("3 (low, high) pairs"), std::string::npos) << m;
  m = error_of([&] { pad(a, 1, zeros({2})); });
  EXPECT_NE(m.find("pad_value"), std::string::npos) << m;
}

// ---- repeat / tile / roll ----

TEST(Repeat, AlongAxisAndFlattened) {
  auto a = array({1, 2, 3, 4}, {2, 2}, int32);
  EXPECT_EQ(values<int>(repeat(a, 2, 0)), (std::vector<int>{1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_EQ(values<int>(repeat(a, 2, -1)), (std::vector<int>{1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_EQ(values<int>(repeat(a, 3)),
            (std::vector<int>{1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4}));
  EXPECT_EQ(repeat(a, 0, 1).shape(), (Shape{2, 0}));
  EXPECT_EQ(values<int>(repeat(transpose(a), 2, 1)), (std::vector<int>{1, 1, 3, 3, 2, 2, 4, 4}));
  auto m = error_of([&] { repeat(a, -1, 0); });
  EXPECT_NE(m.find("[repeat] repeats must be non-negative, got -1"), std::string::npos) << m;
}

TEST(Tile, RepsShorterAndLongerThanNdim) {
  auto a = array({1, 2, 3, 4}, {2, 2}, int32);
  EXPECT_EQ(values<int>(tile(a, {2})), (std::vector<int>{1, 2, 1, 2, 3, 4, 3, 4}));
  auto t = tile(a, {2, 1, 1});
  EXPECT_EQ(t.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(values<int>(t), (std::vector<int>{1, 2, 3, 4, 1, 2, 3, 4}));
  auto u = tile(array({1, 2}, int32), {2, 2});
  EXPECT_EQ(values<int>(u), (std::vector<int>{1, 2, 1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(tile(a, {0, 1}).shape(), (Shape{0, 2}));
  EXPECT_EQ(tile(array(3), {2}).shape(), (Shape{2}));
  auto m = error_of([&] { tile(a, {-1, 2}); });
  EXPECT_NE(m.find("[tile] reps must be non-negative, got (-1,2)"), std::string::npos) << m;
}

TEST(Roll, AxisAxesAndFlattened) {
  auto a = array({0, 1, 2, 3, 4, 5}, {2, 3}, int32);
  EXPECT_EQ(values<int>(roll(a, 1)), (std::vector<int>{5, 0, 1, 2, 3, 4}));
  EXPECT_EQ(values<int>(roll(a, -2)), (std::vector<int>{2, 3, 4, 5, 0, 1}));
  EXPECT_EQ(values<int>(roll(a, 1, 1)), (std::vector<int>{2, 0, 1, 5, 3, 4}));
  EXPECT_EQ(values<int>(roll(a, 4, -1)), (std::vector<int>{2, 0, 1, 5, 3, 4}));
  EXPECT_EQ(values<int>(roll(a, 1, std::vector<int>{0, 1})),
            (std::vector<int>{5, 3, 4, 2, 0, 1}));
  EXPECT_EQ(values<int>(roll(a, Shape{1, -1}, std::vector<int>{0, 1})),
            (std::vector<int>{4, 5, 3, 1, 2, 0}));
  EXPECT_EQ(values<int>(roll(a, Shape{1, 1})), (std::vector<int>{4, 5, 0, 1, 2, 3}));
  EXPECT_EQ(values<int>(roll(a, Shape{1, 2}, 1)), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(roll(zeros({0, 3}), 2, 0).shape(), (Shape{0, 3}));
  auto m = error_of([&] { roll(a, Shape{1}, std::vector<int>{0, 1}); });
  EXPECT_NE(m.find("[roll] need one shift per axis, got 1 shifts for 2 axes"), std::string::npos)
      << m;
  m = error_of([&] { roll(a, 1, 2); });
  EXPECT_NE(m.find("[roll] axis 2"), std::string::npos) << m;
}

// ---- meshgrid / atleast ----

TEST(Meshgrid, XyAndIjIndexing) {
  auto x = array({1, 2, 3}, int32), y = array({4, 5}, int32);
  auto xy = meshgrid({x, y});
  EXPECT_EQ(xy[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(values<int>(xy[0]), (std::vector<int>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(values<int>(xy[1]), (std::vector<int>{4, 4, 4, 5, 5, 5}));
  auto ij = meshgrid({x, y}, false, "ij");
  EXPECT_EQ(ij[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(values<int>(ij[0]), (std::vector<int>{1, 1, 2, 2, 3, 3}));
  auto sp = meshgrid({x, y}, true);
  EXPECT_EQ(sp[0].shape(), (Shape{1, 3}));
  EXPECT_EQ(sp[1].shape(), (Shape{2, 1}));
  auto m = error_of([&] { meshgrid({x, y}, false, "yx"); });
  EXPECT_NE(m.find("\"yx\""), std::string::npos) << m;
}

TEST(Atleast, AddsLeadingAndTrailingDims) {
  EXPECT_EQ(atleast_1d(array(1.0f)).shape(), (Shape{1}));
  EXPECT_EQ(atleast_2d(array({1.0f, 2.0f})).shape(), (Shape{1, 2}));
  EXPECT_EQ(atleast_3d(array({1.0f, 2.0f})).shape(), (Shape{1, 2, 1}));
  EXPECT_EQ(atleast_3d(zeros({2, 3})).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(atleast_3d(zeros({2, 3, 4, 5})).shape(), (Shape{2, 3, 4, 5}));
  auto v = atleast_2d(std::vector<array>{array(1.0f), zeros({3})});
  EXPECT_EQ(v[0].shape(), (Shape{1, 1}));
  EXPECT_EQ(v[1].shape(), (Shape{1, 3}));
}

// ---- derivatives and batching (every shape op is linear: vjp is the adjoint) ----

namespace {
// <vjp(ct), t> must equal <ct, jvp(t)> for a linear op; both sides computed naively.
double dot(const array& a, const array& b) {
  auto x = values<double>(astype(a, float64)), y = values<double>(astype(b, float64));
  EXPECT_EQ(x.size(), y.size());
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

array seq(const Shape& shape, float start) {
  size_t n = 1;
  for (int d : shape) n *= d;
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + 0.5f * static_cast<float>(i * 7 % 11);
  return array(v.begin(), shape);
}

void check_adjoint(const std::function<array(const array&)>& f, const Shape& in_shape) {
  auto x = seq(in_shape, 1.0f);
  auto y = f(x);
  auto ct = seq(y.shape(), -2.0f);
  auto t = seq(in_shape, 3.0f);
  auto [out_v, g] = vjp(f, x, ct);
  auto [out_j, jt] = jvp(f, x, t);
  EXPECT_EQ(g.shape(), in_shape);
  EXPECT_EQ(jt.shape(), y.shape());
  EXPECT_NEAR(dot(g, t), dot(ct, jt), 1e-6 * (1 + std::abs(dot(ct, jt))));
  EXPECT_EQ(values<float>(out_j), values<float>(y));
}
}  // namespace

TEST(ShapeGrad, VjpIsTheAdjointOfJvpForEveryOp) {
  check_adjoint([](const array& x) { return transpose(x, {2, 0, 1}); }, {2, 3, 4});
  check_adjoint([](const array& x) { return reshape(transpose(x), {4, 6}); }, {2, 3, 4});
  check_adjoint([](const array& x) { return expand_dims(x, {0, 3}); }, {2, 3});
  check_adjoint([](const array& x) { return squeeze(x, 1); }, {2, 1, 3});
  check_adjoint([](const array& x) { return broadcast_to(x, {4, 2, 3}); }, {2, 1});
  check_adjoint([](const array& x) { return concatenate({x, transpose(x), x}, 0); }, {3, 3});
  check_adjoint([](const array& x) { return split(x, Shape{1, 3}, 1)[1]; }, {2, 5});
  check_adjoint([](const array& x) { return flip(x, 0); }, {3, 2});
  check_adjoint([](const array& x) { return pad(x, {{1, 2}, {0, 1}}, array(0.0f)); }, {2, 3});
  check_adjoint([](const array& x) { return pad(x, 1, array(0.0f), "edge"); }, {2, 3});
  check_adjoint([](const array& x) { return pad(x, {{4, 1}, {0, 2}}, array(0.0f), "reflect"); },
                {2, 3});
  check_adjoint([](const array& x) { return pad(x, 3, array(0.0f), "symmetric"); }, {2, 3});
  check_adjoint([](const array& x) { return repeat(x, 3, 1); }, {2, 3});
  check_adjoint([](const array& x) { return tile(x, {2, 1, 2}); }, {2, 3});
  check_adjoint([](const array& x) { return roll(x, 2, 1); }, {2, 3});
  check_adjoint([](const array& x) { return stack({x, x}, 1); }, {2, 3});
}

TEST(ShapeGrad, TransposeVjpUsesInversePermutation) {
  auto x = seq({2, 3, 4}, 0.0f);
  auto ct = seq({3, 4, 2}, 1.0f);
  auto [y, g] = vjp([](const array& a) { return transpose(a, {1, 2, 0}); }, x, ct);
  auto expect = transpose(ct, {2, 0, 1});
  EXPECT_EQ(g.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(values<float>(g), values<float>(expect));
}

TEST(ShapeGrad, BroadcastVjpSumsBroadcastAxes) {
  auto x = array({1.0f, 2.0f}, {2, 1});
  auto ct = array({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f},
                  {2, 2, 3});
  auto [y, g] = vjp([](const array& a) { return broadcast_to(a, {2, 2, 3}); }, x, ct);
  EXPECT_EQ(g.shape(), (Shape{2, 1}));
  // g[i] = sum over lead k and column j of ct[k][i][j].
  EXPECT_EQ(values<float>(g), (std::vector<float>{1 + 2 + 3 + 7 + 8 + 9, 4 + 5 + 6 + 10 + 11 + 12}));
}

TEST(ShapeGrad, ConcatenateVjpSplitsTheCotangent) {
  std::vector<array> xs{seq({2, 1}, 0.0f), seq({2, 3}, 1.0f)};
  auto ct = seq({2, 4}, 5.0f);
  auto [ys, gs] = vjp(
      [](const std::vector<array>& in) { return std::vector<array>{concatenate(in, 1)}; }, xs,
      {ct});
  ASSERT_EQ(gs.size(), 2u);
  auto c = values<float>(ct);
  EXPECT_EQ(values<float>(gs[0]), (std::vector<float>{c[0], c[4]}));
  EXPECT_EQ(values<float>(gs[1]), (std::vector<float>{c[1], c[2], c[3], c[5], c[6], c[7]}));
}

TEST(ShapeGrad, PadValueGetsTheBorderSum) {
  auto x = seq({2, 2}, 0.0f);
  auto v = array(0.0f);
  auto ct = seq({3, 4}, 1.0f);
  auto [ys, gs] = vjp(
      [](const std::vector<array>& in) {
        return std::vector<array>{pad(in[0], {{1, 0}, {1, 1}}, in[1])};
      },
      {x, v}, {ct});
  auto c = values<float>(ct);
  float total = 0, interior = c[5] + c[6] + c[9] + c[10];
  for (float e : c) total += e;
  EXPECT_EQ(values<float>(gs[0]), (std::vector<float>{c[5], c[6], c[9], c[10]}));
  EXPECT_NEAR(gs[1].item<float>(), total - interior, 1e-5);
}

TEST(ShapeVmap, MatchesPerExampleLoop) {
  auto xs = seq({3, 2, 4}, 0.0f);  // batch of 3
  auto check = [&](const std::function<array(const array&)>& f, int in_axis) {
    auto batched = vmap(f, in_axis, 0)(in_axis == 0 ? xs : moveaxis(xs, 0, in_axis));
    auto parts = unstack(xs, 0);
    std::vector<array> outs;
    for (auto& p : parts) outs.push_back(f(p));
    EXPECT_EQ(values<float>(batched), values<float>(stack(outs)));
  };
  for (int ax : {0, 1, 2}) {
    check([](const array& x) { return transpose(x); }, ax);
    check([](const array& x) { return reshape(x, {4, 2}); }, ax);
    check([](const array& x) { return expand_dims(x, -1); }, ax);
    check([](const array& x) { return squeeze(expand_dims(x, 1), 1); }, ax);
    check([](const array& x) { return broadcast_to(reshape(x, {2, 1, 4}), {3, 2, 5, 4}); }, ax);
    check([](const array& x) { return concatenate({x, ones({2, 1})}, 1); }, ax);
    check([](const array& x) { return split(x, 2, 1)[1]; }, ax);
    check([](const array& x) { return flip(x, 1); }, ax);
    check([](const array& x) { return pad(x, {{1, 0}, {0, 2}}, array(3.0f)); }, ax);
    check([](const array& x) { return roll(x, 1, 0); }, ax);
  }
}

// Shape arithmetic that leaves 64 bits (element count) or 32 bits (a dimension) throws
// std::overflow_error naming the shape or the op, as MLX does, instead of wrapping to a small or
// zero size that later reads out of bounds.
namespace {

template <typename F>
std::string overflow_message(F&& f) {
  try {
    f();
  } catch (const std::overflow_error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no exception";
}

}  // namespace

TEST(ShapeOverflow, CreationOfMoreElementsThan64BitsCount) {
  auto m = overflow_message([] { ones({1 << 30, 1 << 30, 1 << 30}); });
  EXPECT_NE(m.find("(1073741824, 1073741824, 1073741824)"), std::string::npos) << m;
  m = overflow_message([] { zeros({2147483647, 2147483647, 2147483647}); });
  EXPECT_NE(m.find("more elements than 64 bits"), std::string::npos) << m;
  m = overflow_message([] { broadcast_to(array(1.0f), {65536, 65536, 65536, 65536}); });
  EXPECT_NE(m.find("(65536, 65536, 65536, 65536)"), std::string::npos) << m;
  // 2^62 elements of 4 bytes: the count fits, the bytes do not.
  m = overflow_message([] { zeros({1 << 30, 1 << 30, 4}, float32); });
  EXPECT_NE(m.find("bytes"), std::string::npos) << m;
  // The largest shapes that do fit stay lazy and valid.
  auto big = zeros({1 << 30, 1 << 30}, int8);
  EXPECT_EQ(big.size(), size_t{1} << 60);
  EXPECT_EQ(big.nbytes(), size_t{1} << 60);
}

TEST(ShapeOverflow, OpsThatGrowADimensionNameTheOp) {
  const int imax = 2147483647;
  auto m = overflow_message([&] { pad(zeros({8}), {0}, Shape{imax}, Shape{imax}, array(0)); });
  EXPECT_NE(m.find("[pad]"), std::string::npos) << m;
  m = overflow_message([&] { tile(zeros({2}), {imax}); });
  EXPECT_NE(m.find("[tile]"), std::string::npos) << m;
  m = overflow_message([&] { repeat(zeros({4}), imax, 0); });
  EXPECT_NE(m.find("[repeat]"), std::string::npos) << m;
  m = overflow_message([&] { roll(zeros({4}), Shape{imax, imax}); });
  EXPECT_NE(m.find("[roll]"), std::string::npos) << m;
  m = overflow_message([&] { roll(zeros({4}), Shape{imax, imax}, 0); });
  EXPECT_NE(m.find("[roll]"), std::string::npos) << m;
  auto half = broadcast_to(array(1.0f), {1 << 30});
  m = overflow_message([&] { concatenate({half, half, half}); });
  EXPECT_NE(m.find("[concatenate]"), std::string::npos) << m;
  m = overflow_message([&] { reshape(zeros({4}), {65536, 65536, 65536, 65536, 4}); });
  EXPECT_NE(m.find("[reshape]"), std::string::npos) << m;
  // Shifts that cancel out are fine (the sum fits).
  EXPECT_EQ(values<int>(roll(arange(0, 4), Shape{imax, -imax})), (std::vector<int>{0, 1, 2, 3}));
}

// A zero-size dimension makes an empty array whatever the others are: the element count is 0,
// not an overflow of the product of the others (found by fuzzing GGUF shapes).
TEST(Shape, AZeroDimensionIsEmptyWhateverTheOthers) {
  const array a = zeros({1 << 30, 1 << 30, 1 << 30, 0});
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.nbytes(), 0u);
  eval(a);
  EXPECT_THROW(zeros({1 << 30, 1 << 30, 1 << 30, 1 << 30}), std::overflow_error);
}
