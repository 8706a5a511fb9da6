// Start-up through a coordinator (see rendezvous.h).
#include "distributed/ring/rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/sha256.h"
#include "tessera/config.h"

namespace tessera::distributed::detail {

namespace {

constexpr size_t kMaxRegistration = 1 << 20;
constexpr size_t kMaxTable = 64 << 20;
constexpr double kRegistrationWait = 5.0;  // a connection that sends nothing is dropped after it

// The local address the kernel would send from to reach `to`: the interface that reaches the
// coordinator (a UDP connect sends nothing).
std::string source_address_towards(const HostAddress& to) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (to.ipv6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(to.port));
    ::inet_pton(AF_INET6, to.host.c_str(), &a->sin6_addr);
    len = sizeof(sockaddr_in6);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(to.port));
    ::inet_pton(AF_INET, to.host.c_str(), &a->sin_addr);
    len = sizeof(sockaddr_in);
  }
  Socket s(::socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_storage mine{};
  socklen_t mine_len = sizeof mine;
  if (!s.valid() || ::connect(s.fd(), reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
      ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&mine), &mine_len) != 0) {
    throw std::runtime_error("[ring] rendezvous: no route from this host to the coordinator " +
                             to.text() + ": " + std::strerror(errno) +
                             "; set TESSERA_RING_ADDRESS to this rank's address");
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (mine.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&mine)->sin6_addr, text, sizeof text);
  } else {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&mine)->sin_addr, text, sizeof text);
  }
  return text;
}

IoContext context(int rank, int peer, const std::string& address) {
  IoContext c;
  c.op = "rendezvous";
  c.rank = rank;
  c.peer = peer;
  c.peer_address = address;
  return c;
}

// A message: u32 big-endian length, the JSON body, then (with a token) HMAC-SHA256 of
// `bound_to` + body under the token.
void send_message(const Socket& s, const std::string& body, const std::string& token,
                  const std::string& bound_to, const Deadline& d, const IoContext& ctx) {
  std::string m(4, '\0');
  const auto n = static_cast<uint32_t>(body.size());
  for (int k = 0; k < 4; ++k) m[k] = static_cast<char>((n >> (24 - 8 * k)) & 0xff);
  m += body;
  if (!token.empty()) {
    const Digest256 mac = hmac_sha256(token, bound_to + body);
    m.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  }
  send_all(s, m.data(), m.size(), d, ctx);
}

std::string recv_message(const Socket& s, size_t limit, const std::string& token,
                         const std::string& bound_to, const Deadline& d, const IoContext& ctx) {
  unsigned char len[4];
  recv_all(s, len, 4, d, ctx);
  const uint32_t n = rendezvous_body_length(len, limit);  // before anything is allocated
  std::string body(n, '\0');
  recv_all(s, body.data(), n, d, ctx);
  if (!token.empty()) {
    Digest256 mac{};
    recv_all(s, mac.data(), mac.size(), d, ctx);
    check_rendezvous_mac(body, mac.data(), token, bound_to);
  }
  return body;
}

struct Registrant {
  Socket socket;
  std::string address, host, nonce;
};

std::string missing_list(const std::vector<Registrant>& regs, int n) {
  std::string out;
  int shown = 0, count = 0;
  for (int r = 1; r < n; ++r) {
    if (regs[r].socket.valid()) continue;
    ++count;
    if (shown++ < 16) out += (out.empty() ? "" : ", ") + std::to_string(r);
  }
  if (count > 16) out += ", ... (" + std::to_string(count) + " in all)";
  return out;
}

// Rank 0: gathers every registration, answers each with the table (or the reason it failed).
Hostfile coordinate(const SchedulerJob& job, const HostAddress& at, const std::string& my_address,
                    const RingOptions& opt) {
  Socket server = listen_on(at, 0);
  const Deadline d = Deadline::after(opt.connect_timeout_s);
  std::vector<Registrant> regs(static_cast<size_t>(job.size));
  regs[0].address = my_address;
  regs[0].host = this_host_name();
  int missing = job.size - 1;
  auto answer_all = [&](const nlohmann::json& reply) {
    for (int r = 1; r < job.size; ++r) {
      auto& g = regs[static_cast<size_t>(r)];
      if (!g.socket.valid()) continue;
      try {
        send_message(g.socket, reply.dump(), opt.token, g.nonce, Deadline::after(10),
                     context(0, r, g.address));
      } catch (const std::exception&) {
        // that rank is gone; the others still get their answer
      }
    }
  };
  auto fail = [&](const std::string& why) {
    answer_all({{"ok", false}, {"error", "rank 0: " + why}});
    throw std::runtime_error("[ring] rank 0: rendezvous at " + at.text() + " (" + job.source +
                             " job): " + why);
  };
  while (missing > 0) {
    std::string peer;
    Socket c = accept_until(server, d, &peer);
    if (!c.valid()) {
      fail("ranks " + missing_list(regs, job.size) + " of " + std::to_string(job.size) +
           " did not register within " + std::to_string(static_cast<int>(opt.connect_timeout_s)) +
           " s (TESSERA_DIST_CONNECT_TIMEOUT); did they start, and can they reach " + at.text() + "?");
    }
    c.set_nonblocking(false);
    Registration reg;
    try {
      reg = parse_registration(recv_message(c, kMaxRegistration, opt.token, "",
                                            Deadline::after(std::min(kRegistrationWait, d.remaining_s() + 0.1)),
                                            context(0, -1, peer)));
    } catch (const std::exception& e) {
      if (opt.verbose) std::cerr << "[ring] rank 0: ignored a connection from " << peer << ": " << e.what() << "\n";
      continue;  // a stranger cannot end the job
    }
    const int r = reg.rank, size = reg.size;
    const std::string who = "the process on " + reg.host + " (" + peer + ")";
    if (size != job.size) {
      fail(who + " registered as rank " + std::to_string(r) + " of " + std::to_string(size) +
           " ranks, but this job has " + std::to_string(job.size) + ": two jobs share the coordinator?");
    }
    if (r < 1 || r >= job.size) fail(who + " registered as rank " + std::to_string(r) + ", out of range");
    auto& g = regs[static_cast<size_t>(r)];
    if (g.socket.valid()) {
      fail("both the process on " + g.host + " and " + who + " registered as rank " + std::to_string(r));
    }
    g.socket = std::move(c);
    g.address = reg.address;
    g.host = reg.host;
    g.nonce = reg.nonce;
    --missing;
  }
  nlohmann::json table = nlohmann::json::array();
  for (const auto& g : regs) table.push_back(nlohmann::json::array({g.address}));
  Hostfile hf = parse_hostfile(table.dump(), "the rendezvous table");
  answer_all({{"ok", true}, {"table", table}});
  return hf;
}

}  // namespace

uint32_t rendezvous_body_length(const unsigned char length[4], size_t limit) {
  const uint32_t n = (uint32_t{length[0]} << 24) | (uint32_t{length[1]} << 16) |
                     (uint32_t{length[2]} << 8) | length[3];
  if (n > limit) {
    throw std::invalid_argument("a message of " + std::to_string(n) + " bytes (more than " +
                                std::to_string(limit) + "): not a Tessera rendezvous");
  }
  return n;
}

void check_rendezvous_mac(const std::string& body, const unsigned char mac[32],
                          const std::string& token, const std::string& bound_to) {
  const Digest256 want = hmac_sha256(token, bound_to + body);
  if (!constant_time_equal(mac, want.data(), want.size())) {
    throw std::invalid_argument("its message is not signed with this job's TESSERA_JOB_TOKEN");
  }
}

namespace {

// The JSON object of a message, or std::invalid_argument naming what it is not.
nlohmann::json message_object(const std::string& body, const char* what) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw std::invalid_argument(std::string("not a rendezvous ") + what + ": not a JSON object");
  return j;
}

template <typename T>
T field(const nlohmann::json& j, const char* key, const char* what) {
  const auto it = j.find(key);
  const bool ok = it != j.end() && (std::is_same_v<T, std::string> ? it->is_string()
                                    : std::is_same_v<T, bool>      ? it->is_boolean()
                                                                   : it->is_number_integer());
  if (!ok) {
    throw std::invalid_argument(std::string("not a rendezvous ") + what + ": \"" + key + "\" is missing or not a " +
                                (std::is_same_v<T, std::string> ? "string" : std::is_same_v<T, bool> ? "bool" : "integer"));
  }
  if constexpr (std::is_same_v<T, int>) {
    constexpr int64_t kMax = int64_t{1} << 30;
    const int64_t v = it->is_number_unsigned()
                          ? static_cast<int64_t>(std::min<uint64_t>(it->template get<uint64_t>(), kMax + 1))
                          : it->template get<int64_t>();
    if (v < 0 || v > kMax) {
      throw std::invalid_argument(std::string("not a rendezvous ") + what + ": \"" + key + "\" is " + std::to_string(v));
    }
    return static_cast<int>(v);
  } else {
    return it->template get<T>();
  }
}

}  // namespace

Registration parse_registration(const std::string& body) {
  const nlohmann::json j = message_object(body, "registration");
  if (field<int>(j, "tessera_rendezvous", "registration") != 1) {
    throw std::invalid_argument("not a rendezvous registration: \"tessera_rendezvous\" is not 1");
  }
  Registration r;
  r.rank = field<int>(j, "rank", "registration");
  r.size = field<int>(j, "size", "registration");
  r.address = field<std::string>(j, "address", "registration");
  r.host = field<std::string>(j, "host", "registration");
  r.nonce = field<std::string>(j, "nonce", "registration");
  parse_host_address(r.address, "the registration's address");  // throws naming it
  return r;
}

RendezvousReply parse_rendezvous_reply(const std::string& body, const std::string& origin) {
  const nlohmann::json j = message_object(body, "answer");
  RendezvousReply r;
  r.ok = field<bool>(j, "ok", "answer");
  if (!r.ok) {
    r.error = field<std::string>(j, "error", "answer");
    return r;
  }
  const auto table = j.find("table");
  if (table == j.end()) throw std::invalid_argument("not a rendezvous answer: no \"table\"");
  r.table = parse_hostfile(table->dump(), origin);
  return r;
}

std::vector<std::string> expand_slurm_hostlist(const std::string& list) {
  auto bad = [&](const std::string& why) -> std::invalid_argument {
    return std::invalid_argument("[ring] the Slurm host list '" + list + "' is malformed: " + why);
  };
  std::vector<std::string> out;
  size_t i = 0;
  while (i < list.size()) {
    std::vector<std::string> names = {""};  // the cartesian product of this item's pieces
    while (i < list.size() && list[i] != ',') {
      if (list[i] == '[') {
        const size_t close = list.find(']', i);
        if (close == std::string::npos) throw bad("a '[' without ']'");
        std::vector<std::string> options;
        const std::string inner = list.substr(i + 1, close - i - 1);
        size_t at = 0;
        while (at <= inner.size()) {
          size_t comma = inner.find(',', at);
          if (comma == std::string::npos) comma = inner.size();
          const std::string part = inner.substr(at, comma - at);
          const size_t dash = part.find('-');
          const std::string lo = part.substr(0, dash), hi = dash == std::string::npos ? lo : part.substr(dash + 1);
          if (lo.empty() || hi.empty() || lo.find_first_not_of("0123456789") != std::string::npos ||
              hi.find_first_not_of("0123456789") != std::string::npos || lo.size() > 9 || hi.size() > 9) {
            throw bad("'" + part + "' is not a number or a range a-b");
          }
          const long a = std::stol(lo), b = std::stol(hi);
          if (b < a) throw bad("the range '" + part + "' runs backwards");
          if (b - a > 100000) throw bad("the range '" + part + "' is too long");
          for (long v = a; v <= b; ++v) {
            std::string s = std::to_string(v);
            if (s.size() < lo.size()) s.insert(0, lo.size() - s.size(), '0');  // keep zero padding
            options.push_back(s);
          }
          at = comma + 1;
        }
        std::vector<std::string> next;
        for (const auto& n : names)
          for (const auto& o : options) next.push_back(n + o);
        if (next.size() > 1000000) throw bad("it names more than a million hosts");
        names = std::move(next);
        i = close + 1;
      } else if (list[i] == ']') {
        throw bad("a ']' without '['");
      } else {
        for (auto& n : names) n += list[i];
        ++i;
      }
    }
    for (auto& n : names) {
      if (n.empty()) throw bad("an empty host name");
      out.push_back(std::move(n));
    }
    ++i;  // the comma
  }
  if (out.empty()) throw bad("no hosts");
  return out;
}

std::optional<SchedulerJob> detect_scheduler_job() {
  SchedulerJob job;
  auto take = [&](const char* source, const char* rank_var, const char* size_var) {
    if (!config::get_string(rank_var) || !config::get_string(size_var)) return false;
    job.source = source;
    job.rank_var = rank_var;
    job.rank = static_cast<int>(config::get_int(rank_var));
    job.size = static_cast<int>(config::get_int(size_var));
    if (job.rank >= job.size) {
      throw std::invalid_argument(std::string("[ring] ") + rank_var + "=" + std::to_string(job.rank) +
                                  " is out of range for " + size_var + "=" + std::to_string(job.size));
    }
    return true;
  };
  // Slurm's batch shell (sbatch) also has SLURM_PROCID=0 and SLURM_NTASKS=N, but no step: a
  // program run there directly is one process, not rank 0 of N. Only an srun step has a step id,
  // and its own task count.
  const bool slurm_step = config::get_string("SLURM_STEP_ID").has_value();
  const char* slurm_size = config::get_string("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
  if (!(slurm_step && take("Slurm", "SLURM_PROCID", slurm_size)) &&
      !take("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE") &&
      !take("PMI", "PMI_RANK", "PMI_SIZE")) {
    return std::nullopt;
  }
  if (auto c = config::get_string("TESSERA_COORDINATOR"); c && !c->empty()) {
    job.coordinator = *c;
    job.coordinator_origin = "TESSERA_COORDINATOR";
  } else if (job.source == "Slurm") {
    std::optional<std::string> nodes;
    std::string from;
    for (const char* v : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"}) {
      if ((nodes = config::get_string(v))) {
        from = v;
        break;
      }
    }
    if (nodes && config::get_string("SLURM_JOB_ID")) {
      const int64_t job_id = config::get_int("SLURM_JOB_ID");
      const int64_t step = config::get_int("SLURM_STEP_ID");
      const int port = static_cast<int>(20000 + (job_id * 16 + step) % 10000);
      job.coordinator = expand_slurm_hostlist(*nodes)[0] + ":" + std::to_string(port);
      job.coordinator_origin = "the first node of " + from + " and a port from SLURM_JOB_ID and SLURM_STEP_ID";
    }
  }
  return job;
}

std::shared_ptr<GroupImpl> rendezvous_ring(const SchedulerJob& job, RingOptions opt) {
  const std::string where = job.source + " job, rank " + std::to_string(job.rank) + " of " +
                            std::to_string(job.size) + " from " + job.rank_var;
  if (job.coordinator.empty()) {
    throw std::invalid_argument("[ring] this process was started by " + job.source + " (" + where +
                                ") but no coordinator is known: set TESSERA_COORDINATOR=host:port "
                                "(rank 0's host and a free port) on every rank, or use a hostfile");
  }
  HostAddress coord = parse_host_address(job.coordinator, "[ring] the coordinator (" + job.coordinator_origin + ")");
  coord = ip_address(resolve_ip(coord.host, "[ring] the coordinator host (" + job.coordinator_origin + ")"), coord.port);
  std::string my_ip;
  if (auto a = config::get_string("TESSERA_RING_ADDRESS"); a && !a->empty()) {
    const bool v6 = a->find(':') != std::string::npos;
    my_ip = parse_host_address((v6 ? "[" + *a + "]" : *a) + ":1", "TESSERA_RING_ADDRESS").host;
  } else if (job.rank == 0) {
    my_ip = coord.host;
  } else {
    my_ip = source_address_towards(coord);
  }
  if (job.rank == 0 && !is_local_address(coord)) {
    throw std::invalid_argument("[ring] rank 0 (" + where + ") runs on " + this_host_name() +
                                ", but the coordinator " + job.coordinator + " (" + job.coordinator_origin +
                                ") is not one of its addresses: rank 0 must run on the coordinator host");
  }
  std::vector<Socket> listeners;
  listeners.push_back(listen_on(ip_address(my_ip, 0), job.rank));
  const std::string me = ip_address(my_ip, local_port(listeners[0])).text();
  if (opt.verbose) {
    std::cerr << "[ring] rank " << job.rank << ": " << where << "; coordinator " << coord.text() << " ("
              << job.coordinator_origin << "); listening on " << me << "\n";
  }
  Hostfile hf;
  if (job.rank == 0) {
    hf = coordinate(job, coord, me, opt);
  } else {
    const Deadline d = Deadline::after(opt.connect_timeout_s);
    Socket c = connect_with_backoff(coord, d, job.rank, 0, opt.verbose);
    const std::string nonce = random_hex(16);
    const nlohmann::json reg = {{"tessera_rendezvous", 1}, {"rank", job.rank}, {"size", job.size},
                                {"address", me}, {"host", this_host_name()}, {"nonce", nonce}};
    IoContext ctx = context(job.rank, 0, coord.text());
    send_message(c, reg.dump(), opt.token, "", d, ctx);
    // Rank 0 answers by the end of its own connect timeout, which may have started later.
    const double wait = opt.connect_timeout_s + 10;
    ctx.timeout_s = wait;
    ctx.limit_var = "TESSERA_DIST_CONNECT_TIMEOUT";
    RendezvousReply reply;
    try {
      reply = parse_rendezvous_reply(recv_message(c, kMaxTable, opt.token, nonce, Deadline::after(wait), ctx),
                                     "the rendezvous table from " + coord.text());
    } catch (const PeerFailure&) {
      throw;
    } catch (const std::exception& e) {
      throw std::runtime_error("[ring] rank " + std::to_string(job.rank) + ": the answer of the coordinator " +
                               coord.text() + " is not usable: " + e.what());
    }
    if (!reply.ok) {
      throw std::runtime_error("[ring] rank " + std::to_string(job.rank) + ": the rendezvous at " +
                               coord.text() + " failed: " + reply.error);
    }
    hf = std::move(reply.table);
  }
  return std::make_shared<RingGroup>(job.rank, std::move(hf), std::move(opt), std::move(listeners));
}

}  // namespace tessera::distributed::detail
