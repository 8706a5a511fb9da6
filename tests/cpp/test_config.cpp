// Tests of the configuration registry (src/core/config.cpp) and of `tessera env`: strict parsing,
// TESSERA_/MLX_ precedence, caching, overrides, coverage of MLX's variables, docs/env.md.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/config.h"

#ifndef TESSERA_SOURCE_DIR
#define TESSERA_SOURCE_DIR "."
#endif
#ifndef TESSERA_CLI
#define TESSERA_CLI "./tessera"
#endif

namespace cfg = tessera::config;

namespace {

// Every spelling of every registered variable is removed from the environment before and after
// each test, and every override is dropped, so that tests (and CLI children) start clean.
class CleanEnv : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }

  static void clear() {
    for (const cfg::VarInfo& info : cfg::registry()) {
      for (const std::string* spelling : {&info.name, &info.alias, &info.alias2}) {
        if (!spelling->empty()) ::unsetenv(spelling->c_str());
      }
      cfg::set_override(info.name, std::nullopt);
    }
    cfg::reload();
  }

  static void set_env(const std::string& name, const std::string& value) {
    ::setenv(name.c_str(), value.c_str(), 1);
    cfg::reload();
  }

  // The message of the std::invalid_argument that `fn` throws; fails the test if it does not.
  template <typename Fn>
  static std::string invalid_argument_message(Fn&& fn) {
    try {
      fn();
    } catch (const std::invalid_argument& e) {
      return e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw another exception: " << e.what();
      return {};
    }
    ADD_FAILURE() << "did not throw";
    return {};
  }
};

class ConfigBool : public CleanEnv {};
class ConfigInt : public CleanEnv {};
class ConfigPrecedence : public CleanEnv {};
class ConfigUnused : public CleanEnv {};
class ConfigOverride : public CleanEnv {};
class ConfigCache : public CleanEnv {};
class ConfigLookup : public CleanEnv {};
class ConfigRegistry : public CleanEnv {};
class ConfigDocs : public CleanEnv {};
class ConfigCli : public CleanEnv {};

// ---- booleans ----

TEST_F(ConfigBool, AcceptsEveryTrueSpellingInAnyCase) {
  for (const char* text : {"1", "true", "TRUE", "True", "tRuE", "on", "ON", "On", "yes", "YES",
                           "Yes"}) {
    set_env("TESSERA_RING_VERBOSE", text);
    EXPECT_TRUE(cfg::get_bool("TESSERA_RING_VERBOSE")) << text;
  }
}

TEST_F(ConfigBool, AcceptsEveryFalseSpellingInAnyCase) {
  for (const char* text : {"0", "false", "FALSE", "False", "off", "OFF", "Off", "no", "NO",
                           "No"}) {
    set_env("TESSERA_RING_SHM", text);
    EXPECT_FALSE(cfg::get_bool("TESSERA_RING_SHM")) << text;
  }
}

TEST_F(ConfigBool, RejectsTwo) {
  set_env("TESSERA_RING_VERBOSE", "2");
  const std::string msg = invalid_argument_message([] { cfg::get_bool("TESSERA_RING_VERBOSE"); });
  EXPECT_NE(msg.find("TESSERA_RING_VERBOSE=\"2\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a boolean"), std::string::npos) << msg;
  EXPECT_NE(msg.find("true"), std::string::npos) << msg;  // says what is accepted
}

TEST_F(ConfigBool, RejectsEmptyValue) {
  set_env("MLX_DISABLE_COMPILE", "");
  const std::string msg =
      invalid_argument_message([] { cfg::get_bool("TESSERA_DISABLE_COMPILE"); });
  EXPECT_NE(msg.find("MLX_DISABLE_COMPILE=\"\""), std::string::npos) << msg;
}

TEST_F(ConfigBool, RejectsSurroundingWhitespace) {
  for (const char* text : {" 1", "1 ", "\t0", "true\n", " "}) {
    set_env("TESSERA_RING_VERBOSE", text);
    EXPECT_THROW(cfg::get_bool("TESSERA_RING_VERBOSE"), std::invalid_argument) << text;
  }
}

TEST_F(ConfigBool, RejectsWordsOutsideTheList) {
  for (const char* text : {"enable", "enabled", "disable", "y", "n", "t", "f", "01", "00", "-1",
                           "+1", "10", "truee", "0x1", "1.0", "null"}) {
    set_env("TESSERA_RING_VERBOSE", text);
    EXPECT_THROW(cfg::get_bool("TESSERA_RING_VERBOSE"), std::invalid_argument) << text;
  }
}

TEST_F(ConfigBool, MlxDisableCompileZeroMeansNotDisabled) {
  set_env("MLX_DISABLE_COMPILE", "0");
  EXPECT_FALSE(cfg::get_bool("TESSERA_DISABLE_COMPILE"));
  set_env("MLX_DISABLE_COMPILE", "1");
  EXPECT_TRUE(cfg::get_bool("TESSERA_DISABLE_COMPILE"));
}

TEST_F(ConfigBool, PresenceOnlyMlxVariablesReadTheirValue) {
  set_env("MLX_RING_VERBOSE", "0");
  EXPECT_FALSE(cfg::get_bool("TESSERA_RING_VERBOSE"));
  set_env("MLX_JACCL_RING", "0");
  EXPECT_FALSE(cfg::get_bool("TESSERA_JACCL_RING"));
}

TEST_F(ConfigBool, DefaultsWhenUnset) {
  EXPECT_FALSE(cfg::get_bool("TESSERA_DISABLE_COMPILE"));
  EXPECT_FALSE(cfg::get_bool("TESSERA_RING_VERBOSE"));
  EXPECT_TRUE(cfg::get_bool("TESSERA_RING_SHM"));
  EXPECT_TRUE(cfg::get_bool("TESSERA_ENABLE_TF32"));
  EXPECT_FALSE(cfg::get_bool("TESSERA_METAL_FAST_SYNCH"));
  EXPECT_TRUE(cfg::get_bool("TESSERA_USE_CUDA_GRAPHS"));
}

TEST_F(ConfigBool, GetBoolOnIntegerVariableIsLogicError) {
  EXPECT_THROW(cfg::get_bool("TESSERA_BFS_MAX_WIDTH"), std::logic_error);
  EXPECT_THROW(cfg::get_bool("TESSERA_HOSTFILE"), std::logic_error);
}

// ---- integers ----

TEST_F(ConfigInt, ParsesDecimalWithOptionalSign) {
  set_env("TESSERA_BFS_MAX_WIDTH", "7");
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 7);
  set_env("TESSERA_BFS_MAX_WIDTH", "+8");
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 8);
  set_env("TESSERA_BFS_MAX_WIDTH", "0009");
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 9);
  set_env("TESSERA_NUM_THREADS", "-0");
  EXPECT_EQ(cfg::get_int("TESSERA_NUM_THREADS"), 0);
}

TEST_F(ConfigInt, AcceptsBothEndsOfTheRange) {
  set_env("TESSERA_BFS_MAX_WIDTH", "1");
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 1);
  set_env("TESSERA_BFS_MAX_WIDTH", "1000000");
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 1000000);
  set_env("TESSERA_NUM_THREADS", "1024");
  EXPECT_EQ(cfg::get_int("TESSERA_NUM_THREADS"), 1024);
  set_env("TESSERA_NCCL_PORT", "65535");
  EXPECT_EQ(cfg::get_int("TESSERA_NCCL_PORT"), 65535);
}

TEST_F(ConfigInt, RejectsNonDigits) {
  for (const char* text : {"abc", "", " 5", "5 ", "1e3", "0x10", "5.0", "+", "-", "1_000",
                           "1,000", "--5", "+-5", "５"}) {
    set_env("TESSERA_BFS_MAX_WIDTH", text);
    const std::string msg =
        invalid_argument_message([] { cfg::get_int("TESSERA_BFS_MAX_WIDTH"); });
    EXPECT_NE(msg.find("is not an integer"), std::string::npos) << text << ": " << msg;
  }
}

TEST_F(ConfigInt, MessageNamesMlxSpellingAndValue) {
  set_env("MLX_BFS_MAX_WIDTH", "abc");
  EXPECT_EQ(invalid_argument_message([] { cfg::get_int("TESSERA_BFS_MAX_WIDTH"); }),
            "[config] MLX_BFS_MAX_WIDTH=\"abc\" is not an integer; expected an integer in "
            "[1, 1000000]");
}

TEST_F(ConfigInt, BelowMinimumIsOutOfRange) {
  set_env("TESSERA_BFS_MAX_WIDTH", "0");
  EXPECT_EQ(invalid_argument_message([] { cfg::get_int("TESSERA_BFS_MAX_WIDTH"); }),
            "[config] TESSERA_BFS_MAX_WIDTH=\"0\" is out of range; expected an integer in "
            "[1, 1000000]");
  set_env("TESSERA_NUM_THREADS", "-1");
  const std::string msg = invalid_argument_message([] { cfg::get_int("TESSERA_NUM_THREADS"); });
  EXPECT_NE(msg.find("TESSERA_NUM_THREADS=\"-1\" is out of range"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[0, 1024]"), std::string::npos) << msg;
}

TEST_F(ConfigInt, AboveMaximumIsOutOfRange) {
  set_env("MLX_BFS_MAX_WIDTH", "1000001");
  const std::string msg = invalid_argument_message([] { cfg::get_int("TESSERA_BFS_MAX_WIDTH"); });
  EXPECT_NE(msg.find("MLX_BFS_MAX_WIDTH=\"1000001\" is out of range"), std::string::npos) << msg;
  set_env("TESSERA_NCCL_PORT", "65536");
  EXPECT_THROW(cfg::get_int("TESSERA_NCCL_PORT"), std::invalid_argument);
  set_env("TESSERA_RESIDENCY_SET_MAX_PCT", "101");
  EXPECT_THROW(cfg::get_int("TESSERA_RESIDENCY_SET_MAX_PCT"), std::invalid_argument);
}

TEST_F(ConfigInt, HugeNumbersAreOutOfRangeNotWrapped) {
  for (const char* text : {"99999999999999999999999999", "18446744073709551617",
                           "-99999999999999999999999999", "9223372036854775808"}) {
    set_env("TESSERA_BFS_MAX_WIDTH", text);
    const std::string msg =
        invalid_argument_message([] { cfg::get_int("TESSERA_BFS_MAX_WIDTH"); });
    EXPECT_NE(msg.find("is out of range"), std::string::npos) << text << ": " << msg;
  }
}

TEST_F(ConfigInt, ControlCharactersAreEscapedInTheMessage) {
  set_env("TESSERA_BFS_MAX_WIDTH", "5\n\"x");
  const std::string msg = invalid_argument_message([] { cfg::get_int("TESSERA_BFS_MAX_WIDTH"); });
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"5\\x0a\\\"x\""), std::string::npos) << msg;
}

TEST_F(ConfigInt, DefaultsWhenUnset) {
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 20);
  EXPECT_EQ(cfg::get_int("TESSERA_NUM_THREADS"), 0);
  EXPECT_EQ(cfg::get_int("TESSERA_DIST_TIMEOUT"), 300);
  EXPECT_EQ(cfg::get_int("TESSERA_DIST_CONNECT_TIMEOUT"), 60);
  EXPECT_EQ(cfg::get_int("TESSERA_NCCL_TIMEOUT"), 300000);
  EXPECT_EQ(cfg::get_int("TESSERA_CUDA_CONV_CACHE_SIZE"), 128);
  EXPECT_EQ(cfg::get_int("TESSERA_CUDA_FFT_CACHE_SIZE"), 128);
  EXPECT_EQ(cfg::get_int("TESSERA_CUDA_GRAPH_CACHE_SIZE"), 400);
  EXPECT_EQ(cfg::get_int("TESSERA_CUDA_SDPA_CACHE_SIZE"), 256);
  EXPECT_EQ(cfg::get_int("TESSERA_CUDA_SDPA_BACKWARD_CACHE_SIZE"), 64);
  EXPECT_EQ(cfg::get_int("TESSERA_RESIDENCY_SET_MAX_PCT"), 5);
  EXPECT_EQ(cfg::get_int("TESSERA_SDPA_BLOCKS"), 0);
}

TEST_F(ConfigInt, DistTimeoutZeroMeansNoTimeoutAndIsAccepted) {
  set_env("TESSERA_DIST_TIMEOUT", "0");
  EXPECT_EQ(cfg::get_int("TESSERA_DIST_TIMEOUT"), 0);
}

TEST_F(ConfigInt, UnsetWithoutDefaultIsLogicErrorAndGetStringIsEmpty) {
  EXPECT_EQ(cfg::get_string("TESSERA_RANK"), std::nullopt);
  EXPECT_THROW(cfg::get_int("TESSERA_RANK"), std::logic_error);
  set_env("MLX_RANK", "3");
  EXPECT_EQ(cfg::get_int("TESSERA_RANK"), 3);
  EXPECT_EQ(cfg::get_string("TESSERA_RANK"), "3");
}

TEST_F(ConfigInt, GetIntOnBooleanVariableIsLogicError) {
  EXPECT_THROW(cfg::get_int("TESSERA_RING_SHM"), std::logic_error);
}

// ---- strings and paths ----

TEST_F(ConfigPrecedence, StringsAndPathsKeepTheirTextVerbatim) {
  EXPECT_EQ(cfg::get_string("TESSERA_MPIRUN"), "mpirun");
  EXPECT_EQ(cfg::get_string("TESSERA_MPI_LIBNAME"), std::nullopt);  // unset: the usual sonames
  EXPECT_EQ(cfg::get_string("TESSERA_HOSTFILE"), std::nullopt);
  EXPECT_EQ(cfg::get_string("TESSERA_COMPILE_CACHE_DIR"), std::nullopt);
  set_env("MLX_HOSTFILE", " /tmp/with space.json ");
  EXPECT_EQ(cfg::get_string("TESSERA_HOSTFILE"), " /tmp/with space.json ");
  set_env("MLX_MPI_LIBNAME", "/opt/openmpi/lib/libmpi.so.40");
  EXPECT_EQ(cfg::get_string("TESSERA_MPI_LIBNAME"), "/opt/openmpi/lib/libmpi.so.40");
}

// ---- precedence ----

TEST_F(ConfigPrecedence, TesseraNameWinsOverMlxAlias) {
  ::setenv("MLX_BFS_MAX_WIDTH", "40", 1);
  set_env("TESSERA_BFS_MAX_WIDTH", "30");
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 30);
  const cfg::Effective eff = cfg::effective("TESSERA_BFS_MAX_WIDTH");
  EXPECT_EQ(eff.source, cfg::Source::tessera_name);
  EXPECT_EQ(eff.read_from, "TESSERA_BFS_MAX_WIDTH");
  EXPECT_EQ(eff.raw, "30");
  EXPECT_EQ(eff.info->name, "TESSERA_BFS_MAX_WIDTH");
}

TEST_F(ConfigPrecedence, MlxAliasAloneIsRead) {
  set_env("MLX_BFS_MAX_WIDTH", "40");
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 40);
  const cfg::Effective eff = cfg::effective("TESSERA_BFS_MAX_WIDTH");
  EXPECT_EQ(eff.source, cfg::Source::mlx_name);
  EXPECT_EQ(eff.read_from, "MLX_BFS_MAX_WIDTH");
}

TEST_F(ConfigPrecedence, DefaultReportsNoRawText) {
  const cfg::Effective eff = cfg::effective("TESSERA_BFS_MAX_WIDTH");
  EXPECT_EQ(eff.source, cfg::Source::default_value);
  EXPECT_EQ(eff.raw, std::nullopt);
  EXPECT_EQ(eff.read_from, "");
}

TEST_F(ConfigPrecedence, TesseraNameWinsOverMalformedAlias) {
  ::setenv("MLX_BFS_MAX_WIDTH", "abc", 1);
  set_env("TESSERA_BFS_MAX_WIDTH", "30");
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 30);
  EXPECT_NO_THROW(cfg::validate_all());
}

TEST_F(ConfigPrecedence, MalformedTesseraNameFailsEvenWithValidAlias) {
  ::setenv("MLX_BFS_MAX_WIDTH", "30", 1);
  set_env("TESSERA_BFS_MAX_WIDTH", "thirty");
  const std::string msg = invalid_argument_message([] { cfg::get_int("TESSERA_BFS_MAX_WIDTH"); });
  EXPECT_NE(msg.find("TESSERA_BFS_MAX_WIDTH=\"thirty\""), std::string::npos) << msg;
}

TEST_F(ConfigPrecedence, TesseraBoolWinsOverMlxBool) {
  ::setenv("MLX_DISABLE_COMPILE", "1", 1);
  set_env("TESSERA_DISABLE_COMPILE", "off");
  EXPECT_FALSE(cfg::get_bool("TESSERA_DISABLE_COMPILE"));
}

TEST_F(ConfigPrecedence, JacclSpellingsAreAcceptedAfterMlxSpellings) {
  set_env("JACCL_RANK", "3");
  EXPECT_EQ(cfg::get_int("TESSERA_RANK"), 3);
  EXPECT_EQ(cfg::effective("TESSERA_RANK").read_from, "JACCL_RANK");
  EXPECT_EQ(cfg::effective("TESSERA_RANK").source, cfg::Source::mlx_name);
  set_env("MLX_RANK", "1");
  EXPECT_EQ(cfg::get_int("TESSERA_RANK"), 1);
  set_env("TESSERA_RANK", "2");
  EXPECT_EQ(cfg::get_int("TESSERA_RANK"), 2);

  set_env("JACCL_COORDINATOR", "10.0.0.1:5000");
  EXPECT_EQ(cfg::get_string("TESSERA_JACCL_COORDINATOR"), "10.0.0.1:5000");
  set_env("JACCL_RING", "1");
  EXPECT_TRUE(cfg::get_bool("TESSERA_JACCL_RING"));
  set_env("JACCL_IBV_DEVICES", "/tmp/devices.json");
  EXPECT_EQ(cfg::get_string("TESSERA_IBV_DEVICES"), "/tmp/devices.json");
}

TEST_F(ConfigPrecedence, CudaHomeWinsOverCudaPath) {
  set_env("CUDA_PATH", "/opt/cuda-path");
  EXPECT_EQ(cfg::get_string("TESSERA_CUDA_HOME"), "/opt/cuda-path");
  set_env("CUDA_HOME", "/opt/cuda-home");
  EXPECT_EQ(cfg::get_string("TESSERA_CUDA_HOME"), "/opt/cuda-home");
}

TEST_F(ConfigPrecedence, NcclForeignNamesAreAliases) {
  ::setenv("NCCL_HOST_IP", "10.1.2.3", 1);
  set_env("NCCL_PORT", "12345");
  EXPECT_EQ(cfg::get_string("TESSERA_NCCL_HOST_IP"), "10.1.2.3");
  EXPECT_EQ(cfg::get_int("TESSERA_NCCL_PORT"), 12345);
  EXPECT_EQ(cfg::effective("TESSERA_NCCL_PORT").read_from, "NCCL_PORT");
}

// ---- variables this build does not use ----

TEST_F(ConfigUnused, MetalVariablesAreAcceptedAndFlaggedUnused) {
  set_env("MLX_METAL_FAST_SYNCH", "1");
  const cfg::Effective eff = cfg::effective("TESSERA_METAL_FAST_SYNCH");
  EXPECT_EQ(eff.source, cfg::Source::mlx_name);
  EXPECT_FALSE(eff.info->used_by_this_build);
  EXPECT_EQ(eff.info->subsystem, "metal");
  EXPECT_NO_THROW(cfg::validate_all());
  EXPECT_TRUE(cfg::get_bool("TESSERA_METAL_FAST_SYNCH"));
}

TEST_F(ConfigUnused, CudaVariablesAreAcceptedAndFlaggedUnused) {
  set_env("MLX_USE_CUDA_GRAPHS", "0");
  const cfg::Effective eff = cfg::effective("TESSERA_USE_CUDA_GRAPHS");
  EXPECT_FALSE(eff.info->used_by_this_build);
  EXPECT_EQ(eff.info->subsystem, "cuda");
  EXPECT_NO_THROW(cfg::validate_all());
}

TEST_F(ConfigUnused, EveryMetalAndCudaVariableIsUnused) {
  int metal = 0, cuda = 0;
  for (const cfg::VarInfo& info : cfg::registry()) {
    if (info.subsystem == "metal") ++metal;
    if (info.subsystem == "cuda") ++cuda;
    if (info.subsystem == "metal" || info.subsystem == "cuda") {
      EXPECT_FALSE(info.used_by_this_build) << info.name;
    }
  }
  EXPECT_EQ(metal, 5);  // FAST_SYNCH, GPU_ARCH, SDPA_BLOCKS, RESIDENCY_SET_MAX_PCT, _DEBUG
  EXPECT_GE(cuda, 13);
}

TEST_F(ConfigUnused, MalformedUnusedValueDoesNotFailValidateAll) {
  // Valid for MLX (atoi), invalid for us; we never read them, so they must not stop a job.
  ::setenv("MLX_METAL_FAST_SYNCH", "2", 1);
  set_env("MLX_CUDA_GRAPH_CACHE_SIZE", "lots");
  EXPECT_NO_THROW(cfg::validate_all());
  // A future reader still gets the strict error.
  EXPECT_THROW(cfg::get_bool("TESSERA_METAL_FAST_SYNCH"), std::invalid_argument);
  EXPECT_THROW(cfg::get_int("TESSERA_CUDA_GRAPH_CACHE_SIZE"), std::invalid_argument);
}

TEST_F(ConfigUnused, CoreVariablesAreUsed) {
  for (const char* name : {"TESSERA_BFS_MAX_WIDTH", "TESSERA_RANK", "TESSERA_HOSTFILE",
                           "TESSERA_RING_VERBOSE", "TESSERA_NUM_THREADS",
                           "TESSERA_DIST_TIMEOUT"}) {
    EXPECT_TRUE(cfg::effective(name).info->used_by_this_build) << name;
  }
}

// Variables of parts not in this build (NCCL: CUDA builds only) are listed but not claimed as
// used; those of the parts that landed (compile, the MPI backend) are.
TEST_F(ConfigUnused, VariablesOfPartsNotBuiltYetSaySo) {
  for (const char* name : {"TESSERA_NCCL_HOST_IP", "TESSERA_NCCL_PORT"}) {
    EXPECT_FALSE(cfg::effective(name).info->used_by_this_build) << name;
  }
  for (const char* name : {"TESSERA_DISABLE_COMPILE", "TESSERA_COMPILE_CACHE_DIR", "TESSERA_MPI_LIBNAME",
                           "TESSERA_MPI_CHECK"}) {
    EXPECT_TRUE(cfg::effective(name).info->used_by_this_build) << name;
  }
}

// ---- validate_all ----

TEST_F(ConfigCache, ValidateAllPassesOnCleanEnvironment) {
  EXPECT_NO_THROW(cfg::validate_all());
}

TEST_F(ConfigCache, ValidateAllThrowsOnMalformedUsedVariable) {
  set_env("MLX_RING_VERBOSE", "yes please");
  const std::string msg = invalid_argument_message([] { cfg::validate_all(); });
  EXPECT_NE(msg.find("MLX_RING_VERBOSE=\"yes please\""), std::string::npos) << msg;
}

TEST_F(ConfigCache, ValidateAllReportsTheFirstMalformedInTableOrder) {
  ::setenv("TESSERA_DIST_TIMEOUT", "-5", 1);
  set_env("MLX_BFS_MAX_WIDTH", "abc");  // registered before TESSERA_DIST_TIMEOUT
  const std::string msg = invalid_argument_message([] { cfg::validate_all(); });
  EXPECT_NE(msg.find("MLX_BFS_MAX_WIDTH"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("TESSERA_DIST_TIMEOUT"), std::string::npos) << msg;
}

// ---- caching and reload ----

TEST_F(ConfigCache, ValuesAreCachedUntilReload) {
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 20);
  ::setenv("TESSERA_BFS_MAX_WIDTH", "33", 1);
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 20);
  cfg::reload();
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 33);
  ::unsetenv("TESSERA_BFS_MAX_WIDTH");
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 33);
  cfg::reload();
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 20);
}

TEST_F(ConfigCache, ReloadPicksUpFixedValue) {
  set_env("MLX_BFS_MAX_WIDTH", "abc");
  EXPECT_THROW(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), std::invalid_argument);
  set_env("MLX_BFS_MAX_WIDTH", "12");
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 12);
}

TEST_F(ConfigCache, ConcurrentReadersAndReloadsAgree) {
  set_env("TESSERA_BFS_MAX_WIDTH", "44");
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (cfg::get_int("TESSERA_BFS_MAX_WIDTH") != 44) ++wrong;
        if (cfg::effective("TESSERA_BFS_MAX_WIDTH").raw != "44") ++wrong;
      }
    });
  }
  for (int i = 0; i < 200; ++i) cfg::reload();
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
}

// ---- overrides ----

TEST_F(ConfigOverride, OverrideBeatsEnvironmentAndCanBeRemoved) {
  set_env("TESSERA_BFS_MAX_WIDTH", "30");
  cfg::set_override("TESSERA_BFS_MAX_WIDTH", "50");
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 50);
  const cfg::Effective eff = cfg::effective("TESSERA_BFS_MAX_WIDTH");
  EXPECT_EQ(eff.source, cfg::Source::override_value);
  EXPECT_EQ(eff.raw, "50");
  cfg::set_override("TESSERA_BFS_MAX_WIDTH", std::nullopt);
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 30);
  EXPECT_EQ(cfg::effective("TESSERA_BFS_MAX_WIDTH").source, cfg::Source::tessera_name);
}

TEST_F(ConfigOverride, MalformedOverrideThrowsAndKeepsPreviousValue) {
  cfg::set_override("TESSERA_BFS_MAX_WIDTH", "50");
  const std::string msg = invalid_argument_message(
      [] { cfg::set_override("TESSERA_BFS_MAX_WIDTH", std::string("abc")); });
  EXPECT_NE(msg.find("TESSERA_BFS_MAX_WIDTH"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"abc\""), std::string::npos) << msg;
  EXPECT_EQ(cfg::get_int("TESSERA_BFS_MAX_WIDTH"), 50);
  EXPECT_THROW(cfg::set_override("TESSERA_DISABLE_COMPILE", std::string("2")),
               std::invalid_argument);
  EXPECT_THROW(cfg::set_override("TESSERA_BFS_MAX_WIDTH", std::string("0")),
               std::invalid_argument);
}

TEST_F(ConfigOverride, OverrideSurvivesReload) {
  cfg::set_override("TESSERA_DISABLE_COMPILE", "true");
  set_env("MLX_DISABLE_COMPILE", "0");
  EXPECT_TRUE(cfg::get_bool("TESSERA_DISABLE_COMPILE"));
}

TEST_F(ConfigOverride, OverrideOfUnregisteredNameIsLogicError) {
  EXPECT_THROW(cfg::set_override("TESSERA_NO_SUCH_THING", "1"), std::logic_error);
}

// ---- lookup ----

TEST_F(ConfigLookup, UnregisteredNameIsLogicError) {
  EXPECT_THROW(cfg::get_bool("TESSERA_NO_SUCH_THING"), std::logic_error);
  EXPECT_THROW(cfg::get_int("TESSERA_NO_SUCH_THING"), std::logic_error);
  EXPECT_THROW(cfg::get_string("TESSERA_NO_SUCH_THING"), std::logic_error);
  EXPECT_THROW(cfg::effective("TESSERA_NO_SUCH_THING"), std::logic_error);
  EXPECT_THROW(cfg::get_int(""), std::logic_error);
}

TEST_F(ConfigLookup, AliasSpellingIsLogicErrorNamingTheTesseraName) {
  try {
    cfg::get_int("MLX_BFS_MAX_WIDTH");
    ADD_FAILURE() << "did not throw";
  } catch (const std::invalid_argument&) {
    ADD_FAILURE() << "an invalid_argument is for bad user input, not lookups";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("TESSERA_BFS_MAX_WIDTH"), std::string::npos) << e.what();
  }
}

// ---- the table itself ----

// Every variable named in shared/reference/000_e67a31b32e7088a6.txt, with the TESSERA_ name it
// must map to. Written from the document, not from the table.
const std::vector<std::pair<std::string, std::string>> kReferenceVariables = {
    {"MLX_DISABLE_COMPILE", "TESSERA_DISABLE_COMPILE"},
    {"MLX_ENABLE_TF32", "TESSERA_ENABLE_TF32"},
    {"MLX_RANK", "TESSERA_RANK"},
    {"MLX_HOSTFILE", "TESSERA_HOSTFILE"},
    {"MLX_RING_VERBOSE", "TESSERA_RING_VERBOSE"},
    {"MLX_IBV_DEVICES", "TESSERA_IBV_DEVICES"},
    {"JACCL_IBV_DEVICES", "TESSERA_IBV_DEVICES"},
    {"MLX_JACCL_COORDINATOR", "TESSERA_JACCL_COORDINATOR"},
    {"JACCL_COORDINATOR", "TESSERA_JACCL_COORDINATOR"},
    {"JACCL_RANK", "TESSERA_RANK"},
    {"MLX_JACCL_RING", "TESSERA_JACCL_RING"},
    {"JACCL_RING", "TESSERA_JACCL_RING"},
    {"MLX_WORLD_SIZE", "TESSERA_WORLD_SIZE"},
    {"MLX_NCCL_TIMEOUT", "TESSERA_NCCL_TIMEOUT"},
    {"NCCL_HOST_IP", "TESSERA_NCCL_HOST_IP"},
    {"NCCL_PORT", "TESSERA_NCCL_PORT"},
    {"NCCL_DEBUG", "TESSERA_NCCL_DEBUG"},
    {"CUDA_VISIBLE_DEVICES", "TESSERA_CUDA_VISIBLE_DEVICES"},
    {"MLX_MPI_LIBNAME", "TESSERA_MPI_LIBNAME"},
    {"MLX_METAL_FAST_SYNCH", "TESSERA_METAL_FAST_SYNCH"},
    {"MLX_BFS_MAX_WIDTH", "TESSERA_BFS_MAX_WIDTH"},
    {"MLX_MAX_OPS_PER_BUFFER", "TESSERA_MAX_OPS_PER_BUFFER"},
    {"MLX_MAX_MB_PER_BUFFER", "TESSERA_MAX_MB_PER_BUFFER"},
    {"MLX_METAL_GPU_ARCH", "TESSERA_METAL_GPU_ARCH"},
    {"MLX_SDPA_BLOCKS", "TESSERA_SDPA_BLOCKS"},
    {"MLX_RESIDENCY_SET_MAX_PCT", "TESSERA_RESIDENCY_SET_MAX_PCT"},
    {"MLX_RESIDENCY_DEBUG", "TESSERA_RESIDENCY_DEBUG"},
    {"MLX_USE_CUDA_GRAPHS", "TESSERA_USE_CUDA_GRAPHS"},
    {"MLX_SAVE_CUDA_GRAPHS_DOT_FILE", "TESSERA_SAVE_CUDA_GRAPHS_DOT_FILE"},
    {"MLX_PTX_CACHE_DIR", "TESSERA_PTX_CACHE_DIR"},
    {"MLX_CUDA_CONV_CACHE_SIZE", "TESSERA_CUDA_CONV_CACHE_SIZE"},
    {"MLX_CUDA_FFT_CACHE_SIZE", "TESSERA_CUDA_FFT_CACHE_SIZE"},
    {"MLX_CUDA_GRAPH_CACHE_SIZE", "TESSERA_CUDA_GRAPH_CACHE_SIZE"},
    {"MLX_CUDA_SDPA_CACHE_SIZE", "TESSERA_CUDA_SDPA_CACHE_SIZE"},
    {"MLX_CUDA_SDPA_BACKWARD_CACHE_SIZE", "TESSERA_CUDA_SDPA_BACKWARD_CACHE_SIZE"},
    {"MLX_CUDA_USE_CUDNN_SDPA", "TESSERA_CUDA_USE_CUDNN_SDPA"},
    {"MLX_ENABLE_CACHE_THRASHING_CHECK", "TESSERA_ENABLE_CACHE_THRASHING_CHECK"},
    {"CUDA_HOME", "TESSERA_CUDA_HOME"},
    {"CUDA_PATH", "TESSERA_CUDA_HOME"},
};

TEST_F(ConfigRegistry, EveryReferenceDocVariableIsReadThroughItsTesseraName) {
  for (const auto& [spelling, tessera_name] : kReferenceVariables) {
    // "1" is valid for every type and range we register for these variables.
    set_env(spelling, "1");
    const cfg::Effective eff = cfg::effective(tessera_name);
    EXPECT_EQ(eff.read_from, spelling) << tessera_name;
    EXPECT_EQ(eff.source, cfg::Source::mlx_name) << spelling;
    EXPECT_EQ(eff.raw, "1") << spelling;
    EXPECT_NO_THROW(cfg::get_string(tessera_name)) << spelling;
    ::unsetenv(spelling.c_str());
  }
  cfg::reload();
}

TEST_F(ConfigRegistry, EveryTesseraNameHasItsMlxSpellingAsAlias) {
  for (const auto& [spelling, tessera_name] : kReferenceVariables) {
    const cfg::VarInfo& info = *cfg::effective(tessera_name).info;
    EXPECT_TRUE(info.alias == spelling || info.alias2 == spelling) << spelling;
  }
  // The MLX_ spelling is the primary alias where one exists.
  EXPECT_EQ(cfg::effective("TESSERA_RANK").info->alias, "MLX_RANK");
  EXPECT_EQ(cfg::effective("TESSERA_IBV_DEVICES").info->alias, "MLX_IBV_DEVICES");
}

TEST_F(ConfigRegistry, TesseraOwnVariablesHaveNoAliasAndTheSpecifiedDefaults) {
  struct Own {
    const char* name;
    cfg::VarType type;
    const char* default_value;
  };
  for (const Own& own : {Own{"TESSERA_NUM_THREADS", cfg::VarType::integer, "0"},
                         Own{"TESSERA_DIST_TIMEOUT", cfg::VarType::integer, "300"},
                         Own{"TESSERA_DIST_CONNECT_TIMEOUT", cfg::VarType::integer, "60"},
                         Own{"TESSERA_JOB_TOKEN", cfg::VarType::string, ""},
                         Own{"TESSERA_RING_SHM", cfg::VarType::boolean, "1"},
                         Own{"TESSERA_COMPILE_CACHE_DIR", cfg::VarType::path, ""}}) {
    const cfg::VarInfo& info = *cfg::effective(own.name).info;
    EXPECT_EQ(info.alias, "") << own.name;
    EXPECT_EQ(info.alias2, "") << own.name;
    EXPECT_EQ(info.type, own.type) << own.name;
    EXPECT_EQ(info.default_value, own.default_value) << own.name;
  }
  const cfg::VarInfo& threads = *cfg::effective("TESSERA_NUM_THREADS").info;
  EXPECT_EQ(threads.min_value, 0);
  EXPECT_EQ(threads.max_value, 1024);
  EXPECT_EQ(threads.subsystem, "core");
  EXPECT_TRUE(cfg::effective("TESSERA_JOB_TOKEN").info->secret);
}

TEST_F(ConfigRegistry, NamesAreTesseraPrefixedAndNoSpellingIsRegisteredTwice) {
  std::set<std::string> seen;
  for (const cfg::VarInfo& info : cfg::registry()) {
    // Variables the system (PATH, HOME) or a scheduler (SLURM_*, OMPI_*, PMI_*) sets keep
    // their own names.
    if (info.subsystem != "system" && info.subsystem != "scheduler") {
      EXPECT_EQ(info.name.rfind("TESSERA_", 0), 0u) << info.name;
    }
    for (const std::string* spelling : {&info.name, &info.alias, &info.alias2}) {
      if (!spelling->empty()) {
        EXPECT_TRUE(seen.insert(*spelling).second) << *spelling;
      }
    }
    if (info.alias.empty()) {
      EXPECT_TRUE(info.alias2.empty()) << info.name;
    }
  }
}

TEST_F(ConfigRegistry, EveryRowIsDocumentedAndEveryDefaultParses) {
  for (const cfg::VarInfo& info : cfg::registry()) {
    EXPECT_FALSE(info.doc.empty()) << info.name;
    EXPECT_EQ(info.doc.find('\n'), std::string::npos) << info.name;
    EXPECT_EQ(info.doc.find('|'), std::string::npos) << info.name;
    EXPECT_FALSE(info.subsystem.empty()) << info.name;
    if (info.type == cfg::VarType::integer) {
      EXPECT_LE(info.min_value, info.max_value) << info.name;
      if (!info.default_value.empty()) {
        const int64_t value = cfg::get_int(info.name);
        EXPECT_GE(value, info.min_value) << info.name;
        EXPECT_LE(value, info.max_value) << info.name;
      }
    }
    if (info.type == cfg::VarType::boolean) {
      EXPECT_FALSE(info.default_value.empty()) << info.name;
      EXPECT_NO_THROW(cfg::get_bool(info.name)) << info.name;
    }
    EXPECT_NO_THROW(cfg::get_string(info.name)) << info.name;
  }
}

// ---- docs/env.md ----

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST_F(ConfigDocs, EnvMdEqualsTheGeneratedTable) {
  const std::string path = std::string(TESSERA_SOURCE_DIR) + "/docs/env.md";
  const std::string on_disk = read_file(path);
  ASSERT_FALSE(on_disk.empty()) << path << " is missing or empty";
  EXPECT_EQ(on_disk, cfg::markdown_table())
      << path << " is stale; regenerate it with `make docs`";
}

TEST_F(ConfigDocs, MarkdownIsDeterministicAndListsEveryVariable) {
  const std::string md = cfg::markdown_table();
  EXPECT_EQ(md, cfg::markdown_table());
  EXPECT_EQ(md.rfind("# ", 0), 0u);
  EXPECT_NE(md.find("| name | MLX alias | type | default | used by this build | subsystem | "
                    "description |"),
            std::string::npos);
  for (const cfg::VarInfo& info : cfg::registry()) {
    EXPECT_NE(md.find("| `" + info.name + "` |"), std::string::npos) << info.name;
  }
  for (const auto& [spelling, tessera_name] : kReferenceVariables) {
    EXPECT_NE(md.find("`" + spelling + "`"), std::string::npos) << spelling;
  }
  // The environment must not leak into the generated page.
  set_env("TESSERA_BFS_MAX_WIDTH", "77");
  EXPECT_EQ(md, cfg::markdown_table());
}

// ---- the `tessera` command ----

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs the CLI with `args`, its environment being ours plus `env`, set with setenv in the child.
CliResult run_cli(const std::vector<std::string>& args,
                  const std::vector<std::pair<std::string, std::string>>& env = {}) {
  char out_path[] = "/tmp/tessera_cli_out_XXXXXX";
  char err_path[] = "/tmp/tessera_cli_err_XXXXXX";
  const int out_fd = ::mkstemp(out_path);
  const int err_fd = ::mkstemp(err_path);
  CliResult result;
  if (out_fd < 0 || err_fd < 0) {
    ADD_FAILURE() << "mkstemp failed";
    return result;
  }
  std::vector<std::string> argv_text = {TESSERA_CLI};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_text) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid == 0) {
    for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  ::close(out_fd);
  ::close(err_fd);
  result.out = read_file(out_path);
  result.err = read_file(err_path);
  ::unlink(out_path);
  ::unlink(err_path);
  return result;
}

// The line of `tessera env` output that starts with `name` followed by a space.
std::string line_for(const std::string& output, const std::string& name) {
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + " ", 0) == 0) return line;
  }
  return {};
}

TEST_F(ConfigCli, EnvExitsZeroAndListsEveryVariable) {
  const CliResult r = run_cli({"env"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string bfs = line_for(r.out, "TESSERA_BFS_MAX_WIDTH");
  ASSERT_NE(bfs, "") << r.out;
  EXPECT_NE(bfs.find(" 20 "), std::string::npos) << bfs;
  EXPECT_NE(bfs.find("default"), std::string::npos) << bfs;
  for (const cfg::VarInfo& info : cfg::registry()) {
    EXPECT_NE(line_for(r.out, info.name), "") << info.name;
  }
  EXPECT_NE(line_for(r.out, "TESSERA_RANK").find("unset"), std::string::npos);
}

TEST_F(ConfigCli, EnvShowsWhichSpellingEachValueCameFrom) {
  const CliResult r = run_cli(
      {"env"}, {{"MLX_BFS_MAX_WIDTH", "42"}, {"TESSERA_DIST_TIMEOUT", "17"}, {"JACCL_RANK", "5"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string bfs = line_for(r.out, "TESSERA_BFS_MAX_WIDTH");
  EXPECT_NE(bfs.find(" 42 "), std::string::npos) << bfs;
  EXPECT_NE(bfs.find("MLX_BFS_MAX_WIDTH"), std::string::npos) << bfs;
  const std::string timeout = line_for(r.out, "TESSERA_DIST_TIMEOUT");
  EXPECT_NE(timeout.find(" 17 "), std::string::npos) << timeout;
  EXPECT_NE(timeout.find("TESSERA_DIST_TIMEOUT", 1), std::string::npos) << timeout;
  EXPECT_NE(line_for(r.out, "TESSERA_RANK").find("JACCL_RANK"), std::string::npos);
}

TEST_F(ConfigCli, EnvMarksMetalAndCudaVariablesUnused) {
  const CliResult r = run_cli({"env"}, {{"MLX_METAL_FAST_SYNCH", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string metal = line_for(r.out, "TESSERA_METAL_FAST_SYNCH");
  EXPECT_NE(metal.find("MLX_METAL_FAST_SYNCH"), std::string::npos) << metal;
  EXPECT_NE(metal.find("not used by this build"), std::string::npos) << metal;
  EXPECT_NE(line_for(r.out, "TESSERA_USE_CUDA_GRAPHS").find("not used by this build"),
            std::string::npos);
  EXPECT_EQ(line_for(r.out, "TESSERA_BFS_MAX_WIDTH").find("not used"), std::string::npos);
}

TEST_F(ConfigCli, EnvExitsTwoAndNamesTheMalformedVariable) {
  const CliResult r = run_cli({"env"}, {{"MLX_BFS_MAX_WIDTH", "abc"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("MLX_BFS_MAX_WIDTH=\"abc\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[1, 1000000]"), std::string::npos) << r.err;
}

TEST_F(ConfigCli, EnvReportsEveryMalformedVariable) {
  const CliResult r =
      run_cli({"env"}, {{"MLX_BFS_MAX_WIDTH", "abc"}, {"MLX_RING_VERBOSE", "2"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("MLX_BFS_MAX_WIDTH"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("MLX_RING_VERBOSE=\"2\""), std::string::npos) << r.err;
}

// The table shows each variable's MLX spelling, so `tessera env | grep MLX_RANK` finds its row.
TEST_F(ConfigCli, EnvShowsTheMlxSpellings) {
  const CliResult r = run_cli({"env"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(line_for(r.out, "TESSERA_RANK").find("MLX_RANK"), std::string::npos) << r.out;
  EXPECT_NE(line_for(r.out, "TESSERA_HOSTFILE").find("MLX_HOSTFILE"), std::string::npos);
  EXPECT_NE(line_for(r.out, "TESSERA_MPI_LIBNAME").find("MLX_MPI_LIBNAME"), std::string::npos);
  EXPECT_NE(line_for(r.out, "TESSERA_NCCL_HOST_IP").find("not used by this build"),
            std::string::npos);
}

TEST_F(ConfigCli, EnvIgnoresMalformedMetalValue) {
  const CliResult r = run_cli({"env"}, {{"MLX_METAL_FAST_SYNCH", "2"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(ConfigCli, EnvHidesTheJobToken) {
  const CliResult r = run_cli({"env"}, {{"TESSERA_JOB_TOKEN", "s3cr3t-token"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("s3cr3t-token"), std::string::npos);
  EXPECT_NE(line_for(r.out, "TESSERA_JOB_TOKEN").find("hidden"), std::string::npos);
}

TEST_F(ConfigCli, EnvMarkdownPrintsTheRegistryTable) {
  const CliResult r = run_cli({"env", "--markdown"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, cfg::markdown_table());
}

TEST_F(ConfigCli, EnvRejectsUnknownFlag) {
  const CliResult r = run_cli({"env", "--bogus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--bogus"), std::string::npos) << r.err;
}

TEST_F(ConfigCli, HelpPrintsUsageToStderrAndExitsTwo) {
  for (const char* flag : {"--help", "-h"}) {
    const CliResult r = run_cli({flag});
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_EQ(r.out, "") << flag;
    EXPECT_NE(r.err.find("usage: tessera"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("env"), std::string::npos) << r.err;
  }
}

TEST_F(ConfigCli, UnknownOrMissingSubcommandExitsTwo) {
  CliResult r = run_cli({"frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("frobnicate"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("usage: tessera"), std::string::npos) << r.err;
  r = run_cli({});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("usage: tessera"), std::string::npos) << r.err;
}

}  // namespace
