// A rank of the multi-process tests (tests/cpp/test_distributed.cpp starts it through
// `tessera launch`). `dist_worker MODE` checks one behaviour against references computed from
// every rank's known input and exits 0 on success; it prints what differed otherwise.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "distributed/hostfile.h"
#include "distributed/mpi/mpi_group.h"
#include "distributed/ring/handshake.h"
#include "core/sha256.h"
#include "tessera/tessera.h"

namespace mx = tessera;
namespace dist = tessera::distributed;
using mx::array;
using mx::Dtype;

namespace {

int g_rank = 0, g_size = 1;
int g_failures = 0;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void fail(const std::string& what) {
  if (++g_failures <= 20) std::printf("FAIL rank %d: %s\n", g_rank, what.c_str());
}

// Small integer values: exact in every dtype, sums over 5 ranks fit in int8.
int value(int r, size_t i) { return static_cast<int>((r * 7 + i * 3) % 11); }

template <typename T>
T make_value(int r, size_t i) {
  int v = value(r, i);
  if constexpr (std::is_same_v<T, bool>) {
    return (r + i) % 3 == 0;
  } else if constexpr (std::is_same_v<T, mx::complex64_t>) {
    return {static_cast<float>(v), static_cast<float>(-v)};
  } else if constexpr (std::is_signed_v<T> || std::is_same_v<T, mx::float16_t> ||
                       std::is_same_v<T, mx::bfloat16_t>) {
    return T(v - 5);
  } else {
    return T(v);
  }
}

template <typename T>
array input(int r, size_t n, Dtype dt) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = make_value<T>(r, i);
  return array(v.begin(), mx::Shape{static_cast<int>(n)}, dt);
}

enum class Red { sum, max, min };

template <typename T>
T reduce_ref(Red op, size_t i) {
  T acc = make_value<T>(0, i);
  for (int r = 1; r < g_size; ++r) {
    T x = make_value<T>(r, i);
    if constexpr (std::is_same_v<T, bool>) {
      acc = op == Red::min ? (acc && x) : (acc || x);
    } else if constexpr (std::is_same_v<T, mx::complex64_t>) {
      if (op == Red::sum) acc = acc + x;
      else acc = (op == Red::max) == (std::abs(x) > std::abs(acc)) ? x : acc;
    } else if constexpr (std::is_same_v<T, mx::float16_t> || std::is_same_v<T, mx::bfloat16_t>) {
      float a = acc, b = x;
      acc = T(op == Red::sum ? a + b : op == Red::max ? std::max(a, b) : std::min(a, b));
    } else {
      acc = op == Red::sum ? T(acc + x) : op == Red::max ? std::max(acc, x) : std::min(acc, x);
    }
  }
  return acc;
}

// The same result judged by Tessera's own array_equal / allclose in the rank's configuration
// (a 1-thread pool under `tessera launch --cpu-bind auto`), beside the byte comparison.
template <typename T>
void check_with_ops(const array& y, const std::vector<T>& want, Dtype dt, const std::string& what) {
  array ref(want.begin(), mx::Shape{static_cast<int>(want.size())}, dt);
  if (!mx::array_equal(y, ref).item<bool>()) fail("array_equal says the " + what + " differs");
  if (dt != mx::bool_ && !mx::allclose(y, ref).item<bool>()) {
    fail("allclose says the " + what + " differs");
  }
}

template <typename T>
void check_collectives(Dtype dt, size_t n) {
  std::string tag = mx::dtype_name(dt) + " n=" + std::to_string(n);
  auto x = input<T>(g_rank, n, dt);
  for (Red op : {Red::sum, Red::max, Red::min}) {
    if (dt == mx::complex64 && op != Red::sum) continue;  // max/min of complex: MLX-undefined order
    array y = op == Red::sum ? dist::all_sum(x) : op == Red::max ? dist::all_max(x) : dist::all_min(x);
    y.eval();
    const T* p = y.template data<T>();
    std::vector<T> want(n);
    for (size_t i = 0; i < n; ++i) want[i] = reduce_ref<T>(op, i);
    check_with_ops(y, want, dt, "all_reduce op " + std::to_string(int(op)) + " " + tag);
    for (size_t i = 0; i < n; ++i) {
      T e = want[i];
      if (std::memcmp(&p[i], &e, sizeof(T)) != 0) {
        fail("all_reduce op " + std::to_string(int(op)) + " " + tag + " at " + std::to_string(i));
        break;
      }
    }
  }
  // all_gather: rank blocks in order.
  auto g = dist::all_gather(x);
  g.eval();
  if (g.size() != n * g_size) fail("all_gather size " + tag);
  std::vector<T> gathered;
  for (int r = 0; r < g_size; ++r) {
    for (size_t i = 0; i < n; ++i) gathered.push_back(make_value<T>(r, i));
  }
  if (g.size() == gathered.size()) check_with_ops(g, gathered, dt, "all_gather " + tag);
  for (int r = 0; r < g_size && g.size() == n * g_size; ++r) {
    for (size_t i = 0; i < n; ++i) {
      T e = make_value<T>(r, i);
      if (std::memcmp(&g.template data<T>()[r * n + i], &e, sizeof(T)) != 0) {
        fail("all_gather " + tag);
        r = g_size;
        break;
      }
    }
  }
  // sum_scatter of N*n rows: rank r gets the sum of rows [r*n, (r+1)*n).
  if (dt != mx::bool_) {
    auto big = input<T>(g_rank, n * g_size, dt);
    auto s = dist::sum_scatter(big);
    s.eval();
    for (size_t i = 0; i < n; ++i) {
      T e = reduce_ref<T>(Red::sum, g_rank * n + i);
      if (std::memcmp(&s.template data<T>()[i], &e, sizeof(T)) != 0) {
        fail("sum_scatter " + tag + " at " + std::to_string(i));
        break;
      }
    }
  }
  // send/recv around the ring: every rank gets its left neighbour's input, bit for bit.
  if (g_size > 1) {
    const int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    array got(0);
    if (g_rank % 2 == 0) {
      mx::eval(dist::send(x, right));
      got = dist::recv_like(x, left);
      got.eval();
    } else {
      got = dist::recv_like(x, left);
      got.eval();
      mx::eval(dist::send(x, right));
    }
    auto e = input<T>(left, n, dt);
    if (got.size() != n || got.dtype() != dt ||
        (n > 0 && std::memcmp(got.template data<T>(), e.template data<T>(), n * sizeof(T)) != 0)) {
      fail("send/recv " + tag);
    }
  }
}

int mode_collectives() {
  size_t lengths[] = {0, 1, 7, 1023, (size_t{1} << 20) + 3};
  int checks = 0;
  for (size_t n : lengths) {
    for (Dtype dt : mx::kAllDtypes) {
      if (n > 2000 && dt != mx::float32 && dt != mx::bfloat16 && dt != mx::int8) continue;
      mx::detail::dispatch_dtype(dt, [&](auto tag) { check_collectives<decltype(tag)>(dt, n); });
      ++checks;
    }
  }
  // Non-contiguous input: a transposed 2-D array.
  auto a = mx::transpose(mx::reshape(mx::astype(mx::arange(0, 12), mx::float32), {3, 4}));
  auto s = dist::all_sum(a + mx::array(static_cast<float>(g_rank)));
  auto ref = mx::transpose(mx::reshape(mx::astype(mx::arange(0, 12), mx::float32), {3, 4})) *
                 mx::array(static_cast<float>(g_size)) +
             mx::array(static_cast<float>(g_size * (g_size - 1) / 2));
  if (!mx::array_equal(s, ref).item<bool>()) fail("all_sum of a transposed input");
  // send/recv around the ring, and between rank 0 and the last rank directly.
  if (g_size > 1) {
    auto mine = mx::full({5}, mx::array(g_rank), mx::int32);
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    array got(0);
    if (g_rank % 2 == 0) {
      mx::eval(dist::send(mine, right));
      got = dist::recv_like(mine, left);
    } else {
      got = dist::recv_like(mine, left);
      mx::eval(got);
      mx::eval(dist::send(mine, right));
    }
    mx::eval(got);
    if (got.data<int32_t>()[4] != left) fail("ring send/recv");
    if (g_size > 2) {
      if (g_rank == 0) mx::eval(dist::send(mx::array(123.5f), g_size - 1));
      if (g_rank == g_size - 1) {
        auto v = dist::recv({}, mx::float32, 0);
        if (v.item<float>() != 123.5f) fail("direct send/recv between non-neighbours");
      }
    }
  }
  // broadcast from the last rank; all_to_all.
  auto b = dist::broadcast(mx::full({3}, mx::array(g_rank * 10), mx::int32), g_size - 1);
  if (b.eval(), b.data<int32_t>()[2] != (g_size - 1) * 10) fail("broadcast");
  {
    std::vector<int32_t> v(g_size * 2);
    for (int j = 0; j < g_size * 2; ++j) v[j] = g_rank * 100 + j;
    auto t = dist::all_to_all(array(v.begin(), {g_size * 2}, mx::int32));
    t.eval();
    for (int i = 0; i < g_size; ++i)  // block i came from rank i: its elements 2*rank, 2*rank+1
      if (t.data<int32_t>()[2 * i + 1] != i * 100 + 2 * g_rank + 1) fail("all_to_all");
  }
  dist::barrier();
  std::printf("rank %d: %d dtype/length cases, %d failures\n", g_rank, checks, g_failures);
  return g_failures ? 1 : 0;
}

// 1000 collectives with random sizes, the same sequence on every rank (same seed).
// One collective of a random kind, dtype and size, checked element for element against the
// reference computed from every rank's known input; false (after fail()) on a difference.
template <typename T>
bool mixed_step(int kind, size_t n, Dtype dt, long k) {
  auto x = input<T>(g_rank, n * g_size, dt);
  array y = kind == 0 ? dist::all_sum(x)
            : kind == 1 ? dist::all_max(x)
            : kind == 2 ? dist::all_gather(x)
                        : dist::sum_scatter(x);
  y.eval();
  const size_t len = kind == 2 ? n * g_size * g_size : kind == 3 ? n : n * g_size;
  if (y.size() != len) {
    fail("mixed #" + std::to_string(k) + ": size " + std::to_string(y.size()));
    return false;
  }
  const T* p = y.template data<T>();
  for (size_t i = 0; i < len; ++i) {
    T e = kind == 0   ? reduce_ref<T>(Red::sum, i)
          : kind == 1 ? reduce_ref<T>(Red::max, i)
          : kind == 2 ? make_value<T>(static_cast<int>(i / (n * g_size)), i % (n * g_size))
                      : reduce_ref<T>(Red::sum, g_rank * n + i);
    if (std::memcmp(&p[i], &e, sizeof(T)) != 0) {
      fail("mixed #" + std::to_string(k) + " kind " + std::to_string(kind) + " " +
           mx::dtype_name(dt) + " n=" + std::to_string(n) + " at " + std::to_string(i));
      return false;
    }
  }
  return true;
}

// `count` collectives of random kinds (all_sum, all_max, all_gather, sum_scatter), dtypes
// (float32, int32) and sizes (mostly < 3000 elements per rank, 1 in 100 up to 300000, which
// takes the segmented ring paths), all checked exactly.
int mode_mixed(long count) {
  std::mt19937 gen(1234);  // the same sequence on every rank
  for (long k = 0; k < count && g_failures == 0; ++k) {
    const int kind = static_cast<int>(gen() % 4);
    const size_t n = gen() % 100 == 0 ? gen() % 300000 : gen() % 3000;
    const bool f32 = gen() % 2 == 0;
    if (f32) {
      mixed_step<float>(kind, n, mx::float32, k);
    } else {
      mixed_step<int32_t>(kind, n, mx::int32, k);
    }
  }
  std::printf("rank %d: mixed done (%ld collectives), %d failures\n", g_rank, count, g_failures);
  return g_failures ? 1 : 0;
}

int mode_init() {
  auto g = dist::init();
  if (g.rank() != g_rank || g.size() != g_size) fail("init() rank/size");
  auto g2 = dist::init(true, "ring");
  if (g2.raw_group() != g.raw_group()) fail("init('ring') is not the cached group");
  if (dist::init().raw_group() != g.raw_group()) fail("second init() differs");
  auto m = dist::init(false, "mpi");
  if (m.size() != 1) fail("init('mpi') without MPI should be a singleton");
  try {
    dist::init(false, "bogus");
    fail("unknown backend accepted");
  } catch (const std::invalid_argument&) {
  }
  std::printf("rank %d: init ok\n", g_rank);
  return g_failures ? 1 : 0;
}

// Gradients as MLX: all_sum's vjp is the identity; all_gather's picks this rank's rows.
int mode_grad() {
  auto f = [](const array& x) { return mx::sum(dist::all_sum(x * x)); };
  auto gx = mx::grad(f)(mx::array({1.0f, 2.0f}));
  gx.eval();
  if (gx.data<float>()[1] != 4.0f) fail("grad of sum(all_sum(x*x))");
  auto h = [](const array& x) { return mx::take(dist::all_gather(x), 0, 0); };
  auto gh = mx::grad(h)(mx::array(3.0f));
  float expect = g_rank == 0 ? 1.0f : 0.0f;
  if (gh.item<float>() != expect) fail("grad of all_gather(x)[0]");
  std::printf("rank %d: grad ok\n", g_rank);
  return g_failures ? 1 : 0;
}

// Rank 1 dies by SIGKILL in the middle of a 256 MiB all_sum; survivors must raise within 2 s.
int mode_kill() {
  signal(SIGTERM, SIG_IGN);  // survivors report before the launcher's SIGKILL (grace period)
  auto x = mx::full({64 << 20}, mx::array(1.0f), mx::float32);
  x.eval();
  dist::barrier();
  if (g_rank == 1) {
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      raise(SIGKILL);
    }).detach();
  }
  double t0 = now();
  try {
    for (int i = 0; i < 50; ++i) mx::eval(dist::all_sum(x));
    std::printf("rank %d: all_sum did not fail\n", g_rank);
    return 1;
  } catch (const std::runtime_error& e) {
    double dt = now() - t0 - 0.1;
    std::printf("rank %d raised after %.2f s: %s\n", g_rank, dt, e.what());
    return dt < 2.0 ? 0 : 1;
  }
}

// Rank 1 stops (SIGSTOP) before an all_sum; with TESSERA_DIST_TIMEOUT=3 survivors raise.
int mode_stop() {
  dist::barrier();
  if (g_rank == 1) raise(SIGSTOP);
  // The first survivor to fail makes the launcher SIGTERM the others: let them report first.
  signal(SIGTERM, SIG_IGN);
  double t0 = now();
  try {
    mx::eval(dist::all_sum(mx::ones({1 << 16})));
    std::printf("rank %d: all_sum did not fail\n", g_rank);
  } catch (const std::runtime_error& e) {
    std::printf("rank %d raised after %.2f s: %s\n", g_rank, now() - t0, e.what());
  }
  return 5;  // non-zero either way, so the launcher stops the stopped rank
}

// Ranks disagree on the size: both must raise an error naming both sizes. Sizes a and b
// (elements of rank 0 and rank 1) pick the transport's paths: 1000 and 1200 take the same one,
// 3 and 1000 different ones (one cache line versus slots in shared memory).
int mode_mismatch(int a = 1000, int b = 1200) {
  int n = g_rank == 0 ? a : b;
  try {
    mx::eval(dist::all_sum(mx::ones({n})));
    std::printf("rank %d: no error\n", g_rank);
    return 1;
  } catch (const std::runtime_error& e) {
    std::string m = e.what();
    bool ok = m.find(" " + std::to_string(a) + " ") != std::string::npos &&
              m.find(" " + std::to_string(b) + " ") != std::string::npos;
    std::printf("rank %d mismatch error (%s): %s\n", g_rank, ok ? "names both" : "INCOMPLETE",
                m.c_str());
    return ok ? 0 : 1;
  }
}

// split(color = rank % 2, key = -rank): the sub-groups' ranks in reverse order of the world's;
// all_sum and all_gather on them agree with references computed from the world ranks.
int mode_split() {
  auto world = dist::init();
  auto sub = world.split(g_rank % 2, g_size - g_rank);
  std::vector<int> members;  // world ranks of my colour, in the sub-group's order
  for (int r = g_size - 1; r >= 0; --r)
    if (r % 2 == g_rank % 2) members.push_back(r);
  const int want_rank = static_cast<int>(std::find(members.begin(), members.end(), g_rank) - members.begin());
  if (sub.size() != static_cast<int>(members.size()) || sub.rank() != want_rank) {
    fail("split: rank " + std::to_string(sub.rank()) + " of " + std::to_string(sub.size()));
  }
  auto mine = mx::array(static_cast<float>(g_rank));
  float want_sum = 0;
  for (int r : members) want_sum += static_cast<float>(r);
  if (sub.size() > 1) {
    if (dist::all_sum(mine, sub).item<float>() != want_sum) fail("split: all_sum");
    auto g = dist::all_gather(mx::reshape(mine, {1}), sub);
    g.eval();
    for (size_t i = 0; i < members.size(); ++i)
      if (g.data<float>()[i] != static_cast<float>(members[i])) fail("split: all_gather order");
  }
  // The world group still works after the split.
  if (dist::all_sum(mine, world).item<float>() != static_cast<float>(g_size * (g_size - 1) / 2)) {
    fail("world all_sum after split");
  }
  std::printf("rank %d: split ok (sub-group rank %d of %d), %d failures\n", g_rank, sub.rank(),
              sub.size(), g_failures);
  return g_failures ? 1 : 0;
}

// clear_backends() and init() again, three times: the backend comes back up (for MPI without a
// second MPI_Init, which Open MPI treats as fatal) and its all_sum is right each time.
int mode_reinit(const std::string& backend) {
  for (int k = 0; k < 3; ++k) {
    auto g = dist::init(true, backend);
    const float got = dist::all_sum(mx::array(static_cast<float>(g.rank() + k)), g).item<float>();
    if (got != static_cast<float>(g.size() * (g.size() - 1) / 2 + g.size() * k)) fail("all_sum after re-init");
    dist::clear_backends();
  }
  std::printf("rank %d: reinit ok, %d failures\n", g_rank, g_failures);
  return g_failures ? 1 : 0;
}

// Rank 1 never joins rank 0's all_sum (it sleeps, bounded): with MPI, rank 0's watchdog ends
// the process after TESSERA_DIST_TIMEOUT and mpirun stops the job.
int mode_stall() {
  if (g_rank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 1;
  }
  mx::eval(dist::all_sum(mx::array(1.0f)));
  std::printf("rank %d: all_sum returned without rank 1\n", g_rank);
  return 1;
}

// Ranks name different broadcast roots: both must raise an error naming both roots.
int mode_bcastroot() {
  try {
    mx::eval(dist::broadcast(mx::ones({64}), g_rank));
    std::printf("rank %d: no error\n", g_rank);
    return 1;
  } catch (const std::runtime_error& e) {
    std::string m = e.what();
    bool ok = m.find("root 0") != std::string::npos && m.find("root 1") != std::string::npos;
    std::printf("rank %d root mismatch error (%s): %s\n", g_rank,
                ok ? "names both" : "INCOMPLETE", m.c_str());
    return ok ? 0 : 1;
  }
}

// Before joining, rank 0 connects to rank 1 with a wrong token: rejected; the job still runs.
int mode_badtoken() {
  if (g_rank == 0 && g_size > 1) {
    auto hf = dist::detail::load_hostfile(mx::config::get_string("TESSERA_HOSTFILE").value());
    const auto& a = hf.ranks[1][0];
    bool rejected = false;
    for (int attempt = 0; attempt < 100 && !rejected; ++attempt) {
      try {
        auto deadline = dist::detail::Deadline::after(5.0);
        auto s = dist::detail::connect_with_backoff(a, deadline, 0, 1, false);
        dist::detail::ConnIdentity me{0, 1, 0, dist::detail::ConnKind::ring};
        dist::detail::client_handshake(s, dist::detail::JobTerms{"not-the-job-token", {}, true, g_size}, me, deadline, {});
        std::printf("rank 0: impostor connection was ACCEPTED\n");
        return 1;
      } catch (const std::exception& e) {
        std::string m = e.what();
        if (m.find("reject") != std::string::npos || m.find("token") != std::string::npos) {
          rejected = true;
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));  // not listening yet
        }
      }
    }
    if (!rejected) fail("impostor was neither accepted nor rejected");
  }
  auto y = dist::all_sum(mx::array(1.0f));
  if (y.item<float>() != static_cast<float>(g_size)) fail("all_sum after impostor");
  std::printf("rank %d: badtoken ok\n", g_rank);
  return g_failures ? 1 : 0;
}

// Before joining, rank 0 opens a connection to rank 1's listener and never says a word. The
// listener authenticates connections concurrently, so the job still forms at once instead of
// after that connection's 10 s handshake deadline.
int mode_silent() {
  dist::detail::Socket silent;
  if (g_rank == 0 && g_size > 1) {
    auto hf = dist::detail::load_hostfile(mx::config::get_string("TESSERA_HOSTFILE").value());
    auto deadline = dist::detail::Deadline::after(20.0);
    silent = dist::detail::connect_with_backoff(hf.ranks[1][0], deadline, 0, 1, false);
  }
  auto t0 = std::chrono::steady_clock::now();
  auto y = dist::all_sum(mx::array(1.0f));
  if (y.item<float>() != static_cast<float>(g_size)) fail("all_sum with a silent connection");
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("rank %d: silent ok after %.2f s\n", g_rank, s);
  return g_failures ? 1 : 0;
}

size_t count_entries(const char* dir, const char* prefix = "") {
  size_t n = 0;
  if (DIR* d = opendir(dir)) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.' && std::strncmp(e->d_name, prefix, std::strlen(prefix)) == 0) ++n;
    }
    closedir(d);
  }
  return n;
}

// `count` cycles of init() / one all_sum / teardown (tests/cpp/test_soak.cpp): descriptors,
// threads and the shared-memory segments this rank creates must not accumulate. (Only its own:
// /dev/shm also holds the segments of tests running beside this one.)
int mode_cycles(long count) {
  struct Usage {
    size_t fds, threads, shm;
  };
  const std::string mine = "tessera-" + std::to_string(::getpid()) + "-";  // segments.cpp's names
  auto usage = [&] {
    return Usage{count_entries("/proc/self/fd"), count_entries("/proc/self/task"),
                 count_entries("/dev/shm", mine.c_str())};
  };
  Usage warm{};
  dist::clear_backends();  // main's group: every cycle below builds and drops its own
  for (long i = 0; i < count && g_failures == 0; ++i) {
    {
      auto g = dist::init(true);
      auto y = dist::all_sum(mx::array(static_cast<float>(g.rank() + 1)), g);
      if (y.item<float>() != static_cast<float>(g.size() * (g.size() + 1) / 2)) {
        fail("all_sum in cycle " + std::to_string(i));
      }
    }
    dist::clear_backends();  // drops the cached group: it is torn down here
    if (i == 9) warm = usage();
  }
  Usage end = usage();
  std::printf("rank %d: %ld init/teardown cycles; fds %zu -> %zu, threads %zu -> %zu, shm %zu -> "
              "%zu\n", g_rank, count, warm.fds, end.fds, warm.threads, end.threads, warm.shm,
              end.shm);
  if (end.fds > warm.fds || end.threads > warm.threads || end.shm > warm.shm) {
    fail("resources grew over the cycles");
  }
  return g_failures ? 1 : 0;
}

// init() without strict (tests/cpp/test_init_errors.cpp): prints the group's size.
int mode_lenient() {
  auto g = dist::init();
  std::printf("lenient init: size %d\n", g.size());
  return 0;
}

// Every rank dies by SIGKILL right after the job formed (shared memory set up): nothing of its
// may be left in /dev/shm (tests/cpp/test_distributed.cpp reads the pids printed here).
int mode_selfkill() {
  mx::eval(dist::all_sum(mx::ones({1024})));
  std::printf("rank %d pid %d\n", g_rank, static_cast<int>(getpid()));
  std::fflush(stdout);
  dist::barrier();
  raise(SIGKILL);
  return 1;
}

// A rank killed while it sets up shared memory: its segment exists, nobody has mapped it yet
// (made here by hand, named as the transport names them). The launcher must remove it.
int mode_setupkill() {
  const std::string name = "/tessera-" + std::to_string(getpid()) + "-" + std::to_string(g_rank) +
                           "-00000000deadbeef";
  std::printf("rank %d pid %d\n", g_rank, static_cast<int>(getpid()));
  std::fflush(stdout);
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 || ftruncate(fd, 4096) != 0) return 1;
  // Every rank prints before any dies: the launcher stops the survivors of the first death, and
  // the test needs every pid. A rank's segment exists once it has printed: wait (bounded) for
  // all of them.
  for (int i = 0; i < 400; ++i) {
    int seen = 0;
    if (DIR* d = opendir("/dev/shm")) {
      while (dirent* e = readdir(d)) {
        const std::string n = e->d_name;
        seen += n.rfind("tessera-", 0) == 0 && n.size() > 17 &&
                n.compare(n.size() - 17, 17, "-00000000deadbeef") == 0;
      }
      closedir(d);
    }
    if (seen >= g_size) break;
    usleep(5000);
  }
  raise(SIGKILL);
  return 1;
}

// Not a rank (no init): claims rank `claimed` to rank `target` of the job in MLX_HOSTFILE with
// the job's real settings and no token, and reports whether it was taken
// (tests/cpp/test_cluster.cpp runs it from another host).
int mode_impersonate(int claimed, int target) {
  const std::string path = mx::config::get_string("TESSERA_HOSTFILE").value();
  auto hf = dist::detail::load_hostfile(path);
  dist::detail::JobTerms terms{"", dist::detail::sha256(hf.to_json()),
                               mx::config::get_bool("TESSERA_RING_SHM"), hf.size()};
  for (int attempt = 0; attempt < 200; ++attempt) {
    try {
      auto deadline = dist::detail::Deadline::after(5.0);
      auto s = dist::detail::connect_with_backoff(hf.ranks[static_cast<size_t>(target)][0],
                                                  deadline, claimed, target, false);
      dist::detail::ConnIdentity me{claimed, target, 0, dist::detail::ConnKind::ring};
      dist::detail::client_handshake(s, terms, me, deadline, {});
      std::printf("impostor was taken as rank %d\n", claimed);
      return 1;
    } catch (const std::exception& e) {
      const std::string m = e.what();
      if (m.find("refused") != std::string::npos || m.find("reject") != std::string::npos) {
        std::printf("impostor refused: %s\n", m.c_str());
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // not listening yet
    }
  }
  std::printf("impostor never reached rank %d\n", target);
  return 2;
}

// Ranks on simulated hosts (tests/cpp/test_cluster.cpp): after a barrier, all_sum of 256 KiB
// until one fails (a partition, a killed rank), then report it.
int mode_loop() {
  dist::barrier();
  std::printf("rank %d ready\n", g_rank);
  auto x = mx::ones({64 << 10});
  try {
    for (int i = 0; i < 1000000; ++i) mx::eval(dist::all_sum(x));
    std::printf("rank %d: no failure\n", g_rank);
    return 0;
  } catch (const std::runtime_error& e) {
    std::printf("rank %d raised: %s\n", g_rank, e.what());
    return 3;
  }
}

// Ranks started by hand (tests/cpp/test_init_errors.cpp): init() in main, then one all_sum.
int mode_join() {
  auto y = dist::all_sum(mx::array(static_cast<float>(g_rank + 1)));
  std::printf("rank %d: all_sum %g\n", g_rank, static_cast<double>(y.item<float>()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "any";
  if (argc > 2 && std::string(argv[1]) == "--backend") {  // dist_worker --backend NAME MODE ...
    backend = argv[2];
    argv += 2;
    argc -= 2;
  }
  if (argc < 2) {
    std::fprintf(stderr, "usage: dist_worker [--backend NAME] MODE\n");
    return 2;
  }
  std::string mode = argv[1];
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a log file or the launcher at once
  try {
    if (mode == "lenient") return mode_lenient();
    if (mode == "impersonate" && argc > 3) return mode_impersonate(std::atoi(argv[2]), std::atoi(argv[3]));
    if (mode == "mpi_available") {  // before any init: whether libmpi loads, and why not
      std::string why;
      const bool ok = dist::detail::mpi_available(&why);
      std::printf("mpi available: %s (is_available: %d)%s%s\n", ok ? "yes" : "no",
                  int(dist::is_available("mpi")), why.empty() ? "" : "; ", why.c_str());
      return 0;
    }
    if (mode == "memlimit") {  // the allocator's default limit in this rank, in MiB
      std::printf("memory limit %zu MiB\n", mx::get_memory_limit() >> 20);
      return 0;
    }
    if (mode != "badtoken" && mode != "silent") {  // those two act before joining
      auto g = dist::init(true, backend);
      g_rank = g.rank();
      g_size = g.size();
    } else {
      g_rank = static_cast<int>(mx::config::get_int("TESSERA_RANK"));
      g_size = static_cast<int>(mx::config::get_int("TESSERA_WORLD_SIZE"));
    }
    if (mode == "collectives") return mode_collectives();
    if (mode == "mixed") return mode_mixed(argc > 2 ? std::atol(argv[2]) : 1000);
    if (mode == "init") return mode_init();
    if (mode == "split") return mode_split();
    if (mode == "stall") return mode_stall();
    if (mode == "reinit") return mode_reinit(backend);
    if (mode == "grad") return mode_grad();
    if (mode == "kill") return mode_kill();
    if (mode == "stop") return mode_stop();
    if (mode == "mismatch") return mode_mismatch();
    if (mode == "mismatch_paths") return mode_mismatch(3, 1000);
    if (mode == "bcastroot") return mode_bcastroot();
    if (mode == "badtoken") return mode_badtoken();
    if (mode == "silent") return mode_silent();
    if (mode == "join") return mode_join();
    if (mode == "loop") return mode_loop();
    if (mode == "selfkill") return mode_selfkill();
    if (mode == "setupkill") return mode_setupkill();
    if (mode == "cycles") return mode_cycles(argc > 2 ? std::atol(argv[2]) : 100);
  } catch (const std::exception& e) {
    std::printf("rank %d: unexpected error: %s\n", g_rank, e.what());
    return 1;
  }
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
