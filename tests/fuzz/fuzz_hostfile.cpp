// Hostfiles (src/distributed/hostfile.cpp): the ring's (rank -> addresses) and the launcher's
// (MLX's two forms). Either parses, and then survives a round trip through to_json(), or throws
// std::invalid_argument naming the file.
#include "distributed/hostfile.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace dd = tessera::distributed::detail;
  using tessera::fuzz::contract_broken;
  const std::string text(tessera::fuzz::bytes_of(data, size));
  tessera::fuzz::expect_parse_or<std::invalid_argument>("fuzz-input", [&] {
    const dd::Hostfile h = dd::parse_hostfile(text, "fuzz-input");
    if (dd::parse_hostfile(h.to_json(), "fuzz-input").to_json() != h.to_json()) {
      contract_broken("a ring hostfile does not round-trip", h.to_json());
    }
  });
  tessera::fuzz::expect_parse_or<std::invalid_argument>("fuzz-input", [&] {
    const dd::JobHostfile j = dd::parse_job_hostfile(text, "fuzz-input");
    if (dd::parse_job_hostfile(j.to_json(), "fuzz-input").to_json() != j.to_json()) {
      contract_broken("a launcher hostfile does not round-trip", j.to_json());
    }
  });
  return 0;
}
