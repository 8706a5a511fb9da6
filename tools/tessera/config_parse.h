// What `tessera config` reads from the hosts it inspects (config_command.cpp): each host's
// interfaces (the output of `ip -j addr show`, then "---", then "name speed" lines) and each
// host's probe result (`tessera _probe`'s JSON). Both arrive over ssh from machines the user
// named; both are checked here, since their names and addresses end up in shell commands and
// in indexes: a bad value throws std::invalid_argument saying which key and why.
#pragma once

#include <string>
#include <vector>

namespace tessera::cli {

struct Addr {
  std::string ip;  // IPv4 dotted
  int prefix = 0;  // 0..32
  bool v6 = false;
};

struct Iface {
  std::string name;  // letters, digits and . _ - @ : only
  bool up = false;
  long speed = -1;  // Mb/s, -1 unknown
  std::vector<Addr> v4;
  std::string link_local;  // fe80::... ("" when none)
};

std::vector<Iface> parse_interfaces(const std::string& text);

// One probe result: host `from` reached host `to` at `target` over its interface `via`.
struct Reach {
  int from, to;
  std::string target, via;
};

// The probe of host `from` among `n_hosts`: {"reached": [{"target", "host", "via"}, ...]}.
std::vector<Reach> parse_probe_output(const std::string& text, int from, int n_hosts);

}  // namespace tessera::cli
