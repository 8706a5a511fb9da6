// TCP sockets with deadlines for the ring backend (see socket.h).
#include "distributed/ring/socket.h"

#include "tessera/interrupt.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <thread>

namespace tessera::distributed::detail {

namespace {

std::string err_text(int err) { return std::string(std::strerror(err)); }

std::string peer_name(const IoContext& ctx) {
  if (ctx.peer < 0) {  // not identified yet (a connection still in its handshake)
    return "the client at " + (ctx.peer_address.empty() ? std::string("?") : ctx.peer_address);
  }
  return "rank " + std::to_string(ctx.peer) +
         (ctx.peer_address.empty() ? "" : " (" + ctx.peer_address + ")");
}

// getaddrinfo for a numeric or named host; throws naming the address.
struct AddrInfo {
  addrinfo* res = nullptr;
  AddrInfo(const HostAddress& a, bool passive) {
    addrinfo hints{};
    hints.ai_family = a.ipv6 ? AF_INET6 : AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (passive) hints.ai_flags = AI_PASSIVE;
    std::string port = std::to_string(a.port);
    int rc = getaddrinfo(a.host.c_str(), port.c_str(), &hints, &res);
    if (rc != 0) {
      throw std::runtime_error("[ring] cannot resolve " + a.text() + ": " + gai_strerror(rc));
    }
  }
  ~AddrInfo() {
    if (res) freeaddrinfo(res);
  }
};

}  // namespace

Deadline Deadline::after(double seconds) {
  Deadline d;
  if (seconds > 0) {
    d.infinite_ = false;
    d.span_s_ = seconds;
    d.at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(seconds));
  }
  return d;
}

int Deadline::poll_ms() const {
  if (infinite_) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
  if (left < 0) return 0;
  return static_cast<int>(std::min<long long>(left + 1, 1 << 30));
}

std::string format_bytes(size_t bytes) {
  char buf[64];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof(buf), "%zu B", bytes);
  } else if (bytes < (size_t(1) << 20)) {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", bytes / 1024.0);
  } else if (bytes < (size_t(1) << 30)) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / 1048576.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / 1073741824.0);
  }
  return buf;
}

std::string describe_op(const IoContext& ctx) {
  std::string s = std::string("during ") + ctx.op;
  if (ctx.bytes > 0) s += " of " + format_bytes(ctx.bytes);
  if (ctx.dtype && *ctx.dtype) s += std::string(" (") + ctx.dtype + ")";
  return s;
}

std::string peer_closed_message(const IoContext& ctx, const char* direction, int err) {
  std::string what = err == 0 ? "closed the connection" : "connection failed (" + err_text(err) + ")";
  return "[ring] rank " + std::to_string(ctx.rank) + ": " + peer_name(ctx) + " " + what +
         " while " + direction + " " + describe_op(ctx) +
         ". The peer may have exited or failed; see its log.";
}

std::string timeout_message(const IoContext& ctx) {
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%.1f", ctx.timeout_s);
  return "[ring] rank " + std::to_string(ctx.rank) + ": no data from " + peer_name(ctx) +
         " for " + secs + " s " + describe_op(ctx) +
         ". The peer may be stopped or calling a different operation; see its log, or raise " +
         ctx.limit_var + ".";
}

void throw_peer_closed(const IoContext& ctx, const char* direction, int err) {
  throw PeerFailure(peer_closed_message(ctx, direction, err), ctx.peer, false, describe_op(ctx));
}

void throw_timeout(const IoContext& ctx) {
  throw PeerFailure(timeout_message(ctx), ctx.peer, true, describe_op(ctx));
}

void check_interrupt(const IoContext& ctx) {
  if (!tessera::detail::interrupt_requested()) return;
  throw std::runtime_error("[ring] rank " + std::to_string(ctx.rank) + ": interrupted (SIGINT) " +
                           describe_op(ctx) +
                           "; this group is now out of step with its peers: exit, or make a new "
                           "group (clear_backends() then init()).");
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.release();
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void Socket::shutdown_both() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void Socket::set_nonblocking(bool on) {
  int flags = fcntl(fd_, F_GETFL, 0);
  fcntl(fd_, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

void Socket::set_nodelay() {
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Socket listen_on(const HostAddress& addr, int rank) {
  AddrInfo ai(addr, true);
  int last_err = 0;
  for (addrinfo* p = ai.res; p; p = p->ai_next) {
    Socket s(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol));
    if (!s.valid()) {
      last_err = errno;
      continue;
    }
    int one = 1;
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (p->ai_family == AF_INET6) setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (::bind(s.fd(), p->ai_addr, p->ai_addrlen) != 0 || ::listen(s.fd(), 64) != 0) {
      last_err = errno;
      continue;
    }
    s.set_nonblocking(true);
    return s;
  }
  throw std::runtime_error("[ring] rank " + std::to_string(rank) + ": cannot listen on " +
                           addr.text() + " (its entry in the hostfile): " + err_text(last_err) +
                           ". Is another job using the port, or is the address not of this host?");
}

int local_port(const Socket& s) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    throw std::runtime_error("[ring] getsockname failed: " + err_text(errno));
  }
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

Socket accept_until(const Socket& listener, const Deadline& deadline, std::string* peer_text) {
  while (true) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
    if (fd >= 0) {
      if (peer_text) {
        char host[INET6_ADDRSTRLEN] = "?";
        int port = 0;
        if (ss.ss_family == AF_INET) {
          auto* a = reinterpret_cast<sockaddr_in*>(&ss);
          inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
          port = ntohs(a->sin_port);
          *peer_text = std::string(host) + ":" + std::to_string(port);
        } else if (ss.ss_family == AF_INET6) {
          auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
          inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
          port = ntohs(a->sin6_port);
          std::string t = "[";
          t += host;
          t += "]:";
          t += std::to_string(port);
          *peer_text = t;
        }
      }
      Socket s(fd);
      s.set_nonblocking(false);
      return s;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      throw std::runtime_error("[ring] accept failed: " + err_text(errno));
    }
    if (deadline.expired()) return Socket();
    pollfd p{listener.fd(), POLLIN, 0};
    ::poll(&p, 1, deadline.poll_ms());
  }
}

Socket connect_with_backoff(const HostAddress& addr, const Deadline& deadline, int rank, int peer,
                            bool verbose) {
  AddrInfo ai(addr, false);
  int attempts = 0;
  int last_err = 0;
  auto wait = std::chrono::milliseconds(10);
  while (true) {
    ++attempts;
    for (addrinfo* p = ai.res; p; p = p->ai_next) {
      Socket s(::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol));
      if (!s.valid()) {
        last_err = errno;
        continue;
      }
      // Non-blocking connect so that the deadline also bounds the SYN wait.
      s.set_nonblocking(true);
      int rc = ::connect(s.fd(), p->ai_addr, p->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd pf{s.fd(), POLLOUT, 0};
        int ms = deadline.poll_ms();
        if (ms < 0 || ms > 5000) ms = 5000;
        if (::poll(&pf, 1, ms) == 1) {
          int err = 0;
          socklen_t el = sizeof(err);
          getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &el);
          rc = err == 0 ? 0 : -1;
          errno = err == 0 ? 0 : err;
        } else {
          errno = ETIMEDOUT;
          rc = -1;
        }
      }
      if (rc == 0) {
        s.set_nonblocking(false);
        s.set_nodelay();
        return s;
      }
      last_err = errno;
    }
    if (verbose) {
      std::cerr << "[ring] rank " << rank << ": attempt " << attempts << " to connect to rank "
                << peer << " (" << addr.text() << ") failed (" << err_text(last_err)
                << "); retrying in " << wait.count() << " ms\n";
    }
    if (deadline.expired()) {
      throw std::runtime_error(
          "[ring] rank " + std::to_string(rank) + ": could not connect to rank " +
          std::to_string(peer) + " (" + addr.text() + ") after " + std::to_string(attempts) +
          " attempts: " + err_text(last_err) +
          ". Is that rank running and listening? Raise TESSERA_DIST_CONNECT_TIMEOUT if it "
          "starts late.");
    }
    auto sleep = wait;
    if (!deadline.infinite()) {
      sleep = std::min(sleep, std::chrono::milliseconds(deadline.poll_ms()));
    }
    std::this_thread::sleep_for(sleep);
    wait = std::min(wait * 2, std::chrono::milliseconds(1000));
  }
}

void send_all(const Socket& s, const void* data, size_t len, const Deadline& d,
              const IoContext& ctx) {
  auto* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::send(s.fd(), p, std::min<size_t>(len, size_t(1) << 30),
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      throw_peer_closed(ctx, "sending to it", errno);
    }
    pollfd pf{s.fd(), POLLOUT, 0};
    int rc = ::poll(&pf, 1, d.poll_ms());
    if (rc == 0) throw_timeout(ctx);
  }
}

void recv_all(const Socket& s, void* data, size_t len, const Deadline& d, const IoContext& ctx) {
  auto* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = ::recv(s.fd(), p, std::min<size_t>(len, size_t(1) << 30), MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) throw_peer_closed(ctx, "receiving from it", 0);
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      throw_peer_closed(ctx, "receiving from it", errno);
    }
    pollfd pf{s.fd(), POLLIN, 0};
    int rc = ::poll(&pf, 1, d.poll_ms());
    if (rc == 0) throw_timeout(ctx);
  }
}

std::string resolve_ip(const std::string& host, const std::string& what) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0) {
    throw std::invalid_argument(what + ": cannot resolve the host name '" + host + "' (" +
                                ::gai_strerror(rc) + "); give its IP address");
  }
  std::string v4, v6;
  for (addrinfo* a = res; a; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ai_family == AF_INET && v4.empty()) {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, text, sizeof text);
      v4 = text;
    } else if (a->ai_family == AF_INET6 && v6.empty()) {
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, text, sizeof text);
      v6 = text;
    }
  }
  ::freeaddrinfo(res);
  if (v4.empty() && v6.empty()) {
    throw std::invalid_argument(what + ": the host name '" + host + "' has no address");
  }
  return v4.empty() ? v6 : v4;
}

HostAddress ip_address(const std::string& ip, int port) {
  HostAddress a;
  a.host = ip;
  a.port = port;
  a.ipv6 = ip.find(':') != std::string::npos;
  return a;
}

std::string this_host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::read(fd, raw.data(), bytes) == static_cast<ssize_t>(bytes);
  if (fd >= 0) ::close(fd);
  if (!ok) throw std::runtime_error("cannot read /dev/urandom");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : raw) out += hex[b >> 4], out += hex[b & 15];
  return out;
}

bool is_loopback(const HostAddress& addr) {
  return addr.ipv6 ? addr.host == "::1"
                   : addr.host.rfind("127.", 0) == 0 || addr.host == "localhost";
}

bool is_local_address(const HostAddress& addr) {
  if (is_loopback(addr)) return true;
  in6_addr want6{};
  in_addr want4{};
  bool is6 = inet_pton(AF_INET6, addr.host.c_str(), &want6) == 1;
  bool is4 = !is6 && inet_pton(AF_INET, addr.host.c_str(), &want4) == 1;
  if (!is4 && !is6) return false;  // host names: treated as remote
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return false;
  bool found = false;
  for (ifaddrs* i = ifs; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    if (is4 && i->ifa_addr->sa_family == AF_INET) {
      found = std::memcmp(&reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, &want4,
                          sizeof(want4)) == 0;
    } else if (is6 && i->ifa_addr->sa_family == AF_INET6) {
      found = std::memcmp(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, &want6,
                          sizeof(want6)) == 0;
    }
  }
  freeifaddrs(ifs);
  return found;
}

}  // namespace tessera::distributed::detail
