// CPU kernels of the factorization family: LAPACK (through LAPACKE, row-major) on each matrix of
// the batch, the matrices spread over our pool (LAPACK itself single-threaded). A routine that
// reports a matrix it cannot handle (singular, not positive definite, no convergence) raises,
// naming the op and the matrix's index in the batch.
#include <algorithm>
#include <atomic>
#include <complex>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#define lapack_complex_float std::complex<float>
#define lapack_complex_double std::complex<double>
#include <lapacke.h>

#include "backend/cpu/blas.h"
#include "backend/cpu/copy.h"
#include "core/shape_checks.h"
#include "core/thread_pool.h"
#include "ops/factorizations.h"

namespace tessera {

namespace {

using lint = lapack_int;
constexpr int kRow = LAPACK_ROW_MAJOR;

// The LAPACKE routines by element type.
lint geqrf(lint m, lint n, float* a, lint lda, float* tau) {
  return TESSERA_BLAS(LAPACKE_sgeqrf)(kRow, m, n, a, lda, tau);
}
lint geqrf(lint m, lint n, double* a, lint lda, double* tau) {
  return TESSERA_BLAS(LAPACKE_dgeqrf)(kRow, m, n, a, lda, tau);
}
lint orgqr(lint m, lint n, lint k, float* a, lint lda, const float* tau) {
  return TESSERA_BLAS(LAPACKE_sorgqr)(kRow, m, n, k, a, lda, tau);
}
lint orgqr(lint m, lint n, lint k, double* a, lint lda, const double* tau) {
  return TESSERA_BLAS(LAPACKE_dorgqr)(kRow, m, n, k, a, lda, tau);
}
lint gesdd(char job, lint m, lint n, float* a, float* s, float* u, float* vt) {
  return TESSERA_BLAS(LAPACKE_sgesdd)(kRow, job, m, n, a, n, s, u, m, vt, n);
}
lint gesdd(char job, lint m, lint n, double* a, double* s, double* u, double* vt) {
  return TESSERA_BLAS(LAPACKE_dgesdd)(kRow, job, m, n, a, n, s, u, m, vt, n);
}
lint gesdd(char job, lint m, lint n, complex64_t* a, float* s, complex64_t* u, complex64_t* vt) {
  return TESSERA_BLAS(LAPACKE_cgesdd)(kRow, job, m, n, a, n, s, u, m, vt, n);
}
lint getrf(lint m, lint n, float* a, lint* ipiv) {
  return TESSERA_BLAS(LAPACKE_sgetrf)(kRow, m, n, a, n, ipiv);
}
lint getrf(lint m, lint n, double* a, lint* ipiv) {
  return TESSERA_BLAS(LAPACKE_dgetrf)(kRow, m, n, a, n, ipiv);
}
lint getri(lint n, float* a, const lint* ipiv) {
  return TESSERA_BLAS(LAPACKE_sgetri)(kRow, n, a, n, ipiv);
}
lint getri(lint n, double* a, const lint* ipiv) {
  return TESSERA_BLAS(LAPACKE_dgetri)(kRow, n, a, n, ipiv);
}
lint trtri(char uplo, lint n, float* a) {
  return TESSERA_BLAS(LAPACKE_strtri)(kRow, uplo, 'N', n, a, n);
}
lint trtri(char uplo, lint n, double* a) {
  return TESSERA_BLAS(LAPACKE_dtrtri)(kRow, uplo, 'N', n, a, n);
}
lint potrf(char uplo, lint n, float* a) { return TESSERA_BLAS(LAPACKE_spotrf)(kRow, uplo, n, a, n); }
lint potrf(char uplo, lint n, double* a) {
  return TESSERA_BLAS(LAPACKE_dpotrf)(kRow, uplo, n, a, n);
}
lint syevd(char job, char uplo, lint n, float* a, float* w) {
  return TESSERA_BLAS(LAPACKE_ssyevd)(kRow, job, uplo, n, a, n, w);
}
lint syevd(char job, char uplo, lint n, double* a, double* w) {
  return TESSERA_BLAS(LAPACKE_dsyevd)(kRow, job, uplo, n, a, n, w);
}
lint syevd(char job, char uplo, lint n, complex64_t* a, float* w) {
  return TESSERA_BLAS(LAPACKE_cheevd)(kRow, job, uplo, n, a, n, w);
}
lint geev(char jobvr, lint n, complex64_t* a, complex64_t* w, complex64_t* vr) {
  return TESSERA_BLAS(LAPACKE_cgeev)(kRow, 'N', jobvr, n, a, n, w, nullptr, n, vr, n);
}
lint geev(char jobvr, lint n, float* a, float* wr, float* wi, float* vr) {
  return TESSERA_BLAS(LAPACKE_sgeev)(kRow, 'N', jobvr, n, a, n, wr, wi, nullptr, n, vr, n);
}
lint geev(char jobvr, lint n, double* a, double* wr, double* wi, double* vr) {
  return TESSERA_BLAS(LAPACKE_dgeev)(kRow, 'N', jobvr, n, a, n, wr, wi, nullptr, n, vr, n);
}
lint gesv(lint n, lint nrhs, float* a, lint* ipiv, float* b) {
  return TESSERA_BLAS(LAPACKE_sgesv)(kRow, n, nrhs, a, n, ipiv, b, nrhs);
}
lint gesv(lint n, lint nrhs, double* a, lint* ipiv, double* b) {
  return TESSERA_BLAS(LAPACKE_dgesv)(kRow, n, nrhs, a, n, ipiv, b, nrhs);
}

// Runs f(i) for every matrix i of the batch on the pool; the first failure (f returns a non-empty
// reason) is raised after all have run.
template <typename F>
void for_each_matrix(const char* op, size_t batch, size_t matrix_elems, F f) {
  std::mutex mu;
  size_t failed_at = batch;
  std::string why;
  const size_t grain = std::max<size_t>(1, 4096 / std::max<size_t>(1, matrix_elems));
  detail::parallel_for(batch, grain, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      std::string reason = f(i);
      if (!reason.empty()) {
        std::lock_guard<std::mutex> lock(mu);
        if (i < failed_at) {
          failed_at = i;
          why = std::move(reason);
        }
      }
    }
  });
  if (failed_at < batch) {
    throw std::invalid_argument(std::string("[linalg::") + op + "] matrix " +
                                std::to_string(failed_at) + " of the batch " + why);
  }
}

// Every output's buffer, and the input as a row-contiguous array of its dtype.
array prepare(const array& in, std::vector<array>& outputs) {
  for (auto& o : outputs) o.set_data(allocator::malloc(o.nbytes()));
  return cpu::ensure_row_contiguous(in);
}

size_t batch_of(const array& a) {
  const size_t mat = static_cast<size_t>(a.shape(-1)) * static_cast<size_t>(a.shape(-2));
  return mat == 0 ? 0 : a.size() / mat;
}

std::string lapack_error(lint info) {
  return "could not be processed: LAPACK argument " + std::to_string(-info) + " was invalid";
}

template <typename T>
void qr_kernel(const array& a, std::vector<array>& out) {
  const int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  T* q = out[0].data<T>();
  T* r = out[1].data<T>();
  const T* src = a.data<T>();
  if (k == 0) return;
  for_each_matrix("qr", batch_of(a), static_cast<size_t>(m) * n, [&](size_t i) -> std::string {
    std::vector<T> work(src + i * m * n, src + (i + 1) * m * n), tau(k);
    if (lint info = geqrf(m, n, work.data(), n, tau.data()); info != 0) return lapack_error(info);
    T* ri = r + i * k * n;
    for (int row = 0; row < k; ++row) {
      for (int col = 0; col < n; ++col) ri[row * n + col] = col >= row ? work[row * n + col] : T(0);
    }
    T* qi = q + i * m * k;
    for (int row = 0; row < m; ++row) std::copy_n(work.data() + row * n, k, qi + row * k);
    if (lint info = orgqr(m, k, k, qi, k, tau.data()); info != 0) return lapack_error(info);
    return {};
  });
}

// The real type of T (float for complex64).
template <typename T>
using real_of = std::conditional_t<std::is_same_v<T, complex64_t>, float, T>;

template <typename T>
void svd_kernel(const array& a, std::vector<array>& out, bool uv) {
  const int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  const T* src = a.data<T>();
  T* u = uv ? out[0].data<T>() : nullptr;
  real_of<T>* sv = (uv ? out[1] : out[0]).template data<real_of<T>>();
  T* vt = uv ? out[2].data<T>() : nullptr;
  const size_t batch = a.ndim() == 2 ? 1 : detail::shape_size(Shape(a.shape().begin(), a.shape().end() - 2));
  if (k == 0) {
    // Empty factors: u and vt are identities of their sizes.
    for (size_t i = 0; uv && i < batch; ++i) {
      std::fill_n(u + i * m * m, static_cast<size_t>(m) * m, T(0));
      for (int d = 0; d < m; ++d) u[i * m * m + d * m + d] = T(1);
      std::fill_n(vt + i * n * n, static_cast<size_t>(n) * n, T(0));
      for (int d = 0; d < n; ++d) vt[i * n * n + d * n + d] = T(1);
    }
    return;
  }
  for_each_matrix("svd", batch, static_cast<size_t>(m) * n, [&](size_t i) -> std::string {
    std::vector<T> work(src + i * m * n, src + (i + 1) * m * n);
    lint info = gesdd(uv ? 'A' : 'N', m, n, work.data(), sv + i * k, uv ? u + i * m * m : nullptr,
                      uv ? vt + i * n * n : nullptr);
    if (info > 0) return "did not converge (LAPACK gesdd)";
    if (info < 0) return lapack_error(info);
    return {};
  });
}

// Zero the triangle of the n x n matrix p that is not `keep_upper`'s (diagonal kept).
template <typename T>
void zero_other_triangle(T* p, int n, bool keep_upper) {
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) {
      if (keep_upper ? c < r : c > r) p[r * n + c] = T(0);
    }
  }
}

template <typename T>
void inverse_kernel(const array& a, array& out, bool triangular, bool upper) {
  const int n = a.shape(-1);
  const T* src = a.data<T>();
  T* dst = out.data<T>();
  const size_t mat = static_cast<size_t>(n) * n;
  if (n == 0) return;
  for_each_matrix(triangular ? "tri_inv" : "inv", batch_of(a), mat, [&](size_t i) -> std::string {
    T* p = dst + i * mat;
    std::copy_n(src + i * mat, mat, p);
    lint info;
    if (triangular) {
      zero_other_triangle(p, n, upper);
      info = trtri(upper ? 'U' : 'L', n, p);
    } else {
      std::vector<lint> ipiv(n);
      info = getrf(n, n, p, ipiv.data());
      if (info == 0) info = getri(n, p, ipiv.data());
    }
    if (info > 0) {
      return "is singular (a zero pivot at row " + std::to_string(info - 1) + ")";
    }
    if (info < 0) return lapack_error(info);
    return {};
  });
}

template <typename T>
void cholesky_kernel(const array& a, array& out, bool upper) {
  const int n = a.shape(-1);
  const T* src = a.data<T>();
  T* dst = out.data<T>();
  const size_t mat = static_cast<size_t>(n) * n;
  if (n == 0) return;
  for_each_matrix("cholesky", batch_of(a), mat, [&](size_t i) -> std::string {
    T* p = dst + i * mat;
    std::copy_n(src + i * mat, mat, p);
    lint info = potrf(upper ? 'U' : 'L', n, p);
    if (info > 0) {
      return "is not positive definite (the leading minor of order " + std::to_string(info) +
             " is not)";
    }
    if (info < 0) return lapack_error(info);
    zero_other_triangle(p, n, upper);
    return {};
  });
}

template <typename T>
void eigh_kernel(const array& a, std::vector<array>& out, const std::string& uplo, bool vectors) {
  const int n = a.shape(-1);
  const T* src = a.data<T>();
  real_of<T>* w = out[0].template data<real_of<T>>();
  T* v = vectors ? out[1].data<T>() : nullptr;
  const size_t mat = static_cast<size_t>(n) * n;
  if (n == 0) return;
  for_each_matrix(vectors ? "eigh" : "eigvalsh", batch_of(a), mat, [&](size_t i) -> std::string {
    std::vector<T> scratch;
    T* p = v ? v + i * mat : (scratch.resize(mat), scratch.data());
    std::copy_n(src + i * mat, mat, p);
    lint info = syevd(vectors ? 'V' : 'N', uplo[0], n, p, w + i * n);
    if (info > 0) return "did not converge (LAPACK syevd)";
    if (info < 0) return lapack_error(info);
    return {};
  });
}

template <typename T>
void eig_kernel(const array& a, std::vector<array>& out, bool vectors) {
  const int n = a.shape(-1);
  const T* src = a.data<T>();
  auto* w = out[0].data<complex64_t>();
  auto* v = vectors ? out[1].data<complex64_t>() : nullptr;
  const size_t mat = static_cast<size_t>(n) * n;
  if (n == 0) return;
  for_each_matrix(vectors ? "eig" : "eigvals", batch_of(a), mat, [&](size_t i) -> std::string {
    std::vector<T> p(src + i * mat, src + (i + 1) * mat), wr(n), wi(n), vr(vectors ? mat : 1);
    lint info = geev(vectors ? 'V' : 'N', n, p.data(), wr.data(), wi.data(), vr.data());
    if (info > 0) return "did not converge (LAPACK geev)";
    if (info < 0) return lapack_error(info);
    for (int j = 0; j < n; ++j) {
      w[i * n + j] = complex64_t(static_cast<float>(wr[j]), static_cast<float>(wi[j]));
    }
    if (!vectors) return {};
    // A complex pair j, j + 1 stores its vector's real part in column j, imaginary in j + 1.
    complex64_t* vi = v + i * mat;
    for (int j = 0; j < n; ++j) {
      const bool pair = wi[j] != T(0) && j + 1 < n;
      for (int r = 0; r < n; ++r) {
        if (pair) {
          const float re = static_cast<float>(vr[r * n + j]), im = static_cast<float>(vr[r * n + j + 1]);
          vi[r * n + j] = complex64_t(re, im);
          vi[r * n + j + 1] = complex64_t(re, -im);
        } else {
          vi[r * n + j] = complex64_t(static_cast<float>(vr[r * n + j]), 0.0f);
        }
      }
      if (pair) ++j;
    }
    return {};
  });
}

void eig_kernel_complex(const array& a, std::vector<array>& out, bool vectors) {
  const int n = a.shape(-1);
  const auto* src = a.data<complex64_t>();
  auto* w = out[0].data<complex64_t>();
  auto* v = vectors ? out[1].data<complex64_t>() : nullptr;
  const size_t mat = static_cast<size_t>(n) * n;
  if (n == 0) return;
  for_each_matrix(vectors ? "eig" : "eigvals", batch_of(a), mat, [&](size_t i) -> std::string {
    std::vector<complex64_t> p(src + i * mat, src + (i + 1) * mat), vr(vectors ? mat : 1);
    lint info = geev(vectors ? 'V' : 'N', n, p.data(), w + i * n, vectors ? v + i * mat : vr.data());
    if (info > 0) return "did not converge (LAPACK geev)";
    if (info < 0) return lapack_error(info);
    return {};
  });
}

template <typename T>
void luf_kernel(const array& a, std::vector<array>& out) {
  const int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  const T* src = a.data<T>();
  T* lu = out[0].data<T>();
  auto* piv = out[1].data<uint32_t>();
  auto* rows = out[2].data<uint32_t>();
  const size_t mat = static_cast<size_t>(m) * n;
  const size_t batch = a.ndim() == 2 ? 1 : detail::shape_size(Shape(a.shape().begin(), a.shape().end() - 2));
  for_each_matrix("lu", batch, mat, [&](size_t i) -> std::string {
    T* p = lu + i * mat;
    std::copy_n(src + i * mat, mat, p);
    std::vector<lint> ipiv(std::max(k, 1));
    // A zero pivot (info > 0) still gives the factorization (U singular), as LAPACK and MLX.
    if (k > 0) {
      if (lint info = getrf(m, n, p, ipiv.data()); info < 0) return lapack_error(info);
    }
    // perm[j]: the row of a that row j of l @ u is; the output is its inverse.
    std::vector<uint32_t> perm(m);
    for (int j = 0; j < m; ++j) perm[j] = static_cast<uint32_t>(j);
    for (int j = 0; j < k; ++j) {
      piv[i * k + j] = static_cast<uint32_t>(ipiv[j] - 1);
      std::swap(perm[j], perm[ipiv[j] - 1]);
    }
    for (int j = 0; j < m; ++j) rows[i * m + perm[j]] = static_cast<uint32_t>(j);
    return {};
  });
}

template <typename T>
void solve_kernel(const array& a_in, const array& b_in, array& out) {
  const array a = cpu::ensure_row_contiguous(a_in);
  cpu::copy_contiguous(b_in, out);
  const int n = a.shape(-1), k = out.shape(-1);
  const T* src = a.data<T>();
  T* x = out.data<T>();
  const size_t mat = static_cast<size_t>(n) * n, rhs = static_cast<size_t>(n) * k;
  if (n == 0 || k == 0) return;
  for_each_matrix("solve", batch_of(a), mat + rhs, [&](size_t i) -> std::string {
    std::vector<T> p(src + i * mat, src + (i + 1) * mat);
    std::vector<lint> ipiv(n);
    lint info = gesv(n, k, p.data(), ipiv.data(), x + i * rhs);
    if (info > 0) return "is singular (a zero pivot at row " + std::to_string(info - 1) + ")";
    if (info < 0) return lapack_error(info);
    return {};
  });
}

// kernel<float>() or kernel<double>() by dtype (and kernel<complex64_t>() WithComplex).
template <bool WithComplex = false, typename F>
void by_dtype(const char* op, Dtype dt, F f) {
  if constexpr (WithComplex) {
    if (dt == complex64) {
      f(complex64_t{});
      return;
    }
  }
  if (dt == float32) {
    f(float{});
  } else if (dt == float64) {
    f(double{});
  } else {
    throw std::invalid_argument(std::string("[linalg::") + op + "] no CPU kernel for dtype " +
                                dtype_name(dt));
  }
}

}  // namespace

void QRF::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array a = prepare(inputs[0], outputs);
  by_dtype("qr", a.dtype(), [&](auto t) { qr_kernel<decltype(t)>(a, outputs); });
}

void SVD::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array a = prepare(inputs[0], outputs);
  by_dtype<true>("svd", a.dtype(),
                 [&](auto t) { svd_kernel<decltype(t)>(a, outputs, compute_uv_); });
}

void Inverse::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  const array a = cpu::ensure_row_contiguous(inputs[0]);
  by_dtype("inv", a.dtype(),
           [&](auto t) { inverse_kernel<decltype(t)>(a, out, triangular_, upper_); });
}

void Cholesky::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  const array a = cpu::ensure_row_contiguous(inputs[0]);
  by_dtype("cholesky", a.dtype(), [&](auto t) { cholesky_kernel<decltype(t)>(a, out, upper_); });
}

void Eig::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array a = prepare(inputs[0], outputs);
  if (a.dtype() == complex64) {
    eig_kernel_complex(a, outputs, vectors_);
    return;
  }
  by_dtype("eig", a.dtype(), [&](auto t) { eig_kernel<decltype(t)>(a, outputs, vectors_); });
}

void Eigh::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array a = prepare(inputs[0], outputs);
  by_dtype<true>("eigh", a.dtype(),
                 [&](auto t) { eigh_kernel<decltype(t)>(a, outputs, uplo_, vectors_); });
}

void LUF::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array a = prepare(inputs[0], outputs);
  by_dtype("lu", a.dtype(), [&](auto t) { luf_kernel<decltype(t)>(a, outputs); });
}

void Solve::eval_cpu(const std::vector<array>& inputs, array& out) {
  by_dtype("solve", out.dtype(),
           [&](auto t) { solve_kernel<decltype(t)>(inputs[0], inputs[1], out); });
}

}  // namespace tessera
