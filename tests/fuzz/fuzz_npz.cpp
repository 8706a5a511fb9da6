// .npz (src/io/npz.cpp and its zip reader, zip.cpp: stored and deflate entries, zip64).
#include "fuzz_io_check.h"
#include "tessera/io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  fuzz::expect_parse_or<std::invalid_argument>("fuzz-input", [&] {
    for (auto& [name, a] : load_npz_bytes(fuzz::bytes_of(data, size), "fuzz-input")) {
      fuzz::check_loaded(a);
    }
  });
  return 0;
}
