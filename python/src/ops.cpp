// tessera.core's array ops (tessera/ops/*.h, matmul & co.) with MLX's mlx.core signatures, one
// file per family (ops_*.cpp); the aliases come last, as they name ops defined before them.
#include "common.h"

namespace tessera::python {

void init_ops_shape(nb::module_& m);
void init_ops_elementwise(nb::module_& m);
void init_ops_creation(nb::module_& m);
void init_ops_reduce(nb::module_& m);
void init_ops_conv(nb::module_& m);
void init_ops_quantized(nb::module_& m);

void init_ops(nb::module_& m) {
  init_ops_shape(m);
  init_ops_elementwise(m);
  init_ops_creation(m);
  init_ops_reduce(m);
  init_ops_conv(m);
  init_ops_quantized(m);
}

}  // namespace tessera::python
