// Bounded random mutation of valid .npy, .npz and safetensors encodings (tessera/io.h): every
// mutated input must either load, into arrays whose buffers hold their bytes, or throw
// std::invalid_argument. Any other exception, a crash or a sanitizer report fails.
// TESSERA_TEST_IO_FUZZ_ITERATIONS overrides the iteration count of each test (the seed is fixed,
// so a failure reproduces; the failing input is printed as hex).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <typeinfo>
#include <vector>

#include "tessera/io.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

uint64_t iterations(uint64_t fallback) {
  const char* v = std::getenv("TESSERA_TEST_IO_FUZZ_ITERATIONS");
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (*end != '\0' || n == 0) {
    ADD_FAILURE() << "TESSERA_TEST_IO_FUZZ_ITERATIONS=" << v << " is not a positive integer";
    return fallback;
  }
  return n;
}

std::string hex(const std::string& s) {
  std::string out;
  char buf[4];
  for (unsigned char c : s) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    out += buf;
  }
  return out;
}

array sample(Dtype dtype, const Shape& shape) {
  size_t n = 1;
  for (int32_t d : shape) n *= static_cast<size_t>(d);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7) % 11);
  return array(v.data(), shape, dtype);
}

// Touches every byte of a loaded array (so that a sanitizer sees a short buffer) and checks the
// buffer holds the array's bytes.
void check_consistent(const array& a) {
  ASSERT_TRUE(a.is_available());
  ASSERT_TRUE(a.flags().row_contiguous);
  size_t n = 1;
  for (int32_t d : a.shape()) {
    ASSERT_GE(d, 0);
    n *= static_cast<size_t>(d);
  }
  ASSERT_EQ(a.size(), n);
  ASSERT_EQ(a.nbytes(), n * a.itemsize());
  ASSERT_GE(a.buffer_size(), a.nbytes());
  const auto* p = a.data<unsigned char>();
  unsigned sum = 0;
  for (size_t i = 0; i < a.nbytes(); ++i) sum += p[i];
  volatile unsigned sink = sum;
  (void)sink;
  if (a.dtype() == bool_) {
    for (size_t i = 0; i < a.nbytes(); ++i) ASSERT_LE(p[i], 1) << "a bool byte that is not 0/1";
  }
}

// A format under test: valid seeds, its in-memory loader, and the offsets of the little-endian
// binary fields worth aiming at (length fields, zip sizes and offsets).
struct Format {
  const char* name;
  std::vector<std::string> seeds;
  std::function<void(const std::string&)> parse;  // throws, or checks what it loaded
  std::function<std::vector<size_t>(const std::string&)> fields;
};

std::vector<size_t> npy_fields(const std::string&) { return {6, 7, 8, 9}; }
std::vector<size_t> safetensors_fields(const std::string&) { return {0, 1, 2, 3, 4}; }
// Size, offset and count fields of every zip record found by signature.
std::vector<size_t> zip_fields(const std::string& s) {
  std::vector<size_t> out;
  for (size_t p = s.find("PK"); p != std::string::npos; p = s.find("PK", p + 1)) {
    if (p + 4 > s.size()) break;
    const std::string sig = s.substr(p, 4);
    const std::vector<size_t>* rel = nullptr;
    static const std::vector<size_t> kLocal{8, 14, 18, 22, 26, 28};
    static const std::vector<size_t> kCentral{10, 16, 20, 24, 28, 30, 32, 42};
    static const std::vector<size_t> kEnd{8, 10, 12, 16, 20};
    if (sig == std::string("PK\x03\x04", 4)) rel = &kLocal;
    if (sig == std::string("PK\x01\x02", 4)) rel = &kCentral;
    if (sig == std::string("PK\x05\x06", 4)) rel = &kEnd;
    if (rel) {
      for (size_t r : *rel) out.push_back(p + r);
    }
  }
  return out;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  std::string mutate(std::string s, const std::vector<size_t>& fields) {
    // Half the inputs get one mutation (most then still reach the data), the rest two to four.
    const int n = below(2) ? 1 : 2 + static_cast<int>(below(3));
    for (int k = 0; k < n; ++k) {
      if (s.empty()) s.push_back(static_cast<char>(below(256)));
      switch (below(8)) {
        case 0: s[below(s.size())] ^= static_cast<char>(1u << below(8)); break;
        case 1: s[below(s.size())] = interesting_byte(); break;
        case 2: s.resize(below(s.size())); break;
        case 3: {
          const size_t at = below(s.size() + 1);
          std::string ins(1 + below(16), '\0');
          for (char& c : ins) c = below(2) ? interesting_byte() : static_cast<char>(below(256));
          s.insert(at, ins);
          break;
        }
        case 4: {
          const size_t at = below(s.size());
          s.erase(at, 1 + below(16));
          break;
        }
        case 5: {  // a digit of a header number (shape, offsets, lengths in text)
          std::vector<size_t> digits;
          const size_t limit = std::min<size_t>(s.size(), 1024);
          for (size_t i = 0; i < limit; ++i) {
            if (s[i] >= '0' && s[i] <= '9') digits.push_back(i);
          }
          if (!digits.empty()) {
            s[digits[below(digits.size())]] = static_cast<char>('0' + below(10));
          }
          break;
        }
        default: {  // a binary length / size / offset field: edit it by a little or a lot
          if (fields.empty()) break;
          const size_t at = fields[below(fields.size())];
          const size_t width = below(2) ? 4 : 2;
          if (at + width > s.size()) break;
          uint64_t v = 0;
          for (size_t i = 0; i < width; ++i) {
            v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
          }
          static const int64_t kDeltas[] = {-64, -8, -1, 1, 8, 64};
          switch (below(3)) {
            case 0: v += static_cast<uint64_t>(kDeltas[below(6)]); break;
            case 1: v = below(2) ? 0 : ~uint64_t{0}; break;
            default: v = rng_(); break;
          }
          for (size_t i = 0; i < width; ++i) {
            s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
          }
          break;
        }
      }
    }
    return s;
  }

 private:
  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  char interesting_byte() {
    static const unsigned char kBytes[] = {0x00, 0xFF, 0x7F, 0x80, 0x01, 0x20, '{', '}', '(',
                                           ')',  ',',  '"',  '\'', ':',  '[', ']', '-', '9'};
    return static_cast<char>(kBytes[below(sizeof kBytes)]);
  }
  std::mt19937_64 rng_;
};

std::vector<Format> formats() {
  std::vector<Format> out;
  {
    std::vector<std::string> seeds{
        save_npy_bytes(sample(float32, {3, 4})),
        save_npy_bytes(sample(int16, {5})),
        save_npy_bytes(array(true)),
        save_npy_bytes(sample(complex64, {2, 2})),
        save_npy_bytes(sample(bfloat16, {0, 3})),
        save_npy_bytes(sample(uint64, {2, 1, 2})),
    };
    // Big-endian, Fortran order, format 2.0.
    std::string dict = "{'descr': '>i4', 'fortran_order': True, 'shape': (2, 3), }";
    while ((12 + dict.size() + 1) % 64) dict += ' ';
    dict += '\n';
    std::string f = std::string("\x93NUMPY\x02\x00", 8);
    for (int i = 0; i < 4; ++i) f.push_back(static_cast<char>((dict.size() >> (8 * i)) & 0xff));
    f += dict;
    for (int i = 0; i < 6; ++i) f += std::string("\x00\x00\x00", 3) + static_cast<char>(i);
    seeds.push_back(f);
    out.push_back({"npy", seeds,
                   [](const std::string& b) { check_consistent(load_npy_bytes(b, "fuzz.npy")); },
                   npy_fields});
  }
  {
    const std::unordered_map<std::string, array> arrays{
        {"a", sample(float32, {2, 3})}, {"b", sample(int8, {4})}, {"c", array(2.5, float64)},
        {"flags", sample(bool_, {3})}};
    out.push_back({"npz",
                   {savez_bytes(arrays, false), savez_bytes(arrays, true),
                    savez_bytes({{"only", sample(uint16, {7})}}, true)},
                   [](const std::string& b) {
                     for (const auto& [k, a] : load_npz_bytes(b, "fuzz.npz")) check_consistent(a);
                   },
                   zip_fields});
  }
  {
    const std::unordered_map<std::string, array> arrays{
        {"w", sample(float32, {2, 2})}, {"ids", sample(int64, {3})},
        {"h", sample(bfloat16, {2})},   {"m", sample(bool_, {5})},
        {"z", sample(complex64, {1})},  {"e", sample(float16, {0})}};
    out.push_back({"safetensors",
                   {save_safetensors_bytes(arrays, {{"format", "mlx"}, {"n", "12"}}),
                    save_safetensors_bytes({{"x", sample(uint8, {3})}})},
                   [](const std::string& b) {
                     const auto [arrays, meta] = load_safetensors_bytes(b, "fuzz.safetensors");
                     for (const auto& [k, a] : arrays) check_consistent(a);
                   },
                   safetensors_fields});
  }
  return out;
}

// Runs `total` mutations, round-robin over the formats and their seeds; stops at the first
// failure so that one bad input does not drown the log.
void run_fuzz(uint64_t total, uint64_t seed) {
  const std::vector<Format> fs = formats();
  for (const Format& f : fs) {
    for (const std::string& s : f.seeds) {
      ASSERT_NO_THROW(f.parse(s)) << f.name << ": an unmutated seed does not load";
    }
  }
  Mutator m(seed);
  uint64_t loaded = 0, rejected = 0;
  for (uint64_t it = 0; it < total; ++it) {
    const Format& f = fs[it % fs.size()];
    const std::string& s = f.seeds[(it / fs.size()) % f.seeds.size()];
    const std::string input = m.mutate(s, f.fields(s));
    try {
      f.parse(input);
      ++loaded;
    } catch (const std::invalid_argument&) {
      ++rejected;
    } catch (const std::exception& e) {
      FAIL() << f.name << " iteration " << it << ": " << typeid(e).name() << ": " << e.what()
             << "\ninput: " << hex(input);
    }
    if (::testing::Test::HasFailure()) {
      FAIL() << f.name << " iteration " << it << " loaded an inconsistent array\ninput: "
             << hex(input);
    }
  }
  // The mutations must exercise both outcomes, or the test proves little.
  EXPECT_GT(loaded, total / 100);
  EXPECT_GT(rejected, total / 10);
  std::printf("%llu inputs: %llu loaded, %llu rejected\n", static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(loaded), static_cast<unsigned long long>(rejected));
}

}  // namespace

TEST(IoFuzz, MutatedInputsLoadOrThrowInvalidArgument) { run_fuzz(iterations(20000), 20240611); }

// The soak run (labelled long by the build): a million mutations from another seed.
TEST(IoFuzz, LongMillionMutations) { run_fuzz(iterations(1000000), 777); }
