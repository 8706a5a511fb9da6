// CPU kernels of Convolution, ConvWeightGrad and ConvInputGrad: im2col into a small per-thread
// buffer (a block of output positions at a time, so it stays in cache) feeding OpenBLAS gemm, on
// our pool. Per group g, with cols the (positions x taps * C/G) patch matrix:
//   forward      y[:, g]  = cols @ w[g]^T
//   weight grad  dw[g]    = sum over blocks of dy[:, g]^T @ cols
//   input grad   dx      += col2im(dy[:, g] @ w[g]), or, with unit strides and no input
//                dilation, the forward kernel over dy with w's channels swapped and taps flipped
// A 1x1 kernel that reads every input position once in order (stride 1, no padding, no
// dilation) uses the input itself as cols. float16 / bfloat16 compute in float32 and round once.
// Every block size and the split of the weight gradient's sum are functions of the shapes only,
// never of the pool size, so results do not depend on the thread count.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/cpu/blas.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/elementwise.h"
#include "ops/conv.h"

namespace tessera {

namespace {

// Target size of one block's patch matrix, and the most partial sums of a weight gradient.
constexpr size_t kColsBytes = 256 * 1024;
constexpr int kMaxSlabs = 16;
constexpr size_t kSlabBytes = 64u << 20;

// The geometry, padded to three spatial dims with leading unit dims.
struct Geometry {
  int64_t n = 0, c = 0, o = 0, groups = 1, cg = 0, og = 0;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  // tap[d][o * k[d] + j]: the input index along d that output o reads for kernel tap j, or -1
  // (padding, or a zero the input dilation inserted).
  std::vector<int32_t> tap[3];
  int64_t in_pixels = 1, out_pixels = 1, taps = 1;
  bool identity = false;  // cols would be the input itself

  int64_t kc() const { return taps * cg; }
  int64_t rows() const { return n * out_pixels; }
};

Geometry geometry(const Shape& x, const Shape& w, const Shape& y, const ConvParams& p) {
  Geometry g;
  const int dims = static_cast<int>(x.size()) - 2, pad = 3 - dims;
  g.n = x[0];
  g.c = x.back();
  g.o = w[0];
  g.groups = p.groups;
  g.cg = g.c / g.groups;
  g.og = g.o / g.groups;
  for (int d = 0; d < 3; ++d) {
    const int sd = d - pad;  // index into the spatial parameters, < 0 for padded dims
    if (sd >= 0) {
      g.in[d] = x[sd + 1];
      g.k[d] = w[sd + 1];
      g.out[d] = y[sd + 1];
    }
    g.tap[d].assign(static_cast<size_t>(g.out[d] * g.k[d]), -1);
    for (int64_t o = 0; o < g.out[d]; ++o) {
      for (int64_t j = 0; j < g.k[d]; ++j) {
        int64_t pos = o, idil = 1;
        if (sd >= 0) {
          const int64_t jj = p.flip ? g.k[d] - 1 - j : j;
          pos = o * p.stride[sd] + jj * p.kernel_dilation[sd] - p.padding_lo[sd];
          idil = p.input_dilation[sd];
        }
        if (pos < 0 || pos % idil != 0 || pos / idil >= g.in[d]) continue;
        g.tap[d][o * g.k[d] + j] = static_cast<int32_t>(pos / idil);
      }
    }
    g.in_pixels *= g.in[d];
    g.out_pixels *= g.out[d];
    g.taps *= g.k[d];
  }
  g.identity = g.taps == 1;
  for (int d = 0; d < 3 && g.identity; ++d) {
    g.identity = g.out[d] == g.in[d];
    for (int64_t o = 0; o < g.out[d] && g.identity; ++o) g.identity = g.tap[d][o] == o;
  }
  return g;
}

// Output positions per block: the patch matrix near kColsBytes, at least 16 rows.
int64_t block_rows(const Geometry& g, size_t elem) {
  const int64_t row_bytes = std::max<int64_t>(1, g.kc() * static_cast<int64_t>(elem));
  return std::clamp<int64_t>(static_cast<int64_t>(kColsBytes) / row_bytes, 16,
                             std::max<int64_t>(g.rows(), 16));
}

// Visit every (tap, input element) pair of output row r in group `group`: f(col, src) for each
// tap whose input exists (src: element offset of the tap's first channel in x, col: the tap's
// first column in the row of cols), gap(col, count) for each run of missing taps.
template <typename F, typename Gap>
void for_each_tap(const Geometry& g, int64_t r, int64_t group, F f, Gap gap) {
  const int64_t n = r / g.out_pixels, pix = r % g.out_pixels;
  const int64_t o2 = pix % g.out[2], o1 = (pix / g.out[2]) % g.out[1], o0 = pix / (g.out[2] * g.out[1]);
  const int32_t* t0 = g.tap[0].data() + o0 * g.k[0];
  const int32_t* t1 = g.tap[1].data() + o1 * g.k[1];
  const int32_t* t2 = g.tap[2].data() + o2 * g.k[2];
  const int64_t base = n * g.in_pixels * g.c + group * g.cg;
  const int64_t plane = g.k[1] * g.k[2] * g.cg, line = g.k[2] * g.cg;
  int64_t col = 0;
  for (int64_t j0 = 0; j0 < g.k[0]; ++j0, col += plane) {
    if (t0[j0] < 0) {
      gap(col, plane);
      continue;
    }
    const int64_t s0 = base + t0[j0] * g.in[1] * g.in[2] * g.c;
    for (int64_t j1 = 0; j1 < g.k[1]; ++j1) {
      const int64_t c1 = col + j1 * line;
      if (t1[j1] < 0) {
        gap(c1, line);
        continue;
      }
      const int64_t s1 = s0 + t1[j1] * g.in[2] * g.c;
      for (int64_t j2 = 0; j2 < g.k[2]; ++j2) {
        const int64_t c2 = c1 + j2 * g.cg;
        if (t2[j2] < 0) {
          gap(c2, g.cg);
        } else {
          f(c2, s1 + t2[j2] * g.c);
        }
      }
    }
  }
}

template <typename A, typename T>
A to_compute(T v) {
  if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
    return static_cast<A>(static_cast<float>(v));
  } else {
    return static_cast<A>(v);
  }
}

// Rows [r0, r1) of group `group`'s patch matrix, converted to A.
template <typename T, typename A>
void im2col(const Geometry& g, const T* x, int64_t group, int64_t r0, int64_t r1, A* cols) {
  const int64_t kc = g.kc(), cg = g.cg;
  for (int64_t r = r0; r < r1; ++r) {
    A* row = cols + (r - r0) * kc;
    for_each_tap(
        g, r, group,
        [&](int64_t col, int64_t src) {
          const T* s = x + src;
          A* d = row + col;
          for (int64_t c = 0; c < cg; ++c) d[c] = to_compute<A>(s[c]);
        },
        [&](int64_t col, int64_t count) { std::fill_n(row + col, count, A(0)); });
  }
}

// dx += the patch-matrix rows [r0, r1) of group `group` scattered back to their input elements.
template <typename A>
void col2im(const Geometry& g, const A* cols, int64_t group, int64_t r0, int64_t r1, A* dx) {
  const int64_t kc = g.kc(), cg = g.cg;
  for (int64_t r = r0; r < r1; ++r) {
    const A* row = cols + (r - r0) * kc;
    for_each_tap(
        g, r, group,
        [&](int64_t col, int64_t dst) {
          A* d = dx + dst;
          const A* s = row + col;
          for (int64_t c = 0; c < cg; ++c) d[c] += s[c];
        },
        [](int64_t, int64_t) {});
  }
}

// ---- the forward product's own kernel (x86-64 with AVX2 and FMA, float32, O/G a multiple of 16)
// OpenBLAS reaches about half of this machine's peak on these shapes (a tall, 64-column product
// with K = taps * C/G): a 6 x 16 register tile over the whole K, the weights packed once per call
// into K x 16 panels, the patch rows read in place, does better (docs/ops.md, Performance).

// w [n x k] (row ldw) as n / 16 panels of k rows of 16: panel p, row kk holds w[16p .. 16p+15][kk].
std::vector<float> pack_panels(const float* w, int64_t n, int64_t k, int64_t ldw) {
  std::vector<float> out(static_cast<size_t>(n * k));
  for (int64_t p = 0; p < n / 16; ++p) {
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t j = 0; j < 16; ++j) out[(p * k + kk) * 16 + j] = w[(16 * p + j) * ldw + kk];
    }
  }
  return out;
}

#if defined(__x86_64__)

// c[MR x 16] = a[MR x k] (rows lda apart) @ one k x 16 panel.
template <int MR>
__attribute__((target("avx2,fma"))) void tile(const float* a, int64_t lda, const float* b,
                                              int64_t k, float* c, int64_t ldc) {
  __m256 acc[MR][2];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int64_t kk = 0; kk < k; ++kk) {
    const __m256 b0 = _mm256_loadu_ps(b + kk * 16), b1 = _mm256_loadu_ps(b + kk * 16 + 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m256 x = _mm256_broadcast_ss(a + i * lda + kk);
      acc[i][0] = _mm256_fmadd_ps(x, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(x, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    _mm256_storeu_ps(c + i * ldc, acc[i][0]);
    _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
  }
}

// c[m x n] = a[m x k] @ the packed panels (n / 16 of them).
void gemm_panels(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* panels,
                 float* c, int64_t ldc) {
  int64_t r = 0;
  for (; r + 6 <= m; r += 6) {
    for (int64_t p = 0; p < n / 16; ++p) {
      tile<6>(a + r * lda, lda, panels + p * k * 16, k, c + r * ldc + 16 * p, ldc);
    }
  }
  for (int64_t p = 0; p < n / 16 && r < m; ++p) {
    const float* a0 = a + r * lda;
    const float* b = panels + p * k * 16;
    float* c0 = c + r * ldc + 16 * p;
    switch (m - r) {
      case 1: tile<1>(a0, lda, b, k, c0, ldc); break;
      case 2: tile<2>(a0, lda, b, k, c0, ldc); break;
      case 3: tile<3>(a0, lda, b, k, c0, ldc); break;
      case 4: tile<4>(a0, lda, b, k, c0, ldc); break;
      default: tile<5>(a0, lda, b, k, c0, ldc); break;
    }
  }
}
#else
void gemm_panels(int64_t, int64_t, int64_t, const float*, int64_t, const float*, float*, int64_t) {}
#endif

template <typename A>
A* scratch(std::vector<A>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// x as a row-contiguous array of dtype A (itself when it already is one).
array as_compute(const array& x, Dtype a) {
  if (x.dtype() == a) return cpu::ensure_row_contiguous(x);
  array out(allocator::malloc(x.size() * size_of(a)), x.shape(), a, allocator::free);
  cpu::copy_into(x, out);
  return out;
}

template <typename A>
Dtype compute_dtype() {
  return std::is_same_v<A, double> ? float64 : float32;
}

template <typename T, typename A>
void forward(const array& x_in, const array& w_in, array& out, const Geometry& g) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  T* y = out.data<T>();
  if (g.kc() == 0) {
    std::fill_n(y, out.size(), T(0.0f));
    return;
  }
  const array x = cpu::ensure_row_contiguous(x_in);
  const array w = as_compute(w_in, compute_dtype<A>());
  const T* xp = x.data<T>();
  const A* wp = w.data<A>();
  const int64_t kc = g.kc();
  const bool direct = g.identity && std::is_same_v<T, A>;
  // Our kernel for float32 products whose group width is a multiple of 16.
  std::vector<std::vector<float>> panels;
  if constexpr (std::is_same_v<A, float>) {
    if (g.og % 16 == 0 && cpu::cpu_has_avx2_fma()) {
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        panels.push_back(pack_panels(wp + grp * g.og * kc, g.og, kc, kc));
      }
    }
  }
  cpu::parallel_blocks(static_cast<size_t>(g.rows()), static_cast<size_t>(block_rows(g, sizeof(A))),
                       [&](size_t lo, size_t hi) {
    thread_local std::vector<A> cols_buf, y_buf;
    const int m = static_cast<int>(hi - lo);
    A* yb = std::is_same_v<T, A> ? reinterpret_cast<A*>(y) + lo * g.o
                                 : scratch(y_buf, static_cast<size_t>(m * g.o));
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const A* a;
      int lda;
      if (direct) {
        a = reinterpret_cast<const A*>(xp) + lo * g.c + grp * g.cg;
        lda = static_cast<int>(g.c);
      } else {
        A* cols = scratch(cols_buf, static_cast<size_t>(m * kc));
        im2col<T, A>(g, xp, grp, lo, hi, cols);
        a = cols;
        lda = static_cast<int>(kc);
      }
      if (!panels.empty()) {
        if constexpr (std::is_same_v<A, float>) {
          gemm_panels(m, g.og, kc, a, lda, panels[grp].data(), yb + grp * g.og, g.o);
        }
      } else {
        cpu::gemm(false, true, m, static_cast<int>(g.og), static_cast<int>(kc), 1.0f, a, lda,
                  wp + grp * g.og * kc, static_cast<int>(kc), 0.0f, yb + grp * g.og,
                  static_cast<int>(g.o));
      }
    }
    if constexpr (!std::is_same_v<T, A>) {
      T* dst = y + lo * g.o;
      for (int64_t i = 0; i < m * g.o; ++i) dst[i] = T(static_cast<float>(yb[i]));
    }
  });
}

template <typename T, typename A>
void weight_grad(const array& x_in, const array& dy_in, array& out, const Geometry& g) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const size_t wsize = out.size();
  std::vector<A> total(wsize, A(0));
  const int64_t kc = g.kc(), rows = g.rows();
  if (rows > 0 && kc > 0) {
    const array x = cpu::ensure_row_contiguous(x_in);
    const array dy = as_compute(dy_in, compute_dtype<A>());
    const T* xp = x.data<T>();
    const A* dyp = dy.data<A>();
    const bool direct = g.identity && std::is_same_v<T, A>;
    const int64_t block = block_rows(g, sizeof(A));
    const int64_t blocks = (rows + block - 1) / block;
    const int64_t slabs = std::clamp<int64_t>(
        static_cast<int64_t>(kSlabBytes / (wsize * sizeof(A))), 1, std::min<int64_t>(kMaxSlabs, blocks));
    std::vector<A> partial(static_cast<size_t>(slabs) * wsize, A(0));
    cpu::parallel_blocks(static_cast<size_t>(slabs), 1, [&](size_t s0, size_t s1) {
      thread_local std::vector<A> cols_buf;
      for (size_t s = s0; s < s1; ++s) {
        A* acc = partial.data() + s * wsize;
        for (int64_t b = blocks * static_cast<int64_t>(s) / slabs;
             b < blocks * static_cast<int64_t>(s + 1) / slabs; ++b) {
          const int64_t lo = b * block, hi = std::min(rows, lo + block);
          const int m = static_cast<int>(hi - lo);
          for (int64_t grp = 0; grp < g.groups; ++grp) {
            const A* cols;
            int ldc;
            if (direct) {
              cols = reinterpret_cast<const A*>(xp) + lo * g.c + grp * g.cg;
              ldc = static_cast<int>(g.c);
            } else {
              A* buf = scratch(cols_buf, static_cast<size_t>(m * kc));
              im2col<T, A>(g, xp, grp, lo, hi, buf);
              cols = buf;
              ldc = static_cast<int>(kc);
            }
            cpu::gemm(true, false, static_cast<int>(g.og), static_cast<int>(kc), m, 1.0f,
                      dyp + lo * g.o + grp * g.og, static_cast<int>(g.o), cols, ldc, 1.0f,
                      acc + grp * g.og * kc, static_cast<int>(kc));
          }
        }
      }
    });
    for (int64_t s = 0; s < slabs; ++s) {
      const A* p = partial.data() + s * wsize;
      for (size_t i = 0; i < wsize; ++i) total[i] += p[i];
    }
  }
  T* dst = out.data<T>();
  if constexpr (std::is_same_v<T, A>) {
    std::copy(total.begin(), total.end(), dst);
  } else {
    for (size_t i = 0; i < wsize; ++i) dst[i] = T(static_cast<float>(total[i]));
  }
}

template <typename T, typename A>
void input_grad(const array& dy_in, const array& w_in, array& out, const Geometry& g) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const size_t xsize = out.size();
  std::vector<A> tmp;
  A* dx = std::is_same_v<T, A> ? reinterpret_cast<A*>(out.data<T>())
                               : scratch(tmp, xsize);
  std::fill_n(dx, xsize, A(0));
  const int64_t kc = g.kc();
  if (kc > 0 && g.rows() > 0 && g.og > 0) {
    const array dy = as_compute(dy_in, compute_dtype<A>());
    const array w = as_compute(w_in, compute_dtype<A>());
    const A* dyp = dy.data<A>();
    const A* wp = w.data<A>();
    const int64_t block = block_rows(g, sizeof(A));
    if (g.identity) {
      // dx rows are dy rows times w: one gemm per block and group, into dx's channel slice.
      cpu::parallel_blocks(static_cast<size_t>(g.rows()), static_cast<size_t>(block),
                           [&](size_t lo, size_t hi) {
        for (int64_t grp = 0; grp < g.groups; ++grp) {
          cpu::gemm(false, false, static_cast<int>(hi - lo), static_cast<int>(g.cg),
                    static_cast<int>(g.og), 1.0f, dyp + lo * g.o + grp * g.og,
                    static_cast<int>(g.o), wp + grp * g.og * kc, static_cast<int>(kc), 0.0f,
                    dx + lo * g.c + grp * g.cg, static_cast<int>(g.c));
        }
      });
    } else {
      // Images write disjoint parts of dx: one image per task, its blocks in order.
      cpu::parallel_blocks(static_cast<size_t>(g.n), 1, [&](size_t n0, size_t n1) {
        thread_local std::vector<A> cols_buf;
        for (size_t n = n0; n < n1; ++n) {
          const int64_t first = static_cast<int64_t>(n) * g.out_pixels;
          for (int64_t lo = first; lo < first + g.out_pixels; lo += block) {
            const int64_t hi = std::min(first + g.out_pixels, lo + block);
            const int m = static_cast<int>(hi - lo);
            A* cols = scratch(cols_buf, static_cast<size_t>(m * kc));
            for (int64_t grp = 0; grp < g.groups; ++grp) {
              cpu::gemm(false, false, m, static_cast<int>(kc), static_cast<int>(g.og), 1.0f,
                        dyp + lo * g.o + grp * g.og, static_cast<int>(g.o), wp + grp * g.og * kc,
                        static_cast<int>(kc), 0.0f, cols, static_cast<int>(kc));
              col2im<A>(g, cols, grp, lo, hi, dx);
            }
          }
        }
      });
    }
  }
  if constexpr (!std::is_same_v<T, A>) {
    T* dst = out.data<T>();
    for (size_t i = 0; i < xsize; ++i) dst[i] = T(static_cast<float>(dx[i]));
  }
}

// Run kernel<T, A> for the output's dtype.
template <template <typename, typename> class K>
void dispatch(const char* op, Dtype dt, const array& a, const array& b, array& out,
              const Geometry& g) {
  if (dt == float32) {
    K<float, float>::run(a, b, out, g);
  } else if (dt == float64) {
    K<double, double>::run(a, b, out, g);
  } else if (dt == float16) {
    K<float16_t, float>::run(a, b, out, g);
  } else if (dt == bfloat16) {
    K<bfloat16_t, float>::run(a, b, out, g);
  } else {
    throw std::invalid_argument(std::string("[") + op + "] no CPU kernel for dtype " +
                                dtype_name(dt));
  }
}

template <typename T, typename A>
struct Forward {
  static void run(const array& x, const array& w, array& out, const Geometry& g) {
    forward<T, A>(x, w, out, g);
  }
};
template <typename T, typename A>
struct WeightGrad {
  static void run(const array& x, const array& dy, array& out, const Geometry& g) {
    weight_grad<T, A>(x, dy, out, g);
  }
};
template <typename T, typename A>
struct InputGrad {
  static void run(const array& dy, const array& w, array& out, const Geometry& g) {
    input_grad<T, A>(dy, w, out, g);
  }
};

}  // namespace

void Convolution::eval_cpu(const std::vector<array>& inputs, array& out) {
  const Geometry g = geometry(inputs[0].shape(), inputs[1].shape(), out.shape(), params_);
  dispatch<Forward>("conv", out.dtype(), inputs[0], inputs[1], out, g);
}

void ConvWeightGrad::eval_cpu(const std::vector<array>& inputs, array& out) {
  const Geometry g = geometry(inputs[0].shape(), out.shape(), inputs[1].shape(), params_);
  dispatch<WeightGrad>("conv", out.dtype(), inputs[0], inputs[1], out, g);
}

namespace {

// With unit strides and no input dilation, dx is itself a convolution -- of dy with the kernel's
// channels swapped within each group, the taps flipped, and padding (k-1)*d - p -- so it runs as
// the forward kernel (gathered patches feeding gemm) instead of gemm then a scatter-add.
bool input_grad_as_forward(const ConvParams& p) {
  for (size_t i = 0; i < p.stride.size(); ++i) {
    if (p.stride[i] != 1 || p.input_dilation[i] != 1) return false;
  }
  return true;
}

// w [O, k..., C/G] -> [C, k..., O/G]: per group, output and input channels exchanged; in the
// compute dtype (float32 for the half types).
array swap_kernel_channels(const array& w_in, int groups) {
  const Dtype a = w_in.dtype() == float64 ? float64 : float32;
  const array w = as_compute(w_in, a);
  const int64_t o = w.shape(0), cg = w.shape(-1), og = o / groups;
  const int64_t taps = static_cast<int64_t>(w.size()) / (o * cg);
  Shape shape = w.shape();
  shape.front() = static_cast<int32_t>(cg * groups);
  shape.back() = static_cast<int32_t>(og);
  array out(allocator::malloc(w.nbytes()), shape, a, allocator::free);
  auto run = [&](auto tag) {
    using A = decltype(tag);
    const A* src = w.data<A>();
    A* dst = out.data<A>();
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t oo = 0; oo < og; ++oo)
        for (int64_t t = 0; t < taps; ++t)
          for (int64_t c = 0; c < cg; ++c)
            dst[((g * cg + c) * taps + t) * og + oo] = src[((g * og + oo) * taps + t) * cg + c];
  };
  if (a == float64) run(double{});
  else run(float{});
  return out;
}

}  // namespace

void ConvInputGrad::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array &dy = inputs[0], &w = inputs[1];
  ConvParams p = params_;
  bool as_forward = input_grad_as_forward(params_);
  p.flip = !params_.flip;
  for (size_t i = 0; i < p.stride.size() && as_forward; ++i) {
    const int d = static_cast<int>(i) + 1;
    const int64_t k = (w.shape(d) - 1) * static_cast<int64_t>(params_.kernel_dilation[i]) + 1;
    const int64_t lo = k - 1 - params_.padding_lo[i];
    const int64_t hi = out.shape(d) - dy.shape(d) + k - 1 - lo;
    as_forward = lo >= INT32_MIN && lo <= INT32_MAX && hi >= INT32_MIN && hi <= INT32_MAX;
    p.padding_lo[i] = static_cast<int>(lo);
    p.padding_hi[i] = static_cast<int>(hi);
  }
  if (as_forward) {
    const array wt = swap_kernel_channels(w, params_.groups);
    const Geometry g = geometry(dy.shape(), wt.shape(), out.shape(), p);
    dispatch<Forward>("conv", out.dtype(), dy, wt, out, g);
    return;
  }
  const Geometry g = geometry(out.shape(), w.shape(), dy.shape(), params_);
  dispatch<InputGrad>("conv", out.dtype(), dy, w, out, g);
}

}  // namespace tessera
