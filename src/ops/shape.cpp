// Front ends of the shape family.
#include <numeric>
#include <stdexcept>

#include "ops/shape.h"
#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

array reshape(const array& a, Shape shape, StreamOrDevice s) {
  // One -1 may stand for the remaining size.
  int infer = -1;
  size_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw std::invalid_argument("[reshape] only one dimension can be -1");
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw std::invalid_argument("[reshape] invalid dimension " + std::to_string(shape[i]) +
                                  " in shape " + detail::shape_str(shape));
    } else {
      known *= static_cast<size_t>(shape[i]);
    }
  }
  if (infer >= 0) {
    if (known == 0 || a.size() % known != 0) {
      throw std::invalid_argument("[reshape] cannot infer the -1 dimension of " +
                                  detail::shape_str(shape) + " for an array of size " +
                                  std::to_string(a.size()));
    }
    shape[infer] = static_cast<int32_t>(a.size() / known);
    known = a.size();
  }
  if (known != a.size()) {
    throw std::invalid_argument("[reshape] cannot reshape an array of shape " +
                                detail::shape_str(a.shape()) + " (size " +
                                std::to_string(a.size()) + ") into shape " +
                                detail::shape_str(shape));
  }
  if (shape == a.shape()) return a;
  auto out_shape = shape;
  return array(std::move(out_shape), a.dtype(), std::make_shared<Reshape>(to_stream(s), shape),
               {a});
}

array broadcast_to(const array& a, const Shape& shape, StreamOrDevice s) {
  if (a.shape() == shape) return a;
  if (shape.size() < a.ndim()) {
    throw std::invalid_argument("[broadcast_to] cannot broadcast shape " +
                                detail::shape_str(a.shape()) + " to the smaller rank shape " +
                                detail::shape_str(shape));
  }
  auto b = detail::broadcast_shapes("broadcast_to", a.shape(), shape);
  if (b != shape) {
    throw std::invalid_argument("[broadcast_to] shape " + detail::shape_str(a.shape()) +
                                " cannot be broadcast to " + detail::shape_str(shape));
  }
  return array(shape, a.dtype(), std::make_shared<Broadcast>(to_stream(s), shape), {a});
}

bool Broadcast::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Broadcast*>(&other);
  return o && o->shape_ == shape_;
}

bool Reshape::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Reshape*>(&other);
  return o && o->shape_ == shape_;
}

}  // namespace tessera
