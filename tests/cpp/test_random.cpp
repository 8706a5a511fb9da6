// The random family: Threefry-2x32, RandomBits' layout, keys, splitting and distributions.
// Reference values marked "MLX 0.32.4" were produced by MLX 0.32.4 (pip mlx[cpu], CPU backend)
// through its C++ API (mlx::core::random) with the same keys and arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "../../src/backend/cpu/threefry.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

template <typename T>
std::vector<T> values(array a) {
  a = copy(a);  // row-contiguous
  a.eval();
  std::vector<T> v(a.size());
  // Read through the element type of the same size (bit patterns of floats compare exactly).
  EXPECT_EQ(sizeof(T), a.itemsize());
  const T* p = static_cast<const T*>(a.raw_data());
  for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  return v;
}

}  // namespace

// Known-answer vectors of Threefry-2x32-20 from the Random123 distribution (kat_vectors lines
// "threefry2x32 20 ctr0 ctr1 key0 key1 out0 out1").
TEST(Threefry, Random123KnownAnswers) {
  auto r = cpu::threefry2x32(0u, 0u, 0u, 0u);
  EXPECT_EQ(r.first, 0x6b200159u);
  EXPECT_EQ(r.second, 0x99ba4efeu);
  r = cpu::threefry2x32(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(r.first, 0x1cb996fcu);
  EXPECT_EQ(r.second, 0xbb002be7u);
  r = cpu::threefry2x32(0x13198a2eu, 0x03707344u, 0x243f6a88u, 0x85a308d3u);
  EXPECT_EQ(r.first, 0xc4923a9cu);
  EXPECT_EQ(r.second, 0x483df7a0u);
}

TEST(RandomKey, SplitsSeedIntoHighAndLowWords) {
  EXPECT_EQ(values<uint32_t>(random::key(0)), (std::vector<uint32_t>{0, 0}));
  EXPECT_EQ(values<uint32_t>(random::key((1ull << 32) | 5)), (std::vector<uint32_t>{1, 5}));
  auto k = random::key(7);
  EXPECT_EQ(k.dtype(), uint32);
  EXPECT_EQ(k.shape(), Shape{2});
}

TEST(RandomBits, Width4MatchesMLX) {
  // MLX 0.32.4: bits({n}, 4, key(7)).
  auto k = random::key(7);
  EXPECT_EQ(values<uint32_t>(random::bits({1}, 4, k)), (std::vector<uint32_t>{3625411723u}));
  EXPECT_EQ(values<uint32_t>(random::bits({2}, 4, k)),
            (std::vector<uint32_t>{195045567u, 4062205631u}));
  EXPECT_EQ(values<uint32_t>(random::bits({3}, 4, k)),
            (std::vector<uint32_t>{966301609u, 1830345032u, 1948237315u}));
  EXPECT_EQ(values<uint32_t>(random::bits({4}, k)),
            (std::vector<uint32_t>{966301609u, 989289821u, 1948237315u, 1058547403u}));
  EXPECT_EQ(values<uint32_t>(random::bits({5}, 4, k)),
            (std::vector<uint32_t>{276534068u, 861967409u, 2793701230u, 1641862660u,
                                   2900896126u}));
  EXPECT_EQ(values<uint32_t>(random::bits({7}, 4, k)),
            (std::vector<uint32_t>{51277378u, 1628829261u, 1440439266u, 2614294787u,
                                   3088387524u, 4291721531u, 3731608162u}));
  EXPECT_EQ(values<uint32_t>(random::bits({8}, 4, k)),
            (std::vector<uint32_t>{51277378u, 1628829261u, 1440439266u, 395909871u, 3088387524u,
                                   4291721531u, 3731608162u, 3705585371u}));
  EXPECT_EQ(values<uint32_t>(random::bits({2, 3}, 4, random::key(42))),
            (std::vector<uint32_t>{3134548294u, 3733159049u, 3746501087u, 894150801u,
                                   801545058u, 2363201431u}));
  EXPECT_EQ(values<uint32_t>(random::bits({6}, 4, random::key(0xdeadbeefcafeull))),
            (std::vector<uint32_t>{1919922099u, 776938076u, 1281927542u, 59289606u, 1724820892u,
                                   1175808853u}));
}

TEST(RandomBits, Width2MatchesMLX) {
  // MLX 0.32.4: bits({n}, 2, key(7)); odd byte counts end in a cut-short word.
  auto k = random::key(7);
  auto b = [&](int n) { return values<uint16_t>(random::bits({n}, 2, k)); };
  EXPECT_EQ(random::bits({3}, 2, k).dtype(), uint16);
  EXPECT_EQ(b(1), (std::vector<uint16_t>{25739}));
  EXPECT_EQ(b(2), (std::vector<uint16_t>{25739, 55319}));
  EXPECT_EQ(b(3), (std::vector<uint16_t>{10431, 2976, 22207}));
  EXPECT_EQ(b(4), (std::vector<uint16_t>{10431, 2976, 22207, 61984}));
  EXPECT_EQ(b(5), (std::vector<uint16_t>{38825, 14744, 55624, 27928, 48643}));
  EXPECT_EQ(b(6), (std::vector<uint16_t>{38825, 14744, 55624, 27928, 48643, 29727}));
  EXPECT_EQ(b(7), (std::vector<uint16_t>{38825, 14744, 23901, 15095, 48643, 29727, 9931}));
  EXPECT_EQ(b(9), (std::vector<uint16_t>{37684, 4219, 37937, 13152, 32622, 42628, 54788, 25052,
                                         10622}));
  EXPECT_EQ(b(13), (std::vector<uint16_t>{28226, 782, 63053, 24853, 23522, 21979, 63747, 39890,
                                          3524, 47125, 31035, 65486, 53858}));
}

TEST(RandomBits, Width1MatchesMLX) {
  // MLX 0.32.4: bits({n}, 1, key(7)).
  auto k = random::key(7);
  auto b = [&](int n) { return values<uint8_t>(random::bits({n}, 1, k)); };
  EXPECT_EQ(random::bits({3}, 1, k).dtype(), uint8);
  EXPECT_EQ(b(1), (std::vector<uint8_t>{139}));
  EXPECT_EQ(b(3), (std::vector<uint8_t>{139, 100, 23}));
  EXPECT_EQ(b(4), (std::vector<uint8_t>{139, 100, 23, 216}));
  EXPECT_EQ(b(5), (std::vector<uint8_t>{191, 40, 160, 11, 191}));
  EXPECT_EQ(b(8), (std::vector<uint8_t>{191, 40, 160, 11, 191, 86, 32, 242}));
  EXPECT_EQ(b(9), (std::vector<uint8_t>{169, 151, 152, 57, 72, 217, 24, 109, 3}));
  EXPECT_EQ(b(13), (std::vector<uint8_t>{169, 151, 152, 57, 93, 93, 247, 58, 3, 190, 31, 116,
                                         203}));
  EXPECT_EQ(b(17), (std::vector<uint8_t>{52, 147, 123, 16, 49, 148, 96, 51, 110, 127, 132, 166,
                                         4, 214, 220, 97, 126}));
}

TEST(RandomBits, EmptyAndScalarShapes) {
  auto e = random::bits({0}, 4, random::key(7));
  EXPECT_EQ(e.shape(), Shape{0});
  EXPECT_TRUE(values<uint32_t>(e).empty());
  auto e2 = random::bits({3, 0}, 1, random::key(7));
  EXPECT_EQ(values<uint8_t>(e2).size(), 0u);
  // A 0-d request draws one word, the same as shape (1).
  auto s = random::bits({}, 4, random::key(7));
  EXPECT_EQ(s.ndim(), 0u);
  EXPECT_EQ(s.item<uint32_t>(), 3625411723u);
}

TEST(RandomBits, LargeOutputAgreesWithScalarThreefry) {
  // Exercise the threaded path against a direct evaluation of the documented layout.
  const int n = 1 << 18;
  auto v = values<uint32_t>(random::bits({n}, 4, random::key(99)));
  const uint32_t half = n / 2;
  for (uint32_t i : {0u, 1u, 4095u, 4096u, 70000u, half - 1}) {
    auto r = cpu::threefry2x32(0u, 99u, i, half + i);
    EXPECT_EQ(v[i], r.first) << i;
    EXPECT_EQ(v[half + i], r.second) << i;
  }
  // Odd word count: the middle word comes from counter (half, 0).
  const int m = (1 << 17) + 1;
  auto w = values<uint32_t>(random::bits({m}, 4, random::key(99)));
  EXPECT_EQ(w[m / 2], cpu::threefry2x32(0u, 99u, m / 2, 0u).first);
  EXPECT_EQ(w[m - 1], cpu::threefry2x32(0u, 99u, m / 2 - 1, m - 1).second);
}

TEST(RandomBits, SameKeySameBitsDifferentKeyDifferentBits) {
  auto a = values<uint32_t>(random::bits({64}, random::key(3)));
  auto b = values<uint32_t>(random::bits({64}, random::key(3)));
  auto c = values<uint32_t>(random::bits({64}, random::key(4)));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(RandomBits, BadArgumentsNameTheValues) {
  auto expect_msg = [](auto f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no throw, expected: " << part;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_msg([] { random::bits({2, -3}, 4, random::key(0)); }, "(2,-3)");
  expect_msg([] { random::bits({2}, 3, random::key(0)); }, "got 3");
  expect_msg([] { random::bits({2}, 4, array({1.0f, 2.0f})); }, "float32");
  expect_msg([] { random::bits({2}, 4, array({1u, 2u, 3u})); }, "(3)");
  expect_msg([] { random::split(array({1, 2}, int32), 3); }, "int32");
  expect_msg([] { random::split(random::key(0), -1); }, "-1");
}

TEST(RandomSplit, NumKeysMatchesMLX) {
  // MLX 0.32.4: split(key(0), 2) and split(key(0), 3).
  auto k2 = random::split(random::key(0), 2);
  EXPECT_EQ(k2.shape(), (Shape{2, 2}));
  EXPECT_EQ(values<uint32_t>(k2),
            (std::vector<uint32_t>{4146024105u, 967050713u, 2718843009u, 1272950319u}));
  EXPECT_EQ(values<uint32_t>(random::split(random::key(0), 3)),
            (std::vector<uint32_t>{2467461003u, 428148500u, 3186719485u, 3840466878u,
                                   2562233961u, 1946702221u}));
}

// ---- keys: the pair split, the implicit sequence, odd key layouts ----

TEST(RandomSplit, PairMatchesMLX) {
  // MLX 0.32.4: split(key(123)).
  auto [a, b] = random::split(random::key(123));
  EXPECT_EQ(a.shape(), Shape{2});
  EXPECT_EQ(values<uint32_t>(a), (std::vector<uint32_t>{1896456402u, 17229315u}));
  EXPECT_EQ(values<uint32_t>(b), (std::vector<uint32_t>{4081828428u, 1707601653u}));
}

TEST(RandomSeed, ReseedingRepeatsTheImplicitSequence) {
  random::seed(3);
  float a = random::uniform({}).item<float>();
  float b = random::uniform({}).item<float>();
  random::seed(3);
  EXPECT_EQ(random::uniform({}).item<float>(), a);
  EXPECT_EQ(random::uniform({}).item<float>(), b);
  EXPECT_NE(a, b);
  // The implicit key after seed(s) is the second half of split(key(s)).
  random::seed(11);
  auto implicit = values<uint32_t>(random::bits({4}));
  auto explicit_ = values<uint32_t>(random::bits({4}, random::split(random::key(11)).second));
  EXPECT_EQ(implicit, explicit_);
}

TEST(RandomBits, BroadcastKeyIsReadThroughItsStrides) {
  // A key with stride 0 (broadcast) must give the bits of the dense key with the same words.
  auto k = broadcast_to(array(5u), {2});
  EXPECT_EQ(values<uint32_t>(random::bits({5}, 4, k)),
            values<uint32_t>(random::bits({5}, 4, array({5u, 5u}))));
}

TEST(RandomBits, VmapOverKeysMatchesMLX) {
  // MLX 0.32.4: vmap(lambda k: bits({5}, 4, k))(split(key(9), 3)).
  auto keys = random::split(random::key(9), 3);
  auto f = vmap([](const array& k) { return random::bits({5}, 4, k); });
  auto out = f(keys);
  EXPECT_EQ(out.shape(), (Shape{3, 5}));
  EXPECT_EQ(values<uint32_t>(out),
            (std::vector<uint32_t>{1811508042u, 891610508u, 3707389324u, 1117061140u,
                                   2457990916u, 3961923140u, 3774963766u, 1569804553u,
                                   1201622964u, 1607885443u, 2721765590u, 349222849u,
                                   2387068217u, 601047502u, 855250196u}));
}

// ---- distributions against MLX (bit patterns of the results) ----

TEST(RandomUniform, Float32MatchesMLX) {
  auto u = random::uniform({6}, float32, random::key(0));
  EXPECT_EQ(u.dtype(), float32);
  EXPECT_EQ(values<uint32_t>(u), (std::vector<uint32_t>{0x3f131278, 0x3dcc2839, 0x3f3df17b,
                                                        0x3f64e8e0, 0x3f18b896, 0x3ee810a3}));
  EXPECT_EQ(values<uint32_t>(random::uniform(-3.0f, 5.0f, {5}, float32, random::key(1))),
            (std::vector<uint32_t>{0x40695dd0, 0xbfd5f95d, 0x3f261e28, 0x400928b0, 0x3fc64d40}));
  // Bounds broadcast against the shape.
  EXPECT_EQ(values<uint32_t>(random::uniform(array({0.f, 10.f}), array({1.f, 20.f}), {2, 2},
                                             float32, random::key(1))),
            (std::vector<uint32_t>{0x3f118ca9, 0x415397cd, 0x3f63ab1c, 0x416b787a}));
  // low > high is not an error: samples lie in (high, low].
  EXPECT_EQ(values<uint32_t>(random::uniform(5.0f, -3.0f, {3}, float32, random::key(1))),
            (std::vector<uint32_t>{0x3ee73570, 0x403b9848, 0xc0075638}));
}

TEST(RandomUniform, HalfTypesMatchMLX) {
  auto h = random::uniform({6}, float16, random::key(0));
  EXPECT_EQ(h.dtype(), float16);
  EXPECT_EQ(values<uint16_t>(h),
            (std::vector<uint16_t>{0x3899, 0x2e61, 0x39f0, 0x3b27, 0x38c6, 0x3741}));
  auto b = random::uniform({6}, bfloat16, random::key(0));
  EXPECT_EQ(b.dtype(), bfloat16);
  EXPECT_EQ(values<uint16_t>(b),
            (std::vector<uint16_t>{0x3f13, 0x3dcc, 0x3f3e, 0x3f65, 0x3f19, 0x3ee8}));
}

namespace {
// |a - b| in units in the last place, for float32 / 16-bit patterns of the same sign.
template <typename U>
std::vector<int64_t> ulp_diff(const std::vector<U>& a, const std::vector<U>& b) {
  std::vector<int64_t> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    d[i] = std::abs(static_cast<int64_t>(a[i]) - static_cast<int64_t>(b[i]));
  }
  return d;
}
template <typename U>
void expect_within_ulps(const std::vector<U>& got, const std::vector<U>& want, int64_t ulps) {
  ASSERT_EQ(got.size(), want.size());
  auto d = ulp_diff(got, want);
  for (size_t i = 0; i < d.size(); ++i) EXPECT_LE(d[i], ulps) << "element " << i;
}

// MLX 0.32.4 (CPU, Linux): erfinv and erf of {0.3, -0.7, 0.95, 0.001}.
const std::vector<uint32_t> kMlxErfinv{0x3e8b803d, 0xbf3b9d4d, 0x3fb1654b, 0x3a6851b3};
const std::vector<uint32_t> kMlxErf{0x3ea841c2, 0xbf2d8460, 0x3f5225e4, 0x3a93e72e};
bool op_matches_mlx(array (*op)(const array&, StreamOrDevice), const std::vector<uint32_t>& want) {
  return values<uint32_t>(op(array({0.3f, -0.7f, 0.95f, 0.001f}), {})) == want;
}

// MLX 0.32.4: normal(...) with key(0).
const std::vector<uint32_t> kNormal6{0x3e405a38, 0xbfa4448e, 0x3f264047,
                                     0x3f9fe132, 0x3e7a5659, 0xbdf08952};
const std::vector<uint32_t> kNormalLoc2Scale3{0x40ee5828, 0xbe8780c0, 0x4041423c, 0x3eca7e30};
const std::vector<uint16_t> kNormalF16{0x3f43, 0xba0a, 0x3570, 0xb847};
const std::vector<uint16_t> kNormalBf16{0x3fe8, 0xbf42, 0x3eae, 0xbf09};
const std::vector<uint32_t> kNormalC64{0x3e080382, 0xbf684f4b, 0x3eeb1d53,
                                       0x3f621aa0, 0x3e3103e4, 0xbdaa15be};
// MLX 0.32.4: truncated_normal(-1, 2, {6}, float32, key(2)).
const std::vector<uint32_t> kTruncNormal{0x3d33d1a8, 0x3fbcb15c, 0x3f23bbaf,
                                         0x3ea1d064, 0xbe9a0653, 0x3fc67b6b};
}  // namespace

// normal = sqrt(2) * erfinv(U(-1, 1)): the uniform input is bit-identical to MLX's.
TEST(RandomNormal, UniformInputMatchesMLX) {
  auto u = random::uniform(array(std::nextafter(-1.0f, 0.0f)), array(1.0f), {6}, float32,
                           random::key(0));
  EXPECT_EQ(values<uint32_t>(u), (std::vector<uint32_t>{0x3e1893c4, 0xbf4cf5f1, 0x3ef7c5ee,
                                                        0x3f49d1c1, 0x3e45c4b4, 0xbdbf7ae0}));
}

// Within a few ulps of MLX whatever erfinv's algorithm; shapes and dtypes as MLX.
TEST(RandomNormal, CloseToMLX) {
  expect_within_ulps(values<uint32_t>(random::normal({6}, random::key(0))), kNormal6, 8);
  expect_within_ulps(values<uint32_t>(random::normal({4}, 2.0f, 3.0f, random::key(0))),
                     kNormalLoc2Scale3, 8);
  expect_within_ulps(values<uint16_t>(random::normal({4}, float16, random::key(0))), kNormalF16,
                     1);
  expect_within_ulps(values<uint16_t>(random::normal({4}, bfloat16, random::key(0))),
                     kNormalBf16, 1);
  auto c = random::normal({3}, complex64, random::key(0));
  EXPECT_EQ(c.dtype(), complex64);
  EXPECT_EQ(c.shape(), Shape{3});
  expect_within_ulps(values<uint32_t>(view(c, uint32)), kNormalC64, 8);
  auto d = random::normal({3}, float64, random::key(0));
  EXPECT_EQ(d.dtype(), float64);
}

// Bit-identical: tessera::erfinv computes MLX's CPU erfinv (fma polynomial in log(1 - x^2)).
TEST(RandomNormal, BitIdenticalToMLX) {
  ASSERT_TRUE(op_matches_mlx(&erfinv, kMlxErfinv)) << "tessera::erfinv differs from MLX's";
  EXPECT_EQ(values<uint32_t>(random::normal({6}, random::key(0))), kNormal6);
  EXPECT_EQ(values<uint32_t>(random::normal({4}, 2.0f, 3.0f, random::key(0))), kNormalLoc2Scale3);
  EXPECT_EQ(values<uint16_t>(random::normal({4}, float16, random::key(0))), kNormalF16);
  EXPECT_EQ(values<uint16_t>(random::normal({4}, bfloat16, random::key(0))), kNormalBf16);
  EXPECT_EQ(values<uint32_t>(view(random::normal({3}, complex64, random::key(0)), uint32)),
            kNormalC64);
}

TEST(RandomTruncatedNormal, CloseToMLX) {
  auto t = random::truncated_normal(array(-1.0f), array(2.0f), {6}, float32, random::key(2));
  expect_within_ulps(values<uint32_t>(t), kTruncNormal, 64);
}

TEST(RandomTruncatedNormal, BitIdenticalToMLX) {
  ASSERT_TRUE(op_matches_mlx(&erfinv, kMlxErfinv)) << "tessera::erfinv differs from MLX's";
  ASSERT_TRUE(op_matches_mlx(&erf, kMlxErf)) << "tessera::erf differs from MLX's";
  auto t = random::truncated_normal(array(-1.0f), array(2.0f), {6}, float32, random::key(2));
  EXPECT_EQ(values<uint32_t>(t), kTruncNormal);
}

TEST(RandomLaplace, MatchesMLX) {
  EXPECT_EQ(values<uint32_t>(random::laplace({4}, random::key(0))),
            (std::vector<uint32_t>{0xc02ac884, 0x3f4c3cb1, 0xbe9e6040, 0x3f05e0ab}));
}

TEST(RandomRandint, MatchesMLX) {
  EXPECT_EQ(values<int32_t>(random::randint(0, 10, {8}, int32, random::key(3))),
            (std::vector<int32_t>{3, 8, 8, 4, 0, 0, 8, 3}));
  EXPECT_EQ(values<int32_t>(random::randint(-5, 5, {8}, int32, random::key(3))),
            (std::vector<int32_t>{-2, 3, 3, -1, -5, -5, 3, -2}));
  auto u8 = random::randint(0, 256, {8}, uint8, random::key(3));
  EXPECT_EQ(u8.dtype(), uint8);
  EXPECT_EQ(values<uint8_t>(u8),
            (std::vector<uint8_t>{0x51, 0xda, 0xd1, 0x7c, 0x16, 0x0c, 0xdb, 0x60}));
  // low >= high gives low everywhere (MLX clamps, it does not raise).
  EXPECT_EQ(values<int32_t>(random::randint(5, 5, {4}, int32, random::key(3))),
            (std::vector<int32_t>{5, 5, 5, 5}));
  EXPECT_EQ(values<int32_t>(random::randint(5, 2, {4}, int32, random::key(3))),
            (std::vector<int32_t>{5, 5, 5, 5}));
  EXPECT_EQ(random::randint(0, 2, {3}, bool_, random::key(3)).dtype(), bool_);
}

TEST(RandomBernoulli, MatchesMLX) {
  EXPECT_EQ(values<bool>(random::bernoulli(array(0.3f), {10}, random::key(4))),
            (std::vector<bool>{0, 0, 0, 0, 0, 1, 0, 1, 0, 0}));
  auto b = random::bernoulli(array({0.f, 1.f, 0.5f}), random::key(4));
  EXPECT_EQ(b.dtype(), bool_);
  EXPECT_EQ(values<bool>(b), (std::vector<bool>{0, 1, 0}));
}

TEST(RandomGumbel, MatchesMLX) {
  EXPECT_EQ(values<uint32_t>(random::gumbel({5}, float32, random::key(5))),
            (std::vector<uint32_t>{0x3f783f54, 0x3f83ed65, 0xbe264042, 0x3f8c8631, 0xbf80acf3}));
}

TEST(RandomCategorical, MatchesMLX) {
  auto k = random::key(6);
  auto logits1 = array({0.f, 1.f, 2.f});
  auto logits2 = array({0.f, 1.f, 2.f, 2.f, 0.f, -1.f}, {2, 3});
  auto a = random::categorical(logits1, -1, Shape{6}, k);  // inverse-CDF path
  EXPECT_EQ(a.dtype(), uint32);
  EXPECT_EQ(values<uint32_t>(a), (std::vector<uint32_t>{2, 0, 1, 2, 1, 1}));
  EXPECT_EQ(values<uint32_t>(random::categorical(logits2, -1, k)),
            (std::vector<uint32_t>{2, 0}));
  EXPECT_EQ(values<uint32_t>(random::categorical(logits2, 0, k)),
            (std::vector<uint32_t>{1, 0, 0}));
  auto n = random::categorical(logits2, -1, 4, k);
  EXPECT_EQ(n.shape(), (Shape{2, 4}));
  EXPECT_EQ(values<uint32_t>(n), (std::vector<uint32_t>{2, 2, 0, 1, 0, 0, 0, 0}));
  auto s = random::categorical(logits1, -1, k);
  EXPECT_EQ(s.ndim(), 0u);
  EXPECT_EQ(s.item<uint32_t>(), 1u);
}

TEST(RandomPermutation, MatchesMLX) {
  auto k = random::key(8);
  EXPECT_EQ(values<uint32_t>(random::permutation(7, k)),
            (std::vector<uint32_t>{5, 4, 0, 6, 3, 2, 1}));
  EXPECT_EQ(values<int32_t>(random::permutation(arange(6), 0, k)),
            (std::vector<int32_t>{0, 1, 2, 4, 3, 5}));
  EXPECT_EQ(values<int32_t>(random::permutation(reshape(arange(6), {2, 3}), 1, k)),
            (std::vector<int32_t>{2, 0, 1, 5, 3, 4}));
}

// ---- statistics (1e5 samples; tolerances are > 5 standard errors) ----

namespace {
struct Moments {
  double mean = 0, var = 0, min = 1e300, max = -1e300;
};
template <typename T>
Moments moments(const std::vector<T>& v) {
  Moments m;
  for (auto x : v) {
    m.mean += static_cast<double>(x);
    m.min = std::min(m.min, static_cast<double>(x));
    m.max = std::max(m.max, static_cast<double>(x));
  }
  m.mean /= static_cast<double>(v.size());
  for (auto x : v) m.var += (static_cast<double>(x) - m.mean) * (static_cast<double>(x) - m.mean);
  m.var /= static_cast<double>(v.size());
  return m;
}
constexpr int kN = 100000;
}  // namespace

TEST(RandomStatistics, UniformMomentsAndRange) {
  auto m = moments(values<float>(random::uniform({kN}, random::key(21))));
  EXPECT_NEAR(m.mean, 0.5, 0.005);
  EXPECT_NEAR(m.var, 1.0 / 12, 0.002);
  EXPECT_GE(m.min, 0.0);
  EXPECT_LT(m.max, 1.0);
  auto w = moments(values<float>(random::uniform(-2.0f, 6.0f, {kN}, float32, random::key(22))));
  EXPECT_NEAR(w.mean, 2.0, 0.04);
  EXPECT_NEAR(w.var, 64.0 / 12, 0.12);
  EXPECT_GE(w.min, -2.0);
  EXPECT_LT(w.max, 6.0);
  // Half precision stays strictly below high even though 1 - 2^-32 rounds to 1.
  auto h = values<float16_t>(random::uniform({kN}, float16, random::key(23)));
  for (auto x : h) ASSERT_LT(static_cast<float>(x), 1.0f);
}

TEST(RandomStatistics, NormalMoments) {
  auto v = values<float>(random::normal({kN}, random::key(31)));
  auto m = moments(v);
  EXPECT_NEAR(m.mean, 0.0, 0.02);
  EXPECT_NEAR(m.var, 1.0, 0.03);
  double k4 = 0;
  for (auto x : v) k4 += std::pow(x - m.mean, 4);
  EXPECT_NEAR(k4 / kN / (m.var * m.var), 3.0, 0.1);
  auto s = moments(values<float>(random::normal({kN}, 1.5f, 0.5f, random::key(32))));
  EXPECT_NEAR(s.mean, 1.5, 0.01);
  EXPECT_NEAR(s.var, 0.25, 0.008);
  for (Dtype t : {float16, bfloat16}) {
    auto a = astype(random::normal({kN}, t, random::key(33)), float32);
    for (auto x : values<float>(a)) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST(RandomStatistics, TruncatedNormalStaysInBounds) {
  auto v = values<float>(
      random::truncated_normal(array(-0.5f), array(1.5f), {kN}, float32, random::key(41)));
  auto m = moments(v);
  EXPECT_GE(m.min, -0.5);
  EXPECT_LE(m.max, 1.5);
  // Mean of N(0,1) truncated to [a, b]: (phi(a) - phi(b)) / (Phi(b) - Phi(a)).
  auto phi = [](double x) { return std::exp(-x * x / 2) / std::sqrt(2 * M_PI); };
  auto Phi = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  double expect = (phi(-0.5) - phi(1.5)) / (Phi(1.5) - Phi(-0.5));
  EXPECT_NEAR(m.mean, expect, 0.01);
  // Per-element bounds broadcast to the output shape.
  auto b = random::truncated_normal(array({-1.f, 0.f}), array({0.f, 1.f}), float32,
                                    random::key(42));
  EXPECT_EQ(b.shape(), Shape{2});
  auto bv = values<float>(b);
  EXPECT_TRUE(bv[0] >= -1.f && bv[0] <= 0.f);
  EXPECT_TRUE(bv[1] >= 0.f && bv[1] <= 1.f);
}

TEST(RandomStatistics, RandintCoversRangeEvenly) {
  auto v = values<int32_t>(random::randint(-3, 4, {kN}, int32, random::key(51)));
  std::vector<int> count(7, 0);
  for (auto x : v) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 4);
    ++count[x + 3];
  }
  for (int c : count) EXPECT_NEAR(c, kN / 7.0, 700);
  auto w = values<int64_t>(random::randint(0, 1000, {kN}, int64, random::key(52)));
  for (auto x : w) ASSERT_TRUE(x >= 0 && x < 1000);
}

TEST(RandomStatistics, BernoulliFrequency) {
  auto v = values<bool>(random::bernoulli(array(0.3f), {kN}, random::key(61)));
  double f = 0;
  for (bool x : v) f += x;
  EXPECT_NEAR(f / kN, 0.3, 0.008);
  auto all = values<bool>(random::bernoulli(array(1.0f), {1000}, random::key(62)));
  auto none = values<bool>(random::bernoulli(array(0.0f), {1000}, random::key(62)));
  for (size_t i = 0; i < 1000; ++i) {
    ASSERT_TRUE(all[i]);
    ASSERT_FALSE(none[i]);
  }
  // An array argument would be taken for p (as in MLX's C++ API): name the key explicitly.
  auto half = values<bool>(random::bernoulli(std::optional<array>(random::key(63))));
  EXPECT_EQ(half.size(), 1u);
}

TEST(RandomStatistics, CategoricalFrequenciesFollowSoftmax) {
  std::vector<float> lg{0.f, 1.f, 2.f, -1.f};
  double z = 0;
  for (float x : lg) z += std::exp(x);
  // Both paths: inverse CDF (1-D logits with a shape) and Gumbel-max (batched logits).
  auto a = values<uint32_t>(random::categorical(array(lg.data(), Shape{4}), -1, Shape{kN},
                                                random::key(71)));
  auto b = values<uint32_t>(random::categorical(
      broadcast_to(array(lg.data(), Shape{1, 4}), {kN, 4}), -1, random::key(72)));
  for (const auto& v : {a, b}) {
    std::vector<double> f(4, 0);
    for (auto x : v) {
      ASSERT_LT(x, 4u);
      f[x] += 1.0 / kN;
    }
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], std::exp(lg[i]) / z, 0.01) << i;
  }
  // An infinite logit takes all the mass.
  float inf = std::numeric_limits<float>::infinity();
  auto c = values<uint32_t>(
      random::categorical(array({0.f, inf, 1.f}), -1, Shape{100}, random::key(73)));
  for (auto x : c) ASSERT_EQ(x, 1u);
}

TEST(RandomStatistics, PermutationIsAPermutation) {
  auto p = values<uint32_t>(random::permutation(1000, random::key(81)));
  std::vector<uint32_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_NE(p, sorted);
  // Rows of a 2-D array move together along axis 0.
  auto x = reshape(arange(12), {4, 3});
  auto y = values<int32_t>(random::permutation(x, 0, random::key(82)));
  std::vector<bool> seen(4, false);
  for (int r = 0; r < 4; ++r) {
    int row = y[3 * r] / 3;
    EXPECT_FALSE(seen[row]);
    seen[row] = true;
    for (int c = 0; c < 3; ++c) EXPECT_EQ(y[3 * r + c], 3 * row + c);
  }
  EXPECT_EQ(random::permutation(0, random::key(83)).size(), 0u);
}

TEST(RandomShapes, EmptyAndScalarSamples) {
  EXPECT_EQ(random::uniform({0}, float16, random::key(0)).size(), 0u);
  EXPECT_EQ(values<float>(random::normal({2, 0}, random::key(0))).size(), 0u);
  auto s = random::normal({}, random::key(0));
  EXPECT_EQ(s.ndim(), 0u);
  EXPECT_TRUE(std::isfinite(s.item<float>()));
}

// ---- errors ----

namespace {
template <typename F>
void expect_invalid(F f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no throw, expected: " << part;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(RandomErrors, DtypesShapesAndAxesAreNamed) {
  auto k = random::key(0);
  expect_invalid([&] { random::uniform({2}, int32, k); }, "int32");
  expect_invalid([&] { random::uniform({2}, float64, k); }, "float64");
  expect_invalid([&] { random::uniform({2, -3}, float32, k); }, "(2,-3)");
  expect_invalid([&] { random::uniform(array({0.f, 1.f, 2.f}), array(3.f), {2}, float32, k); },
                 "(2)");
  expect_invalid([&] { random::uniform(array({0.f, 1.f}), array(3.f), {3, 1}, float32, k); },
                 "(3,2)");
  expect_invalid([&] { random::normal({2}, int32, k); }, "int32");
  expect_invalid([&] { random::randint(0, 3, {2}, float32, k); }, "float32");
  expect_invalid([&] { random::bernoulli(array(1), {2}, k); }, "int32");
  expect_invalid([&] { random::bernoulli(array({0.1f, 0.2f}), {3}, k); }, "(3)");
  expect_invalid([&] { random::truncated_normal(array(0.f), array(1.f), {2}, int32, k); },
                 "int32");
  expect_invalid([&] { random::categorical(array({0.f, 1.f}), 2, k); }, "axis 2");
  expect_invalid([&] { random::categorical(array({0.f, 1.f, 0.f, 1.f}, {2, 2}), -1, Shape{3}, k); },
                 "(3)");
  expect_invalid([&] { random::gumbel({2}, int32, k); }, "int32");
  expect_invalid([&] { random::laplace({2}, int32, k); }, "int32");
  expect_invalid([&] { random::permutation(-2, k); }, "-2");
  expect_invalid([&] { random::uniform({2}, float32, array({1u, 2u, 3u})); }, "(3)");
  expect_invalid([&] { random::normal({2}, float32, array({1.f, 2.f})); }, "float32");
}

// ---- every dtype, non-contiguous inputs ----

TEST(RandomRandint, EveryIntegerDtypeMatchesMLX) {
  // MLX 0.32.4: randint(low, 100, (6,), dtype, key(3)), low = -3 for signed, 0 for unsigned.
  auto k = random::key(3);
  const std::vector<int64_t> signed_want{18, 35, 43, 79, 64, 81};
  const std::vector<int64_t> unsigned_want{20, 37, 45, 80, 65, 82};
  for (Dtype t : {int8, int16, int32, int64}) {
    auto r = random::randint(-3, 100, {6}, t, k);
    EXPECT_EQ(r.dtype(), t);
    EXPECT_EQ(values<int64_t>(astype(r, int64)), signed_want) << dtype_name(t);
  }
  for (Dtype t : {uint8, uint16, uint32, uint64}) {
    auto r = random::randint(0, 100, {6}, t, k);
    EXPECT_EQ(r.dtype(), t);
    EXPECT_EQ(values<int64_t>(astype(r, int64)), unsigned_want) << dtype_name(t);
  }
  EXPECT_EQ(values<bool>(random::randint(0, 2, {6}, bool_, k)),
            (std::vector<bool>{0, 0, 0, 1, 1, 1}));
}

TEST(RandomBernoulli, EveryFloatingDtypeOfPMatchesMLX) {
  // MLX 0.32.4: bernoulli(array([0.1, 0.5, 0.9, 0.3, 0.7, 0.2], dtype), key(4)).
  for (Dtype t : {float16, bfloat16, float32, float64}) {
    auto p = astype(array({0.1f, 0.5f, 0.9f, 0.3f, 0.7f, 0.2f}), t);
    EXPECT_EQ(values<bool>(random::bernoulli(p, random::key(4))),
              (std::vector<bool>{1, 1, 1, 0, 1, 1}))
        << dtype_name(t);
  }
}

TEST(RandomPermutation, TransposedInputMatchesMLX) {
  // MLX 0.32.4: permutation(arange(6).reshape(2, 3).T, axis=0, key(8)).
  auto x = transpose(reshape(arange(6), {2, 3}));
  EXPECT_EQ(values<int32_t>(random::permutation(x, 0, random::key(8))),
            (std::vector<int32_t>{2, 5, 0, 3, 1, 4}));
}

TEST(RandomUniform, EveryDtypeStaysInRange) {
  for (Dtype t : {float16, bfloat16, float32}) {
    auto u = random::uniform(array(-2.0f), array(3.0f), {4096}, t, random::key(17));
    EXPECT_EQ(u.dtype(), t);
    for (float x : values<float>(astype(u, float32))) {
      ASSERT_GE(x, -2.0f);
      ASSERT_LT(x, 3.0f);
    }
  }
}
