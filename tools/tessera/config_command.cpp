// `tessera config`: the topology and hostfile tool (MLX's mlx.distributed_config, for Linux;
// DESIGN.md section 6). Checks ssh to every host, reads each host's interfaces (ip -j addr,
// /sys/class/net/*/speed), probes which hosts reach which addresses over TCP (`tessera _probe`
// on every host at once; every answer names the host that gave it, so nothing is guessed from
// subnets), finds the fastest set of links that forms a ring (and whether they form a full
// mesh), prints the topology (DOT with --dot) and writes a hostfile for tessera launch.
// Point-to-point links without IPv4 addresses are found through their IPv6 link-local
// addresses; --auto-setup gives them a /30 each (printing every command), otherwise the
// commands are printed for the user to run.
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "config_parse.h"
#include "distributed/hostfile.h"
#include "distributed/ring/socket.h"
#include "rank_host.h"

namespace tessera::cli {

namespace {

namespace dd = distributed::detail;
using json = nlohmann::json;

const char* kConfigUsage =
    "usage: tessera config --hosts H1,H2,... | --hostfile FILE [--backend ring|mpi]\n"
    "                      [--over ethernet|CIDR] [--dot] [--output FILE] [--auto-setup]\n"
    "                      [--ignore-unreachable] [--env K=V]... [--probe-port P] [--verbose]\n"
    "Checks passwordless ssh to every host (this machine's names run locally), reads their\n"
    "interfaces, probes over TCP which hosts reach which addresses, picks the fastest links that\n"
    "form a ring (reporting whether they form a full mesh), prints the topology (as GraphViz DOT\n"
    "with --dot) and writes a hostfile for tessera launch --hostfile (--output FILE, else it is\n"
    "printed). --over CIDR uses only addresses inside CIDR (e.g. 192.168.0.0/16); ethernet (the\n"
    "default) uses every interface but loopback. Point-to-point links with no IPv4 address are\n"
    "found through IPv6 link-local addresses: --auto-setup gives each a /30 from 192.168.0.0/16\n"
    "(with sudo -n when not root; every command is printed), otherwise the commands are printed.\n"
    "An unreachable host is an error; --ignore-unreachable leaves it out instead.\n";

struct Output {
  int code = -1;
  std::string out, err;
};

// Runs `argv` with stdout and stderr captured (spawn_child: its own process group, gone with
// this process); bounded by `seconds`, then SIGKILL (status 124).
Output run(const std::vector<std::string>& argv, double seconds) {
  char out_t[] = "/tmp/tessera-config-XXXXXX";
  char err_t[] = "/tmp/tessera-config-XXXXXX";
  const int of = ::mkstemp(out_t), ef = ::mkstemp(err_t);
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  Output r;
  const pid_t pid = spawn_child(argv, nullptr, {}, "", null, of, ef);
  ::close(null);
  int st = 0;
  for (const double end = now_s() + seconds;;) {
    if (::waitpid(pid, &st, WNOHANG) == pid) {
      r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
    if (now_s() > end) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      r.code = 124;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto slurp = [](const char* p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  r.out = slurp(out_t);
  r.err = slurp(err_t);
  ::close(of);
  ::close(ef);
  ::unlink(out_t);
  ::unlink(err_t);
  return r;
}

struct Host {
  std::string ssh;  // as given
  bool local = false;
  std::vector<Iface> ifaces;
  bool root = false, sudo = false;
};

// The command line that runs the shell command `cmd` on `h` (through ssh unless it is this machine).
std::vector<std::string> host_argv(const Host& h, const std::string& cmd) {
  if (h.local) return {"sh", "-c", cmd};
  std::vector<std::string> a = {"ssh"};
  a.insert(a.end(), ssh_options().begin(), ssh_options().end());
  a.insert(a.end(), {"--", h.ssh, cmd});
  return a;
}

// Runs a shell command on `h`, bounded by `seconds`.
Output on_host(const Host& h, const std::string& cmd, double seconds) { return run(host_argv(h, cmd), seconds); }

template <typename F>
void each_host(std::vector<Host>& hosts, F&& f) {
  std::vector<std::thread> ts;
  for (size_t i = 0; i < hosts.size(); ++i) ts.emplace_back([&, i] { f(i, hosts[i]); });
  for (auto& t : ts) t.join();
}

bool this_machine(const std::string& ssh) {
  if (ssh.find('@') != std::string::npos) return false;
  if (ssh == "localhost" || ssh == dd::this_host_name()) return true;
  try {
    return dd::is_local_address(dd::ip_address(dd::resolve_ip(ssh, "host"), 1));
  } catch (...) {
    return false;
  }
}

uint32_t v4_of(const std::string& ip) {
  in_addr a{};
  if (::inet_pton(AF_INET, ip.c_str(), &a) != 1) return 0;
  return ntohl(a.s_addr);
}
std::string v4_text(uint32_t v) {
  in_addr a{};
  a.s_addr = htonl(v);
  char b[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a, b, sizeof b);
  return b;
}
uint32_t mask_of(int prefix) { return prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix); }
std::string subnet_of(const Addr& a) { return v4_text(v4_of(a.ip) & mask_of(a.prefix)) + "/" + std::to_string(a.prefix); }

struct Cidr {
  uint32_t net = 0;
  int prefix = -1;  // -1: every address
  bool contains(const std::string& ip) const {
    return prefix < 0 || (v4_of(ip) & mask_of(prefix)) == net;
  }
};

Cidr parse_over(const std::string& v) {
  if (v == "ethernet") return {};
  const size_t slash = v.find('/');
  Cidr c;
  try {
    c.prefix = slash == std::string::npos ? -2 : std::stoi(v.substr(slash + 1));
  } catch (...) {
    c.prefix = -2;
  }
  in_addr a{};
  if (c.prefix < 0 || c.prefix > 32 || ::inet_pton(AF_INET, v.substr(0, slash).c_str(), &a) != 1) {
    throw std::invalid_argument("--over expects ethernet or an IPv4 subnet like 192.168.0.0/16, got '" + v + "'");
  }
  c.net = ntohl(a.s_addr) & mask_of(c.prefix);
  return c;
}

// One host's `tessera _probe`, its stdin and stdout piped to this process, its stderr in a
// file; killed (its process group) and cleaned up on destruction.
struct ProbeProc {
  pid_t pid = -1;
  Fd in, out;
  std::string buf, err_path;
  ~ProbeProc() {
    if (pid > 0) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (!err_path.empty()) ::unlink(err_path.c_str());
  }
  std::string err() const {
    std::ifstream f(err_path);
    std::string e(std::istreambuf_iterator<char>(f), {});
    while (!e.empty() && e.back() == '\n') e.pop_back();
    return e;
  }
};

// Every host listens on `port` and says so; only when all of them listen are they told to
// connect to every other host's candidate addresses, and each keeps listening until the last
// has reported (its stdin closes). A host whose ssh session starts seconds after the others' (a
// loaded machine) is probed all the same.
std::vector<Reach> probe(std::vector<Host>& hosts, const Cidr& over, int port, const std::string& self,
                         bool verbose) {
  const std::string token = dd::random_hex(8);
  std::vector<ProbeProc> ps(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    const Host& h = hosts[i];
    std::string cmd = shell_quote(self) + " _probe " + std::to_string(port) + " " + std::to_string(i) + " " + token;
    for (size_t j = 0; j < hosts.size(); ++j) {
      if (j == i) continue;
      for (const auto& f : hosts[j].ifaces) {
        if (!f.up) continue;
        for (const auto& a : f.v4)
          if (over.contains(a.ip)) cmd += " " + a.ip;
        if (f.v4.empty() && !f.link_local.empty()) {  // an unconfigured link: through each of mine
          for (const auto& mine : h.ifaces)
            if (mine.up && mine.v4.empty() && !mine.link_local.empty()) cmd += " " + f.link_local + "%" + mine.name;
        }
      }
    }
    char err_t[] = "/tmp/tessera-config-XXXXXX";
    const int ef = ::mkstemp(err_t);
    if (ef < 0) throw std::runtime_error(std::string("[config] cannot create a temporary file: ") + std::strerror(errno));
    ps[i].err_path = err_t;
    int in[2], out[2];
    make_pipe(in);
    make_pipe(out);
    ps[i].pid = spawn_child(host_argv(h, cmd), nullptr, {}, "", in[0], out[1], ef);
    ::close(in[0]);
    ::close(out[1]);
    ::close(ef);
    ps[i].in = Fd(in[1]);
    ps[i].out = Fd(out[0]);
  }
  // The next line of every probe, waiting at most `seconds` for all of them.
  auto next_lines = [&](double seconds, const std::string& what) {
    std::vector<std::string> lines(ps.size());
    std::vector<bool> have(ps.size(), false);
    for (const double end = now_s() + seconds;;) {
      std::vector<pollfd> fds;
      std::vector<size_t> who;
      for (size_t i = 0; i < ps.size(); ++i) {
        const size_t nl = ps[i].buf.find('\n');
        if (!have[i] && nl != std::string::npos) {
          lines[i] = ps[i].buf.substr(0, nl);
          ps[i].buf.erase(0, nl + 1);
          have[i] = true;
        }
        if (!have[i]) {
          fds.push_back({ps[i].out.fd, POLLIN, 0});
          who.push_back(i);
        }
      }
      if (fds.empty()) return lines;
      const double left = end - now_s();
      if (left <= 0) {
        throw std::runtime_error("[config] the probe on host '" + hosts[who[0]].ssh + "' did not " + what + " within " +
                                 std::to_string(static_cast<int>(seconds)) + " s" +
                                 (ps[who[0]].err().empty() ? "" : ": " + ps[who[0]].err()));
      }
      if (::poll(fds.data(), fds.size(), static_cast<int>(left * 1000) + 1) < 0 && errno != EINTR) {
        throw std::runtime_error(std::string("[config] poll failed: ") + std::strerror(errno));
      }
      for (size_t k = 0; k < fds.size(); ++k) {
        if (!fds[k].revents) continue;
        char chunk[4096];
        const ssize_t n = ::read(fds[k].fd, chunk, sizeof chunk);
        if (n > 0) {
          ps[who[k]].buf.append(chunk, static_cast<size_t>(n));
        } else if (n == 0 || errno != EINTR) {
          ProbeProc& p = ps[who[k]];
          int st = 0;
          for (int t = 0; t < 100 && ::waitpid(p.pid, &st, WNOHANG) == 0; ++t) ::usleep(10000);
          const std::string e = p.err();
          throw std::runtime_error("[config] the probe on host '" + hosts[who[k]].ssh + "' failed: " +
                                   (e.empty() ? "it ended before it could " + what : e));
        }
      }
    }
  };
  // ssh to a busy host can take many seconds; the probes themselves take at most 6 s.
  for (auto& l : next_lines(60, "start listening")) {
    if (l != "listening") throw std::runtime_error("[config] a probe answered '" + l + "' instead of 'listening'");
  }
  for (auto& p : ps) write_all(p.in.fd, "go\n");
  const std::vector<std::string> lines = next_lines(30, "report");
  for (auto& p : ps) p.in.reset();  // every probe may stop listening now
  for (auto& p : ps) {
    int st = 0;
    for (int t = 0; t < 500; ++t) {
      if (::waitpid(p.pid, &st, WNOHANG) == p.pid) {
        p.pid = -1;
        break;
      }
      ::usleep(10000);
    }
  }
  std::vector<Reach> out;
  for (size_t i = 0; i < hosts.size(); ++i) {
    std::vector<Reach> mine;
    try {
      mine = parse_probe_output(lines[i], static_cast<int>(i), static_cast<int>(hosts.size()));
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error("[config] the probe on host '" + hosts[i].ssh + "' answered: " + e.what());
    }
    for (auto& r : mine) {
      out.push_back(std::move(r));
      if (verbose) {
        std::fprintf(stderr, "[config] %s reaches %s at %s (via %s)\n", hosts[i].ssh.c_str(),
                     hosts[static_cast<size_t>(out.back().to)].ssh.c_str(), out.back().target.c_str(),
                     out.back().via.c_str());
      }
    }
  }
  return out;
}

// A usable link between two hosts: an address of each that the other reaches, in one subnet.
struct Link {
  int a, b;
  std::string ip_a, ip_b, if_a, if_b, subnet;
  long speed = -1;
};

std::vector<Link> find_links(const std::vector<Host>& hosts, const std::vector<Reach>& reach) {
  auto reached = [&](int from, int to, const std::string& ip) {
    return std::any_of(reach.begin(), reach.end(), [&](const Reach& r) {
      return r.from == from && r.to == to && r.target == ip;
    });
  };
  std::vector<Link> links;
  for (int a = 0; a < static_cast<int>(hosts.size()); ++a) {
    for (int b = a + 1; b < static_cast<int>(hosts.size()); ++b) {
      for (const auto& fa : hosts[static_cast<size_t>(a)].ifaces) {
        for (const auto& xa : fa.v4) {
          for (const auto& fb : hosts[static_cast<size_t>(b)].ifaces) {
            for (const auto& xb : fb.v4) {
              if (subnet_of(xa) != subnet_of(xb) || !reached(a, b, xb.ip) || !reached(b, a, xa.ip)) continue;
              Link l{a, b, xa.ip, xb.ip, fa.name, fb.name, subnet_of(xa), -1};
              l.speed = (fa.speed < 0 || fb.speed < 0) ? -1 : std::min(fa.speed, fb.speed);
              links.push_back(l);
            }
          }
        }
      }
    }
  }
  return links;
}

// The fastest link between a and b (-1 speed counts as slowest), or nullptr.
const Link* best_link(const std::vector<Link>& links, int a, int b) {
  const Link* best = nullptr;
  for (const auto& l : links) {
    if (!((l.a == a && l.b == b) || (l.a == b && l.b == a))) continue;
    if (!best || l.speed > best->speed) best = &l;
  }
  return best;
}

// The ring order (host 0 first) whose slowest link is fastest, then whose links sum fastest;
// empty when no ring exists. Exhaustive for up to 10 hosts, else the given order if it works.
std::vector<int> find_ring(const std::vector<Link>& links, int n) {
  auto speed = [&](int a, int b) {
    const Link* l = best_link(links, a, b);
    return l ? std::max<long>(l->speed, 0) : -1;
  };
  if (n == 1) return {0};
  if (n == 2) return speed(0, 1) >= 0 ? std::vector<int>{0, 1} : std::vector<int>{};
  std::vector<int> order(static_cast<size_t>(n)), best;
  for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  long best_min = -1, best_sum = -1;
  auto score = [&](const std::vector<int>& o, long& mn, long& sum) {
    mn = LONG_MAX;
    sum = 0;
    for (int i = 0; i < n; ++i) {
      const long s = speed(o[static_cast<size_t>(i)], o[static_cast<size_t>((i + 1) % n)]);
      if (s < 0) return false;
      mn = std::min(mn, s);
      sum += s;
    }
    return true;
  };
  if (n > 10) {
    long mn, sum;
    return score(order, mn, sum) ? order : std::vector<int>{};
  }
  do {
    long mn, sum;
    if (order[1] > order[static_cast<size_t>(n - 1)]) continue;  // each ring once, not mirrored
    if (score(order, mn, sum) && (mn > best_min || (mn == best_min && sum > best_sum))) {
      best = order;
      best_min = mn;
      best_sum = sum;
    }
  } while (std::next_permutation(order.begin() + 1, order.end()));
  return best;
}

std::string speed_text(long s) { return s < 0 ? "speed unknown" : std::to_string(s) + " Mb/s"; }

std::string dot_id(size_t i) { return "h" + std::to_string(i); }

}  // namespace

// `tessera _probe PORT INDEX TOKEN TARGET...` (on every host at once, hidden): listens on
// [::]:PORT (dual stack) answering "TESSERA-PROBE TOKEN INDEX" and prints "listening"; on "go"
// from stdin connects to every TARGET (ipv4, or fe80::...%iface) until each answers or 6 s
// pass, prints {"reached": [{"target", "host", "via"}]}, and listens on until stdin closes
// (the other hosts may still be probing this one). Never more than 5 minutes in all.
int probe_command(const std::vector<std::string>& args) {
  if (args.size() < 3) throw std::invalid_argument("usage: tessera _probe PORT INDEX TOKEN TARGET...");
  const int port = std::stoi(args[0]);
  const std::string hello = "TESSERA-PROBE " + args[2] + " " + args[1] + "\n";
  const int lfd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int zero = 0, one = 1;
  ::setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in6 any{};
  any.sin6_family = AF_INET6;
  any.sin6_addr = in6addr_any;
  any.sin6_port = htons(static_cast<uint16_t>(port));
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 || ::listen(lfd, 64) != 0) {
    std::fprintf(stderr, "cannot listen on port %d: %s (choose another with --probe-port)\n", port, std::strerror(errno));
    return 1;
  }
  std::atomic<bool> stop{false};
  std::thread acceptor([&] {
    while (!stop) {
      pollfd p{lfd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      (void)!::write(c, hello.data(), hello.size());
      ::close(c);
    }
  });
  struct Result {
    std::string target, via;
    int host = -1;
  };
  // The next line from stdin; none at its end or after 5 minutes in all.
  const double give_up = now_s() + 300;
  std::string in_buf;
  auto stdin_line = [&]() -> std::optional<std::string> {
    for (;;) {
      const size_t nl = in_buf.find('\n');
      if (nl != std::string::npos) {
        std::string l = in_buf.substr(0, nl);
        in_buf.erase(0, nl + 1);
        return l;
      }
      pollfd p{0, POLLIN, 0};
      const double left = give_up - now_s();
      if (left <= 0) return std::nullopt;
      if (::poll(&p, 1, static_cast<int>(left * 1000) + 1) <= 0) continue;
      char chunk[256];
      const ssize_t n = ::read(0, chunk, sizeof chunk);
      if (n == 0 || (n < 0 && errno != EINTR)) return std::nullopt;
      if (n > 0) in_buf.append(chunk, static_cast<size_t>(n));
    }
  };
  auto finish = [&] {
    stop = true;
    acceptor.join();
    ::close(lfd);
  };
  std::printf("listening\n");
  std::fflush(stdout);
  if (stdin_line() != "go") {
    finish();
    std::fprintf(stderr, "the probe was not told to go\n");
    return 1;
  }
  std::vector<Result> results(args.size() - 3);
  std::vector<std::thread> ts;
  const std::string want = "TESSERA-PROBE " + args[2] + " ";
  for (size_t k = 3; k < args.size(); ++k) {
    ts.emplace_back([&, k] {
      const std::string t = args[k];
      Result& r = results[k - 3];
      r.target = t.substr(0, t.find('%'));
      sockaddr_storage ss{};
      socklen_t len = 0;
      if (t.find(':') == std::string::npos) {
        auto* a = reinterpret_cast<sockaddr_in*>(&ss);
        a->sin_family = AF_INET;
        a->sin_port = htons(static_cast<uint16_t>(port));
        if (::inet_pton(AF_INET, t.c_str(), &a->sin_addr) != 1) return;
        len = sizeof *a;
      } else {
        auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(static_cast<uint16_t>(port));
        if (::inet_pton(AF_INET6, r.target.c_str(), &a->sin6_addr) != 1) return;
        if (t.find('%') != std::string::npos) a->sin6_scope_id = ::if_nametoindex(t.substr(t.find('%') + 1).c_str());
        len = sizeof *a;
      }
      for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(6); std::chrono::steady_clock::now() < end;) {
        const int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        timeval tv{1, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0) {
          char buf[128] = {};
          const ssize_t got = ::read(fd, buf, sizeof buf - 1);
          const std::string line(buf, got > 0 ? static_cast<size_t>(got) : 0);
          if (line.rfind(want, 0) == 0) {
            r.host = std::atoi(line.c_str() + want.size());
            sockaddr_storage me{};
            socklen_t ml = sizeof me;
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&me), &ml);
            char host[NI_MAXHOST] = {};
            ::getnameinfo(reinterpret_cast<sockaddr*>(&me), ml, host, sizeof host, nullptr, 0, NI_NUMERICHOST);
            r.via = host;
            ::close(fd);
            return;
          }
        }
        ::close(fd);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  for (auto& t : ts) t.join();
  json out = {{"reached", json::array()}};
  for (const auto& r : results)
    if (r.host >= 0) out["reached"].push_back({{"target", r.target}, {"host", r.host}, {"via", r.via}});
  std::printf("%s\n", out.dump().c_str());
  std::fflush(stdout);
  while (stdin_line()) {
  }  // stdin closed: every host has reported
  finish();
  return 0;
}

int config_command(const std::vector<std::string>& args) {
  std::string hosts_arg, hostfile_path, backend = "ring", output;
  std::vector<std::string> envs;
  bool dot = false, auto_setup = false, ignore_unreachable = false, verbose = false;
  Cidr over;
  int port = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw std::invalid_argument(a + " needs a value");
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kConfigUsage, stdout);
      return 0;
    } else if (a == "--hosts") {
      hosts_arg = value();
    } else if (a == "--hostfile") {
      hostfile_path = value();
    } else if (a == "--backend") {
      backend = value();
      if (backend != "ring" && backend != "mpi") {
        throw std::invalid_argument("--backend expects ring or mpi, got '" + backend + "'");
      }
    } else if (a == "--over") {
      over = parse_over(value());
    } else if (a == "--output" || a == "--output-hostfile") {
      output = value();
    } else if (a == "--env") {
      const std::string& kv = value();
      if (kv.find('=') == std::string::npos || kv[0] == '=') {
        throw std::invalid_argument("--env expects NAME=VALUE, got '" + kv + "'");
      }
      envs.push_back(kv);
    } else if (a == "--probe-port") {
      port = std::stoi(value());
      if (port < 1 || port > 65535) throw std::invalid_argument("--probe-port expects 1..65535");
    } else if (a == "--dot") {
      dot = true;
    } else if (a == "--auto-setup") {
      auto_setup = true;
    } else if (a == "--ignore-unreachable") {
      ignore_unreachable = true;
    } else if (a == "--verbose" || a == "-v") {
      verbose = true;
    } else {
      throw std::invalid_argument("unknown option '" + a + "'\n" + kConfigUsage);
    }
  }
  dd::JobHostfile given;
  if (!hostfile_path.empty() && !hosts_arg.empty()) {
    throw std::invalid_argument("--hosts and --hostfile both list the hosts; give one of them");
  }
  given = hostfile_path.empty() ? dd::job_hosts_from_list(hosts_arg.empty() ? "127.0.0.1" : hosts_arg)
                                : dd::load_job_hostfile(hostfile_path);
  envs.insert(envs.begin(), given.envs.begin(), given.envs.end());
  std::vector<Host> hosts;
  for (const auto& h : given.hosts) {
    if (std::any_of(hosts.begin(), hosts.end(), [&](const Host& x) { return x.ssh == h.ssh; })) {
      throw std::invalid_argument("[config] host '" + h.ssh + "' is listed twice");
    }
    Host x;
    x.ssh = h.ssh;
    x.local = this_machine(h.ssh);
    hosts.push_back(x);
  }
  if (port == 0) port = 40000 + static_cast<int>(std::random_device{}() % 20000);
  const std::string self = self_path();

  // 1. ssh (and sudo for --auto-setup), every host at once.
  std::vector<std::string> failures(hosts.size());
  each_host(hosts, [&](size_t i, Host& h) {
    Output o = on_host(h, "id -u; sudo -n true 2>/dev/null && echo sudo; exit 0", 15);
    if (o.code != 0) {
      std::string why = o.err;
      while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) why.pop_back();
      failures[i] = why.empty() ? "ssh exited with status " + std::to_string(o.code) : why;
      return;
    }
    h.root = o.out.rfind("0\n", 0) == 0;
    h.sudo = o.out.find("sudo") != std::string::npos;
  });
  std::string unreachable;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (!failures[i].empty()) unreachable += "\n  " + hosts[i].ssh + ": " + failures[i];
  }
  if (!unreachable.empty()) {
    if (!ignore_unreachable) {
      std::fprintf(stderr, "[config] cannot reach these hosts over ssh (BatchMode: passwordless, "
                   "known host keys):%s\n(--ignore-unreachable leaves them out)\n", unreachable.c_str());
      return 1;
    }
    std::fprintf(stderr, "[config] leaving out the hosts ssh cannot reach:%s\n", unreachable.c_str());
    std::vector<Host> kept;
    for (size_t i = 0; i < hosts.size(); ++i)
      if (failures[i].empty()) kept.push_back(hosts[i]);
    hosts = std::move(kept);
    if (hosts.empty()) {
      std::fprintf(stderr, "[config] no host is left\n");
      return 1;
    }
  }

  // 2. Interfaces.
  auto read_interfaces = [&] {
    std::vector<std::string> errs(hosts.size());
    each_host(hosts, [&](size_t i, Host& h) {
      Output o = on_host(h, "ip -j addr show && echo --- && for d in /sys/class/net/*; do "
                            "echo \"${d##*/} $(cat $d/speed 2>/dev/null || echo -1)\"; done", 15);
      if (o.code != 0) {
        errs[i] = o.err;
        return;
      }
      try {
        h.ifaces = parse_interfaces(o.out);
      } catch (const std::exception& e) {
        errs[i] = e.what();
      }
    });
    for (size_t i = 0; i < hosts.size(); ++i) {
      if (!errs[i].empty()) throw std::runtime_error("[config] cannot read the interfaces of '" + hosts[i].ssh + "': " + errs[i]);
    }
  };
  read_interfaces();
  std::vector<Reach> reach = probe(hosts, over, port, self, verbose);

  // 3. Unconfigured point-to-point links (reached only through link-local addresses).
  std::vector<std::string> setup_lines;
  {
    std::set<uint32_t> used;  // /30 blocks in use anywhere
    for (const auto& h : hosts)
      for (const auto& f : h.ifaces)
        for (const auto& a : f.v4) used.insert(v4_of(a.ip) & mask_of(30));
    uint32_t next = v4_of("192.168.0.0");
    std::set<std::pair<int, std::string>> done;  // (host, iface) already given an address
    std::vector<std::pair<size_t, std::string>> commands;  // host, command
    for (const auto& r : reach) {
      if (r.target.find(':') == std::string::npos) continue;
      const std::string mine = r.via.substr(r.via.find('%') == std::string::npos ? r.via.size() : r.via.find('%') + 1);
      std::string theirs;
      for (const auto& f : hosts[static_cast<size_t>(r.to)].ifaces)
        if (f.link_local == r.target) theirs = f.name;
      if (mine.empty() || theirs.empty() || done.count({r.from, mine}) || done.count({r.to, theirs})) continue;
      while (used.count(next)) next += 4;
      used.insert(next);
      done.insert({r.from, mine});
      done.insert({r.to, theirs});
      auto cmd = [&](const Host& h, const std::string& ip, const std::string& dev) {
        return std::string(h.root ? "" : "sudo -n ") + "ip addr add " + ip + "/30 dev " + dev;
      };
      commands.push_back({static_cast<size_t>(r.from), cmd(hosts[static_cast<size_t>(r.from)], v4_text(next + 1), mine)});
      commands.push_back({static_cast<size_t>(r.to), cmd(hosts[static_cast<size_t>(r.to)], v4_text(next + 2), theirs)});
      next += 4;
    }
    for (const auto& [h, c] : commands) setup_lines.push_back(hosts[h].ssh + ": " + c);
    if (!commands.empty() && !auto_setup) {
      std::fprintf(stderr, "[config] point-to-point links without IPv4 addresses; run these (or pass --auto-setup):\n");
      for (const auto& l : setup_lines) std::fprintf(stderr, "  %s\n", l.c_str());
    }
    if (!commands.empty() && auto_setup) {
      for (const auto& [h, c] : commands) {
        const Host& host = hosts[h];
        if (!host.root && !host.sudo) {
          throw std::runtime_error("[config] --auto-setup needs root or passwordless sudo on '" + host.ssh + "'");
        }
        std::fprintf(stderr, "[config] %s: %s\n", host.ssh.c_str(), c.c_str());
        Output o = on_host(host, c, 15);
        if (o.code != 0) throw std::runtime_error("[config] on '" + host.ssh + "', '" + c + "' failed: " + o.err);
      }
      read_interfaces();
      reach = probe(hosts, over, port, self, verbose);
    }
  }

  // 4. Links, ring, mesh.
  std::vector<Link> links = find_links(hosts, reach);
  for (auto it = links.begin(); it != links.end();) {
    if (!over.contains(it->ip_a) || !over.contains(it->ip_b)) it = links.erase(it); else ++it;
  }
  const int n = static_cast<int>(hosts.size());
  bool mesh = true;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) mesh = mesh && best_link(links, a, b) != nullptr;
  const std::vector<int> ring = find_ring(links, n);

  if (dot) {
    std::printf("graph tessera {\n  node [shape=rectangle];\n");
    for (size_t i = 0; i < hosts.size(); ++i) std::printf("  %s [label=\"%s\"];\n", dot_id(i).c_str(), hosts[i].ssh.c_str());
    for (const auto& l : links) {
      bool in_ring = false;
      for (size_t k = 0; k < ring.size() && ring.size() > 1; ++k) {
        const int x = ring[k], y = ring[(k + 1) % ring.size()];
        const Link* b = best_link(links, x, y);
        in_ring |= b && b->ip_a == l.ip_a && b->ip_b == l.ip_b;
      }
      std::printf("  %s -- %s [label=\"%s/%s %s, %s\"%s];\n", dot_id(static_cast<size_t>(l.a)).c_str(),
                  dot_id(static_cast<size_t>(l.b)).c_str(), l.if_a.c_str(), l.if_b.c_str(), l.subnet.c_str(),
                  speed_text(l.speed).c_str(), in_ring ? ", style=bold" : "");
    }
    std::printf("}\n");
  } else {
    std::fprintf(stderr, "[config] %d host%s, %zu link%s; %s%s\n", n, n == 1 ? "" : "s", links.size(),
                 links.size() == 1 ? "" : "s", mesh ? "a full mesh" : "not a full mesh",
                 ring.empty() ? ", no ring" : "");
    for (const auto& l : links) {
      std::fprintf(stderr, "  %s (%s %s) -- %s (%s %s): %s, %s\n", hosts[static_cast<size_t>(l.a)].ssh.c_str(),
                   l.if_a.c_str(), l.ip_a.c_str(), hosts[static_cast<size_t>(l.b)].ssh.c_str(), l.if_b.c_str(),
                   l.ip_b.c_str(), l.subnet.c_str(), speed_text(l.speed).c_str());
    }
  }
  if (ring.empty()) {
    std::string missing;
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b)
        if (!best_link(links, a, b)) missing += " " + hosts[static_cast<size_t>(a)].ssh + "-" + hosts[static_cast<size_t>(b)].ssh;
    std::fprintf(stderr, "[config] the links form no ring through all %d hosts (pairs without a link:%s)%s\n", n,
                 missing.c_str(), setup_lines.empty() || auto_setup ? "" : "; the commands above may add links");
    return 1;
  }

  // 5. The hostfile: hosts in ring order; each lists its addresses on the links from its left
  // neighbour (where that neighbour connects), as many per host as every ring hop has.
  dd::JobHostfile out;
  out.backend = backend;
  out.envs = envs;
  // Links that join only ring neighbours: keep every collective on them.
  if (!mesh && backend == "ring") out.envs.push_back("TESSERA_RING_DIRECT=0");
  size_t per_host = SIZE_MAX;
  std::vector<std::vector<std::string>> ips(ring.size());
  for (size_t k = 0; k < ring.size(); ++k) {
    const int me = ring[k], left = ring[(k + ring.size() - 1) % ring.size()];
    std::vector<const Link*> hop;
    for (const auto& l : links)
      if ((l.a == me && l.b == left) || (l.b == me && l.a == left)) hop.push_back(&l);
    std::stable_sort(hop.begin(), hop.end(), [](const Link* x, const Link* y) { return x->speed > y->speed; });
    const long fastest = hop.empty() ? -1 : hop[0]->speed;
    for (const Link* l : hop) {
      if (l->speed != fastest) break;
      const std::string& ip = l->a == me ? l->ip_a : l->ip_b;
      if (std::find(ips[k].begin(), ips[k].end(), ip) == ips[k].end()) ips[k].push_back(ip);
    }
    if (ring.size() == 1) {
      for (const auto& f : hosts[0].ifaces)
        for (const auto& a : f.v4)
          if (f.up && over.contains(a.ip) && ips[k].empty()) ips[k].push_back(a.ip);
      if (ips[k].empty()) ips[k].push_back("127.0.0.1");
    }
    per_host = std::min(per_host, ips[k].size());
  }
  for (size_t k = 0; k < ring.size(); ++k) {
    dd::JobHost h;
    h.ssh = hosts[static_cast<size_t>(ring[k])].ssh;
    h.ips.assign(ips[k].begin(), ips[k].begin() + static_cast<long>(per_host));
    out.hosts.push_back(h);
  }
  const std::string text = out.to_json();
  if (!output.empty()) {
    std::ofstream f(output);
    f << text << "\n";
    if (!f) throw std::runtime_error("[config] cannot write " + output);
    std::fprintf(stderr, "[config] wrote %s (ring:", output.c_str());
    for (int r : ring) std::fprintf(stderr, " %s", hosts[static_cast<size_t>(r)].ssh.c_str());
    std::fprintf(stderr, ")\n");
  } else if (!dot) {
    std::printf("Hostfile\n========\n%s\n", text.c_str());
  }
  return 0;
}

}  // namespace tessera::cli
