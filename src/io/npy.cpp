// NumPy .npy: header parsing and validation, data decoding (byte order, Fortran order), the
// np.save header layout, and the public load/save of one array (tessera/io.h).
#include "io/npy.h"

#include <algorithm>
#include <bit>
#include <memory>
#include <optional>

#include "tessera/io.h"
#include "tessera/ops.h"
#include "tessera/eval.h"

static_assert(std::endian::native == std::endian::little,
              "the array formats are decoded for a little-endian host");

namespace tessera::detail::io {

namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicLen = 6;

std::string describe(Dtype dtype, const Shape& shape) {
  std::string s = dtype_name(dtype) + " (";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return s + (shape.size() == 1 ? ",)" : ")");
}

// The Python dict literal of a .npy header: {'descr': '<f4', 'fortran_order': False,
// 'shape': (3, 4), } with any spacing, either quote, trailing commas and Python 2 'L' suffixes.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& where) : s_(text), where_(where) {}

  void parse(NpyHeader& h) {
    std::optional<std::string> descr;
    std::optional<bool> fortran;
    std::optional<Shape> shape;
    skip_ws();
    expect('{', "the header must be a Python dict starting with '{'");
    while (true) {
      skip_ws();
      if (eat('}')) break;
      const std::string key = parse_string("a dict key");
      skip_ws();
      expect(':', "expected ':' after key " + printable(key));
      skip_ws();
      if (key == "descr") {
        if (descr) bad("key 'descr' appears twice");
        if (peek() == '[') {
          bad("descr is a list: structured (record) dtypes are not supported; save each field "
              "as its own array");
        }
        descr = parse_string("the descr string");
      } else if (key == "fortran_order") {
        if (fortran) bad("key 'fortran_order' appears twice");
        fortran = parse_bool();
      } else if (key == "shape") {
        if (shape) bad("key 'shape' appears twice");
        shape = parse_shape();
      } else {
        bad("unexpected key " + printable(key) +
            " (a .npy header holds exactly 'descr', 'fortran_order' and 'shape')");
      }
      skip_ws();
      if (eat(',')) continue;
      expect('}', "expected ',' or '}' after the value of " + printable(key));
      break;
    }
    skip_ws();
    if (p_ != s_.size()) bad("unexpected text after the header dict at byte " + std::to_string(p_));
    if (!descr) bad("the header has no 'descr'");
    if (!fortran) bad("the header has no 'fortran_order'");
    if (!shape) bad("the header has no 'shape'");
    set_dtype(*descr, h);
    h.fortran_order = *fortran;
    h.shape = std::move(*shape);
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    std::string_view shown = s_;
    while (!shown.empty() && (shown.back() == ' ' || shown.back() == '\n')) shown.remove_suffix(1);
    fail(where_, "invalid .npy header " + printable(shown, 120) + ": " + what);
  }
  char peek() const { return p_ < s_.size() ? s_[p_] : '\0'; }
  bool eat(char c) {
    if (p_ < s_.size() && s_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  void expect(char c, const std::string& what) {
    if (!eat(c)) bad(what);
  }
  void skip_ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\n' ||
                              s_[p_] == '\r' || s_[p_] == '\f' || s_[p_] == '\v')) {
      ++p_;
    }
  }
  std::string parse_string(const std::string& what) {
    const char q = peek();
    if (q != '\'' && q != '"') bad("expected " + what + " in quotes");
    ++p_;
    std::string out;
    while (true) {
      if (p_ >= s_.size()) bad("unterminated string in " + what);
      const char c = s_[p_++];
      if (c == q) break;
      if (c == '\\') {
        if (p_ >= s_.size()) bad("unterminated string in " + what);
        out.push_back(s_[p_++]);  // \' \" \\ ; nothing else occurs in a valid header
        continue;
      }
      if (c == '\n') bad("newline inside " + what);
      out.push_back(c);
    }
    return out;
  }
  bool parse_bool() {
    if (s_.substr(p_, 4) == "True") {
      p_ += 4;
      return true;
    }
    if (s_.substr(p_, 5) == "False") {
      p_ += 5;
      return false;
    }
    bad("fortran_order must be True or False");
  }
  int32_t parse_dim() {
    if (peek() == '-') bad("the shape has a negative dimension");
    if (peek() < '0' || peek() > '9') bad("the shape must be a tuple of integers");
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(s_[p_++] - '0');
      if (v > static_cast<uint64_t>(INT32_MAX)) {
        bad("a dimension exceeds 2147483647 (Tessera shapes hold int32 dims)");
      }
    }
    if (peek() == 'L' || peek() == 'l') ++p_;  // Python 2 long
    return static_cast<int32_t>(v);
  }
  Shape parse_shape() {
    expect('(', "the shape must be a tuple such as (3, 4), (3,) or ()");
    Shape shape;
    skip_ws();
    if (eat(')')) return shape;
    while (true) {
      if (shape.size() >= kMaxNpyDims) {
        bad("the shape has more than " + std::to_string(kMaxNpyDims) + " dimensions");
      }
      shape.push_back(parse_dim());
      skip_ws();
      if (eat(',')) {
        skip_ws();
        if (eat(')')) return shape;
        continue;
      }
      if (eat(')')) {
        if (shape.size() == 1) bad("the shape (n) is an integer, not a tuple; write (n,)");
        return shape;
      }
      bad("expected ',' or ')' in the shape");
    }
  }
  void set_dtype(const std::string& descr, NpyHeader& h) const {
    std::string_view d = descr;
    char order = '|';
    if (!d.empty() && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) {
      order = d[0];
      d.remove_prefix(1);
    }
    const std::string shown = printable(descr);
    if (d.empty()) bad("empty descr");
    const char kind = d[0];
    std::string_view digits = d.substr(1);
    int size = 0;
    bool numeric = !digits.empty() && digits.size() <= 3;
    for (char c : digits) {
      if (c < '0' || c > '9') numeric = false;
    }
    if (numeric) {
      for (char c : digits) size = size * 10 + (c - '0');
    }
    std::optional<Dtype> dt;
    if (numeric) {
      switch (kind) {
        case 'b': if (size == 1) dt = bool_; break;
        case 'i':
          dt = size == 1 ? std::optional(int8) : size == 2 ? std::optional(int16)
             : size == 4 ? std::optional(int32) : size == 8 ? std::optional(int64) : std::nullopt;
          break;
        case 'u':
          dt = size == 1 ? std::optional(uint8) : size == 2 ? std::optional(uint16)
             : size == 4 ? std::optional(uint32) : size == 8 ? std::optional(uint64)
             : std::nullopt;
          break;
        case 'f':
          dt = size == 2 ? std::optional(float16) : size == 4 ? std::optional(float32)
             : size == 8 ? std::optional(float64) : std::nullopt;
          break;
        case 'c': if (size == 8) dt = complex64; break;
        case 'V': if (size == 2) dt = bfloat16; break;
        default: break;
      }
    }
    if (!dt) {
      std::string why;
      if (kind == 'c' && numeric && size == 16) {
        why = "complex128 is not supported (Tessera's complex dtype is complex64); convert "
              "first, e.g. np.save(f, a.astype(np.complex64))";
      } else if ((kind == 'f' && numeric && (size == 12 || size == 16)) ||
                 (kind == 'c' && numeric && (size == 24 || size == 32))) {
        why = "extended precision (longdouble) is not supported; convert to float64 first";
      } else if (kind == 'O') {
        why = "object arrays (pickled Python objects) are not supported";
      } else if (kind == 'U' || kind == 'S' || kind == 'a') {
        why = "string arrays are not supported";
      } else if (kind == 'M' || kind == 'm') {
        why = "datetime/timedelta arrays are not supported; convert to int64 first";
      } else if (kind == 'V') {
        why = "void dtypes other than 'V2' (bfloat16, as MLX writes it) are not supported";
      } else {
        why = "unknown or unsupported dtype";
      }
      bad("descr " + shown + ": " + why);
    }
    h.dtype = *dt;
    const size_t item = size_of(*dt);
    // '|' and '=' mean native (little) order; bfloat16 as 'V2' has no byte order in NumPy.
    if (order == '>' && item > 1 && *dt != bfloat16) {
      h.swap_unit = *dt == complex64 ? item / 2 : item;
    }
  }

  std::string_view s_;
  size_t p_ = 0;
  const std::string& where_;
};

template <typename U>
void swap_units(uint8_t* p, uint64_t nbytes) {
  for (uint64_t i = 0; i + sizeof(U) <= nbytes; i += sizeof(U)) {
    U v;
    std::memcpy(&v, p + i, sizeof(U));
    if constexpr (sizeof(U) == 2) v = __builtin_bswap16(v);
    if constexpr (sizeof(U) == 4) v = __builtin_bswap32(v);
    if constexpr (sizeof(U) == 8) v = __builtin_bswap64(v);
    std::memcpy(p + i, &v, sizeof(U));
  }
}

void swap_bytes(uint8_t* p, uint64_t nbytes, size_t unit) {
  switch (unit) {
    case 2: swap_units<uint16_t>(p, nbytes); break;
    case 4: swap_units<uint32_t>(p, nbytes); break;
    case 8: swap_units<uint64_t>(p, nbytes); break;
    default: break;
  }
}

// Copies column-major `src` into row-major `dst` (both shape `shape`, items of `Item` bytes).
template <size_t Item>
void fortran_to_c_order(const uint8_t* src, uint8_t* dst, const Shape& shape) {
  const size_t nd = shape.size();
  std::vector<uint64_t> col_stride(nd, 1);  // in elements
  for (size_t k = 1; k < nd; ++k) col_stride[k] = col_stride[k - 1] * shape[k - 1];
  std::vector<int64_t> idx(nd, 0);
  const int64_t inner = shape[nd - 1];
  const uint64_t inner_stride = col_stride[nd - 1];
  uint64_t src_base = 0;
  uint8_t* out = dst;
  while (true) {
    uint64_t s = src_base;
    for (int64_t j = 0; j < inner; ++j, s += inner_stride, out += Item) {
      std::memcpy(out, src + s * Item, Item);
    }
    int64_t k = static_cast<int64_t>(nd) - 2;
    for (; k >= 0; --k) {
      if (++idx[k] < shape[k]) {
        src_base += col_stride[k];
        break;
      }
      src_base -= col_stride[k] * static_cast<uint64_t>(shape[k] - 1);
      idx[k] = 0;
    }
    if (k < 0) break;
  }
}

void reorder_fortran(const uint8_t* src, uint8_t* dst, const Shape& shape, size_t item) {
  switch (item) {
    case 1: fortran_to_c_order<1>(src, dst, shape); break;
    case 2: fortran_to_c_order<2>(src, dst, shape); break;
    case 4: fortran_to_c_order<4>(src, dst, shape); break;
    case 8: fortran_to_c_order<8>(src, dst, shape); break;
    default: throw std::logic_error("[load] unexpected item size");
  }
}

std::string descr_of(Dtype dtype) {
  switch (dtype.val()) {
    case Dtype::Val::bool_: return "|b1";
    case Dtype::Val::uint8: return "|u1";
    case Dtype::Val::uint16: return "<u2";
    case Dtype::Val::uint32: return "<u4";
    case Dtype::Val::uint64: return "<u8";
    case Dtype::Val::int8: return "|i1";
    case Dtype::Val::int16: return "<i2";
    case Dtype::Val::int32: return "<i4";
    case Dtype::Val::int64: return "<i8";
    case Dtype::Val::float16: return "<f2";
    case Dtype::Val::float32: return "<f4";
    case Dtype::Val::float64: return "<f8";
    case Dtype::Val::bfloat16: return "<V2";  // as MLX
    case Dtype::Val::complex64: return "<c8";
  }
  throw std::logic_error("[save] unknown dtype");
}

}  // namespace

NpyHeader read_npy_header(const ByteReader& r, const std::string& where) {
  NpyHeader h;
  const uint64_t size = r.size();
  if (size < kNpyMagicLen + 2) {
    fail(where, "not a .npy file: " + std::to_string(size) +
                    " bytes, fewer than the 8-byte magic and version");
  }
  const std::string head = r.read_string(0, kNpyMagicLen + 2);
  if (head.compare(0, kNpyMagicLen, kNpyMagic, kNpyMagicLen) != 0) {
    std::string hint;
    if (head.compare(0, 2, "PK") == 0) hint = " (it looks like a zip archive: use load_npz)";
    fail(where, "not a .npy file: it starts with " + printable(head) + ", not '\\x93NUMPY'" + hint);
  }
  const auto major = static_cast<uint8_t>(head[6]);
  const auto minor = static_cast<uint8_t>(head[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    fail(where, "unsupported .npy format version " + std::to_string(major) + "." +
                    std::to_string(minor) + " (NumPy writes 1.0, 2.0 or 3.0)");
  }
  const size_t len_bytes = major == 1 ? 2 : 4;
  r.check_range(8, len_bytes, where, "the .npy header length field");
  const std::string len_field = r.read_string(8, len_bytes);
  const uint64_t header_len = load_le(len_field.data(), static_cast<int>(len_bytes));
  if (header_len > kMaxNpyHeaderBytes) {
    fail(where, "the .npy header claims " + std::to_string(header_len) + " bytes, more than the " +
                    std::to_string(kMaxNpyHeaderBytes) + " we accept; the file is corrupt");
  }
  const uint64_t text_start = 8 + len_bytes;
  r.check_range(text_start, header_len, where, "the .npy header");
  const std::string text = r.read_string(text_start, header_len);
  HeaderParser(text, where).parse(h);

  uint64_t count = 1;
  for (int32_t d : h.shape) {
    if (mul_overflows(count, static_cast<uint64_t>(d), &count)) {
      fail(where, "the shape " + describe(h.dtype, h.shape) + " overflows 64-bit element counts");
    }
  }
  if (mul_overflows(count, size_of(h.dtype), &h.nbytes)) {
    fail(where, "the array " + describe(h.dtype, h.shape) + " overflows 64-bit byte counts");
  }
  h.data_offset = text_start + header_len;
  h.prefix = head + len_field + text;
  return h;
}

namespace {

// The header of the .npy in `r`, with its data checked to lie inside `r`.
NpyHeader checked_npy_header(const ByteReader& r, const std::string& where) {
  NpyHeader h = read_npy_header(r, where);
  const uint64_t have = r.size() - h.data_offset;
  if (h.nbytes > have) {
    fail(where, "truncated: the header describes " + describe(h.dtype, h.shape) + ", " +
                    std::to_string(h.nbytes) + " bytes of data, but only " +
                    std::to_string(have) + " follow the header");
  }
  return h;
}

TensorBytes data_of(const NpyHeader& h) {
  return {h.data_offset, h.nbytes, h.swap_unit, h.fortran_order && h.shape.size() > 1};
}

}  // namespace

void read_tensor(const ByteReader& r, const TensorBytes& t, const Shape& shape, Dtype dtype,
                 uint8_t* dst, const RawObserver* observe) {
  const size_t n = static_cast<size_t>(t.nbytes);
  if (n == 0) return;
  if (t.fortran_order) {
    auto raw = std::make_unique_for_overwrite<uint8_t[]>(n);
    r.read(t.offset, raw.get(), n);
    if (observe) (*observe)(raw.get(), n);
    swap_bytes(raw.get(), n, t.swap_unit);
    reorder_fortran(raw.get(), dst, shape, size_of(dtype));
  } else {
    r.read(t.offset, dst, n);
    if (observe) (*observe)(dst, n);
    swap_bytes(dst, n, t.swap_unit);
  }
  if (dtype == bool_) {
    // Any nonzero byte is True to NumPy; a C++ bool must hold exactly 0 or 1.
    for (size_t i = 0; i < n; ++i) dst[i] = dst[i] != 0;
  }
}

array read_npy(const ByteReader& r, const std::string& where, const RawObserver* observe) {
  NpyHeader h = checked_npy_header(r, where);
  OwnedBuffer out(static_cast<size_t>(h.nbytes));
  if (observe) (*observe)(h.prefix.data(), h.prefix.size());
  read_tensor(r, data_of(h), h.shape, h.dtype, out.data(), observe);
  if (observe) {
    std::string chunk;
    for (uint64_t off = h.data_offset + h.nbytes; off < r.size();) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(r.size() - off, 1 << 20));
      chunk.resize(k);
      r.read(off, chunk.data(), k);
      (*observe)(chunk.data(), k);
      off += k;
    }
  }
  return array(out.release(), std::move(h.shape), h.dtype, allocator::free);
}

array load_npy_lazy(std::shared_ptr<const ByteReader> r, const std::string& where, StreamOrDevice s) {
  NpyHeader h = checked_npy_header(*r, where);
  const TensorBytes t = data_of(h);
  return lazy_tensor(std::move(r), where, t, std::move(h.shape), h.dtype, s);
}

std::string npy_header(const Shape& shape, Dtype dtype) {
  std::string dict = "{'descr': '" + descr_of(dtype) + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    dict += (i ? ", " : "") + std::to_string(shape[i]);
  }
  dict += shape.size() == 1 ? ",), }" : "), }";
  // np.save leaves room to grow the first axis in place (GROWTH_AXIS_MAX_DIGITS = 21).
  if (!shape.empty()) dict.append(21 - std::to_string(shape[0]).size(), ' ');
  // Version 1.0 always suffices: the dict is under 1 KiB for 64 dims.
  const size_t hlen = dict.size() + 1;                       // with the final '\n'
  const size_t pad = 64 - (kNpyMagicLen + 2 + 2 + hlen) % 64;  // as NumPy: 1..64 spaces
  std::string out(kNpyMagic, kNpyMagicLen);
  out.push_back('\x01');
  out.push_back('\x00');
  put_le(out, hlen + pad, 2);
  out += dict;
  out.append(pad, ' ');
  out.push_back('\n');
  return out;
}

array prepare_for_save(array a) {
  a.eval();
  if (!a.flags().row_contiguous) {
    a = contiguous(a);
    a.eval();
  }
  return a;
}

PreparedArrays prepare_sorted_for_save(const std::unordered_map<std::string, array>& arrays) {
  PreparedArrays out(arrays.begin(), arrays.end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<array> values;
  for (const auto& kv : out) values.push_back(kv.second);
  eval(values);
  for (auto& kv : out) kv.second = prepare_for_save(kv.second);
  return out;
}

}  // namespace tessera::detail::io

namespace tessera {

namespace {
void write_npy(detail::io::ByteWriter& w, const array& a) {
  w.write(detail::io::npy_header(a.shape(), a.dtype()));
  if (a.nbytes() > 0) w.write(a.data<char>(), a.nbytes());
}
}  // namespace

array load(const std::string& file, StreamOrDevice s) {
  auto r = std::make_shared<const detail::io::FileReader>(file, "[load]");
  return detail::io::load_npy_lazy(std::move(r), "[load] " + file, s);
}

void save(const std::string& file, array a) {
  a = detail::io::prepare_for_save(std::move(a));
  const std::string path = detail::io::ends_with(file, ".npy") ? file : file + ".npy";
  detail::io::FileWriter w(path, "[save]");
  write_npy(w, a);
  w.close();
}

array load_npy_bytes(std::string_view bytes, const std::string& name) {
  detail::io::MemoryReader r(bytes);
  return detail::io::read_npy(r, "[load] " + name);
}

std::string save_npy_bytes(array a) {
  a = detail::io::prepare_for_save(std::move(a));
  detail::io::StringWriter w;
  write_npy(w, a);
  return w.take();
}

}  // namespace tessera
