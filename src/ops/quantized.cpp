// Front ends of quantize, dequantize and quantized_matmul (MLX's affine and fp formats) and the
// derivatives of QuantizedMatmul (in x, and affine's scales and biases; as MLX, none in the
// packed weights).
// Kernels in backend/cpu/quantized.cpp.
#include <optional>
#include <stdexcept>
#include <string>

#include "ops/quantized.h"
#include "ops/utils.h"
#include "tessera/linalg.h"
#include "tessera/ops.h"
#include "tessera/transforms.h"

namespace tessera {

const char* quant_mode_name(QuantMode mode) {
  switch (mode) {
    case QuantMode::Affine: return "affine";
    case QuantMode::Mxfp4: return "mxfp4";
    case QuantMode::Mxfp8: return "mxfp8";
    case QuantMode::Nvfp4: return "nvfp4";
  }
  return "?";
}

QuantMode quant_mode(const char* op, const std::string& name) {
  for (QuantMode m : {QuantMode::Affine, QuantMode::Mxfp4, QuantMode::Mxfp8, QuantMode::Nvfp4}) {
    if (name == quant_mode_name(m)) return m;
  }
  throw std::invalid_argument(std::string("[") + op + "] quantization mode '" + name +
                              "' is unknown; the modes are 'affine', 'mxfp4', 'mxfp8' and "
                              "'nvfp4'");
}

namespace {

struct Format {
  int group_size, bits;
  QuantMode mode;
  bool affine() const { return mode == QuantMode::Affine; }
  std::string mode_str() const { return std::string("mode '") + quant_mode_name(mode) + "'"; }
};

std::string tag(const char* op) { return std::string("[") + op + "] "; }

// The mode's format with MLX's defaults, checked (the fp modes have one group size and width).
Format quant_format(const char* op, const std::string& mode, std::optional<int> group_size,
                    std::optional<int> bits) {
  const QuantMode m = quant_mode(op, mode);
  if (m != QuantMode::Affine) {
    const int want_gs = m == QuantMode::Nvfp4 ? 16 : 32, want_bits = m == QuantMode::Mxfp8 ? 8 : 4;
    Format f{group_size.value_or(want_gs), bits.value_or(want_bits), m};
    if (f.group_size != want_gs || f.bits != want_bits) {
      throw std::invalid_argument(
          tag(op) + f.mode_str() + " packs groups of " + std::to_string(want_gs) + " in " +
          std::to_string(want_bits) + " bits; got group_size " + std::to_string(f.group_size) +
          " and bits " + std::to_string(f.bits) + " (leave them unset)");
    }
    return f;
  }
  Format f{group_size.value_or(64), bits.value_or(4), m};
  if (f.group_size != 32 && f.group_size != 64 && f.group_size != 128) {
    throw std::invalid_argument(tag(op) + "group_size " + std::to_string(f.group_size) +
                                " is not supported: use 32, 64 or 128");
  }
  if (f.bits < 2 || f.bits > 8 || f.bits == 7) {
    throw std::invalid_argument(tag(op) + "bits " + std::to_string(f.bits) +
                                " is not supported: use 2, 3, 4, 5, 6 or 8");
  }
  return f;
}

// The unpacked size of a packed last dim, checked against the scales' groups.
int unpacked_size(const char* op, const array& w, const array& scales, const Format& f) {
  if (w.dtype() != uint32) {
    throw std::invalid_argument(tag(op) + "the quantized matrix must be uint32; got " +
                                dtype_name(w.dtype()));
  }
  if (w.ndim() < 2 || scales.ndim() != w.ndim()) {
    throw std::invalid_argument(tag(op) + "w " + detail::shape_str(w.shape()) + " and scales " +
                                detail::shape_str(scales.shape()) +
                                " must have the same rank, 2 or more");
  }
  const int64_t k = int64_t{w.shape(-1)} * 32 / f.bits;
  if (int64_t{w.shape(-1)} * 32 % f.bits != 0 || k != int64_t{scales.shape(-1)} * f.group_size) {
    throw std::invalid_argument(
        tag(op) + "w " + detail::shape_str(w.shape()) + " holds " + std::to_string(k) +
        " values per row at bits=" + std::to_string(f.bits) + ", but scales " +
        detail::shape_str(scales.shape()) + " describe " +
        std::to_string(int64_t{scales.shape(-1)} * f.group_size) + " at group_size=" +
        std::to_string(f.group_size));
  }
  for (size_t i = 0; i + 1 < w.ndim(); ++i) {
    if (w.shape(static_cast<int>(i)) != scales.shape(static_cast<int>(i))) {
      throw std::invalid_argument(tag(op) + "w " + detail::shape_str(w.shape()) + " and scales " +
                                  detail::shape_str(scales.shape()) + " differ in a leading dim");
    }
  }
  return static_cast<int>(k);
}

// affine: the biases (required, shaped as the scales); the fp modes: none, uint8 scales.
void check_scales(const char* op, const Format& f, const array& scales,
                  const std::optional<array>& biases) {
  if (f.affine()) {
    if (!biases) throw std::invalid_argument(tag(op) + "affine quantization needs the biases");
    if (biases->shape() != scales.shape()) {
      throw std::invalid_argument(tag(op) + "biases " + detail::shape_str(biases->shape()) +
                                  " must match scales " + detail::shape_str(scales.shape()));
    }
    return;
  }
  if (biases) {
    throw std::invalid_argument(tag(op) + f.mode_str() +
                                " has no biases (only 'affine' does); pass biases=None");
  }
  if (scales.dtype() != uint8) {
    throw std::invalid_argument(tag(op) + f.mode_str() + " stores its scales as uint8; got " +
                                dtype_name(scales.dtype()));
  }
}

// global_scale belongs to nvfp4: a float32 scalar (any shape of one element).
void check_global_scale(const char* op, const Format& f, const std::optional<array>& gs) {
  if (!gs) return;
  if (f.mode != QuantMode::Nvfp4) {
    throw std::invalid_argument(tag(op) + "global_scale belongs to mode 'nvfp4'; " + f.mode_str() +
                                " takes none");
  }
  if (gs->size() != 1 || gs->dtype() != float32) {
    throw std::invalid_argument(tag(op) + "global_scale must be a float32 scalar; got " +
                                dtype_name(gs->dtype()) + " of shape " +
                                detail::shape_str(gs->shape()));
  }
}

}  // namespace

std::vector<array> quantize(const array& w, std::optional<int> group_size,
                            std::optional<int> bits, const std::string& mode,
                            const std::optional<array>& global_scale, StreamOrDevice s) {
  const Format f = quant_format("quantize", mode, group_size, bits);
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
  check_global_scale("quantize", f, global_scale);
  if (f.affine()) {
    auto prim = std::make_shared<AffineQuantize>(to_stream(s), f.group_size, f.bits);
    auto shapes = prim->output_shapes({w});
    return array::make_arrays(std::move(shapes), {uint32, w.dtype(), w.dtype()}, prim, {w});
  }
  auto prim = std::make_shared<FPQuantize>(to_stream(s), f.group_size, f.bits, f.mode);
  std::vector<array> in{w};
  if (global_scale) in.push_back(*global_scale);
  auto shapes = prim->output_shapes(in);
  return array::make_arrays(std::move(shapes), {uint32, uint8}, prim, std::move(in));
}

array dequantize(const array& w, const array& scales, const std::optional<array>& biases,
                 std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
                 const std::optional<array>& global_scale, std::optional<Dtype> dtype,
                 StreamOrDevice s) {
  const Format f = quant_format("dequantize", mode, group_size, bits);
  check_scales("dequantize", f, scales, biases);
  check_global_scale("dequantize", f, global_scale);
  const int k = unpacked_size("dequantize", w, scales, f);
  const Dtype natural = f.affine() ? promote_types(scales.dtype(), biases->dtype()) : bfloat16;
  const Dtype out = dtype.value_or(natural);
  if (!issubdtype(out, floating)) {
    throw std::invalid_argument("[dequantize] the output dtype must be real floating; got " +
                                dtype_name(out));
  }
  Shape shape = w.shape();
  shape.back() = k;
  if (!f.affine()) {
    std::vector<array> in{w, scales};
    if (global_scale) in.push_back(*global_scale);
    return array(std::move(shape), out,
                 std::make_shared<FPDequantize>(to_stream(s), f.group_size, f.bits, f.mode, out),
                 std::move(in));
  }
  array r(std::move(shape), natural,
          std::make_shared<AffineDequantize>(to_stream(s), f.group_size, f.bits),
          {w, astype(scales, natural, s), astype(*biases, natural, s)});
  return astype(r, out, s);
}

array quantized_matmul(const array& x, const array& w, const array& scales,
                       const std::optional<array>& biases, bool transpose,
                       std::optional<int> group_size, std::optional<int> bits,
                       const std::string& mode, StreamOrDevice s) {
  const Format f = quant_format("quantized_matmul", mode, group_size, bits);
  check_scales("quantized_matmul", f, scales, biases);
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
  // affine: x, scales and biases in their common type; the fp modes: x's.
  const Dtype dt = f.affine()
                       ? promote_types(x.dtype(), promote_types(scales.dtype(), biases->dtype()))
                       : x.dtype();
  if (!issubdtype(dt, floating)) {
    throw std::invalid_argument("[quantized_matmul] x must be real floating; got " +
                                dtype_name(x.dtype()));
  }
  auto prim =
      std::make_shared<QuantizedMatmul>(to_stream(s), f.group_size, f.bits, f.mode, transpose);
  std::vector<array> in{astype(x, dt, s), w};
  in.push_back(f.affine() ? astype(scales, dt, s) : scales);
  if (f.affine()) in.push_back(astype(*biases, dt, s));
  if (w.ndim() == 2) {
    Shape shape = x.shape();
    shape.back() = outer;
    return array(std::move(shape), dt, prim, std::move(in));
  }
  // A batch of matrices: x (..., M, K) and w's batch dims broadcast together (a 1-D x is one
  // row, removed again from the result).
  const bool vec = x.ndim() == 1;
  if (vec) in[0] = reshape(in[0], {1, x.shape(0)}, s);
  Shape xb(in[0].shape().begin(), in[0].shape().end() - 2),
      wb(w.shape().begin(), w.shape().end() - 2);
  const Shape batch = detail::broadcast_shapes("quantized_matmul", xb, wb);
  for (auto& a : in) {
    Shape sh = batch;
    sh.push_back(a.shape(-2));
    sh.push_back(a.shape(-1));
    a = broadcast_to(a, sh, s);
  }
  Shape shape = in[0].shape();
  shape.back() = outer;
  array out(shape, dt, prim, std::move(in));
  if (vec) {
    shape.erase(shape.end() - 2);
    out = reshape(out, shape, s);
  }
  return out;
}

array gather_qmm(const array& x, const array& w, const array& scales,
                 const std::optional<array>& biases, const std::optional<array>& lhs_indices,
                 const std::optional<array>& rhs_indices, bool transpose,
                 std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
                 const std::optional<array>& global_scale, bool sorted_indices, StreamOrDevice s) {
  if (!global_scale) {
    return gather_qmm(x, w, scales, biases, lhs_indices, rhs_indices, transpose, group_size, bits,
                      mode, sorted_indices, s);
  }
  // nvfp4 with a global scale (mlx-lm's quantized expert layers pass it, None or not): the
  // weights dequantized with it, then gather_mm.
  const Format f = quant_format("gather_qmm", mode, group_size, bits);
  check_global_scale("gather_qmm", f, global_scale);
  Dtype t = issubdtype(x.dtype(), floating) ? x.dtype() : float32;
  array wd = dequantize(w, scales, biases, group_size, bits, mode, global_scale, t, s);
  return gather_mm(x, transpose ? swapaxes(wd, -1, -2, s) : wd, lhs_indices, rhs_indices,
                   sorted_indices, s);
}

array gather_qmm(const array& x, const array& w, const array& scales,
                 const std::optional<array>& biases, const std::optional<array>& lhs_indices,
                 const std::optional<array>& rhs_indices, bool transpose,
                 std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
                 bool /*sorted_indices: a hint for MLX's GPU kernels*/, StreamOrDevice s) {
  if (!lhs_indices && !rhs_indices) {
    return quantized_matmul(x, w, scales, biases, transpose, group_size, bits, mode, s);
  }
  const Format f = quant_format("gather_qmm", mode, group_size, bits);
  check_scales("gather_qmm", f, scales, biases);
  const int k = unpacked_size("gather_qmm", w, scales, f);
  const Stream st = to_stream(s);
  auto idx = broadcast_arrays(
      {detail::batch_indices("gather_qmm", "lhs_indices", lhs_indices, x, st),
       detail::batch_indices("gather_qmm", "rhs_indices", rhs_indices, w, st)},
      st);
  const int inner = transpose ? k : w.shape(-2), outer = transpose ? w.shape(-2) : k;
  if (x.shape(-1) != inner) {
    throw std::invalid_argument("[gather_qmm] x " + detail::shape_str(x.shape()) + " has " +
                                std::to_string(x.shape(-1)) + " columns but w " +
                                detail::shape_str(w.shape()) + " (" +
                                (transpose ? "transposed" : "not transposed") + ") needs " +
                                std::to_string(inner));
  }
  const Dtype dt = f.affine()
                       ? promote_types(x.dtype(), promote_types(scales.dtype(), biases->dtype()))
                       : x.dtype();
  if (!issubdtype(dt, floating)) {
    throw std::invalid_argument("[gather_qmm] x must be real floating; got " +
                                dtype_name(x.dtype()));
  }
  Shape shape = idx[0].shape();
  shape.push_back(x.shape(-2));
  shape.push_back(outer);
  std::vector<array> in{astype(x, dt, st), w};
  in.push_back(f.affine() ? astype(scales, dt, st) : scales);
  if (f.affine()) in.push_back(astype(*biases, dt, st));
  in.push_back(idx[0]);
  in.push_back(idx[1]);
  return array(std::move(shape), dt,
               std::make_shared<GatherQMM>(st, f.group_size, f.bits, f.mode, transpose),
               std::move(in));
}

namespace {

// qqmm's operands: x's values as its quantization in the mode leaves them, w packed (quantized
// here when given as floats) with its scales, and the factor global_scale_w / (448 * 6) that the
// packed product still owes (nvfp4 with global scales).
struct QQOperands {
  array xhat, wq, scales;
  std::optional<array> w_factor;
};

QQOperands qq_operands(const char* op, const array& x, const array& w,
                       const std::optional<array>& scales_w, const Format& f,
                       const std::optional<array>& gsx, const std::optional<array>& gsw,
                       const Stream& s) {
  if (f.affine()) {
    throw std::invalid_argument(tag(op) + "quantizes both operands in an fp mode ('nvfp4', "
                                "'mxfp8' or 'mxfp4'); for an affine weight use quantized_matmul");
  }
  auto half_or_single = [&](const array& a, const char* which) {
    if (!issubdtype(a.dtype(), floating) || a.dtype() == float64) {
      throw std::invalid_argument(tag(op) + which + " must be float32, float16 or bfloat16; got " +
                                  dtype_name(a.dtype()));
    }
  };
  half_or_single(x, "x");
  check_global_scale(op, f, gsx);
  check_global_scale(op, f, gsw);
  if (gsx.has_value() != gsw.has_value()) {
    throw std::invalid_argument(tag(op) + "mode 'nvfp4' takes both global_scale_x and "
                                "global_scale_w, or neither");
  }
  const char* mode = quant_mode_name(f.mode);
  std::optional<array> wq, sw;
  if (w.dtype() == uint32) {
    if (!scales_w) {
      throw std::invalid_argument(tag(op) + "a packed (uint32) w needs its scales");
    }
    wq = w;
    sw = *scales_w;
  } else {
    half_or_single(w, "w");
    if (scales_w) {
      throw std::invalid_argument(tag(op) + "scales belong to a packed (uint32) w; this w is " +
                                  dtype_name(w.dtype()) + " and is quantized here");
    }
    auto q = quantize(w, f.group_size, f.bits, mode, gsw, s);
    wq = q[0];
    sw = q[1];
  }
  auto xq = quantize(x.ndim() == 1 ? reshape(x, {1, x.shape(0)}, s) : x, f.group_size, f.bits,
                     mode, gsx, s);
  array xhat = dequantize(xq[0], xq[1], std::nullopt, f.group_size, f.bits, mode, gsx,
                          x.dtype(), s);
  if (x.ndim() == 1) xhat = reshape(xhat, {x.shape(0)}, s);
  std::optional<array> factor;
  if (gsw) factor = divide(reshape(*gsw, {}, s), array(2688.0f), s);
  return {xhat, *wq, *sw, factor};
}

array owed(const array& out, const std::optional<array>& factor, const Stream& s) {
  return factor ? astype(multiply(out, *factor, s), out.dtype(), s) : out;
}

}  // namespace

array qqmm(const array& x, const array& w, const std::optional<array>& scales_w,
           std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
           const std::optional<array>& global_scale_x, const std::optional<array>& global_scale_w,
           StreamOrDevice s) {
  const Format f = quant_format("qqmm", mode, group_size, bits);
  const Stream st = to_stream(s);
  auto product = [=](const array& xs, const array& ws) {
    auto o = qq_operands("qqmm", xs, ws, scales_w, f, global_scale_x, global_scale_w, st);
    return owed(quantized_matmul(o.xhat, o.wq, o.scales, std::nullopt, true, f.group_size,
                                 f.bits, mode, st),
                o.w_factor, st);
  };
  if (w.dtype() == uint32 || x.ndim() == 0) return product(x, w);
  // A float w (training): MLX's gradients, themselves products of quantized operands:
  // dx = qqmm(g, w^T) and dw = qqmm(g^T, x^T) (so N and the rows of x quantize in groups too),
  // g's global scale max |g| when the forward product has global scales.
  const int k = x.shape(-1);
  array x2 = x.ndim() == 2 ? x : reshape(x, {-1, k}, st);
  auto fwd = [=](const std::vector<array>& in) {
    return std::vector<array>{product(in[0], in[1])};
  };
  auto bwd = [=](const std::vector<array>& primals, const std::vector<array>& cotangents,
                 const std::vector<array>&) {
    const array& g = cotangents[0];
    std::optional<array> g_scale;
    if (global_scale_x) g_scale = astype(max(abs(g, st), false, st), float32, st);
    const array &xs = primals[0], &ws = primals[1];
    return std::vector<array>{
        qqmm(g, swapaxes(ws, -1, -2, st), std::nullopt, f.group_size, f.bits, mode, g_scale,
             global_scale_w, st),
        qqmm(swapaxes(g, -1, -2, st), swapaxes(xs, -1, -2, st), std::nullopt, f.group_size,
             f.bits, mode, g_scale, global_scale_x, st)};
  };
  array out = custom_vjp(fwd, bwd)({x2, w})[0];
  if (x.ndim() == 2) return out;
  Shape shape = x.shape();
  shape.back() = out.shape(-1);
  return reshape(out, shape, st);
}

array gather_qqmm(const array& x, const array& w, const std::optional<array>& scales_w,
                  const std::optional<array>& lhs_indices,
                  const std::optional<array>& rhs_indices, std::optional<int> group_size,
                  std::optional<int> bits, const std::string& mode,
                  const std::optional<array>& global_scale_x,
                  const std::optional<array>& global_scale_w, bool sorted_indices,
                  StreamOrDevice s) {
  const Format f = quant_format("gather_qqmm", mode, group_size, bits);
  const Stream st = to_stream(s);
  auto o = qq_operands("gather_qqmm", x, w, scales_w, f, global_scale_x, global_scale_w, st);
  return owed(gather_qmm(o.xhat, o.wq, o.scales, std::nullopt, lhs_indices, rhs_indices, true,
                         f.group_size, f.bits, mode, sorted_indices, st),
              o.w_factor, st);
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
bool FPQuantize::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const FPQuantize*>(&other);
  return o && same_format(*o);
}
bool FPDequantize::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const FPDequantize*>(&other);
  return o && same_format(*o) && o->out_ == out_;
}
bool QuantizedMatmul::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const QuantizedMatmul*>(&other);
  return o && same_format(*o) && o->transpose_ == transpose_;
}

namespace {

// {wq, scales} of a (..., K) matrix.
std::vector<Shape> packed_shapes(const Shape& w, int bits, int group_size) {
  Shape wq = w, sc = w;
  wq.back() = static_cast<int>(int64_t{wq.back()} * bits / 32);
  sc.back() /= group_size;
  return {wq, sc};
}

}  // namespace

std::vector<Shape> AffineQuantize::output_shapes(const std::vector<array>& inputs) {
  auto shapes = packed_shapes(inputs[0].shape(), bits_, group_size_);
  shapes.push_back(shapes[1]);
  return shapes;
}
std::vector<Shape> FPQuantize::output_shapes(const std::vector<array>& inputs) {
  return packed_shapes(inputs[0].shape(), bits_, group_size_);
}
std::vector<Shape> AffineDequantize::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs[0].shape();
  out.back() = inputs[1].shape(-1) * group_size_;
  return {out};
}
std::vector<Shape> FPDequantize::output_shapes(const std::vector<array>& inputs) {
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

// The packed operands with the vmapped axis in front (size 1 where there was none), broadcast
// together; the global scale (an input past `packed`) passes as it is.
std::vector<array> batched_operands(const char* op, const std::vector<array>& inputs,
                                    const std::vector<int>& axes, size_t packed, const Stream& s) {
  std::vector<array> in;
  for (size_t i = 0; i < packed; ++i) {
    if (axes[i] == static_cast<int>(inputs[i].ndim()) - 1) {
      throw std::invalid_argument(tag(op) + "vmap over the packed (last) axis is not possible");
    }
    in.push_back(axes[i] < 0 ? expand_dims(inputs[i], 0, s) : batch_first(inputs[i], axes[i], s));
  }
  int b = 1;
  for (const auto& a : in) b = std::max(b, a.shape(0));
  for (auto& a : in) {
    Shape sh = a.shape();
    sh[0] = b;
    a = broadcast_to(a, sh, s);
  }
  for (size_t i = packed; i < inputs.size(); ++i) {
    if (axes[i] >= 0) {
      throw std::invalid_argument(tag(op) + "vmap over global_scale is not supported");
    }
    in.push_back(inputs[i]);
  }
  return in;
}

std::optional<array> global_scale_of(const std::vector<array>& inputs, size_t at) {
  return inputs.size() > at ? std::optional<array>(inputs[at]) : std::nullopt;
}

}  // namespace

std::pair<std::vector<array>, std::vector<int>> AffineQuantize::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  const array& w = inputs[0];
  if (axes[0] == static_cast<int>(w.ndim()) - 1) {
    throw std::invalid_argument("[quantize] vmap over the quantized (last) axis is not possible");
  }
  auto out = quantize(batch_first(w, axes[0], stream()), group_size_, bits_, "affine",
                      std::nullopt, stream());
  return {out, {0, 0, 0}};
}

std::pair<std::vector<array>, std::vector<int>> FPQuantize::vmap(const std::vector<array>& inputs,
                                                                 const std::vector<int>& axes) {
  auto in = batched_operands("quantize", inputs, axes, 1, stream());
  return {quantize(in[0], group_size_, bits_, quant_mode_name(mode_), global_scale_of(in, 1),
                   stream()),
          {0, 0}};
}

std::pair<std::vector<array>, std::vector<int>> AffineDequantize::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto in = batched_operands("dequantize", inputs, axes, 3, stream());
  return {{dequantize(in[0], in[1], in[2], group_size_, bits_, "affine", std::nullopt,
                      std::nullopt, stream())},
          {0}};
}

std::pair<std::vector<array>, std::vector<int>> FPDequantize::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto in = batched_operands("dequantize", inputs, axes, 2, stream());
  return {{dequantize(in[0], in[1], std::nullopt, group_size_, bits_, quant_mode_name(mode_),
                      global_scale_of(in, 2), out_, stream())},
          {0}};
}

namespace {

std::optional<array> biases_of(const std::vector<array>& primals) {
  return primals.size() > 3 ? std::optional<array>(primals[3]) : std::nullopt;
}

// An affine matrix's dbiases (the groups of dW summed) or dscales (weighed by q), from dW's
// groups (..., groups, group_size).
array affine_param_grad(bool biases, const array& dw_groups, const array& w, const array& scales,
                        int group_size, int bits, const Stream& s) {
  if (biases) return sum(dw_groups, -1, false, s);
  array q = dequantize(w, ones_like(scales, s), zeros_like(scales, s), group_size, bits,
                       "affine", std::nullopt, std::nullopt, s);
  return sum(multiply(dw_groups, unflatten(q, -1, {-1, group_size}, s), s), -1, false, s);
}

}  // namespace

// y = x @ W^T (transpose) with W = dequantize(w): dx = g @ W, the same primitive untransposed.
// dW (N, K) = g^T x, flattened over x's leading dims; dbiases sums dW's groups, dscales weighs
// them by q (affine; the fp modes' scales are integer codes, as MLX).
std::vector<array> QuantizedMatmul::vjp(const std::vector<array>& primals,
                                        const std::vector<array>& cotangents,
                                        const std::vector<int>& argnums,
                                        const std::vector<array>&) {
  const Stream& s = stream();
  const array &x = primals[0], &w = primals[1], &scales = primals[2];
  const array& g = cotangents[0];
  const char* mode = quant_mode_name(mode_);
  std::vector<array> out;
  std::optional<array> dw_groups;
  for (int arg : argnums) {
    if (arg == 0) {
      out.push_back(quantized_matmul(g, w, scales, biases_of(primals), !transpose_, group_size_,
                                     bits_, mode, s));
      continue;
    }
    if (arg == 1) {
      throw std::invalid_argument("[quantized_matmul] no gradient with respect to the quantized "
                                  "weights (they are integers); differentiate scales / biases");
    }
    if (mode_ != QuantMode::Affine) {
      throw std::invalid_argument(std::string("[quantized_matmul] no gradient with respect to "
                                              "the scales of mode '") +
                                  mode + "' (they are integer codes); only x has one");
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
    out.push_back(affine_param_grad(arg == 3, *dw_groups, w, scales, group_size_, bits_, s));
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
  return {quantized_matmul(tangents[0], primals[1], primals[2], biases_of(primals), transpose_,
                           group_size_, bits_, quant_mode_name(mode_), stream())};
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
  return {{quantized_matmul(x, inputs[1], inputs[2], biases_of(inputs), transpose_, group_size_,
                            bits_, quant_mode_name(mode_), stream())},
          {axes[0] < 0 ? -1 : 0}};
}

bool GatherQMM::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const GatherQMM*>(&other);
  return o && same_format(*o) && o->transpose_ == transpose_;
}

std::vector<Shape> GatherQMM::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs[inputs.size() - 2].shape();
  out.push_back(inputs[0].shape(-2));
  out.push_back(transpose_ ? inputs[1].shape(-2) : inputs[2].shape(-1) * group_size_);
  return {out};
}

// As MLX: dx gathers the cotangent through w's matrices (the product untransposed) and adds
// each result into the x matrix it came from; affine's dscales / dbiases add, per w matrix, the
// outer products of the cotangents with the x matrices they met.
std::vector<array> GatherQMM::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>& argnums, const std::vector<array>&) {
  const Stream& s = stream();
  const array &x = primals[0], &w = primals[1], &scales = primals[2];
  const array &lhs = primals[primals.size() - 2], &rhs = primals[primals.size() - 1];
  const std::optional<array> biases = mode_ == QuantMode::Affine ? biases_of(primals) : std::nullopt;
  const array& g = cotangents[0];
  const char* mode = quant_mode_name(mode_);
  std::vector<array> out;
  std::optional<array> dw_groups;
  const int m = x.shape(-2), kx = x.shape(-1);
  for (int arg : argnums) {
    if (arg == 0) {
      array dxs = gather_qmm(g, w, scales, biases, std::nullopt, rhs, !transpose_, group_size_,
                             bits_, mode, false, s);
      out.push_back(detail::scatter_matrices(x.shape(), lhs, dxs, s));
      continue;
    }
    if (arg == 1 || arg >= static_cast<int>(primals.size()) - 2) {
      throw std::invalid_argument(std::string("[gather_qmm] no gradient with respect to the ") +
                                  (arg == 1 ? "quantized weights (they are integers)"
                                            : "indices"));
    }
    if (mode_ != QuantMode::Affine) {
      throw std::invalid_argument(std::string("[gather_qmm] no gradient with respect to the "
                                              "scales of mode '") +
                                  mode + "' (they are integer codes); only x has one");
    }
    if (!dw_groups) {
      // Per index position: g_b^T x_lhs[b] (transposed w: N x K) or x_lhs[b]^T g_b (K x N),
      // added into w's matrix rhs[b].
      const int nb = static_cast<int>(lhs.size());
      array xs = take(reshape(x, {-1, m, kx}, s), reshape(lhs, {-1}, s), 0, s);
      array gs = reshape(g, {nb, m, g.shape(-1)}, s);
      array dws = transpose_ ? matmul(swapaxes(gs, -1, -2, s), xs, s)
                             : matmul(swapaxes(xs, -1, -2, s), gs, s);
      // dW has w's shape unpacked: (..., rows, cols).
      Shape wshape(w.shape().begin(), w.shape().end() - 1);
      wshape.push_back(transpose_ ? kx : g.shape(-1));
      array dw = detail::scatter_matrices(wshape, rhs, dws, s);
      dw_groups = unflatten(dw, -1, {-1, group_size_}, s);
    }
    out.push_back(affine_param_grad(arg == 3, *dw_groups, w, scales, group_size_, bits_, s));
  }
  return out;
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
                           group_size_, bits_, "affine", std::nullopt, std::nullopt, s);
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
