// Jobs across hosts with several ranks on each host: hierarchical collectives over two
// sub-groups of the ring (RingGroup::split), so ranks on one host talk through shared memory
// and hosts through TCP. The algorithms below see only GroupImpl: whether a sub-group moves
// bytes through a shared-memory segment or sockets is the sub-group's business.
//   local  the ranks of this host (all local, so the ring gives it shared memory)
//   cross  the ranks with this rank's index on every host (one per host, TCP)
// all_reduce: reduce_scatter inside the host, all_reduce of this rank's share across hosts,
// all_gather inside the host (small messages: all_reduce inside, then across). all_gather:
// across hosts first (each rank sends only its own block over the network), then inside the
// host, then into rank order. sum_scatter is the all_reduce's block; barrier is inside then
// across; send / recv between ranks of one host go through shared memory. Broadcast and
// all_to_all stay on the flat ring.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <map>

#include "distributed/ring/ring_group.h"

namespace tessera::distributed::detail {

namespace {

// Messages from this size split across the ranks of a host (below it every rank sends the
// whole message across: one step less, and latency dominates).
constexpr size_t kHierSplitBytes = 64 << 10;

}  // namespace

void RingGroup::setup_hierarchy() {
  std::map<std::string, int> ids;
  std::vector<int> host_of(static_cast<size_t>(size_)), count;
  for (int r = 0; r < size_; ++r) {
    auto [it, fresh] = ids.emplace(hostfile_.ranks[r][0].host, static_cast<int>(ids.size()));
    if (fresh) count.push_back(0);
    host_of[r] = it->second;
    ++count[static_cast<size_t>(it->second)];
  }
  const int hosts = static_cast<int>(ids.size());
  if (hosts < 2 || hosts == size_) return;  // one host (shared memory already), or one rank each
  if (std::any_of(count.begin(), count.end(), [&](int c) { return c != count[0]; })) {
    if (opt_.verbose) {
      std::cerr << "[ring] rank " << rank_ << ": hosts run different numbers of ranks; the "
                << "collectives use the flat TCP ring\n";
    }
    return;
  }
  auto h = std::make_unique<Hierarchy>();
  h->hosts = hosts;
  h->per_host = count[0];
  h->host_of = host_of;
  h->local_of.assign(static_cast<size_t>(size_), 0);
  h->rank_at.assign(static_cast<size_t>(size_), 0);
  std::vector<int> seen(static_cast<size_t>(hosts), 0);
  for (int r = 0; r < size_; ++r) {
    const int hh = host_of[r];
    h->local_of[r] = seen[static_cast<size_t>(hh)]++;
    h->rank_at[static_cast<size_t>(hh * h->per_host + h->local_of[r])] = r;
  }
  h->host = host_of[rank_];
  h->local_rank = h->local_of[rank_];
  for (int i = 0; i < h->per_host; ++i) h->local_members.push_back(h->rank_at[static_cast<size_t>(h->host * h->per_host + i)]);
  for (int hh = 0; hh < hosts; ++hh) h->cross_members.push_back(h->rank_at[static_cast<size_t>(hh * h->per_host + h->local_rank)]);
  // Collective on this group (every rank builds its hierarchy here, before any operation).
  h->local = split(h->host, rank_);
  h->cross = split(h->per_host + h->local_rank, h->host);
  if (opt_.verbose) {
    std::cerr << "[ring] rank " << rank_ << ": " << hosts << " hosts x " << h->per_host
              << " ranks: shared memory inside the host (local rank " << h->local_rank
              << "), TCP across hosts\n";
  }
  hier_ = std::move(h);
}

void RingGroup::in_subgroup(GroupImpl& g, const std::vector<int>& members, const char* which,
                            const std::function<void(GroupImpl&)>& f) {
  try {
    f(g);
  } catch (const std::exception& e) {
    std::string legend;
    for (size_t i = 0; i < members.size(); ++i) {
      legend += (i ? ", " : "") + std::to_string(i) + " = " + std::to_string(members[i]);
    }
    throw std::runtime_error("[ring] rank " + std::to_string(rank_) + ", in " + which +
                             " (its ranks " + legend + " of the job): " + e.what());
  }
}

void RingGroup::in_local(const std::function<void(GroupImpl&)>& f) {
  in_subgroup(*hier_->local, hier_->local_members, "the shared-memory group of its host", f);
}

void RingGroup::in_cross(const std::function<void(GroupImpl&)>& f) {
  in_subgroup(*hier_->cross, hier_->cross_members, "the group across hosts", f);
}

void RingGroup::hier_all_reduce(const void* in_v, void* out_v, size_t count, Dtype dtype, ReduceOp op) {
  if (count == 0) return;
  Hierarchy& h = *hier_;
  const auto* in = static_cast<const char*>(in_v);
  auto* out = static_cast<char*>(out_v);
  const size_t es = dtype.size(), per_host = static_cast<size_t>(h.per_host);
  const size_t block = count / per_host;
  size_t done = 0;
  if (count * es >= kHierSplitBytes && block > 0) {
    hier_buf_.resize(block * es);
    char* buf = hier_buf_.data();
    in_local([&](GroupImpl& g) { g.reduce_scatter(in, buf, block, dtype, op); });
    in_cross([&](GroupImpl& g) { g.all_reduce(buf, buf, block, dtype, op); });
    in_local([&](GroupImpl& g) { g.all_gather(buf, out, block * es); });
    done = block * per_host;
  }
  if (done < count) {
    const size_t rest = count - done;
    in_local([&](GroupImpl& g) { g.all_reduce(in + done * es, out + done * es, rest, dtype, op); });
    in_cross([&](GroupImpl& g) { g.all_reduce(out + done * es, out + done * es, rest, dtype, op); });
  }
}

void RingGroup::hier_all_gather(const void* in, void* out_v, size_t bytes) {
  if (bytes == 0) return;
  Hierarchy& h = *hier_;
  auto* out = static_cast<char*>(out_v);
  const size_t hosts = static_cast<size_t>(h.hosts), per_host = static_cast<size_t>(h.per_host);
  hier_buf_.resize(hosts * bytes);
  hier_buf2_.resize(per_host * hosts * bytes);
  char *across = hier_buf_.data(), *inside = hier_buf2_.data();
  in_cross([&](GroupImpl& g) { g.all_gather(in, across, bytes); });                  // [host]
  in_local([&](GroupImpl& g) { g.all_gather(across, inside, hosts * bytes); });      // [local][host]
  for (size_t i = 0; i < per_host; ++i) {
    for (size_t hh = 0; hh < hosts; ++hh) {
      const size_t r = static_cast<size_t>(h.rank_at[hh * per_host + i]);
      std::memcpy(out + r * bytes, hier_buf2_.data() + (i * hosts + hh) * bytes, bytes);
    }
  }
}

}  // namespace tessera::distributed::detail
