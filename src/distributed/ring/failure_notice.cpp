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

void collect_notices(const std::vector<const Socket*>& socks, double wait_s,
                     const std::function<void(const FailureNotice&)>& on_notice) {
  const Deadline deadline = Deadline::after(std::max(wait_s, 0.001));
  std::vector<const Socket*> open;
  for (const Socket* s : socks) {
    if (s && s->valid()) open.push_back(s);
  }
  while (!open.empty()) {
    std::vector<pollfd> pf;
    for (const Socket* s : open) pf.push_back({s->fd(), POLLIN, 0});
    if (::poll(pf.data(), pf.size(), deadline.poll_ms()) <= 0) return;  // the wait is over
    for (size_t i = pf.size(); i-- > 0;) {
      if (!pf[i].revents) continue;
      const Socket& s = *open[i];
      try {
        IoContext ctx;
        NoticeHeader h{};
        recv_all(s, &h, sizeof h, deadline, ctx);
        if (h.magic != kNoticeMagic || h.len > kMaxCause) throw std::runtime_error("not a notice");
        FailureNotice n;
        n.origin = h.origin;
        n.cause.resize(h.len);
        recv_all(s, n.cause.data(), h.len, deadline, ctx);
        on_notice(n);
      } catch (const std::runtime_error&) {
        // Ended (the peer closed or died) or garbled: nothing more to learn from it.
        open.erase(open.begin() + static_cast<long>(i));
      }
    }
  }
}

void drain(const Socket& s) {
  if (!s.valid()) return;
  char buf[4096];
  while (::recv(s.fd(), buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
}

}  // namespace tessera::distributed::detail
