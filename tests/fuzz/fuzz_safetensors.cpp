// safetensors (src/io/safetensors.cpp): the JSON header and every tensor's range.
#include "fuzz_io_check.h"
#include "tessera/io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  fuzz::expect_parse_or<std::invalid_argument>("fuzz-input", [&] {
    auto [arrays, metadata] = load_safetensors_bytes(fuzz::bytes_of(data, size), "fuzz-input");
    for (auto& [name, a] : arrays) fuzz::check_loaded(a);
  });
  return 0;
}
