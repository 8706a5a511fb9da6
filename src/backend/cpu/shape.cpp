// CPU kernels of the shape family: views that share the input buffer, copies when they can't.
#include <optional>

#include "backend/cpu/copy.h"
#include "backend/cpu/strided.h"
#include "ops/shape.h"

namespace tessera {

void Broadcast::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  auto strides = cpu::broadcast_strides(in, out.shape());
  bool any_broadcast = out.size() > in.size();
  array::Flags f = in.flags();
  if (any_broadcast) f = array::Flags{false, false, false};
  out.copy_shared_buffer(in, strides, f, in.data_size(), in.offset());
}

// Strides of `in` reshaped to `shape` without copying, or empty when impossible (numpy's rule:
// each group of merged input dims must be contiguous among themselves).
static std::optional<Strides> reshape_strides(const array& in, const Shape& shape) {
  if (in.flags().row_contiguous) return detail::row_strides(shape);
  if (in.size() == 0) return detail::row_strides(shape);
  // Drop size-1 dims of the input.
  Shape ish;
  Strides ist;
  for (size_t i = 0; i < in.ndim(); ++i) {
    if (in.shape()[i] != 1) {
      ish.push_back(in.shape()[i]);
      ist.push_back(in.strides()[i]);
    }
  }
  Strides out(shape.size(), 0);
  size_t i = 0, o = 0;
  while (o < shape.size()) {
    if (shape[o] == 1) {
      out[o] = (i < ist.size() ? ist[i] * ish[i] : 1);
      ++o;
      continue;
    }
    if (i >= ish.size()) return std::nullopt;
    // Match a group: product of input dims [i, i2) == product of output dims [o, o2).
    int64_t ip = ish[i], op = shape[o];
    size_t i2 = i + 1, o2 = o + 1;
    while (ip != op) {
      if (ip < op) {
        if (i2 >= ish.size()) return std::nullopt;
        ip *= ish[i2++];
      } else {
        if (o2 >= shape.size()) return std::nullopt;
        op *= shape[o2++];
      }
    }
    for (size_t k = i; k + 1 < i2; ++k) {
      if (ist[k] != ist[k + 1] * ish[k + 1]) return std::nullopt;
    }
    int64_t st = ist[i2 - 1];
    for (size_t k = o2; k-- > o;) {
      out[k] = st;
      st *= shape[k];
    }
    i = i2;
    o = o2;
  }
  return out;
}

void Reshape::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (auto st = reshape_strides(in, out.shape())) {
    array::Flags f = in.flags();
    if (!in.flags().row_contiguous) {
      // Re-derive contiguity for the new view.
      f.row_contiguous = (*st == detail::row_strides(out.shape()));
      f.col_contiguous = false;
    }
    out.copy_shared_buffer(in, *st, f, in.data_size(), in.offset());
    return;
  }
  cpu::copy_contiguous(in, out);
}

}  // namespace tessera
