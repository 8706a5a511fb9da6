// CPU kernels of Matmul, AddMM, GatherMM and SegmentedMM. float32 products of at least 8 rows and
// 16 columns run on Tessera's own GEMM (gemm.h: bits independent of the pool and the CPU's vector
// width) where the CPU has AVX2 + FMA; the rest (float64, complex64, matrix-vector shapes, small
// batched products, other CPUs) on OpenBLAS gemm per batch. Inputs whose last two dims are row-
// or column-contiguous (any row/column pitch, any batch strides, broadcast included) are read as
// they are (NoTrans / Trans); other layouts are copied first. float16/bfloat16 products of at
// most 16 rows read the weights in their own dtype (half_gemm.h); larger ones run on Tessera's
// GEMM packing from the half operands (bfloat16 through AMX tiles or vdpbf16ps pairs where the
// CPU has them, otherwise widened to float32 as they are packed: gemm.h's hgemm_kernel), or,
// where it has no kernel for the shape, through float32 copies on OpenBLAS; all accumulate in
// float32 and are rounded once.

#include <algorithm>
#include <climits>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "backend/cpu/blas.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/half_gemm.h"
#include "core/thread_pool.h"
#include "ops/linalg.h"

namespace tessera {

namespace {

// OpenBLAS on one thread from the moment libtessera loads (blas.h says why). Not at the first
// product: OpenBLAS starts its thread servers as it loads and they spin for ~0.1 s before they
// sleep, taking a core from the pool; on 2 cores every parallel kernel of a process's first
// 100-200 ms ran ~10x slower (a 256 x 512 maximum: 120 us instead of 10). Setting one thread
// sends them to sleep at once. (OpenBLAS's own initialiser has run: it is a dependency.)
[[maybe_unused]] const bool g_blas_single_threaded = [] {
  TESSERA_BLAS(openblas_set_num_threads)(1);
  return true;
}();

// Below this many multiply-adds (M*N*K) a product runs as one call; batches of such small
// products are spread over our pool instead.
constexpr double kSmallGemmWork = 65536.0 * 4.0;
// Larger products are cut into blocks of output rows (a multiple of every OpenBLAS kernel's row
// unroll) that our pool shares out. OpenBLAS itself runs on one thread: its own threading
// changes the bits of the result with the thread count (measured: 1024x1000x1024 float32 gives
// different bytes with OPENBLAS_NUM_THREADS=1 and 2), and ranks on hosts with different CPU
// counts must compute the same values. Each output row's arithmetic does not depend on which
// block it is in, so the result depends on the shapes alone.
constexpr int kRowBlockUnit = 64;
constexpr int kMaxRowBlocks = 16;

// Row-block height for an m-row product: a function of m only, never of the pool size.
int row_block(int m) {
  const int units = (m + kRowBlockUnit - 1) / kRowBlockUnit;
  return kRowBlockUnit * ((units + kMaxRowBlocks - 1) / kMaxRowBlocks);
}

struct BlasLayout {
  bool trans;
  int64_t ld;
};

// How BLAS can read a rows x cols matrix with element strides (sr, sc), if it can.
std::optional<BlasLayout> blas_layout(int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
  if ((cols == 1 || sc == 1) && (rows == 1 || sr >= cols) && (rows == 1 || sr <= INT_MAX)) {
    return BlasLayout{false, rows == 1 ? std::max<int64_t>(cols, 1) : sr};
  }
  if ((rows == 1 || sr == 1) && (cols == 1 || sc >= rows) && (cols == 1 || sc <= INT_MAX)) {
    return BlasLayout{true, cols == 1 ? std::max<int64_t>(rows, 1) : sc};
  }
  return std::nullopt;
}

// One operand ready for BLAS: the array (maybe a contiguous copy), its layout and the element
// offset of each batch's matrix.
struct Operand {
  array arr;
  BlasLayout layout;
  std::vector<int64_t> batch_offsets;
};

Operand prepare(const array& x, const Shape& batch_shape, size_t batch) {
  int nd = static_cast<int>(x.ndim());
  int64_t rows = x.shape(nd - 2), cols = x.shape(nd - 1);
  auto layout = blas_layout(rows, cols, x.strides(nd - 2), x.strides(nd - 1));
  array arr = x;
  if (!layout) {
    arr = cpu::ensure_row_contiguous(x);
    layout = blas_layout(rows, cols, arr.strides(nd - 2), arr.strides(nd - 1));
  }
  // Batch strides aligned to the right of the output's batch dims (0 where x has none).
  const int nb = static_cast<int>(batch_shape.size());
  Strides bst(nb, 0);
  for (int i = 0; i < nd - 2; ++i) {
    int d = nb - (nd - 2) + i;
    bst[d] = x.shape(i) == 1 ? 0 : arr.strides(i);
  }
  std::vector<int64_t> offsets(batch, 0);
  std::vector<int32_t> idx(nb, 0);
  int64_t off = 0;
  for (size_t b = 0; b < batch; ++b) {
    offsets[b] = off;
    for (int d = nb - 1; d >= 0; --d) {
      off += bst[d];
      if (++idx[d] < batch_shape[d]) break;
      off -= bst[d] * batch_shape[d];
      idx[d] = 0;
    }
  }
  return Operand{std::move(arr), *layout, std::move(offsets)};
}

// The matrices of a gathered product (GatherMM): flat indices into a's and b's own batches, one
// pair per output matrix.
struct Gathered {
  const uint32_t* lhs;
  const uint32_t* rhs;
};

// x prepared over its own batch, its offsets then picked by `index` (one per output matrix).
Operand prepare_gathered(const array& x, const uint32_t* index, size_t batch) {
  Shape own(x.shape().begin(), x.shape().end() - 2);
  Operand p = prepare(x, own, detail::shape_size(own));
  std::vector<int64_t> picked(batch);
  for (size_t i = 0; i < batch; ++i) picked[i] = p.batch_offsets[index[i]];
  p.batch_offsets = std::move(picked);
  return p;
}

// The operands of out's products (batch matrices of m x n), ready for BLAS; with `gathered`,
// out's matrix i is a's lhs[i] times b's rhs[i]. One b for every batch and a's matrices stacked
// row after row ((..., M, K) @ (K, N) as compile traces it, b broadcast) become one product of
// batch * M rows.
struct Products {
  Operand pa, pb;
  int m, n, k;
  size_t batch;
};

Products prepare_products(const array& a, const array& b, const array& out, const Gathered* gathered) {
  const int nd = static_cast<int>(out.ndim());
  int m = out.shape(nd - 2);
  const int n = out.shape(nd - 1);
  const int k = a.shape(-1);
  Shape batch_shape(out.shape().begin(), out.shape().end() - 2);
  size_t batch = detail::shape_size(batch_shape);
  Operand pa = gathered ? prepare_gathered(a, gathered->lhs, batch) : prepare(a, batch_shape, batch);
  Operand pb = gathered ? prepare_gathered(b, gathered->rhs, batch) : prepare(b, batch_shape, batch);
  if (batch > 1 && !pa.layout.trans &&
      static_cast<int64_t>(batch) * m <= std::numeric_limits<int>::max()) {
    bool stacked = true;
    const int64_t step = static_cast<int64_t>(m) * pa.layout.ld;
    for (size_t i = 1; stacked && i < batch; ++i) {
      stacked = pb.batch_offsets[i] == pb.batch_offsets[0] &&
                pa.batch_offsets[i] == pa.batch_offsets[0] + static_cast<int64_t>(i) * step;
    }
    if (stacked) {
      m *= static_cast<int>(batch);
      batch = 1;
    }
  }
  return Products{std::move(pa), std::move(pb), m, n, k, batch};
}

// out (row-contiguous, of dtype T, already holding c when beta != 0) = alpha*a@b + beta*out;
// with `gathered`, out's matrix i is a's lhs[i] times b's rhs[i].
template <typename T>
void batched_gemm(const array& a, const array& b, array& out, float alpha, float beta,
                  const Gathered* gathered = nullptr) {
  Products pr = prepare_products(a, b, out, gathered);
  const Operand& pa = pr.pa;
  const Operand& pb = pr.pb;
  const int m = pr.m, n = pr.n, k = pr.k;
  const size_t batch = pr.batch;
  const T* ap = pa.arr.template data<T>();
  const T* bp = pb.arr.template data<T>();
  T* cp = out.data<T>();
  const size_t mat = static_cast<size_t>(m) * static_cast<size_t>(n);
  // Rows [r0, r1) of batch i. Row r of A starts at r * lda (NoTrans) or at column r (Trans).
  auto rows = [&](size_t i, int r0, int r1) {
    const int64_t a_row = pa.layout.trans ? 1 : pa.layout.ld;
    cpu::gemm(pa.layout.trans, pb.layout.trans, r1 - r0, n, k, alpha,
         ap + pa.batch_offsets[i] + r0 * a_row, static_cast<int>(pa.layout.ld),
         bp + pb.batch_offsets[i], static_cast<int>(pb.layout.ld), beta,
         cp + i * mat + static_cast<size_t>(r0) * n, n);
  };
  const double work = static_cast<double>(m) * n * k;
  if (work < kSmallGemmWork) {
    size_t grain = std::max<size_t>(1, static_cast<size_t>(kSmallGemmWork / std::max(work, 1.0)));
    detail::parallel_for(batch, grain, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) rows(i, 0, m);
    });
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (cpu::gemm_serves(m, n) && cpu::gemm_supported()) {
      for (size_t i = 0; i < batch; ++i) {
        cpu::sgemm(pa.layout.trans, pb.layout.trans, m, n, k, alpha, ap + pa.batch_offsets[i],
                   pa.layout.ld, bp + pb.batch_offsets[i], pb.layout.ld, beta, cp + i * mat, n);
      }
      return;
    }
  }
  const int block = row_block(m);
  for (size_t i = 0; i < batch; ++i) {
    cpu::parallel_blocks(static_cast<size_t>(m), static_cast<size_t>(block), [&](size_t lo, size_t hi) {
      rows(i, static_cast<int>(lo), static_cast<int>(hi));
    });
  }
}

// A row-contiguous float32 copy of x (any layout, any dtype).
array to_float32(const array& x) {
  array out(allocator::malloc(x.size() * sizeof(float)), x.shape(), float32, allocator::free);
  cpu::copy_into(x, out);
  return out;
}

// out = beta * out, elementwise (the K == 0 product is zero).
void scale_in_place(array& out, float beta) {
  detail::dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, complex64_t> || std::is_same_v<T, float16_t> ||
                  std::is_same_v<T, bfloat16_t>) {
      T* p = out.data<T>();
      for (size_t i = 0; i < out.size(); ++i) {
        if constexpr (std::is_same_v<T, double>) {
          p[i] = static_cast<double>(beta) * p[i];
        } else if constexpr (std::is_same_v<T, complex64_t>) {
          p[i] = beta * p[i];
        } else {
          p[i] = T(beta * static_cast<float>(p[i]));
        }
      }
    }
  });
}

// A half-precision product of at most kHalfSkinnyRows rows per matrix (decode steps): the
// weights read once in their own dtype (half_gemm.h); false for taller products.
template <typename T>
bool half_skinny(const array& a, const array& b, array& out, float alpha, float beta,
                 const Gathered* gathered) {
  const int nd = static_cast<int>(out.ndim());
  const int m = out.shape(nd - 2), n = out.shape(nd - 1), k = a.shape(-1);
  if (m > cpu::kHalfSkinnyRows) return false;
  Shape batch_shape(out.shape().begin(), out.shape().end() - 2);
  const size_t batch = detail::shape_size(batch_shape);
  auto prep = [&](const array& x, const uint32_t* index) {
    return index ? prepare_gathered(x, index, batch) : prepare(x, batch_shape, batch);
  };
  // a's rows must be contiguous (a small copy otherwise).
  Operand pa = prep(a, gathered ? gathered->lhs : nullptr);
  if (pa.layout.trans) pa = prep(cpu::ensure_row_contiguous(a), gathered ? gathered->lhs : nullptr);
  const Operand pb = prep(b, gathered ? gathered->rhs : nullptr);
  const int64_t lda = pa.layout.ld;
  const T* ap = pa.arr.template data<T>();
  const T* bp = pb.arr.template data<T>();
  T* cp = out.data<T>();
  for (size_t i = 0; i < batch; ++i) {
    cpu::half_skinny_gemm<T>(m, n, k, alpha, ap + pa.batch_offsets[i], lda,
                             bp + pb.batch_offsets[i], pb.layout.ld, pb.layout.trans, beta,
                             cp + i * static_cast<size_t>(m) * n, n);
  }
  return true;
}

// A half-precision product of more rows on Tessera's GEMM (gemm.h: the operands packed from their
// own dtype, by gemm.h's hgemm_kernel) into out32 (float32, holding c when beta != 0); false when
// the shape or the CPU has no kernel there.
template <typename T>
bool half_gemm(const array& a, const array& b, array& out32, float alpha, float beta,
               const Gathered* gathered) {
  if (!cpu::gemm_supported()) return false;
  Products pr = prepare_products(a, b, out32, gathered);
  if (!cpu::gemm_serves(pr.m, pr.n) || static_cast<double>(pr.m) * pr.n * pr.k < kSmallGemmWork) {
    return false;
  }
  const cpu::HalfKernel kernel = cpu::hgemm_kernel<T>();
  const T* ap = pr.pa.arr.template data<T>();
  const T* bp = pr.pb.arr.template data<T>();
  float* cp = out32.data<float>();
  const size_t mat = static_cast<size_t>(pr.m) * pr.n;
  for (size_t i = 0; i < pr.batch; ++i) {
    cpu::hgemm<T>(pr.pa.layout.trans, pr.pb.layout.trans, pr.m, pr.n, pr.k, alpha,
                  ap + pr.pa.batch_offsets[i], pr.pa.layout.ld, bp + pr.pb.batch_offsets[i],
                  pr.pb.layout.ld, beta, cp + i * mat, pr.n, kernel);
  }
  return true;
}

// A bfloat16 product of more rows with alpha 1 and beta 0 rounded straight into out as the GEMM's
// tiles finish (gemm.h's hgemm_rounded: no float32 copy of the result to write and read back);
// false, with nothing done, where that path does not serve.
bool bf16_gemm_rounded(const array& a, const array& b, array& out, const Gathered* gathered) {
  if (!cpu::gemm_supported()) return false;
  Products pr = prepare_products(a, b, out, gathered);
  if (!cpu::gemm_serves(pr.m, pr.n) || static_cast<double>(pr.m) * pr.n * pr.k < kSmallGemmWork) {
    return false;
  }
  const bfloat16_t* ap = pr.pa.arr.template data<bfloat16_t>();
  const bfloat16_t* bp = pr.pb.arr.template data<bfloat16_t>();
  bfloat16_t* op = out.data<bfloat16_t>();
  const size_t mat = static_cast<size_t>(pr.m) * pr.n;
  for (size_t i = 0; i < pr.batch; ++i) {
    // The same shape every time: the first call serves all or none.
    if (!cpu::hgemm_rounded(pr.pa.layout.trans, pr.pb.layout.trans, pr.m, pr.n, pr.k,
                            ap + pr.pa.batch_offsets[i], pr.pa.layout.ld,
                            bp + pr.pb.batch_offsets[i], pr.pb.layout.ld, op + i * mat, pr.n)) {
      return false;
    }
  }
  return true;
}

// The shared body of Matmul (c == nullptr), AddMM and GatherMM (`gathered`).
void matmul_cpu(const array& a, const array& b, const array* c, array& out, float alpha,
                float beta, const Gathered* gathered = nullptr) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  if (c) {
    cpu::copy_into(*c, out);
  } else {
    beta = 0.0f;
  }
  if (a.shape(-1) == 0) {
    if (!c) {
      std::memset(out.raw_data(), 0, out.nbytes());
    } else if (beta != 1.0f) {
      scale_in_place(out, beta);
    }
    return;
  }
  const Dtype dt = out.dtype();
  if (dt == float32) {
    batched_gemm<float>(a, b, out, alpha, beta, gathered);
  } else if (dt == float64) {
    batched_gemm<double>(a, b, out, alpha, beta, gathered);
  } else if (dt == complex64) {
    batched_gemm<complex64_t>(a, b, out, alpha, beta, gathered);
  } else if (dt == float16 && half_skinny<float16_t>(a, b, out, alpha, beta, gathered)) {
    return;
  } else if (dt == bfloat16 && half_skinny<bfloat16_t>(a, b, out, alpha, beta, gathered)) {
    return;
  } else if (dt == bfloat16 && alpha == 1.0f && beta == 0.0f &&
             bf16_gemm_rounded(a, b, out, gathered)) {
    return;
  } else if (dt == float16 || dt == bfloat16) {
    array out32(allocator::malloc(out.size() * sizeof(float)), out.shape(), float32,
                allocator::free);
    if (c && beta != 0.0f) cpu::copy_into(out, out32);
    const bool done = dt == float16 ? half_gemm<float16_t>(a, b, out32, alpha, beta, gathered)
                                    : half_gemm<bfloat16_t>(a, b, out32, alpha, beta, gathered);
    if (!done) batched_gemm<float>(to_float32(a), to_float32(b), out32, alpha, beta, gathered);
    cpu::copy_into(out32, out);
  } else {
    throw std::invalid_argument("[matmul] no CPU kernel for dtype " + dtype_name(dt));
  }
}

}  // namespace

void Matmul::eval_cpu(const std::vector<array>& inputs, array& out) {
  matmul_cpu(inputs[0], inputs[1], nullptr, out, 1.0f, 0.0f);
}

void AddMM::eval_cpu(const std::vector<array>& inputs, array& out) {
  matmul_cpu(inputs[0], inputs[1], &inputs[2], out, alpha_, beta_);
}

void GatherMM::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array lhs = cpu::ensure_row_contiguous(inputs[2]);
  const array rhs = cpu::ensure_row_contiguous(inputs[3]);
  const char* names[2] = {"lhs_indices", "rhs_indices"};
  const array* idx[2] = {&lhs, &rhs};
  for (int j = 0; j < 2; ++j) {
    const array& x = inputs[j];
    const size_t count = x.size() / std::max<size_t>(size_t(x.shape(-1)) * x.shape(-2), 1);
    const uint32_t* p = idx[j]->data<uint32_t>();
    for (size_t i = 0; i < idx[j]->size(); ++i) {
      if (p[i] >= count) {
        throw std::invalid_argument(std::string("[gather_mm] ") + names[j] + " holds " +
                                    std::to_string(p[i]) + " but " + (j ? "b" : "a") + " has " +
                                    std::to_string(count) + " matrices");
      }
    }
  }
  const Gathered g{lhs.data<uint32_t>(), rhs.data<uint32_t>()};
  matmul_cpu(inputs[0], inputs[1], nullptr, out, 1.0f, 0.0f, &g);
}

namespace {

// out (count, M, N) of dtype T from row-contiguous a (M, K), b (K, N): one gemm per segment.
template <typename T>
void segment_products(const array& a, const array& b, const uint32_t* seg, size_t count,
                      T* out) {
  const int m = a.shape(0), k = a.shape(1), n = b.shape(1);
  const size_t mat = static_cast<size_t>(m) * n;
  const T* ap = a.data<T>();
  const T* bp = b.data<T>();
  detail::parallel_for(count, 1, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) {
      const int s0 = static_cast<int>(seg[2 * i]), s1 = static_cast<int>(seg[2 * i + 1]);
      T* o = out + i * mat;
      if (s1 <= s0 || m == 0 || n == 0) {
        std::fill(o, o + mat, T(0));
        continue;
      }
      cpu::gemm(false, false, m, n, s1 - s0, 1.0f, ap + s0, std::max(k, 1), bp + int64_t{s0} * n,
                std::max(n, 1), 0.0f, o, std::max(n, 1));
    }
  });
}

}  // namespace

void SegmentedMM::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  const array seg = cpu::ensure_row_contiguous(inputs[2]);
  const uint32_t* sp = seg.data<uint32_t>();
  const uint32_t k = static_cast<uint32_t>(inputs[0].shape(1));
  for (size_t i = 0; i < seg.size(); ++i) {
    if (sp[i] > k) {
      throw std::invalid_argument("[segmented_mm] segment bound " + std::to_string(sp[i]) +
                                  " is past the shared dim " + std::to_string(k));
    }
  }
  const size_t count = seg.size() / 2;
  if (out.size() == 0) return;
  const Dtype dt = out.dtype();
  if (dt == float32 || dt == float64) {
    const array a = cpu::ensure_row_contiguous(inputs[0]);
    const array b = cpu::ensure_row_contiguous(inputs[1]);
    if (dt == float32) {
      segment_products<float>(a, b, sp, count, out.data<float>());
    } else {
      segment_products<double>(a, b, sp, count, out.data<double>());
    }
    return;
  }
  // float16 / bfloat16: a float32 product, rounded once.
  array out32(allocator::malloc(out.size() * sizeof(float)), out.shape(), float32, allocator::free);
  segment_products<float>(to_float32(inputs[0]), to_float32(inputs[1]), sp, count,
                          out32.data<float>());
  cpu::copy_into(out32, out);
}

}  // namespace tessera
