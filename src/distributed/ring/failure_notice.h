// Failure notices of the ring backend: how a failing rank tells its neighbours why, so that
// every survivor reports the first failure instead of blaming the neighbour that merely gave up
// after it. Each neighbour pair has a control connection that never carries data; a failing
// rank writes one notice (the cause and the rank that first saw it) there before it closes its
// data connections, and a rank whose data connection broke reads it before choosing its error.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "distributed/ring/socket.h"

namespace tessera::distributed::detail {

struct FailureNotice {
  int origin = -1;    // the rank that first saw the failure
  std::string cause;  // what it saw, without the "[ring] rank N: " prefix
};

// Best effort, non-blocking: a full or broken connection drops the notice.
void send_notice(const Socket& s, const FailureNotice& n);

// Reads notices from `socks` (invalid ones are skipped) for up to `wait_s`, calling on_notice
// for each as it arrives (a peer may send an updated one); returns early once every socket has
// reached its end (a peer that died sends none, one that failed closes after its notices).
void collect_notices(const std::vector<const Socket*>& socks, double wait_s,
                     const std::function<void(const FailureNotice&)>& on_notice);

// Reads and drops whatever is queued on `s` (so closing it sends no reset that could destroy a
// notice still in flight to the peer).
void drain(const Socket& s);

}  // namespace tessera::distributed::detail
