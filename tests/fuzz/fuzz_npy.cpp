// .npy (src/io/npy.cpp): load_npy_bytes loads or throws std::invalid_argument naming the input.
#include "fuzz_io_check.h"
#include "tessera/io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  fuzz::expect_parse_or<std::invalid_argument>("fuzz-input", [&] {
    fuzz::check_loaded(load_npy_bytes(fuzz::bytes_of(data, size), "fuzz-input"));
  });
  return 0;
}
