// The rendezvous messages (src/distributed/ring/rendezvous.cpp), from anyone who can connect
// to the coordinator: the length prefix (checked before any allocation), a registration, rank
// 0's answer. Each parses into valid values or throws std::invalid_argument.
#include "distributed/ring/rendezvous.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace dd = tessera::distributed::detail;
  using tessera::fuzz::contract_broken;
  const std::string body(tessera::fuzz::bytes_of(data, size));
  if (size >= 4) {
    tessera::fuzz::expect_parse_or<std::invalid_argument>("rendezvous", [&] {
      if (dd::rendezvous_body_length(data, 1 << 20) > (1u << 20)) contract_broken("length", "");
    });
  }
  tessera::fuzz::expect_parse_or<std::invalid_argument>("", [&] {
    const dd::Registration r = dd::parse_registration(body);
    dd::parse_host_address(r.address, "address");  // valid, as parsed
  });
  tessera::fuzz::expect_parse_or<std::invalid_argument>("", [&] {
    const dd::RendezvousReply r = dd::parse_rendezvous_reply(body, "fuzz-input");
    if (r.ok && r.table.ranks.empty()) contract_broken("an empty table", body);
  });
  return 0;
}
