// Front ends of the matrix products (matmul, addmm, inner, outer, tensordot) and the derivatives
// of Matmul / AddMM. Kernels in backend/cpu/matmul.cpp.
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>

#include "ops/linalg.h"
#include "ops/shape.h"
#include "ops/utils.h"
#include "tessera/linalg.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

// Drop the dims a 1-D operand gained (row for `a`, column for `b`) from a product of shape `s`.
Shape drop_vector_dims(Shape s, bool a_was_vector, bool b_was_vector) {
  if (b_was_vector) s.erase(s.end() - 1);
  if (a_was_vector) s.erase(s.end() - 1 - (b_was_vector ? 0 : 1));
  return s;
}

// Leading dims of a shape (all but the last two).
Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

// The broadcast of a's and b's batch dims; the error names the full input shapes.
Shape broadcast_batch(const char* op, const Shape& a, const Shape& b) {
  try {
    return detail::broadcast_shapes(op, batch_of(a), batch_of(b));
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(std::string("[") + op + "] the batch dimensions of a " +
                                detail::shape_str(a) + " and b " + detail::shape_str(b) +
                                " cannot be broadcast together");
  }
}

Shape with_matrix(Shape batch, int rows, int cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

}  // namespace

array matmul(const array& in_a, const array& in_b, StreamOrDevice s) {
  if (in_a.ndim() == 0 || in_b.ndim() == 0) {
    throw std::invalid_argument("[matmul] inputs must have at least one dimension; got shapes " +
                                detail::shape_str(in_a.shape()) + " and " +
                                detail::shape_str(in_b.shape()));
  }
  array a = in_a.ndim() == 1 ? reshape(in_a, {1, in_a.shape(0)}, s) : in_a;
  array b = in_b.ndim() == 1 ? reshape(in_b, {in_b.shape(0), 1}, s) : in_b;
  if (a.shape(-1) != b.shape(-2)) {
    throw std::invalid_argument("[matmul] last dimension of a " + detail::shape_str(in_a.shape()) +
                                " must match the second to last of b " +
                                detail::shape_str(in_b.shape()));
  }
  Dtype out_type = promote_types(a.dtype(), b.dtype());
  if (!issubdtype(out_type, inexact)) {
    throw std::invalid_argument("[matmul] only floating point and complex inputs are supported; "
                                "got " + dtype_name(in_a.dtype()) + " and " +
                                dtype_name(in_b.dtype()) + ", which promote to " +
                                dtype_name(out_type));
  }
  a = astype(a, out_type, s);
  b = astype(b, out_type, s);

  if (b.ndim() == 2) {
    // (..., M, K) @ (K, N) is one primitive on a as it is (nn.Linear's x @ W.T): its kernel
    // stacks a's rows into one gemm where they are contiguous, and b's gradient is one product
    // over all rows (Matmul::vjp). Reshaping a to 2-D and the result back cost mlx-lm's decode
    // two graph nodes per product, ~420 of its ~1,450 per token.
  } else if (a.ndim() > 2 || b.ndim() > 2) {
    Shape batch = broadcast_batch("matmul", a.shape(), b.shape());
    const array a0 = a;
    a = detail::broadcast_batch_for_product(a, batch, b, s);
    b = detail::broadcast_batch_for_product(b, batch, a0, s);
  }
  Shape prim_shape = a.shape();
  prim_shape.back() = b.shape(-1);
  array out(prim_shape, out_type, std::make_shared<Matmul>(to_stream(s)), {a, b});
  Shape final_shape = drop_vector_dims(prim_shape, in_a.ndim() == 1, in_b.ndim() == 1);
  return final_shape == prim_shape ? out : reshape(out, final_shape, s);
}

namespace {

// The operands of a real floating product (gather_mm, block_masked_mm): a 1-D a a row, a 1-D b
// a column (the flags say which, for drop_vector_dims), K checked, both cast to their common
// floating dtype.
struct FloatOperands {
  array a, b;
  bool a_vec, b_vec;
};

FloatOperands float_operands(const char* op, const array& in_a, const array& in_b,
                             const Stream& s) {
  const std::string tag = std::string("[") + op + "] ";
  if (in_a.ndim() == 0 || in_b.ndim() == 0) {
    throw std::invalid_argument(tag + "inputs must have at least one dimension; got shapes " +
                                detail::shape_str(in_a.shape()) + " and " +
                                detail::shape_str(in_b.shape()));
  }
  const bool a_vec = in_a.ndim() == 1, b_vec = in_b.ndim() == 1;
  array a = a_vec ? reshape(in_a, {1, in_a.shape(0)}, s) : in_a;
  array b = b_vec ? reshape(in_b, {in_b.shape(0), 1}, s) : in_b;
  if (a.shape(-1) != b.shape(-2)) {
    throw std::invalid_argument(tag + "last dimension of a " + detail::shape_str(in_a.shape()) +
                                " must match the second to last of b " +
                                detail::shape_str(in_b.shape()));
  }
  const Dtype dt = promote_types(a.dtype(), b.dtype());
  if (!issubdtype(dt, floating)) {
    throw std::invalid_argument(tag + "only real floating inputs are supported; got " +
                                dtype_name(in_a.dtype()) + " and " + dtype_name(in_b.dtype()));
  }
  return {astype(a, dt, s), astype(b, dt, s), a_vec, b_vec};
}

}  // namespace

array gather_mm(const array& in_a, const array& in_b, const std::optional<array>& lhs_indices,
                const std::optional<array>& rhs_indices, bool /*sorted_indices: a hint*/,
                StreamOrDevice s) {
  if (!lhs_indices && !rhs_indices) return matmul(in_a, in_b, s);
  const Stream st = to_stream(s);
  auto [a, b, a_vec, b_vec] = float_operands("gather_mm", in_a, in_b, st);
  auto idx = broadcast_arrays({detail::batch_indices("gather_mm", "lhs_indices", lhs_indices, a, st),
                               detail::batch_indices("gather_mm", "rhs_indices", rhs_indices, b, st)},
                              st);
  Shape shape = idx[0].shape();
  shape.push_back(a.shape(-2));
  shape.push_back(b.shape(-1));
  array out(shape, a.dtype(), std::make_shared<GatherMM>(st), {a, b, idx[0], idx[1]});
  Shape final_shape = drop_vector_dims(shape, a_vec, b_vec);
  return final_shape == shape ? out : reshape(out, final_shape, st);
}

array segmented_mm(const array& in_a, const array& in_b, const array& segments,
                   StreamOrDevice s) {
  if (in_a.ndim() != 2 || in_b.ndim() != 2) {
    throw std::invalid_argument("[segmented_mm] a and b must be matrices; got shapes " +
                                detail::shape_str(in_a.shape()) + " and " +
                                detail::shape_str(in_b.shape()));
  }
  if (in_a.shape(1) != in_b.shape(0)) {
    throw std::invalid_argument("[segmented_mm] a " + detail::shape_str(in_a.shape()) +
                                " has " + std::to_string(in_a.shape(1)) + " columns but b " +
                                detail::shape_str(in_b.shape()) + " has " +
                                std::to_string(in_b.shape(0)) + " rows");
  }
  if (segments.ndim() < 1 || segments.shape(-1) != 2) {
    throw std::invalid_argument("[segmented_mm] segments must be (..., 2) [start, end) pairs; "
                                "got shape " + detail::shape_str(segments.shape()));
  }
  if (!issubdtype(segments.dtype(), integer)) {
    throw std::invalid_argument("[segmented_mm] segments must be integers; got " +
                                dtype_name(segments.dtype()));
  }
  const Dtype dt = promote_types(in_a.dtype(), in_b.dtype());
  if (!issubdtype(dt, floating)) {
    throw std::invalid_argument("[segmented_mm] only real floating inputs are supported; got " +
                                dtype_name(in_a.dtype()) + " and " + dtype_name(in_b.dtype()));
  }
  const Stream st = to_stream(s);
  Shape shape = segments.shape();
  shape.back() = in_a.shape(0);
  shape.push_back(in_b.shape(1));
  return array(std::move(shape), dt, std::make_shared<SegmentedMM>(st),
               {astype(in_a, dt, st), astype(in_b, dt, st), astype(segments, uint32, st)});
}

namespace {

// x with the tiles of `mask` applied: mask (..., ceil(rows / bs), ceil(cols / bs)) broadcast to
// x's batch, each entry spread over its bs x bs tile; bool keeps or zeroes (so a masked NaN
// vanishes), floating scales.
array apply_block_mask(const array& x, const array& mask, int bs, const char* name,
                       const Stream& s) {
  const int rows = x.shape(-2), cols = x.shape(-1);
  Shape tiles(x.shape().begin(), x.shape().end() - 2);
  tiles.push_back((rows + bs - 1) / bs);
  tiles.push_back((cols + bs - 1) / bs);
  std::optional<array> spread;
  try {
    spread = broadcast_to(mask, tiles, s);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(std::string("[block_masked_mm] ") + name + " " +
                                detail::shape_str(mask.shape()) + " does not broadcast to the " +
                                "tiles " + detail::shape_str(tiles) + " of block size " +
                                std::to_string(bs));
  }
  Shape start(x.ndim(), 0), stop = x.shape();
  array m = slice(repeat(repeat(*spread, bs, -2, s), bs, -1, s), start, stop, s);
  if (mask.dtype() == bool_) return where(m, x, zeros({}, x.dtype(), s), s);
  if (!issubdtype(mask.dtype(), floating)) {
    throw std::invalid_argument(std::string("[block_masked_mm] ") + name +
                                " must be bool or floating; got " + dtype_name(mask.dtype()));
  }
  return multiply(x, astype(m, x.dtype(), s), s);
}

}  // namespace

array block_masked_mm(const array& in_a, const array& in_b, int block_size,
                      const std::optional<array>& mask_out, const std::optional<array>& mask_lhs,
                      const std::optional<array>& mask_rhs, StreamOrDevice s) {
  if (!mask_out && !mask_lhs && !mask_rhs) return matmul(in_a, in_b, s);
  if (block_size != 32 && block_size != 64) {
    throw std::invalid_argument("[block_masked_mm] block_size " + std::to_string(block_size) +
                                " is not supported: use 32 or 64");
  }
  const Stream st = to_stream(s);
  auto [a, b, a_vec, b_vec] = float_operands("block_masked_mm", in_a, in_b, st);
  Shape batch = broadcast_batch("block_masked_mm", a.shape(), b.shape());
  a = broadcast_to(a, with_matrix(batch, a.shape(-2), a.shape(-1)), st);
  b = broadcast_to(b, with_matrix(batch, b.shape(-2), b.shape(-1)), st);
  if (mask_lhs) a = apply_block_mask(a, a_vec ? expand_dims(*mask_lhs, -2, st) : *mask_lhs,
                                     block_size, "mask_lhs", st);
  if (mask_rhs) b = apply_block_mask(b, b_vec ? expand_dims(*mask_rhs, -1, st) : *mask_rhs,
                                     block_size, "mask_rhs", st);
  array out = matmul(a, b, st);
  if (mask_out) {
    array m = *mask_out;
    if (a_vec) m = expand_dims(m, -2, st);
    if (b_vec) m = expand_dims(m, -1, st);
    out = apply_block_mask(out, m, block_size, "mask_out", st);
  }
  Shape final_shape = drop_vector_dims(out.shape(), a_vec, b_vec);
  return final_shape == out.shape() ? out : reshape(out, final_shape, st);
}

array addmm(array c, array a, array b, const float& alpha, const float& beta, StreamOrDevice s) {
  if (a.ndim() == 0 || b.ndim() == 0) {
    throw std::invalid_argument("[addmm] a and b must have at least one dimension; got shapes " +
                                detail::shape_str(a.shape()) + " and " +
                                detail::shape_str(b.shape()));
  }
  const bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
  const Shape in_a_shape = a.shape(), in_b_shape = b.shape();
  if (a_vec) a = reshape(a, {1, in_a_shape[0]}, s);
  if (b_vec) b = reshape(b, {in_b_shape[0], 1}, s);
  if (a.shape(-1) != b.shape(-2)) {
    throw std::invalid_argument("[addmm] last dimension of a " + detail::shape_str(in_a_shape) +
                                " must match the second to last of b " +
                                detail::shape_str(in_b_shape));
  }
  Dtype out_type = promote_types(promote_types(a.dtype(), b.dtype()), c.dtype());
  if (!issubdtype(out_type, floating)) {
    throw std::invalid_argument("[addmm] only real floating point inputs are supported; got c " +
                                dtype_name(c.dtype()) + ", a " + dtype_name(a.dtype()) + " and b " +
                                dtype_name(b.dtype()) + ", which promote to " +
                                dtype_name(out_type));
  }
  a = astype(a, out_type, s);
  b = astype(b, out_type, s);
  c = astype(c, out_type, s);
  if (a.ndim() > 2 || b.ndim() > 2) {
    Shape batch = broadcast_batch("addmm", a.shape(), b.shape());
    const array a0 = a;
    a = detail::broadcast_batch_for_product(a, batch, b, s);
    b = detail::broadcast_batch_for_product(b, batch, a0, s);
  }
  Shape prim_shape = a.shape();
  prim_shape.back() = b.shape(-1);
  // c broadcasts against the user-visible product shape (vector dims removed).
  Shape user_shape = drop_vector_dims(prim_shape, a_vec, b_vec);
  Shape c_shape = detail::broadcast_shapes("addmm", c.shape(), user_shape);
  if (c_shape != user_shape) {
    throw std::invalid_argument("[addmm] c of shape " + detail::shape_str(c.shape()) +
                                " cannot be broadcast to the product's shape " +
                                detail::shape_str(user_shape));
  }
  c = reshape(broadcast_to(c, user_shape, s), prim_shape, s);
  array out(prim_shape, out_type, std::make_shared<AddMM>(to_stream(s), alpha, beta), {a, b, c});
  return user_shape == prim_shape ? out : reshape(out, user_shape, s);
}

// ---- derivatives ----

namespace {

// x with its last two dims swapped and, for complex inputs, conjugated (the adjoint).
array adjoint(const array& x, const Stream& s) {
  array t = swapaxes(x, -1, -2, s);
  return x.dtype() == complex64 ? conjugate(t, s) : t;
}

// Move a vmapped axis to the front (-1: not batched, left as is).
array batch_first(const array& x, int axis, const Stream& s) {
  return axis > 0 ? moveaxis(x, axis, 0, s) : x;
}

// x's rows as one matrix: (..., M, K) -> (prod(...) * M, K); a matrix as it is.
array rows_2d(const array& x, const Stream& s) {
  if (x.ndim() <= 2) return x;
  return reshape(x, {-1, x.shape(-1)}, s);
}

array scaled(const array& x, float k, const Stream& s) {
  return k == 1.0f ? x : multiply(array(k, x.dtype()), x, s);
}

// `lhs @ rhs`, the cotangent of `primal` (2-D). When `primal` is itself a transpose (W.T in
// nn.Linear's x @ W.T), the product is made transposed, as (rhs^T @ lhs^T)^T: the same sums
// (bit for bit where Tessera's GEMM serves both: gemm.h), and the transpose's own gradient then
// swaps it back into a row-contiguous array. Made directly, W's gradient would be a column-major
// view that every consumer (the optimizer's update, the gradient all_sum) reads strided: the
// SGD update of a 512 x 512 weight in an MLP step took 200 us instead of ~40.
array product_for_cotangent(const array& lhs, const array& rhs, const array& primal,
                            const Stream& s) {
  const bool swapped = primal.ndim() == 2 && primal.has_primitive() &&
                       primal.dtype() != complex64 && [&] {
                         auto* t = dynamic_cast<const Transpose*>(&primal.primitive());
                         return t && t->axes() == std::vector<int>{1, 0};
                       }();
  if (!swapped || lhs.ndim() != 2 || rhs.ndim() != 2) return matmul(lhs, rhs, s);
  return transpose(matmul(transpose(rhs, s), transpose(lhs, s), s), s);
}

}  // namespace

std::vector<array> Matmul::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums, const std::vector<array>&) {
  const array& cotan = cotangents[0];
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg == 0) {
      out.push_back(
          product_for_cotangent(cotan, adjoint(primals[1], stream()), primals[0], stream()));
    } else {
      // b a matrix under a batched a: one product over all of a's rows.
      const bool flat = primals[1].ndim() == 2;
      const array a = flat ? rows_2d(primals[0], stream()) : primals[0];
      const array c = flat ? rows_2d(cotan, stream()) : cotan;
      out.push_back(product_for_cotangent(adjoint(a, stream()), c, primals[1], stream()));
    }
  }
  return out;
}

std::vector<array> Matmul::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  // d(a @ b) = da @ b + a @ db.
  std::optional<array> acc;
  for (size_t i = 0; i < argnums.size(); ++i) {
    array term = argnums[i] == 0 ? matmul(tangents[i], primals[1], stream())
                                 : matmul(primals[0], tangents[i], stream());
    acc = acc ? add(*acc, term, stream()) : term;
  }
  return {*acc};
}

std::pair<std::vector<array>, std::vector<int>> Matmul::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  // A vmapped axis moved to the front is one extra leading dim that broadcasts against the other
  // operand once both have the same rank (b may be a 2-D matrix under a batched a).
  array a = batch_first(inputs[0], axes[0], stream());
  array b = batch_first(inputs[1], axes[1], stream());
  const int rank_a = static_cast<int>(a.ndim()) - (axes[0] >= 0);
  const int rank_b = static_cast<int>(b.ndim()) - (axes[1] >= 0);
  if (rank_a != rank_b) {
    array& low = rank_a < rank_b ? a : b;
    const int missing = std::abs(rank_a - rank_b);
    const bool batched = (rank_a < rank_b ? axes[0] : axes[1]) >= 0;
    Shape shape = low.shape();
    shape.insert(shape.begin() + (batched ? 1 : 0), missing, 1);
    low = reshape(low, shape, stream());
  }
  return {{matmul(a, b, stream())}, {0}};
}

std::vector<array> AddMM::vjp(const std::vector<array>& primals,
                              const std::vector<array>& cotangents,
                              const std::vector<int>& argnums, const std::vector<array>&) {
  const array& cotan = cotangents[0];
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg == 0) {
      out.push_back(product_for_cotangent(scaled(cotan, alpha_, stream()),
                                          adjoint(primals[1], stream()), primals[0], stream()));
    } else if (arg == 1) {
      out.push_back(product_for_cotangent(adjoint(primals[0], stream()),
                                          scaled(cotan, alpha_, stream()), primals[1], stream()));
    } else {
      out.push_back(scaled(cotan, beta_, stream()));
    }
  }
  return out;
}

std::vector<array> AddMM::jvp(const std::vector<array>& primals,
                              const std::vector<array>& tangents,
                              const std::vector<int>& argnums) {
  std::optional<array> acc;
  for (size_t i = 0; i < argnums.size(); ++i) {
    array term = argnums[i] == 0   ? scaled(matmul(tangents[i], primals[1], stream()), alpha_,
                                            stream())
                 : argnums[i] == 1 ? scaled(matmul(primals[0], tangents[i], stream()), alpha_,
                                            stream())
                                   : scaled(tangents[i], beta_, stream());
    acc = acc ? add(*acc, term, stream()) : term;
  }
  return {*acc};
}

std::pair<std::vector<array>, std::vector<int>> AddMM::vmap(const std::vector<array>& inputs,
                                                            const std::vector<int>& axes) {
  array a = batch_first(inputs[0], axes[0], stream());
  array b = batch_first(inputs[1], axes[1], stream());
  array c = batch_first(inputs[2], axes[2], stream());
  // c must broadcast to the product's shape: when only c is batched, give a the batch dim.
  if (axes[2] >= 0 && axes[0] < 0 && axes[1] < 0) {
    Shape shape = a.shape();
    shape.insert(shape.begin(), c.shape(0));
    a = broadcast_to(expand_dims(a, 0, stream()), shape, stream());
  }
  return {{addmm(c, a, b, alpha_, beta_, stream())}, {0}};
}

// ---- primitive methods ----

std::vector<Shape> Matmul::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs[0].shape();
  out.back() = inputs[1].shape(-1);
  return {out};
}

std::vector<Shape> AddMM::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs[0].shape();
  out.back() = inputs[1].shape(-1);
  return {out};
}

std::vector<Shape> GatherMM::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs[2].shape();
  out.push_back(inputs[0].shape(-2));
  out.push_back(inputs[1].shape(-1));
  return {out};
}

// As MLX: da gathers the cotangent through b's matrices transposed and adds each result into the
// a matrix it came from; db adds a_lhs^T g per position into b's matrix rhs.
std::vector<array> GatherMM::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums, const std::vector<array>&) {
  const Stream& s = stream();
  const array &a = primals[0], &b = primals[1], &lhs = primals[2], &rhs = primals[3];
  const array& g = cotangents[0];
  std::vector<array> out;
  for (int arg : argnums) {
    if (arg == 0) {
      array das = gather_mm(g, swapaxes(b, -1, -2, s), std::nullopt, rhs, false, s);
      out.push_back(detail::scatter_matrices(a.shape(), lhs, das, s));
    } else if (arg == 1) {
      const int nb = static_cast<int>(lhs.size());
      array as = take(reshape(a, {-1, a.shape(-2), a.shape(-1)}, s), reshape(lhs, {-1}, s), 0, s);
      array gs = reshape(g, {nb, g.shape(-2), g.shape(-1)}, s);
      out.push_back(detail::scatter_matrices(b.shape(), rhs, matmul(swapaxes(as, -1, -2, s), gs, s), s));
    } else {
      throw std::invalid_argument("[gather_mm] no gradient with respect to the indices; wrap "
                                  "them in stop_gradient");
    }
  }
  return out;
}

std::vector<Shape> SegmentedMM::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs[2].shape();
  out.back() = inputs[0].shape(0);
  out.push_back(inputs[1].shape(1));
  return {out};
}

bool AddMM::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const AddMM*>(&other);
  return o && o->alpha_ == alpha_ && o->beta_ == beta_;
}

}  // namespace tessera
