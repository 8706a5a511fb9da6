// The MPI backend (see mpi_group.h).
#include "distributed/mpi/mpi_group.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "distributed/mpi/mpi_library.h"
#include "distributed/reduce_kernels.h"
#include "tessera/config.h"

namespace tessera::distributed::detail {

namespace {

using mpi::Abi;
using mpi::Api;
using mpi::kThreadSerialized;
using mpi::launched_by_hydra;
using mpi::launched_by_open_mpi;
using mpi::Library;
using mpi::library;
using mpi::UserFn;

// ---------------------------------------------------------------------------------------------
// Process-wide state: one MPI_Init, one lock around every MPI call, the watchdog.

// What the call in flight is, for the watchdog's message.
struct CallDesc {
  const char* op = "";
  int64_t count = 0;
  int dtype = -1;  // Dtype::Val, or -1 for bytes
  int peer = -1;   // send/recv/broadcast: the other rank
};

std::string describe(const CallDesc& d) {
  std::string s = d.op;
  if (d.dtype >= 0) {
    s += " of " + std::to_string(d.count) + " " + dtype_name(kAllDtypes[d.dtype]);
  } else if (d.count > 0 || std::strcmp(d.op, "barrier") != 0) {
    s += " of " + std::to_string(d.count) + " bytes";
  }
  if (d.peer >= 0) {
    s += std::strcmp(d.op, "broadcast") == 0 ? " from root " : std::strcmp(d.op, "recv") == 0 ? " from rank " : " to rank ";
    s += std::to_string(d.peer);
  }
  return s;
}

class Runtime {
 public:
  std::mutex call_mu;  // held across every MPI call
  bool initialized = false;
  bool finalized = false;  // by our exit handler: later frees are skipped
  bool we_initialized = false;
  int world_rank = 0, world_size = 1;
  bool check = true;

  // Arms the watchdog for a call that starts now; disarm() when it returns.
  void arm(const CallDesc& d) {
    if (timeout_s_ <= 0) return;
    std::lock_guard<std::mutex> l(desc_mu_);
    desc_ = d;
    since_ns_.store(now_ns(), std::memory_order_release);
  }
  void disarm() {
    if (timeout_s_ <= 0) return;
    since_ns_.store(0, std::memory_order_release);
  }
  void start_watchdog(double timeout_s) {
    timeout_s_ = timeout_s;
    if (timeout_s_ <= 0) return;
    std::thread([this] { watch(); }).detach();  // the runtime is never destroyed
  }

 private:
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  void watch() {
    const auto tick = std::chrono::milliseconds(std::clamp<int64_t>(
        static_cast<int64_t>(timeout_s_ * 250), 10, 1000));
    for (;;) {
      std::this_thread::sleep_for(tick);
      const int64_t since = since_ns_.load(std::memory_order_acquire);
      if (since == 0 || (now_ns() - since) < static_cast<int64_t>(timeout_s_ * 1e9)) continue;
      CallDesc d;
      {
        std::lock_guard<std::mutex> l(desc_mu_);
        d = desc_;
      }
      if (since_ns_.load(std::memory_order_acquire) != since) continue;  // it just finished
      std::fprintf(stderr,
                   "[mpi] rank %d: %s has not finished after %g s (TESSERA_DIST_TIMEOUT): another "
                   "rank is gone, stuck, or called a different operation. MPI calls cannot be "
                   "interrupted, so this rank exits (status 1) and the MPI launcher stops the job.\n",
                   world_rank, describe(d).c_str(), timeout_s_);
      std::fflush(stderr);
      std::_Exit(1);
    }
  }
  double timeout_s_ = 0;
  std::atomic<int64_t> since_ns_{0};
  std::mutex desc_mu_;
  CallDesc desc_;
};

Runtime& runtime() {
  static Runtime* rt = new Runtime;  // never destroyed: the watchdog thread refers to it
  return *rt;
}

std::string error_text(int code, int (*error_string)(int, char*, int*)) {
  char buf[1024] = {};  // MPI_MAX_ERROR_STRING: 256 / 512
  int len = 0;
  if (error_string && error_string(code, buf, &len) == 0) return std::string(buf, std::strlen(buf));
  return "MPI error " + std::to_string(code);
}

// ---------------------------------------------------------------------------------------------
// The group.

// Wire ids for the mismatch check and the send/recv tags.
enum class Kind : int64_t { all_reduce = 1, all_gather, reduce_scatter, broadcast, all_to_all, barrier };

template <typename H>
class MpiGroup : public GroupImpl {
 public:
  MpiGroup(const Api<H>& api, H comm) : a_(api), comm_(comm) {
    call("init", [&] { return a_.Comm_rank(comm_, &rank_); });
    call("init", [&] { return a_.Comm_size(comm_, &size_); });
    create_ops();
    std::lock_guard<std::mutex> l(runtime().call_mu);
    live().insert(this);
  }
  ~MpiGroup() override {
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> l(rt.call_mu);
    live().erase(this);
    if (!rt.finalized) a_.Comm_free(&comm_);
  }
  // Before MPI_Finalize (the process lock held): every communicator, op and type we made goes
  // back to MPI, so that MPI's own clean-up is complete (groups still alive stay unusable).
  static void release_all(const Api<H>& a) {
    for (MpiGroup* g : live()) a.Comm_free(&g->comm_);
    live().clear();
    for (H& op : ops())
      if (op != H{}) a.Op_free(&op);
    if (packed_op() != H{}) a.Op_free(&packed_op());
    if (packed_type() != H{}) a.Type_free(&packed_type());
  }

  TESSERA_GROUP_ARRAY_CALLS
  int rank() override { return rank_; }
  int size() override { return size_; }
  const char* backend_name() override { return "mpi"; }

  std::shared_ptr<GroupImpl> split(int color, int key) override {
    if (color < 0) {
      throw std::invalid_argument("[mpi] split: color must be >= 0, got " + std::to_string(color));
    }
    H out{};
    CallDesc d{"split", 0, -1, -1};
    checked(d, [&] { return a_.Comm_split(comm_, color, key < 0 ? rank_ : key, &out); });
    return std::make_shared<MpiGroup<H>>(a_, out);
  }

  void all_reduce(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op) override {
    CallDesc d{reduce_op_name(op), static_cast<int64_t>(count), static_cast<int>(dtype.val()), -1};
    if (count * dtype.size() <= sizeof(Packed::payload)) {
      if (agree(Kind::all_reduce, d, static_cast<int64_t>(op), in, out)) return;  // data and check in one
    } else {
      agree(Kind::all_reduce, d, static_cast<int64_t>(op));
    }
    // Named copies: lambdas cannot capture structured bindings in clang 14.
    const auto type_op = mpi_type_op(dtype, op);
    const auto type = type_op.first, mop = type_op.second;
    const size_t esize = dtype.size();
    for (size_t done = 0; done < count;) {
      const size_t n = std::min<size_t>(count - done, size_t{1} << 30);
      const char* src = static_cast<const char*>(in) + done * esize;
      char* dst = static_cast<char*>(out) + done * esize;
      const void* send = in == out ? a_.in_place : src;
      checked(d, [&] { return a_.Allreduce(send, dst, static_cast<int>(n), type, mop, comm_); });
      done += n;
    }
  }

  void all_gather(const void* in, void* out, size_t bytes) override {
    exchange(Kind::all_gather, "all_gather", a_.Allgather, in, out, bytes);
  }

  void reduce_scatter(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op) override {
    CallDesc d{"sum_scatter", static_cast<int64_t>(count), static_cast<int>(dtype.val()), -1};
    agree(Kind::reduce_scatter, d, static_cast<int64_t>(op));
    if (count == 0) return;
    if (count > static_cast<size_t>(INT_MAX)) too_big(d, count);
    // Named copies: lambdas cannot capture structured bindings in clang 14.
    const auto type_op = mpi_type_op(dtype, op);
    const auto type = type_op.first, mop = type_op.second;
    checked(d, [&] { return a_.Reduce_scatter_block(in, out, static_cast<int>(count), type, mop, comm_); });
  }

  void send(const void* in, size_t bytes, Dtype dtype, int dst) override {
    CallDesc d{"send", static_cast<int64_t>(bytes / std::max<size_t>(dtype.size(), 1)),
               static_cast<int>(dtype.val()), dst};
    const int tag = static_cast<int>(dtype.val()) + 1;
    for_chunks(bytes, [&](size_t off, int n) {
      checked(d, [&] { return a_.Send(static_cast<const char*>(in) + off, n, a_.byte, dst, tag, comm_); });
    });
  }

  void recv(void* out, size_t bytes, Dtype dtype, int src) override {
    CallDesc d{"recv", static_cast<int64_t>(bytes / std::max<size_t>(dtype.size(), 1)),
               static_cast<int>(dtype.val()), src};
    alignas(8) char status[64];  // an MPI_Status: 24 bytes (Open MPI) or 20 (MPICH)
    for_chunks(bytes, [&](size_t off, int n) {
      // Any tag: a message of another dtype is received and reported, not left to block.
      checked(d, [&] {
        return a_.Recv(static_cast<char*>(out) + off, n, a_.byte, src, -1 /* MPI_ANY_TAG */, comm_,
                       status);
      });
      int got = 0;
      a_.Get_count(status, a_.byte, &got);
      const int tag = status_tag(status);
      if (tag != static_cast<int>(dtype.val()) + 1 || got != n) {
        std::string theirs = tag >= 1 && tag <= kNumDtypes ? dtype_name(kAllDtypes[tag - 1]) : "unknown";
        throw std::runtime_error(
            "[mpi] rank " + std::to_string(rank_) + ": " + describe(d) + " received " +
            std::to_string(off + static_cast<size_t>(got)) + " bytes of " + theirs + " where " +
            std::to_string(off + static_cast<size_t>(n)) + " bytes of " + dtype_name(dtype) +
            " were expected: rank " + std::to_string(src) + " sent an array of another size or dtype");
      }
    });
  }

  void broadcast(void* buf, size_t bytes, int root) override {
    CallDesc d{"broadcast", static_cast<int64_t>(bytes), -1, root};
    agree(Kind::broadcast, d, root);
    if (bytes == 0) return;
    for_chunks(bytes, [&](size_t off, int n) {
      checked(d, [&] { return a_.Bcast(static_cast<char*>(buf) + off, n, a_.byte, root, comm_); });
    });
  }

  void all_to_all(const void* in, void* out, size_t bytes) override {
    exchange(Kind::all_to_all, "all_to_all", a_.Alltoall, in, out, bytes);
  }

  void barrier() override {
    CallDesc d{"barrier", 0, -1, -1};
    agree(Kind::barrier, d, 0);
    checked(d, [&] { return a_.Barrier(comm_); });
  }

 private:
  // MPI_Allgather / MPI_Alltoall (the same arguments): `bytes` per rank, checked first.
  using Exchange = int (*)(const void*, int, H, void*, int, H, H);
  void exchange(Kind kind, const char* name, Exchange f, const void* in, void* out, size_t bytes) {
    CallDesc d{name, static_cast<int64_t>(bytes), -1, -1};
    agree(kind, d, 0);
    if (bytes == 0) return;
    Bytes b = as_count(bytes, d);
    checked(d, [&] { return f(in, b.count, b.type, out, b.count, b.type, comm_); });
    b.release(a_);
  }

  // Runs one MPI call under the process lock and the watchdog; a failure is an exception.
  template <typename F>
  void checked(const CallDesc& d, F&& f) {
    Runtime& rt = runtime();
    int rc;
    {
      std::lock_guard<std::mutex> l(rt.call_mu);
      if (rt.finalized) throw std::runtime_error("[mpi] " + describe(d) + " after MPI was finalized (at exit)");
      rt.arm(d);
      rc = f();
      rt.disarm();
    }
    if (rc != 0) {
      throw std::runtime_error("[mpi] rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                               ": " + describe(d) + " failed: " + error_text(rc, a_.Error_string));
    }
  }
  template <typename F>
  void call(const char* what, F&& f) {
    checked(CallDesc{what, 0, -1, -1}, std::forward<F>(f));
  }

  // Every rank must call the same collective with the same size: one MPI_Allreduce of a
  // Packed description (its max and the max of its negation) finds any difference, and for a
  // small all_reduce it carries the data too (one MPI call in all); then an all_gather of the
  // descriptions names each rank's call. Returns false when the check is off.
  bool agree(Kind kind, const CallDesc& d, int64_t extra, const void* payload = nullptr,
             void* result = nullptr) {
    if (!runtime().check) return false;
    Packed p;
    const int64_t mine[4] = {static_cast<int64_t>(kind), d.dtype, d.count, extra};
    p.h[0] = static_cast<int64_t>(kind) | (static_cast<int64_t>(d.dtype & 0xff) << 8) | (extra << 16);
    p.h[1] = d.count;
    p.h[2] = -p.h[0];
    p.h[3] = -p.h[1];
    const size_t bytes = p.payload_bytes();
    if (bytes > 0) std::memcpy(p.payload, payload, bytes);
    std::memset(p.payload + bytes, 0, sizeof p.payload - bytes);
    checked(d, [&] { return a_.Allreduce(a_.in_place, &p, 1, packed_type(), packed_op(), comm_); });
    if (p.consistent()) {
      if (bytes > 0) std::memcpy(result, p.payload, bytes);
      return true;
    }
    std::vector<int64_t> all(4 * static_cast<size_t>(size_));
    checked(d, [&] { return a_.Allgather(mine, 4, a_.i64, all.data(), 4, a_.i64, comm_); });
    std::string calls;
    for (int r = 0; r < size_; ++r) {
      const int64_t* e = &all[4 * static_cast<size_t>(r)];
      CallDesc theirs = d;
      theirs.op = kind_name(static_cast<Kind>(e[0]), e[3]);
      theirs.dtype = static_cast<int>(e[1]);
      theirs.count = e[2];
      theirs.peer = static_cast<Kind>(e[0]) == Kind::broadcast ? static_cast<int>(e[3]) : -1;
      calls += (r ? "; rank " : "rank ") + std::to_string(r) + ": " + describe(theirs);
    }
    throw std::runtime_error("[mpi] rank " + std::to_string(rank_) + ": the ranks called different "
                             "collectives (" + calls + "); every rank must call the same operation "
                             "with the same size and dtype, in the same order");
  }
  // One contiguous MPI element (never split by MPI) of 64 bytes: the description, packed into
  // two words (kind | dtype << 8 | extra << 16, count) and their negations, then up to 32 bytes
  // of a small all_reduce's data, which packed_reduce combines when both descriptions are equal.
  // Small on purpose: Open MPI's shared-memory all_reduce of 4 B takes ~0.35 us, of 64 B ~0.7,
  // of 320 B ~1.2.
  struct Packed {
    int64_t h[4];
    alignas(16) char payload[32];
    size_t payload_bytes() const {
      const int dtype = static_cast<int>((h[0] >> 8) & 0xff);
      if (static_cast<Kind>(h[0] & 0xff) != Kind::all_reduce || dtype >= kNumDtypes || h[1] < 0) return 0;
      const size_t b = static_cast<size_t>(h[1]) * kAllDtypes[dtype].size();
      return b <= sizeof payload ? b : 0;
    }
    bool consistent() const { return h[0] == -h[2] && h[1] == -h[3]; }
  };
  static void packed_reduce(void* in, void* inout, int* len, H*) {
    for (int k = 0; k < *len; ++k) {
      const Packed& a = static_cast<const Packed*>(in)[k];
      Packed& b = static_cast<Packed*>(inout)[k];
      const bool same = std::memcmp(a.h, b.h, sizeof a.h) == 0 && a.consistent();
      for (int i = 0; i < 4; ++i) b.h[i] = std::max(a.h[i], b.h[i]);
      if (same && b.payload_bytes() > 0) {
        reduce_buffers(b.payload, b.payload, a.payload, static_cast<size_t>(b.h[1]),
                       kAllDtypes[(b.h[0] >> 8) & 0xff], static_cast<ReduceOp>(b.h[0] >> 16));
      }
    }
  }
  static H& packed_type() {
    static H t{};
    return t;
  }
  static H& packed_op() {
    static H o{};
    return o;
  }
  static const char* kind_name(Kind k, int64_t extra) {
    switch (k) {
      case Kind::all_reduce: return reduce_op_name(static_cast<ReduceOp>(extra));
      case Kind::all_gather: return "all_gather";
      case Kind::reduce_scatter: return "sum_scatter";
      case Kind::broadcast: return "broadcast";
      case Kind::all_to_all: return "all_to_all";
      case Kind::barrier: return "barrier";
    }
    return "an unknown operation";
  }

  [[noreturn]] void too_big(const CallDesc& d, size_t n) const {
    throw std::invalid_argument("[mpi] rank " + std::to_string(rank_) + ": " + describe(d) + " is " +
                                std::to_string(n) + " elements per rank, more than MPI's int count "
                                "(2147483647) allows for this collective: split the array");
  }

  // `bytes` as (count, type) within MPI's int counts: bytes up to 2^31-1, else blocks of 2^k
  // bytes (a committed contiguous type, freed by release()).
  struct Bytes {
    int count;
    H type;
    bool derived = false;
    void release(const Api<H>& a) {
      if (!derived) return;
      std::lock_guard<std::mutex> l(runtime().call_mu);
      a.Type_free(&type);
    }
  };
  Bytes as_count(size_t bytes, const CallDesc& d) {
    if (bytes <= static_cast<size_t>(INT_MAX)) return {static_cast<int>(bytes), a_.byte};
    for (int k = 1; k <= 20; ++k) {
      const size_t block = size_t{1} << k;
      if (bytes % block == 0 && bytes / block <= static_cast<size_t>(INT_MAX)) {
        Bytes b{static_cast<int>(bytes / block), a_.byte, true};
        H t{};
        checked(d, [&] { return a_.Type_contiguous(static_cast<int>(block), a_.byte, &t); });
        checked(d, [&] { return a_.Type_commit(&t); });
        b.type = t;
        return b;
      }
    }
    too_big(d, bytes);
  }
  template <typename F>
  static void for_chunks(size_t bytes, F&& f) {
    constexpr size_t kChunk = size_t{1} << 30;
    if (bytes == 0) f(0, 0);
    for (size_t off = 0; off < bytes; off += kChunk) f(off, static_cast<int>(std::min(kChunk, bytes - off)));
  }
  int status_tag(const char* status) const {
    int tag;
    std::memcpy(&tag, status + a_.status_tag_offset, sizeof tag);
    return tag;
  }

  // MPI's own types and ops where they give the ring's results; user ops where they do not:
  // float16 / bfloat16 (no MPI type), float max / min (NaN propagates, as in the ring) and
  // complex max / min (lexicographic).
  std::pair<H, H> mpi_type_op(Dtype dt, ReduceOp op) {
    const H builtin = op == ReduceOp::sum ? a_.sum : op == ReduceOp::max ? a_.max : a_.min;
    switch (dt.val()) {
      case Dtype::Val::bool_: return {a_.c_bool, op == ReduceOp::min ? a_.land : a_.lor};
      case Dtype::Val::uint8: return {a_.u8, builtin};
      case Dtype::Val::uint16: return {a_.u16, builtin};
      case Dtype::Val::uint32: return {a_.u32, builtin};
      case Dtype::Val::uint64: return {a_.u64, builtin};
      case Dtype::Val::int8: return {a_.i8, builtin};
      case Dtype::Val::int16: return {a_.i16, builtin};
      case Dtype::Val::int32: return {a_.i32, builtin};
      case Dtype::Val::int64: return {a_.i64, builtin};
      case Dtype::Val::float32: return {a_.f32, op == ReduceOp::sum ? builtin : user_op(dt, op)};
      case Dtype::Val::float64: return {a_.f64, op == ReduceOp::sum ? builtin : user_op(dt, op)};
      case Dtype::Val::complex64: return {a_.c64, op == ReduceOp::sum ? builtin : user_op(dt, op)};
      case Dtype::Val::float16:
      case Dtype::Val::bfloat16: return {a_.u16, user_op(dt, op)};
    }
    throw std::logic_error("[mpi] unknown dtype");
  }
  H user_op(Dtype dt, ReduceOp op) const { return ops()[static_cast<int>(dt.val()) * 3 + static_cast<int>(op)]; }

  // One user op per (dtype, op) that needs one, created once per process.
  template <int D, int O>
  static void user_reduce(void* in, void* inout, int* len, H*) {
    reduce_buffers(inout, inout, in, static_cast<size_t>(*len), kAllDtypes[D], static_cast<ReduceOp>(O));
  }
  static std::vector<H>& ops() {
    static auto* v = new std::vector<H>(kNumDtypes * 3);
    return *v;
  }
  template <int D>
  void create_for_dtype() {
    auto make = [&](int o, UserFn<H> fn) {
      H& slot = ops()[D * 3 + o];
      call("init", [&] { return a_.Op_create(fn, 1, &slot); });
    };
    make(0, &user_reduce<D, 0>);
    make(1, &user_reduce<D, 1>);
    make(2, &user_reduce<D, 2>);
  }
  void create_ops() {
    static std::once_flag once;
    std::call_once(once, [&] {
      create_for_dtype<static_cast<int>(Dtype::Val::float16)>();
      create_for_dtype<static_cast<int>(Dtype::Val::bfloat16)>();
      create_for_dtype<static_cast<int>(Dtype::Val::float32)>();
      create_for_dtype<static_cast<int>(Dtype::Val::float64)>();
      create_for_dtype<static_cast<int>(Dtype::Val::complex64)>();
      call("init", [&] { return a_.Type_contiguous(static_cast<int>(sizeof(Packed)), a_.byte, &packed_type()); });
      call("init", [&] { return a_.Type_commit(&packed_type()); });
      call("init", [&] { return a_.Op_create(&packed_reduce, 1, &packed_op()); });
    });
  }

  // Both never destroyed: the exit handler and the cache's groups may outlive static objects.
  static std::set<MpiGroup*>& live() {
    static auto* groups = new std::set<MpiGroup*>;  // call_mu
    return *groups;
  }

  const Api<H>& a_;
  H comm_;
  int rank_ = 0, size_ = 1;
};

void finalize_at_exit() {
  Runtime& rt = runtime();
  std::unique_lock<std::mutex> l(rt.call_mu, std::try_to_lock);
  if (!l.owns_lock()) return;  // a call is still in flight on another thread: MPI cannot finish
  Library& lib = library();
  rt.finalized = true;
  if (lib.abi == Abi::open_mpi) {
    MpiGroup<void*>::release_all(lib.ompi);
    lib.ompi.Finalize();
  } else {
    MpiGroup<int>::release_all(lib.mpich);
    lib.mpich.Finalize();
  }
}

template <typename H>
std::shared_ptr<GroupImpl> world(const Library& lib, const Api<H>& a) {
  Runtime& rt = runtime();
  {
    std::lock_guard<std::mutex> l(rt.call_mu);
    if (rt.finalized) throw std::runtime_error("[mpi] MPI was finalized; it cannot be initialized again in this process");
    if (!rt.initialized) {
      int already = 0;
      a.Initialized(&already);
      int provided = 0;
      if (already) {
        a.Query_thread(&provided);
      } else {
        const int rc = a.Init_thread(nullptr, nullptr, kThreadSerialized, &provided);
        if (rc != 0) {
          throw std::runtime_error("[mpi] MPI_Init_thread failed in " + lib.name + " (" + lib.version +
                                   "): " + error_text(rc, a.Error_string));
        }
        rt.we_initialized = true;
        std::atexit(finalize_at_exit);
      }
      if (provided < kThreadSerialized) {
        std::fprintf(stderr, "[mpi] warning: MPI was initialized with thread level %d, below "
                     "MPI_THREAD_SERIALIZED: Tessera calls MPI from its stream worker thread\n", provided);
      }
      rt.initialized = true;
      rt.check = config::get_bool("TESSERA_MPI_CHECK");
      a.Comm_rank(a.comm_world, &rt.world_rank);
      a.Comm_size(a.comm_world, &rt.world_size);
      rt.start_watchdog(static_cast<double>(config::get_int("TESSERA_DIST_TIMEOUT")));
    }
  }
  if (rt.world_size <= 1) return nullptr;
  // A communicator of our own: a program's own MPI traffic on MPI_COMM_WORLD never meets ours.
  H comm{};
  {
    std::lock_guard<std::mutex> l(rt.call_mu);
    int rc = a.Comm_dup(a.comm_world, &comm);
    if (rc == 0) rc = a.Comm_set_errhandler(comm, a.errors_return);
    if (rc != 0) throw std::runtime_error("[mpi] MPI_Comm_dup failed: " + error_text(rc, a.Error_string));
  }
  return std::make_shared<MpiGroup<H>>(a, comm);
}

}  // namespace

bool mpi_available(std::string* why) {
  const Library& lib = library();
  if (why) *why = lib.error;
  return lib.handle != nullptr;
}

bool started_by_mpi_launcher() {
  if (launched_by_open_mpi()) return config::get_int("OMPI_COMM_WORLD_SIZE") > 1;
  return launched_by_hydra() && config::get_int("PMI_SIZE") > 1;
}

std::shared_ptr<GroupImpl> init_mpi(bool strict) {
  if (!started_by_mpi_launcher()) {
    if (!strict) return nullptr;
    throw std::runtime_error("[mpi] The world has a single process: this process was not started "
                             "by mpirun (no OMPI_COMM_WORLD_SIZE or PMI_SIZE above 1). Launch with "
                             "mpirun, or with tessera launch --backend mpi.");
  }
  Library& lib = library();
  if (!lib.handle) {
    throw std::runtime_error("[mpi] this process was started by an MPI launcher, but " + lib.error +
                             "; or set TESSERA_COORDINATOR=host:port on every rank to run on the ring");
  }
  std::shared_ptr<GroupImpl> g = lib.abi == Abi::open_mpi ? world(lib, lib.ompi) : world(lib, lib.mpich);
  if (!g && strict) {
    throw std::runtime_error("[mpi] The world has a single process. Launch with mpirun to initialize "
                             "the mpi backend.");
  }
  return g;
}

}  // namespace tessera::distributed::detail
