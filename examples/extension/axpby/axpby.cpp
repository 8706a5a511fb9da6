#include "axpby/axpby.h"

#include <optional>
#include <stdexcept>
#include <type_traits>

namespace tessera_ext {

mx::array axpby(const mx::array& x, const mx::array& y, float alpha, float beta,
                mx::StreamOrDevice s) {
  // Integers and booleans are computed in float32; inexact inputs keep their promoted type
  // (complex64 is refused by the kernel).
  mx::Dtype dtype = mx::promote_types(x.dtype(), y.dtype());
  if (!mx::issubdtype(dtype, mx::inexact)) dtype = mx::float32;
  // The primitive sees inputs of one dtype and one shape: the front end casts and broadcasts.
  auto inputs = mx::broadcast_arrays({mx::astype(x, dtype, s), mx::astype(y, dtype, s)}, s);
  mx::Shape shape = inputs[0].shape();
  return mx::array(shape, dtype, std::make_shared<Axpby>(mx::to_stream(s), alpha, beta),
                   std::move(inputs));
}

namespace {

// The offset, in elements, of the element at row-major position `index` of an array of
// `shape` laid out with `strides` (broadcast inputs have zero strides).
int64_t offset_of(size_t index, const mx::Shape& shape, const mx::Strides& strides) {
  int64_t offset = 0;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0 && index > 0; --d) {
    offset += static_cast<int64_t>(index % shape[d]) * strides[d];
    index /= shape[d];
  }
  return offset;
}

// Half and single precision compute in float, double in double.
template <typename T>
void axpby_kernel(const mx::array& x, const mx::array& y, mx::array& out, float alpha,
                  float beta) {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  out.set_data(mx::allocator::malloc(out.nbytes()));  // row-contiguous
  const T* xs = x.data<T>();
  const T* ys = y.data<T>();
  T* zs = out.data<T>();
  for (size_t i = 0; i < out.size(); ++i) {
    Acc xi = static_cast<Acc>(xs[offset_of(i, out.shape(), x.strides())]);
    Acc yi = static_cast<Acc>(ys[offset_of(i, out.shape(), y.strides())]);
    zs[i] = static_cast<T>(Acc(alpha) * xi + Acc(beta) * yi);
  }
}

}  // namespace

void Axpby::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  const mx::array& x = inputs[0];
  const mx::array& y = inputs[1];
  if (out.dtype() == mx::float32) return axpby_kernel<float>(x, y, out, alpha_, beta_);
  if (out.dtype() == mx::float64) return axpby_kernel<double>(x, y, out, alpha_, beta_);
  if (out.dtype() == mx::float16) return axpby_kernel<mx::float16_t>(x, y, out, alpha_, beta_);
  if (out.dtype() == mx::bfloat16) return axpby_kernel<mx::bfloat16_t>(x, y, out, alpha_, beta_);
  throw std::invalid_argument("[axpby] real floating inputs only (float16, bfloat16, float32, "
                              "float64)");
}

std::vector<mx::array> Axpby::vjp(const std::vector<mx::array>& primals,
                                  const std::vector<mx::array>& cotangents,
                                  const std::vector<int>& argnums,
                                  const std::vector<mx::array>& outputs) {
  // dz/dx = alpha, dz/dy = beta, elementwise (the inputs already have the output's shape).
  std::vector<mx::array> grads;
  for (int arg : argnums) {
    float scale = arg == 0 ? alpha_ : beta_;
    grads.push_back(mx::multiply(cotangents[0], mx::array(scale, cotangents[0].dtype()), stream()));
  }
  return grads;
}

std::vector<mx::array> Axpby::jvp(const std::vector<mx::array>& primals,
                                  const std::vector<mx::array>& tangents,
                                  const std::vector<int>& argnums) {
  std::optional<mx::array> sum;
  for (size_t i = 0; i < argnums.size(); ++i) {
    float scale = argnums[i] == 0 ? alpha_ : beta_;
    mx::array term = mx::multiply(tangents[i], mx::array(scale, tangents[i].dtype()), stream());
    sum = sum ? mx::add(*sum, term, stream()) : term;
  }
  return {*sum};
}

std::pair<std::vector<mx::array>, std::vector<int>> Axpby::vmap(
    const std::vector<mx::array>& inputs, const std::vector<int>& axes) {
  // Batch along axis 0: a batched input's axis moves there, an unbatched one broadcasts.
  std::vector<mx::array> front;
  for (size_t i = 0; i < inputs.size(); ++i) {
    front.push_back(axes[i] >= 0 ? mx::moveaxis(inputs[i], axes[i], 0, stream())
                                 : mx::expand_dims(inputs[i], 0, stream()));
  }
  return {{axpby(front[0], front[1], alpha_, beta_, stream())}, {0}};
}

bool Axpby::is_equivalent(const mx::Primitive& other) const {
  auto* o = dynamic_cast<const Axpby*>(&other);
  return o != nullptr && o->alpha_ == alpha_ && o->beta_ == beta_;
}

}  // namespace tessera_ext
