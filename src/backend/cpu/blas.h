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
