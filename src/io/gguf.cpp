// GGUF (llama.cpp's model format, versions 2 and 3): header, metadata and tensor-info
// validation, the ggml block formats, reading, and writing; the public load/save_gguf
// (tessera/io.h). The layout facts come from the GGUF specification and ggml's block
// definitions; what MLX returns for each tensor type is MLX's (mlx/io/gguf.cpp), with the
// differences listed in docs/io.md.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "io/byte_io.h"
#include "io/npy.h"
#include "tessera/io.h"
#include "tessera/ops.h"
#include "tessera/eval.h"

namespace tessera {

namespace {

using namespace detail::io;
using ArrayMap = std::unordered_map<std::string, array>;
using MetaMap = std::unordered_map<std::string, GGUFMetaData>;

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 8;  // as gguflib (MLX's reader); ggml itself stops at 4
constexpr const char* kAlignmentKey = "general.alignment";

// ---- metadata value types ----

enum ValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

struct ScalarType {
  uint32_t code;
  const char* name;
  Dtype dtype;
};
constexpr ScalarType kScalarTypes[] = {
    {kU8, "UINT8", uint8},     {kI8, "INT8", int8},       {kU16, "UINT16", uint16},
    {kI16, "INT16", int16},    {kU32, "UINT32", uint32},  {kI32, "INT32", int32},
    {kF32, "FLOAT32", float32}, {kBool, "BOOL", bool_},   {kU64, "UINT64", uint64},
    {kI64, "INT64", int64},    {kF64, "FLOAT64", float64},
};

const ScalarType* scalar_type(uint32_t code) {
  for (const ScalarType& t : kScalarTypes) {
    if (t.code == code) return &t;
  }
  return nullptr;
}

const ScalarType* scalar_type_of(Dtype dt) {
  for (const ScalarType& t : kScalarTypes) {
    if (t.dtype == dt) return &t;
  }
  return nullptr;
}

// ---- tensor types (ggml_type) ----

// How a tensor type is loaded: as it is, as MLX's affine triple (weight, scales, biases; group
// 32), or decoded to float16 (as MLX, through gguflib).
enum class Load { kPlain, kAffine, kFloat16 };

struct TensorType {
  uint32_t id;
  const char* name;
  Load load;
  uint32_t block;  // elements per block
  uint32_t bytes;  // bytes per block
  Dtype dtype;     // kPlain: the array's dtype
};

constexpr TensorType kTensorTypes[] = {
    {0, "F32", Load::kPlain, 1, 4, float32},       {1, "F16", Load::kPlain, 1, 2, float16},
    {2, "Q4_0", Load::kAffine, 32, 18, uint32},    {3, "Q4_1", Load::kAffine, 32, 20, uint32},
    {6, "Q5_0", Load::kFloat16, 32, 22, float16},  {7, "Q5_1", Load::kFloat16, 32, 24, float16},
    {8, "Q8_0", Load::kAffine, 32, 34, uint32},    {10, "Q2_K", Load::kFloat16, 256, 84, float16},
    {11, "Q3_K", Load::kFloat16, 256, 110, float16}, {12, "Q4_K", Load::kFloat16, 256, 144, float16},
    {13, "Q5_K", Load::kFloat16, 256, 176, float16}, {14, "Q6_K", Load::kFloat16, 256, 210, float16},
    {24, "I8", Load::kPlain, 1, 1, int8},          {25, "I16", Load::kPlain, 1, 2, int16},
    {26, "I32", Load::kPlain, 1, 4, int32},        {27, "I64", Load::kPlain, 1, 8, int64},
    {28, "F64", Load::kPlain, 1, 8, float64},      {30, "BF16", Load::kPlain, 1, 2, bfloat16},
};

// ggml types we know by name but do not read (so the error can name them).
const char* unsupported_type_name(uint32_t id) {
  switch (id) {
    case 9: return "Q8_1";
    case 15: return "Q8_K";
    case 16: return "IQ2_XXS";
    case 17: return "IQ2_XS";
    case 18: return "IQ3_XXS";
    case 19: return "IQ1_S";
    case 20: return "IQ4_NL";
    case 21: return "IQ3_S";
    case 22: return "IQ2_S";
    case 23: return "IQ4_XS";
    case 29: return "IQ1_M";
    case 34: return "TQ1_0";
    case 35: return "TQ2_0";
    case 39: return "MXFP4";
    case 40: return "NVFP4";
    default: return nullptr;
  }
}

const TensorType* tensor_type(uint32_t id) {
  for (const TensorType& t : kTensorTypes) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

std::string supported_types() {
  std::string s;
  for (const TensorType& t : kTensorTypes) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

// ---- block decoders: one block of `bytes` in, `block` floats out ----

float half_at(const uint8_t* p) { return float16_t::from_bits(le16(p)); }

void decode_q5_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const uint32_t qh = le32(b + 2);
  const uint8_t* qs = b + 6;
  for (int i = 0; i < 32; ++i) {
    const int lo = i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4;
    const int q = lo | static_cast<int>(((qh >> i) & 1u) << 4);
    y[i] = static_cast<float>(q - 16) * d;
  }
}

void decode_q5_1(const uint8_t* b, float* y) {
  const float d = half_at(b), m = half_at(b + 2);
  const uint32_t qh = le32(b + 4);
  const uint8_t* qs = b + 8;
  for (int i = 0; i < 32; ++i) {
    const int lo = i < 16 ? qs[i] & 0xF : qs[i - 16] >> 4;
    const int q = lo | static_cast<int>(((qh >> i) & 1u) << 4);
    y[i] = static_cast<float>(q) * d + m;
  }
}

// Q2_K: 16 sub-blocks of 16; byte j of `scales` holds sub-block j's 4-bit scale (low) and min
// (high); 2-bit codes, four per byte, in two halves of 128.
void decode_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = half_at(b + 80), dmin = half_at(b + 82);
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, r = e % 128;
    const int q = (qs[half * 32 + r % 32] >> (2 * (r / 32))) & 3;
    const uint8_t s = scales[e / 16];
    const float scale = d * static_cast<float>(s & 0xF), min = dmin * static_cast<float>(s >> 4);
    y[e] = static_cast<float>(q) * scale - min;
  }
}

// Q3_K: 2-bit low codes as Q2_K, a high bit per element in `hmask` (set: no offset, clear: -4),
// 16 signed 6-bit scales packed in 12 bytes (low nibbles in bytes 0..7, high pairs in 8..11).
void decode_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* sc = b + 96;
  const float d = half_at(b + 108);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 16;
    const int lo = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
    const int hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
    const float scale = d * static_cast<float>((lo | (hi << 4)) - 32);
    const int half = e / 128, r = e % 128;
    const int low = (qs[half * 32 + r % 32] >> (2 * (r / 32))) & 3;
    const int high = (hmask[e % 32] >> (e / 32)) & 1;
    y[e] = scale * static_cast<float>(low - (high ? 0 : 4));
  }
}

// The 6-bit scale and min of sub-block j (of 8) in Q4_K / Q5_K's 12 packed bytes.
void k_scale_min(const uint8_t* s, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q4_K / Q5_K: 8 sub-blocks of 32; 4-bit codes, pairs of sub-blocks sharing 32 bytes (low nibble
// first); Q5_K adds a fifth bit per element from `qh` (bit j for sub-block j).
void decode_k_4_5(const uint8_t* b, float* y, bool five) {
  const float d = half_at(b), dmin = half_at(b + 2);
  const uint8_t* s = b + 4;
  const uint8_t* qh = five ? b + 16 : nullptr;
  const uint8_t* qs = five ? b + 48 : b + 16;
  for (int j = 0; j < 8; ++j) {
    int sc = 0, mn = 0;
    k_scale_min(s, j, &sc, &mn);
    const float scale = d * static_cast<float>(sc), min = dmin * static_cast<float>(mn);
    for (int l = 0; l < 32; ++l) {
      int q = (qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 0xF;
      if (five) q |= ((qh[l] >> j) & 1) << 4;
      y[j * 32 + l] = static_cast<float>(q) * scale - min;
    }
  }
}
void decode_q4_k(const uint8_t* b, float* y) { decode_k_4_5(b, y, false); }
void decode_q5_k(const uint8_t* b, float* y) { decode_k_4_5(b, y, true); }

// Q6_K: 4 low bits in `ql` (64 bytes per half, low nibble first), 2 high bits in `qh` (32 bytes
// per half, four per byte), a signed 8-bit scale per 16 elements, minus 32.
void decode_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half_at(b + 208);
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, r = e % 128;
    const int lo = (ql[half * 64 + r % 64] >> (4 * (r / 64))) & 0xF;
    const int hi = (qh[half * 32 + r % 32] >> (2 * (r / 32))) & 3;
    y[e] = (d * static_cast<float>(scales[e / 16])) * static_cast<float>((lo | (hi << 4)) - 32);
  }
}

using Decoder = void (*)(const uint8_t*, float*);
Decoder decoder_of(uint32_t id) {
  switch (id) {
    case 6: return decode_q5_0;
    case 7: return decode_q5_1;
    case 10: return decode_q2_k;
    case 11: return decode_q3_k;
    case 12: return decode_q4_k;
    case 13: return decode_q5_k;
    case 14: return decode_q6_k;
    default: return nullptr;
  }
}

// ---- reading ----

// A forward cursor over the header with every read bounds-checked.
class Cursor {
 public:
  Cursor(const ByteReader& r, std::string where) : r_(r), where_(std::move(where)) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return r_.size() - pos_; }
  const std::string& where() const { return where_; }

  uint64_t uint(int n, const std::string& what) {
    need(static_cast<uint64_t>(n), what);
    uint8_t b[8];
    r_.read(pos_, b, static_cast<size_t>(n));
    pos_ += static_cast<uint64_t>(n);
    return load_le(b, n);
  }
  std::string bytes(uint64_t n, const std::string& what) {
    need(n, what);
    std::string s = r_.read_string(pos_, static_cast<size_t>(n));
    pos_ += n;
    return s;
  }
  std::string str(const std::string& what) {
    const uint64_t n = uint(8, what + "'s length");
    if (n > left()) {
      fail(where_, "truncated: " + what + " says " + std::to_string(n) + " bytes at offset " +
                       std::to_string(pos_) + " but only " + std::to_string(left()) + " remain");
    }
    return bytes(n, what);
  }
  void need(uint64_t n, const std::string& what) {
    if (n > left()) {
      fail(where_, "truncated: " + what + " needs " + std::to_string(n) + " bytes at offset " +
                       std::to_string(pos_) + " but the file has " + std::to_string(left()) +
                       " left");
    }
  }

 private:
  const ByteReader& r_;
  std::string where_;
  uint64_t pos_ = 0;
};

// `n` values of `t` from the cursor as a 1-d array (a 0-d one when scalar).
array read_values(Cursor& c, const ScalarType& t, uint64_t n, bool scalar, const std::string& what) {
  const size_t item = size_of(t.dtype);
  uint64_t total = 0;
  if (mul_overflows(n, item, &total) || total > c.left()) {
    fail(c.where(), "truncated: " + what + " holds " + std::to_string(n) + " " + t.name +
                        " values, more than the " + std::to_string(c.left()) +
                        " bytes left in the file");
  }
  if (n > static_cast<uint64_t>(INT32_MAX)) {
    fail(c.where(), what + " holds " + std::to_string(n) + " values, more than 2147483647");
  }
  OwnedBuffer buf(std::max<size_t>(static_cast<size_t>(total), 1));
  std::string raw = c.bytes(total, what);
  std::memcpy(buf.data(), raw.data(), raw.size());
  if (t.dtype == bool_) {
    for (size_t i = 0; i < raw.size(); ++i) buf.data()[i] = buf.data()[i] != 0;
  }
  Shape shape;
  if (!scalar) shape.push_back(static_cast<int32_t>(n));
  return array(buf.release(), std::move(shape), t.dtype, allocator::free);
}

GGUFMetaData read_value(Cursor& c, uint32_t type, const std::string& key) {
  const std::string what = "the value of " + printable(key);
  if (const ScalarType* t = scalar_type(type)) return read_values(c, *t, 1, true, what);
  if (type == kString) return c.str(what);
  if (type != kArray) {
    fail(c.where(), "metadata " + printable(key) + " has value type " + std::to_string(type) +
                        ", which GGUF does not define (0..12)");
  }
  const uint32_t elem = static_cast<uint32_t>(c.uint(4, what + "'s element type"));
  const uint64_t n = c.uint(8, what + "'s length");
  if (const ScalarType* t = scalar_type(elem)) return read_values(c, *t, n, false, what);
  if (elem == kString) {
    // Each string takes at least its 8-byte length: bound n before reserving.
    if (n > c.left() / 8) {
      fail(c.where(), "truncated: " + what + " says " + std::to_string(n) +
                          " strings but only " + std::to_string(c.left()) + " bytes remain");
    }
    std::vector<std::string> out;
    out.reserve(static_cast<size_t>(n));
    for (uint64_t i = 0; i < n; ++i) out.push_back(c.str(what + " [" + std::to_string(i) + "]"));
    return out;
  }
  if (elem == kArray) {
    fail(c.where(), "metadata " + printable(key) +
                        " is an array of arrays, which Tessera does not read (as MLX)");
  }
  fail(c.where(), "metadata " + printable(key) + " is an array of value type " +
                      std::to_string(elem) + ", which GGUF does not define (0..12)");
}

struct TensorInfo {
  std::string name;
  Shape shape;  // Tessera order: ggml's ne reversed
  const TensorType* type = nullptr;
  uint64_t count = 0;   // elements
  uint64_t offset = 0;  // within the data section
  uint64_t nbytes = 0;  // in the file
};

TensorInfo read_tensor_info(Cursor& c) {
  TensorInfo t;
  t.name = c.str("a tensor name");
  const std::string tw = "tensor " + printable(t.name);
  const uint32_t ndim = static_cast<uint32_t>(c.uint(4, tw + "'s dimension count"));
  if (ndim > kMaxDims) {
    fail(c.where(), tw + " has " + std::to_string(ndim) + " dimensions, more than " +
                        std::to_string(kMaxDims));
  }
  std::vector<uint64_t> ne(ndim);
  t.count = 1;
  for (uint32_t i = 0; i < ndim; ++i) {
    ne[i] = c.uint(8, tw + "'s dimensions");
    if (ne[i] > static_cast<uint64_t>(INT32_MAX)) {
      fail(c.where(), tw + " has dimension " + std::to_string(ne[i]) +
                          ", more than 2147483647 (Tessera shapes hold int32 dims)");
    }
    if (mul_overflows(t.count, ne[i], &t.count)) {
      fail(c.where(), tw + "'s shape overflows 64-bit element counts");
    }
  }
  for (uint32_t i = ndim; i-- > 0;) t.shape.push_back(static_cast<int32_t>(ne[i]));
  const uint32_t id = static_cast<uint32_t>(c.uint(4, tw + "'s type"));
  t.type = tensor_type(id);
  if (!t.type) {
    const char* known = unsupported_type_name(id);
    fail(c.where(), tw + " has ggml type " +
                        (known ? std::string(known) + " (" + std::to_string(id) + ")"
                               : std::to_string(id) + ", which ggml does not define") +
                        "; Tessera reads " + supported_types());
  }
  if (t.type->block > 1 && (ndim == 0 || ne[0] % t.type->block != 0)) {
    fail(c.where(), tw + " is " + t.type->name + " with " +
                        (ndim ? "rows of " + std::to_string(ne[0]) : std::string("no dimensions")) +
                        " elements, not a multiple of its block of " +
                        std::to_string(t.type->block));
  }
  if (mul_overflows(t.count / t.type->block, t.type->bytes, &t.nbytes)) {
    fail(c.where(), tw + "'s size overflows 64 bits");
  }
  t.offset = c.uint(8, tw + "'s data offset");
  return t;
}

// Packs MLX's affine codes (4 or 8 bits, element k of a row at bit k * bits, little-endian) for
// Q4_0 / Q4_1 / Q8_0: scale d, bias -8d (Q4_0), m (Q4_1) or -128d (Q8_0), group 32.
void load_affine(const TensorInfo& t, const uint8_t* data, ArrayMap& out, const std::string& where) {
  const uint64_t blocks = t.count / 32;
  const bool eight = t.type->id == 8;
  const size_t code_bytes = static_cast<size_t>(eight ? t.count : t.count / 2);
  OwnedBuffer codes(std::max<size_t>(code_bytes, 1));
  std::vector<float> scale(static_cast<size_t>(blocks)), bias(static_cast<size_t>(blocks));
  bool fits_half = true;
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = data + i * t.type->bytes;
    const float d = half_at(b);
    uint8_t* dst = codes.data() + i * (eight ? 32 : 16);
    // Q4_0 / Q4_1: 16 bytes after the header, elements 0..15 in the low nibbles, 16..31 in the
    // high ones; MLX's layout puts element k in nibble k % 2 of byte k / 2.
    auto pack4 = [&](const uint8_t* qs) {
      for (int k = 0; k < 32; k += 2) {
        const int q0 = k < 16 ? qs[k] & 0xF : qs[k - 16] >> 4;
        const int q1 = k + 1 < 16 ? qs[k + 1] & 0xF : qs[k + 1 - 16] >> 4;
        dst[k / 2] = static_cast<uint8_t>(q0 | (q1 << 4));
      }
    };
    if (t.type->id == 2) {  // Q4_0: d * (q - 8)
      bias[i] = -8.0f * d;
      pack4(b + 2);
    } else if (t.type->id == 3) {  // Q4_1: d * q + m
      bias[i] = half_at(b + 2);
      pack4(b + 4);
    } else {  // Q8_0: d * q, q int8, stored as q + 128
      bias[i] = -128.0f * d;
      for (int k = 0; k < 32; ++k) dst[k] = static_cast<uint8_t>(b[2 + k] ^ 0x80);
    }
    scale[i] = d;
    if (std::abs(bias[i]) > 65504.0f) fits_half = false;
  }
  Shape wshape = t.shape, sshape = t.shape;
  wshape.back() /= eight ? 4 : 8;
  sshape.back() /= 32;
  // float16 scales and biases, as MLX; float32 when a bias (-8d, -128d) would overflow float16,
  // where MLX stores -inf and dequantizes to NaN.
  const Dtype sdt = fits_half ? float16 : float32;
  auto params = [&](const std::vector<float>& v) {
    OwnedBuffer buf(std::max<size_t>(v.size() * size_of(sdt), 1));
    for (size_t i = 0; i < v.size(); ++i) {
      if (sdt == float16) {
        reinterpret_cast<uint16_t*>(buf.data())[i] = float16_t(v[i]).bits;
      } else {
        reinterpret_cast<float*>(buf.data())[i] = v[i];
      }
    }
    return array(buf.release(), sshape, sdt, allocator::free);
  };
  const std::string prefix =
      ends_with(t.name, ".weight") ? t.name.substr(0, t.name.size() - 7) : t.name;
  auto put = [&](const std::string& key, array a) {
    if (!out.emplace(key, std::move(a)).second) {
      fail(where, "quantized tensor " + printable(t.name) + " loads as " + printable(key) +
                      ", a name the file already uses");
    }
  };
  put(t.name, array(codes.release(), std::move(wshape), uint32, allocator::free));
  put(prefix + ".scales", params(scale));
  put(prefix + ".biases", params(bias));
}

GGUFLoad read_gguf(const ByteReader& r, const std::string& where) {
  Cursor c(r, where);
  if (r.size() < 4 || static_cast<uint32_t>(c.uint(4, "the magic")) != kMagic) {
    fail(where, "not a GGUF file: it does not start with the bytes \"GGUF\"");
  }
  const uint32_t version = static_cast<uint32_t>(c.uint(4, "the version"));
  if (version != 2 && version != 3) {
    const uint32_t swapped = __builtin_bswap32(version);
    if (swapped == 2 || swapped == 3) {
      fail(where, "a big-endian GGUF file (version " + std::to_string(swapped) +
                      "); Tessera reads little-endian GGUF only");
    }
    fail(where, "GGUF version " + std::to_string(version) +
                    " is not supported (versions 2 and 3 are; version 1 used 32-bit counts)");
  }
  const uint64_t n_tensors = c.uint(8, "the tensor count");
  const uint64_t n_kv = c.uint(8, "the metadata count");
  // Every entry takes bytes in the file (a key-value pair 13 or more, a tensor info 24 or more):
  // bound the counts before reserving anything.
  if (n_kv > c.left() / 13) {
    fail(where, "the header says " + std::to_string(n_kv) + " metadata entries, more than " +
                    std::to_string(c.left()) + " bytes can hold; the file is corrupt or truncated");
  }
  MetaMap metadata;
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.str("metadata key " + std::to_string(i));
    const uint32_t type = static_cast<uint32_t>(c.uint(4, "the type of " + printable(key)));
    GGUFMetaData value = read_value(c, type, key);
    if (!metadata.emplace(key, std::move(value)).second) {
      fail(where, "metadata key " + printable(key) + " appears twice");
    }
  }
  uint64_t alignment = kDefaultAlignment;
  if (auto it = metadata.find(kAlignmentKey); it != metadata.end()) {
    const array* a = std::get_if<array>(&it->second);
    if (!a || a->ndim() != 0 || a->dtype() != uint32) {
      fail(where, "\"general.alignment\" must be a UINT32 scalar");
    }
    alignment = a->item<uint32_t>();
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      fail(where, "\"general.alignment\" is " + std::to_string(alignment) +
                      ", not a power of two");
    }
  }
  if (n_tensors > c.left() / 24) {
    fail(where, "the header says " + std::to_string(n_tensors) + " tensors, more than " +
                    std::to_string(c.left()) + " bytes can describe; the file is corrupt or truncated");
  }
  std::vector<TensorInfo> infos;
  infos.reserve(static_cast<size_t>(n_tensors));
  std::set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    infos.push_back(read_tensor_info(c));
    if (!names.insert(infos.back().name).second) {
      fail(where, "tensor " + printable(infos.back().name) + " appears twice");
    }
  }
  const uint64_t data_start = (c.pos() + alignment - 1) / alignment * alignment;
  const uint64_t data_size = data_start <= r.size() ? r.size() - data_start : 0;
  for (const TensorInfo& t : infos) {
    const std::string tw = "tensor " + printable(t.name);
    if (t.offset % alignment != 0) {
      fail(where, tw + "'s data offset " + std::to_string(t.offset) +
                      " is not a multiple of the alignment " + std::to_string(alignment));
    }
    if (data_start > r.size() || t.offset > data_size || t.nbytes > data_size - t.offset) {
      fail(where, tw + " (" + std::to_string(t.nbytes) + " bytes at data offset " +
                      std::to_string(t.offset) + ") runs past the end of the file (" +
                      std::to_string(data_size) +
                      " bytes of data); the file is truncated or corrupt");
    }
  }
  // No two tensors may share bytes.
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : infos) {
    if (t.nbytes > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& a = *by_offset[i - 1];
    const TensorInfo& b = *by_offset[i];
    if (b.offset < a.offset + a.nbytes) {
      fail(where, "tensors " + printable(a.name) + " and " + printable(b.name) +
                      " overlap in the data section");
    }
  }

  ArrayMap arrays;
  for (TensorInfo& t : infos) {
    const uint64_t at = data_start + t.offset;
    if (t.type->load == Load::kPlain) {
      OwnedBuffer buf(std::max<size_t>(static_cast<size_t>(t.nbytes), 1));
      if (t.nbytes > 0) r.read(at, buf.data(), static_cast<size_t>(t.nbytes));
      if (!arrays.emplace(t.name, array(buf.release(), t.shape, t.type->dtype, allocator::free))
               .second) {
        fail(where, "tensor " + printable(t.name) +
                        " collides with the scales or biases of a quantized tensor");
      }
      continue;
    }
    const std::string raw = r.read_string(at, static_cast<size_t>(t.nbytes));
    const auto* data = reinterpret_cast<const uint8_t*>(raw.data());
    if (t.type->load == Load::kAffine) {
      load_affine(t, data, arrays, where);
      continue;
    }
    const Decoder decode = decoder_of(t.type->id);
    OwnedBuffer buf(std::max<size_t>(static_cast<size_t>(t.count) * 2, 1));
    auto* dst = reinterpret_cast<uint16_t*>(buf.data());
    std::vector<float> y(t.type->block);
    for (uint64_t i = 0; i < t.count / t.type->block; ++i) {
      decode(data + i * t.type->bytes, y.data());
      for (uint32_t k = 0; k < t.type->block; ++k) dst[i * t.type->block + k] = float16_t(y[k]).bits;
    }
    if (!arrays.emplace(t.name, array(buf.release(), t.shape, float16, allocator::free)).second) {
      fail(where, "tensor " + printable(t.name) +
                      " collides with the scales or biases of a quantized tensor");
    }
  }
  return {std::move(arrays), std::move(metadata)};
}

// ---- writing ----

void put_string(std::string& out, const std::string& s) {
  put_le(out, s.size(), 8);
  out += s;
}

uint32_t tensor_type_of(Dtype dt, const std::string& key) {
  for (const TensorType& t : kTensorTypes) {
    if (t.load == Load::kPlain && t.dtype == dt) return t.id;
  }
  throw std::invalid_argument(
      "[save_gguf] array " + printable(key) + " has dtype " + dtype_name(dt) +
      ", which GGUF tensors cannot hold (float32, float16, bfloat16, float64, int8, int16, int32, "
      "int64 can); cast it with astype");
}

std::string metadata_bytes(const MetaMap& metadata, uint64_t* alignment) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : metadata) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  std::string out;
  for (const std::string& key : keys) {
    const GGUFMetaData& v = metadata.at(key);
    const std::string kw = "[save_gguf] metadata " + printable(key);
    put_string(out, key);
    if (const auto* s = std::get_if<std::string>(&v)) {
      put_le(out, kString, 4);
      put_string(out, *s);
    } else if (const auto* list = std::get_if<std::vector<std::string>>(&v)) {
      put_le(out, kArray, 4);
      put_le(out, kString, 4);
      put_le(out, list->size(), 8);
      for (const std::string& s : *list) put_string(out, s);
    } else if (const auto* pa = std::get_if<array>(&v)) {
      if (pa->ndim() > 1) {
        throw std::invalid_argument(kw + " has " + std::to_string(pa->ndim()) +
                                    " dimensions; GGUF metadata holds scalars and 1-d arrays");
      }
      const ScalarType* t = scalar_type_of(pa->dtype());
      if (!t) {
        throw std::invalid_argument(
            kw + " has dtype " + dtype_name(pa->dtype()) +
            ", which GGUF metadata cannot hold (bool, (u)int8..64, float32, float64 can)");
      }
      const array a = prepare_for_save(*pa);
      if (key == kAlignmentKey) {
        if (a.ndim() != 0 || a.dtype() != uint32) {
          throw std::invalid_argument(kw + " must be a uint32 scalar (the data alignment)");
        }
        const uint32_t al = a.item<uint32_t>();
        if (al == 0 || (al & (al - 1)) != 0) {
          throw std::invalid_argument(kw + " is " + std::to_string(al) + ", not a power of two");
        }
        *alignment = al;
      }
      if (a.ndim() == 0) {
        put_le(out, t->code, 4);
      } else {
        put_le(out, kArray, 4);
        put_le(out, t->code, 4);
        put_le(out, a.size(), 8);
      }
      out.append(a.data<char>(), a.nbytes());
    } else {
      throw std::invalid_argument(kw + " has no value");
    }
  }
  return out;
}

// The whole header (through the padding before the data) and the arrays in the order written,
// made before any byte is written, so that a bad input leaves no file behind.
struct Plan {
  std::string head;
  PreparedArrays arrays;
  std::vector<uint64_t> offsets;  // within the data section
};

Plan plan_gguf(const ArrayMap& arrays, const MetaMap& metadata) {
  for (const auto& [key, a] : arrays) {
    if (a.ndim() > kMaxDims) {
      throw std::invalid_argument("[save_gguf] array " + printable(key) + " has " +
                                  std::to_string(a.ndim()) + " dimensions, more than " +
                                  std::to_string(kMaxDims));
    }
    tensor_type_of(a.dtype(), key);
  }
  uint64_t alignment = kDefaultAlignment;
  const std::string meta = metadata_bytes(metadata, &alignment);
  Plan p;
  p.arrays = prepare_sorted_for_save(arrays);
  put_le(p.head, kMagic, 4);
  put_le(p.head, kVersion, 4);
  put_le(p.head, p.arrays.size(), 8);
  put_le(p.head, metadata.size(), 8);
  p.head += meta;
  uint64_t offset = 0;
  for (const auto& [key, a] : p.arrays) {
    put_string(p.head, key);
    put_le(p.head, a.ndim(), 4);
    for (size_t i = a.ndim(); i-- > 0;) put_le(p.head, static_cast<uint64_t>(a.shape(i)), 8);
    put_le(p.head, tensor_type_of(a.dtype(), key), 4);
    put_le(p.head, offset, 8);
    p.offsets.push_back(offset);
    offset = (offset + a.nbytes() + alignment - 1) / alignment * alignment;
  }
  p.head.append((alignment - p.head.size() % alignment) % alignment, '\0');
  return p;
}

void write_gguf(ByteWriter& w, const Plan& p) {
  w.write(p.head);
  uint64_t at = 0;
  for (size_t i = 0; i < p.arrays.size(); ++i) {
    w.write(std::string(p.offsets[i] - at, '\0'));
    const array& a = p.arrays[i].second;
    if (a.nbytes() > 0) w.write(a.data<char>(), a.nbytes());
    at = p.offsets[i] + a.nbytes();
  }
}

}  // namespace

GGUFLoad load_gguf(const std::string& file, StreamOrDevice) {
  FileReader r(file, "[load_gguf]");
  return read_gguf(r, "[load_gguf] " + file);
}

GGUFLoad load_gguf_bytes(std::string_view bytes, const std::string& name) {
  MemoryReader r(bytes);
  return read_gguf(r, "[load_gguf] " + name);
}

void save_gguf(std::string file, std::unordered_map<std::string, array> arrays,
               std::unordered_map<std::string, GGUFMetaData> metadata) {
  const Plan p = plan_gguf(arrays, metadata);
  if (!ends_with(file, ".gguf")) file += ".gguf";
  FileWriter w(file, "[save_gguf]");
  write_gguf(w, p);
  w.close();
}

std::string save_gguf_bytes(std::unordered_map<std::string, array> arrays,
                            std::unordered_map<std::string, GGUFMetaData> metadata) {
  StringWriter w;
  write_gguf(w, plan_gguf(arrays, metadata));
  return w.take();
}

}  // namespace tessera
