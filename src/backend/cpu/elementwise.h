// Loop drivers for elementwise kernels (unary.cpp, binary.cpp, ternary.cpp). Contiguous inputs,
// and a scalar beside a contiguous input, get flat loops over raw pointers that g++ vectorises;
// anything else walks collapsed strided runs. Ops are functors called per element with the C++
// type of the dtype; float16/bfloat16 ops compute in float.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <concepts>
#include <complex>
#include <stdexcept>
#include <type_traits>

#include "backend/cpu/copy.h"
#include "backend/cpu/numeric.h"
#include "backend/cpu/strided.h"
#include "backend/cpu/vec16_ops.h"
#include "core/thread_pool.h"
#include "tessera/array.h"

namespace tessera::cpu {

// Runs f(k * block, min(n, (k + 1) * block)) once for every block k of [0, n), whatever the
// pool's size: callers may keep one result per block. The pool's threads take blocks in turn
// from a shared counter: a thread that starts late or runs slower (a busy machine) does fewer
// blocks instead of holding up the whole op, as a static split would. Blocks are handed out in
// order but may run in any order and on any thread. A thread claims up to 16 consecutive blocks
// at a time (while that leaves every thread at least 8 claims): one contended counter update per
// claim instead of per block, and longer runs for the hardware prefetcher (max over 64 MiB with
// 64 KiB blocks on 2 threads: 1.42 -> 1.0 ms).
template <typename F>
void parallel_blocks(size_t n, size_t block, F&& f) {
  if (n == 0) return;
  block = std::max<size_t>(block, 1);
  const size_t nblocks = (n + block - 1) / block;
  const size_t workers = std::min<size_t>(nblocks, static_cast<size_t>(detail::num_threads()));
  auto run = [&](size_t k0, size_t k1) {
    for (size_t k = k0; k < k1; ++k) f(k * block, std::min(n, (k + 1) * block));
  };
  if (workers <= 1) {
    run(0, nblocks);
    return;
  }
  const size_t claim = std::clamp<size_t>(nblocks / (8 * workers), 1, 16);
  std::atomic<size_t> next{0};
  detail::parallel_for(workers, 1, [&](size_t, size_t) {
    for (size_t k = next.fetch_add(claim, std::memory_order_relaxed); k < nblocks;
         k = next.fetch_add(claim, std::memory_order_relaxed)) {
      run(k, std::min(nblocks, k + claim));
    }
  });
}

// Every element is the one at offset 0 (0-d, size 1, or broadcast from a single value).
inline bool is_scalar_like(const array& a) {
  if (a.size() <= 1) return true;
  for (size_t i = 0; i < a.ndim(); ++i) {
    if (a.shape()[i] != 1 && a.strides()[i] != 0) return false;
  }
  return true;
}

// Elements are dense in the buffer with non-negative strides: a flat loop over data_size()
// elements visits each once, and an output with the same strides matches element for element.
inline bool is_dense(const array& a) {
  if (!a.flags().contiguous || a.data_size() != a.size()) return false;
  for (auto s : a.strides()) {
    if (s < 0) return false;
  }
  return true;
}

// Calls f(T{}) for the inexact dtypes; `Complex` says whether complex64 is accepted.
template <bool Complex = true, typename F>
void dispatch_inexact(Dtype d, const char* op, F&& f) {
  switch (d.val()) {
    case Dtype::Val::float16: f(float16_t{}); return;
    case Dtype::Val::bfloat16: f(bfloat16_t{}); return;
    case Dtype::Val::float32: f(float{}); return;
    case Dtype::Val::float64: f(double{}); return;
    case Dtype::Val::complex64:
      if constexpr (Complex) {
        f(complex64_t{});
        return;
      }
      break;
    default: break;
  }
  throw std::logic_error(std::string("[") + op + "] kernel called with dtype " + dtype_name(d));
}

// Calls f(T{}) for bool and the integer dtypes.
template <typename F>
void dispatch_integral(Dtype d, const char* op, F&& f) {
  switch (d.val()) {
    case Dtype::Val::bool_: f(bool{}); return;
    case Dtype::Val::uint8: f(uint8_t{}); return;
    case Dtype::Val::uint16: f(uint16_t{}); return;
    case Dtype::Val::uint32: f(uint32_t{}); return;
    case Dtype::Val::uint64: f(uint64_t{}); return;
    case Dtype::Val::int8: f(int8_t{}); return;
    case Dtype::Val::int16: f(int16_t{}); return;
    case Dtype::Val::int32: f(int32_t{}); return;
    case Dtype::Val::int64: f(int64_t{}); return;
    default: break;
  }
  throw std::logic_error(std::string("[") + op + "] kernel called with dtype " + dtype_name(d));
}

// An op whose vectorisable form op.fast(x) is valid only where op.fast_ok(x) holds (e.g. sin for
// |x| <= 2^14); op(x) is right everywhere.
template <typename Op, typename In>
concept HasFastPath = requires(const Op& op, In v) {
  { op.fast_ok(v) } -> std::convertible_to<bool>;
  op.fast(v);
};

// A baseline x86-64 build (the wheel: SSE2 only) still runs the flat loops with the CPU's
// vectors: each loop is compiled again for AVX2 + FMA and for AVX-512 (the functors inline into
// those copies), and the copy the CPU can run is picked at run time. A build for a newer target
// (-march=native) compiles the loop once. The copies give the same results as the baseline loop,
// except that FMA may contract a multiply-add (one rounding instead of two), as a native build
// does.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__AVX2__)
#define TESSERA_ISA_DISPATCH 1
#define TESSERA_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TESSERA_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,prefer-vector-width=512")))
#endif

enum class LoopIsa { baseline, avx2, avx512 };

// The copy of the flat loops to run: the widest this CPU has, or TESSERA_CPU_ISA's choice;
// baseline when the build has no copies (loop_isa.cpp).
LoopIsa loop_isa();

// Runs loop() (a lambda marked always_inline, so that its body compiles into each copy) from a
// function compiled for loop_isa(); with no copies in the build, here.
#ifdef TESSERA_ISA_DISPATCH
template <typename F>
TESSERA_TARGET_AVX2 void run_avx2(const F& loop) { loop(); }
template <typename F>
TESSERA_TARGET_AVX512 void run_avx512(const F& loop) { loop(); }
#endif
template <typename F>
inline void run_widest(const F& loop) {
#ifdef TESSERA_ISA_DISPATCH
  switch (loop_isa()) {
    case LoopIsa::avx512: run_avx512(loop); return;
    case LoopIsa::avx2: run_avx2(loop); return;
    case LoopIsa::baseline: break;
  }
#endif
  loop();
}

#if defined(__AVX512F__)
// o[i] = op(x[i]) for float32 ops with a 16-lane form (vec16_ops.h): the same bits as op(x[i]),
// in about half the instructions g++ makes of op.
template <typename Op>
inline void unary_vec16(const float* x, float* o, size_t b, size_t e, const Op& op) {
  struct Carry {
    __mmask16 ok;
    __m512 r;
  };
  ops::vec16_loop<Carry>(
      static_cast<int64_t>(b), static_cast<int64_t>(e),
      [&](int64_t i, __mmask16 m, Carry& c) __attribute__((always_inline)) {
        c.ok = m;
        c.r = ops::vec16_apply<Op>(c.ok, _mm512_maskz_loadu_ps(m, x + i));
      },
      [&](int64_t i, __mmask16 m, const Carry& c) __attribute__((always_inline)) {
        if (__builtin_expect(c.ok != m, 0)) return false;
        _mm512_mask_storeu_ps(o + i, m, c.r);
        return true;
      },
      [&](int64_t i0, int64_t i1) {
        for (int64_t k = i0; k < i1; ++k) o[k] = op(x[k]);
      });
}
#endif

// o[i] = op(x[i]) for i in [b, e) of flat arrays.
template <typename In, typename Out, typename Op>
[[gnu::always_inline]] inline void unary_flat_loop(const In* x, Out* o, size_t b, size_t e,
                                                   const Op& op) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<In, float> && std::is_same_v<Out, float> && ops::has_vec16<Op>) {
    unary_vec16(x, o, b, e, op);
    return;
  }
#endif
  if constexpr (HasFastPath<Op, In>) {
    // Blocks where every element takes the fast form run vectorised; the others per element.
    constexpr size_t kBlock = 512;
    for (size_t c = b; c < e; c += kBlock) {
      const size_t ce = std::min(e, c + kBlock);
      unsigned slow = 0;
      for (size_t i = c; i < ce; ++i) slow |= !op.fast_ok(x[i]);
      if (slow == 0) {
        for (size_t i = c; i < ce; ++i) o[i] = op.fast(x[i]);
      } else {
        for (size_t i = c; i < ce; ++i) o[i] = op(x[i]);
      }
    }
  } else {
    for (size_t i = b; i < e; ++i) o[i] = op(x[i]);
  }
}

template <typename In, typename Out, typename Op>
inline void unary_flat(const In* x, Out* o, size_t b, size_t e, const Op& op) {
  run_widest([&]() __attribute__((always_inline)) { unary_flat_loop(x, o, b, e, op); });
}

// out[i] = op(in[i]).
template <typename In, typename Out, typename Op>
void unary_kernel(const array& in, array& out, Op op) {
  const size_t n = out.size();
  if (n == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  if (in.flags().row_contiguous) {
    allocate_or_donate(out, {&in});
  } else if (is_dense(in)) {
    out.set_data(allocator::malloc(out.nbytes()), n, in.strides(), in.flags());
  } else {
    out.set_data(allocator::malloc(out.nbytes()));
    auto v = collapse<2>(out.shape(), {in.strides(), detail::row_strides(out.shape())});
    const In* x = in.data<In>();
    Out* o = out.data<Out>();
    detail::parallel_for(n, kElementwiseGrain, [&](size_t b, size_t e) {
      for_each_run<2>(v, b, e, [&](const std::array<int64_t, 2>& off, int64_t len,
                                   const std::array<int64_t, 2>& st) {
        const In* xp = x + off[0];
        Out* op_ = o + off[1];
        const int64_t sx = st[0];
        for (int64_t i = 0; i < len; ++i) op_[i] = op(xp[i * sx]);
      });
    });
    return;
  }
  const In* x = in.data<In>();
  Out* o = out.data<Out>();
  parallel_blocks(n, kElementwiseGrain,
                  [&](size_t b, size_t e) { unary_flat<In, Out>(x, o, b, e, op); });
}

// out[i] = op(a[i], b[i]) for a, b broadcast to out's shape. With donate = false the output
// never reuses an input buffer (for primitives that read the inputs again afterwards).
template <typename In, typename Out, typename Op>
void binary_kernel(const array& a, const array& b, array& out, Op op, bool donate = true) {
  const size_t n = out.size();
  if (n == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  const bool sa = is_scalar_like(a), sb = is_scalar_like(b);
  const bool ra = a.flags().row_contiguous && a.size() == n;
  const bool rb = b.flags().row_contiguous && b.size() == n;
  const In* x = a.data<In>();
  const In* y = b.data<In>();
  auto alloc = [&]() {
    if (donate) {
      allocate_or_donate(out, {&a, &b});
    } else {
      out.set_data(allocator::malloc(out.nbytes()));
    }
  };
  if ((ra || sa) && (rb || sb)) {
    alloc();
    Out* o = out.data<Out>();
    if (sa && sb) {
      const Out v = op(x[0], y[0]);
      for (size_t i = 0; i < n; ++i) o[i] = v;
    } else if (sa) {
      parallel_blocks(n, kElementwiseGrain, [&, o](size_t lo, size_t hi) {
        const In s = x[0];
        run_widest([&]() __attribute__((always_inline)) {
          for (size_t i = lo; i < hi; ++i) o[i] = op(s, y[i]);
        });
      });
    } else if (sb) {
      parallel_blocks(n, kElementwiseGrain, [&, o](size_t lo, size_t hi) {
        const In s = y[0];
        run_widest([&]() __attribute__((always_inline)) {
          for (size_t i = lo; i < hi; ++i) o[i] = op(x[i], s);
        });
      });
    } else {
      parallel_blocks(n, kElementwiseGrain, [&, o](size_t lo, size_t hi) {
        run_widest([&]() __attribute__((always_inline)) {
          for (size_t i = lo; i < hi; ++i) o[i] = op(x[i], y[i]);
        });
      });
    }
    return;
  }
  if (is_dense(a) && is_dense(b) && a.strides() == b.strides()) {
    // Same non-row-major dense layout (e.g. both transposed): keep it for the output.
    out.set_data(allocator::malloc(out.nbytes()), n, a.strides(), a.flags());
    Out* o = out.data<Out>();
    detail::parallel_for(n, kElementwiseGrain, [&, o](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) o[i] = op(x[i], y[i]);
    });
    return;
  }
  out.set_data(allocator::malloc(out.nbytes()));
  Out* o = out.data<Out>();
  auto v = collapse<3>(out.shape(), {a.strides(), b.strides(), detail::row_strides(out.shape())});
  detail::parallel_for(n, kElementwiseGrain, [&, o](size_t lo, size_t hi) {
    for_each_run<3>(v, lo, hi, [&](const std::array<int64_t, 3>& off, int64_t len,
                                   const std::array<int64_t, 3>& st) {
      const In* xp = x + off[0];
      const In* yp = y + off[1];
      Out* op_ = o + off[2];
      if (st[0] == 1 && st[1] == 1) {
        for (int64_t i = 0; i < len; ++i) op_[i] = op(xp[i], yp[i]);
      } else if (st[0] == 0 && st[1] == 1) {
        const In s = xp[0];
        for (int64_t i = 0; i < len; ++i) op_[i] = op(s, yp[i]);
      } else if (st[0] == 1 && st[1] == 0) {
        const In s = yp[0];
        for (int64_t i = 0; i < len; ++i) op_[i] = op(xp[i], s);
      } else {
        const int64_t s0 = st[0], s1 = st[1];
        for (int64_t i = 0; i < len; ++i) op_[i] = op(xp[i * s0], yp[i * s1]);
      }
    });
  });
}

}  // namespace tessera::cpu
