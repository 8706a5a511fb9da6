// Parsing and validation of the ring hostfile (see hostfile.h).
#include "distributed/hostfile.h"

#include <arpa/inet.h>

#include <cctype>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace tessera::distributed::detail {

namespace {

[[noreturn]] void fail(const std::string& origin, const std::string& msg) {
  throw std::invalid_argument("[hostfile] " + origin + ": " + msg);
}

bool valid_hostname(const std::string& h) {
  if (h.empty() || h.size() > 253) return false;
  for (char ch : h) {
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '.' || ch == '_')) {
      return false;
    }
  }
  return h.front() != '-' && h.front() != '.';
}

std::string json_type_name(const nlohmann::json& j) { return std::string(j.type_name()); }

bool is_ip_literal(const std::string& s) {
  in_addr v4{};
  in6_addr v6{};
  return inet_pton(AF_INET, s.c_str(), &v4) == 1 || inet_pton(AF_INET6, s.c_str(), &v6) == 1;
}

// An ssh destination: [user@]host, where host is a name (or an ssh config alias) or an IP.
// A leading '-' would make ssh read it as an option, so it is refused.
bool valid_ssh_name(const std::string& s) {
  const size_t at = s.find('@');
  const std::string host = at == std::string::npos ? s : s.substr(at + 1);
  if (at != std::string::npos) {
    const std::string user = s.substr(0, at);
    if (user.empty() || user[0] == '-' ||
        user.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
            std::string::npos) {
      return false;
    }
  }
  return valid_hostname(host) || is_ip_literal(host);
}

bool valid_env_entry(const std::string& kv) {
  const size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0 || std::isdigit(static_cast<unsigned char>(kv[0]))) {
    return false;
  }
  for (size_t i = 0; i < eq; ++i) {
    if (!std::isalnum(static_cast<unsigned char>(kv[i])) && kv[i] != '_') return false;
  }
  return true;
}

JobHost parse_job_host(const nlohmann::json& h, const std::string& origin, const std::string& where) {
  if (!h.is_object()) {
    fail(origin, where + ": expected an object like {\"ssh\": \"host1\", \"ips\": [\"10.0.0.1\"]} "
                 "but got a JSON " + json_type_name(h) + " (" + h.dump() + ")");
  }
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() != "ssh" && it.key() != "ips" && it.key() != "rdma") {
      fail(origin, where + ": unknown key \"" + it.key() + "\" (a host has \"ssh\", \"ips\" and "
                   "\"rdma\")");
    }
  }
  JobHost out;
  if (!h.contains("ssh")) fail(origin, where + ": \"ssh\" is missing (the name ssh reaches it by)");
  if (!h["ssh"].is_string()) {
    fail(origin, where + ": \"ssh\" must be a string, got a JSON " + json_type_name(h["ssh"]));
  }
  out.ssh = h["ssh"].get<std::string>();
  if (!valid_ssh_name(out.ssh)) {
    fail(origin, where + ": \"ssh\": \"" + out.ssh + "\" is not a host name, [user@]host or IP address");
  }
  if (h.contains("ips")) {
    const auto& ips = h["ips"];
    if (!ips.is_array()) {
      fail(origin, where + ": \"ips\" must be a list of IP addresses, got a JSON " + json_type_name(ips));
    }
    for (size_t k = 0; k < ips.size(); ++k) {
      if (!ips[k].is_string() || !is_ip_literal(ips[k].get<std::string>())) {
        fail(origin, where + ", ips entry " + std::to_string(k) + ": " + ips[k].dump() +
                         " is not an IP address (host names belong in \"ssh\")");
      }
      out.ips.push_back(ips[k].get<std::string>());
    }
  }
  if (h.contains("rdma")) {
    const auto& rdma = h["rdma"];
    if (!rdma.is_array()) {
      fail(origin, where + ": \"rdma\" must be a list (one entry per host), got a JSON " +
                       json_type_name(rdma));
    }
    for (size_t k = 0; k < rdma.size(); ++k) {
      JobHost::Rdma d;
      const auto& e = rdma[k];
      auto bad = [&] {
        fail(origin, where + ", rdma entry " + std::to_string(k) + ": expected null, a device name "
                     "or a list of names, got " + e.dump());
      };
      if (e.is_string()) {
        d.names.push_back(e.get<std::string>());
      } else if (e.is_array()) {
        d.is_list = true;
        for (const auto& n : e) {
          if (!n.is_string()) bad();
          d.names.push_back(n.get<std::string>());
        }
      } else if (!e.is_null()) {
        bad();
      }
      out.rdma.push_back(std::move(d));
    }
  }
  return out;
}

}  // namespace

std::string HostAddress::text() const {
  return ipv6 ? "[" + host + "]:" + std::to_string(port) : host + ":" + std::to_string(port);
}

HostAddress parse_host_address(const std::string& text, const std::string& where) {
  const std::string quoted = "\"" + text + "\"";
  HostAddress a;
  std::string port_text;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos) {
      throw std::invalid_argument(where + " " + quoted +
                                  ": missing ']' after the IPv6 address; write \"[::1]:5000\"");
    }
    a.host = text.substr(1, close - 1);
    a.ipv6 = true;
    if (close + 1 >= text.size() || text[close + 1] != ':') {
      throw std::invalid_argument(where + " " + quoted +
                                  ": missing ':port' after the IPv6 address; write \"[::1]:5000\"");
    }
    port_text = text.substr(close + 2);
    in6_addr tmp{};
    if (inet_pton(AF_INET6, a.host.c_str(), &tmp) != 1) {
      throw std::invalid_argument(where + " " + quoted + ": '" + a.host +
                                  "' is not a valid IPv6 address");
    }
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) {
      throw std::invalid_argument(where + " " + quoted +
                                  ": expected \"ip:port\" (e.g. \"10.0.0.1:5000\")");
    }
    a.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (a.host.find(':') != std::string::npos) {
      throw std::invalid_argument(where + " " + quoted +
                                  ": an IPv6 address needs brackets, e.g. \"[::1]:5000\"");
    }
    if (a.host.empty()) {
      throw std::invalid_argument(where + " " + quoted + ": the address before ':' is empty");
    }
    in_addr tmp{};
    bool dotted_digits = a.host.find_first_not_of("0123456789.") == std::string::npos;
    if (dotted_digits ? inet_pton(AF_INET, a.host.c_str(), &tmp) != 1 : !valid_hostname(a.host)) {
      throw std::invalid_argument(where + " " + quoted + ": '" + a.host +
                                  "' is not a valid IPv4 address or host name");
    }
  }
  if (port_text.empty() || port_text.size() > 6 ||
      port_text.find_first_not_of("0123456789") != std::string::npos) {
    throw std::invalid_argument(where + " " + quoted + ": port '" + port_text +
                                "' is not a number in 1-65535");
  }
  long port = std::stol(port_text);
  if (port < 1 || port > 65535) {
    throw std::invalid_argument(where + " " + quoted + ": port " + port_text +
                                " is out of range 1-65535");
  }
  a.port = static_cast<int>(port);
  return a;
}

Hostfile parse_hostfile(const std::string& json_text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number out of range
    fail(origin, std::string("not valid JSON (") + e.what() +
                     "); expected a list with one entry per rank, e.g. "
                     "[[\"127.0.0.1:5000\"], [\"127.0.0.1:5001\"]]");
  }
  if (!j.is_array()) {
    fail(origin, "the top level is a JSON " + json_type_name(j) +
                     "; expected a list with one entry per rank, e.g. "
                     "[[\"127.0.0.1:5000\"], [\"127.0.0.1:5001\"]]");
  }
  if (j.empty()) fail(origin, "the list of ranks is empty; it needs one entry per rank");
  Hostfile hf;
  std::map<std::string, std::string> seen;  // normalised address -> where it was first listed
  for (size_t r = 0; r < j.size(); ++r) {
    const auto& entry = j[r];
    const std::string rank_where = "rank " + std::to_string(r);
    if (!entry.is_array()) {
      fail(origin, rank_where + ": expected a list of \"ip:port\" strings but got a JSON " +
                       json_type_name(entry) + " (" + entry.dump() + ")");
    }
    if (entry.empty()) fail(origin, rank_where + ": the list of addresses is empty");
    std::vector<HostAddress> addrs;
    for (size_t c = 0; c < entry.size(); ++c) {
      const std::string where = rank_where + ", entry " + std::to_string(c);
      if (!entry[c].is_string()) {
        fail(origin, where + ": expected an \"ip:port\" string but got a JSON " +
                         json_type_name(entry[c]) + " (" + entry[c].dump() + ")");
      }
      HostAddress a;
      try {
        a = parse_host_address(entry[c].get<std::string>(), where);
      } catch (const std::invalid_argument& e) {
        fail(origin, e.what());
      }
      std::string key = a.text();
      auto it = seen.find(key);
      if (it != seen.end()) {
        fail(origin, where + " \"" + entry[c].get<std::string>() + "\": duplicate of " +
                         it->second + "; every rank and connection needs its own ip:port");
      }
      seen.emplace(key, where);
      addrs.push_back(std::move(a));
    }
    if (r > 0 && addrs.size() != hf.ranks[0].size()) {
      fail(origin, rank_where + " lists " + std::to_string(addrs.size()) +
                       " addresses but rank 0 lists " + std::to_string(hf.ranks[0].size()) +
                       "; every rank needs the same number (one per connection)");
    }
    hf.ranks.push_back(std::move(addrs));
  }
  return hf;
}

Hostfile load_hostfile(const std::string& path) {
  std::ifstream f(path);
  if (!f) {
    throw std::invalid_argument("[hostfile] cannot read '" + path +
                                "'; check TESSERA_HOSTFILE / MLX_HOSTFILE");
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_hostfile(ss.str(), "'" + path + "'");
}

std::string Hostfile::to_json() const {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : ranks) {
    nlohmann::json e = nlohmann::json::array();
    for (const auto& a : r) e.push_back(a.text());
    j.push_back(e);
  }
  return j.dump();
}

bool is_known_backend(const std::string& name) {
  for (const char* b : {"ring", "mpi", "nccl", "jaccl", "jaccl-ring"}) {
    if (name == b) return true;
  }
  return false;
}

JobHostfile parse_job_hostfile(const std::string& json_text, const std::string& origin) {
  const char* example = "expected a list of hosts like [{\"ssh\": \"host1\", \"ips\": [\"10.0.0.1\"]}] "
                        "or an object {\"backend\": ..., \"envs\": [...], \"hosts\": [...]}";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number out of range
    fail(origin, std::string("not valid JSON (") + e.what() + "); " + example);
  }
  JobHostfile out;
  const nlohmann::json* hosts = &j;
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() != "backend" && it.key() != "envs" && it.key() != "hosts") {
        fail(origin, "unknown key \"" + it.key() + "\" at the top level (it has \"backend\", "
                     "\"envs\" and \"hosts\")");
      }
    }
    if (j.contains("backend")) {
      if (!j["backend"].is_string()) fail(origin, "\"backend\" must be a string");
      out.backend = j["backend"].get<std::string>();
      if (!out.backend.empty() && !is_known_backend(out.backend)) {
        fail(origin, "\"backend\": \"" + out.backend +
                         "\" is not one of ring, mpi, nccl, jaccl, jaccl-ring");
      }
    }
    if (j.contains("envs")) {
      const auto& envs = j["envs"];
      if (!envs.is_array()) fail(origin, "\"envs\" must be a list of \"NAME=VALUE\" strings");
      for (size_t k = 0; k < envs.size(); ++k) {
        if (!envs[k].is_string() || !valid_env_entry(envs[k].get<std::string>())) {
          fail(origin, "envs entry " + std::to_string(k) + ": " + envs[k].dump() +
                           " is not \"NAME=VALUE\" with NAME of letters, digits and underscores");
        }
        out.envs.push_back(envs[k].get<std::string>());
      }
    }
    if (!j.contains("hosts")) fail(origin, "\"hosts\" is missing; " + std::string(example));
    hosts = &j["hosts"];
  }
  if (!hosts->is_array()) {
    fail(origin, "the hosts are a JSON " + json_type_name(*hosts) + "; " + example);
  }
  if (hosts->empty()) fail(origin, "the list of hosts is empty");
  for (size_t i = 0; i < hosts->size(); ++i) {
    out.hosts.push_back(parse_job_host((*hosts)[i], origin, "host " + std::to_string(i)));
  }
  return out;
}

JobHostfile load_job_hostfile(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::invalid_argument("[hostfile] cannot read '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_job_hostfile(ss.str(), "'" + path + "'");
}

JobHostfile job_hosts_from_list(const std::string& list) {
  JobHostfile out;
  size_t start = 0;
  for (int k = 0;; ++k) {
    size_t comma = list.find(',', start);
    std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.front()))) name.erase(0, 1);
    if (name.empty()) {
      throw std::invalid_argument("[hostfile] --hosts '" + list + "': entry " + std::to_string(k) +
                                  " is empty (hosts are separated by single commas)");
    }
    if (!valid_ssh_name(name)) {
      throw std::invalid_argument("[hostfile] --hosts '" + list + "': '" + name +
                                  "' is not a host name, [user@]host or IP address");
    }
    JobHost h;
    h.ssh = name;
    const size_t at = name.find('@');
    const std::string host = at == std::string::npos ? name : name.substr(at + 1);
    if (is_ip_literal(host)) h.ips.push_back(host);
    out.hosts.push_back(std::move(h));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string JobHostfile::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  j["backend"] = backend;
  j["envs"] = envs;
  nlohmann::json hs = nlohmann::json::array();
  for (const auto& h : hosts) {
    nlohmann::json rdma = nlohmann::json::array();
    for (const auto& d : h.rdma) {
      if (d.is_list) rdma.push_back(d.names);
      else if (d.names.empty()) rdma.push_back(nullptr);
      else rdma.push_back(d.names[0]);
    }
    hs.push_back({{"ssh", h.ssh}, {"ips", h.ips}, {"rdma", rdma}});
  }
  j["hosts"] = hs;
  return j.dump(2);
}

}  // namespace tessera::distributed::detail
