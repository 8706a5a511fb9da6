// TCP transport for the ring backend: an RAII socket, listeners bound to one hostfile address,
// connect with back-off until a deadline, accept with a deadline, and full-deadline send/recv
// (poll based). Knows nothing about collectives (collectives.cpp decides which bytes go where).
#pragma once

#include <algorithm>
#include <chrono>
#include <limits>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "distributed/hostfile.h"

namespace tessera::distributed::detail {

using Clock = std::chrono::steady_clock;

// A point in time after which a wait fails; `none()` never expires.
class Deadline {
 public:
  static Deadline none() { return Deadline(); }
  // seconds <= 0 means no deadline (TESSERA_DIST_TIMEOUT=0).
  static Deadline after(double seconds);
  bool infinite() const { return infinite_; }
  bool expired() const { return !infinite_ && Clock::now() >= at_; }
  // Milliseconds left for poll(): -1 when infinite, never below 0.
  int poll_ms() const;
  double span_s() const { return span_s_; }  // the seconds it was made with (0: none)
  // Seconds left (infinity when infinite, never below 0).
  double remaining_s() const {
    if (infinite_) return std::numeric_limits<double>::infinity();
    return std::max(0.0, std::chrono::duration<double>(at_ - Clock::now()).count());
  }

 private:
  Deadline() = default;
  bool infinite_ = true;
  Clock::time_point at_{};
  double span_s_ = 0;
};

// What a blocking transfer is part of, for error messages:
// "[ring] rank 0: ... rank 1 (127.0.0.1:5001) ... during all_sum of 4.0 MiB (float32)".
struct IoContext {
  const char* op = "";        // "all_sum", "handshake", ...
  size_t bytes = 0;           // size of the whole operation
  const char* dtype = "";     // may be empty
  int rank = -1;              // this rank
  int peer = -1;              // the peer's rank
  std::string peer_address;   // "127.0.0.1:5001"
  double timeout_s = 0;       // the inactivity limit in force (0 = none), for the message
  const char* limit_var = "TESSERA_DIST_TIMEOUT";  // the variable that sets that limit
};

std::string format_bytes(size_t bytes);  // "64.0 MiB"
// "during all_sum of 64.0 MiB (float32)"
std::string describe_op(const IoContext& ctx);

// Owns one file descriptor; closes it on destruction. Move-only.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.release()) {}
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void close();
  // Wakes every thread blocked on this socket (peer sees EOF); the fd stays owned.
  void shutdown_both();
  void set_nonblocking(bool on);
  void set_nodelay();

 private:
  int fd_ = -1;
};

// Binds exactly `addr` (never INADDR_ANY) and listens.
// Throws std::runtime_error naming the address and errno text.
Socket listen_on(const HostAddress& addr, int rank);

// The local port a bound socket got (e.g. after binding port 0); throws on failure.
int local_port(const Socket& s);

// Accepts one connection or returns an invalid Socket when the deadline passes.
Socket accept_until(const Socket& listener, const Deadline& deadline, std::string* peer_text);

// Connects to `addr`, retrying with exponential back-off (10 ms .. 1 s) until `deadline`.
// Throws std::runtime_error naming the peer rank and address, the attempts and the last error.
Socket connect_with_backoff(const HostAddress& addr, const Deadline& deadline, int rank,
                            int peer, bool verbose);

// Blocking-with-deadline transfers on a socket in any mode (poll + non-blocking calls).
// Failures (peer closed, reset, timeout) throw std::runtime_error with the context.
void send_all(const Socket& s, const void* data, size_t len, const Deadline& d,
              const IoContext& ctx);
void recv_all(const Socket& s, void* data, size_t len, const Deadline& d, const IoContext& ctx);

// A transfer with `peer` failed: it closed or reset the connection, or (timeout) went silent for
// longer than the limit (TESSERA_DIST_TIMEOUT or the connect timeout).
struct PeerFailure : std::runtime_error {
  PeerFailure(const std::string& what, int peer, bool timeout, std::string during)
      : std::runtime_error(what), peer(peer), timeout(timeout), during(std::move(during)) {}
  int peer;  // -1 when unknown
  bool timeout;
  std::string during;  // "during all_sum of 4.0 MiB (float32)"
};
[[noreturn]] void throw_peer_closed(const IoContext& ctx, const char* direction, int err);
[[noreturn]] void throw_timeout(const IoContext& ctx);
// Throws std::runtime_error if an interrupt was requested (core/interrupt.h) during the wait.
void check_interrupt(const IoContext& ctx);
// Blocking waits poll in slices this long so that an interrupt is seen promptly.
inline constexpr int kInterruptSliceMs = 100;

// Builds the messages used by the transfers above (also by the pipelined ring loop).
std::string peer_closed_message(const IoContext& ctx, const char* direction, int err);
std::string timeout_message(const IoContext& ctx);

// The first address of `host` (IPv4 preferred) as text; throws std::invalid_argument naming
// `what`, the name and the resolver's reason.
std::string resolve_ip(const std::string& host, const std::string& what);
// {ip, port} with the IPv6 flag set from the text.
HostAddress ip_address(const std::string& ip, int port);
// gethostname().
std::string this_host_name();
// `bytes` random bytes from /dev/urandom as hex; throws std::runtime_error if it cannot be read.
std::string random_hex(size_t bytes);

// True when `host` is a loopback address or an address of one of this host's interfaces.
bool is_local_address(const HostAddress& addr);
// True for 127.0.0.0/8, ::1 and localhost.
bool is_loopback(const HostAddress& addr);

}  // namespace tessera::distributed::detail
