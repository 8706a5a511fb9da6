// CPU kernels of the tessera::fast primitives (ops/fast.h). Each rounds where its composite's ops
// round, with the same functors (unary_ops.h), so a primitive and its composite agree bit for bit.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>
#include <stdexcept>
#include <string>

#include "backend/cpu/blas.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/half_gemm.h"
#include "backend/cpu/numeric.h"
#include "backend/cpu/unary_ops.h"
#include "backend/cpu/vector_math.h"
#include "core/thread_pool.h"
#include "ops/fast.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

// x (B, N, T, D) row-contiguous; cos / sin tables per batch entry (the offset may differ).
template <typename T>
void rope_rows(const array& x, const int32_t* offset, size_t n_offsets, const float* freqs,
               int dims, bool traditional, std::optional<float> base, float scale, T* out) {
  using C = cpu::compute_t<T>;
  const int B = x.shape(0), N = x.shape(1), L = x.shape(2), D = x.shape(3), half = dims / 2;
  const T* xp = x.data<T>();
  // The composite: inv_freq = exp(-i * (log(base) / half)) or 1 / freqs[i], theta = position *
  // inv_freq, all float32; cos and sin rounded to T; the rotation in T's arithmetic.
  std::vector<float> inv_freq(half);
  const float step = base ? static_cast<float>(std::log(*base) / half) : 0.0f;
  for (int i = 0; i < half; ++i) {
    inv_freq[i] = base ? cpu::ops::ExpOp{}(static_cast<float>(-i) * step) : 1.0f / freqs[i];
  }
  auto mul = [](T a, T b) { return static_cast<T>(static_cast<C>(a) * static_cast<C>(b)); };
  auto add = [](T a, T b) { return static_cast<T>(static_cast<C>(a) + static_cast<C>(b)); };
  auto sub = [](T a, T b) { return static_cast<T>(static_cast<C>(a) - static_cast<C>(b)); };
  std::vector<T> cos_t(static_cast<size_t>(L) * half), sin_t(cos_t.size());
  for (int b = 0; b < B; ++b) {
    if (b == 0 || n_offsets > 1) {
      const float off = static_cast<float>(offset[n_offsets > 1 ? b : 0]);
      for (int t = 0; t < L; ++t) {
        const float pos = (static_cast<float>(t) + off) * scale;
        for (int i = 0; i < half; ++i) {
          const float theta = pos * inv_freq[i];
          cos_t[static_cast<size_t>(t) * half + i] = static_cast<T>(cpu::ops::CosOp{}(theta));
          sin_t[static_cast<size_t>(t) * half + i] = static_cast<T>(cpu::ops::SinOp{}(theta));
        }
      }
    }
    detail::parallel_for(static_cast<size_t>(N) * L, 64, [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        const size_t row = static_cast<size_t>(b) * N * L + r;
        const T* in = xp + row * D;
        T* o = out + row * D;
        const T* c = cos_t.data() + (r % L) * half;
        const T* s = sin_t.data() + (r % L) * half;
        for (int i = 0; i < half; ++i) {
          const int i1 = traditional ? 2 * i : i, i2 = traditional ? 2 * i + 1 : half + i;
          const T x1 = in[i1], x2 = in[i2];
          o[i1] = sub(mul(x1, c[i]), mul(x2, s[i]));
          o[i2] = add(mul(x1, s[i]), mul(x2, c[i]));
        }
        for (int i = dims; i < D; ++i) o[i] = in[i];
      }
    });
  }
}

// Rows of x (row-contiguous, D per row) to out_type: the composite's float32 sum of squares
// times 1/D, plus eps, 1/sqrt, the product rounded to T, then times the weight in T's arithmetic.
template <typename In, typename T>
void rms_rows(const array& x, const T* weight, float eps, T* out) {
  using C = cpu::compute_t<T>;
  const int D = x.shape(-1);
  const size_t rows = D ? x.size() / D : 0;
  const In* xp = x.data<In>();
  const float inv_d = 1.0f / static_cast<float>(D);
  const size_t grain = std::max<size_t>(1, 16384 / std::max(D, 1));
  detail::parallel_for(rows, grain, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const In* in = xp + r * D;
      T* o = out + r * D;
      float ss = 0.0f;
      for (int i = 0; i < D; ++i) {
        const float v = static_cast<float>(in[i]);
        ss += v * v;
      }
      const float scale = cpu::ops::RsqrtOp{}(ss * inv_d + eps);
      for (int i = 0; i < D; ++i) {
        const T y = static_cast<T>(static_cast<float>(in[i]) * scale);
        o[i] = weight ? static_cast<T>(static_cast<C>(y) * static_cast<C>(weight[i])) : y;
      }
    }
  });
}

// f(T{}) for the floating dtype d (the dtypes of the fast ops' composites).
template <typename F>
void dispatch_floating(const char* op, Dtype d, F f) {
  switch (d) {
    case Dtype::Val::float32: return f(float{});
    case Dtype::Val::float16: return f(float16_t{});
    case Dtype::Val::bfloat16: return f(bfloat16_t{});
    case Dtype::Val::float64: return f(double{});
    default:
      throw std::invalid_argument(std::string("[") + op + "] no kernel for dtype " +
                                  dtype_name(d));
  }
}


// ---- attention ----

// y[j] = exp(y[j] - m) for j < n; returns their sum (16 lane sums, then those in order). One
// body, compiled once per instruction set: the exponentials are most of attention's arithmetic
// besides its two products.
[[gnu::always_inline]] inline float exp_shift_sum_body(float* y, int n, float m) {
  for (int j = 0; j < n; ++j) y[j] = cpu::vexp(y[j] - m);
  float lanes[16] = {};
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    for (int t = 0; t < 16; ++t) lanes[t] += y[j + t];
  }
  float sum = 0;
  for (; j < n; ++j) sum += y[j];
  for (float lane : lanes) sum += lane;
  return sum;
}

// The largest of y[0..n) and m (16 lane maxima: one dependency chain per lane, not per value).
inline float row_max(const float* y, int n, float m) {
  float lanes[16];
  for (float& lane : lanes) lane = m;
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    for (int t = 0; t < 16; ++t) lanes[t] = lanes[t] > y[j + t] ? lanes[t] : y[j + t];
  }
  for (; j < n; ++j) m = m > y[j] ? m : y[j];
  for (float lane : lanes) m = m > lane ? m : lane;
  return m;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"))) float exp_shift_sum_avx512(
    float* y, int n, float m) {
  return exp_shift_sum_body(y, n, m);
}
__attribute__((target("avx2,fma"))) float exp_shift_sum_avx2(float* y, int n, float m) {
  return exp_shift_sum_body(y, n, m);
}
#endif

float exp_shift_sum(float* y, int n, float m) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const cpu::HalfIsa isa = cpu::half_isa();  // TESSERA_CPU_ISA and this CPU
  if (isa == cpu::HalfIsa::avx512 || isa == cpu::HalfIsa::avx512_bf16) {
    return exp_shift_sum_avx512(y, n, m);
  }
  if (isa == cpu::HalfIsa::avx2) return exp_shift_sum_avx2(y, n, m);
#endif
  return exp_shift_sum_body(y, n, m);
}

// Rows of a 4-D array whose last axis is contiguous: row (b, h, i) starts at
// data + b * s0 + h * s1 + i * s2 (a transposed or sliced view needs no copy).
template <typename T>
struct Rows4 {
  const T* data;
  int64_t s0, s1, s2;
  const T* row(int b, int h, int i) const { return data + b * s0 + h * s1 + i * s2; }
};

template <typename T>
Rows4<T> rows_of(const array& a) {
  return {a.data<T>(), a.strides()[0], a.strides()[1], a.strides()[2]};
}

// An input the kernel reads in place when its last axis is contiguous, else a copy.
array last_axis_contiguous(const array& a) {
  return a.strides().back() == 1 || a.shape().back() == 1 ? a : cpu::ensure_row_contiguous(a);
}

// The most negative finite value of T, which a false boolean mask puts in place of a score (as
// the composite's where does).
template <typename T>
double lowest_of() {
  if constexpr (std::is_same_v<T, float16_t>) return -65504.0;
  else if constexpr (std::is_same_v<T, bfloat16_t>) return -3.3895313892515355e38;
  else return static_cast<double>(std::numeric_limits<T>::lowest());
}

// One task: key/value head (b, g), query positions [q0, q1) of every query head sharing it. Its
// rows (repeat r, position i) hold row index (r * (q1 - q0) + i - q0). Keys stream through in
// blocks of kKeyBlock: scores S = Q K^T (C, one product per block), masking, then the online
// softmax: each row keeps its running maximum m, sum l and accumulator acc, rescaled by
// exp(m_old - m_new) whenever the maximum grows; acc += P V with P = exp(S - m).
template <typename T>
struct AttentionTask {
  using C = cpu::compute_t<T>;  // float for half types and float32, double for float64
  static constexpr int kKeyBlock = 256;

  Rows4<T> q, k, v;
  int Hq, Hkv, Lq, Lk, D, Dv;
  float scale;
  bool causal;
  const array* mask;  // (B, Hq, Lq, Lk), any strides
  bool mask_bool;
  const T* sinks;  // (Hq) or null

  void run(int b, int g, int q0, int q1, T* out) const {
    const int R = Hq / Hkv, n = q1 - q0, rows = R * n;
    std::vector<C> qf(static_cast<size_t>(rows) * D), kf, vf, sc(static_cast<size_t>(rows) * kKeyBlock),
        acc(static_cast<size_t>(rows) * Dv, C(0)), m(rows), l(rows);
    for (int r = 0; r < R; ++r) {
      for (int i = q0; i < q1; ++i) {
        const T* src = q.row(b, g * R + r, i);
        C* dst = qf.data() + static_cast<size_t>(r * n + i - q0) * D;
        for (int d = 0; d < D; ++d) dst[d] = static_cast<C>(src[d]) * static_cast<C>(scale);
      }
    }
    for (int rr = 0; rr < rows; ++rr) {
      const int h = g * R + rr / n;
      // A sink is one more score with a zero value: it only enlarges the softmax's sum.
      m[rr] = sinks ? static_cast<C>(sinks[h]) : -std::numeric_limits<C>::infinity();
      l[rr] = sinks ? C(1) : C(0);
    }
    // Causal: position i sees keys j <= i + Lk - Lq. A position that sees none (Lq > Lk) gets,
    // as in the composite, every key at the same lowest score: the whole row is read.
    int kend = Lk;
    if (causal && q0 + Lk - Lq >= 0) kend = std::min(Lk, q1 - 1 + Lk - Lq + 1);
    const C low = static_cast<C>(lowest_of<T>());
    for (int j0 = 0; j0 < kend; j0 += kKeyBlock) {
      const int kb = std::min(kKeyBlock, kend - j0);
      const C* kp = block(k, b, g, j0, kb, D, kf);
      const C* vp = block(v, b, g, j0, kb, Dv, vf);
      cpu::gemm(false, true, rows, kb, D, 1.0f, qf.data(), D, kp, D, 0.0f, sc.data(), kb);
      for (int rr = 0; rr < rows; ++rr) {
        const int h = g * R + rr / n, i = q0 + rr % n;
        C* s = sc.data() + static_cast<size_t>(rr) * kb;
        if (causal) {
          for (int j = std::max(0, i + Lk - Lq + 1 - j0); j < kb; ++j) s[j] = low;
        }
        if (mask) apply_mask(b, h, i, j0, kb, s, low);
        C mx = m[rr];
        if constexpr (std::is_same_v<C, float>) {
          mx = row_max(s, kb, mx);
        } else {
          for (int j = 0; j < kb; ++j) mx = std::max(mx, s[j]);
        }
        C* a = acc.data() + static_cast<size_t>(rr) * Dv;
        if (mx == -std::numeric_limits<C>::infinity()) {
          for (int j = 0; j < kb; ++j) s[j] = C(0);  // nothing seen yet: every weight is 0
          continue;
        }
        C factor, sum = 0;
        if constexpr (std::is_same_v<C, float>) {
          factor = cpu::vexp(m[rr] - mx);
          sum = exp_shift_sum(s, kb, mx);
        } else {
          factor = std::exp(m[rr] - mx);
          for (int j = 0; j < kb; ++j) sum += (s[j] = std::exp(s[j] - mx));
        }
        l[rr] = l[rr] * factor + sum;
        m[rr] = mx;
        if (factor != C(1)) {
          for (int d = 0; d < Dv; ++d) a[d] *= factor;
        }
      }
      cpu::gemm(false, false, rows, Dv, kb, 1.0f, sc.data(), kb, vp, Dv, 1.0f, acc.data(), Dv);
    }
    for (int rr = 0; rr < rows; ++rr) {
      const int h = g * R + rr / n, i = q0 + rr % n;
      T* o = out + ((static_cast<size_t>(b) * Hq + h) * Lq + i) * Dv;
      const C* a = acc.data() + static_cast<size_t>(rr) * Dv;
      for (int d = 0; d < Dv; ++d) o[d] = static_cast<T>(a[d] / l[rr]);
    }
  }

  // Rows j0 .. j0 + kb of head (b, g) as C, kb x width with pitch width: in place when they
  // already are (C's type, consecutive rows), else converted into `scratch`.
  static const C* block(const Rows4<T>& x, int b, int g, int j0, int kb, int width,
                        std::vector<C>& scratch) {
    if constexpr (std::is_same_v<T, C>) {
      if (x.s2 == width) return x.row(b, g, j0);
    }
    scratch.resize(static_cast<size_t>(kb) * width);
    for (int j = 0; j < kb; ++j) {
      const T* src = x.row(b, g, j0 + j);
      C* dst = scratch.data() + static_cast<size_t>(j) * width;
      for (int d = 0; d < width; ++d) dst[d] = static_cast<C>(src[d]);
    }
    return scratch.data();
  }

  void apply_mask(int b, int h, int i, int j0, int kb, C* s, C low) const {
    const auto& st = mask->strides();
    const int64_t base = b * st[0] + h * st[1] + i * st[2] + j0 * st[3];
    if (mask_bool) {
      const bool* mp = mask->data<bool>() + base;
      for (int j = 0; j < kb; ++j) {
        if (!mp[j * st[3]]) s[j] = low;
      }
    } else {
      const T* mp = mask->data<T>() + base;
      for (int j = 0; j < kb; ++j) s[j] += static_cast<C>(mp[j * st[3]]);
    }
  }
};

template <typename T>
void attention(const array& q, const array& k, const array& v, const array* mask,
               const T* sinks, float scale, bool causal, array& out) {
  AttentionTask<T> task{rows_of<T>(q), rows_of<T>(k), rows_of<T>(v),
                        q.shape(1), k.shape(1), q.shape(2), k.shape(2), q.shape(3), v.shape(3),
                        scale, causal, mask, mask && mask->dtype() == bool_, sinks};
  const int B = q.shape(0), Hkv = task.Hkv, Lq = task.Lq, R = task.Hq / task.Hkv;
  // Query tiles of about 64 rows (every repeat of a tile's positions shares its key blocks).
  const int tile = std::max(1, 64 / R);
  const int tiles = (Lq + tile - 1) / tile;
  T* o = out.data<T>();
  detail::parallel_for(static_cast<size_t>(B) * Hkv * tiles, 1, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      const int b = static_cast<int>(t / (static_cast<size_t>(Hkv) * tiles));
      const int g = static_cast<int>(t / tiles % Hkv);
      const int q0 = static_cast<int>(t % tiles) * tile;
      task.run(b, g, q0, std::min(Lq, q0 + tile), o);
    }
  });
}

}  // namespace

void ScaledDotProductAttention::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array q = last_axis_contiguous(inputs[0]);
  const array k = last_axis_contiguous(inputs[1]);
  const array v = last_axis_contiguous(inputs[2]);
  size_t at = 3;
  std::optional<array> mask;
  if (has_mask_) mask = inputs[at++];
  const array sinks = has_sinks_ ? cpu::ensure_row_contiguous(inputs[at]) : array(0.0f);
  out.set_data(allocator::malloc(out.nbytes()));
  dispatch_floating("scaled_dot_product_attention", out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    attention<T>(q, k, v, mask ? &*mask : nullptr, has_sinks_ ? sinks.data<T>() : nullptr,
                 scale_, causal_, out);
  });
}

void RMSNorm::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  const array w = inputs.size() > 1 ? cpu::ensure_row_contiguous(inputs[1]) : array(0.0f);
  out.set_data(allocator::malloc(out.nbytes()));
  dispatch_floating("rms_norm", out.dtype(), [&](auto out_tag) {
    using T = decltype(out_tag);
    const T* wp = inputs.size() > 1 ? w.data<T>() : nullptr;
    dispatch_floating("rms_norm", x.dtype(), [&](auto in_tag) {
      rms_rows<decltype(in_tag), T>(x, wp, eps_, out.data<T>());
    });
  });
}

void RoPE::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  const array offset = cpu::ensure_row_contiguous(inputs[1]);
  const float* freqs = nullptr;
  array f = inputs.size() > 2 ? cpu::ensure_row_contiguous(inputs[2]) : array(0.0f);
  if (inputs.size() > 2) freqs = f.data<float>();
  out.set_data(allocator::malloc(out.nbytes()));
  dispatch_floating("rope", out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    rope_rows<T>(x, offset.data<int32_t>(), offset.size(), freqs, dims_, traditional_, base_,
                 scale_, out.data<T>());
  });
}

}  // namespace tessera
