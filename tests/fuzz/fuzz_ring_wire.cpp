// What a ring listener reads from anyone who can connect, and what ranks exchange before every
// message (src/distributed/ring): the handshake's hello, judged before any token exchange, and
// the message header. A hello is accepted only with every field inside this rank's group, and a
// refusal always says why; any header can be described.
#include <cstring>

#include "distributed/ring/handshake.h"
#include "distributed/ring/stream.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace dd = tessera::distributed::detail;
  using tessera::fuzz::contract_broken;
  const std::string_view in = tessera::fuzz::bytes_of(data, size);
  const std::string_view hello = in.substr(0, std::min(in.size(), dd::kHelloBytes));
  for (const char* token : {"", "job-token"}) {
    dd::JobTerms terms;
    terms.token = token;
    terms.world_size = 4;
    terms.generation = 2;
    const dd::HelloVerdict v = dd::judge_hello(hello, terms, /*my_rank=*/1, /*world_size=*/4,
                                               /*max_index=*/2);
    if (v.status != 0) {
      if (v.why.empty()) contract_broken("a refusal without a reason", std::to_string(v.status));
      continue;
    }
    const dd::ConnIdentity& id = v.id;
    if (id.client_rank < 0 || id.client_rank >= 4 || id.client_rank == 1 || id.server_rank != 1 ||
        static_cast<uint32_t>(id.kind) > 2 || id.index < 0 ||
        id.index >= (id.kind == dd::ConnKind::ring ? 2 : 1)) {
      contract_broken("an accepted hello out of range", std::to_string(id.client_rank));
    }
  }
  if (in.size() >= dd::kHelloBytes + sizeof(dd::WireHeader)) {
    dd::WireHeader h;
    std::memcpy(&h, in.data() + dd::kHelloBytes, sizeof h);
    if (dd::describe_header(h).empty() || !dd::headers_match(h, h)) {
      contract_broken("a header that cannot be described", "");
    }
  }
  return 0;
}
