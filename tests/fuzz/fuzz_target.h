// Shared by the libFuzzer targets (tests/fuzz/fuzz_*.cpp): the contract every parser of outside
// bytes keeps. An input either parses, into values the target then checks, or the parser throws
// its documented error type with a message that names the source; anything else (another
// exception, a crash, a sanitizer report, a hang) is a bug. The same sources build as libFuzzer
// targets (cmake -DTESSERA_FUZZ=ON, clang) and, with replay_main.cpp, as the programs that
// `make test` runs over the checked-in corpora.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tessera::fuzz {

inline std::string_view bytes_of(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

[[noreturn]] inline void contract_broken(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz contract broken: %s: %s\n", what, detail.c_str());
  std::abort();
}

// Runs parse(); an exception of type Documented must name `source` in its message; any other
// exception escapes to the fuzzer (an uncaught exception aborts: a finding).
template <typename Documented, typename F>
void expect_parse_or(const std::string& source, F&& parse) {
  try {
    parse();
  } catch (const Documented& e) {
    if (std::string_view(e.what()).find(source) == std::string_view::npos) {
      contract_broken("the error does not name its source", std::string(e.what()));
    }
  }
}

}  // namespace tessera::fuzz
