// tessera config's readers of host output (config_parse.h).
#include "config_parse.h"

#include <arpa/inet.h>

#include <map>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace tessera::cli {

namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& what, const std::string& why) {
  throw std::invalid_argument(what + ": " + why);
}

// Names that go into shell commands unquoted must be plain.
bool plain_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (unsigned char c : s) {
    if (!(std::isalnum(c) || c == '.' || c == '_' || c == '-' || c == '@' || c == ':')) return false;
  }
  return true;
}

bool is_ip(int family, const std::string& s) {
  unsigned char buf[16];
  return ::inet_pton(family, s.c_str(), buf) == 1;
}

const json& member(const json& obj, const char* key, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key)) bad(where, std::string("no \"") + key + "\"");
  return obj.at(key);
}

std::string string_at(const json& obj, const char* key, const std::string& where) {
  const json& v = member(obj, key, where);
  if (!v.is_string()) bad(where, std::string("\"") + key + "\" is not a string");
  return v.get<std::string>();
}

}  // namespace

std::vector<Iface> parse_interfaces(const std::string& text) {
  const std::string where = "the output of ip -j addr";
  const size_t split = text.find("\n---\n");
  if (split == std::string::npos) bad(where, "no \"---\" line after the JSON");
  const json j = json::parse(text.substr(0, split), nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) bad(where, "not a JSON array");
  std::map<std::string, long> speed;
  std::istringstream rest(text.substr(split + 5));
  std::string name, s;
  while (rest >> name >> s) {
    try {
      speed[name] = std::stol(s);
    } catch (...) {
      speed[name] = -1;
    }
  }
  std::vector<Iface> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& e = j[i];
    const std::string at = where + ", entry " + std::to_string(i);
    if (!e.is_object()) bad(at, "not an object");
    Iface f;
    f.name = string_at(e, "ifname", at);
    if (!plain_name(f.name)) bad(at, "the interface name \"" + f.name + "\" is not a plain name");
    const std::string state = e.contains("operstate") && e["operstate"].is_string()
                                  ? e["operstate"].get<std::string>() : "";
    bool flag_up = false, loopback = false;
    if (e.contains("flags") && e["flags"].is_array()) {
      for (const auto& fl : e["flags"]) {
        flag_up |= fl == "UP";
        loopback |= fl == "LOOPBACK";
      }
    }
    if (loopback) continue;
    f.up = flag_up && (state == "UP" || state == "UNKNOWN");
    f.speed = speed.count(f.name) ? speed[f.name] : -1;
    if (e.contains("addr_info")) {
      const json& addrs = e["addr_info"];
      if (!addrs.is_array()) bad(at, "\"addr_info\" is not an array");
      for (const auto& a : addrs) {
        if (!a.is_object() || !a.contains("family") || !a["family"].is_string()) continue;
        const std::string family = a["family"].get<std::string>();
        if (family == "inet") {
          const std::string ip = string_at(a, "local", at);
          const json& p = member(a, "prefixlen", at);
          if (!is_ip(AF_INET, ip)) bad(at, "\"" + ip + "\" is not an IPv4 address");
          if (!p.is_number_integer() || p.get<int64_t>() < 0 || p.get<int64_t>() > 32) {
            bad(at, "prefixlen " + p.dump() + " of " + ip + " is not 0..32");
          }
          f.v4.push_back({ip, static_cast<int>(p.get<int64_t>()), false});
        } else if (family == "inet6" && a.value("scope", json()) == "link" &&
                   !(a.contains("tentative") && a["tentative"] == true)) {
          const std::string ip = string_at(a, "local", at);
          if (!is_ip(AF_INET6, ip)) bad(at, "\"" + ip + "\" is not an IPv6 address");
          f.link_local = ip;
        }
      }
    }
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Reach> parse_probe_output(const std::string& text, int from, int n_hosts) {
  const std::string where = "the probe's answer";
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const json& reached = member(j, "reached", where);
  if (!reached.is_array()) bad(where, "\"reached\" is not an array");
  std::vector<Reach> out;
  for (size_t i = 0; i < reached.size(); ++i) {
    const json& r = reached[i];
    const std::string at = where + ", entry " + std::to_string(i);
    const json& host = member(r, "host", at);
    if (!host.is_number_integer() || host.get<int64_t>() < 0 || host.get<int64_t>() >= n_hosts ||
        host.get<int64_t>() == from) {
      bad(at, "host " + host.dump() + " is not another of the " + std::to_string(n_hosts) + " hosts");
    }
    Reach x{from, static_cast<int>(host.get<int64_t>()), string_at(r, "target", at), string_at(r, "via", at)};
    const size_t pct = x.target.find('%');
    const std::string ip = x.target.substr(0, pct);
    if (!(pct == std::string::npos ? is_ip(AF_INET, ip) || is_ip(AF_INET6, ip)
                                    : is_ip(AF_INET6, ip) && plain_name(x.target.substr(pct + 1)))) {
      bad(at, "target \"" + x.target + "\" is not an address");
    }
    if (!is_ip(AF_INET, x.via) && !is_ip(AF_INET6, x.via.substr(0, x.via.find('%')))) {
      bad(at, "via \"" + x.via + "\" is not an address");
    }
    out.push_back(std::move(x));
  }
  return out;
}

}  // namespace tessera::cli
