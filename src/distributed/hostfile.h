// MLX-compatible ring hostfile: a JSON list with one entry per rank, each a list of "ip:port"
// strings (one per connection). Parsed and validated completely here (DESIGN.md section 4).
#pragma once

#include <string>
#include <vector>

namespace tessera::distributed::detail {

struct HostAddress {
  std::string host;  // "127.0.0.1", "::1" (no brackets) or a host name
  int port = 0;      // 1..65535
  bool ipv6 = false;
  std::string text() const;  // "127.0.0.1:5000" or "[::1]:5000"
};

struct Hostfile {
  // ranks[r][c]: the address rank r listens on for its connection c.
  std::vector<std::vector<HostAddress>> ranks;
  int size() const { return static_cast<int>(ranks.size()); }
  // Connections per neighbour (every rank lists the same count).
  int connections() const { return ranks.empty() ? 0 : static_cast<int>(ranks[0].size()); }
  std::string to_json() const;  // the file format, e.g. for a launcher
};

// Parses one "ip:port" entry; `where` prefixes error messages (e.g. "rank 2, entry 1").
// Throws std::invalid_argument naming the entry and the problem.
HostAddress parse_host_address(const std::string& text, const std::string& where);

// Parses and validates the JSON text; `origin` names the file in messages.
// Throws std::invalid_argument that names the rank, the entry and the problem.
Hostfile parse_hostfile(const std::string& json_text, const std::string& origin = "hostfile");

// Reads and parses a file; an unreadable file throws std::invalid_argument naming the path.
Hostfile load_hostfile(const std::string& path);

}  // namespace tessera::distributed::detail
