// The ring backend on raw buffers: ranks are threads in this process talking over 127.0.0.1
// (TCP, and shared memory when enabled). Every result is compared with the reduction computed
// here from every rank's known input, and across ranks bitwise.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "distributed/reduce_kernels.h"
#include "distributed/ring/handshake.h"
#include "distributed/ring/ring_group.h"
#include "distributed/shm/segments.h"
#include "distributed/shm/shm_transport.h"
#include "tessera/config.h"
#include "test_util.h"

using namespace tessera;
using namespace tessera::distributed::detail;

namespace {

// A hostfile of n loopback ranks with `conns` free ports each.
Hostfile free_hostfile(int n, int conns = 1) {
  const std::vector<int> ports = test_util::free_loopback_ports(n * conns);
  Hostfile hf;
  for (int r = 0; r < n; ++r) {
    std::vector<HostAddress> addrs;
    for (int c = 0; c < conns; ++c) {
      addrs.push_back(HostAddress{"127.0.0.1", ports[static_cast<size_t>(r * conns + c)], false});
    }
    hf.ranks.push_back(addrs);
  }
  return hf;
}

RingOptions options(bool shm, double timeout_s = 20) {
  RingOptions o;
  o.shm = shm;
  o.timeout_s = timeout_s;
  o.connect_timeout_s = 10;
  return o;
}

// Runs f(group, rank) on n threads, one RingGroup each; fails with every rank's error, in the
// order they happened (the first is the cause, the others usually its consequences).
void run_ranks(int n, const RingOptions& opt, const std::function<void(RingGroup&, int)>& f,
               int conns = 1) {
  Hostfile hf = free_hostfile(n, conns);
  std::vector<std::thread> ts;
  std::mutex mu;
  std::string errors;
  for (int r = 0; r < n; ++r) {
    ts.emplace_back([&, r] {
      try {
        RingGroup g(r, hf, opt);
        f(g, r);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lk(mu);
        errors += "\nrank " + std::to_string(r) + ": " + e.what();
      }
    });
  }
  for (auto& t : ts) t.join();
  if (!errors.empty()) FAIL() << "ranks failed:" << errors;
}

// std::vector without the vector<bool> specialisation (bool buffers need data()).
template <typename T>
class Buf {
 public:
  Buf() = default;
  explicit Buf(size_t n) : n_(n), p_(std::make_unique<T[]>(n)) {}
  Buf(size_t n, T v) : Buf(n) { std::fill(begin(), end(), v); }
  template <typename It>
  Buf(It b, It e) : Buf(static_cast<size_t>(e - b)) { std::copy(b, e, begin()); }
  Buf(const Buf& o) : Buf(o.begin(), o.end()) {}
  Buf& operator=(const Buf& o) { return *this = Buf(o); }
  Buf(Buf&&) noexcept = default;
  Buf& operator=(Buf&&) noexcept = default;
  T* data() { return p_.get(); }
  const T* data() const { return p_.get(); }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }
  T* begin() { return p_.get(); }
  T* end() { return p_.get() + n_; }
  const T* begin() const { return p_.get(); }
  const T* end() const { return p_.get() + n_; }

 private:
  size_t n_ = 0;
  std::unique_ptr<T[]> p_;
};

template <typename T>
T value_for(int rank, size_t i) {
  long v = static_cast<long>((i * 7 + static_cast<size_t>(rank) * 3 + i / 5) % 11) - 4;
  if constexpr (std::is_same_v<T, bool>) {
    return (i + static_cast<size_t>(rank)) % 3 == 0;
  } else if constexpr (std::is_same_v<T, complex64_t>) {
    return complex64_t(static_cast<float>(v), static_cast<float>((v * 3) % 5));
  } else if constexpr (std::is_unsigned_v<T>) {
    return static_cast<T>(v + 4);
  } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
Buf<T> input_for(int rank, size_t n, size_t salt = 0) {
  Buf<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = value_for<T>(rank, i + salt);
  return v;
}

// The reference's own element arithmetic (written apart from the library's functors): integer
// sums wrap, bool sum/max is "or" and min "and", halves compute in float, complex max/min
// compare (real, imag).
template <typename T>
T reference_one(T a, T b, ReduceOp op) {
  if constexpr (std::is_same_v<T, bool>) {
    return op == ReduceOp::min ? (a && b) : (a || b);
  } else if constexpr (std::is_same_v<T, complex64_t>) {
    if (op == ReduceOp::sum) return a + b;
    bool a_gt = a.real() > b.real() || (a.real() == b.real() && a.imag() > b.imag());
    return (op == ReduceOp::max) == a_gt ? a : b;
  } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
    float x = a, y = b;
    if (op == ReduceOp::sum) return T(x + y);
    if (x != x) return a;  // NaN propagates
    if (y != y) return b;
    return op == ReduceOp::max ? (x >= y ? a : b) : (x <= y ? a : b);
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if (op == ReduceOp::sum) return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    return op == ReduceOp::max ? (a > b ? a : b) : (a < b ? a : b);
  } else {
    if (op == ReduceOp::sum) return a + b;
    if (a != a) return a;
    if (b != b) return b;
    return op == ReduceOp::max ? (a >= b ? a : b) : (a <= b ? a : b);
  }
}

template <typename T>
Buf<T> reference_reduce(int world, size_t n, ReduceOp op, size_t salt = 0) {
  Buf<T> acc = input_for<T>(0, n, salt);
  for (int r = 1; r < world; ++r) {
    auto x = input_for<T>(r, n, salt);
    for (size_t i = 0; i < n; ++i) acc[i] = reference_one<T>(acc[i], x[i], op);
  }
  return acc;
}

template <typename A, typename B>
bool same_bytes(const A& a, const B& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(*a.data())) == 0);
}

const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::max, ReduceOp::min};
const size_t kLengths[] = {0, 1, 7, 1023};
constexpr size_t kBig = (1 << 20) + 3;

// All 14 dtypes x 3 ops x small lengths, plus big messages for a few dtypes, in place and not.
void check_all_reduce(RingGroup& g, int rank) {
  const int world = g.size();
  for (Dtype dt : kAllDtypes) {
    tessera::detail::dispatch_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      for (ReduceOp op : kOps) {
        for (size_t n : kLengths) {
          auto in = input_for<T>(rank, n);
          Buf<T> out(n);
          g.all_reduce(in.data(), out.data(), n, dt, op);
          auto want = reference_reduce<T>(world, n, op);
          ASSERT_TRUE(same_bytes(out, want))
              << dtype_name(dt) << " " << reduce_op_name(op) << " n=" << n << " world=" << world;
          g.all_reduce(in.data(), in.data(), n, dt, op);  // in place
          ASSERT_TRUE(same_bytes(in, want)) << "in place " << dtype_name(dt) << " n=" << n;
        }
      }
    });
  }
  for (Dtype dt : {float32, int64, float16, bfloat16, complex64, uint8}) {
    tessera::detail::dispatch_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      ReduceOp op = dt == int64 ? ReduceOp::max : ReduceOp::sum;
      auto in = input_for<T>(rank, kBig, 11);
      Buf<T> out(kBig);
      g.all_reduce(in.data(), out.data(), kBig, dt, op);
      ASSERT_TRUE(same_bytes(out, reference_reduce<T>(world, kBig, op, 11)))
          << "big " << dtype_name(dt) << " world=" << world;
    });
  }
}

// all_mean against the reference sum divided here (float16 / bfloat16 in float, the divisor
// rounded to the dtype first, as the eager `x / n`), every path: tiny, one unit, many units.
void check_all_mean(RingGroup& g, int rank) {
  const int world = g.size();
  for (Dtype dt : {float32, float16, bfloat16, float64}) {
    tessera::detail::dispatch_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16_t> ||
                    std::is_same_v<T, bfloat16_t>) {
        using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
        const C d = static_cast<C>(T(static_cast<float>(world)));
        for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(1023), kBig}) {
          auto want = reference_reduce<T>(world, n, ReduceOp::sum, 17);
          for (auto& v : want) v = T(static_cast<C>(v) / d);
          auto in = input_for<T>(rank, n, 17);
          Buf<T> out(n);
          g.all_mean(in.data(), out.data(), n, dt);
          ASSERT_TRUE(same_bytes(out, want))
              << "all_mean " << dtype_name(dt) << " n=" << n << " world=" << world;
          g.all_mean(in.data(), in.data(), n, dt);  // in place
          ASSERT_TRUE(same_bytes(in, want)) << "in place all_mean " << dtype_name(dt);
        }
      }
    });
  }
}

// divide_buffer (all_mean's division: a multiply by the reciprocal for powers of two) against
// the division operator: every float16 / bfloat16 bit pattern, and for float32 / float64 random
// bit patterns (subnormals, huge values, inf, NaN among them) plus the edges, by several divisors.
template <typename T, typename Bits>
void check_divide_bits(Dtype dt, const std::vector<Bits>& patterns) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  for (int divisor : {2, 3, 4, 5, 6, 7, 8, 64, 1024, 1000, 4096}) {
    Buf<T> x(patterns.size());
    std::memcpy(static_cast<void*>(x.data()), patterns.data(), patterns.size() * sizeof(T));
    Buf<T> want(x);
    const C d = static_cast<C>(T(static_cast<float>(divisor)));
    for (auto& v : want) v = T(static_cast<C>(v) / d);
    divide_buffer(x.data(), x.size(), dt, divisor);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(0, std::memcmp(&x[i], &want[i], sizeof(T)))
          << dtype_name(dt) << " bits " << patterns[i] << " / " << divisor;
    }
  }
}

TEST(ReduceKernels, DivideBufferHasTheBitsOfDivision) {
  std::vector<uint16_t> all16(65536);
  for (size_t i = 0; i < all16.size(); ++i) all16[i] = static_cast<uint16_t>(i);
  check_divide_bits<float16_t>(float16, all16);
  check_divide_bits<bfloat16_t>(bfloat16, all16);
  std::mt19937_64 rng(7);
  std::vector<uint32_t> b32 = {0, 1, 2, 3, 0x007fffff, 0x00800000, 0x00800001, 0x7f7fffff,
                               0x7f800000, 0x7fc00000, 0xff800000, 0x80000001, 0x3f800000};
  std::vector<uint64_t> b64 = {0, 1, 2, 3, 0x000fffffffffffff, 0x0010000000000000,
                               0x7fefffffffffffff, 0x7ff0000000000000, 0x7ff8000000000000,
                               0x8000000000000001, 0x3ff0000000000000};
  for (int i = 0; i < 200000; ++i) {
    b32.push_back(static_cast<uint32_t>(rng()));
    b64.push_back(rng());
    // Small exponents too: results near and below the smallest normal.
    b32.push_back(static_cast<uint32_t>(rng()) & 0x81ffffff);
    b64.push_back(rng() & 0x803fffffffffffff);
  }
  check_divide_bits<float>(float32, b32);
  check_divide_bits<double>(float64, b64);
}

void check_gather_scatter(RingGroup& g, int rank) {
  const int world = g.size();
  const size_t W = static_cast<size_t>(world);
  for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(1023), kBig}) {
    auto in = input_for<int32_t>(rank, n, 5);
    std::vector<int32_t> out(n * W, -99);
    g.all_gather(in.data(), out.data(), n * sizeof(int32_t));
    for (int r = 0; r < world; ++r) {
      auto want = input_for<int32_t>(r, n, 5);
      ASSERT_EQ(0, n == 0 ? 0 : std::memcmp(out.data() + r * n, want.data(), n * 4))
          << "all_gather n=" << n << " block " << r;
    }
  }
  for (Dtype dt : {float32, float16, int8, bool_, complex64, float64}) {
    tessera::detail::dispatch_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(1023), size_t(300007)}) {
        for (ReduceOp op : kOps) {
          if (n == 300007 && op != ReduceOp::sum) continue;
          auto in = input_for<T>(rank, n * W, 3);
          Buf<T> out(n);
          g.reduce_scatter(in.data(), out.data(), n, dt, op);
          auto full = reference_reduce<T>(world, n * W, op, 3);
          Buf<T> want(full.begin() + static_cast<long>(rank * n),
                              full.begin() + static_cast<long>((rank + 1) * n));
          ASSERT_TRUE(same_bytes(out, want)) << "reduce_scatter " << dtype_name(dt) << " n=" << n
                                             << " world=" << world;
        }
      }
    });
  }
}

void check_p2p_and_friends(RingGroup& g, int rank) {
  const int world = g.size();
  const size_t W = static_cast<size_t>(world);
  for (int root = 0; root < world; ++root) {
    for (size_t n : {size_t(0), size_t(5), kBig}) {
      Buf<uint16_t> buf = rank == root ? input_for<uint16_t>(root, n) : Buf<uint16_t>(n);
      g.broadcast(buf.data(), n * 2, root);
      ASSERT_TRUE(same_bytes(buf, input_for<uint16_t>(root, n))) << "broadcast root " << root;
    }
  }
  for (size_t n : {size_t(0), size_t(3), size_t(100003)}) {
    // Block j of rank r's input is input_for(r, n, salt = 1000 * j).
    std::vector<int32_t> in(n * W), out(n * W, -1);
    for (size_t j = 0; j < W; ++j) {
      auto b = input_for<int32_t>(rank, n, 1000 * j);
      std::copy(b.begin(), b.end(), in.begin() + static_cast<long>(j * n));
    }
    g.all_to_all(in.data(), out.data(), n * 4);
    for (int r = 0; r < world; ++r) {
      auto want = input_for<int32_t>(r, n, 1000 * static_cast<size_t>(rank));
      ASSERT_EQ(0, n == 0 ? 0 : std::memcmp(out.data() + r * n, want.data(), n * 4))
          << "all_to_all from " << r;
    }
  }
  // Every ordered pair, including non-neighbours (direct connections), in a fixed order.
  for (int a = 0; a < world; ++a) {
    for (int b = 0; b < world; ++b) {
      if (a == b) continue;
      size_t n = (a * 31 + b * 7) % 3 == 0 ? kBig : 9;
      if (rank == a) {
        auto v = input_for<float>(a, n, static_cast<size_t>(b));
        g.send(v.data(), n * 4, float32, b);
      } else if (rank == b) {
        std::vector<float> v(n);
        g.recv(v.data(), n * 4, float32, a);
        ASSERT_TRUE(same_bytes(v, input_for<float>(a, n, static_cast<size_t>(b))))
            << "send " << a << " -> " << b;
      }
    }
  }
  g.barrier();
}

class RingWorld : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(RingWorld, AllReduceEveryDtypeOpAndLength) {
  auto [world, shm] = GetParam();
  run_ranks(world, options(shm), [&](RingGroup& g, int r) {
    EXPECT_EQ(g.shm_active(), shm);
    check_all_reduce(g, r);
  });
}

TEST_P(RingWorld, AllMeanIsTheSumDividedOnEveryPath) {
  auto [world, shm] = GetParam();
  run_ranks(world, options(shm), check_all_mean);
}

TEST_P(RingWorld, AllGatherAndReduceScatter) {
  auto [world, shm] = GetParam();
  run_ranks(world, options(shm), check_gather_scatter);
}

TEST_P(RingWorld, BroadcastAllToAllSendRecvBarrier) {
  auto [world, shm] = GetParam();
  run_ranks(world, options(shm), check_p2p_and_friends);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, RingWorld,
                         ::testing::Combine(::testing::Values(2, 3, 4, 5), ::testing::Bool()),
                         [](const auto& info) {
                           return "N" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "Shm" : "Tcp");
                         });

TEST(Ring, SeveralConnectionsPerNeighbourStripeLargeMessages) {
  run_ranks(3, options(false), [](RingGroup& g, int rank) {
    EXPECT_EQ(g.connections(), 2);
    auto in = input_for<float>(rank, kBig);
    std::vector<float> out(kBig);
    g.all_reduce(in.data(), out.data(), kBig, float32, ReduceOp::sum);
    ASSERT_TRUE(same_bytes(out, reference_reduce<float>(3, kBig, ReduceOp::sum)));
    check_p2p_and_friends(g, rank);
  }, 2);
}

// split(color, key) as MPI_Comm_split: the sub-group ring runs over new connections.
class RingSplit : public ::testing::TestWithParam<bool> {};

std::vector<int32_t> gather_ints(GroupImpl& g, int32_t v) {
  std::vector<int32_t> all(static_cast<size_t>(g.size()), -1);
  g.all_gather(&v, all.data(), sizeof(v));
  return all;
}

RingOptions split_options(bool shm) {
  RingOptions o = options(shm);
  o.token = "split-job-token";  // the sub-groups' connections authenticate with it too
  return o;
}

TEST_P(RingSplit, ByParityGivesTwoGroupsThatSumOnlyTheirMembers) {
  const bool shm = GetParam();
  run_ranks(4, split_options(shm), [&](RingGroup& g, int rank) {
    auto sub = g.split(rank % 2, -1);
    ASSERT_EQ(sub->size(), 2);
    EXPECT_EQ(sub->rank(), rank / 2);
    EXPECT_STREQ(sub->backend_name(), "ring");
    auto* ring = dynamic_cast<RingGroup*>(sub.get());
    ASSERT_NE(ring, nullptr);
    EXPECT_EQ(ring->shm_active(), shm);
    // Members of the even group are parent ranks 0, 2; of the odd group 1, 3.
    EXPECT_EQ(gather_ints(*sub, rank), (std::vector<int32_t>{rank % 2, rank % 2 + 2}));
    float x = static_cast<float>(rank + 1), y = 0;
    sub->all_reduce(&x, &y, 1, float32, ReduceOp::sum);
    EXPECT_EQ(y, rank % 2 == 0 ? 1.0f + 3.0f : 2.0f + 4.0f);
    // A large message with a reference computed from the members' known inputs.
    const int other = rank % 2 == 0 ? (rank == 0 ? 2 : 0) : (rank == 1 ? 3 : 1);
    auto in = input_for<float>(rank, kBig, 1);
    std::vector<float> out(kBig);
    sub->all_reduce(in.data(), out.data(), kBig, float32, ReduceOp::sum);
    auto theirs = input_for<float>(other, kBig, 1);
    for (size_t i = 0; i < kBig; i += 997) ASSERT_EQ(out[i], in[i] + theirs[i]) << i;
    // Point to point inside the sub-group, and the parent still works afterwards.
    if (sub->rank() == 0) {
      int32_t v = 100 + rank;
      sub->send(&v, 4, int32, 1);
    } else {
      int32_t v = 0;
      sub->recv(&v, 4, int32, 0);
      EXPECT_EQ(v, 100 + (rank - 2));
    }
    int32_t one = 1, total = 0;
    g.all_reduce(&one, &total, 1, int32, ReduceOp::sum);
    EXPECT_EQ(total, 4);
  });
}

TEST_P(RingSplit, KeyOrdersTheNewRanks) {
  const bool shm = GetParam();
  run_ranks(3, split_options(shm), [&](RingGroup& g, int rank) {
    auto sub = g.split(7, 10 - rank);  // descending parent rank
    ASSERT_EQ(sub->size(), 3);
    EXPECT_EQ(sub->rank(), 2 - rank);
    EXPECT_EQ(gather_ints(*sub, rank), (std::vector<int32_t>{2, 1, 0}));
    // Equal keys keep the parent order.
    auto same = g.split(0, 5);
    EXPECT_EQ(same->rank(), rank);
  });
}

TEST_P(RingSplit, SplitOfASplitAndSingletons) {
  const bool shm = GetParam();
  run_ranks(4, split_options(shm), [&](RingGroup& g, int rank) {
    auto rev = g.split(0, 100 - rank);  // ranks 3,2,1,0
    ASSERT_EQ(rev->rank(), 3 - rank);
    auto pair = rev->split(rev->rank() / 2, -1);  // {3,2} and {1,0} by parent rank
    ASSERT_EQ(pair->size(), 2);
    EXPECT_EQ(pair->rank(), rev->rank() % 2);
    int64_t x = int64_t(1) << (4 * rank), y = 0;
    pair->all_reduce(&x, &y, 1, int64, ReduceOp::sum);
    const int mate = rank ^ 1;
    EXPECT_EQ(y, x + (int64_t(1) << (4 * mate)));
    auto alone = pair->split(pair->rank(), -1);  // groups of one
    EXPECT_EQ(alone->size(), 1);
    EXPECT_EQ(alone->rank(), 0);
    int64_t z = 0;
    alone->all_reduce(&x, &z, 1, int64, ReduceOp::sum);
    EXPECT_EQ(z, x);
  });
}

TEST(RingSplitTcp, SeveralConnectionsPerRankCarryOver) {
  run_ranks(4, split_options(false), [](RingGroup& g, int rank) {
    auto sub = g.split(rank / 2, -1);
    auto* ring = dynamic_cast<RingGroup*>(sub.get());
    ASSERT_NE(ring, nullptr);
    EXPECT_EQ(ring->connections(), 2);
    auto in = input_for<float>(rank, kBig);
    std::vector<float> out(kBig);
    sub->all_reduce(in.data(), out.data(), kBig, float32, ReduceOp::sum);
    auto theirs = input_for<float>(rank ^ 1, kBig);
    for (size_t i = 0; i < kBig; i += 991) ASSERT_EQ(out[i], in[i] + theirs[i]) << i;
  }, 2);
}

INSTANTIATE_TEST_SUITE_P(Transports, RingSplit, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Shm" : "Tcp"; });

TEST(Ring, SingleRankGroupCopies) {
  Hostfile hf = free_hostfile(1);
  RingGroup g(0, hf, options(false));
  int32_t in[3] = {1, 2, 3}, out[3] = {};
  g.all_reduce(in, out, 3, int32, ReduceOp::sum);
  EXPECT_EQ(out[2], 3);
  g.barrier();
}

TEST(Ring, RankOutOfRangeIsInvalidArgument) {
  Hostfile hf = free_hostfile(2);
  try {
    RingGroup g(2, hf, options(false));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 is out of range for a hostfile of 2"),
              std::string::npos) << e.what();
  }
}

TEST(Ring, ConfigSuppliesTimeoutsTokenAndShm) {
  config::set_override("TESSERA_DIST_TIMEOUT", "7");
  config::set_override("TESSERA_JOB_TOKEN", "abc");
  config::set_override("TESSERA_RING_SHM", "0");
  RingOptions o = RingOptions::from_config();
  EXPECT_EQ(o.timeout_s, 7);
  EXPECT_EQ(o.token, "abc");
  EXPECT_FALSE(o.shm);
  for (const char* k : {"TESSERA_DIST_TIMEOUT", "TESSERA_JOB_TOKEN", "TESSERA_RING_SHM"}) {
    config::set_override(k, std::nullopt);
  }
}

// Runs `call` on ranks 0 and 1 of a 2-rank group; each rank's error message ("" if none).
std::vector<std::string> errors_of(bool shm, const std::function<void(RingGroup&, int)>& call) {
  std::vector<std::string> errors(2);
  run_ranks(2, options(shm, 5), [&](RingGroup& g, int rank) {
    try {
      call(g, rank);
    } catch (const std::runtime_error& e) {
      errors[static_cast<size_t>(rank)] = e.what();
    }
  });
  return errors;
}

// Both ranks fail with a mismatch whose message names both ranks' calls.
void expect_mismatch_naming(const std::vector<std::string>& errors, const std::string& call0,
                            const std::string& call1) {
  for (int r = 0; r < 2; ++r) {
    const std::string& e = errors[static_cast<size_t>(r)];
    EXPECT_NE(e.find("mismatched operation"), std::string::npos) << "rank " << r << ": " << e;
    EXPECT_NE(e.find(call0), std::string::npos) << e;
    EXPECT_NE(e.find(call1), std::string::npos) << e;
  }
}

// Ranks 0 and 1 call all_sum with different sizes: both fail, naming both sizes.
void check_size_mismatch(bool shm) {
  auto errors = errors_of(shm, [](RingGroup& g, int rank) {
    size_t n = rank == 0 ? 7 : 8;
    std::vector<float> in(n, 1.0f), out(n);
    g.all_reduce(in.data(), out.data(), n, float32, ReduceOp::sum);
  });
  expect_mismatch_naming(errors, "all_sum of 7 float32 elements (28 B)",
                         "all_sum of 8 float32 elements (32 B)");
}

// all_mean on one rank and all_sum on the other is a mismatch, not a silently unscaled sum.
void check_mean_sum_mismatch(bool shm) {
  auto errors = errors_of(shm, [](RingGroup& g, int rank) {
    std::vector<float> in(7, 1.0f), out(7);
    if (rank == 0) {
      g.all_mean(in.data(), out.data(), 7, float32);
    } else {
      g.all_reduce(in.data(), out.data(), 7, float32, ReduceOp::sum);
    }
  });
  expect_mismatch_naming(errors, "all_mean of 7 float32", "all_sum of 7 float32");
}

TEST(RingFaults, AllMeanAgainstAllSumFailsTcp) { check_mean_sum_mismatch(false); }
TEST(RingFaults, AllMeanAgainstAllSumFailsShm) { check_mean_sum_mismatch(true); }

TEST(RingFaults, DifferentSizesFailOnBothRanksTcp) { check_size_mismatch(false); }
TEST(RingFaults, DifferentSizesFailOnBothRanksShm) { check_size_mismatch(true); }

// Ranks naming different roots for one broadcast both fail, naming both roots.
void check_root_mismatch(bool shm) {
  auto errors = errors_of(shm, [](RingGroup& g, int rank) {
    std::vector<float> buf(6, static_cast<float>(rank));
    g.broadcast(buf.data(), buf.size() * sizeof(float), rank);
  });
  expect_mismatch_naming(errors, "broadcast of 24 B from root 0", "broadcast of 24 B from root 1");
}

TEST(RingFaults, BroadcastWithDifferentRootsFailsTcp) { check_root_mismatch(false); }
TEST(RingFaults, BroadcastWithDifferentRootsFailsShm) { check_root_mismatch(true); }

TEST(RingFaults, DifferentOperationsAreReported) {
  auto errors = errors_of(false, [](RingGroup& g, int rank) {
    std::vector<float> in(4, 1.0f), out(8);
    if (rank == 0) {
      g.all_reduce(in.data(), out.data(), 4, float32, ReduceOp::max);
    } else {
      g.all_gather(in.data(), out.data(), 16);
    }
  });
  EXPECT_NE(errors[0].find("all_max of 4 float32"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("all_gather of 16 B"), std::string::npos) << errors[0];
}

// Rank 2 leaves (closes its sockets) while the others are inside an all_sum (or an all_gather
// of blocks large enough for the one-copy path): they must raise within 2 s, naming the
// operation; later calls fail at once.
void check_peer_exit(bool shm, bool gather = false) {
  config::set_override("TESSERA_DIST_TIMEOUT", "30");
  RingOptions opt = RingOptions::from_config();
  config::set_override("TESSERA_DIST_TIMEOUT", std::nullopt);
  opt.shm = shm;
  opt.connect_timeout_s = 10;
  std::vector<std::string> errors(3);
  std::vector<double> seconds(3, 0);
  run_ranks(3, opt, [&](RingGroup& g, int rank) {
    std::vector<float> in(kBig, 1.0f), out(kBig * 3);
    auto once = [&] {
      if (gather) {
        g.all_gather(in.data(), out.data(), kBig * sizeof(float));
      } else {
        g.all_reduce(in.data(), out.data(), kBig, float32, ReduceOp::sum);
      }
    };
    once();  // all healthy
    if (rank == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      g.abort("test: rank 2 leaves");  // closes its connections, as an exiting process would
      return;
    }
    auto t0 = std::chrono::steady_clock::now();
    try {
      for (int i = 0; i < 100; ++i) once();
    } catch (const std::runtime_error& e) {
      errors[static_cast<size_t>(rank)] = e.what();
    }
    seconds[static_cast<size_t>(rank)] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_THROW(g.barrier(), std::runtime_error);
  });
  for (int r = 0; r < 2; ++r) {
    const std::string& e = errors[static_cast<size_t>(r)];
    EXPECT_NE(e.find(gather ? "all_gather" : "all_sum"), std::string::npos)
        << "rank " << r << ": " << e;
    EXPECT_NE(e.find("[ring] rank " + std::to_string(r)), std::string::npos) << e;
    EXPECT_LT(seconds[static_cast<size_t>(r)], 2.3) << e;
  }
}

TEST(RingFaults, PeerClosingMidOperationRaisesQuicklyTcp) { check_peer_exit(false); }
TEST(RingFaults, PeerClosingMidOperationRaisesQuicklyShm) { check_peer_exit(true); }
TEST(RingFaults, PeerClosingMidOneCopyAllGatherRaisesQuickly) { check_peer_exit(true, true); }

// Large all_gathers over shared memory: the one-copy path (peers' memory read directly) and the
// copy through the segment give the same bytes, in place and not, around the size where the
// one-copy path starts and across enough units to reuse every slot.
TEST(RingShm, AllGatherOneCopyAndSegmentCopyAgree) {
  auto check = [](int N, bool single_copy) {
    RingOptions opt = options(true);
    opt.shm_single_copy = single_copy;
    const size_t from = N == 2 ? kShmSingleCopyPairBytes : kShmSingleCopyBytes;
    const size_t ranks = static_cast<size_t>(N);
    run_ranks(N, opt, [&](RingGroup& g, int rank) {
      ASSERT_TRUE(g.shm_active());
      EXPECT_EQ(g.shm_single_copy(), single_copy);
      for (size_t bytes : {from - 8, from, 3 * kShmChunkBytes + 20}) {
        const size_t n = bytes / sizeof(int32_t);
        for (int rep = 0; rep < 3; ++rep) {
          const size_t salt = bytes % 97 + static_cast<size_t>(rep);
          auto in = input_for<int32_t>(rank, n, salt);
          std::vector<int32_t> out(n * ranks, -7), inplace(n * ranks, -7);
          std::memcpy(inplace.data() + static_cast<size_t>(rank) * n, in.data(), bytes);
          g.all_gather(in.data(), out.data(), bytes);
          g.all_gather(inplace.data() + static_cast<size_t>(rank) * n, inplace.data(), bytes);
          for (int r = 0; r < N; ++r) {
            auto want = input_for<int32_t>(r, n, salt);
            ASSERT_EQ(0, std::memcmp(out.data() + static_cast<size_t>(r) * n, want.data(), bytes))
                << N << " ranks, bytes=" << bytes << " block " << r
                << " single_copy=" << single_copy;
            ASSERT_EQ(0, std::memcmp(inplace.data() + static_cast<size_t>(r) * n, want.data(),
                                     bytes))
                << N << " ranks, in place, bytes=" << bytes << " block " << r;
          }
        }
      }
    });
  };
  for (int N : {2, 3}) {
    for (bool single_copy : {true, false}) check(N, single_copy);
  }
}

// A silent peer (connected, never calls the op) hits TESSERA_DIST_TIMEOUT.
TEST(RingFaults, SilentPeerTimesOut) {
  std::string error;
  double secs = 0;
  std::atomic<bool> done{false};
  run_ranks(2, options(false, 1), [&](RingGroup& g, int rank) {
    if (rank == 1) {
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    auto t0 = std::chrono::steady_clock::now();
    std::vector<float> in(100, 1.0f), out(100);
    try {
      g.all_reduce(in.data(), out.data(), 100, float32, ReduceOp::sum);
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
    secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    done = true;
  });
  EXPECT_NE(error.find("no data from rank 1 (127.0.0.1:"), std::string::npos) << error;
  EXPECT_NE(error.find("for 1.0 s during all_sum of 400 B (float32)"), std::string::npos) << error;
  EXPECT_NE(error.find("TESSERA_DIST_TIMEOUT"), std::string::npos) << error;
  EXPECT_GT(secs, 0.9);
  EXPECT_LT(secs, 3.0);
}

// An impostor with the wrong token is rejected (and logged); the real ranks still connect.
TEST(RingSecurity, WrongTokenIsRejectedAndTheGroupStillForms) {
  Hostfile hf = free_hostfile(2);
  RingOptions opt = options(false);
  opt.token = "the-right-token";
  std::string impostor_error;
  std::thread impostor([&] {
    // Pretend to be rank 1 connecting to rank 0, before rank 1 starts.
    auto d = Deadline::after(5);
    Socket s = connect_with_backoff(hf.ranks[0][0], d, 1, 0, false);
    IoContext ctx;
    ctx.op = "handshake";
    ctx.rank = 1;
    ctx.peer = 0;
    ctx.peer_address = hf.ranks[0][0].text();
    try {
      client_handshake(s, JobTerms{"a-wrong-token", {}, false, 2}, {1, 0, 0, ConnKind::ring}, d, ctx);
    } catch (const std::runtime_error& e) {
      impostor_error = e.what();
    }
  });
  std::vector<float> results(2, 0);
  std::thread r0([&] {
    RingGroup g(0, hf, opt);
    float x = 1, y = 0;
    g.all_reduce(&x, &y, 1, float32, ReduceOp::sum);
    results[0] = y;
  });
  impostor.join();
  std::thread r1([&] {
    RingGroup g(1, hf, opt);
    float x = 2, y = 0;
    g.all_reduce(&x, &y, 1, float32, ReduceOp::sum);
    results[1] = y;
  });
  r0.join();
  r1.join();
  // The impostor cannot verify rank 0's proof (different token) and gives up; rank 0 logs
  // the failed handshake and keeps waiting for the real rank 1.
  EXPECT_NE(impostor_error.find("job token"), std::string::npos) << impostor_error;
  EXPECT_EQ(results[0], 3.0f);
  EXPECT_EQ(results[1], 3.0f);
}

TEST(RingSecurity, ServerThatDoesNotKnowTheTokenIsRefused) {
  Hostfile hf = free_hostfile(1);
  Socket listener = listen_on(hf.ranks[0][0], 0);
  std::thread server([&] {
    std::string peer;
    Socket s = accept_until(listener, Deadline::after(5), &peer);
    try {
      server_handshake(s, JobTerms{"server-token", {}, false, 2}, 0, 2, 1, Deadline::after(5), peer);
    } catch (const std::runtime_error&) {
    }
  });
  auto d = Deadline::after(5);
  Socket c = connect_with_backoff(hf.ranks[0][0], d, 1, 0, false);
  IoContext ctx;
  ctx.peer_address = hf.ranks[0][0].text();
  try {
    client_handshake(c, JobTerms{"client-token", {}, false, 2}, {1, 0, 0, ConnKind::ring}, d, ctx);
    ADD_FAILURE() << "handshake with a different token succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("could not prove this rank's job token"), std::string::npos)
        << e.what();
  }
  c.close();  // the server sees the connection end instead of waiting for its deadline
  server.join();
}

}  // namespace

namespace {

bool shm_exists(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd >= 0) close(fd);
  return fd >= 0;
}

void make_segment(const std::string& name, int age_seconds) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << name;
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  timespec times[2] = {{time(nullptr) - age_seconds, 0}, {time(nullptr) - age_seconds, 0}};
  ASSERT_EQ(futimens(fd, times), 0);
  close(fd);
}

}  // namespace

// Ranks started by hand have no launcher to clean up after them: each rank's set-up removes
// segments whose creator is gone, but never a young one (its creator may live in another pid
// namespace sharing /dev/shm) nor one of a live process.
TEST(ShmSegments, SetupRemovesOnlyOldSegmentsOfDeadCreators) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  const std::string dead = "/tessera-" + std::to_string(child) + "-0-";
  const std::string live = "/tessera-" + std::to_string(getppid()) + "-0-";
  make_segment(dead + "old", 120);
  make_segment(dead + "young", 5);
  make_segment(live + "old", 120);
  EXPECT_GE(tessera::distributed::detail::remove_orphaned_shm_segments(), 1);
  EXPECT_FALSE(shm_exists(dead + "old"));
  EXPECT_TRUE(shm_exists(dead + "young"));
  EXPECT_TRUE(shm_exists(live + "old"));
  EXPECT_EQ(tessera::distributed::detail::remove_shm_segments_of(child), 1);
  EXPECT_FALSE(shm_exists(dead + "young"));
  shm_unlink((live + "old").c_str());
}
