// What the file-format targets check of a loaded array: its bytes exist (every byte is read,
// so a sanitizer sees a short buffer), its size agrees with its shape, and bools are 0 or 1.
#pragma once

#include "fuzz_target.h"
#include "tessera/tessera.h"

namespace tessera::fuzz {

inline void check_loaded(array a) {
  eval(a);
  size_t n = 1;
  for (int32_t d : a.shape()) {
    if (d < 0) contract_broken("a negative dimension", std::to_string(d));
    n *= static_cast<size_t>(d);
  }
  if (a.size() != n || a.nbytes() != n * a.itemsize() || a.buffer_size() < a.nbytes()) {
    contract_broken("size and shape disagree", std::to_string(a.size()));
  }
  const auto* p = a.data<unsigned char>();
  unsigned sum = 0;
  for (size_t i = 0; i < a.nbytes(); ++i) sum += p[i];
  volatile unsigned sink = sum;
  (void)sink;
  if (a.dtype() == bool_) {
    for (size_t i = 0; i < a.nbytes(); ++i) {
      if (p[i] > 1) contract_broken("a bool byte that is not 0 or 1", std::to_string(p[i]));
    }
  }
}

}  // namespace tessera::fuzz
