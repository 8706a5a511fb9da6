// Helpers shared by the op tests: reading an evaluated array back without going through the
// code under test, and deterministic inputs.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::test_util {

// A shell command's exit status (-1 when killed by a signal) and its output (stdout; add 2>&1
// to the command for stderr too).
struct CommandResult {
  int code;
  std::string out;
};
// How often `needle` occurs in `s`.
inline int count_of(const std::string& s, const std::string& needle) {
  int c = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++c;
  return c;
}

// n loopback ports that were free a moment ago: all bound at once (no duplicates), read back,
// released.
inline std::vector<int> free_loopback_ports(int n) {
  std::vector<int> fds, ports;
  for (int i = 0; i < n; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) continue;
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    fds.push_back(fd);
    ports.push_back(ntohs(a.sin_port));
  }
  for (int fd : fds) ::close(fd);
  return ports;
}

inline CommandResult run_command(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  CommandResult r{-1, ""};
  if (p == nullptr) return r;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, got);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Evaluates `a` and returns its elements in row-major logical order as double (the real part of
// complex values), following its strides and offset directly: no copy or astype kernel involved.
inline std::vector<double> values(array a) {
  eval(a);
  std::vector<double> out(a.size());
  detail::dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = a.data<T>();
    for (size_t i = 0; i < a.size(); ++i) {
      size_t rem = i;
      int64_t off = 0;
      for (int d = static_cast<int>(a.ndim()) - 1; d >= 0; --d) {
        off += static_cast<int64_t>(rem % a.shape()[d]) * a.strides()[d];
        rem /= a.shape()[d];
      }
      out[i] = detail::cast_scalar<double, T>(p[off]);
    }
  });
  return out;
}

// n deterministic values in [-1, 1) from a 64-bit LCG; the seed picks the sequence.
inline std::vector<double> seeded_values(size_t n, uint64_t seed) {
  std::vector<double> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& e : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    e = static_cast<double>(x >> 11) / static_cast<double>(1ull << 53) * 2.0 - 1.0;
  }
  return v;
}

inline size_t numel(const Shape& s) {
  size_t n = 1;
  for (auto d : s) n *= static_cast<size_t>(d);
  return n;
}

// An array of `shape` filled with seeded_values, rounded to `dtype`.
inline array random_array(const Shape& shape, Dtype dtype, uint64_t seed) {
  return astype(array(seeded_values(numel(shape), seed), shape, float64), dtype);
}

}  // namespace tessera::test_util
