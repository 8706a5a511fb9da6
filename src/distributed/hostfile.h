// The two hostfiles of a job, parsed and validated completely here (DESIGN.md section 4):
// - the ring hostfile that init() reads (MLX-compatible): a JSON list with one entry per rank,
//   each a list of "ip:port" strings (one per connection);
// - the launcher's hostfile (`tessera launch --hostfile`, MLX's `mlx.launch` format): the hosts
//   of a job with their ssh names and addresses, optionally a backend and environment.
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

// One host of a launcher hostfile.
struct JobHost {
  std::string ssh;               // the name ssh uses; this machine's names run locally
  std::vector<std::string> ips;  // IP addresses the ranks on it communicate over
  // JACCL's RDMA devices, one entry per host of the job: each null (empty, no list), a device
  // name, or a list of names. Kept so that a hostfile round-trips; the ring does not use it.
  struct Rdma {
    bool is_list = false;
    std::vector<std::string> names;
  };
  std::vector<Rdma> rdma;
};

// A launcher hostfile. MLX's two forms are accepted: a list of host objects, or an object
// {"backend": ..., "envs": [...], "hosts": [...]}; to_json() writes the object form.
struct JobHostfile {
  std::string backend;            // "" when the file does not say
  std::vector<std::string> envs;  // "NAME=VALUE", given to every rank
  std::vector<JobHost> hosts;     // in rank order
  std::string to_json() const;
};

// Backends a launcher hostfile or --backend may name (MLX's list).
bool is_known_backend(const std::string& name);

// Parses and validates a launcher hostfile; `origin` names the file in messages. Throws
// std::invalid_argument naming the host index, the key and the problem.
JobHostfile parse_job_hostfile(const std::string& json_text, const std::string& origin = "hostfile");
JobHostfile load_job_hostfile(const std::string& path);

// `--hosts a,b,c`: one host per comma-separated entry (an IP address also becomes its ips; a
// name gets its addresses when the launcher resolves it). An empty entry throws.
JobHostfile job_hosts_from_list(const std::string& comma_separated);

}  // namespace tessera::distributed::detail
