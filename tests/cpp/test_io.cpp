// Array IO (tessera/io.h): .npy, .npz, safetensors and GGUF against bytes built here from each spec and
// files written by NumPy 2.4 (embedded as hex), round trips of every dtype, files on disk, and
// the validation of truncated or corrupt input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/io.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

// ---- byte builders ----

std::string le(uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}
std::string be(uint64_t v, int n) {
  std::string s = le(v, n);
  return std::string(s.rbegin(), s.rend());
}
std::string f32le(float f) { return le(std::bit_cast<uint32_t>(f), 4); }
std::string f32be(float f) { return be(std::bit_cast<uint32_t>(f), 4); }

std::string unhex(std::string_view h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// A .npy file: magic, version, length field, `dict` padded with spaces and '\n' to 64 bytes.
std::string npy(const std::string& dict, const std::string& data, int major = 1) {
  std::string head = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  const int len_bytes = major == 1 ? 2 : 4;
  std::string text = dict;
  while ((head.size() + len_bytes + text.size() + 1) % 64) text += ' ';
  text += '\n';
  return head + le(text.size(), len_bytes) + text + data;
}

// Bitwise CRC-32 (IEEE), independent of zlib.
uint32_t crc32_ref(std::string_view s) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

struct ZipItem {
  std::string name;
  std::string payload;  // the bytes stored in the archive
  uint64_t size = 0;    // uncompressed size
  uint32_t crc = 0;     // of the uncompressed bytes
  uint16_t method = 0;
  uint16_t flags = 0;
};
ZipItem stored(const std::string& name, const std::string& data) {
  return {name, data, data.size(), crc32_ref(data), 0, 0};
}
// Deflate without zlib: one final "stored" deflate block (RFC 1951 BTYPE 00).
ZipItem deflated_as_stored_block(const std::string& name, const std::string& data) {
  const std::string payload = std::string(1, '\x01') + le(data.size(), 2) +
                              le(~data.size() & 0xFFFF, 2) + data;
  return {name, payload, data.size(), crc32_ref(data), 8, 0};
}

struct ZipLayout {
  bool zip64_central = false;  // sizes and offsets as 0xFFFFFFFF + the zip64 extra field
  bool zip64_end = false;      // zip64 end record + locator, end record fields at their maximum
};
// A zip archive per APPNOTE: local headers and data, central directory, end records.
std::string build_zip(const std::vector<ZipItem>& items, ZipLayout layout = {}) {
  std::string out, cd;
  std::vector<uint64_t> offsets;
  for (const ZipItem& e : items) {
    offsets.push_back(out.size());
    out += le(0x04034b50, 4) + le(20, 2) + le(e.flags, 2) + le(e.method, 2) + le(0, 2) +
           le(0x21, 2) + le(e.crc, 4) + le(e.payload.size(), 4) + le(e.size, 4) +
           le(e.name.size(), 2) + le(0, 2) + e.name + e.payload;
  }
  const uint64_t cd_offset = out.size();
  for (size_t i = 0; i < items.size(); ++i) {
    const ZipItem& e = items[i];
    uint64_t csize = e.payload.size(), usize = e.size, off = offsets[i];
    std::string extra;
    if (layout.zip64_central) {
      extra = le(1, 2) + le(24, 2) + le(usize, 8) + le(csize, 8) + le(off, 8);
      csize = usize = off = 0xFFFFFFFFu;
    }
    cd += le(0x02014b50, 4) + le(45, 2) + le(45, 2) + le(e.flags, 2) + le(e.method, 2) +
          le(0, 2) + le(0x21, 2) + le(e.crc, 4) + le(csize, 4) + le(usize, 4) +
          le(e.name.size(), 2) + le(extra.size(), 2) + le(0, 2) + le(0, 2) + le(0, 2) +
          le(0, 4) + le(off, 4) + e.name + extra;
  }
  out += cd;
  const uint64_t n = items.size();
  if (layout.zip64_end) {
    const uint64_t z = out.size();
    out += le(0x06064b50, 4) + le(44, 8) + le(45, 2) + le(45, 2) + le(0, 4) + le(0, 4) +
           le(n, 8) + le(n, 8) + le(cd.size(), 8) + le(cd_offset, 8);
    out += le(0x07064b50, 4) + le(0, 4) + le(z, 8) + le(1, 4);
    out += le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(0xFFFF, 2) + le(0xFFFF, 2) +
           le(0xFFFFFFFFu, 4) + le(0xFFFFFFFFu, 4) + le(0, 2);
  } else {
    out += le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(n, 2) + le(n, 2) + le(cd.size(), 4) +
           le(cd_offset, 4) + le(0, 2);
  }
  return out;
}

// A safetensors file: 8-byte little-endian header length, JSON header, data.
std::string safetensors(const std::string& header, const std::string& data) {
  return le(header.size(), 8) + header + data;
}

// ---- reading arrays back ----

std::string bytes_of(array a) {
  a = contiguous(a);
  a.eval();
  return std::string(a.data<char>(), a.nbytes());
}
template <typename T>
std::vector<T> values_of(array a) {
  a.eval();  // a file load is read when evaluated
  EXPECT_EQ(a.itemsize(), sizeof(T));
  std::vector<T> v(a.size());
  if (!v.empty()) std::memcpy(v.data(), a.data<T>(), a.nbytes());
  return v;
}

// Runs f and expects std::invalid_argument whose message holds every needle.
void expect_invalid(const std::function<void()>& f, std::initializer_list<std::string> needles) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    for (const std::string& n : needles) {
      EXPECT_NE(msg.find(n), std::string::npos) << "message lacks \"" << n << "\": " << msg;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected std::invalid_argument, got another exception: " << e.what();
  }
}

// An array of `dtype` with small non-negative values (exact in every dtype).
array sample(Dtype dtype, const Shape& shape) {
  size_t n = 1;
  for (int32_t d : shape) n *= static_cast<size_t>(d);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 13) + (i % 2 ? 0.5f : 0.0f);
  return array(v.data(), shape, dtype);
}

// ---- files written by NumPy 2.4.6 (hex) ----

// np.savez(f, a=np.arange(6, dtype='<i4').reshape(2, 3), b=np.array([1.5, -2.0], '<f8'))
constexpr const char* kNumpySavez =
    "504b03042d00000000000000210050b44d84ffffffffffffffff05001400612e6e70790100100098000000000000"
    "009800000000000000934e554d5059010076007b276465736372273a20273c6934272c2027666f727472616e5f6f"
    "72646572273a2046616c73652c20277368617065273a2028322c2033292c207d2020202020202020202020202020"
    "20202020202020202020202020202020202020202020202020202020202020202020202020202020202020200a00"
    "0000000100000002000000030000000400000005000000504b03042d000000000000002100b098c541ffffffffff"
    "ffffff05001400622e6e70790100100090000000000000009000000000000000934e554d5059010076007b276465"
    "736372273a20273c6638272c2027666f727472616e5f6f72646572273a2046616c73652c20277368617065273a20"
    "28322c292c207d202020202020202020202020202020202020202020202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020200a000000000000f83f00000000000000c0504b01022d032d00"
    "000000000000210050b44d849800000098000000050000000000000000000000800100000000612e6e7079504b01"
    "022d032d000000000000002100b098c54190000000900000000500000000000000000000008001cf000000622e6e"
    "7079504b0506000000000200020066000000960100000000";

// np.savez_compressed(f, x=np.arange(100, dtype='<u2'), flag=np.array([True, False, True]))
constexpr const char* kNumpySavezCompressed =
    "504b03042d00000008000000210036d8f4c3ffffffffffffffff05001400782e6e70790100100048010000000000"
    "00d9000000000000009dc8d9365b010040d14d8d3153b3720deda5526256f34c4b52f35c11c4f260612578b17c45"
    "7f98fe82f376f6bfc45e7cf328c7b397f02a9dbdcc84134138f534184683f0fa3ef39849dd25ef3357e9ffbe92ba"
    "cda6df3d7b937a48bf7ff7402c16ed8906afc1878b9023d72779f2152854a45844895265ca55a854a55a8dcf6ad5"
    "a9d7a05193662dbe68d526d0ae43a72e5f7d13ead6e3bb5e513ff4e9173360d0906123468d19f7d3844953a6cd98"
    "3567de82454b96ad58b5e697dfd66d884bf863d3966d3b76edd977e0d09163274efd7526e95cca854b6f504b0304"
    "2d00000008000000210016938cbbffffffffffffffff08001400666c61672e6e7079010010008300000000000000"
    "47000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a05e9364a8aea3a09e965f54529498179f5f"
    "94920a12774bcc294e058a17672416a402f91ac63a9a3a0ab50a14002e46064600504b01022d032d000000080000"
    "00210036d8f4c3d900000048010000050000000000000000000000800100000000782e6e7079504b01022d032d00"
    "000008000000210016938cbb4700000083000000080000000000000000000000800110010000666c61672e6e7079"
    "504b0506000000000200020069000000910100000000";

// np.save(f, np.asfortranarray(np.arange(6, dtype='>f4').reshape(2, 3)))
constexpr const char* kNumpyFortranBigEndian =
    "934e554d5059010076007b276465736372273a20273e6634272c2027666f727472616e5f6f72646572273a205472"
    "75652c20277368617065273a2028322c2033292c207d202020202020202020202020202020202020202020202020"
    "20202020202020202020202020202020202020202020202020202020202020202020200a00000000404000003f80"
    "0000408000004000000040a00000";

// np.save(f, np.array([1 + 2j, -3.5 + 0.25j], '>c8'))
constexpr const char* kNumpyComplexBigEndian =
    "934e554d5059010076007b276465736372273a20273e6338272c2027666f727472616e5f6f72646572273a204661"
    "6c73652c20277368617065273a2028322c292c207d20202020202020202020202020202020202020202020202020"
    "20202020202020202020202020202020202020202020202020202020202020202020200a3f80000040000000c060"
    "00003e800000";

// np.save(f, np.arange(12, dtype='<f4').reshape(3, 4))
constexpr const char* kNumpyFloat32x3x4 =
    "934e554d5059010076007b276465736372273a20273c6634272c2027666f727472616e5f6f72646572273a204661"
    "6c73652c20277368617065273a2028332c2034292c207d2020202020202020202020202020202020202020202020"
    "20202020202020202020202020202020202020202020202020202020202020202020200a000000000000803f0000"
    "004000004040000080400000a0400000c0400000e04000000041000010410000204100003041";

// np.savez(f, x=np.arange(3, dtype=np.int32))
constexpr const char* kNumpySavezInt32x3 =
    "504b03042d00000000000000210002ecbda9ffffffffffffffff05001400782e6e7079010010008c000000000000"
    "008c00000000000000934e554d5059010076007b276465736372273a20273c6934272c2027666f727472616e5f6f"
    "72646572273a2046616c73652c20277368617065273a2028332c292c207d20202020202020202020202020202020"
    "20202020202020202020202020202020202020202020202020202020202020202020202020202020202020200a00"
    "0000000100000002000000504b01022d032d00000000000000210002ecbda98c0000008c00000005000000000000"
    "0000000000800100000000782e6e7079504b0506000000000100010033000000c30000000000";
}  // namespace

// ---------------------------------------------------------------------------------------------
// .npy
// ---------------------------------------------------------------------------------------------

TEST(Npy, SaveWritesTheBytesNumPyWrites) {
  const array a = reshape(arange(12.0, float32), {3, 4});
  EXPECT_EQ(save_npy_bytes(a), unhex(kNumpyFloat32x3x4));
}

TEST(Npy, HeaderLayoutAsNumPy) {
  // np.save pads the dict with 21 - len(str(shape[0])) spaces, then to 64 bytes, then '\n'.
  const std::string bytes = save_npy_bytes(array({true, false}));
  const std::string dict = "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }";
  std::string want = std::string("\x93NUMPY\x01\x00", 8) + le(118, 2) + dict;
  want.append(127 - want.size(), ' ');
  want += '\n';
  want += std::string("\x01\x00", 2);
  EXPECT_EQ(bytes, want);
  // A scalar has no growth padding: "'shape': (), }".
  const std::string scalar = save_npy_bytes(array(2.5, float64));
  EXPECT_EQ(scalar.size(), 128u + 8u);
  EXPECT_NE(scalar.find("'descr': '<f8', 'fortran_order': False, 'shape': (), }"),
            std::string::npos);
  EXPECT_EQ(scalar[127], '\n');
}

TEST(Npy, LoadsNumPyFortranOrderBigEndian) {
  const array a = load_npy_bytes(unhex(kNumpyFortranBigEndian));
  EXPECT_EQ(a.dtype(), float32);
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_TRUE(a.flags().row_contiguous);
  EXPECT_EQ(values_of<float>(a), (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST(Npy, LoadsNumPyBigEndianComplexSwappingEachHalf) {
  const array a = load_npy_bytes(unhex(kNumpyComplexBigEndian));
  EXPECT_EQ(a.dtype(), complex64);
  const auto v = values_of<complex64_t>(a);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0], complex64_t(1.0f, 2.0f));
  EXPECT_EQ(v[1], complex64_t(-3.5f, 0.25f));
}

TEST(Npy, RoundTripsEveryDtypeAndShape) {
  for (Dtype dt : kAllDtypes) {
    for (const Shape& shape : {Shape{}, Shape{0}, Shape{5}, Shape{2, 3}, Shape{2, 0, 3},
                               Shape{1, 2, 1, 3}}) {
      const array a = sample(dt, shape);
      const array b = load_npy_bytes(save_npy_bytes(a));
      EXPECT_EQ(b.dtype(), dt) << dtype_name(dt);
      EXPECT_EQ(b.shape(), shape) << dtype_name(dt);
      EXPECT_TRUE(b.is_available());
      EXPECT_EQ(bytes_of(b), bytes_of(a)) << dtype_name(dt);
    }
  }
}

TEST(Npy, BFloat16IsV2AsMLXWritesIt) {
  const array a = astype(array({1.0f, -2.5f, 0.15625f}), bfloat16);
  const std::string bytes = save_npy_bytes(a);
  EXPECT_NE(bytes.find("'descr': '<V2'"), std::string::npos);
  const array b = load_npy_bytes(bytes);
  EXPECT_EQ(b.dtype(), bfloat16);
  EXPECT_EQ(bytes_of(b), bytes_of(a));
  // NumPy re-saves a V2 array as '|V2'; that loads too.
  const array c = load_npy_bytes(npy("{'descr': '|V2', 'fortran_order': False, 'shape': (1,), }",
                                     le(0x3F80, 2)));
  EXPECT_EQ(c.dtype(), bfloat16);
  EXPECT_EQ(c.item<float>(), 1.0f);
}

TEST(Npy, FormatVersions2And3) {
  const std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }";
  for (int major : {2, 3}) {
    const array a = load_npy_bytes(npy(dict, le(7, 4) + le(0xFFFFFFFFu, 4), major));
    EXPECT_EQ(values_of<int32_t>(a), (std::vector<int32_t>{7, -1})) << major;
  }
}

TEST(Npy, AcceptsEveryHeaderSpellingPythonWrites) {
  const std::string data = le(1, 2) + le(2, 2) + le(3, 2) + le(4, 2);
  for (const std::string& dict : {
           std::string("{'descr': '<i2', 'fortran_order': False, 'shape': (2, 2), }"),
           std::string("{'descr':'<i2','fortran_order':False,'shape':(2,2)}"),
           std::string("{\"shape\": (2, 2,), \"fortran_order\": False, \"descr\": \"<i2\"}"),
           std::string("{'descr': '<i2', 'fortran_order': False, 'shape': (2L, 2L), }"),
           std::string("  {  'descr' : '<i2' ,\n 'fortran_order' : False , 'shape' : ( 2 , 2 ) } "),
       }) {
    const array a = load_npy_bytes(npy(dict, data));
    EXPECT_EQ(a.shape(), (Shape{2, 2})) << dict;
    EXPECT_EQ(values_of<int16_t>(a), (std::vector<int16_t>{1, 2, 3, 4})) << dict;
  }
}

TEST(Npy, BigEndianEveryWidth) {
  auto load1 = [](const std::string& descr, const std::string& data) {
    return load_npy_bytes(
        npy("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (1,), }", data));
  };
  EXPECT_EQ(values_of<int16_t>(load1(">i2", be(0xFFFE, 2)))[0], -2);
  EXPECT_EQ(values_of<uint32_t>(load1(">u4", be(0x01020304u, 4)))[0], 0x01020304u);
  EXPECT_EQ(values_of<int64_t>(load1(">i8", be(0x0102030405060708ull, 8)))[0],
            0x0102030405060708ll);
  EXPECT_EQ(values_of<double>(load1(">f8", be(std::bit_cast<uint64_t>(-0.75), 8)))[0], -0.75);
  EXPECT_EQ(values_of<float>(load1(">f4", f32be(3.25f)))[0], 3.25f);
  EXPECT_EQ(static_cast<float>(values_of<float16_t>(load1(">f2", be(0x3C00, 2)))[0]), 1.0f);
  // One-byte dtypes have no byte order.
  EXPECT_EQ(values_of<uint8_t>(load1("|u1", "\xAB"))[0], 0xAB);
  EXPECT_EQ(values_of<int8_t>(load1("|i1", "\xFF"))[0], -1);
}

TEST(Npy, FortranOrderThreeDims) {
  // Element (i, j, k) = 100 i + 10 j + k, stored column-major: offset i + 2 j + 6 k.
  std::string data(2 * 3 * 4 * 2, '\0');
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 4; ++k) {
        data.replace((i + 2 * j + 6 * k) * 2, 2, le(100 * i + 10 * j + k, 2));
      }
    }
  }
  const array a =
      load_npy_bytes(npy("{'descr': '<i2', 'fortran_order': True, 'shape': (2, 3, 4), }", data));
  std::vector<int16_t> want;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 4; ++k) want.push_back(static_cast<int16_t>(100 * i + 10 * j + k));
    }
  }
  EXPECT_EQ(a.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(values_of<int16_t>(a), want);
  // Fortran order of a 1-d or empty array is the C order.
  const array e =
      load_npy_bytes(npy("{'descr': '<f4', 'fortran_order': True, 'shape': (0, 3), }", ""));
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
}

TEST(Npy, BoolBytesAreNormalisedToZeroOrOne) {
  const array a =
      load_npy_bytes(npy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                         std::string("\x00\x02\xFF", 3)));
  EXPECT_EQ(bytes_of(a), std::string("\x00\x01\x01", 3));
}

TEST(Npy, TrailingBytesAreIgnoredAsNumPyDoes) {
  const array a = load_npy_bytes(
      npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f32le(1.5f) + "junk"));
  EXPECT_EQ(a.item<float>(), 1.5f);
}

TEST(Npy, RefusesDtypesTesseraLacksWithTheReason) {
  auto with_descr = [](const std::string& descr) {
    return npy("{'descr': " + descr + ", 'fortran_order': False, 'shape': (1,), }",
               std::string(32, '\0'));
  };
  expect_invalid([&] { load_npy_bytes(with_descr("'<c16'"), "z.npy"); },
                 {"[load] z.npy", "complex128", "astype(np.complex64)"});
  expect_invalid([&] { load_npy_bytes(with_descr("'<f16'")); }, {"extended precision"});
  expect_invalid([&] { load_npy_bytes(with_descr("'|O'")); }, {"object arrays"});
  expect_invalid([&] { load_npy_bytes(with_descr("'<U3'")); }, {"string arrays"});
  expect_invalid([&] { load_npy_bytes(with_descr("'<M8[ns]'")); }, {"datetime"});
  expect_invalid([&] { load_npy_bytes(with_descr("'|V8'")); }, {"void"});
  expect_invalid([&] { load_npy_bytes(with_descr("'<q9'")); }, {"'<q9'", "unknown"});
  expect_invalid([&] { load_npy_bytes(with_descr("[('a', '<f4')]")); }, {"structured"});
}

TEST(Npy, RejectsCorruptHeadersNamingTheFile) {
  const std::string good_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string good = npy(good_dict, std::string(24, '\0'));
  ASSERT_NO_THROW(load_npy_bytes(good));
  auto bad = [](const std::string& bytes, std::initializer_list<std::string> needles) {
    expect_invalid([&] { load_npy_bytes(bytes, "w.npy"); }, needles);
  };
  bad("", {"[load] w.npy", "not a .npy file"});
  bad("\x93NUMP", {"not a .npy file"});
  bad("XXNUMPY" + good.substr(7), {"not a .npy file"});
  std::string v4 = good;
  v4[6] = 4;
  bad(v4, {"unsupported .npy format version 4.0"});
  std::string v11 = good;
  v11[7] = 1;
  bad(v11, {"version 1.1"});
  bad(good.substr(0, 9), {"header length field", "runs past the end"});
  bad(good.substr(0, 60), {"the .npy header", "runs past the end"});
  std::string huge = std::string("\x93NUMPY\x02\x00", 8) + le(70000, 4) + std::string(70000, ' ');
  bad(huge, {"70000", "more than the 65536"});
  bad(good.substr(0, good.size() - 1), {"truncated", "24 bytes of data", "23 follow"});
  auto dict = [](const std::string& d) { return npy(d, std::string(64, '\0')); };
  bad(dict("{'descr': '<f4', 'fortran_order': False}"), {"has no 'shape'"});
  bad(dict("{'descr': '<f4', 'shape': (2,)}"), {"has no 'fortran_order'"});
  bad(dict("{'fortran_order': False, 'shape': (2,)}"), {"has no 'descr'"});
  bad(dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'foo': 1}"),
      {"unexpected key 'foo'"});
  bad(dict("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}"),
      {"'descr' appears twice"});
  bad(dict("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}"), {"negative dimension"});
  bad(dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2147483648,)}"),
      {"exceeds 2147483647"});
  bad(dict("{'descr': '<f4', 'fortran_order': False, 'shape': (3)}"), {"not a tuple"});
  bad(dict("{'descr': '<f4', 'fortran_order': False, 'shape': [3]}"), {"tuple"});
  bad(dict("{'descr': '<f4', 'fortran_order': 1, 'shape': (3,)}"), {"True or False"});
  bad(dict("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} x"), {"unexpected text"});
  bad(dict("{'descr': '<f4, 'fortran_order': False, 'shape': (3,)}"), {"invalid .npy header"});
  bad(dict("['descr']"), {"dict"});
  std::string many = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 65; ++i) many += "1, ";
  bad(dict(many + ")}"), {"more than 64 dimensions"});
  bad(dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2147483647, 2147483647, "
           "2147483647, 2147483647)}"),
      {"overflows 64-bit"});
}

TEST(Npy, LoadOfAnArchivePointsToLoadNpz) {
  expect_invalid([] { load_npy_bytes(unhex(kNumpySavez)); }, {"zip archive", "load_npz"});
}

// ---------------------------------------------------------------------------------------------
// .npz
// ---------------------------------------------------------------------------------------------

TEST(Npz, LoadsNumPySavez) {
  const auto m = load_npz_bytes(unhex(kNumpySavez));
  ASSERT_EQ(m.size(), 2u);
  const array& a = m.at("a");
  EXPECT_EQ(a.dtype(), int32);
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(values_of<int32_t>(a), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(values_of<double>(m.at("b")), (std::vector<double>{1.5, -2.0}));
}

TEST(Npz, LoadsNumPySavezCompressed) {
  const auto m = load_npz_bytes(unhex(kNumpySavezCompressed));
  ASSERT_EQ(m.size(), 2u);
  std::vector<uint16_t> want(100);
  for (int i = 0; i < 100; ++i) want[i] = static_cast<uint16_t>(i);
  EXPECT_EQ(values_of<uint16_t>(m.at("x")), want);
  EXPECT_EQ(m.at("flag").dtype(), bool_);
  EXPECT_EQ(bytes_of(m.at("flag")), std::string("\x01\x00\x01", 3));
}

TEST(Npz, SavezWritesTheBytesNumPyWrites) {
  EXPECT_EQ(savez_bytes({{"x", array({0, 1, 2}, int32)}}), unhex(kNumpySavezInt32x3));
}

TEST(Npz, RoundTripsStoredAndCompressed) {
  std::unordered_map<std::string, array> in;
  for (Dtype dt : kAllDtypes) in.emplace(dtype_name(dt), sample(dt, {3, 5}));
  in.emplace("empty", zeros({0, 4}, float32));
  in.emplace("scalar", array(7, int64));
  in.emplace("caf\xC3\xA9/nested", sample(int16, {4}));  // UTF-8 and '/' in names
  for (bool compressed : {false, true}) {
    const std::string bytes = savez_bytes(in, compressed);
    EXPECT_EQ(static_cast<int>(bytes[8]), compressed ? 8 : 0);  // the first entry's method
    const auto out = load_npz_bytes(bytes);
    ASSERT_EQ(out.size(), in.size());
    for (const auto& [k, a] : in) {
      ASSERT_TRUE(out.count(k)) << k;
      EXPECT_EQ(out.at(k).dtype(), a.dtype()) << k;
      EXPECT_EQ(out.at(k).shape(), a.shape()) << k;
      EXPECT_EQ(bytes_of(out.at(k)), bytes_of(a)) << k;
    }
  }
  EXPECT_TRUE(load_npz_bytes(savez_bytes({})).empty());
}

TEST(Npz, ReadsZip64RecordsAndExtraFields) {
  const std::string x = save_npy_bytes(array({1.0f, 2.0f, 3.0f}));
  const std::string y = save_npy_bytes(array({5, 6}, int64));
  const std::vector<ZipItem> items{stored("x.npy", x), stored("y.npy", y)};
  for (ZipLayout layout : {ZipLayout{false, false}, ZipLayout{true, false},
                           ZipLayout{false, true}, ZipLayout{true, true}}) {
    const auto m = load_npz_bytes(build_zip(items, layout));
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(values_of<float>(m.at("x")), (std::vector<float>{1, 2, 3}));
    EXPECT_EQ(values_of<int64_t>(m.at("y")), (std::vector<int64_t>{5, 6}));
  }
}

TEST(Npz, InflatesHandBuiltDeflateStreams) {
  const std::string x = save_npy_bytes(array({4, 5, 6}, uint8));
  const auto m = load_npz_bytes(build_zip({deflated_as_stored_block("x.npy", x)}));
  EXPECT_EQ(values_of<uint8_t>(m.at("x")), (std::vector<uint8_t>{4, 5, 6}));
}

TEST(Npz, EntriesWithoutTheNpySuffixKeepTheirName) {
  const std::string x = save_npy_bytes(array({1}, int32));
  const auto m = load_npz_bytes(build_zip({stored("raw", x), stored("dir/", "")}));
  ASSERT_EQ(m.size(), 1u);  // the directory entry is skipped
  EXPECT_TRUE(m.count("raw"));
}

TEST(Npz, RejectsCorruptArchivesNamingTheEntry) {
  const std::string good = unhex(kNumpySavez);
  auto bad = [](const std::string& bytes, std::initializer_list<std::string> needles) {
    expect_invalid([&] { load_npz_bytes(bytes, "w.npz"); }, needles);
  };
  // A flipped data byte of entry a.npy (its data starts at 55 + 128).
  std::string flipped = good;
  flipped[55 + 130] ^= 0x10;
  bad(flipped, {"[load_npz] w.npz", "entry 'a.npy'", "CRC-32 mismatch"});
  bad(good.substr(0, 300), {"no end-of-central-directory record"});
  bad(good.substr(0, 10), {"not a zip archive"});
  bad(save_npy_bytes(array(1.0f)), {"not a zip archive", "use load"});
  // The end record's central directory offset (at end - 6) moved past the file.
  std::string moved = good;
  moved.replace(moved.size() - 6, 4, le(100000, 4));
  bad(moved, {"the central directory", "does not lie inside the file"});
  // The entry count (at end - 12) says more than the directory holds.
  std::string more = good;
  more.replace(more.size() - 12, 2, le(50, 2));
  more.replace(more.size() - 14, 2, le(50, 2));
  bad(more, {"claims 50 entries"});

  const std::string x = save_npy_bytes(array({1.0f, 2.0f}));
  ZipItem bz = stored("x.npy", x);
  bz.method = 12;
  bad(build_zip({bz}), {"entry 'x.npy'", "method 12 (bzip2)"});
  ZipItem enc = stored("x.npy", x);
  enc.flags = 1;
  bad(build_zip({enc}), {"encrypted"});
  bad(build_zip({stored("x.npy", x), stored("x.npy", x)}), {"entry 'x.npy'", "appears twice"});
  bad(build_zip({stored("x", x), stored("x.npy", x)}), {"gives the key 'x' a second time"});
  ZipItem sizes = stored("x.npy", x);
  sizes.size += 1;
  bad(build_zip({sizes}), {"is stored (not compressed) but its sizes differ"});
  // Entry a claims 40 more bytes than it has: its data runs over b's local header.
  ZipItem a = stored("a.npy", x), b = stored("b.npy", x);
  std::string zip = build_zip({a, b});
  const size_t cd = zip.find(std::string("PK\x01\x02", 4));
  zip.replace(cd + 20, 8, le(x.size() + 40, 4) + le(x.size() + 40, 4));
  bad(zip, {"overlap"});
  // A local header offset past the data area.
  std::string far = build_zip({stored("x.npy", x)});
  far.replace(far.find(std::string("PK\x01\x02", 4)) + 42, 4, le(1u << 30, 4));
  bad(far, {"local header offset"});
  bad(build_zip({stored("notes.txt", "hello, world")}), {"entry 'notes.txt'", "not a .npy file"});
  // Deflate: a ratio no deflate stream reaches, a damaged stream, a stream cut short.
  ZipItem bomb = deflated_as_stored_block("x.npy", x);
  bomb.size = 0xFFFFFFF0u;
  bad(build_zip({bomb}), {"more than deflate can produce"});
  ZipItem broken = deflated_as_stored_block("x.npy", x);
  broken.payload[0] = '\x07';  // BTYPE 11 is reserved
  bad(build_zip({broken}), {"entry 'x.npy'", "deflate data is corrupt"});
  ZipItem cut = deflated_as_stored_block("x.npy", x);
  cut.payload.resize(cut.payload.size() - 5);
  bad(build_zip({cut}), {"entry 'x.npy'", "ends before the stream does"});
  ZipItem longer = deflated_as_stored_block("x.npy", x);
  longer.size -= 1;
  bad(build_zip({longer}), {"inflates to more than"});
  ZipItem shorter = deflated_as_stored_block("x.npy", x);
  shorter.size += 1;
  bad(build_zip({shorter}), {"inflates to " + std::to_string(x.size()) + " bytes"});
  ZipItem wrong_crc = deflated_as_stored_block("x.npy", x);
  wrong_crc.crc ^= 1;
  bad(build_zip({wrong_crc}), {"CRC-32 mismatch"});
}

// ---------------------------------------------------------------------------------------------
// safetensors
// ---------------------------------------------------------------------------------------------

TEST(Safetensors, LoadsAHandBuiltFile) {
  const std::string header =
      R"({"__metadata__":{"format":"pt","note":"hi"},)"
      R"("w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("ids":{"dtype":"I64","shape":[3],"data_offsets":[16,40]},)"
      R"("mask":{"dtype":"BOOL","shape":[2],"data_offsets":[40,42]},)"
      R"("none":{"dtype":"F16","shape":[0,5],"data_offsets":[42,42]}}   )";
  const std::string data = f32le(1) + f32le(2) + f32le(3) + f32le(-4) + le(7, 8) +
                           le(0xFFFFFFFFFFFFFFFFull, 8) + le(1ull << 40, 8) +
                           std::string("\x01\x00", 2);
  const auto [arrays, meta] = load_safetensors_bytes(safetensors(header, data));
  ASSERT_EQ(arrays.size(), 4u);
  EXPECT_EQ(arrays.at("w").shape(), (Shape{2, 2}));
  EXPECT_EQ(values_of<float>(arrays.at("w")), (std::vector<float>{1, 2, 3, -4}));
  EXPECT_EQ(values_of<int64_t>(arrays.at("ids")), (std::vector<int64_t>{7, -1, 1ll << 40}));
  EXPECT_EQ(bytes_of(arrays.at("mask")), std::string("\x01\x00", 2));
  EXPECT_EQ(arrays.at("none").shape(), (Shape{0, 5}));
  EXPECT_EQ(arrays.at("none").dtype(), float16);
  EXPECT_EQ(meta.size(), 2u);
  EXPECT_EQ(meta.at("format"), "pt");
  EXPECT_EQ(meta.at("note"), "hi");
}

TEST(Safetensors, WritesTheSpecLayout) {
  const std::string bytes =
      save_safetensors_bytes({{"b", array({1.0f, 2.0f, 3.0f})}, {"a", array({1, 2}, int16)}},
                             {{"format", "mlx"}});
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u);  // data 8-byte aligned
  ASSERT_EQ(bytes.size(), 8 + n + 4 + 12);
  const auto j = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(j["__metadata__"]["format"], "mlx");
  EXPECT_EQ(j["a"]["dtype"], "I16");
  EXPECT_EQ(j["a"]["shape"], nlohmann::json::array({2}));
  EXPECT_EQ(j["a"]["data_offsets"], nlohmann::json::array({0, 4}));
  EXPECT_EQ(j["b"]["dtype"], "F32");
  EXPECT_EQ(j["b"]["data_offsets"], nlohmann::json::array({4, 16}));
  EXPECT_EQ(bytes.substr(8 + n), le(1, 2) + le(2, 2) + f32le(1) + f32le(2) + f32le(3));
  // No metadata, no "__metadata__".
  const std::string plain = save_safetensors_bytes({{"a", array({1}, int8)}});
  EXPECT_EQ(plain.find("__metadata__"), std::string::npos);
}

TEST(Safetensors, RoundTripsEveryDtypeWithMetadata) {
  std::unordered_map<std::string, array> in;
  for (Dtype dt : kAllDtypes) in.emplace("t." + dtype_name(dt), sample(dt, {2, 3}));
  in.emplace("empty", zeros({0}, bfloat16));
  in.emplace("scalar", array(3.5f));
  in.emplace("strided", transpose(sample(int32, {3, 4})));  // saved in C order
  const std::unordered_map<std::string, std::string> meta{{"format", "mlx"}, {"k", "v \"q\""}};
  const auto [out, out_meta] = load_safetensors_bytes(save_safetensors_bytes(in, meta));
  EXPECT_EQ(out_meta, meta);
  ASSERT_EQ(out.size(), in.size());
  for (const auto& [k, a] : in) {
    ASSERT_TRUE(out.count(k)) << k;
    EXPECT_EQ(out.at(k).dtype(), a.dtype()) << k;
    EXPECT_EQ(out.at(k).shape(), a.shape()) << k;
    EXPECT_EQ(bytes_of(out.at(k)), bytes_of(a)) << k;
  }
}

TEST(Safetensors, Fp8CodesLoadAsTheirBytesAsMLX) {
  const std::string header =
      R"({"f8":{"dtype":"F8_E4M3","shape":[5],"data_offsets":[0,5]},)"
      R"("e8":{"dtype":"F8_E8M0","shape":[2],"data_offsets":[5,7]}})";
  const auto [arrays, meta] =
      load_safetensors_bytes(safetensors(header, std::string("\x38\xC0\x01\x7E\x7F\x7F\x80", 7)));
  const array& a = arrays.at("f8");
  EXPECT_EQ(a.dtype(), uint8);
  EXPECT_EQ(values_of<uint8_t>(a), (std::vector<uint8_t>{0x38, 0xC0, 0x01, 0x7E, 0x7F}));
  const array f = from_fp8(a, float32);
  eval({f});
  const auto v = values_of<float>(f);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.0f);
  EXPECT_EQ(v[2], std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(v[3], 448.0f);                // the largest finite value
  EXPECT_TRUE(std::isnan(v[4]));
  EXPECT_EQ(values_of<uint8_t>(arrays.at("e8")), (std::vector<uint8_t>{0x7F, 0x80}));
}

TEST(Safetensors, RejectsCorruptHeadersNamingTheTensor) {
  auto bad = [](const std::string& bytes, std::initializer_list<std::string> needles) {
    expect_invalid([&] { load_safetensors_bytes(bytes, "m.safetensors"); }, needles);
  };
  auto one = [](const std::string& tensor, const std::string& data) {
    return safetensors("{\"w\":" + tensor + "}", data);
  };
  const std::string f32x3 = std::string(12, '\0');
  ASSERT_NO_THROW(
      load_safetensors_bytes(one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,12]})", f32x3)));
  bad("", {"[load_safetensors] m.safetensors", "fewer than the 8-byte header length"});
  bad(le(200, 8) + "{}", {"truncated", "200 bytes"});
  bad(le(100000001, 8) + "{}", {"100000000"});
  bad(le(1, 8) + "{", {"too small"});
  bad(safetensors("[1, 2]", ""), {"does not start with '{'"});
  bad(safetensors("{\"w\": ", ""), {"malformed"});
  bad(safetensors(std::string("{\"w\":\"\xFF\"}"), ""), {"malformed"});
  bad(safetensors("{\"w\":1}x", ""), {"malformed"});
  bad(safetensors(R"({"w":{},"w":{}})", ""), {"'w' appears twice"});
  bad(one("[]", ""), {"tensor 'w'", "not a JSON object"});
  bad(one(R"({"shape":[3],"data_offsets":[0,12]})", f32x3), {"tensor 'w'", "\"dtype\""});
  bad(one(R"({"dtype":"F8_E5M2","shape":[3],"data_offsets":[0,3]})", "abc"),
      {"tensor 'w'", "'F8_E5M2' is not supported"});
  bad(one(R"({"dtype":"F32","data_offsets":[0,12]})", f32x3), {"\"shape\""});
  bad(one(R"({"dtype":"F32","shape":[-3],"data_offsets":[0,12]})", f32x3),
      {"tensor 'w'", "non-negative integer"});
  bad(one(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,12]})", f32x3),
      {"non-negative integer"});
  bad(one(R"({"dtype":"F32","shape":[4294967296],"data_offsets":[0,12]})", f32x3),
      {"exceeds 2147483647"});
  bad(one(R"({"dtype":"F32","shape":[2147483647,2147483647,2147483647],"data_offsets":[0,12]})",
          f32x3),
      {"overflows"});
  bad(one(R"({"dtype":"F32","shape":[3],"data_offsets":[0]})", f32x3), {"data_offsets"});
  bad(one(R"({"dtype":"F32","shape":[3],"data_offsets":[12,0]})", f32x3),
      {"end before they begin"});
  bad(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,12]})", f32x3),
      {"tensor 'w'", "hold 12 bytes but F32 with shape [2] needs 8"});
  bad(one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,12]})", f32x3.substr(0, 11)),
      {"tensor 'w'", "run past the end of the data section (11 bytes)"});
  bad(one(R"({"dtype":"F32","shape":[2],"data_offsets":[4,12]})", f32x3), {"a gap"});
  bad(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})", f32x3), {"trailing bytes"});
  bad(safetensors(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                  R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                  "abcdef"),
      {"tensor 'b'", "overlaps tensor 'a'"});
  bad(safetensors(R"({"__metadata__":{"n":1}})", ""), {"'n'", "is not a string"});
  bad(safetensors(R"({"__metadata__":[]})", ""), {"\"__metadata__\" is not a JSON object"});
}

TEST(Safetensors, NullMetadataIsNoMetadata) {
  const auto [arrays, meta] = load_safetensors_bytes(safetensors(R"({"__metadata__":null})", ""));
  EXPECT_TRUE(arrays.empty());
  EXPECT_TRUE(meta.empty());
}

TEST(Safetensors, SaveRejectsReservedAndInvalidNames) {
  expect_invalid([] { save_safetensors_bytes({{"__metadata__", array(1.0f)}}); },
                 {"reserves"});
  expect_invalid([] { save_safetensors_bytes({{std::string("\xFF"), array(1.0f)}}); },
                 {"UTF-8"});
  expect_invalid([] { save_safetensors_bytes({}, {{"k", std::string("\xC3")}}); }, {"UTF-8"});
}

// ---------------------------------------------------------------------------------------------
// GGUF (the Python tests check every block type against llama.cpp's gguf package)
// ---------------------------------------------------------------------------------------------

std::string gguf_str(const std::string& s) { return le(s.size(), 8) + s; }

// A version-3 file with one UINT32 key and one tensor of `type` over `data` (ne = {ne0, ne1}).
std::string gguf_file(uint32_t type, uint64_t ne0, uint64_t ne1, const std::string& data) {
  std::string f = "GGUF" + le(3, 4) + le(1, 8) + le(1, 8);
  f += gguf_str("answer") + le(4, 4) + le(42, 4);
  f += gguf_str("t") + le(2, 4) + le(ne0, 8) + le(ne1, 8) + le(type, 4) + le(0, 8);
  f.append((32 - f.size() % 32) % 32, '\0');
  return f + data;
}

TEST(Gguf, HandBuiltFileLoadsWithShapeReversed) {
  std::string data;
  for (int i = 0; i < 6; ++i) data += f32le(static_cast<float>(i) - 2.5f);
  const auto [arrays, meta] = load_gguf_bytes(gguf_file(0, 3, 2, data));
  const array& t = arrays.at("t");
  EXPECT_EQ(t.shape(), (Shape{2, 3}));  // ggml's ne0 is the innermost dimension
  EXPECT_EQ(values_of<float>(t), (std::vector<float>{-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f}));
  const array& answer = std::get<array>(meta.at("answer"));
  EXPECT_EQ(answer.dtype(), uint32);
  EXPECT_EQ(answer.item<uint32_t>(), 42u);
}

TEST(Gguf, Q8_0BlockBecomesMlxAffineCodes) {
  // One block: d = 0.5 (float16 0x3800), q = -16 .. 15 as int8.
  std::string block = le(0x3800, 2);
  for (int q = -16; q < 16; ++q) block.push_back(static_cast<char>(static_cast<int8_t>(q)));
  const auto [arrays, meta] = load_gguf_bytes(gguf_file(8, 32, 1, block));
  const array& w = arrays.at("t");
  EXPECT_EQ(w.dtype(), uint32);
  EXPECT_EQ(w.shape(), (Shape{1, 8}));
  const array scales = astype(arrays.at("t.scales"), float32);
  const array biases = astype(arrays.at("t.biases"), float32);
  const array x = dequantize(w, scales, biases, 32, 8);
  eval({scales, biases, x});
  EXPECT_EQ(values_of<float>(scales), (std::vector<float>{0.5f}));
  EXPECT_EQ(values_of<float>(biases), (std::vector<float>{-64.0f}));
  std::vector<float> want;
  for (int q = -16; q < 16; ++q) want.push_back(0.5f * static_cast<float>(q));
  EXPECT_EQ(values_of<float>(x), want);
}

TEST(Gguf, RoundTripOfTensorsAndMetadata) {
  const array a = reshape(arange(12.0, float32), {3, 4});
  const array at = transpose(a);
  const array b = astype(array({1, -2, 3}, int32), int64);
  eval({at, b});
  std::unordered_map<std::string, GGUFMetaData> meta = {
      {"s", std::string("text")},
      {"l", std::vector<std::string>{"x", "yz"}},
      {"f", array(0.25, float64)},
      {"v", array({1, 2, 3}, int16)},
  };
  const std::string bytes = save_gguf_bytes({{"a", at}, {"b", b}}, meta);
  EXPECT_EQ(bytes.substr(0, 8), "GGUF" + le(3, 4));
  const auto [arrays, back] = load_gguf_bytes(bytes);
  EXPECT_EQ(arrays.at("a").shape(), (Shape{4, 3}));
  EXPECT_EQ(values_of<float>(arrays.at("a")), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(values_of<int64_t>(arrays.at("b")), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(std::get<std::string>(back.at("s")), "text");
  EXPECT_EQ(std::get<std::vector<std::string>>(back.at("l")), (std::vector<std::string>{"x", "yz"}));
  EXPECT_EQ(std::get<array>(back.at("f")).dtype(), float64);
  EXPECT_EQ(std::get<array>(back.at("f")).item<double>(), 0.25);
  EXPECT_EQ(values_of<int16_t>(std::get<array>(back.at("v"))), (std::vector<int16_t>{1, 2, 3}));
  EXPECT_EQ(save_gguf_bytes({{"b", b}, {"a", at}}, meta), bytes);  // key order, not insertion
}

TEST(Gguf, CorruptInputNamesTheProblem) {
  const std::string good = gguf_file(0, 2, 1, f32le(1) + f32le(2));
  expect_invalid([&] { load_gguf_bytes(good.substr(0, good.size() - 1)); },
                 {"tensor 't'", "runs past the end"});
  expect_invalid([&] { load_gguf_bytes(good.substr(0, 30)); }, {"truncated"});
  expect_invalid([&] { load_gguf_bytes(gguf_file(18, 256, 1, std::string(98, '\0'))); },
                 {"tensor 't'", "IQ3_XXS"});
  expect_invalid([&] { load_gguf_bytes(gguf_file(2, 16, 1, std::string(18, '\0'))); },
                 {"rows of 16 elements", "block of 32"});
  EXPECT_THROW(save_gguf_bytes({{"u", array({1, 2}, uint8)}}), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------

class IoFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("tessera_io_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(IoFiles, SaveAndLoadEachFormatAppendingExtensions) {
  const array a = reshape(arange(6.0, float32), {2, 3});
  save(path("a"), a);
  EXPECT_TRUE(std::filesystem::exists(path("a.npy")));
  EXPECT_EQ(bytes_of(load(path("a.npy"))), bytes_of(a));
  save(path("b.npy"), a);
  EXPECT_TRUE(std::filesystem::exists(path("b.npy")));
  EXPECT_FALSE(std::filesystem::exists(path("b.npy.npy")));

  savez(path("z"), {{"a", a}, {"i", array({1, 2}, int32)}}, true);
  const auto z = load_npz(path("z.npz"));
  EXPECT_EQ(bytes_of(z.at("a")), bytes_of(a));
  EXPECT_EQ(values_of<int32_t>(z.at("i")), (std::vector<int32_t>{1, 2}));

  save_safetensors(path("m"), {{"a", a}}, {{"k", "v"}});
  const auto [st, meta] = load_safetensors(path("m.safetensors"));
  EXPECT_EQ(bytes_of(st.at("a")), bytes_of(a));
  EXPECT_EQ(meta.at("k"), "v");
}

TEST_F(IoFiles, SaveWritesNonContiguousInputsInCOrder) {
  const array t = transpose(reshape(arange(6.0, float32), {2, 3}));  // [[0,3],[1,4],[2,5]]
  save(path("t.npy"), t);
  const array l = load(path("t.npy"));
  EXPECT_EQ(l.shape(), (Shape{3, 2}));
  EXPECT_EQ(values_of<float>(l), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  save(path("b.npy"), broadcast_to(array(7.0f), {2, 2}));
  EXPECT_EQ(values_of<float>(load(path("b.npy"))), (std::vector<float>{7, 7, 7, 7}));
}

TEST_F(IoFiles, MissingAndUnreadableFilesNameThePath) {
  const std::string missing = path("missing.npy");
  expect_invalid([&] { load(missing); }, {missing, "No such file or directory"});
  expect_invalid([&] { load_npz(missing); }, {"[load_npz]", missing});
  expect_invalid([&] { load_safetensors(missing); }, {"[load_safetensors]", missing});
  expect_invalid([&] { load(dir_.string()); }, {dir_.string(), "not a regular file"});
  const std::string nowhere = path("no/such/dir/x.npy");
  try {
    save(nowhere, array(1.0f));
    ADD_FAILURE() << "save into a missing directory did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(nowhere), std::string::npos) << e.what();
  }
  EXPECT_THROW(savez(path("no/such/dir/x"), {}), std::runtime_error);
  EXPECT_THROW(save_safetensors(path("no/such/dir/x"), {}), std::runtime_error);
}

TEST_F(IoFiles, FileLoadsReadEachTensorWhenItIsEvaluated) {
  const array a = reshape(astype(arange(12.0), float64), {3, 4});
  const array flags = array({true, false, true});
  save(path("a.npy"), a);
  save_safetensors(path("m.safetensors"), {{"a", a}, {"flags", flags}});
  const Stream s = new_stream(Device::cpu);
  array x = load(path("a.npy"), s);
  auto [st, meta] = load_safetensors(path("m.safetensors"), s);
  EXPECT_FALSE(x.is_available());  // nothing read yet
  EXPECT_FALSE(st.at("a").is_available());
  EXPECT_EQ(x.shape(), (Shape{3, 4}));
  EXPECT_EQ(st.at("flags").dtype(), bool_);
  // The open file outlives its name: the data is read from what load() checked.
  std::filesystem::remove(path("a.npy"));
  std::filesystem::remove(path("m.safetensors"));
  array y = x * 2.0;
  eval(y);
  EXPECT_EQ(bytes_of(y), bytes_of(a * 2.0));
  EXPECT_EQ(bytes_of(st.at("a")), bytes_of(a));
  EXPECT_EQ(bytes_of(st.at("flags")), std::string("\x01\x00\x01", 3));
  // A file that shrinks between load and evaluation: a runtime error naming file and tensor.
  save_safetensors(path("w.safetensors"), {{"weight", ones({64}, float32)}});
  auto [w, unused] = load_safetensors(path("w.safetensors"));
  std::filesystem::resize_file(path("w.safetensors"), 64);
  try {
    eval(w.at("weight"));
    ADD_FAILURE() << "reading a shrunk file did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path("w.safetensors")), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tensor 'weight'"), std::string::npos) << e.what();
  }
}

TEST_F(IoFiles, TruncatedFilesNameTheFileAndTheTensor) {
  save_safetensors(path("m.safetensors"), {{"weight", zeros({4, 4}, float32)}});
  std::filesystem::resize_file(path("m.safetensors"),
                               std::filesystem::file_size(path("m.safetensors")) - 3);
  expect_invalid([&] { load_safetensors(path("m.safetensors")); },
                 {path("m.safetensors"), "tensor 'weight'", "run past the end"});
  save(path("a.npy"), zeros({10}, int32));
  std::filesystem::resize_file(path("a.npy"), 150);  // the header and 22 of 40 data bytes
  expect_invalid([&] { load(path("a.npy")); }, {path("a.npy"), "truncated"});
}
