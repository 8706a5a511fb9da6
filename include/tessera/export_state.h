// A primitive's parameters as bytes, for export_function / import_function (tessera/export.h).
//
// A primitive that can be exported lists its parameters with TESSERA_STATE(field, ...) in its
// class body: the fields its constructor takes after the stream, in the constructor's order.
// That defines state() (a tuple of copies) and write_state(); src/core/export_registry.cpp names
// every such class once, and import builds it again with make_shared<T>(stream, fields...), so a
// field list that does not match a constructor does not compile.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/dtype.h"

namespace tessera::export_detail {

class StateWriter {
 public:
  void raw(const void* p, size_t n) { bytes_.append(static_cast<const char*>(p), n); }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// Reads what a StateWriter wrote; a read past the end is an invalid_argument naming `where`.
class StateReader {
 public:
  StateReader(std::string_view bytes, std::string where)
      : bytes_(bytes), where_(std::move(where)) {}
  // Throws unless n more bytes are there.
  void need(uint64_t n) const {
    if (n > bytes_.size() - pos_) {
      throw std::invalid_argument(where_ + ": the file ends early (truncated or corrupt)");
    }
  }
  void raw(void* p, size_t n) {
    need(n);
    std::memcpy(p, bytes_.data() + pos_, n);
    pos_ += n;
  }
  bool done() const { return pos_ == bytes_.size(); }
  const std::string& where() const { return where_; }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
  std::string where_;
};

template <class T>
struct Codec;  // put(w, value) and get(r) for one type

template <class T>
void put(StateWriter& w, const T& v) {
  Codec<T>::put(w, v);
}
template <class T>
T get(StateReader& r) {
  return Codec<T>::get(r);
}

template <class T>
  requires(std::is_arithmetic_v<T> || std::is_enum_v<T>)
struct Codec<T> {
  static void put(StateWriter& w, const T& v) { w.raw(&v, sizeof(T)); }
  static T get(StateReader& r) {
    T v;
    r.raw(&v, sizeof(T));
    return v;
  }
};

template <>
struct Codec<Dtype> {
  static void put(StateWriter& w, const Dtype& d) { tessera::export_detail::put(w, d.val()); }
  static Dtype get(StateReader& r) {
    auto v = tessera::export_detail::get<Dtype::Val>(r);
    for (const Dtype& d : kAllDtypes) {
      if (d.val() == v) return d;
    }
    throw std::invalid_argument(r.where() + ": unknown dtype code " +
                                std::to_string(static_cast<int>(v)));
  }
};

template <>
struct Codec<std::string> {
  static void put(StateWriter& w, const std::string& s) {
    tessera::export_detail::put<uint64_t>(w, s.size());
    w.raw(s.data(), s.size());
  }
  static std::string get(StateReader& r) {
    const auto n = tessera::export_detail::get<uint64_t>(r);
    r.need(n);  // before allocating: a corrupt length must not ask for gigabytes
    std::string s(static_cast<size_t>(n), '\0');
    r.raw(s.data(), s.size());
    return s;
  }
};

template <class T>
struct Codec<std::vector<T>> {
  static void put(StateWriter& w, const std::vector<T>& v) {
    tessera::export_detail::put<uint64_t>(w, v.size());
    for (const auto& x : v) tessera::export_detail::put(w, static_cast<const T&>(x));
  }
  static std::vector<T> get(StateReader& r) {
    auto n = tessera::export_detail::get<uint64_t>(r);
    std::vector<T> v;
    for (uint64_t i = 0; i < n; ++i) v.push_back(tessera::export_detail::get<T>(r));
    return v;
  }
};

template <class T>
struct Codec<std::optional<T>> {
  static void put(StateWriter& w, const std::optional<T>& v) {
    tessera::export_detail::put<bool>(w, v.has_value());
    if (v) tessera::export_detail::put(w, *v);
  }
  static std::optional<T> get(StateReader& r) {
    if (!tessera::export_detail::get<bool>(r)) return std::nullopt;
    return tessera::export_detail::get<T>(r);
  }
};

template <class A, class B>
struct Codec<std::pair<A, B>> {
  static void put(StateWriter& w, const std::pair<A, B>& v) {
    tessera::export_detail::put(w, v.first);
    tessera::export_detail::put(w, v.second);
  }
  static std::pair<A, B> get(StateReader& r) {
    A a = tessera::export_detail::get<A>(r);
    return {std::move(a), tessera::export_detail::get<B>(r)};
  }
};

template <class... T>
struct Codec<std::tuple<T...>> {
  static void put(StateWriter& w, const std::tuple<T...>& v) {
    std::apply([&](const auto&... x) { (tessera::export_detail::put(w, x), ...); }, v);
  }
  static std::tuple<T...> get(StateReader& r) {
    // Braced initialisation evaluates left to right.
    return std::tuple<T...>{tessera::export_detail::get<T>(r)...};
  }
};

}  // namespace tessera::export_detail
