// The configuration registry (DESIGN.md section 5): the table of every environment variable,
// strict parsing, and a cached snapshot of the environment. The only file that calls getenv.
#include "tessera/config.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace tessera::detail {
namespace {

using config::Source;
using config::VarInfo;
using config::VarType;

constexpr bool kUsed = true;
constexpr bool kUnused = false;
// Backends this build does not have yet: their variables are accepted and reported unused.
constexpr bool kNcclBackend = false;   // flip when src/distributed/nccl/ lands (CUDA builds)
constexpr bool kJacclBackend = false;  // Tessera has no JACCL (RDMA) backend
constexpr int64_t kMaxRank = 1'000'000;

VarInfo flag(std::string name, std::string alias, std::string default_value,
             std::string subsystem, bool used, std::string doc) {
  return VarInfo{.name = std::move(name), .alias = std::move(alias), .type = VarType::boolean,
                 .default_value = std::move(default_value), .min_value = 0, .max_value = 1,
                 .subsystem = std::move(subsystem), .used_by_this_build = used,
                 .doc = std::move(doc), .alias2 = {}, .secret = false};
}

VarInfo integer(std::string name, std::string alias, std::string default_value, int64_t min_value,
                int64_t max_value, std::string subsystem, bool used, std::string doc) {
  return VarInfo{.name = std::move(name), .alias = std::move(alias), .type = VarType::integer,
                 .default_value = std::move(default_value), .min_value = min_value,
                 .max_value = max_value, .subsystem = std::move(subsystem),
                 .used_by_this_build = used, .doc = std::move(doc), .alias2 = {},
                 .secret = false};
}

VarInfo text(VarType type, std::string name, std::string alias, std::string default_value,
             std::string subsystem, bool used, std::string doc) {
  return VarInfo{.name = std::move(name), .alias = std::move(alias), .type = type,
                 .default_value = std::move(default_value), .min_value = 0, .max_value = 0,
                 .subsystem = std::move(subsystem), .used_by_this_build = used,
                 .doc = std::move(doc), .alias2 = {}, .secret = false};
}

VarInfo string_var(std::string name, std::string alias, std::string default_value,
                   std::string subsystem, bool used, std::string doc) {
  return text(VarType::string, std::move(name), std::move(alias), std::move(default_value),
              std::move(subsystem), used, std::move(doc));
}

VarInfo path_var(std::string name, std::string alias, std::string default_value,
                 std::string subsystem, bool used, std::string doc) {
  return text(VarType::path, std::move(name), std::move(alias), std::move(default_value),
              std::move(subsystem), used, std::move(doc));
}

VarInfo also_spelled(VarInfo info, std::string alias2) {
  info.alias2 = std::move(alias2);
  return info;
}

VarInfo hidden(VarInfo info) {
  info.secret = true;
  return info;
}

std::vector<VarInfo> build_registry() {
  return {
      // core
      integer("TESSERA_NUM_THREADS", "", "0", 0, 1024, "core", kUsed,
              "Size of the intra-op thread pool; 0 means one thread per CPU this process may run on."),
      integer("TESSERA_MEMORY_LIMIT_MB", "", "0", 0, int64_t{1} << 40, "core", kUsed,
              "Default memory limit of this process in MiB (set_memory_limit overrides it); 0 "
              "means 0.8 x RAM. tessera launch gives each local rank its share of that."),
      string_var("TESSERA_CPU_ISA", "", "auto", "core", kUsed,
                 "Which copy of the elementwise loops a baseline build (the wheel) runs: auto (the "
                 "widest this CPU has), baseline, avx2 or avx512 (an error if the CPU lacks it). "
                 "A build for the build machine's CPU has one copy and ignores it."),
      integer("TESSERA_BFS_MAX_WIDTH", "MLX_BFS_MAX_WIDTH", "20", 1, 1'000'000, "core", kUsed,
              "Breadth limit of the search that builds the evaluation tape."),
      // compile
      flag("TESSERA_DISABLE_COMPILE", "MLX_DISABLE_COMPILE", "0", "compile", kUsed,
           "Turn graph compilation off. 0 means NOT disabled (MLX disables on mere presence, "
           "even =0); enable_compile() overrides it."),
      path_var("TESSERA_COMPILE_CACHE_DIR", "", "", "compile", kUsed,
               "Directory for compiled kernels (shared objects); unset means "
               "~/.cache/tessera/kernels."),
      integer("TESSERA_COMPILE_CACHE_MAX_MB", "", "512", 1, int64_t{1} << 20, "compile", kUsed,
              "Size bound of the kernel cache directory in MiB; the least recently used kernels "
              "are removed first."),
      path_var("TESSERA_COMPILE_CXX", "", "", "compile", kUsed,
               "C++ compiler that builds fused kernels (a name looked up in PATH, or a path); "
               "unset means the first of c++, g++, clang++ in PATH."),
      path_var("TESSERA_TRACE", "", "", "core", kUsed,
               "Record a timeline of every kernel and collective (Chrome trace / Perfetto JSON) "
               "and write it to this path at exit; tessera launch --trace sets it per rank."),
      path_var("PATH", "", "", "system", kUsed,
               "Set by the system. compile looks for the C++ compiler in it."),
      path_var("HOME", "", "", "system", kUsed,
               "Set by the system. The default kernel cache is under it (~/.cache/tessera)."),
      // distributed: every backend
      also_spelled(
          integer("TESSERA_RANK", "MLX_RANK", "", 0, kMaxRank, "distributed", kUsed,
                  "Zero-based rank of this process; set by the launcher. MLX_RANK wins over "
                  "JACCL_RANK."),
          "JACCL_RANK"),
      integer("TESSERA_WORLD_SIZE", "MLX_WORLD_SIZE", "", 1, kMaxRank, "distributed", kUsed,
              "Number of processes in the job; set by the launcher (NCCL requires it)."),
      integer("TESSERA_DIST_TIMEOUT", "", "300", 0, 7 * 24 * 3600, "distributed", kUsed,
              "Seconds any blocking distributed wait may last before it fails naming the peer; "
              "0 means no timeout."),
      integer("TESSERA_DIST_SPIN_US", "", "50", 0, 1000000, "distributed", kUsed,
              "Microseconds a rank busy-polls for a peer's data (TCP or shared memory) before "
              "it sleeps in the kernel; with more ranks on the host than CPUs it yields the "
              "CPU while polling. 0 sleeps at once."),
      integer("TESSERA_DIST_CONNECT_TIMEOUT", "", "60", 1, 24 * 3600, "distributed", kUsed,
              "Seconds to wait for all peers to connect during init()."),
      hidden(string_var("TESSERA_JOB_TOKEN", "", "", "distributed", kUsed,
                        "Shared secret that authenticates connections between the ranks of a "
                        "job; the launcher sets one per job.")),
      path_var("TESSERA_PYTHON", "", "python3", "launch", kUsed,
               "Interpreter that tessera launch runs a .py program with; the command installed "
               "by the Python package sets it to its own environment's interpreter."),
      integer("TESSERA_HOST_CPUS", "", "", 1, 1'000'000, "launch", kUsed,
              "CPUs that the ranks on this host share; tessera launch sets it (each rank may be "
              "bound to fewer). More ranks on the host than this makes waits for peers yield the "
              "CPU; unset, a rank counts the CPUs it may run on itself."),
      flag("TESSERA_LAUNCH_TTY", "", "0", "launch", kUsed,
           "Set to 1 by tessera launch for every rank when the launcher's own standard output "
           "is a terminal (a rank's is a pipe), so a program can draw progress that updates in "
           "place: the launcher passes on text ended by a carriage return at once."),
      integer("TESSERA_MAX_RESTARTS", "", "0", 0, 1000, "launch", kUsed,
              "Times tessera launch starts a failed job again (--max-restarts wins): every rank, "
              "with fresh ports and job token; never after SIGINT/SIGTERM; ring backend only."),
      integer("TESSERA_RESTART_COUNT", "", "0", 0, 1000, "launch", kUsed,
              "Set by tessera launch for every rank: 0 on a job's first attempt, k on its k-th "
              "restart (--max-restarts), so a program can resume from its checkpoint."),
      path_var("TESSERA_MPIRUN", "", "mpirun", "launch", kUsed,
               "The mpirun (Open MPI's or MPICH's Hydra) that tessera launch --backend mpi runs."),
      integer("TESSERA_LAUNCH_HEARTBEAT", "", "10", 1, 3600, "launch", kUsed,
              "Seconds a rank started over ssh keeps running without word from tessera launch "
              "(a heartbeat every quarter of it) before its host's agent stops it."),
      // distributed: ring
      path_var("TESSERA_HOSTFILE", "MLX_HOSTFILE", "", "distributed/ring", kUsed,
               "Path of the JSON hostfile that lists every rank's ip:port (ring backend)."),
      flag("TESSERA_RING_VERBOSE", "MLX_RING_VERBOSE", "0", "distributed/ring", kUsed,
           "Verbose ring backend logs on stderr. 0 means off (MLX enables on mere presence, "
           "even =0)."),
      flag("TESSERA_RING_SHM", "", "1", "distributed/ring", kUsed,
           "Use shared memory instead of TCP between ranks on the same host."),
      flag("TESSERA_RING_SHM_SINGLE_COPY", "", "1", "distributed/ring", kUsed,
           "Large all_gathers over shared memory read each peer's block straight from its "
           "memory (Linux cross-memory attach, process_vm_readv: one copy instead of two through "
           "the segment). Used only when every local rank may read the others (same user, no "
           "ptrace restriction), checked when the group forms; 0 always copies through the "
           "segment."),
      flag("TESSERA_RING_DIRECT", "", "1", "distributed/ring", kUsed,
           "Send small collectives straight to every rank (one hop); 0 keeps all collective "
           "traffic between ring neighbours, for links that join only neighbours (tessera "
           "config puts 0 in the hostfile's envs when the hosts are not a full mesh)."),
      string_var("TESSERA_COORDINATOR", "", "", "distributed/ring", kUsed,
                 "host:port where rank 0 meets the other ranks of a job started by Slurm, mpirun "
                 "or PMI without a hostfile; for Slurm the default is the step's first node and a "
                 "port derived from the job and step ids."),
      string_var("TESSERA_RING_ADDRESS", "", "", "distributed/ring", kUsed,
                 "IP address this rank listens on and registers at the coordinator (jobs without "
                 "a hostfile); unset means the address of the interface that reaches the "
                 "coordinator."),
      // set by schedulers: read to start a ring job without a hostfile
      integer("SLURM_PROCID", "", "", 0, kMaxRank, "scheduler", kUsed,
              "Set by Slurm (srun): the rank of this task."),
      integer("SLURM_NTASKS", "", "", 1, kMaxRank, "scheduler", kUsed,
              "Set by Slurm: the number of tasks (read when SLURM_STEP_NUM_TASKS is unset)."),
      integer("SLURM_STEP_NUM_TASKS", "", "", 1, kMaxRank, "scheduler", kUsed,
              "Set by Slurm's srun: the number of tasks of the step."),
      string_var("SLURM_STEP_NODELIST", "", "", "scheduler", kUsed,
                 "Set by Slurm: the nodes of the step (node[01-04]); its first is the default "
                 "coordinator host."),
      string_var("SLURM_JOB_NODELIST", "", "", "scheduler", kUsed,
                 "Set by Slurm: the nodes of the job; used when SLURM_STEP_NODELIST is unset."),
      integer("SLURM_JOB_ID", "", "", 0, int64_t{1} << 40, "scheduler", kUsed,
              "Set by Slurm: the job id; with SLURM_STEP_ID it gives the default coordinator port."),
      integer("SLURM_STEP_ID", "", "", 0, int64_t{1} << 40, "scheduler", kUsed,
              "Set by Slurm's srun: the step id. Without it (Slurm's batch shell) the SLURM_* "
              "rank variables are not read: the batch shell is one process."),
      integer("SLURM_LOCALID", "", "", 0, kMaxRank, "scheduler", kUsed,
              "Set by Slurm: the task's index on its node."),
      integer("OMPI_COMM_WORLD_RANK", "", "", 0, kMaxRank, "scheduler", kUsed,
              "Set by Open MPI's mpirun: the rank of this process."),
      integer("OMPI_COMM_WORLD_SIZE", "", "", 1, kMaxRank, "scheduler", kUsed,
              "Set by Open MPI's mpirun: the number of processes."),
      integer("OMPI_COMM_WORLD_LOCAL_RANK", "", "", 0, kMaxRank, "scheduler", kUsed,
              "Set by Open MPI's mpirun: the process's index on its node."),
      integer("PMI_RANK", "", "", 0, kMaxRank, "scheduler", kUsed,
              "Set by MPICH's mpiexec (Hydra) and other PMI launchers: the rank."),
      integer("PMI_SIZE", "", "", 1, kMaxRank, "scheduler", kUsed,
              "Set by PMI launchers: the number of processes."),
      string_var("PMI_FD", "", "", "scheduler", kUsed,
                 "Set by MPICH's Hydra for each process: its connection to the launcher (with "
                 "PMI_PORT, how the MPI backend tells a real Hydra job from copied variables)."),
      string_var("PMI_PORT", "", "", "scheduler", kUsed,
                 "Set by PMI launchers that connect over TCP (Hydra across hosts)."),
      string_var("PMIX_RANK", "", "", "scheduler", kUsed,
                 "Set by PMIx launchers (Open MPI's mpirun, srun --mpi=pmix): the rank; how the "
                 "MPI backend tells a real Open MPI job from copied OMPI_* variables."),
      // distributed: mpi
      string_var("TESSERA_MPI_LIBNAME", "MLX_MPI_LIBNAME", "", "distributed/mpi", kUsed,
                 "Name or path of the MPI library the MPI backend loads with dlopen; unset: "
                 "libmpi.so.40 / libmpi.so (Open MPI) and libmpich.so.12 / libmpi.so.12 (MPICH), "
                 "the launcher's own MPI first."),
      flag("TESSERA_MPI_CHECK", "", "1", "distributed/mpi", kUsed,
           "Check before every MPI collective that all ranks call the same operation with the "
           "same size and dtype (one 64-byte MPI_Allreduce, which also carries an all_sum / max "
           "/ min of up to 32 bytes); 0 saves that call."),
      // distributed: nccl
      string_var("TESSERA_NCCL_HOST_IP", "NCCL_HOST_IP", "", "distributed/nccl", kNcclBackend,
                 "Host or IP of rank 0 for the NCCL bootstrap connection; set by the launcher."),
      integer("TESSERA_NCCL_PORT", "NCCL_PORT", "", 1, 65535, "distributed/nccl", kNcclBackend,
              "TCP port of rank 0 for the NCCL bootstrap connection; set by the launcher."),
      integer("TESSERA_NCCL_TIMEOUT", "MLX_NCCL_TIMEOUT", "300000", 1, 24 * 3600 * 1000,
              "distributed/nccl", kNcclBackend,
              "Milliseconds to keep trying the NCCL bootstrap connection."),
      string_var("TESSERA_NCCL_DEBUG", "NCCL_DEBUG", "", "distributed/nccl", kNcclBackend,
                 "NCCL log level; INFO also logs the bootstrap connection. NCCL itself reads "
                 "only NCCL_DEBUG."),
      // distributed: jaccl
      also_spelled(path_var("TESSERA_IBV_DEVICES", "MLX_IBV_DEVICES", "", "distributed/jaccl",
                            kJacclBackend,
                            "Path of the JSON matrix of RDMA devices connecting the ranks "
                            "(JACCL)."),
                   "JACCL_IBV_DEVICES"),
      also_spelled(string_var("TESSERA_JACCL_COORDINATOR", "MLX_JACCL_COORDINATOR", "",
                              "distributed/jaccl", kJacclBackend,
                              "ip:port of the JACCL coordinator (rank 0)."),
                   "JACCL_COORDINATOR"),
      also_spelled(flag("TESSERA_JACCL_RING", "MLX_JACCL_RING", "0", "distributed/jaccl",
                        kJacclBackend,
                        "Prefer the ring topology in JACCL. 0 means off (MLX enables on mere "
                        "presence)."),
                   "JACCL_RING"),
      // GPU knobs: in Tessera only a CUDA backend could ever read them
      flag("TESSERA_ENABLE_TF32", "MLX_ENABLE_TF32", "1", "cuda", kUnused,
           "Let float32 matmuls use TF32 on GPUs that support it; 0 keeps full float32."),
      integer("TESSERA_MAX_OPS_PER_BUFFER", "MLX_MAX_OPS_PER_BUFFER", "", 1, 1'000'000, "cuda",
              kUnused, "Most ops encoded in one command buffer / CUDA graph; default per device."),
      integer("TESSERA_MAX_MB_PER_BUFFER", "MLX_MAX_MB_PER_BUFFER", "", 1, 1'048'576, "cuda",
              kUnused, "Approximate MiB per command buffer / CUDA graph; default per device."),
      flag("TESSERA_USE_CUDA_GRAPHS", "MLX_USE_CUDA_GRAPHS", "1", "cuda", kUnused,
           "Capture and replay CUDA graphs."),
      path_var("TESSERA_SAVE_CUDA_GRAPHS_DOT_FILE", "MLX_SAVE_CUDA_GRAPHS_DOT_FILE", "", "cuda",
               kUnused, "File name prefix for numbered DOT dumps of captured CUDA graphs."),
      path_var("TESSERA_PTX_CACHE_DIR", "MLX_PTX_CACHE_DIR", "", "cuda", kUnused,
               "Cache directory for PTX compiled at run time."),
      integer("TESSERA_CUDA_CONV_CACHE_SIZE", "MLX_CUDA_CONV_CACHE_SIZE", "128", 1, 1'000'000,
              "cuda", kUnused, "Capacity of the convolution plan cache."),
      integer("TESSERA_CUDA_FFT_CACHE_SIZE", "MLX_CUDA_FFT_CACHE_SIZE", "128", 1, 1'000'000,
              "cuda", kUnused, "Capacity of the FFT plan cache."),
      integer("TESSERA_CUDA_GRAPH_CACHE_SIZE", "MLX_CUDA_GRAPH_CACHE_SIZE", "400", 1, 1'000'000,
              "cuda", kUnused, "Capacity of the CUDA graph cache."),
      integer("TESSERA_CUDA_SDPA_CACHE_SIZE", "MLX_CUDA_SDPA_CACHE_SIZE", "256", 1, 1'000'000,
              "cuda", kUnused, "Capacity of the attention (SDPA) forward plan cache."),
      integer("TESSERA_CUDA_SDPA_BACKWARD_CACHE_SIZE", "MLX_CUDA_SDPA_BACKWARD_CACHE_SIZE", "64",
              1, 1'000'000, "cuda", kUnused,
              "Capacity of the attention (SDPA) backward plan cache."),
      flag("TESSERA_CUDA_USE_CUDNN_SDPA", "MLX_CUDA_USE_CUDNN_SDPA", "1", "cuda", kUnused,
           "Use cuDNN attention when inputs and device support it."),
      flag("TESSERA_ENABLE_CACHE_THRASHING_CHECK", "MLX_ENABLE_CACHE_THRASHING_CHECK", "1",
           "cuda", kUnused, "Fail on repeated CUDA cache misses, suggesting a larger cache."),
      also_spelled(path_var("TESSERA_CUDA_HOME", "CUDA_HOME", "", "cuda", kUnused,
                            "CUDA toolkit root, for headers used by run-time kernel compilation; "
                            "CUDA_HOME wins over CUDA_PATH."),
                   "CUDA_PATH"),
      string_var("TESSERA_CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "", "cuda", kUnused,
                 "CUDA devices this process may use; the CUDA runtime reads only "
                 "CUDA_VISIBLE_DEVICES."),
      // Metal: never on Linux
      flag("TESSERA_METAL_FAST_SYNCH", "MLX_METAL_FAST_SYNCH", "0", "metal", kUnused,
           "Faster Metal CPU/GPU synchronisation (Metal 3.2+)."),
      string_var("TESSERA_METAL_GPU_ARCH", "MLX_METAL_GPU_ARCH", "", "metal", kUnused,
                 "Override the reported Metal GPU architecture string (debugging only)."),
      integer("TESSERA_SDPA_BLOCKS", "MLX_SDPA_BLOCKS", "0", 0, 1'048'576, "metal", kUnused,
              "Reduction blocks of the Metal attention kernel, rounded up to a multiple of 32; "
              "0 means automatic."),
      integer("TESSERA_RESIDENCY_SET_MAX_PCT", "MLX_RESIDENCY_SET_MAX_PCT", "5", 0, 100, "metal",
              kUnused,
              "Percent of the recommended working set per Metal residency set; 0 or 100 means "
              "one set."),
      flag("TESSERA_RESIDENCY_DEBUG", "MLX_RESIDENCY_DEBUG", "0", "metal", kUnused,
           "Log each Metal residency set as it is created."),
  };
}

// One registered variable as the environment spells it right now. Never changes after reading.
struct EnvText {
  std::optional<std::string> by_name, by_alias, by_alias2;
};

// The effective value of one variable, parsed once.
struct Slot {
  std::optional<std::string> raw;
  Source source = Source::default_value;
  std::string read_from;
  std::optional<std::string> text;  // raw, else the default; nullopt when neither
  std::string error;                // non-empty when `text` is malformed
  int64_t int_value = 0;
  bool bool_value = false;
};

std::optional<std::string> read_env(const std::string& name) {
  if (name.empty()) return std::nullopt;
#if defined(__GLIBC__)
  const char* value = ::secure_getenv(name.c_str());
#else
  const char* value = ::getenv(name.c_str());
#endif
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

EnvText read_env_text(const VarInfo& info) {
  return EnvText{read_env(info.name), read_env(info.alias), read_env(info.alias2)};
}

// Quotes a value for an error message, keeping the message on one line.
std::string quoted(const std::string& value) {
  std::string out = "\"";
  for (unsigned char c : value) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      static const char* kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

std::string range_text(const VarInfo& info) {
  std::ostringstream os;
  os << "[" << info.min_value << ", " << info.max_value << "]";
  return os.str();
}

// Parses `text` for `info`, as `spelled` (the name the user wrote). Returns an error message,
// empty on success.
std::string parse_into(const VarInfo& info, const std::string& spelled, const std::string& text,
                       Slot& slot) {
  const std::string prefix = "[config] " + spelled + "=" + quoted(text);
  if (info.type == VarType::boolean) {
    const std::string word = lower(text);
    if (word == "1" || word == "true" || word == "on" || word == "yes") {
      slot.bool_value = true;
      return {};
    }
    if (word == "0" || word == "false" || word == "off" || word == "no") {
      slot.bool_value = false;
      return {};
    }
    return prefix +
           " is not a boolean; expected one of 0, 1, true, false, on, off, yes, no (any case, "
           "no spaces)";
  }
  if (info.type == VarType::integer) {
    const std::string expected = "; expected an integer in " + range_text(info);
    size_t i = 0;
    bool negative = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
      negative = text[i] == '-';
      ++i;
    }
    if (i == text.size()) return prefix + " is not an integer" + expected;
    // Saturate far beyond any registered range (and far below 2^64 / 10, so `* 10` cannot
    // wrap) so that huge inputs read as out of range.
    constexpr uint64_t kSaturated = 1'000'000'000'000'000'000;
    uint64_t magnitude = 0;
    for (; i < text.size(); ++i) {
      const char c = text[i];
      if (c < '0' || c > '9') return prefix + " is not an integer" + expected;
      magnitude = std::min(magnitude * 10 + static_cast<uint64_t>(c - '0'), kSaturated);
    }
    const int64_t value =
        negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
    if (value < info.min_value || value > info.max_value) {
      return prefix + " is out of range" + expected;
    }
    slot.int_value = value;
    return {};
  }
  return {};  // strings and paths take any text
}

// Decides which spelling wins and parses it. `override_value` beats the environment.
Slot resolve(const VarInfo& info, const EnvText& env,
             const std::optional<std::string>& override_value) {
  Slot slot;
  std::string spelled;
  if (override_value) {
    slot.raw = override_value;
    slot.source = Source::override_value;
    spelled = info.name + " (override)";
  } else if (env.by_name) {
    slot.raw = env.by_name;
    slot.source = Source::tessera_name;
    slot.read_from = spelled = info.name;
  } else if (env.by_alias) {
    slot.raw = env.by_alias;
    slot.source = Source::mlx_name;
    slot.read_from = spelled = info.alias;
  } else if (env.by_alias2) {
    slot.raw = env.by_alias2;
    slot.source = Source::mlx_name;
    slot.read_from = spelled = info.alias2;
  }
  if (slot.raw) {
    slot.text = slot.raw;
  } else if (!info.default_value.empty()) {
    slot.text = info.default_value;
    spelled = info.name + " (default)";
  }
  if (slot.text) slot.error = parse_into(info, spelled, *slot.text, slot);
  return slot;
}

const std::unordered_map<std::string, size_t>& index_by_name() {
  static const std::unordered_map<std::string, size_t> index = [] {
    std::unordered_map<std::string, size_t> out;
    const auto& table = config::registry();
    for (size_t i = 0; i < table.size(); ++i) out.emplace(table[i].name, i);
    return out;
  }();
  return index;
}

size_t index_of(const std::string& name) {
  const auto& index = index_by_name();
  if (auto it = index.find(name); it != index.end()) return it->second;
  for (const VarInfo& info : config::registry()) {
    if (name == info.alias || (!info.alias2.empty() && name == info.alias2)) {
      throw std::logic_error("[config] " + name + " is an alias; look the variable up as " +
                             info.name);
    }
  }
  throw std::logic_error("[config] " + name +
                         " is not a registered variable; add it to the table in "
                         "src/core/config.cpp");
}

// The cached view of the environment. Any thread may call in; mutex_ guards every member.
class Store {
 public:
  static Store& instance() {
    static Store store;
    return store;
  }

  // Runs `fn(info, slot)` under the lock, after the first read of the environment.
  template <typename Fn>
  auto with_slot(const std::string& name, Fn&& fn) {
    const size_t i = index_of(name);
    std::lock_guard<std::mutex> lock(mutex_);
    load_locked();
    return fn(config::registry()[i], slots_[i]);
  }

  template <typename Fn>
  void for_each(Fn&& fn) {
    std::lock_guard<std::mutex> lock(mutex_);
    load_locked();
    const auto& table = config::registry();
    for (size_t i = 0; i < table.size(); ++i) fn(table[i], slots_[i]);
  }

  void reload() {
    std::lock_guard<std::mutex> lock(mutex_);
    loaded_ = false;
    load_locked();
  }

  void set_override(const std::string& name, std::optional<std::string> value) {
    const size_t i = index_of(name);
    const VarInfo& info = config::registry()[i];
    std::lock_guard<std::mutex> lock(mutex_);
    load_locked();
    Slot slot = resolve(info, env_[i], value);
    if (value && !slot.error.empty()) throw std::invalid_argument(slot.error);
    if (value) {
      overrides_[i] = std::move(*value);
    } else {
      overrides_.erase(i);
    }
    slots_[i] = std::move(slot);
  }

 private:
  void load_locked() {
    if (loaded_) return;
    const auto& table = config::registry();
    env_.clear();
    slots_.clear();
    for (size_t i = 0; i < table.size(); ++i) {
      env_.push_back(read_env_text(table[i]));
      std::optional<std::string> forced;
      if (auto it = overrides_.find(i); it != overrides_.end()) forced = it->second;
      slots_.push_back(resolve(table[i], env_[i], forced));
    }
    loaded_ = true;
  }

  std::mutex mutex_;
  bool loaded_ = false;
  std::vector<EnvText> env_;                           // parallel to registry()
  std::vector<Slot> slots_;                            // parallel to registry()
  std::unordered_map<size_t, std::string> overrides_;  // registry index -> forced text
};

const char* type_name(VarType type) {
  switch (type) {
    case VarType::boolean:
      return "boolean";
    case VarType::integer:
      return "integer";
    case VarType::string:
      return "string";
    case VarType::path:
      return "path";
  }
  return "?";
}

void require_type(const VarInfo& info, VarType type, const char* accessor) {
  if (info.type != type) {
    throw std::logic_error(std::string("[config] ") + accessor + "(" + info.name + "): " +
                           info.name + " is a " + type_name(info.type) + ", not a " +
                           type_name(type));
  }
}

// Markdown table cells must not contain a bare '|' or a newline.
std::string cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace
}  // namespace tessera::detail

namespace tessera::config {

const std::vector<VarInfo>& registry() {
  static const std::vector<VarInfo> table = detail::build_registry();
  return table;
}

bool get_bool(const std::string& name) {
  return detail::Store::instance().with_slot(name, [](const VarInfo& info, const auto& slot) {
    detail::require_type(info, VarType::boolean, "get_bool");
    if (!slot.error.empty()) throw std::invalid_argument(slot.error);
    if (!slot.text) {
      throw std::logic_error("[config] get_bool(" + info.name + "): not set and no default");
    }
    return slot.bool_value;
  });
}

int64_t get_int(const std::string& name) {
  return detail::Store::instance().with_slot(name, [](const VarInfo& info, const auto& slot) {
    detail::require_type(info, VarType::integer, "get_int");
    if (!slot.error.empty()) throw std::invalid_argument(slot.error);
    if (!slot.text) {
      throw std::logic_error("[config] get_int(" + info.name +
                             "): not set and no default; check get_string() first");
    }
    return slot.int_value;
  });
}

std::optional<std::string> get_string(const std::string& name) {
  return detail::Store::instance().with_slot(name, [](const VarInfo&, const auto& slot) {
    if (!slot.error.empty()) throw std::invalid_argument(slot.error);
    return slot.text;
  });
}

Effective effective(const std::string& name) {
  return detail::Store::instance().with_slot(name, [](const VarInfo& info, const auto& slot) {
    return Effective{.info = &info, .raw = slot.raw, .source = slot.source,
                     .read_from = slot.read_from};
  });
}

void reload() {
  detail::Store::instance().reload();
}

void set_override(const std::string& name, std::optional<std::string> value) {
  detail::Store::instance().set_override(name, std::move(value));
}

void validate_all() {
  std::string first_error;
  detail::Store::instance().for_each([&](const VarInfo& info, const auto& slot) {
    if (first_error.empty() && info.used_by_this_build) first_error = slot.error;
  });
  if (!first_error.empty()) throw std::invalid_argument(first_error);
}

std::string markdown_table() {
  std::ostringstream os;
  os << "# Environment variables\n\n"
     << "Generated from the registry in `src/core/config.cpp` by `tessera env --markdown`; "
        "do not edit by hand.\n\n"
     << "Every variable has a `TESSERA_` name; the MLX spelling in the second column is "
        "accepted too, and the `TESSERA_` name wins when both are set. Booleans accept `0`, "
        "`1`, `true`, `false`, `on`, `off`, `yes`, `no` in any case, and `0` always means off "
        "(MLX treats some variables as on whenever they are set). Integers are decimal and "
        "range-checked. A malformed value is an error that names the variable. Variables not "
        "used by this build (Metal, CUDA and NCCL in a CPU build, JACCL) are accepted and ignored. `tessera env` "
        "prints the effective values and where each came from.\n\n"
     << "| name | MLX alias | type | default | used by this build | subsystem | description |\n"
     << "|---|---|---|---|---|---|---|\n";
  for (const VarInfo& info : registry()) {
    std::string aliases;
    if (!info.alias.empty()) aliases = "`" + info.alias + "`";
    if (!info.alias2.empty()) aliases += ", `" + info.alias2 + "`";
    std::string type = detail::type_name(info.type);
    if (info.type == VarType::integer) type += " in " + detail::range_text(info);
    const std::string default_text =
        info.default_value.empty() ? "(unset)" : "`" + info.default_value + "`";
    os << "| `" << info.name << "` | " << detail::cell(aliases) << " | " << detail::cell(type)
       << " | " << detail::cell(default_text) << " | "
       << (info.used_by_this_build ? "yes" : "no") << " | " << detail::cell(info.subsystem)
       << " | " << detail::cell(info.doc) << " |\n";
  }
  return os.str();
}

}  // namespace tessera::config
