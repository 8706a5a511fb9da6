// The CPU kernels of scaled_dot_product_attention and its gradient (ops/fast.h): per key/value
// head and tile of query positions, the keys stream through in blocks with an online softmax;
// bfloat16's products run on AMX tiles where the CPU has them (amx_tiles.h), others on BLAS.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/amx_tiles.h"
#include "backend/cpu/attention_decode.h"
#include "backend/cpu/blas.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/fast_common.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/numeric.h"
#include "backend/cpu/scratch.h"
#include "backend/cpu/softmax_rows.h"
#include "backend/cpu/vector_math.h"
#include "core/thread_pool.h"
#include "ops/fast.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

// ---- attention ----

// The attention gradient's weights of one key block, row by row: with s the scores and dp the
// products dO V^T of `rows` rows of kb, p = exp(s - m) * inv_l (the softmax's weights, into s)
// and dS = p * (dp - rowdot) (into dp; 0 for a row whose maximum is `low`: it sees no key, its
// scores are constants). One body, compiled once per instruction set.
template <typename C>
[[gnu::always_inline]] inline void attention_grad_weights_body(C* s, C* dp, int rows, int kb,
                                                               const C* m, const C* inv_l,
                                                               const C* rowdot, C low) {
  for (int rr = 0; rr < rows; ++rr) {
    C* __restrict p = s + static_cast<size_t>(rr) * kb;
    C* __restrict d = dp + static_cast<size_t>(rr) * kb;
    const C mr = m[rr], il = inv_l[rr], dot = rowdot[rr];
    for (int j = 0; j < kb; ++j) {
      if constexpr (std::is_same_v<C, float>) p[j] = cpu::vexp(p[j] - mr) * il;
      else p[j] = std::exp(p[j] - mr) * il;
    }
    if (mr == low) {
      std::fill(d, d + kb, C(0));
      continue;
    }
    for (int j = 0; j < kb; ++j) d[j] = p[j] * (d[j] - dot);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
TESSERA_AVX512 void attention_grad_weights_avx512(
    float* s, float* dp, int rows, int kb, const float* m, const float* inv_l, const float* rowdot,
    float low) {
  attention_grad_weights_body(s, dp, rows, kb, m, inv_l, rowdot, low);
}
__attribute__((target("avx2,fma"))) void attention_grad_weights_avx2(
    float* s, float* dp, int rows, int kb, const float* m, const float* inv_l, const float* rowdot,
    float low) {
  attention_grad_weights_body(s, dp, rows, kb, m, inv_l, rowdot, low);
}
#endif

template <typename C>
void attention_grad_weights(C* s, C* dp, int rows, int kb, const C* m, const C* inv_l,
                            const C* rowdot, C low) {
#if defined(__x86_64__) && defined(__GNUC__)
  if constexpr (std::is_same_v<C, float>) {
    if (copy_isa() == CopyIsa::avx512) {
      return attention_grad_weights_avx512(s, dp, rows, kb, m, inv_l, rowdot, low);
    }
    if (copy_isa() == CopyIsa::avx2) {
      return attention_grad_weights_avx2(s, dp, rows, kb, m, inv_l, rowdot, low);
    }
  }
#endif
  attention_grad_weights_body(s, dp, rows, kb, m, inv_l, rowdot, low);
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

constexpr int round_up(int x, int to) { return (x + to - 1) / to * to; }

// A key/value head's keys and values as amx_tiles.h's pairs (bfloat16 attention on AMX): k,
// round_up(D, 32) / 2 rows of round_up(Lk, 16) words (K^T); v, round_up(Lk, 32) / 2 rows of
// round_up(Dv, 16) words.
struct TilePairs {
  const uint32_t* k;
  const uint32_t* v;
};

// One task: key/value head (b, g), query positions [q0, q1) of every query head sharing it. Its
// rows (repeat r, position i) hold row index (r * (q1 - q0) + i - q0). Keys stream through in
// blocks of kKeyBlock: scores S = Q K^T (C, one product per block), masking, then the online
// softmax: each row keeps its running maximum m, sum l and accumulator acc, rescaled by
// exp(m_old - m_new) whenever the maximum grows; acc += P V with P = exp(S - m).
template <typename T>
struct AttentionTask {
  using C = cpu::compute_t<T>;  // float for half types and float32, double for float64
  static constexpr int kKeyBlock = 256;
  static constexpr C kInf = std::numeric_limits<C>::infinity();

  Rows4<T> q, k, v;
  int Hq, Hkv, Lq, Lk, D, Dv;
  float scale;
  bool causal;
  const array* mask;  // (B, Hq, Lq, Lk), any strides
  bool mask_bool;
  const T* sinks;  // (Hq) or null

  int repeats() const { return Hq / Hkv; }

  // Rows (r, i) of `x` (a 4-D array of this task's query heads), as C, times `factor`.
  void load_rows(const Rows4<T>& x, int b, int g, int q0, int q1, int width, C factor,
                 C* dst) const {
    const int R = repeats(), n = q1 - q0;
    for (int r = 0; r < R; ++r) {
      for (int i = q0; i < q1; ++i) {
        const T* src = x.row(b, g * R + r, i);
        C* d = dst + static_cast<size_t>(r * n + i - q0) * width;
        for (int c = 0; c < width; ++c) d[c] = static_cast<C>(src[c]) * factor;
      }
    }
  }

  // load_rows's rows of q, unscaled, as bfloat16 rows `width` apart (run on tiles).
  void load_rows_bf16(int b, int g, int q0, int q1, int width, bfloat16_t* dst) const {
    const int R = repeats(), n = q1 - q0;
    for (int r = 0; r < R; ++r) {
      for (int i = q0; i < q1; ++i) {
        const T* src = q.row(b, g * R + r, i);
        bfloat16_t* d = dst + static_cast<size_t>(r * n + i - q0) * width;
        for (int c = 0; c < D; ++c) d[c] = static_cast<bfloat16_t>(src[c]);
      }
    }
  }

  // The keys the rows of [q0, q1) read. Causal: position i sees keys j <= i + Lk - Lq; a
  // position that sees none (Lq > Lk) gets, as in the composite, every key at the same lowest
  // score, so the whole row is read.
  int key_end(int q0, int q1) const {
    if (causal && q0 + Lk - Lq >= 0) return std::min(Lk, q1 - 1 + Lk - Lq + 1);
    return Lk;
  }

  // The sink's score of row rr (or -inf without sinks): a sink is one more score with a zero
  // value, so it only enlarges the softmax's sum.
  C sink_of(int g, int n, int rr) const {
    return sinks ? static_cast<C>(sinks[g * repeats() + rr / n]) : -kInf;
  }

  // s (rows x kb) = the scores of the rows of [q0, q0 + n) against keys j0 .. j0 + kb: qf (the
  // scaled queries) times the key block kp, then the causal limit and the mask.
  void scores(int b, int g, int q0, int n, int j0, int kb, const C* qf, const C* kp, C* s) const {
    product(false, true, repeats() * n, kb, D, qf, D, kp, D, false, s, kb);
    limit(b, g, q0, n, j0, kb, s);
  }

  // The causal limit and the mask on the scores s of the rows of [q0, q0 + n), keys j0 .. j0 + kb.
  void limit(int b, int g, int q0, int n, int j0, int kb, C* s) const {
    const int rows = repeats() * n;
    if (!causal && !mask) return;
    const C low = static_cast<C>(lowest_of<T>());
    for (int rr = 0; rr < rows; ++rr) {
      const int h = g * repeats() + rr / n, i = q0 + rr % n;
      C* sr = s + static_cast<size_t>(rr) * kb;
      if (causal) {
        for (int j = std::max(0, i + Lk - Lq + 1 - j0); j < kb; ++j) sr[j] = low;
      }
      if (mask) apply_mask(b, h, i, j0, kb, sr, low);
    }
  }

#if defined(__x86_64__)
  // run's scores on tiles: s (rows x kb) = (Q K^T) * scale for keys j0 .. j0 + kb, through s32.
  void tile_scores(const TilePairs* pairs, int mp, int dk, int rows, int j0, int kb,
                   const bfloat16_t* qb, float* s32, C* s) const {
    cpu::tile_product(mp, round_up(kb, 16), dk, qb, dk, pairs->k + j0, round_up(Lk, 16), false,
                      s32, kKeyBlock);
    for (int rr = 0; rr < rows; ++rr) {
      const float* src = s32 + static_cast<size_t>(rr) * kKeyBlock;
      C* dst = s + static_cast<size_t>(rr) * kb;
      for (int j = 0; j < kb; ++j) dst[j] = src[j] * scale;
    }
  }
  // acc (rows x dv) += P V on tiles, the weights P (w, rows x kb) split into two bfloat16
  // parts (pb: mp x kKeyBlock each, one after the other) and multiplied apart: the weights keep
  // float32's precision to 2^-16 (one bfloat16 part alone gave errors of 2^-9 of sum |p v|,
  // past the output's rounding where the terms cancel).
  void tile_values(const TilePairs* pairs, int mp, int dv, int rows, int j0, int kb, const C* w,
                   bfloat16_t* pb, C* acc) const {
    if constexpr (std::is_same_v<C, float>) {
      const int kk = round_up(kb, 32);
      bfloat16_t* lo = pb + static_cast<size_t>(mp) * kKeyBlock;
      for (int rr = 0; rr < rows; ++rr) {
        const size_t at = static_cast<size_t>(rr) * kKeyBlock;
        cpu::split_to_bf16(w + static_cast<size_t>(rr) * kb, pb + at, lo + at,
                           static_cast<size_t>(kb));
        std::fill(pb + at + kb, pb + at + kk, bfloat16_t{});
        std::fill(lo + at + kb, lo + at + kk, bfloat16_t{});
      }
      const uint32_t* vp = pairs->v + static_cast<size_t>(j0 / 2) * dv;
      cpu::tile_product(mp, dv, kk, pb, kKeyBlock, vp, dv, true, acc, dv);
      cpu::tile_product(mp, dv, kk, lo, kKeyBlock, vp, dv, true, acc, dv);
    }
  }
#else
  void tile_scores(const TilePairs*, int, int, int, int, int, const bfloat16_t*, float*,
                   C*) const {}
  void tile_values(const TilePairs*, int, int, int, int, int, const C*, bfloat16_t*,
                   C*) const {}
#endif

  // c = a b (+ c when accumulate), op-transposed as cpu::gemm. (BLAS: Tessera's own float32
  // kernel packs its operands per call, which costs more than it gains at these sizes.)
  static void product(bool ta, bool tb, int m, int n, int k, const C* a, int lda, const C* b,
                      int ldb, bool accumulate, C* c, int ldc) {
    cpu::gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc);
  }

  static C max_of(const C* s, int kb, C m) {
    if constexpr (std::is_same_v<C, float>) {
      return cpu::row_max(s, kb, m);
    } else {
      for (int j = 0; j < kb; ++j) m = std::max(m, s[j]);
      return m;
    }
  }

  // s[j] = exp(s[j] - m); their sum.
  static C exp_sum(C* s, int kb, C m) {
    if constexpr (std::is_same_v<C, float>) {
      return cpu::exp_shift_sum(s, kb, m);
    } else {
      C sum = 0;
      for (int j = 0; j < kb; ++j) sum += (s[j] = std::exp(s[j] - m));
      return sum;
    }
  }

  static C exp_of(C x) {
    if constexpr (std::is_same_v<C, float>) return cpu::vexp(x);
    else return std::exp(x);
  }

  // One online-softmax step of row rr over the scores s of one key block: s becomes the block's
  // weights exp(s - m_new); returns the factor the row's accumulator must be scaled by.
  static C online_step(C* s, int kb, C& m, C& l) {
    const C mx = max_of(s, kb, m);
    if (mx == -kInf) {  // nothing seen yet: every weight is 0
      std::fill(s, s + kb, C(0));
      return C(1);
    }
    const C factor = exp_of(m - mx);
    l = l * factor + exp_sum(s, kb, mx);
    m = mx;
    return factor;
  }

  // Rows [q0, q1) of every query head of (b, g) into out; with `stats`, each row's m and l
  // there too ((B, Hq, Lq, 2)). With `pairs` (bfloat16 on AMX: attention_on_tiles), the
  // products run on tiles, summed in float32: S = (Q K^T) * scale from the bfloat16 values, and
  // P V with P split in two bfloat16 parts (tile_values).
  void run(int b, int g, int q0, int q1, T* out, C* stats, const TilePairs* pairs) const {
    const int n = q1 - q0, rows = repeats() * n;
    const int mp = round_up(rows, 16), dk = round_up(D, 32), dv = pairs ? round_up(Dv, 16) : Dv;
    cpu::Scratch<C> sc(static_cast<size_t>(rows) * kKeyBlock);
    cpu::Scratch<C> acc(static_cast<size_t>(mp) * dv), m(rows), l(rows);
    std::fill(acc.data(), acc.data() + static_cast<size_t>(mp) * dv, C(0));
    cpu::Scratch<C> qf(pairs ? 0 : static_cast<size_t>(rows) * D);
    cpu::Scratch<C> kf(pairs ? 0 : kKeyBlock * static_cast<size_t>(D));
    cpu::Scratch<C> vf(pairs ? 0 : kKeyBlock * static_cast<size_t>(Dv));
    // The tiles' operands: Q (mp x dk) and P (mp x kKeyBlock) in bfloat16, zero past the rows
    // and columns; S in float32.
    cpu::Scratch<bfloat16_t> qb(pairs ? static_cast<size_t>(mp) * dk : 0);
    cpu::Scratch<bfloat16_t> pb(pairs ? 2 * static_cast<size_t>(mp) * kKeyBlock : 0);
    cpu::Scratch<float> s32(pairs ? static_cast<size_t>(mp) * kKeyBlock : 0);
    if (pairs) {
      std::fill(qb.data(), qb.data() + static_cast<size_t>(mp) * dk, bfloat16_t{});
      std::fill(pb.data(), pb.data() + 2 * static_cast<size_t>(mp) * kKeyBlock, bfloat16_t{});
      load_rows_bf16(b, g, q0, q1, dk, qb.data());
    } else {
      load_rows(q, b, g, q0, q1, D, static_cast<C>(scale), qf.data());
    }
    for (int rr = 0; rr < rows; ++rr) {
      m[rr] = sink_of(g, n, rr);
      l[rr] = sinks ? C(1) : C(0);
    }
    const int kend = key_end(q0, q1);
    for (int j0 = 0; j0 < kend; j0 += kKeyBlock) {
      const int kb = std::min(kKeyBlock, kend - j0);
      if (pairs) {
        tile_scores(pairs, mp, dk, rows, j0, kb, qb.data(), s32.data(), sc.data());
        limit(b, g, q0, n, j0, kb, sc.data());
      } else {
        scores(b, g, q0, n, j0, kb, qf.data(), block(k, b, g, j0, kb, D, kf.data()), sc.data());
      }
      for (int rr = 0; rr < rows; ++rr) {
        const C factor = online_step(sc.data() + static_cast<size_t>(rr) * kb, kb, m[rr], l[rr]);
        if (factor != C(1)) {
          C* a = acc.data() + static_cast<size_t>(rr) * dv;
          for (int d = 0; d < Dv; ++d) a[d] *= factor;
        }
      }
      if (pairs) {
        tile_values(pairs, mp, dv, rows, j0, kb, sc.data(), pb.data(), acc.data());
      } else {
        product(false, false, rows, Dv, kb, sc.data(), kb, block(v, b, g, j0, kb, Dv, vf.data()),
                Dv, true, acc.data(), Dv);
      }
    }
    for (int rr = 0; rr < rows; ++rr) {
      const int h = g * repeats() + rr / n, i = q0 + rr % n;
      T* o = out + ((static_cast<size_t>(b) * Hq + h) * Lq + i) * Dv;
      const C* a = acc.data() + static_cast<size_t>(rr) * dv;
      for (int d = 0; d < Dv; ++d) o[d] = static_cast<T>(a[d] / l[rr]);
      if (stats) {
        C* st = stats + ((static_cast<size_t>(b) * Hq + h) * Lq + i) * 2;
        st[0] = m[rr];
        st[1] = l[rr];
      }
    }
  }

  // The gradient of key/value head (b, g): dq of its query heads, dk and dv (summed over them),
  // and per query head the sink's gradient. Per tile of query positions, a first pass over the
  // keys gives each row's maximum m and sum l (the forward's online softmax without the values);
  // the second recomputes each block's weights P = exp(S - m) / l and accumulates
  //   dv += P^T dO,  dS = P * (dO V^T - rowdot(dO, O)),  dq += dS K,  dk += dS^T (scale q).
  void backward(int b, int g, const Rows4<T>& o, const Rows4<T>& dout, const C* stats, T* dq,
                T* dk, T* dv, C* dsinks) const {
    const int R = repeats();
    const int tile = std::max(1, 128 / R);
    const C low = static_cast<C>(lowest_of<T>());
    std::vector<C> dk_acc(static_cast<size_t>(Lk) * D, C(0));
    std::vector<C> dv_acc(static_cast<size_t>(Lk) * Dv, C(0));
    std::vector<C> qf, dof, of, sc, dp, dq_acc, m, l, rowdot;
    std::vector<C> kf(kKeyBlock * static_cast<size_t>(D)), vf(kKeyBlock * static_cast<size_t>(Dv));
    for (int q0 = 0; q0 < Lq; q0 += tile) {
      const int q1 = std::min(Lq, q0 + tile), n = q1 - q0, rows = R * n;
      qf.assign(static_cast<size_t>(rows) * D, C(0));
      dof.assign(static_cast<size_t>(rows) * Dv, C(0));
      of.assign(static_cast<size_t>(rows) * Dv, C(0));
      sc.resize(static_cast<size_t>(rows) * kKeyBlock);
      dp.resize(sc.size());
      dq_acc.assign(static_cast<size_t>(rows) * D, C(0));
      m.resize(rows);
      l.resize(rows);
      rowdot.resize(rows);
      load_rows(q, b, g, q0, q1, D, static_cast<C>(scale), qf.data());
      load_rows(dout, b, g, q0, q1, Dv, C(1), dof.data());
      load_rows(o, b, g, q0, q1, Dv, C(1), of.data());
      for (int rr = 0; rr < rows; ++rr) {
        C dot = 0;
        for (int d = 0; d < Dv; ++d) dot += dof[rr * Dv + d] * of[rr * Dv + d];
        rowdot[rr] = dot;
        if (stats) {  // the forward's
          const size_t row = (static_cast<size_t>(b) * Hq + g * R + rr / n) * Lq + q0 + rr % n;
          m[rr] = stats[row * 2];
          l[rr] = stats[row * 2 + 1];
        } else {
          m[rr] = sink_of(g, n, rr);
          l[rr] = sinks ? C(1) : C(0);
        }
      }
      const int kend = key_end(q0, q1);
      for (int j0 = 0; j0 < (stats ? 0 : kend); j0 += kKeyBlock) {  // pass 1: each row's m, l
        const int kb = std::min(kKeyBlock, kend - j0);
        scores(b, g, q0, n, j0, kb, qf.data(), block(k, b, g, j0, kb, D, kf.data()), sc.data());
        for (int rr = 0; rr < rows; ++rr) {
          online_step(sc.data() + static_cast<size_t>(rr) * kb, kb, m[rr], l[rr]);
        }
      }
      // The weights are exp(s - m) / l: folding log(l) into m would lose it next to a
      // lowest-valued m (a row that sees no key).
      for (int rr = 0; rr < rows; ++rr) l[rr] = C(1) / l[rr];
      for (int j0 = 0; j0 < kend; j0 += kKeyBlock) {  // pass 2: the gradients
        const int kb = std::min(kKeyBlock, kend - j0);
        const C* kp = block(k, b, g, j0, kb, D, kf.data());
        const C* vp = block(v, b, g, j0, kb, Dv, vf.data());
        scores(b, g, q0, n, j0, kb, qf.data(), kp, sc.data());
        product(false, true, rows, kb, Dv, dof.data(), Dv, vp, Dv, false, dp.data(), kb);
        attention_grad_weights(sc.data(), dp.data(), rows, kb, m.data(), l.data(), rowdot.data(),
                               low);  // sc: P, dp: dS
        product(true, false, kb, Dv, rows, sc.data(), kb, dof.data(), Dv, true,
                dv_acc.data() + static_cast<size_t>(j0) * Dv, Dv);
        product(false, false, rows, D, kb, dp.data(), kb, kp, D, true, dq_acc.data(), D);
        product(true, false, kb, D, rows, dp.data(), kb, qf.data(), D, true,
                dk_acc.data() + static_cast<size_t>(j0) * D, D);
      }
      for (int rr = 0; rr < rows; ++rr) {
        const int h = g * R + rr / n, i = q0 + rr % n;
        T* dst = dq + ((static_cast<size_t>(b) * Hq + h) * Lq + i) * D;
        const C* src = dq_acc.data() + static_cast<size_t>(rr) * D;
        for (int d = 0; d < D; ++d) dst[d] = static_cast<T>(src[d] * static_cast<C>(scale));
        // The sink's weight exp(sink - lse), its value 0: dS_sink = -weight * rowdot.
        if (sinks) dsinks[h] -= exp_of(sink_of(g, n, rr) - m[rr]) * l[rr] * rowdot[rr];
      }
    }
    for (int j = 0; j < Lk; ++j) {
      T* kd = dk + ((static_cast<size_t>(b) * Hkv + g) * Lk + j) * D;
      T* vd = dv + ((static_cast<size_t>(b) * Hkv + g) * Lk + j) * Dv;
      for (int d = 0; d < D; ++d) kd[d] = static_cast<T>(dk_acc[static_cast<size_t>(j) * D + d]);
      for (int d = 0; d < Dv; ++d) vd[d] = static_cast<T>(dv_acc[static_cast<size_t>(j) * Dv + d]);
    }
  }

  // Rows j0 .. j0 + kb of head (b, g) as C, kb x width with pitch width: in place when they
  // already are (C's type, consecutive rows), else converted into `scratch` (room for
  // kKeyBlock x width).
  static const C* block(const Rows4<T>& x, int b, int g, int j0, int kb, int width, C* scratch) {
    if constexpr (std::is_same_v<T, C>) {
      if (x.s2 == width) return x.row(b, g, j0);
    }
    for (int j = 0; j < kb; ++j) {
      const T* src = x.row(b, g, j0 + j);
      C* dst = scratch + static_cast<size_t>(j) * width;
      for (int d = 0; d < width; ++d) dst[d] = static_cast<C>(src[d]);
    }
    return scratch;
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
AttentionTask<T> attention_task(const array& q, const array& k, const array& v,
                                const array* mask, const T* sinks, float scale, bool causal) {
  return {rows_of<T>(q), rows_of<T>(k), rows_of<T>(v), q.shape(1), k.shape(1), q.shape(2),
          k.shape(2), q.shape(3), v.shape(3), scale, causal, mask,
          mask && mask->dtype() == bool_, sinks};
}

// Whether bfloat16 attention runs its products on AMX tiles: where the GEMM's products do.
template <typename T>
bool attention_on_tiles(const AttentionTask<T>& task) {
#if defined(__x86_64__)
  return std::is_same_v<T, bfloat16_t> && task.Lq > 1 &&
         cpu::hgemm_kernel<bfloat16_t>() == cpu::HalfKernel::Tiles;
#else
  return false;
#endif
}

template <typename T>
void attention(const AttentionTask<T>& task, int B, array& out, cpu::compute_t<T>* stats) {
  const int Hkv = task.Hkv, Lq = task.Lq;
  // Query tiles of about 64 rows (every repeat of a tile's positions shares its key blocks).
  const int tile = std::max(1, 64 / task.repeats());
  const int tiles = (Lq + tile - 1) / tile;
  T* o = out.data<T>();
  // On tiles, every head's keys and values are put in pairs once, for all its query tiles.
  const bool on_tiles = attention_on_tiles(task);
  const size_t heads = static_cast<size_t>(B) * Hkv;
  const size_t kwords = on_tiles ? size_t(round_up(task.D, 32) / 2) * round_up(task.Lk, 16) : 0;
  const size_t vwords = on_tiles ? size_t(round_up(task.Lk, 32) / 2) * round_up(task.Dv, 16) : 0;
  cpu::Scratch<uint32_t> kpairs(heads * kwords), vpairs(heads * vwords);
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, bfloat16_t>) {
    if (on_tiles) {
      detail::parallel_for(heads, 1, [&](size_t h0, size_t h1) {
        for (size_t h = h0; h < h1; ++h) {
          const int b = static_cast<int>(h / Hkv), g = static_cast<int>(h % Hkv);
          cpu::pairs_of_transpose(task.k.row(b, g, 0), task.k.s2, task.Lk, task.D,
                                  round_up(task.Lk, 16), round_up(task.D, 32),
                                  kpairs.data() + h * kwords, round_up(task.Lk, 16));
          cpu::pairs_of_rows(task.v.row(b, g, 0), task.v.s2, task.Lk, task.Dv,
                             round_up(task.Dv, 16), round_up(task.Lk, 32),
                             vpairs.data() + h * vwords, round_up(task.Dv, 16));
        }
      });
    }
  }
#endif
  detail::parallel_for(heads * tiles, 1, [&](size_t t0, size_t t1) {
#if defined(__x86_64__)
    std::optional<cpu::TileScope> scope;
    if (on_tiles) scope.emplace();
#endif
    for (size_t t = t0; t < t1; ++t) {
      const size_t h = t / tiles;
      const int b = static_cast<int>(h / Hkv), g = static_cast<int>(h % Hkv);
      const int q0 = static_cast<int>(t % tiles) * tile;
      const TilePairs pairs{kpairs.data() + h * kwords, vpairs.data() + h * vwords};
      task.run(b, g, q0, std::min(Lq, q0 + tile), o, stats, on_tiles ? &pairs : nullptr);
    }
  });
}

// The inputs both attention kernels start with: q, k, v (last axis contiguous), the mask and
// the sinks where the primitive has them; `at` is left at the next input.
struct AttentionInputs {
  array q, k, v;
  std::optional<array> mask;
  array sinks;
  AttentionInputs(const std::vector<array>& inputs, bool has_mask, bool has_sinks, size_t& at)
      : q(last_axis_contiguous(inputs[0])),
        k(last_axis_contiguous(inputs[1])),
        v(last_axis_contiguous(inputs[2])),
        sinks(0.0f) {
    at = 3;
    if (has_mask) mask = inputs[at++];
    if (has_sinks) sinks = cpu::ensure_row_contiguous(inputs[at++]);
  }
};

}  // namespace

void ScaledDotProductAttention::eval_cpu(const std::vector<array>& inputs,
                                         std::vector<array>& outputs) {
  size_t at = 0;
  const AttentionInputs in(inputs, has_mask_, has_sinks_, at);
  const array &q = in.q, &k = in.k, &v = in.v, &sinks = in.sinks;
  const std::optional<array>& mask = in.mask;
  for (auto& o : outputs) o.set_data(allocator::malloc(o.nbytes()));
  // Decoding (every key visible to a few rows): attention_decode.h.
  if (!mask && !has_sinks_ && !output_stats_ && (!causal_ || q.shape(2) == 1)) {
    const cpu::DecodeAttention d{
        q.shape(0), q.shape(1), k.shape(1), q.shape(2), k.shape(2), q.shape(3), v.shape(3),
        scale_,
        q.data<void>(), {q.strides(0), q.strides(1), q.strides(2)},
        k.data<void>(), {k.strides(0), k.strides(1), k.strides(2)},
        v.data<void>(), {v.strides(0), v.strides(1), v.strides(2)},
        outputs[0].data<void>()};
    if (cpu::attention_decode(outputs[0].dtype(), d)) return;
  }
  dispatch_floating("scaled_dot_product_attention", outputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = cpu::compute_t<T>;
    attention<T>(attention_task<T>(q, k, v, mask ? &*mask : nullptr,
                                   has_sinks_ ? sinks.data<T>() : nullptr, scale_, causal_),
                 q.shape(0), outputs[0], output_stats_ ? outputs[1].data<C>() : nullptr);
  });
}

void ScaledDotProductAttentionVjp::eval_cpu(const std::vector<array>& inputs,
                                            std::vector<array>& outputs) {
  size_t at = 0;
  const AttentionInputs in(inputs, has_mask_, has_sinks_, at);
  const array &q = in.q, &k = in.k, &v = in.v, &sinks = in.sinks;
  const std::optional<array>& mask = in.mask;
  const array stats = has_stats_ ? cpu::ensure_row_contiguous(inputs[at++]) : array(0.0f);
  const array o = last_axis_contiguous(inputs[at++]);
  const array dout = last_axis_contiguous(inputs[at]);
  for (auto& x : outputs) x.set_data(allocator::malloc(x.nbytes()));
  dispatch_floating("scaled_dot_product_attention", q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = cpu::compute_t<T>;
    const auto task = attention_task<T>(q, k, v, mask ? &*mask : nullptr,
                                        has_sinks_ ? sinks.data<T>() : nullptr, scale_, causal_);
    const int B = q.shape(0), Hkv = task.Hkv, Hq = task.Hq;
    std::vector<C> dsinks(static_cast<size_t>(B) * Hq, C(0));  // per batch entry: no races
    detail::parallel_for(static_cast<size_t>(B) * Hkv, 1, [&](size_t t0, size_t t1) {
      for (size_t t = t0; t < t1; ++t) {
        const int b = static_cast<int>(t / Hkv), g = static_cast<int>(t % Hkv);
        task.backward(b, g, rows_of<T>(o), rows_of<T>(dout),
                      has_stats_ ? stats.data<C>() : nullptr, outputs[0].data<T>(),
                      outputs[1].data<T>(), outputs[2].data<T>(),
                      dsinks.data() + static_cast<size_t>(b) * Hq);
      }
    });
    if (has_sinks_) {
      T* ds = outputs[3].data<T>();
      for (int h = 0; h < Hq; ++h) {
        C sum = 0;
        for (int b = 0; b < B; ++b) sum += dsinks[static_cast<size_t>(b) * Hq + h];
        ds[h] = static_cast<T>(sum);
      }
    }
  });
}

}  // namespace tessera
