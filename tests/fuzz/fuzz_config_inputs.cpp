// tessera config's readers of what hosts answer over ssh (tools/tessera/config_parse.cpp): the
// interface listing and the probe result. Values that parse are plain (names fit in a shell
// command, prefixes 0..32, hosts in range); anything else is std::invalid_argument.
#include <arpa/inet.h>

#include "config_parse.h"
#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera::cli;
  using tessera::fuzz::contract_broken;
  const std::string text(tessera::fuzz::bytes_of(data, size));
  tessera::fuzz::expect_parse_or<std::invalid_argument>("", [&] {
    for (const Iface& f : parse_interfaces(text)) {
      if (f.name.find_first_of(" ;&|$`'\"\\\n") != std::string::npos) contract_broken("name", f.name);
      for (const Addr& a : f.v4) {
        in_addr x{};
        if (a.prefix < 0 || a.prefix > 32 || ::inet_pton(AF_INET, a.ip.c_str(), &x) != 1) {
          contract_broken("address", a.ip);
        }
      }
    }
  });
  tessera::fuzz::expect_parse_or<std::invalid_argument>("", [&] {
    for (const Reach& r : parse_probe_output(text, 1, 4)) {
      if (r.to < 0 || r.to >= 4 || r.to == 1) contract_broken("host index", std::to_string(r.to));
    }
  });
  return 0;
}
