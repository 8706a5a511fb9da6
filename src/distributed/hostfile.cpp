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
  } catch (const nlohmann::json::parse_error& e) {
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

}  // namespace tessera::distributed::detail
