// Per-host rank defaults and the agent frames (see rank_host.h).
#include "rank_host.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>

namespace tessera::cli {

namespace {

void put_u32(std::string& f, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) f += static_cast<char>((v >> shift) & 0xff);
}

}  // namespace

uint32_t read_u32(const char* p) {
  uint32_t v = 0;
  for (int k = 0; k < 4; ++k) v = (v << 8) | static_cast<unsigned char>(p[k]);
  return v;
}

std::string frame_data(const char* data, size_t n) {
  std::string f = "D";
  put_u32(f, static_cast<uint32_t>(n));
  f.append(data, n);
  return f;
}

std::string frame_output(char type, int rank, const char* data, size_t n) {
  std::string f(1, type);
  put_u32(f, static_cast<uint32_t>(rank));
  put_u32(f, static_cast<uint32_t>(n));
  f.append(data, n);
  return f;
}

std::string frame_exit(int rank, int status) {
  std::string f = "X";
  put_u32(f, static_cast<uint32_t>(rank));
  put_u32(f, static_cast<uint32_t>(status));
  return f;
}

std::vector<int> allowed_cpus() {
  std::vector<int> out;
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

std::vector<int> cpus_for_rank(const std::vector<int>& cpus, int n, int i) {
  const int m = static_cast<int>(cpus.size());
  if (m == 0 || n <= 0) return {};
  if (n > m) return {cpus[static_cast<size_t>(i % m)]};
  const int lo = i * m / n, hi = (i + 1) * m / n;
  return std::vector<int>(cpus.begin() + lo, cpus.begin() + hi);
}

std::string memory_share_entry(int ranks_on_host) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0 || ranks_on_host <= 0) return "";
  const double bytes = static_cast<double>(pages) * static_cast<double>(page);
  const size_t share_mb = std::max<size_t>(1, static_cast<size_t>(0.8 * bytes / ranks_on_host) >> 20);
  return "TESSERA_MEMORY_LIMIT_MB=" + std::to_string(share_mb);
}

bool is_launcher_variable(const std::string& name) {
  for (const char* k : {"TESSERA_RANK", "MLX_RANK", "TESSERA_HOSTFILE", "MLX_HOSTFILE",
                        "TESSERA_WORLD_SIZE", "MLX_WORLD_SIZE", "TESSERA_JOB_TOKEN",
                        "TESSERA_RING_VERBOSE", "TESSERA_TRACE", "TESSERA_HOST_CPUS"}) {
    if (name == k) return true;
  }
  return false;
}

}  // namespace tessera::cli
