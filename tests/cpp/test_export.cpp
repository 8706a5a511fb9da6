// export_function / import_function from C++: a function traced to a file and replayed from it,
// against the function run directly (the same kernels: equal values), with keyword inputs,
// several traces, shapeless shapes, and the errors for what cannot be exported or read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"
#include "tessera/tessera.h"

namespace tessera {
namespace {

using test_util::random_array;

std::string temp_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tessera_export_" + std::to_string(getpid()) + "_" + name))
      .string();
}

void expect_equal(const array& a, const array& b) {
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.dtype(), b.dtype());
  EXPECT_TRUE(array_equal(a, b, true).item<bool>());
}

TEST(Export, ReplaysTheTracedFunctionWithKeywordsAndSeveralTraces) {
  const std::string path = temp_file("kw.tfn");
  auto fun = [](const Args& args, const Kwargs& kwargs) {
    array y = matmul(args[0], transpose(args[0])) + sum(args[0], -1, true);
    if (auto it = kwargs.find("bias"); it != kwargs.end()) y = y + it->second;
    return std::vector<array>{softmax(y, std::vector<int>{-1}), argmax(args[0], 1)};
  };
  array x = random_array({3, 5}, float32, 1), x2 = random_array({2, 4}, float32, 2);
  array bias = random_array({3}, float32, 3);
  {
    auto ex = exporter(path, fun, false, "model v1");
    ex({x});
    ex({x}, {{"bias", bias}});
    ex({x2});
    ex.close();
    EXPECT_THROW(ex({x}), std::runtime_error);
  }
  auto f = import_function(path);
  EXPECT_EQ(f.metadata(), "model v1");
  for (auto [args, kwargs] : {std::pair<Args, Kwargs>{{x}, {}}, {{x}, {{"bias", bias}}}, {{x2}, {}}}) {
    auto got = f(args, kwargs);
    auto want = fun(args, kwargs);
    ASSERT_EQ(got.size(), 2u);
    for (size_t i = 0; i < 2; ++i) expect_equal(got[i], want[i]);
  }
  try {
    f({random_array({4, 4}, float32, 4)});
    FAIL() << "a shape no trace has must throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no trace takes (float32(4, 4))"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("bias=float32(3,)"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(Export, ShapelessTraceTakesNewShapesOfTheSameRanks) {
  const std::string path = temp_file("shapeless.tfn");
  array w = random_array({8, 6}, float32, 5);  // a captured constant
  auto fun = [w](const Args& a) {
    return std::vector<array>{maximum(matmul(a[0], w), array(0.0f)) * mean(a[0], -1, true)};
  };
  export_function(path, fun, {random_array({2, 3, 8}, float32, 6)}, true);
  auto f = import_function(path);
  for (Shape s : {Shape{1, 7, 8}, Shape{4, 2, 8}}) {
    array in = random_array(s, float32, 7);
    array got = f({in})[0];
    array want = fun({in})[0];
    ASSERT_EQ(got.shape(), want.shape());
    EXPECT_TRUE(allclose(got, want, 1e-5, 1e-6).item<bool>());
  }
  EXPECT_THROW(f({random_array({2, 8}, float32, 8)}), std::invalid_argument);  // another rank
  std::filesystem::remove(path);
}

TEST(Export, RefusesWhatItCannotWriteOrRead) {
  const std::string path = temp_file("bad.tfn");
  auto custom = custom_vjp(
      [](const std::vector<array>& a) { return std::vector<array>{a[0] * 2.0f}; },
      [](const std::vector<array>&, const std::vector<array>& ct, const std::vector<array>&) {
        return std::vector<array>{ct[0] * 2.0f};
      });
  try {
    export_function(path, [&](const Args& a) { return custom(a); }, {ones({2})});
    FAIL() << "a custom function cannot be exported";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be exported"), std::string::npos) << e.what();
  }
  std::ofstream(path, std::ios::binary) << "not a function";
  EXPECT_THROW(import_function(path), std::invalid_argument);
  export_function(path, [](const Args& a) { return std::vector<array>{a[0] + 1.0f}; }, {ones({3})});
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 3);
  EXPECT_THROW(import_function(path), std::invalid_argument);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tessera
