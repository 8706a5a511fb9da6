// Group, init and the backend registry (DESIGN.md section 4; MLX semantics from
// shared/reference/mlx-distributed.md section 2, with one fix: a present but broken
// configuration raises instead of quietly giving a singleton group).
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>

#include "distributed/group_impl.h"
#include "distributed/hostfile.h"
#include "distributed/mpi/mpi_group.h"
#include "distributed/reduce_kernels.h"
#include "distributed/ring/rendezvous.h"
#include "distributed/ring/ring_group.h"
#include "tessera/config.h"
#include "tessera/distributed.h"

namespace tessera::distributed {

namespace detail {

void GroupImpl::all_mean(const void* in, void* out, size_t count, Dtype dtype) {
  all_reduce(in, out, count, dtype, ReduceOp::sum);
  divide_buffer(out, count, dtype, size());
}

void GroupImpl::all_reduce(const array& in, array& out, ReduceOp op, tessera::Stream) {
  all_reduce(in.raw_data(), out.raw_data(), out.size(), out.dtype(), op);
}
void GroupImpl::all_mean(const array& in, array& out, tessera::Stream) {
  all_mean(in.raw_data(), out.raw_data(), out.size(), out.dtype());
}
void GroupImpl::all_gather(const array& in, array& out, tessera::Stream) {
  all_gather(in.raw_data(), out.raw_data(), in.nbytes());
}
void GroupImpl::reduce_scatter(const array& in, array& out, ReduceOp op, tessera::Stream) {
  reduce_scatter(in.raw_data(), out.raw_data(), out.size(), out.dtype(), op);
}
void GroupImpl::send(const array& in, int dst, tessera::Stream) {
  send(in.raw_data(), in.nbytes(), in.dtype(), dst);
}
void GroupImpl::recv(array& out, int src, tessera::Stream) {
  recv(out.raw_data(), out.nbytes(), out.dtype(), src);
}
void GroupImpl::broadcast(array& buf, int root, tessera::Stream) {
  broadcast(buf.raw_data(), buf.nbytes(), root);
}
void GroupImpl::all_to_all(const array& in, array& out, tessera::Stream) {
  all_to_all(in.raw_data(), out.raw_data(), in.nbytes() / size());
}
void GroupImpl::barrier(tessera::Stream) { barrier(); }

namespace {

// The singleton group: rank 0 of 1. Collectives never reach it (the ops return early).
class EmptyGroup : public GroupImpl {
 public:
  TESSERA_GROUP_ARRAY_CALLS
  int rank() override { return 0; }
  int size() override { return 1; }
  const char* backend_name() override { return "none"; }
  std::shared_ptr<GroupImpl> split(int, int) override {
    throw std::runtime_error("Cannot split the distributed group further.");
  }
  void all_reduce(const void* in, void* out, size_t count, Dtype dtype, ReduceOp) override {
    copy(in, out, count * dtype.size());
  }
  void all_gather(const void* in, void* out, size_t bytes) override { copy(in, out, bytes); }
  void reduce_scatter(const void* in, void* out, size_t count, Dtype dtype, ReduceOp) override {
    copy(in, out, count * dtype.size());
  }
  void send(const void*, size_t, Dtype, int) override {
    throw std::invalid_argument("Cannot send to a singleton group");
  }
  void recv(void*, size_t, Dtype, int) override {
    throw std::invalid_argument("Cannot recv from a singleton group");
  }
  void broadcast(void*, size_t, int) override {}
  void all_to_all(const void* in, void* out, size_t bytes) override { copy(in, out, bytes); }
  void barrier() override {}

 private:
  static void copy(const void* in, void* out, size_t n) {
    if (in != out && n) std::memmove(out, in, n);
  }
};

// The spelling of `name` the user set (MLX_RANK or TESSERA_RANK, ...), for messages.
std::string spelled(const std::string& name) {
  const config::Effective e = config::effective(name);
  return e.read_from.empty() ? name : e.read_from;
}

// What the ring backend needs, for init(true)'s message when nothing is configured.
constexpr const char* kRingNeeds =
    "ring: needs TESSERA_RANK (or MLX_RANK) and TESSERA_HOSTFILE (or MLX_HOSTFILE); tessera "
    "launch sets both";

// " (this is Slurm's batch shell ...)" when it is, else "": its SLURM_PROCID=0 is no rank.
std::string batch_shell_hint() {
  if (!config::get_string("SLURM_PROCID")) return "";
  return " (this is Slurm's batch shell, which has SLURM_PROCID but no step: start the ranks "
         "with srun)";
}

// nullptr when the ring is not configured at all (neither a rank nor a hostfile), unless
// strict. Half a configuration (one of the two, or an empty hostfile path) is an error, not a
// quiet singleton group: a rank that silently computes alone is the worst failure of a job.
std::shared_ptr<GroupImpl> init_ring(bool strict) {
  auto rank = config::get_string("TESSERA_RANK");
  auto hostfile = config::get_string("TESSERA_HOSTFILE");
  if (!rank && !hostfile) {
    // A job that Slurm, mpirun or a PMI launcher started: meet at the coordinator instead.
    if (auto job = detect_scheduler_job()) {
      if (job->size == 1 && !strict) return nullptr;
      // mpirun's processes without a coordinator for the ring: the MPI backend's job (next in
      // the "any" order).
      if (job->coordinator.empty() && job->source != "Slurm" && !strict && started_by_mpi_launcher()) {
        return nullptr;
      }
      return rendezvous_ring(*job, RingOptions::from_config());
    }
    if (!strict) return nullptr;
    throw std::runtime_error(std::string("[ring] cannot initialize: ") + kRingNeeds +
                             "; neither is set" + batch_shell_hint());
  }
  if (hostfile && hostfile->empty()) {
    throw std::invalid_argument("[ring] " + spelled("TESSERA_HOSTFILE") +
                                " is set but empty: give it the path of the hostfile (a JSON list "
                                "of every rank's ip:port), or unset it to run as a single process");
  }
  if (!hostfile) {
    throw std::invalid_argument("[ring] " + spelled("TESSERA_RANK") + "=" + *rank +
                                " is set but no hostfile is: set TESSERA_HOSTFILE (or "
                                "MLX_HOSTFILE) on every rank, or start the job with tessera launch");
  }
  if (!rank) {
    throw std::invalid_argument("[ring] " + spelled("TESSERA_HOSTFILE") + "=" + *hostfile +
                                " is set but no rank is: set TESSERA_RANK (or MLX_RANK) for each "
                                "process, or start the job with tessera launch");
  }
  int r = static_cast<int>(config::get_int("TESSERA_RANK"));
  Hostfile hf = load_hostfile(*hostfile);
  if (r >= hf.size()) {
    throw std::invalid_argument("[ring] rank " + std::to_string(r) + " is out of range for the " +
                                std::to_string(hf.size()) + " ranks listed in the hostfile " +
                                *hostfile);
  }
  return std::make_shared<RingGroup>(r, std::move(hf));
}

struct Backend {
  const char* name;
  std::function<bool()> available;  // can it run here at all (is_available)
  // nullptr when this process is not configured for it (strict: an error saying why).
  std::function<std::shared_ptr<GroupImpl>(bool strict)> init;
};

const std::vector<Backend>& backends() {
  static const std::vector<Backend> b = {
      {"nccl", [] { return false; },
       [](bool strict) -> std::shared_ptr<GroupImpl> {
         if (strict) throw std::runtime_error("Cannot initialize nccl distributed backend.");
         return nullptr;
       }},
      {"ring", [] { return true; }, init_ring},
      {"mpi", [] { return mpi_available(); }, init_mpi},
      {"jaccl", [] { return false; },
       [](bool strict) -> std::shared_ptr<GroupImpl> {
         if (strict) throw std::runtime_error("Cannot initialize jaccl distributed backend.");
         return nullptr;
       }},
  };
  return b;
}

struct GroupCache {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<GroupImpl>> groups;
};

GroupCache& cache() {
  static GroupCache c;
  return c;
}

}  // namespace

}  // namespace detail

Group::Group(std::shared_ptr<detail::GroupImpl> group) : group_(std::move(group)) {}
int Group::rank() const { return group_->rank(); }
int Group::size() const { return group_->size(); }
Group Group::split(int color, int key) const { return Group(group_->split(color, key)); }

bool is_available() {
  for (auto& b : detail::backends())
    if (b.available()) return true;
  return false;
}

bool is_available(const std::string& backend) {
  if (backend == "any") return is_available();
  for (auto& b : detail::backends())
    if (backend == b.name) return b.available();
  return false;
}

Group init(bool strict, const std::string& backend) {
  auto& c = detail::cache();
  std::lock_guard<std::mutex> lock(c.mu);
  if (auto it = c.groups.find(backend); it != c.groups.end()) return Group(it->second);
  std::shared_ptr<detail::GroupImpl> group;
  std::string tried = backend;
  if (backend == "any") {
    for (auto& b : detail::backends()) {
      tried = b.name;
      group = b.init(false);
      if (group) break;
    }
    if (!group && strict) {
      throw std::runtime_error(
          std::string("[distributed] Couldn't initialize any backend. Tried, in order: nccl (not "
                      "in this build: it needs a CUDA build); ") + detail::kRingNeeds +
          ", and neither is set" + detail::batch_shell_hint() +
          "; mpi (needs a process started by mpirun: OMPI_COMM_WORLD_SIZE or PMI_SIZE above 1); "
          "jaccl (not supported by Tessera). Start the job with tessera launch, or set the ring's "
          "variables.");
    }
  } else {
    const detail::Backend* found = nullptr;
    for (auto& b : detail::backends())
      if (backend == b.name) found = &b;
    if (!found) {
      throw std::invalid_argument(
          "[distributed] The only valid values for backend are 'any', 'mpi', 'nccl', 'jaccl' "
          "and 'ring' but '" + backend + "' was provided.");
    }
    group = found->init(strict);
  }
  if (!group) {
    group = std::make_shared<detail::EmptyGroup>();
    c.groups.emplace(tried, group);
    return Group(group);
  }
  c.groups.emplace("any", group);  // the first backend up answers later bare calls
  c.groups.emplace(tried, group);
  return Group(group);
}

void clear_backends() {
  auto& c = detail::cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.groups.clear();
}

}  // namespace tessera::distributed
