// Jobs across hosts with several ranks on each host: hierarchical collectives over two
// sub-groups of the ring (RingGroup::split), so ranks on one host talk through shared memory
// and hosts through TCP. The algorithms below see only GroupImpl: whether a sub-group moves
// bytes through a shared-memory segment or sockets is the sub-group's business.
//   local  the ranks of this host (all local, so the ring gives it shared memory)
//   cross  the ranks with this rank's index on every host that has one (TCP); index 0 are the
//          hosts' leaders
// When every host runs as many ranks: all_reduce is reduce_scatter inside the host, all_reduce
// of this rank's share across hosts, all_gather inside the host (small messages: all_reduce
// inside, then across); all_gather goes across hosts first (each rank sends only its own block
// over the network), then inside the host (from 64 KiB one gather per host's block, straight
// into rank order; below, one gather and a reorder). When the hosts run different
// numbers of ranks, the leaders alone talk across hosts: all_reduce inside, across the leaders,
// broadcast inside; all_gather inside, across the leaders (each host's blocks padded to the
// largest host's count), broadcast inside. sum_scatter is the all_reduce's block; barrier is
// inside, across, and (with unequal hosts) inside again; broadcast goes to the root's host, its
// leader, the other leaders and their hosts; send / recv between ranks of one host go through
// shared memory. all_to_all stays on the flat ring.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <map>

#include "distributed/ring/ring_group.h"

namespace tessera::distributed::detail {

namespace {

// From this size an all_reduce splits its message across the ranks of a host (below, every rank
// sends the whole message across: one step less, and latency dominates), and an all_gather
// gathers inside the host once per host rather than once and reordering.
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
  auto h = std::make_unique<Hierarchy>();
  h->hosts = hosts;
  h->equal = std::all_of(count.begin(), count.end(), [&](int c) { return c == count[0]; });
  h->per_host = *std::max_element(count.begin(), count.end());
  h->host_of = host_of;
  h->local_of.assign(static_cast<size_t>(size_), 0);
  h->members.resize(static_cast<size_t>(hosts));
  for (int r = 0; r < size_; ++r) {
    auto& m = h->members[static_cast<size_t>(host_of[r])];
    h->local_of[r] = static_cast<int>(m.size());
    m.push_back(r);
  }
  h->host = host_of[rank_];
  h->local_rank = h->local_of[rank_];
  h->local_members = h->members[static_cast<size_t>(h->host)];
  for (const auto& m : h->members) {
    if (static_cast<int>(m.size()) > h->local_rank) h->cross_members.push_back(m[static_cast<size_t>(h->local_rank)]);
  }
  // Collective on this group (every rank builds its hierarchy here, before any operation).
  h->local = split(h->host, rank_);
  h->cross = split(h->local_rank, h->host);
  if (opt_.verbose) {
    std::string shape = std::to_string(hosts) + " hosts x " + std::to_string(h->per_host) + " ranks";
    if (!h->equal) {
      shape = std::to_string(hosts) + " hosts of ";
      for (size_t i = 0; i < count.size(); ++i) shape += (i ? "/" : "") + std::to_string(count[i]);
      shape += " ranks";
    }
    std::cerr << "[ring] rank " << rank_ << ": " << shape
              << ": shared memory inside the host (local rank " << h->local_rank << "), TCP "
              << (h->equal ? "across hosts" : "between the hosts' first ranks") << "\n";
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
  if (!h.equal) return hier_all_reduce_leaders(in_v, out_v, count, dtype, op);
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
  if (!h.equal) return hier_all_gather_leaders(in, out_v, bytes);
  auto* out = static_cast<char*>(out_v);
  const size_t hosts = static_cast<size_t>(h.hosts), per_host = static_cast<size_t>(h.per_host);
  hier_buf_.resize(hosts * bytes);
  char* across = hier_buf_.data();
  in_cross([&](GroupImpl& g) { g.all_gather(in, across, bytes); });                  // [host]
  bool in_order = true;  // each host's ranks numbered consecutively (the launcher's placement)
  for (const auto& m : h.members) {
    for (size_t i = 0; i < m.size(); ++i) in_order = in_order && m[i] == m[0] + static_cast<int>(i);
  }
  if (in_order && bytes >= kHierSplitBytes) {
    // One gather inside the host per host's block, each straight into that host's ranks' place
    // in the output: no scratch copy of the whole result to reorder (at 1 MiB and up that copy
    // made this slower than the flat ring). Small messages take the single gather below.
    for (size_t hh = 0; hh < hosts; ++hh) {
      char* dst = out + static_cast<size_t>(h.members[hh][0]) * bytes;
      in_local([&](GroupImpl& g) { g.all_gather(across + hh * bytes, dst, bytes); });
    }
    return;
  }
  hier_buf2_.resize(per_host * hosts * bytes);
  char* inside = hier_buf2_.data();
  in_local([&](GroupImpl& g) { g.all_gather(across, inside, hosts * bytes); });      // [local][host]
  for (size_t i = 0; i < per_host; ++i) {
    for (size_t hh = 0; hh < hosts; ++hh) {
      const size_t r = static_cast<size_t>(h.members[hh][i]);
      std::memcpy(out + r * bytes, hier_buf2_.data() + (i * hosts + hh) * bytes, bytes);
    }
  }
}

void RingGroup::hier_all_reduce_leaders(const void* in_v, void* out_v, size_t count, Dtype dtype,
                                        ReduceOp op) {
  Hierarchy& h = *hier_;
  auto* out = static_cast<char*>(out_v);
  in_local([&](GroupImpl& g) { g.all_reduce(in_v, out, count, dtype, op); });
  if (h.local_rank == 0) in_cross([&](GroupImpl& g) { g.all_reduce(out, out, count, dtype, op); });
  in_local([&](GroupImpl& g) { g.broadcast(out, count * dtype.size(), 0); });
}

void RingGroup::hier_all_gather_leaders(const void* in, void* out_v, size_t bytes) {
  Hierarchy& h = *hier_;
  auto* out = static_cast<char*>(out_v);
  const size_t hosts = static_cast<size_t>(h.hosts), most = static_cast<size_t>(h.per_host);
  hier_buf_.resize(most * bytes);            // this host's blocks, padded to `most`
  hier_buf2_.resize(hosts * most * bytes);   // [host][local rank]
  in_local([&](GroupImpl& g) { g.all_gather(in, hier_buf_.data(), bytes); });
  if (h.local_rank == 0) {
    in_cross([&](GroupImpl& g) { g.all_gather(hier_buf_.data(), hier_buf2_.data(), most * bytes); });
  }
  in_local([&](GroupImpl& g) { g.broadcast(hier_buf2_.data(), hosts * most * bytes, 0); });
  for (size_t hh = 0; hh < hosts; ++hh) {
    for (size_t i = 0; i < h.members[hh].size(); ++i) {
      const size_t r = static_cast<size_t>(h.members[hh][i]);
      std::memcpy(out + r * bytes, hier_buf2_.data() + (hh * most + i) * bytes, bytes);
    }
  }
}

// The root's host first (its leader gets the data), then the leaders, then the other hosts.
void RingGroup::hier_broadcast(char* buf, size_t bytes, int root) {
  Hierarchy& h = *hier_;
  const int root_host = h.host_of[root];
  if (h.host == root_host) in_local([&](GroupImpl& g) { g.broadcast(buf, bytes, h.local_of[root]); });
  // The leaders' group numbers the hosts in order (its key is the host), as does host_of.
  if (h.local_rank == 0) in_cross([&](GroupImpl& g) { g.broadcast(buf, bytes, root_host); });
  if (h.host != root_host) in_local([&](GroupImpl& g) { g.broadcast(buf, bytes, 0); });
}

}  // namespace tessera::distributed::detail
