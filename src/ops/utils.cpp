// Helpers shared by op front ends (see utils.h).
#include "ops/utils.h"

#include <stdexcept>
#include <string>

#include "tessera/ops.h"

namespace tessera::detail {

array conj_if_complex(const array& a, const Stream& s) {
  return a.dtype() == complex64 ? conjugate(a, s) : a;
}

array batch_indices(const char* op, const char* name, const std::optional<array>& given,
                    const array& a, const Stream& s) {
  if (a.ndim() < 2) {
    throw std::invalid_argument(std::string("[") + op + "] the operands must be matrices or " +
                                "batches of them; got shape " + shape_str(a.shape()));
  }
  if (given) {
    if (!issubdtype(given->dtype(), integer)) {
      throw std::invalid_argument(std::string("[") + op + "] " + name +
                                  " must be integers; got " + dtype_name(given->dtype()));
    }
    return astype(*given, uint32, s);
  }
  Shape batch(a.shape().begin(), a.shape().end() - 2);
  int64_t n = 1;
  for (int d : batch) n *= d;
  return reshape(arange(0.0, static_cast<double>(n), 1.0, uint32, s), batch, s);
}

array scatter_matrices(const Shape& shape, const array& indices, const array& per_position,
                       const Stream& s) {
  const int r = shape[shape.size() - 2], c = shape.back();
  int64_t n = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i) n *= shape[i];
  array flat = zeros({static_cast<int>(n), r, c}, per_position.dtype(), s);
  array summed = scatter_add(flat, reshape(indices, {-1}, s),
                             reshape(per_position, {-1, 1, r, c}, s), 0, s);
  return reshape(summed, shape, s);
}

}  // namespace tessera::detail
