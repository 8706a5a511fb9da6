// The BLAS entry points the CPU backend calls. The system's OpenBLAS exports cblas_sgemm, ...; a
// wheel links instead the OpenBLAS that NumPy and SciPy ship as the scipy-openblas32 wheel
// (TESSERA_SCIPY_OPENBLAS), whose symbols carry a scipy_ prefix.
#pragma once

#include <cblas.h>

#ifdef TESSERA_SCIPY_OPENBLAS
#define TESSERA_BLAS(name) scipy_##name
#else
#define TESSERA_BLAS(name) name
#endif

#include "tessera/types.h"

namespace tessera::cpu {

// OpenBLAS runs on one thread (set as libtessera loads: matmul.cpp); kernels split work over our
// pool instead. (OpenBLAS's threading changes the bits of a result with the thread count, and
// ranks on hosts with different CPU counts must compute the same values.)

// Row-major c = alpha * op(a) @ op(b) + beta * c, op transposing when ta / tb.
inline void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc) {
  TESSERA_BLAS(cblas_sgemm)(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                            tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta,
                            c, ldc);
}
inline void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const double* a, int lda,
                 const double* b, int ldb, float beta, double* c, int ldc) {
  TESSERA_BLAS(cblas_dgemm)(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                            tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta,
                            c, ldc);
}
inline void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const complex64_t* a,
                 int lda, const complex64_t* b, int ldb, float beta, complex64_t* c, int ldc) {
  complex64_t al(alpha, 0.0f), be(beta, 0.0f);
  TESSERA_BLAS(cblas_cgemm)(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                            tb ? CblasTrans : CblasNoTrans, m, n, k, &al, a, lda, b, ldb, &be, c,
                            ldc);
}

}  // namespace tessera::cpu
