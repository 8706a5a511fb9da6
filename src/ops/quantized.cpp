// Front ends of quantize, dequantize and quantized_matmul (MLX's affine format) and the
// derivatives of QuantizedMatmul (in x, scales and biases; as MLX, none in the packed weights).
// Kernels in backend/cpu/quantized.cpp.
#include <optional>
#include <stdexcept>
#include <string>

#include "ops/quantized.h"
#include "ops/utils.h"
#include "tessera/linalg.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

struct Format {
  int group_size, bits;
};

Format affine_format(const char* op, const std::string& mode, std::optional<int> group_size,
                     std::optional<int> bits) {
  if (mode != "affine") {
    const bool known = mode == "mxfp4" || mode == "mxfp8" || mode == "nvfp4";
    throw std::invalid_argument(std::string("[") + op + "] quantization mode '" + mode + "' " +
                                (known ? "is not supported by Tessera yet; use 'affine'"
                                       : "is unknown; the modes are 'affine', 'mxfp4', "
                                         "'mxfp8' and 'nvfp4'"));
  }
  Format f{group_size.value_or(64), bits.value_or(4)};
  if (f.group_size != 32 && f.group_size != 64 && f.group_size != 128) {
    throw std::invalid_argument(std::string("[") + op + "] group_size " +
                                std::to_string(f.group_size) + " is not supported: use 32, 64 "
                                "or 128");
  }
  if (f.bits < 2 || f.bits > 8 || f.bits == 7) {
    throw std::invalid_argument(std::string("[") + op + "] bits " + std::to_string(f.bits) +
                                " is not supported: use 2, 3, 4, 5, 6 or 8");
  }
  return f;
}

// The unpacked size of a packed last dim, checked against the scales' groups.
int unpacked_size(const char* op, const array& w, const array& scales, const Format& f) {
  if (w.dtype() != uint32) {
    throw std::invalid_argument(std::string("[") + op +
                                "] the quantized matrix must be uint32; got " +
                                dtype_name(w.dtype()));
  }
  if (w.ndim() < 2 || scales.ndim() != w.ndim()) {
    throw std::invalid_argument(std::string("[") + op + "] w " + detail::shape_str(w.shape()) +
                                " and scales " + detail::shape_str(scales.shape()) +
                                " must have the same rank, 2 or more");
  }
  const int64_t k = int64_t{w.shape(-1)} * 32 / f.bits;
  if (int64_t{w.shape(-1)} * 32 % f.bits != 0 || k != int64_t{scales.shape(-1)} * f.group_size) {
    throw std::invalid_argument(
        std::string("[") + op + "] w " + detail::shape_str(w.shape()) + " holds " +
        std::to_string(k) + " values per row at bits=" + std::to_string(f.bits) + ", but scales " +
        detail::shape_str(scales.shape()) + " describe " +
        std::to_string(int64_t{scales.shape(-1)} * f.group_size) + " at group_size=" +
        std::to_string(f.group_size));
  }
  for (size_t i = 0; i + 1 < w.ndim(); ++i) {
    if (w.shape(static_cast<int>(i)) != scales.shape(static_cast<int>(i))) {
      throw std::invalid_argument(std::string("[") + op + "] w " + detail::shape_str(w.shape()) +
                                  " and scales " + detail::shape_str(scales.shape()) +
                                  " differ in a leading dim");
    }
  }
  return static_cast<int>(k);
}

const array& affine_biases(const char* op, const std::optional<array>& biases,
                           const array& scales) {
  if (!biases) {
    throw std::invalid_argument(std::string("[") + op +
                                "] affine quantization needs the biases");
  }
  if (biases->shape() != scales.shape()) {
    throw std::invalid_argument(std::string("[") + op + "] biases " +
                                detail::shape_str(biases->shape()) + " must match scales " +
                                detail::shape_str(scales.shape()));
  }
  return *biases;
}

}  // namespace

std::vector<array> quantize(const array& w, std::optional<int> group_size,
                            std::optional<int> bits, const std::string& mode, StreamOrDevice s) {
  const Format f = affine_format("quantize", mode, group_size, bits);
  if (!issubdtype(w.dtype(), floating)) {
    throw std::invalid_argument("[quantize] only real floating arrays can be quantized; got " +
                                dtype_name(w.dtype()));
  }
  if (w.ndim() < 2) {
    throw std::invalid_argument("[quantize] needs a matrix (2 or more dims); got shape " +
                                detail::shape_str(w.shape()));
  }
  if (w.shape(-1) % f.group_size != 0) {
    throw std::invalid_argument("[quantize] the last dim of " + detail::shape_str(w.shape()) +
                                " must be a multiple of group_size " +
                                std::to_string(f.group_size));
  }
  auto prim = std::make_shared<AffineQuantize>(to_stream(s), f.group_size, f.bits);
  auto shapes = prim->output_shapes({w});
  return array::make_arrays(std::move(shapes), {uint32, w.dtype(), w.dtype()}, prim, {w});
}

array dequantize(const array& w, const array& scales, const std::optional<array>& biases,
                 std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
                 std::optional<Dtype> dtype, StreamOrDevice s) {
  const Format f = affine_format("dequantize", mode, group_size, bits);
  const array& b = affine_biases("dequantize", biases, scales);
  const int k = unpacked_size("dequantize", w, scales, f);
  Dtype out = dtype.value_or(promote_types(scales.dtype(), b.dtype()));
  if (!issubdtype(out, floating)) {
    throw std::invalid_argument("[dequantize] the output dtype must be real floating; got " +
                                dtype_name(out));
  }
  const Dtype sb = promote_types(scales.dtype(), b.dtype());
  Shape shape = w.shape();
  shape.back() = k;
  array r(std::move(shape), sb, std::make_shared<AffineDequantize>(to_stream(s), f.group_size, f.bits),
          {w, astype(scales, sb, s), astype(b, sb, s)});
  return astype(r, out, s);
}

array quantized_matmul(const array& x, const array& w, const array& scales,
                       const std::optional<array>& biases, bool transpose,
                       std::optional<int> group_size, std::optional<int> bits,
                       const std::string& mode, StreamOrDevice s) {
  const Format f = affine_format("quantized_matmul", mode, group_size, bits);
  const array& b = affine_biases("quantized_matmul", biases, scales);
  const int k = unpacked_size("quantized_matmul", w, scales, f);
  if (x.ndim() < 1) {
    throw std::invalid_argument("[quantized_matmul] x must have 1 or more dims");
  }
  // transpose: w is (..., N, K); else (..., K, N).
  const int inner = transpose ? k : w.shape(-2), outer = transpose ? w.shape(-2) : k;
  if (x.shape(-1) != inner) {
    throw std::invalid_argument("[quantized_matmul] x " + detail::shape_str(x.shape()) +
                                " has " + std::to_string(x.shape(-1)) + " columns but w " +
                                detail::shape_str(w.shape()) + " (" +
                                (transpose ? "transposed" : "not transposed") + ") needs " +
                                std::to_string(inner));
  }
  const Dtype dt = promote_types(x.dtype(), promote_types(scales.dtype(), b.dtype()));
  if (!issubdtype(dt, floating)) {
    throw std::invalid_argument("[quantized_matmul] x must be real floating; got " +
                                dtype_name(x.dtype()));
  }
  auto prim = std::make_shared<QuantizedMatmul>(to_stream(s), f.group_size, f.bits, transpose);
  if (w.ndim() == 2) {
    Shape shape = x.shape();
    shape.back() = outer;
    return array(std::move(shape), dt, prim,
                 {astype(x, dt, s), w, astype(scales, dt, s), astype(b, dt, s)});
  }
  // A batch of matrices: x (..., M, K) and w's batch dims broadcast together (a 1-D x is one
  // row, removed again from the result).
  const bool vec = x.ndim() == 1;
  array xm = vec ? reshape(x, {1, x.shape(0)}, s) : x;
  Shape xb(xm.shape().begin(), xm.shape().end() - 2), wb(w.shape().begin(), w.shape().end() - 2);
  Shape batch = detail::broadcast_shapes("quantized_matmul", xb, wb);
  auto with = [&](const array& a, int rows, int cols) {
    Shape sh = batch;
    sh.push_back(rows);
    sh.push_back(cols);
    return broadcast_to(a, sh, s);
  };
  array x2 = with(astype(xm, dt, s), xm.shape(-2), xm.shape(-1));
  array w2 = with(w, w.shape(-2), w.shape(-1));
  array s2 = with(astype(scales, dt, s), scales.shape(-2), scales.shape(-1));
  array b2 = with(astype(b, dt, s), b.shape(-2), b.shape(-1));
  Shape shape = x2.shape();
  shape.back() = outer;
  array out(shape, dt, prim, {x2, w2, s2, b2});
  if (vec) {
    shape.erase(shape.end() - 2);
    out = reshape(out, shape, s);
  }
  return out;
}

// ---- the primitives ----

bool AffineQuantize::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const AffineQuantize*>(&other);
  return o && same_format(*o);
}
bool AffineDequantize::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const AffineDequantize*>(&other);
  return o && same_format(*o);
}
bool QuantizedMatmul::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const QuantizedMatmul*>(&other);
  return o && same_format(*o) && o->transpose_ == transpose_;
}

std::vector<Shape> AffineQuantize::output_shapes(const std::vector<array>& inputs) {
  Shape wq = inputs[0].shape(), sc = inputs[0].shape();
  wq.back() = static_cast<int>(int64_t{wq.back()} * bits_ / 32);
  sc.back() /= group_size_;
  return {wq, sc, sc};
}
std::vector<Shape> AffineDequantize::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs[0].shape();
  out.back() = inputs[1].shape(-1) * group_size_;
  return {out};
}
std::vector<Shape> QuantizedMatmul::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs[0].shape();
  out.back() = transpose_ ? inputs[1].shape(-2) : inputs[2].shape(-1) * group_size_;
  return {out};
}

namespace {

array batch_first(const array& x, int axis, const Stream& s) {
  return axis > 0 ? moveaxis(x, axis, 0, s) : x;
}

std::string qstr(int v) { return std::to_string(v); }

}  // namespace

std::pair<std::vector<array>, std::vector<int>> AffineQuantize::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  const array& w = inputs[0];
  if (axes[0] == static_cast<int>(w.ndim()) - 1) {
    throw std::invalid_argument("[quantize] vmap over the quantized (last) axis is not possible");
  }
  auto out = quantize(batch_first(w, axes[0], stream()), group_size_, bits_, "affine", stream());
  return {out, {0, 0, 0}};
}

std::pair<std::vector<array>, std::vector<int>> AffineDequantize::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  std::vector<array> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] == static_cast<int>(inputs[i].ndim()) - 1) {
      throw std::invalid_argument("[dequantize] vmap over the packed (last) axis is not possible");
    }
    in.push_back(axes[i] < 0 ? expand_dims(inputs[i], 0, stream())
                             : batch_first(inputs[i], axes[i], stream()));
  }
  // Every operand with the batch in front (size 1 where it had none), broadcast together.
  int b = 1;
  for (const auto& a : in) b = std::max(b, a.shape(0));
  for (auto& a : in) {
    Shape sh = a.shape();
    sh[0] = b;
    a = broadcast_to(a, sh, stream());
  }
  return {{dequantize(in[0], in[1], in[2], group_size_, bits_, "affine", std::nullopt, stream())},
          {0}};
}

// y = x @ W^T (transpose) with W = dequantize(w): dx = g @ W, the same primitive untransposed.
// dW (N, K) = g^T x, flattened over x's leading dims; dbiases sums dW's groups, dscales weighs
// them by q.
std::vector<array> QuantizedMatmul::vjp(const std::vector<array>& primals,
                                        const std::vector<array>& cotangents,
                                        const std::vector<int>& argnums,
                                        const std::vector<array>&) {
  const Stream& s = stream();
  const array &x = primals[0], &w = primals[1], &scales = primals[2], &biases = primals[3];
  const array& g = cotangents[0];
  std::vector<array> out;
  std::optional<array> dw_groups;
  for (int arg : argnums) {
    if (arg == 0) {
      out.push_back(quantized_matmul(g, w, scales, biases, !transpose_, group_size_, bits_,
                                     "affine", s));
      continue;
    }
    if (arg == 1) {
      throw std::invalid_argument("[quantized_matmul] no gradient with respect to the quantized "
                                  "weights (they are integers); differentiate scales / biases");
    }
    if (!dw_groups) {
      // One matrix: every row of x contributes; a batch: each batch entry's rows (w was
      // broadcast to the batch, so its own vjp sums the copies).
      array fg = w.ndim() == 2 ? reshape(g, {-1, g.shape(-1)}, s) : g;
      array fx = w.ndim() == 2 ? reshape(x, {-1, x.shape(-1)}, s) : x;
      array dw = transpose_ ? matmul(swapaxes(fg, -1, -2, s), fx, s)
                            : matmul(swapaxes(fx, -1, -2, s), fg, s);
      dw_groups = unflatten(dw, -1, {-1, group_size_}, s);
    }
    if (arg == 3) {
      out.push_back(sum(*dw_groups, -1, false, s));
    } else {
      array q = dequantize(w, ones_like(scales, s), zeros_like(biases, s), group_size_, bits_,
                           "affine", std::nullopt, s);
      out.push_back(sum(multiply(*dw_groups, unflatten(q, -1, {-1, group_size_}, s), s), -1,
                        false, s));
    }
  }
  return out;
}

std::vector<array> QuantizedMatmul::jvp(const std::vector<array>& primals,
                                        const std::vector<array>& tangents,
                                        const std::vector<int>& argnums) {
  for (int arg : argnums) {
    if (arg != 0) {
      throw std::invalid_argument("[quantized_matmul] forward-mode derivatives exist only with "
                                  "respect to x (argument " + qstr(arg) + " requested)");
    }
  }
  return {quantized_matmul(tangents[0], primals[1], primals[2], primals[3], transpose_,
                           group_size_, bits_, "affine", stream())};
}

std::pair<std::vector<array>, std::vector<int>> QuantizedMatmul::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  for (size_t i = 1; i < axes.size(); ++i) {
    if (axes[i] >= 0) {
      throw std::invalid_argument("[quantized_matmul] vmap over the quantized weights, scales or "
                                  "biases is not supported; only over x");
    }
  }
  array x = batch_first(inputs[0], axes[0], stream());
  return {{quantized_matmul(x, inputs[1], inputs[2], inputs[3], transpose_, group_size_, bits_,
                            "affine", stream())},
          {axes[0] < 0 ? -1 : 0}};
}

std::vector<array> AffineDequantize::vjp(const std::vector<array>& primals,
                                         const std::vector<array>& cotangents,
                                         const std::vector<int>& argnums,
                                         const std::vector<array>&) {
  const Stream& s = stream();
  std::vector<array> out;
  array g = unflatten(cotangents[0], -1, {-1, group_size_}, s);
  for (int arg : argnums) {
    if (arg == 0) {
      throw std::invalid_argument("[dequantize] no gradient with respect to the quantized "
                                  "weights (they are integers)");
    }
    if (arg == 2) {
      out.push_back(sum(g, -1, false, s));
    } else {
      array q = dequantize(primals[0], ones_like(primals[1], s), zeros_like(primals[2], s),
                           group_size_, bits_, "affine", std::nullopt, s);
      out.push_back(sum(multiply(g, unflatten(q, -1, {-1, group_size_}, s), s), -1, false, s));
    }
  }
  return out;
}

array to_fp8(const array& x, StreamOrDevice s) {
  if (!issubdtype(x.dtype(), floating)) {
    throw std::invalid_argument("[to_fp8] needs a real floating input; got " + dtype_name(x.dtype()));
  }
  const Dtype in = x.dtype() == float64 ? float32 : x.dtype();
  return array(x.shape(), uint8, std::make_shared<ConvertFP8>(to_stream(s), true, uint8),
               {astype(x, in, s)});
}

array from_fp8(const array& x, Dtype dtype, StreamOrDevice s) {
  if (x.dtype() != uint8) {
    throw std::invalid_argument("[from_fp8] needs uint8 (fp8 e4m3 bytes); got " + dtype_name(x.dtype()));
  }
  if (!issubdtype(dtype, floating)) {
    throw std::invalid_argument("[from_fp8] the output dtype must be real floating; got " +
                                dtype_name(dtype));
  }
  return array(x.shape(), dtype, std::make_shared<ConvertFP8>(to_stream(s), false, dtype), {x});
}

std::pair<std::vector<array>, std::vector<int>> ConvertFP8::vmap(const std::vector<array>& inputs,
                                                                 const std::vector<int>& axes) {
  return {{to_ ? to_fp8(inputs[0], stream()) : from_fp8(inputs[0], out_, stream())}, axes};
}

}  // namespace tessera
