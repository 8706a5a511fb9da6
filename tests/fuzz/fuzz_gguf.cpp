// GGUF (src/io/gguf.cpp): versions 2 and 3, metadata of every type, quantized tensor types.
#include "fuzz_io_check.h"
#include "tessera/io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  fuzz::expect_parse_or<std::invalid_argument>("fuzz-input", [&] {
    auto [arrays, metadata] = load_gguf_bytes(fuzz::bytes_of(data, size), "fuzz-input");
    for (auto& [name, a] : arrays) fuzz::check_loaded(a);
    for (auto& [key, value] : metadata) {
      if (const auto* a = std::get_if<array>(&value)) fuzz::check_loaded(*a);
    }
  });
  return 0;
}
