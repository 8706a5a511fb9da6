// Distributed communication (MLX's mlx/distributed): groups, init, and the
// collectives as lazy ops that run on the CPU stream when evaluated.
//
// Beyond MLX: broadcast, barrier and all_to_all; send/recv between any two ranks; split on the
// ring backend; a broken configuration (unreadable hostfile, rank out of range) is an error
// instead of a silent singleton group; every wait has a deadline (TESSERA_DIST_TIMEOUT).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera::distributed {

namespace detail {
class GroupImpl;
}

class Group {
 public:
  explicit Group(std::shared_ptr<detail::GroupImpl> group);
  int rank() const;
  int size() const;
  // Ranks passing the same color form a new group ordered by key (key < 0: this rank).
  Group split(int color, int key = -1) const;
  const std::shared_ptr<detail::GroupImpl>& raw_group() const { return group_; }

 private:
  std::shared_ptr<detail::GroupImpl> group_;
};

// Whether a backend is compiled in: "any", "ring", "mpi", "nccl", "jaccl".
bool is_available();
bool is_available(const std::string& backend);

// MLX's semantics: "any" tries nccl, ring, mpi in order; the first group that comes up answers
// later bare calls; a backend with no configuration gives a singleton group unless strict.
Group init(bool strict = false, const std::string& backend = "any");
void clear_backends();

array all_sum(const array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
// Beyond MLX: all_sum(x) / group.size() in one operation, with the same bits (the division is
// done on each reduced block while it is in cache); float16, bfloat16, float32, float64.
array all_mean(const array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
array all_max(const array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
array all_min(const array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
// Concatenation of every rank's x along axis 0 (a 0-d x gives shape (N,)).
array all_gather(const array& x, std::optional<Group> group = std::nullopt,
                 StreamOrDevice s = {});
// Sum over ranks, each rank keeping its block of axis 0 (shape[0] / N rows).
array sum_scatter(const array& x, std::optional<Group> group = std::nullopt,
                  StreamOrDevice s = {});
// Evaluating the result sends x to dst; the result holds x's data.
array send(const array& x, int dst, std::optional<Group> group = std::nullopt,
           StreamOrDevice s = {});
array recv(Shape shape, Dtype dtype, int src, std::optional<Group> group = std::nullopt,
           StreamOrDevice s = {});
array recv_like(const array& x, int src, std::optional<Group> group = std::nullopt,
                StreamOrDevice s = {});
// Every rank receives root's x.
array broadcast(const array& x, int root, std::optional<Group> group = std::nullopt,
                StreamOrDevice s = {});
// x split into N blocks along axis 0; block j goes to rank j; the result stacks the received
// blocks in rank order (same shape as x).
array all_to_all(const array& x, std::optional<Group> group = std::nullopt,
                 StreamOrDevice s = {});
// Blocks until every rank of the group reached the barrier.
void barrier(std::optional<Group> group = std::nullopt, StreamOrDevice s = {});

}  // namespace tessera::distributed
