// The system compiler and the disk cache of fused kernels (jit.h).
#include "backend/cpu/compiled/jit.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "core/trace.h"
#include "backend/device.h"
#include "core/sha256.h"
#include "tessera/config.h"

extern char** environ;

namespace tessera::cpu::jit {

namespace fs = std::filesystem;
using tessera::detail::Digest256;
using tessera::detail::sha256;
using tessera::detail::to_hex;

namespace {

// A cached kernel file: the shared object, then the SHA-256 of those bytes, then this magic.
constexpr char kMagic[8] = {'T', 'S', 'K', 'E', 'R', 'N', 'L', '1'};
constexpr size_t kTrailer = 32 + sizeof(kMagic);

struct Toolchain {
  std::string cxx;                // absolute path; empty: none found
  std::string looked_for;         // for the warning
  std::vector<std::string> args;  // flags and include dirs
  std::string identity;           // compiler, flags, Tessera's version, CPU features
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The CPU's feature flags (-march=native builds for them): a kernel built on a CPU with more
// features must not be handed to this one.
std::string cpu_features() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0) return line;
  }
  return "unknown-cpu";
}

std::string find_in_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const std::string path = config::get_string("PATH").value_or("");
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    const std::string p = dir + "/" + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// The directory holding libtessera (this file is part of it).
std::string library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&compiler_available), &info) == 0 || !info.dli_fname) {
    return "";
  }
  std::error_code ec;
  return fs::canonical(info.dli_fname, ec).parent_path().string();
}

// -I flags for the kernel headers: an installed tree (the include dir beside the library's, also
// in the wheel) or the source tree this library was built from.
std::vector<std::string> include_args() {
  const std::string lib = library_dir();
  const std::string inc = lib.empty() ? "" : lib + "/" TESSERA_LIB_TO_INCLUDE;
  if (!inc.empty() && fs::exists(inc + "/tessera/kernel/backend/cpu/unary_ops.h")) {
    return {"-I" + inc + "/tessera/kernel", "-I" + inc};
  }
  return {"-I" TESSERA_SOURCE_DIR "/src", "-I" TESSERA_SOURCE_DIR "/include"};
}

Toolchain find_toolchain() {
  Toolchain t;
  std::vector<std::string> names;
  if (auto c = config::get_string("TESSERA_COMPILE_CXX"); c && !c->empty()) {
    names.push_back(*c);
    t.looked_for = "TESSERA_COMPILE_CXX=" + *c;
  } else {
    names = {"c++", "g++", "clang++"};
    t.looked_for = "c++, g++ and clang++ in PATH";
  }
  for (auto& n : names) {
    t.cxx = find_in_path(n);
    if (!t.cxx.empty()) break;
  }
  if (t.cxx.empty()) return t;
  t.args = {"-std=c++20", "-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math",
            "-fPIC", "-shared", "-w"};
#if defined(__x86_64__)
  t.args.push_back("-mprefer-vector-width=512");
#endif
  const std::vector<std::string> includes = include_args();
  t.args.insert(t.args.end(), includes.begin(), includes.end());
  // The compiler by its resolved file, size and time: an upgrade changes the key.
  std::error_code ec;
  const fs::path real = fs::canonical(t.cxx, ec);
  struct stat st{};
  stat(real.c_str(), &st);
  std::ostringstream id;
  id << real.string() << ' ' << st.st_size << ' ' << st.st_mtime << '\n';
  for (auto& a : t.args) id << a << ' ';
  id << "\ntessera " TESSERA_VERSION_STRING "\n" << cpu_features() << '\n';
  // The headers the kernels include are part of their source: a change to a functor must not
  // hand out kernels built from the old one.
  for (auto& dir : includes) {
    const std::string d = dir.substr(2);  // without -I
    for (const char* h : {"backend/cpu/unary_ops.h", "backend/cpu/binary_ops.h",
                          "backend/cpu/numeric.h", "backend/cpu/vector_math.h",
                          "backend/cpu/simd.h", "backend/cpu/vec16_ops.h",
                          "backend/common/element_ops.h", "tessera/types.h"}) {
      if (fs::exists(d + "/" + h)) id << h << ' ' << to_hex(sha256(read_file(d + "/" + h))) << '\n';
    }
  }
  t.identity = id.str();
  return t;
}

const Toolchain& toolchain() {
  static const Toolchain t = [] {
    Toolchain found = find_toolchain();
    if (found.cxx.empty()) {
      std::cerr << "[compile] warning: no C++ compiler found (looked for " << found.looked_for
                << "); compiled functions run simplified but unfused. Install g++ or set "
                   "TESSERA_COMPILE_CXX to fuse.\n";
    }
    return found;
  }();
  return t;
}

std::mutex g_mutex;
std::unordered_map<std::string, FusedKernel> g_loaded;  // by key
std::atomic<uint64_t> g_builds{0}, g_disk_hits{0};

std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  std::ostringstream os;
  os << '.' << getpid() << '.' << rd() << '.' << counter++;
  return os.str();
}

// Runs the compiler; its output goes to `log`. Returns the exit status.
int run_compiler(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The shared object inside a cache file, if its trailer matches.
bool verify(const std::string& bytes) {
  if (bytes.size() <= kTrailer) return false;
  const size_t n = bytes.size() - kTrailer;
  if (std::memcmp(bytes.data() + n + 32, kMagic, sizeof(kMagic)) != 0) return false;
  const Digest256 d = sha256(bytes.data(), n);
  return std::memcmp(d.data(), bytes.data() + n, 32) == 0;
}

FusedKernel open_kernel(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return nullptr;
  return reinterpret_cast<FusedKernel>(dlsym(h, "tessera_fused"));
}

// Least recently used first out until the directory holds at most the configured size; `keep`
// (the kernel just written) stays.
void evict(const std::string& dir, const std::string& keep) {
  const uint64_t limit = static_cast<uint64_t>(config::get_int("TESSERA_COMPILE_CACHE_MAX_MB"))
                         << 20;
  struct Item {
    fs::file_time_type used;
    uint64_t size;
    fs::path path;
  };
  std::vector<Item> items;
  uint64_t total = 0;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".so") continue;
    std::error_code e1, e2;
    const uint64_t size = e.file_size(e1);
    const auto t = e.last_write_time(e2);
    if (e1 || e2) continue;
    items.push_back({t, size, e.path()});
    total += size;
  }
  if (total <= limit) return;
  std::sort(items.begin(), items.end(), [](auto& a, auto& b) { return a.used < b.used; });
  for (auto& it : items) {
    if (total <= limit) break;
    if (it.path.filename() == keep) continue;
    if (fs::remove(it.path, ec)) total -= it.size;
  }
}

FusedKernel build(const Toolchain& t, const std::string& dir, const std::string& key,
                  const std::string& source) {
  const std::string base = dir + "/" + key + unique_suffix();
  const std::string src = base + ".cpp", obj = base + ".o.tmp", log = base + ".log";
  {
    std::ofstream f(src, std::ios::binary);
    f << source;
    if (!f) throw std::runtime_error("[compile] cannot write " + src);
  }
  std::vector<std::string> argv{t.cxx};
  argv.insert(argv.end(), t.args.begin(), t.args.end());
  argv.insert(argv.end(), {src, "-o", obj});
  const int64_t t0 = trace::on() ? trace::now_ns() : 0;
  const int rc = run_compiler(argv, log);
  if (t0) trace::slice("compile", "compile: compiler run", t0, trace::now_ns(), "\"kernel\":\"" + key + "\"");
  std::string out = read_file(log);
  std::error_code ec;
  fs::remove(src, ec);
  fs::remove(log, ec);
  if (rc != 0) {
    fs::remove(obj, ec);
    throw std::runtime_error("[compile] the C++ compiler " + t.cxx + " failed (exit status " +
                             std::to_string(rc) + ") on a fused kernel:\n" + out);
  }
  std::string bytes = read_file(obj);
  fs::remove(obj, ec);
  const Digest256 d = sha256(bytes.data(), bytes.size());
  bytes.append(reinterpret_cast<const char*>(d.data()), d.size());
  bytes.append(kMagic, sizeof(kMagic));
  const std::string final_path = dir + "/" + key + ".so", tmp = base + ".so.tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) throw std::runtime_error("[compile] cannot write " + tmp);
  }
  // Open our own copy under its temporary name, then publish it: a process that renames the
  // same kernel a moment later replaces a file with equal contents.
  FusedKernel k = open_kernel(tmp);
  fs::rename(tmp, final_path, ec);
  if (ec) fs::remove(tmp, ec);
  if (!k) throw std::runtime_error("[compile] cannot load the kernel just built: " + tmp);
  ++g_builds;
  evict(dir, key + ".so");
  return k;
}

}  // namespace

bool compiler_available() { return !toolchain().cxx.empty(); }

std::string cache_dir() {
  if (auto d = config::get_string("TESSERA_COMPILE_CACHE_DIR"); d && !d->empty()) return *d;
  if (auto h = config::get_string("HOME"); h && !h->empty()) {
    return *h + "/.cache/tessera/kernels";
  }
  return "/tmp/tessera-kernels-" + std::to_string(getuid());
}

FusedKernel load(const std::string& source) {
  const Toolchain& t = toolchain();
  if (t.cxx.empty()) throw std::runtime_error("[compile] no C++ compiler (" + t.looked_for + ")");
  const std::string key = to_hex(sha256(source + "\n" + t.identity)).substr(0, 40);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (auto it = g_loaded.find(key); it != g_loaded.end()) return it->second;
  }
  const std::string dir = cache_dir();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw std::runtime_error("[compile] cannot create the kernel cache directory " + dir + ": " +
                             ec.message() + " (set TESSERA_COMPILE_CACHE_DIR to a writable one)");
  }
  const std::string path = dir + "/" + key + ".so";
  FusedKernel k = nullptr;
  if (verify(read_file(path))) {
    k = open_kernel(path);
    if (k) {
      ++g_disk_hits;
      trace::instant("compile", "compile: kernel from the disk cache", "\"kernel\":\"" + key + "\"");
      fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // recently used
    }
  }
  if (!k) k = build(t, dir, key, source);  // missing, truncated or corrupted: rebuilt
  std::lock_guard<std::mutex> lock(g_mutex);
  g_loaded.emplace(key, k);
  return k;
}

uint64_t builds() { return g_builds.load(); }
uint64_t disk_hits() { return g_disk_hits.load(); }
void forget_loaded() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_loaded.clear();
}

}  // namespace tessera::cpu::jit

// compile's device seam (backend/compile_hooks.h): the CPU's answers, and the GPU back end's
// when one is installed (backend/device.h).
namespace tessera::backend {

bool can_fuse(const Device& device) {
  if (device.type == Device::cpu) return cpu::jit::compiler_available();
  DeviceBackend* gpu = gpu_backend();
  return gpu != nullptr && gpu->can_fuse();
}

KernelCounters kernel_counters() {
  KernelCounters k{cpu::jit::builds(), cpu::jit::disk_hits()};
  if (DeviceBackend* gpu = gpu_backend()) {
    const KernelCounters g = gpu->kernel_counters();
    k.builds += g.builds;
    k.disk_hits += g.disk_hits;
  }
  return k;
}

void forget_kernels() {
  cpu::jit::forget_loaded();
  if (DeviceBackend* gpu = gpu_backend()) gpu->forget_kernels();
}

}  // namespace tessera::backend
