// Failure notices on the control connections (see failure_notice.h).
#include "distributed/ring/failure_notice.h"

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>

namespace tessera::distributed::detail {

namespace {

constexpr uint32_t kNoticeMagic = 0x54534142;  // "TSAB"
constexpr uint32_t kMaxCause = 2048;

struct NoticeHeader {
  uint32_t magic;
  int32_t origin;
  uint32_t len;
};

}  // namespace

void send_notice(const Socket& s, const FailureNotice& n) {
  if (!s.valid()) return;
  const std::string cause = n.cause.substr(0, kMaxCause);
  NoticeHeader h{kNoticeMagic, n.origin, static_cast<uint32_t>(cause.size())};
  std::string msg(reinterpret_cast<const char*>(&h), sizeof h);
  msg += cause;
  [[maybe_unused]] ssize_t w = ::send(s.fd(), msg.data(), msg.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

std::optional<FailureNotice> await_notice(const std::vector<const Socket*>& socks, double wait_s) {
  const Deadline deadline = Deadline::after(std::max(wait_s, 0.001));
  std::vector<const Socket*> open;
  for (const Socket* s : socks) {
    if (s && s->valid()) open.push_back(s);
  }
  while (!open.empty()) {
    std::vector<pollfd> pf;
    for (const Socket* s : open) pf.push_back({s->fd(), POLLIN, 0});
    int rc = ::poll(pf.data(), pf.size(), deadline.poll_ms());
    if (rc <= 0) return std::nullopt;  // no notice within the wait
    for (size_t i = pf.size(); i-- > 0;) {
      if (!pf[i].revents) continue;
      const Socket& s = *open[i];
      open.erase(open.begin() + static_cast<long>(i));
      try {
        IoContext ctx;
        NoticeHeader h{};
        recv_all(s, &h, sizeof h, deadline, ctx);
        if (h.magic != kNoticeMagic || h.len > kMaxCause) continue;
        FailureNotice n;
        n.origin = h.origin;
        n.cause.resize(h.len);
        recv_all(s, n.cause.data(), h.len, deadline, ctx);
        return n;
      } catch (const std::runtime_error&) {
        // Closed without a notice (the peer died) or cut short: nothing to learn here.
      }
    }
  }
  return std::nullopt;
}

void drain(const Socket& s) {
  if (!s.valid()) return;
  char buf[4096];
  while (::recv(s.fd(), buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
}

}  // namespace tessera::distributed::detail
