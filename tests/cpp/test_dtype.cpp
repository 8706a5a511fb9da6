// Dtype promotion against MLX's published table (typed here independently), names, categories,
// and the float16/bfloat16 conversions against known bit patterns.
#include <gtest/gtest.h>

#include <cmath>

#include "tessera/dtype.h"

using namespace tessera;

TEST(Promotion, MatchesMlxTable) {
  // Rows/cols: b u8 u16 u32 u64 i8 i16 i32 i64 f16 f32 f64 bf16 c64
  const char* rows[14][14] = {
      {"bool","uint8","uint16","uint32","uint64","int8","int16","int32","int64","float16","float32","float64","bfloat16","complex64"},
      {"uint8","uint8","uint16","uint32","uint64","int16","int16","int32","int64","float16","float32","float64","bfloat16","complex64"},
      {"uint16","uint16","uint16","uint32","uint64","int32","int32","int32","int64","float16","float32","float64","bfloat16","complex64"},
      {"uint32","uint32","uint32","uint32","uint64","int64","int64","int64","int64","float16","float32","float64","bfloat16","complex64"},
      {"uint64","uint64","uint64","uint64","uint64","float32","float32","float32","float32","float16","float32","float64","bfloat16","complex64"},
      {"int8","int16","int32","int64","float32","int8","int16","int32","int64","float16","float32","float64","bfloat16","complex64"},
      {"int16","int16","int32","int64","float32","int16","int16","int32","int64","float16","float32","float64","bfloat16","complex64"},
      {"int32","int32","int32","int64","float32","int32","int32","int32","int64","float16","float32","float64","bfloat16","complex64"},
      {"int64","int64","int64","int64","float32","int64","int64","int64","int64","float16","float32","float64","bfloat16","complex64"},
      {"float16","float16","float16","float16","float16","float16","float16","float16","float16","float16","float32","float64","float32","complex64"},
      {"float32","float32","float32","float32","float32","float32","float32","float32","float32","float32","float32","float64","float32","complex64"},
      {"float64","float64","float64","float64","float64","float64","float64","float64","float64","float64","float64","float64","float64","complex64"},
      {"bfloat16","bfloat16","bfloat16","bfloat16","bfloat16","bfloat16","bfloat16","bfloat16","bfloat16","float32","float32","float64","bfloat16","complex64"},
      {"complex64","complex64","complex64","complex64","complex64","complex64","complex64","complex64","complex64","complex64","complex64","complex64","complex64","complex64"},
  };
  for (int i = 0; i < 14; ++i) {
    for (int j = 0; j < 14; ++j) {
      EXPECT_EQ(dtype_name(promote_types(kAllDtypes[i], kAllDtypes[j])), rows[i][j])
          << dtype_name(kAllDtypes[i]) << " + " << dtype_name(kAllDtypes[j]);
    }
  }
}

TEST(DtypeNames, RoundTripAndUnknownNameIsAnError) {
  for (auto t : kAllDtypes) EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
  EXPECT_THROW(dtype_from_name("float8"), std::invalid_argument);
}

TEST(DtypeCategories, Subtypes) {
  EXPECT_TRUE(issubdtype(float16, floating));
  EXPECT_TRUE(issubdtype(bfloat16, inexact));
  EXPECT_TRUE(issubdtype(complex64, inexact));
  EXPECT_FALSE(issubdtype(complex64, floating));
  EXPECT_TRUE(issubdtype(uint8, integer));
  EXPECT_TRUE(issubdtype(int8, signedinteger));
  EXPECT_FALSE(issubdtype(uint8, signedinteger));
  EXPECT_FALSE(issubdtype(bool_, integer));
  EXPECT_TRUE(issubdtype(bool_, generic));
  EXPECT_TRUE(issubdtype(int64, number));
  EXPECT_TRUE(issubdtype(floating, inexact));
  EXPECT_FALSE(issubdtype(inexact, floating));
}

TEST(HalfTypes, KnownBitPatterns) {
  EXPECT_EQ(float16_t(1.0f).bits, 0x3c00);
  EXPECT_EQ(float16_t(-2.0f).bits, 0xc000);
  EXPECT_EQ(float16_t(65504.0f).bits, 0x7bff);              // largest finite
  EXPECT_EQ(float16_t(65520.0f).bits, 0x7c00);              // rounds to inf
  EXPECT_EQ(float16_t(5.960464477539063e-08f).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(float16_t(1.0f + 1.0f / 2048).bits, 0x3c00);    // tie -> even
  EXPECT_EQ(float16_t(1.0f + 3.0f / 2048).bits, 0x3c02);    // tie -> even (up)
  EXPECT_TRUE(std::isnan(static_cast<float>(float16_t(NAN))));
  EXPECT_EQ(static_cast<float>(float16_t::from_bits(0x3555)), 0.333251953125f);
  EXPECT_EQ(bfloat16_t(1.0f).bits, 0x3f80);
  EXPECT_EQ(bfloat16_t(3.140625f).bits, 0x4049);
  EXPECT_EQ(static_cast<float>(bfloat16_t::from_bits(0xc0a0)), -5.0f);
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16_t(NAN))));
}

TEST(HalfTypes, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    auto h = float16_t::from_bits(static_cast<uint16_t>(b));
    float f = h;
    if (std::isnan(f)) continue;
    EXPECT_EQ(float16_t(f).bits, b);
  }
}
