// Indexing ops composed of others (as MLX's results, with autodiff and vmap from the parts):
// slice_update_add / _prod / _max / _min and masked_scatter.
#include <stdexcept>

#include "ops/indexing.h"
#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

// The slice of src combined with update by `combine`, written back into the slice. The slice
// visits distinct elements, so this equals combining in place.
template <typename Combine>
array slice_update_with(const array& src, const array& update, Shape start, Shape stop,
                        Shape strides, StreamOrDevice s, Combine combine) {
  array region = slice(src, start, stop, strides, s);
  array upd = broadcast_to(astype(update, src.dtype(), s), region.shape(), s);
  return slice_update(src, astype(combine(region, upd), src.dtype(), s), std::move(start),
                      std::move(stop), std::move(strides), s);
}

Shape unit_strides(const array& a) { return Shape(a.ndim(), 1); }

}  // namespace

#define TESSERA_SLICE_UPDATE_OP(NAME, FN)                                                   \
  array NAME(const array& src, const array& update, Shape start, Shape stop, Shape strides, \
             StreamOrDevice s) {                                                            \
    return slice_update_with(src, update, std::move(start), std::move(stop),                \
                             std::move(strides), s, [&](const array& a, const array& b) {   \
                               return FN(a, b, s);                                          \
                             });                                                            \
  }                                                                                         \
  array NAME(const array& src, const array& update, Shape start, Shape stop,                \
             StreamOrDevice s) {                                                            \
    return NAME(src, update, std::move(start), std::move(stop), unit_strides(src), s);      \
  }

TESSERA_SLICE_UPDATE_OP(slice_update_add, add)
TESSERA_SLICE_UPDATE_OP(slice_update_prod, multiply)
TESSERA_SLICE_UPDATE_OP(slice_update_max, maximum)
TESSERA_SLICE_UPDATE_OP(slice_update_min, minimum)

#undef TESSERA_SLICE_UPDATE_OP

array masked_scatter(const array& a, const array& mask, const array& src, StreamOrDevice s) {
  if (mask.dtype() != bool_) {
    throw std::invalid_argument("[masked_scatter] the mask must be bool, got " +
                                dtype_name(mask.dtype()));
  }
  if (mask.ndim() > a.ndim() ||
      !std::equal(mask.shape().begin(), mask.shape().end(), a.shape().begin())) {
    throw std::invalid_argument("[masked_scatter] the mask of shape " +
                                detail::shape_str(mask.shape()) +
                                " must be the leading dimensions of the array's shape " +
                                detail::shape_str(a.shape()));
  }
  if (src.ndim() > a.ndim() - mask.ndim() + 1) {
    throw std::invalid_argument("[masked_scatter] the source of shape " +
                                detail::shape_str(src.shape()) + " has more than " +
                                std::to_string(a.ndim() - mask.ndim() + 1) + " dimensions");
  }
  Shape lead = mask.shape();
  lead.resize(a.ndim(), 1);
  array m = reshape(broadcast_to(reshape(mask, lead, s), a.shape(), s), {-1}, s);
  array flat_a = reshape(a, {-1}, s);
  if (m.size() == 0) return a;  // nothing masked, nothing read
  if (src.size() == 0) {
    // MLX returns `a` for an all-false mask here and fails when evaluated otherwise; an empty
    // source can fill nothing, so it is refused at once.
    throw std::invalid_argument("[masked_scatter] the source is empty: there is nothing to "
                                "scatter into the masked positions");
  }
  // The k-th true position takes src's k-th element.
  array pos = subtract(cumsum(astype(m, int32, s), 0, false, true, std::nullopt, s), array(1), s);
  array idx = where(m, pos, array(0), s);
  array flat_src = reshape(astype(src, a.dtype(), s), {-1}, s);
  array taken = reshape(detail::idx::gather_as("masked_scatter", flat_src, {idx}, {0}, {1}, s),
                        {-1}, s);
  return reshape(where(m, taken, flat_a, s), a.shape(), s);
}

}  // namespace tessera
