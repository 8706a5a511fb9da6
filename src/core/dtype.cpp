// Dtype names, categories and the promotion table (MLX's rules: integers with floats take the
// float type, uint64 with a signed integer becomes float32, float16 with bfloat16 is float32).
#include "tessera/dtype.h"

#include <vector>
#include <stdexcept>

namespace tessera {

namespace {

using V = Dtype::Val;

// Every dtype's traits, in the order of Dtype::Val: the name MLX prints, the C++ type of an
// element as generated code spells it, the buffer-protocol (PEP 3118) format.
struct Traits {
  const char* name;
  const char* cpp_type;
  const char* buffer_format;
};
constexpr Traits kTraits[kNumDtypes] = {
    {"bool", "bool", "?"},
    {"uint8", "uint8_t", "B"},
    {"uint16", "uint16_t", "H"},
    {"uint32", "uint32_t", "I"},
    {"uint64", "uint64_t", "Q"},
    {"int8", "int8_t", "b"},
    {"int16", "int16_t", "h"},
    {"int32", "int32_t", "i"},
    {"int64", "int64_t", "q"},
    {"float16", "tessera::float16_t", "e"},
    {"float32", "float", "f"},
    {"float64", "double", "d"},
    // No PEP 3118 code exists: a memoryview carries the name (MLX's choice too), and NumPy
    // refuses it with a ValueError naming it.
    {"bfloat16", "tessera::bfloat16_t", "bfloat16"},
    {"complex64", "tessera::complex64_t", "Zf"},
};

int index_of(const Dtype& t) { return static_cast<int>(t.val()); }

// Rank of a dtype inside its kind, used to build the promotion table below.
Dtype promote_impl(const Dtype& a, const Dtype& b) {
  if (a == b) return a;
  if (a == complex64 || b == complex64) return complex64;
  auto k_a = kindof(a), k_b = kindof(b);
  bool float_a = k_a == Dtype::Kind::f || k_a == Dtype::Kind::V;
  bool float_b = k_b == Dtype::Kind::f || k_b == Dtype::Kind::V;
  if (float_a && float_b) {
    if (a == float64 || b == float64) return float64;
    return float32;  // any mix of float16 / bfloat16 / float32
  }
  if (float_a) return a;  // a float with an integer or bool keeps the float type
  if (float_b) return b;
  if (a == bool_) return b;
  if (b == bool_) return a;
  bool signed_a = k_a == Dtype::Kind::i, signed_b = k_b == Dtype::Kind::i;
  if (signed_a == signed_b) return a.size() >= b.size() ? a : b;
  const Dtype& u = signed_a ? b : a;  // the unsigned one
  const Dtype& s = signed_a ? a : b;
  if (u == uint64) return float32;
  if (s.size() > u.size()) return s;
  switch (u.size()) {  // signed type wide enough for the unsigned one
    case 1: return int16;
    case 2: return int32;
    default: return int64;
  }
}

struct PromotionTable {
  std::vector<Dtype> t;  // kNumDtypes x kNumDtypes, row-major
  PromotionTable() {
    for (int i = 0; i < kNumDtypes; ++i)
      for (int j = 0; j < kNumDtypes; ++j) t.push_back(promote_impl(kAllDtypes[i], kAllDtypes[j]));
  }
};

const PromotionTable& table() {
  static const PromotionTable t;
  return t;
}

Dtype::Category category_of(const Dtype& t) {
  switch (kindof(t)) {
    case Dtype::Kind::b: return generic;
    case Dtype::Kind::u: return unsignedinteger;
    case Dtype::Kind::i: return signedinteger;
    case Dtype::Kind::f:
    case Dtype::Kind::V: return floating;
    case Dtype::Kind::c: return complexfloating;
  }
  return generic;
}

}  // namespace

Dtype::Kind kindof(const Dtype& t) {
  switch (t.val()) {
    case V::bool_: return Dtype::Kind::b;
    case V::uint8:
    case V::uint16:
    case V::uint32:
    case V::uint64: return Dtype::Kind::u;
    case V::int8:
    case V::int16:
    case V::int32:
    case V::int64: return Dtype::Kind::i;
    case V::float16:
    case V::float32:
    case V::float64: return Dtype::Kind::f;
    case V::bfloat16: return Dtype::Kind::V;
    case V::complex64: return Dtype::Kind::c;
  }
  return Dtype::Kind::b;
}

Dtype promote_types(const Dtype& t1, const Dtype& t2) {
  return table().t[index_of(t1) * kNumDtypes + index_of(t2)];
}

bool issubdtype(const Dtype& a, const Dtype& b) { return a == b; }

bool issubdtype(const Dtype::Category& a, const Dtype::Category& b) {
  if (a == b || b == generic) return true;
  switch (b) {
    case inexact: return a == floating || a == complexfloating;
    case integer: return a == signedinteger || a == unsignedinteger;
    case number: return a != generic;
    default: return false;
  }
}

bool issubdtype(const Dtype& a, const Dtype::Category& b) {
  if (a == bool_) return b == generic;  // bool is only a generic
  return issubdtype(category_of(a), b);
}

bool issubdtype(const Dtype::Category& a, const Dtype& b) {
  (void)a;
  (void)b;
  return false;  // a category is never a sub-type of one concrete dtype
}

std::string dtype_name(const Dtype& t) { return kTraits[index_of(t)].name; }
const char* dtype_cpp_type(const Dtype& t) { return kTraits[index_of(t)].cpp_type; }
const char* dtype_buffer_format(const Dtype& t) { return kTraits[index_of(t)].buffer_format; }

Dtype dtype_from_name(const std::string& name) {
  for (int i = 0; i < kNumDtypes; ++i)
    if (name == kTraits[i].name) return kAllDtypes[i];
  if (name == "bool_") return bool_;
  throw std::invalid_argument("[dtype] unknown dtype name '" + name +
                              "'; expected one of bool, uint8..uint64, int8..int64, float16, "
                              "float32, float64, bfloat16, complex64");
}

std::ostream& operator<<(std::ostream& os, const Dtype& t) { return os << dtype_name(t); }

}  // namespace tessera
