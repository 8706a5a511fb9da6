// Data types and MLX's type promotion (a lattice in the spirit of JAX's).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "tessera/types.h"

namespace tessera {

struct Dtype {
  enum class Val : uint8_t {
    bool_,
    uint8,
    uint16,
    uint32,
    uint64,
    int8,
    int16,
    int32,
    int64,
    float16,
    float32,
    float64,
    bfloat16,
    complex64,
  };
  enum class Kind { b, u, i, f, c, V };
  enum class Category {
    complexfloating,
    floating,
    inexact,
    signedinteger,
    unsignedinteger,
    integer,
    number,
    generic
  };

  constexpr explicit Dtype(Val val, uint8_t size) : val_(val), size_(size) {}
  constexpr operator Val() const { return val_; }  // NOLINT: switch on a Dtype
  constexpr Val val() const { return val_; }
  constexpr uint8_t size() const { return size_; }

 private:
  Val val_;
  uint8_t size_;
};

inline constexpr int kNumDtypes = 14;

inline constexpr Dtype bool_{Dtype::Val::bool_, 1};
inline constexpr Dtype uint8{Dtype::Val::uint8, 1};
inline constexpr Dtype uint16{Dtype::Val::uint16, 2};
inline constexpr Dtype uint32{Dtype::Val::uint32, 4};
inline constexpr Dtype uint64{Dtype::Val::uint64, 8};
inline constexpr Dtype int8{Dtype::Val::int8, 1};
inline constexpr Dtype int16{Dtype::Val::int16, 2};
inline constexpr Dtype int32{Dtype::Val::int32, 4};
inline constexpr Dtype int64{Dtype::Val::int64, 8};
inline constexpr Dtype float16{Dtype::Val::float16, 2};
inline constexpr Dtype float32{Dtype::Val::float32, 4};
inline constexpr Dtype float64{Dtype::Val::float64, 8};
inline constexpr Dtype bfloat16{Dtype::Val::bfloat16, 2};
inline constexpr Dtype complex64{Dtype::Val::complex64, 8};

inline constexpr Dtype::Category complexfloating = Dtype::Category::complexfloating;
inline constexpr Dtype::Category floating = Dtype::Category::floating;
inline constexpr Dtype::Category inexact = Dtype::Category::inexact;
inline constexpr Dtype::Category signedinteger = Dtype::Category::signedinteger;
inline constexpr Dtype::Category unsignedinteger = Dtype::Category::unsignedinteger;
inline constexpr Dtype::Category integer = Dtype::Category::integer;
inline constexpr Dtype::Category number = Dtype::Category::number;
inline constexpr Dtype::Category generic = Dtype::Category::generic;

// All 14 dtypes in enum order (handy for tests and tables).
inline constexpr Dtype kAllDtypes[kNumDtypes] = {bool_,  uint8,   uint16,  uint32,   uint64,
                                                 int8,   int16,   int32,   int64,    float16,
                                                 float32, float64, bfloat16, complex64};

constexpr bool operator==(const Dtype& a, const Dtype& b) { return a.val() == b.val(); }

bool issubdtype(const Dtype& a, const Dtype& b);
bool issubdtype(const Dtype::Category& a, const Dtype& b);
bool issubdtype(const Dtype& a, const Dtype::Category& b);
bool issubdtype(const Dtype::Category& a, const Dtype::Category& b);

Dtype promote_types(const Dtype& t1, const Dtype& t2);
inline uint8_t size_of(const Dtype& t) { return t.size(); }
Dtype::Kind kindof(const Dtype& t);
// "float32", "bool", ... as MLX prints them.
std::string dtype_name(const Dtype& t);
// The C++ type of an element as generated code spells it ("float", "tessera::bfloat16_t").
const char* dtype_cpp_type(const Dtype& t);
// The buffer-protocol (PEP 3118) format of an element ("f", "e", "Zf"); bfloat16, which has
// none, gives "bfloat16".
const char* dtype_buffer_format(const Dtype& t);
// Inverse of dtype_name; throws std::invalid_argument for an unknown name.
Dtype dtype_from_name(const std::string& name);
std::ostream& operator<<(std::ostream& os, const Dtype& t);

inline bool is_floating_point(const Dtype& t) { return issubdtype(t, inexact); }
inline bool is_complex(const Dtype& t) { return t == complex64; }
inline bool is_integral(const Dtype& t) { return issubdtype(t, integer); }

template <typename T>
struct TypeToDtype;
template <> struct TypeToDtype<bool> { operator Dtype() const { return bool_; } };
template <> struct TypeToDtype<uint8_t> { operator Dtype() const { return uint8; } };
template <> struct TypeToDtype<uint16_t> { operator Dtype() const { return uint16; } };
template <> struct TypeToDtype<uint32_t> { operator Dtype() const { return uint32; } };
template <> struct TypeToDtype<uint64_t> { operator Dtype() const { return uint64; } };
template <> struct TypeToDtype<int8_t> { operator Dtype() const { return int8; } };
template <> struct TypeToDtype<int16_t> { operator Dtype() const { return int16; } };
template <> struct TypeToDtype<int32_t> { operator Dtype() const { return int32; } };
template <> struct TypeToDtype<int64_t> { operator Dtype() const { return int64; } };
template <> struct TypeToDtype<float16_t> { operator Dtype() const { return float16; } };
template <> struct TypeToDtype<float> { operator Dtype() const { return float32; } };
// As MLX: a C++ double makes a float32 array (array(1.0), full(shape, 2.0), x + 1.0); ask for
// float64 explicitly (array(1.0, float64)).
template <> struct TypeToDtype<double> { operator Dtype() const { return float32; } };
template <> struct TypeToDtype<bfloat16_t> { operator Dtype() const { return bfloat16; } };
template <> struct TypeToDtype<complex64_t> { operator Dtype() const { return complex64; } };
// `long`/`unsigned long long` may be distinct from int64_t/uint64_t on some ABIs.
template <> struct TypeToDtype<long long> { operator Dtype() const { return int64; } };
template <> struct TypeToDtype<unsigned long long> { operator Dtype() const { return uint64; } };

// A C++ type with a dtype. Constraining array's scalar constructor with it keeps
// std::is_constructible<array, std::nullopt_t> false without instantiating TypeToDtype for
// other types, which clang does (std::optional<array> parameters defaulted to std::nullopt).
template <typename T>
concept HasDtype = requires { Dtype(TypeToDtype<T>()); };

}  // namespace tessera
