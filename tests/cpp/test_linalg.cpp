// Matrix products (matmul, addmm, inner, outer, tensordot) and linalg::norm against naive loops
// computed in double in the test.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/tessera.h"
#include "test_util.h"

using namespace tessera;

namespace {

using test_util::numel;
using test_util::random_array;
using test_util::seeded_values;
// Row-major values of any array (rounded to its dtype), read straight from its buffer.
const auto& to_vec = test_util::values;

std::vector<std::complex<double>> to_cvec(const array& x) {
  array y = copy(astype(x, complex64));
  eval(y);
  std::vector<std::complex<double>> out;
  for (size_t i = 0; i < y.size(); ++i) out.emplace_back(y.data<complex64_t>()[i]);
  return out;
}

// NumPy matmul on row-major data, computed in T (double or complex<double>).
template <typename T>
std::vector<T> naive_matmul(const std::vector<T>& a, Shape as, const std::vector<T>& b, Shape bs,
                            Shape* out_shape) {
  bool av = as.size() == 1, bv = bs.size() == 1;
  if (av) as.insert(as.begin(), 1);
  if (bv) bs.push_back(1);
  int m = as[as.size() - 2], k = as.back(), n = bs.back();
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  size_t nb = std::max(ab.size(), bb.size());
  ab.insert(ab.begin(), nb - ab.size(), 1);
  bb.insert(bb.begin(), nb - bb.size(), 1);
  Shape batch(nb);
  for (size_t i = 0; i < nb; ++i) batch[i] = std::max(ab[i], bb[i]);
  size_t nbatch = numel(batch);
  std::vector<T> out(nbatch * m * n);
  for (size_t bi = 0; bi < nbatch; ++bi) {
    size_t rem = bi, aoff = 0, boff = 0, astr = 1, bstr = 1;
    for (size_t d = nb; d-- > 0;) {
      size_t idx = rem % batch[d];
      rem /= batch[d];
      aoff += (ab[d] == 1 ? 0 : idx) * astr;
      boff += (bb[d] == 1 ? 0 : idx) * bstr;
      astr *= ab[d];
      bstr *= bb[d];
    }
    const T* ap = a.data() + aoff * m * k;
    const T* bp = b.data() + boff * k * n;
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        T acc = 0;
        for (int l = 0; l < k; ++l) acc += ap[i * k + l] * bp[l * n + j];
        out[bi * m * n + i * n + j] = acc;
      }
  }
  Shape os = batch;
  if (!av) os.push_back(m);
  if (!bv) os.push_back(n);
  *out_shape = os;
  return out;
}

double tolerance(Dtype t) {
  if (t == float16) return 1e-2;
  if (t == bfloat16) return 5e-2;
  if (t == float32 || t == complex64) return 1e-5;
  return 1e-12;
}

// Checks matmul(a, b) against the naive product of the (dtype-rounded) inputs.
void expect_matmul_matches(const array& a, const array& b, double tol) {
  Shape ref_shape;
  auto ref = naive_matmul(to_vec(a), a.shape(), to_vec(b), b.shape(), &ref_shape);
  array out = matmul(a, b);
  ASSERT_EQ(out.shape(), ref_shape) << "a " << a.shape().size() << "-d, b " << b.shape().size();
  auto got = to_vec(out);
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_NEAR(got[i], ref[i], tol * (1.0 + std::abs(ref[i]))) << "at flat index " << i;
  }
}

struct Case {
  Shape a, b;
};

const std::vector<Case> kShapes = {
    {{1, 1}, {1, 1}},       {{3, 5}, {5, 4}},       {{2, 3, 4, 5}, {5, 6}},
    {{1, 4, 5}, {3, 5, 2}}, {{5}, {5, 3}},          {{3, 5}, {5}},
    {{5}, {5}},             {{2, 3, 4}, {4}},       {{4}, {2, 4, 3}},
    {{2, 1, 3, 4}, {5, 4, 2}}, {{7, 1}, {1, 9}},    {{1, 17}, {17, 1}},
};

}  // namespace

TEST(Matmul, MatchesNaiveLoopFloat32AndFloat64) {
  for (Dtype t : {float32, float64}) {
    uint64_t seed = 1;
    for (const auto& c : kShapes) {
      SCOPED_TRACE(dtype_name(t) + " case " + std::to_string(seed));
      expect_matmul_matches(random_array(c.a, t, seed), random_array(c.b, t, seed + 100),
                            tolerance(t));
      ++seed;
    }
  }
}

TEST(Matmul, OneDimensionalOperandsDropTheirDim) {
  EXPECT_EQ(matmul(ones({5}), ones({5, 3})).shape(), (Shape{3}));
  EXPECT_EQ(matmul(ones({3, 5}), ones({5})).shape(), (Shape{3}));
  EXPECT_EQ(matmul(ones({5}), ones({5})).shape(), (Shape{}));
  EXPECT_EQ(matmul(ones({2, 3, 4}), ones({4})).shape(), (Shape{2, 3}));
  EXPECT_EQ(matmul(ones({4}), ones({2, 4, 3})).shape(), (Shape{2, 3}));
  EXPECT_FLOAT_EQ(matmul(ones({5}), ones({5})).item<float>(), 5.0f);
}

TEST(Matmul, HalfPrecisionAndComplexDtypes) {
  for (Dtype t : {float16, bfloat16}) {
    SCOPED_TRACE(dtype_name(t));
    array a = random_array({3, 4, 16}, t, 7), b = random_array({16, 5}, t, 8);
    EXPECT_EQ(matmul(a, b).dtype(), t);
    expect_matmul_matches(a, b, tolerance(t));
    expect_matmul_matches(random_array({2, 3, 8}, t, 9), random_array({2, 8, 4}, t, 10),
                          tolerance(t));
  }
  // complex64: real and imaginary parts from two real arrays.
  std::vector<complex64_t> av, bv;
  auto re = seeded_values(12, 3), im = seeded_values(12, 4), re2 = seeded_values(20, 5), im2 = seeded_values(20, 6);
  for (int i = 0; i < 12; ++i) av.emplace_back(float(re[i]), float(im[i]));
  for (int i = 0; i < 20; ++i) bv.emplace_back(float(re2[i]), float(im2[i]));
  array a(av.data(), Shape{3, 4}), b(bv.data(), Shape{4, 5});
  array out = matmul(a, b);
  EXPECT_EQ(out.dtype(), complex64);
  Shape rs;
  auto ref = naive_matmul(to_cvec(a), a.shape(), to_cvec(b), b.shape(), &rs);
  auto got = to_cvec(out);
  ASSERT_EQ(out.shape(), rs);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_LT(std::abs(got[i] - ref[i]), 1e-5);
}

TEST(Matmul, PromotesMixedDtypes) {
  EXPECT_EQ(matmul(ones({2, 2}, float16), ones({2, 2}, float32)).dtype(), float32);
  EXPECT_EQ(matmul(ones({2, 2}, bfloat16), ones({2, 2}, float16)).dtype(), float32);
  EXPECT_EQ(matmul(ones({2, 2}, float32), ones({2, 2}, float64)).dtype(), float64);
  array m = matmul(ones({2, 3}, int32), ones({3, 2}, float32));
  EXPECT_EQ(m.dtype(), float32);
  for (double v : to_vec(m)) EXPECT_EQ(v, 3.0);
}

TEST(Matmul, IntegerAndBoolInputsRaise) {
  try {
    matmul(ones({2, 2}, int32), ones({2, 2}, int32));
    FAIL() << "integer matmul must raise";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(matmul(ones({2, 2}, bool_), ones({2, 2}, uint8)), std::invalid_argument);
}

TEST(Matmul, ShapeErrorsNameTheShapes) {
  try {
    matmul(ones({3, 5}), ones({4, 2}));
    FAIL() << "mismatched inner dims must raise";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "[matmul] last dimension of a (3,5) must match the second to last of b (4,2)");
  }
  EXPECT_THROW(matmul(array(1.0f), ones({2, 2})), std::invalid_argument);
  EXPECT_THROW(matmul(ones({2, 2}), array(1.0f)), std::invalid_argument);
  try {
    matmul(ones({2, 3, 4}), ones({3, 4, 2}));
    FAIL() << "batch dims 2 and 3 must not broadcast";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "[matmul] the batch dimensions of a (2,3,4) and b (3,4,2) cannot be broadcast "
              "together");
  }
}

TEST(Matmul, EmptyInnerDimensionGivesZeros) {
  for (Dtype t : {float32, float64, float16, bfloat16, complex64}) {
    array out = matmul(ones({3, 0}, t), ones({0, 4}, t));
    EXPECT_EQ(out.shape(), (Shape{3, 4}));
    for (double v : to_vec(out)) EXPECT_EQ(v, 0.0);
  }
  EXPECT_EQ(matmul(ones({0, 5}), ones({5, 4})).shape(), (Shape{0, 4}));
  EXPECT_EQ(matmul(ones({2, 0, 3, 5}), ones({5, 4})).shape(), (Shape{2, 0, 3, 4}));
  auto z = matmul(ones({2, 3, 0}), ones({0, 4}));
  EXPECT_EQ(z.shape(), (Shape{2, 3, 4}));
  for (double v : to_vec(z)) EXPECT_EQ(v, 0.0);
}

TEST(Matmul, BroadcastViewsAsOperands) {
  // A matrix whose rows are one broadcast row (row stride 0: must be copied for BLAS).
  array row = random_array({1, 5}, float32, 21);
  expect_matmul_matches(broadcast_to(row, {4, 5}), random_array({5, 3}, float32, 22), 1e-5);
  // Batch dims that are broadcast views (stride 0) are read in place.
  array b = broadcast_to(random_array({5, 6}, float32, 23), {3, 5, 6});
  expect_matmul_matches(random_array({3, 2, 5}, float32, 24), b, 1e-5);
  // A column broadcast along the columns (column stride 0).
  array col = random_array({4, 1}, float64, 25);
  expect_matmul_matches(random_array({2, 4}, float64, 26), broadcast_to(col, {4, 3}), 1e-12);
}

TEST(Matmul, LargerAndBatchedProducts) {
  expect_matmul_matches(random_array({128, 256}, float32, 31), random_array({256, 64}, float32, 32),
                        1e-4);
  // Many small products take the batch-parallel path.
  expect_matmul_matches(random_array({64, 8, 8}, float32, 33), random_array({64, 8, 8}, float32, 34),
                        1e-5);
  expect_matmul_matches(random_array({3, 1, 33, 17}, float64, 35),
                        random_array({1, 4, 17, 9}, float64, 36), 1e-12);
}

TEST(Addmm, MatchesBetaCPlusAlphaProduct) {
  for (Dtype t : {float32, float64, float16, bfloat16}) {
    SCOPED_TRACE(dtype_name(t));
    array a = random_array({2, 3, 4}, t, 41), b = random_array({4, 5}, t, 42);
    array c = random_array({5}, t, 43);  // broadcast over rows and batch
    array out = addmm(c, a, b, 2.0f, 0.5f);
    EXPECT_EQ(out.dtype(), t);
    ASSERT_EQ(out.shape(), (Shape{2, 3, 5}));
    Shape rs;
    auto prod = naive_matmul(to_vec(a), a.shape(), to_vec(b), b.shape(), &rs);
    auto cv = to_vec(c);
    auto got = to_vec(out);
    for (size_t i = 0; i < prod.size(); ++i) {
      double ref = 2.0 * prod[i] + 0.5 * cv[i % 5];
      EXPECT_NEAR(got[i], ref, 2 * tolerance(t) * (1 + std::abs(ref)));
    }
  }
}

TEST(Addmm, VectorOperandsEmptyInnerAndErrors) {
  // (4) @ (4,3) + (3) -> (3)
  array a = random_array({4}, float64, 51), b = random_array({4, 3}, float64, 52);
  array c = random_array({3}, float64, 53);
  array out = addmm(c, a, b);
  ASSERT_EQ(out.shape(), (Shape{3}));
  Shape rs;
  auto prod = naive_matmul(to_vec(a), a.shape(), to_vec(b), b.shape(), &rs);
  auto cv = to_vec(c), got = to_vec(out);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(got[i], prod[i] + cv[i], 1e-12);
  // K == 0: beta * c.
  auto e = to_vec(addmm(full({2, 3}, 4.0f), ones({2, 0}), ones({0, 3}), 1.0f, 0.25f));
  for (double v : e) EXPECT_EQ(v, 1.0);
  EXPECT_THROW(addmm(ones({4}), ones({2, 3}), ones({3, 3})), std::invalid_argument);
  EXPECT_THROW(addmm(ones({3}, int32), ones({2, 3}, int32), ones({3, 3}, int32)),
               std::invalid_argument);
  EXPECT_THROW(addmm(ones({3}), ones({2, 3}), ones({4, 3})), std::invalid_argument);
}

TEST(Matmul, TransposedAndStridedViews) {
  for (Dtype t : {float32, float64, float16, complex64}) {
    SCOPED_TRACE(dtype_name(t));
    double tol = t == float16 ? 1e-2 : 1e-5;
    array a = random_array({5, 3}, t, 61), b = random_array({4, 5}, t, 62);
    // a.T (3,5) and b.T (5,4): column-contiguous views read as BLAS Trans.
    expect_matmul_matches(transpose(a), transpose(b), tol);
    expect_matmul_matches(transpose(a), random_array({5, 2}, t, 63), tol);
    expect_matmul_matches(random_array({2, 5}, t, 64), transpose(b), tol);
    // Batched transposes: swap the last two dims of a 3-D array.
    array ba = random_array({3, 6, 4}, t, 65), bb = random_array({3, 7, 6}, t, 66);
    expect_matmul_matches(swapaxes(ba, -1, -2), swapaxes(bb, -1, -2), tol);
    // A batch dim moved inside (non-contiguous batch strides).
    expect_matmul_matches(transpose(random_array({4, 2, 5}, t, 67), {1, 0, 2}),
                          random_array({2, 5, 3}, t, 68), tol);
    // Row pitch larger than the row: every other column, and a column block.
    array wide = random_array({4, 10}, t, 69);
    expect_matmul_matches(slice(wide, Shape{0, 0}, Shape{4, 10}, Shape{1, 2}), random_array({5, 3}, t, 70), tol);
    expect_matmul_matches(slice(wide, Shape{0, 2}, Shape{4, 7}), random_array({5, 3}, t, 71), tol);
    expect_matmul_matches(random_array({3, 4}, t, 72), slice(wide, Shape{0, 3}, Shape{4, 9}), tol);
  }
}

TEST(Matmul, GradientsMatchClosedForms) {
  array a = random_array({3, 4}, float64, 81), b = random_array({4, 2}, float64, 82);
  array ct = random_array({3, 2}, float64, 83);
  auto [outs, grads] =
      vjp([](const std::vector<array>& x) { return std::vector<array>{matmul(x[0], x[1])}; },
          {a, b}, {ct});
  // d/da = ct @ b.T, d/db = a.T @ ct.
  Shape rs;
  auto bt = to_vec(transpose(b)), at = to_vec(transpose(a)), ctv = to_vec(ct);
  auto ga = naive_matmul(ctv, ct.shape(), bt, Shape{2, 4}, &rs);
  auto gb = naive_matmul(at, Shape{4, 3}, ctv, ct.shape(), &rs);
  auto ga_got = to_vec(grads[0]), gb_got = to_vec(grads[1]);
  ASSERT_EQ(grads[0].shape(), a.shape());
  ASSERT_EQ(grads[1].shape(), b.shape());
  for (size_t i = 0; i < ga.size(); ++i) EXPECT_NEAR(ga_got[i], ga[i], 1e-12);
  for (size_t i = 0; i < gb.size(); ++i) EXPECT_NEAR(gb_got[i], gb[i], 1e-12);

  // jvp: da @ b + a @ db.
  array da = random_array({3, 4}, float64, 84), db = random_array({4, 2}, float64, 85);
  auto [o2, tan] =
      jvp([](const std::vector<array>& x) { return std::vector<array>{matmul(x[0], x[1])}; },
          {a, b}, {da, db});
  auto t1 = naive_matmul(to_vec(da), da.shape(), to_vec(b), b.shape(), &rs);
  auto t2 = naive_matmul(to_vec(a), a.shape(), to_vec(db), db.shape(), &rs);
  auto tg = to_vec(tan[0]);
  for (size_t i = 0; i < t1.size(); ++i) EXPECT_NEAR(tg[i], t1[i] + t2[i], 1e-12);
}

TEST(Matmul, GradientOfBroadcastBatchSumsOverBatch) {
  // a (2,3,4) @ b (4,5): b's gradient sums the batch: sum_b a[b].T @ ones.
  array a = random_array({2, 3, 4}, float64, 86), b = random_array({4, 5}, float64, 87);
  auto g = grad([](const std::vector<array>& x) { return sum(matmul(x[0], x[1])); }, 1)({a, b});
  ASSERT_EQ(g[0].shape(), b.shape());
  auto av = to_vec(a), gv = to_vec(g[0]);
  for (int k = 0; k < 4; ++k) {
    double rowsum = 0;
    for (int bt = 0; bt < 2; ++bt)
      for (int i = 0; i < 3; ++i) rowsum += av[bt * 12 + i * 4 + k];
    for (int j = 0; j < 5; ++j) EXPECT_NEAR(gv[k * 5 + j], rowsum, 1e-12);
  }
  // The same with b carrying a broadcast batch dim of 1 (the batched path).
  array b3 = reshape(b, {1, 4, 5});
  auto g3 = grad([](const std::vector<array>& x) { return sum(matmul(x[0], x[1])); }, 1)({a, b3});
  ASSERT_EQ(g3[0].shape(), b3.shape());
  auto g3v = to_vec(g3[0]);
  for (size_t i = 0; i < gv.size(); ++i) EXPECT_NEAR(g3v[i], gv[i], 1e-12);
}

TEST(Matmul, VmapOverEitherOperand) {
  array a = random_array({6, 3, 4}, float32, 88), b = random_array({4, 2}, float32, 89);
  auto f = vmap([](const array& x, const array& y) { return matmul(x, y); }, 0, -1);
  array out = f(a, b);
  expect_matmul_matches(a, b, 1e-5);
  Shape rs;
  auto ref = naive_matmul(to_vec(a), a.shape(), to_vec(b), b.shape(), &rs);
  ASSERT_EQ(out.shape(), rs);
  auto got = to_vec(out);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-5);
  // Batched along axis 1 of b.
  array bb = random_array({4, 6, 2}, float32, 90);
  array a2 = random_array({3, 4}, float32, 91);
  array out2 = vmap([](const array& x, const array& y) { return matmul(x, y); }, -1, 1)(a2, bb);
  ASSERT_EQ(out2.shape(), (Shape{6, 3, 2}));
  auto bbv = to_vec(bb), a2v = to_vec(a2), g2 = to_vec(out2);
  for (int n = 0; n < 6; ++n)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2; ++j) {
        double acc = 0;
        for (int k = 0; k < 4; ++k) acc += a2v[i * 4 + k] * bbv[k * 12 + n * 2 + j];
        EXPECT_NEAR(g2[n * 6 + i * 2 + j], acc, 1e-5);
      }
}

TEST(Addmm, GradientsScaleByAlphaAndBeta) {
  array c = random_array({3, 2}, float64, 92), a = random_array({3, 4}, float64, 93);
  array b = random_array({4, 2}, float64, 94);
  auto f = [](const std::vector<array>& x) {
    return std::vector<array>{addmm(x[0], x[1], x[2], 3.0f, -2.0f)};
  };
  array ct = ones({3, 2}, float64);
  auto [o, g] = vjp(f, {c, a, b}, {ct});
  for (double v : to_vec(g[0])) EXPECT_NEAR(v, -2.0, 1e-12);
  // d/da = 3 * ones @ b.T: each entry is 3 * sum_j b[k, j].
  auto bv = to_vec(b), gav = to_vec(g[1]);
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(gav[i * 4 + k], 3.0 * (bv[k * 2] + bv[k * 2 + 1]), 1e-12);
  ASSERT_EQ(g[2].shape(), b.shape());
}

TEST(Tensordot, ContractsNamedAxesAndTrailingAxes) {
  array a = random_array({3, 4, 5}, float64, 101), b = random_array({4, 5, 2}, float64, 102);
  array out = tensordot(a, b);  // axis = 2
  ASSERT_EQ(out.shape(), (Shape{3, 2}));
  auto av = to_vec(a), bv = to_vec(b), ov = to_vec(out);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      double acc = 0;
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 5; ++l) acc += av[i * 20 + k * 5 + l] * bv[k * 10 + l * 2 + j];
      EXPECT_NEAR(ov[i * 2 + j], acc, 1e-12);
    }
  // Contract a's axis 0 with c's axis 1: out[k, l, m] = sum_i a[i, k, l] * c[m, i].
  array c = random_array({2, 3}, float64, 103);
  array o2 = tensordot(a, c, {0}, {1});
  ASSERT_EQ(o2.shape(), (Shape{4, 5, 2}));
  auto cv = to_vec(c), o2v = to_vec(o2);
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < 5; ++l)
      for (int m = 0; m < 2; ++m) {
        double acc = 0;
        for (int i = 0; i < 3; ++i) acc += av[i * 20 + k * 5 + l] * cv[m * 3 + i];
        EXPECT_NEAR(o2v[(k * 5 + l) * 2 + m], acc, 1e-12);
      }
  EXPECT_EQ(tensordot(a, b, 0).shape(), (Shape{3, 4, 5, 4, 5, 2}));
  EXPECT_THROW(tensordot(a, b, {0}, {0}), std::invalid_argument);  // 3 vs 4
  EXPECT_THROW(tensordot(a, b, {0, 1}, {0}), std::invalid_argument);
  EXPECT_THROW(tensordot(a, b, 4), std::invalid_argument);
  EXPECT_THROW(tensordot(a, b, -1), std::invalid_argument);
}

TEST(InnerOuter, MatchNaiveLoops) {
  array a = random_array({2, 3}, float32, 111), b = random_array({4, 3}, float32, 112);
  array in = inner(a, b);
  ASSERT_EQ(in.shape(), (Shape{2, 4}));
  auto av = to_vec(a), bv = to_vec(b), iv = to_vec(in);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      double acc = 0;
      for (int k = 0; k < 3; ++k) acc += av[i * 3 + k] * bv[j * 3 + k];
      EXPECT_NEAR(iv[i * 4 + j], acc, 1e-5);
    }
  EXPECT_FLOAT_EQ(inner(array({1.0f, 2.0f, 3.0f}), array({4.0f, 5.0f, 6.0f})).item<float>(), 32.0f);
  EXPECT_FLOAT_EQ(inner(array(2.0f), array(3.0f)).item<float>(), 6.0f);
  EXPECT_THROW(inner(a, random_array({3, 2}, float32, 1)), std::invalid_argument);

  array o = outer(array({1.0f, 2.0f}), a);  // b is flattened: (2, 6)
  ASSERT_EQ(o.shape(), (Shape{2, 6}));
  auto ov = to_vec(o);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_NEAR(ov[i * 6 + j], (i + 1) * av[j], 1e-6);
  EXPECT_EQ(outer(ones({3}, int32), ones({2}, int32)).dtype(), int32);
}

TEST(Norm, VectorNorms) {
  array v = array({3.0f, -4.0f, 0.0f, 1.0f});
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_NEAR(linalg::norm(v).item<float>(), std::sqrt(26.0), 1e-5);
  EXPECT_NEAR(linalg::norm(v, 2.0).item<float>(), std::sqrt(26.0), 1e-5);
  EXPECT_NEAR(linalg::norm(v, 1.0).item<float>(), 8.0, 1e-6);
  EXPECT_NEAR(linalg::norm(v, inf).item<float>(), 4.0, 1e-6);
  EXPECT_NEAR(linalg::norm(v, -inf).item<float>(), 0.0, 1e-6);
  EXPECT_NEAR(linalg::norm(v, 0.0).item<float>(), 3.0, 1e-6);
  EXPECT_NEAR(linalg::norm(v, 3.0).item<float>(), std::cbrt(27.0 + 64.0 + 1.0), 1e-4);
  // Integers promote to float32.
  array iv = array({3, 4}, int32);
  EXPECT_EQ(linalg::norm(iv).dtype(), float32);
  EXPECT_NEAR(linalg::norm(iv).item<float>(), 5.0, 1e-6);
  EXPECT_EQ(linalg::norm(iv, 1.0).dtype(), float32);
  // No axis: flatten everything, keepdims keeps the rank.
  array m = reshape(arange(6.0f), {2, 3});
  EXPECT_NEAR(linalg::norm(m).item<float>(), std::sqrt(55.0), 1e-5);
  EXPECT_EQ(linalg::norm(m, std::nullopt, true).shape(), (Shape{1, 1}));
  // Along one axis.
  array rows = linalg::norm(m, 1);
  ASSERT_EQ(rows.shape(), (Shape{2}));
  auto rv = to_vec(rows);
  EXPECT_NEAR(rv[0], std::sqrt(5.0), 1e-5);
  EXPECT_NEAR(rv[1], std::sqrt(50.0), 1e-5);
  EXPECT_EQ(linalg::norm(m, 2.0, 0, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(linalg::norm(m, 2.0, -1).shape(), (Shape{2}));
}

TEST(Norm, MatrixNorms) {
  // [[1, -2, 3], [-4, 5, -6]]: column abs sums 5, 7, 9; row abs sums 6, 15.
  array m = array({1.0, -2.0, 3.0, -4.0, 5.0, -6.0}, Shape{2, 3}, float64);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_DOUBLE_EQ(linalg::norm(m, 1.0).item<double>(), 9.0);
  EXPECT_DOUBLE_EQ(linalg::norm(m, -1.0).item<double>(), 5.0);
  EXPECT_DOUBLE_EQ(linalg::norm(m, inf).item<double>(), 15.0);
  EXPECT_DOUBLE_EQ(linalg::norm(m, -inf).item<double>(), 6.0);
  EXPECT_NEAR(linalg::norm(m, "fro").item<double>(), std::sqrt(91.0), 1e-12);
  // Swapped axes transpose the roles.
  EXPECT_DOUBLE_EQ(linalg::norm(m, 1.0, std::vector<int>{1, 0}).item<double>(), 15.0);
  EXPECT_DOUBLE_EQ(linalg::norm(m, inf, std::vector<int>{1, 0}).item<double>(), 9.0);
  EXPECT_EQ(linalg::norm(m, 1.0, std::vector<int>{0, 1}, true).shape(), (Shape{1, 1}));
  // A batch of matrices.
  array batch = stack({m, multiply(m, array(2.0))});
  array n1 = linalg::norm(batch, 1.0, std::vector<int>{1, 2});
  ASSERT_EQ(n1.shape(), (Shape{2}));
  auto nv = to_vec(n1);
  EXPECT_DOUBLE_EQ(nv[0], 9.0);
  EXPECT_DOUBLE_EQ(nv[1], 18.0);
  // The singular values in closed form: the eigenvalues of m m^T = [[14, -32], [-32, 77]] are
  // (91 +- sqrt(8065)) / 2.
  const double s_hi = std::sqrt((91.0 + std::sqrt(8065.0)) / 2), s_lo = std::sqrt((91.0 - std::sqrt(8065.0)) / 2);
  EXPECT_NEAR(linalg::norm(m, 2.0).item<double>(), s_hi, 1e-12);
  EXPECT_NEAR(linalg::norm(m, -2.0).item<double>(), s_lo, 1e-12);
  EXPECT_NEAR(linalg::norm(m, "nuc").item<double>(), s_hi + s_lo, 1e-12);
  // Errors.
  EXPECT_THROW(linalg::norm(m, "fro", 0), std::invalid_argument);
  EXPECT_THROW(linalg::norm(m, "bad"), std::invalid_argument);
  EXPECT_THROW(linalg::norm(ones({2, 2, 2}), 1.0), std::invalid_argument);
  EXPECT_THROW(linalg::norm(ones({2, 2, 2}), std::vector<int>{0, 1, 2}), std::invalid_argument);
}

TEST(Addmm, VmapAndNonContiguousOperands) {
  // vmap over a's axis 0; c and b shared.
  array a = random_array({5, 3, 4}, float32, 121), b = random_array({4, 2}, float32, 122);
  array c = random_array({3, 2}, float32, 123);
  array out = vmap([&](const array& x) { return addmm(c, x, b, 1.5f, 2.0f); })(a);
  ASSERT_EQ(out.shape(), (Shape{5, 3, 2}));
  Shape rs;
  auto prod = naive_matmul(to_vec(a), a.shape(), to_vec(b), b.shape(), &rs);
  auto cv = to_vec(c), got = to_vec(out);
  for (size_t i = 0; i < prod.size(); ++i) EXPECT_NEAR(got[i], 1.5 * prod[i] + 2.0 * cv[i % 6], 1e-5);
  // Transposed a and b, c a transposed view.
  array at = random_array({4, 3}, float64, 124), bt = random_array({2, 4}, float64, 125);
  array ct = random_array({2, 3}, float64, 126);
  array o2 = addmm(transpose(ct), transpose(at), transpose(bt), 1.0f, -1.0f);
  auto p2 = naive_matmul(to_vec(transpose(at)), Shape{3, 4}, to_vec(transpose(bt)), Shape{4, 2}, &rs);
  auto c2 = to_vec(transpose(ct)), g2 = to_vec(o2);
  for (size_t i = 0; i < p2.size(); ++i) EXPECT_NEAR(g2[i], p2[i] - c2[i], 1e-12);
}

TEST(Matmul, ComplexGradientUsesTheConjugateTranspose) {
  // vjp w.r.t. a of a @ b is ct @ conj(b)^T.
  std::vector<complex64_t> bv{{1, 2}, {0, -1}, {3, 0.5f}, {-2, 1}, {0.5f, 0.5f}, {1, -3}};
  array b(bv.data(), Shape{2, 3});
  std::vector<complex64_t> av{{1, 0}, {2, 1}, {0, 1}, {-1, -1}};
  array a(av.data(), Shape{2, 2});
  std::vector<complex64_t> cv{{1, 1}, {0, 2}, {1, 0}, {2, -1}, {0, 0}, {1, 1}};
  array ct(cv.data(), Shape{2, 3});
  auto [o, g] = vjp([](const std::vector<array>& x) { return std::vector<array>{matmul(x[0], x[1])}; },
                    {a, b}, {ct});
  array ga = copy(g[0]);
  eval(ga);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 2; ++k) {
      std::complex<float> ref = 0;
      for (int j = 0; j < 3; ++j) ref += cv[i * 3 + j] * std::conj(bv[k * 3 + j]);
      EXPECT_LT(std::abs(ga.data<complex64_t>()[i * 2 + k] - ref), 1e-5) << i << "," << k;
    }
}

// The factorizations reconstruct their input, batched over enough matrices to spread over the
// pool, and fail on the matrix that cannot be factored with its batch index.
TEST(Factorizations, ReconstructBatchedMatrices) {
  const int n = 6;
  array a = random_array({9, n, n}, float64, 500);
  auto [q, r] = linalg::qr(a);
  auto usv = linalg::svd(a);
  array usvt = matmul(multiply(usv[0], expand_dims(usv[1], -2)), usv[2]);
  array eye_n = identity(n, float64);
  array spd = add(matmul(a, swapaxes(a, -1, -2)), multiply(array(double(n)), eye_n));
  array l = linalg::cholesky(spd);
  auto [w, v] = linalg::eigh(spd);
  array b = random_array({9, n, 2}, float64, 501);
  array x = linalg::solve(a, b);
  const std::vector<double> av = to_vec(a), spdv = to_vec(spd), bv = to_vec(b);
  auto expect_close = [](const std::vector<double>& got, const std::vector<double>& want, double tol) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << i;
  };
  expect_close(to_vec(matmul(q, r)), av, 1e-12);
  expect_close(to_vec(usvt), av, 1e-12);
  expect_close(to_vec(matmul(l, swapaxes(l, -1, -2))), spdv, 1e-11);
  expect_close(to_vec(matmul(spd, v)), to_vec(multiply(v, expand_dims(w, -2))), 1e-10);
  expect_close(to_vec(matmul(a, x)), bv, 1e-11);
  expect_close(to_vec(matmul(a, linalg::inv(a))), to_vec(broadcast_to(eye_n, {9, n, n})), 1e-11);
}

TEST(Factorizations, ASingularMatrixInTheBatchIsNamed) {
  array a = random_array({4, 3, 3}, float32, 502);
  array singular = slice_update(a, zeros({1, 3, 3}), {2, 0, 0}, {3, 3, 3});
  try {
    eval(linalg::inv(singular));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("matrix 2 of the batch is singular"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(linalg::cholesky(ones({2, 3})), std::invalid_argument);
  EXPECT_THROW(linalg::qr(ones({3}, int32)), std::invalid_argument);
}
