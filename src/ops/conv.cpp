// Front ends of the convolutions (conv_general, conv1d/2d/3d, conv_transpose1d/2d/3d, convolve)
// and the derivatives of Convolution, ConvWeightGrad and ConvInputGrad. Kernels in
// backend/cpu/conv.cpp.
#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "ops/conv.h"
#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

std::string vec_str(const std::vector<int>& v) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << (v.size() == 1 ? ",)" : ")");
  return os.str();
}

// Extent of n elements with d - 1 gaps between neighbours.
int64_t dilated(int64_t n, int64_t d) { return n == 0 ? 0 : (n - 1) * d + 1; }

// v as an int32 shape entry or padding; std::overflow_error naming `what` when it does not fit
// (as MLX: its conv raises overflow_error for such parameters).
int to_int32(int64_t v, const std::string& what) {
  if (v < INT32_MIN || v > INT32_MAX) {
    throw std::overflow_error("[conv] " + what + " would be " + std::to_string(v) +
                              ", outside int32 (Tessera shapes and paddings are 32-bit)");
  }
  return static_cast<int>(v);
}

// A per-dim parameter given as nothing (the default), one value for every dim, or one per dim.
std::vector<int> per_dim(const char* what, std::vector<int> v, int dims, int fallback) {
  if (v.empty()) return std::vector<int>(dims, fallback);
  if (v.size() == 1) return std::vector<int>(dims, v[0]);
  if (static_cast<int>(v.size()) != dims) {
    throw std::invalid_argument("[conv] " + std::string(what) + " " + vec_str(v) + " has " +
                                std::to_string(v.size()) + " entries for a " +
                                std::to_string(dims) + "-D convolution: give one or " +
                                std::to_string(dims));
  }
  return v;
}

void check_positive(const char* what, const std::vector<int>& v) {
  for (int x : v) {
    if (x <= 0) {
      throw std::invalid_argument("[conv] " + std::string(what) + " must be positive; got " +
                                  vec_str(v));
    }
  }
}

void check_operands(const array& in, const array& wt, int groups) {
  const int nd = static_cast<int>(in.ndim());
  if (nd < 3 || nd > 5) {
    throw std::invalid_argument("[conv] the input must have 1 to 3 spatial dims, laid out (N, ..., "
                                "C_in); got shape " + detail::shape_str(in.shape()));
  }
  if (wt.ndim() != in.ndim()) {
    throw std::invalid_argument("[conv] the weight of a " + std::to_string(nd - 2) +
                                "-D convolution must have " + std::to_string(nd) +
                                " dims, laid out (C_out, ..., C_in / groups); got shape " +
                                detail::shape_str(wt.shape()) + " for input " +
                                detail::shape_str(in.shape()));
  }
  if (!issubdtype(in.dtype(), floating) || !issubdtype(wt.dtype(), floating)) {
    throw std::invalid_argument("[conv] input and weight must be real floating point; got " +
                                dtype_name(in.dtype()) + " and " + dtype_name(wt.dtype()));
  }
  if (groups <= 0) {
    throw std::invalid_argument("[conv] groups must be positive; got " + std::to_string(groups));
  }
  const int c_in = in.shape(-1), c_out = wt.shape(0);
  if (c_in % groups != 0 || c_out % groups != 0) {
    throw std::invalid_argument("[conv] groups = " + std::to_string(groups) +
                                " must divide the input channels (" + std::to_string(c_in) +
                                ") and the output channels (" + std::to_string(c_out) + ")");
  }
  if (wt.shape(-1) * groups != c_in) {
    throw std::invalid_argument(
        "[conv] the input " + detail::shape_str(in.shape()) + " has " + std::to_string(c_in) +
        " channels but the weight " + detail::shape_str(wt.shape()) + " expects " +
        std::to_string(wt.shape(-1)) + " per group x " + std::to_string(groups) +
        (groups == 1 ? " group" : " groups"));
  }
}

// The input layout an n-D convolution op expects, checked before the general checks. (Not for
// conv1d: its one-entry parameters apply to every spatial dim, and MLX's tests call it on 2-D
// inputs.)
void expect_spatial_dims(const char* op, const array& in, int dims) {
  static const char* layouts[] = {"(N, L, C_in)", "(N, H, W, C_in)", "(N, D, H, W, C_in)"};
  if (static_cast<int>(in.ndim()) != dims + 2) {
    throw std::invalid_argument(std::string("[") + op + "] the input must be laid out " +
                                layouts[dims - 1] + ": " + std::to_string(dims + 2) +
                                " dims; got shape " + detail::shape_str(in.shape()));
  }
}

array make_conv(const array& x, const array& w, const ConvParams& p, const Stream& s) {
  Shape out = detail::conv_output_shape(x.shape(), w.shape(), p);
  return array(std::move(out), x.dtype(), std::make_shared<Convolution>(s, p), {x, w});
}

array make_weight_grad(const array& x, const array& dy, const Shape& kernel, const ConvParams& p,
                       const Stream& s) {
  Shape out{dy.shape(-1)};
  out.insert(out.end(), kernel.begin(), kernel.end());
  out.push_back(x.shape(-1) / p.groups);
  return array(std::move(out), x.dtype(), std::make_shared<ConvWeightGrad>(s, p, kernel),
               {x, astype(dy, x.dtype(), s)});
}

array make_input_grad(const array& dy, const array& w, const Shape& input, const ConvParams& p,
                      const Stream& s) {
  Shape out{dy.shape(0)};
  out.insert(out.end(), input.begin(), input.end());
  out.push_back(w.shape(-1) * p.groups);
  return array(std::move(out), w.dtype(), std::make_shared<ConvInputGrad>(s, p, input),
               {astype(dy, w.dtype(), s), w});
}

Shape spatial(const Shape& s) { return Shape(s.begin() + 1, s.end() - 1); }

// f applied to each index along the vmapped axes (moved to the front; -1: not batched), the
// results stacked along axis 0.
template <typename F>
std::pair<std::vector<array>, std::vector<int>> vmap_by_slices(const std::vector<array>& inputs,
                                                               const std::vector<int>& axes,
                                                               const Stream& s, F f) {
  int batch = 0;
  std::vector<array> front;
  for (size_t i = 0; i < inputs.size(); ++i) {
    front.push_back(axes[i] >= 0 ? moveaxis(inputs[i], axes[i], 0, s) : inputs[i]);
    if (axes[i] >= 0) batch = front.back().shape(0);
  }
  std::vector<array> results;
  for (int b = 0; b < batch; ++b) {
    std::vector<array> args;
    for (size_t i = 0; i < front.size(); ++i) {
      if (axes[i] < 0) {
        args.push_back(front[i]);
        continue;
      }
      Shape start(front[i].ndim(), 0), stop = front[i].shape();
      start[0] = b;
      stop[0] = b + 1;
      args.push_back(squeeze(slice(front[i], start, stop, s), 0, s));
    }
    results.push_back(f(args[0], args[1]));
  }
  return {{stack(results, 0, s)}, {0}};
}

}  // namespace

namespace detail {

Shape conv_output_shape(const Shape& x, const Shape& w, const ConvParams& p) {
  check_positive("strides", p.stride);
  check_positive("kernel dilations", p.kernel_dilation);
  check_positive("input dilations", p.input_dilation);
  Shape out{x[0]};
  for (size_t i = 0; i + 2 < x.size(); ++i) {
    // A negative padding crops, by its negation, which INT32_MIN lacks (MLX raises here too).
    if (p.padding_lo[i] == INT32_MIN || p.padding_hi[i] == INT32_MIN) {
      to_int32(-static_cast<int64_t>(INT32_MIN), "the crop of padding " + std::to_string(INT32_MIN));
    }
    const int64_t in = dilated(x[i + 1], p.input_dilation[i]) + p.padding_lo[i] + p.padding_hi[i];
    const int64_t k = dilated(w[i + 1], p.kernel_dilation[i]);
    if (w[i + 1] == 0 || in < k) {
      throw std::invalid_argument(
          "[conv] spatial dim " + std::to_string(i) + " of the input " + shape_str(x) +
          " is " + std::to_string(in) + " after dilation and padding, smaller than the kernel " +
          shape_str(w) + " there (" + std::to_string(k) + " with its dilation)");
    }
    const int64_t o = (in - k) / p.stride[i] + 1;
    out.push_back(to_int32(o, "output spatial dim " + std::to_string(i)));
  }
  out.push_back(w[0]);
  return out;
}

}  // namespace detail

array conv_general(array in, array wt, std::vector<int> stride, std::vector<int> padding_lo,
                   std::vector<int> padding_hi, std::vector<int> kernel_dilation,
                   std::vector<int> input_dilation, int groups, bool flip, StreamOrDevice s) {
  check_operands(in, wt, groups);
  const int dims = static_cast<int>(in.ndim()) - 2;
  ConvParams p;
  p.stride = per_dim("strides", std::move(stride), dims, 1);
  p.padding_lo = per_dim("low padding", std::move(padding_lo), dims, 0);
  p.padding_hi = per_dim("high padding", std::move(padding_hi), dims, 0);
  p.kernel_dilation = per_dim("kernel dilation", std::move(kernel_dilation), dims, 1);
  p.input_dilation = per_dim("input dilation", std::move(input_dilation), dims, 1);
  p.groups = groups;
  p.flip = flip;
  const Dtype dt = promote_types(in.dtype(), wt.dtype());
  in = astype(in, dt, s);
  wt = astype(wt, dt, s);
  return make_conv(in, wt, p, to_stream(s));
}

array conv_general(const array& input, const array& weight, std::vector<int> stride,
                   std::vector<int> padding, std::vector<int> kernel_dilation,
                   std::vector<int> input_dilation, int groups, bool flip, StreamOrDevice s) {
  std::vector<int> hi = padding;
  return conv_general(input, weight, std::move(stride), std::move(padding), std::move(hi),
                      std::move(kernel_dilation), std::move(input_dilation), groups, flip, s);
}

array conv1d(const array& input, const array& weight, int stride, int padding, int dilation,
             int groups, StreamOrDevice s) {
  return conv_general(input, weight, {stride}, {padding}, {padding}, {dilation}, {1}, groups,
                      false, s);
}

array conv2d(const array& input, const array& weight, const std::pair<int, int>& stride,
             const std::pair<int, int>& padding, const std::pair<int, int>& dilation, int groups,
             StreamOrDevice s) {
  expect_spatial_dims("conv2d", input, 2);
  std::vector<int> pad{padding.first, padding.second};
  return conv_general(input, weight, {stride.first, stride.second}, pad, pad,
                      {dilation.first, dilation.second}, {1}, groups, false, s);
}

array conv3d(const array& input, const array& weight, const std::tuple<int, int, int>& stride,
             const std::tuple<int, int, int>& padding, const std::tuple<int, int, int>& dilation,
             int groups, StreamOrDevice s) {
  auto vec = [](const std::tuple<int, int, int>& t) {
    return std::vector<int>{std::get<0>(t), std::get<1>(t), std::get<2>(t)};
  };
  expect_spatial_dims("conv3d", input, 3);
  return conv_general(input, weight, vec(stride), vec(padding), vec(padding), vec(dilation), {1},
                      groups, false, s);
}

namespace {

// MLX's transposed convolution: the flipped kernel over the input dilated by the stride, padded
// so that a convolution with the same parameters maps the output's shape back to the input's.
array conv_transpose(const array& in, const array& wt, const std::vector<int>& stride,
                     const std::vector<int>& padding, const std::vector<int>& dilation,
                     const std::vector<int>& output_padding, int groups, StreamOrDevice s) {
  const size_t dims = stride.size();
  static const char* names[] = {"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"};
  expect_spatial_dims(names[dims - 1], in, static_cast<int>(dims));
  check_operands(in, wt, groups);
  std::vector<int> lo(dims), hi(dims);
  for (size_t i = 0; i < dims; ++i) {
    if (output_padding[i] < 0 || output_padding[i] >= std::max(stride[i], dilation[i])) {
      throw std::invalid_argument("[conv_transpose] output_padding " + vec_str(output_padding) +
                                  " must be non-negative and smaller than the stride " +
                                  vec_str(stride) + " or the dilation " + vec_str(dilation));
    }
    const int64_t k = dilated(wt.shape(static_cast<int>(i) + 1), dilation[i]);
    lo[i] = to_int32(k - 1 - padding[i], "the low padding of the transposed convolution");
    hi[i] = to_int32(k - 1 - padding[i] + output_padding[i],
                     "the high padding of the transposed convolution");
  }
  return conv_general(in, wt, {1}, lo, hi, dilation, stride, groups, true, s);
}

}  // namespace

array conv_transpose1d(const array& input, const array& weight, int stride, int padding,
                       int dilation, int output_padding, int groups, StreamOrDevice s) {
  return conv_transpose(input, weight, {stride}, {padding}, {dilation}, {output_padding}, groups,
                        s);
}

array conv_transpose2d(const array& input, const array& weight, const std::pair<int, int>& stride,
                       const std::pair<int, int>& padding, const std::pair<int, int>& dilation,
                       const std::pair<int, int>& output_padding, int groups, StreamOrDevice s) {
  auto vec = [](const std::pair<int, int>& p) { return std::vector<int>{p.first, p.second}; };
  return conv_transpose(input, weight, vec(stride), vec(padding), vec(dilation),
                        vec(output_padding), groups, s);
}

array conv_transpose3d(const array& input, const array& weight,
                       const std::tuple<int, int, int>& stride,
                       const std::tuple<int, int, int>& padding,
                       const std::tuple<int, int, int>& dilation,
                       const std::tuple<int, int, int>& output_padding, int groups,
                       StreamOrDevice s) {
  auto vec = [](const std::tuple<int, int, int>& t) {
    return std::vector<int>{std::get<0>(t), std::get<1>(t), std::get<2>(t)};
  };
  return conv_transpose(input, weight, vec(stride), vec(padding), vec(dilation),
                        vec(output_padding), groups, s);
}

array convolve(const array& a, const array& v, const std::string& mode, StreamOrDevice s) {
  if (a.ndim() != 1 || v.ndim() != 1 || a.size() == 0 || v.size() == 0) {
    throw std::invalid_argument("[convolve] both inputs must be non-empty 1-D arrays; got shapes " +
                                detail::shape_str(a.shape()) + " and " +
                                detail::shape_str(v.shape()));
  }
  const array& sig = a.size() < v.size() ? v : a;
  const array& ker = a.size() < v.size() ? a : v;
  const int k = ker.shape(0);
  int lo, hi;
  if (mode == "full") {
    lo = hi = k - 1;
  } else if (mode == "valid") {
    lo = hi = 0;
  } else if (mode == "same") {
    lo = k / 2;
    hi = k - 1 - lo;
  } else {
    throw std::invalid_argument("[convolve] mode must be 'full', 'same' or 'valid'; got '" + mode +
                                "'");
  }
  const Dtype dt = issubdtype(promote_types(a.dtype(), v.dtype()), floating)
                       ? promote_types(a.dtype(), v.dtype())
                       : float32;
  array x = reshape(astype(sig, dt, s), {1, -1, 1}, s);
  array w = reshape(astype(ker, dt, s), {1, -1, 1}, s);
  return reshape(conv_general(x, w, {1}, {lo}, {hi}, {1}, {1}, 1, true, s), {-1}, s);
}

// ---- the primitives ----

bool ConvPrimitive::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const ConvPrimitive*>(&other);
  return o && std::string(o->name()) == name() && o->params_ == params_;
}

void ConvPrimitive::print(std::ostream& os) const {
  os << name() << "(stride=" << vec_str(params_.stride) << ", padding=" << vec_str(params_.padding_lo)
     << "/" << vec_str(params_.padding_hi) << ", kernel_dilation="
     << vec_str(params_.kernel_dilation) << ", input_dilation=" << vec_str(params_.input_dilation)
     << ", groups=" << params_.groups << (params_.flip ? ", flip" : "") << ")";
}

bool ConvWeightGrad::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const ConvWeightGrad*>(&other);
  return o && o->params_ == params_ && o->kernel_ == kernel_;
}

bool ConvInputGrad::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const ConvInputGrad*>(&other);
  return o && o->params_ == params_ && o->input_ == input_;
}

std::vector<Shape> Convolution::output_shapes(const std::vector<array>& inputs) {
  return {detail::conv_output_shape(inputs[0].shape(), inputs[1].shape(), params_)};
}

std::vector<Shape> ConvWeightGrad::output_shapes(const std::vector<array>& inputs) {
  Shape out{inputs[1].shape(-1)};
  out.insert(out.end(), kernel_.begin(), kernel_.end());
  out.push_back(inputs[0].shape(-1) / params_.groups);
  return {out};
}

std::vector<Shape> ConvInputGrad::output_shapes(const std::vector<array>& inputs) {
  Shape out{inputs[0].shape(0)};
  out.insert(out.end(), input_.begin(), input_.end());
  out.push_back(inputs[1].shape(-1) * params_.groups);
  return {out};
}

// y = conv(x, w): dx = ConvInputGrad(dy, w), dw = ConvWeightGrad(x, dy).
std::vector<array> Convolution::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums, const std::vector<array>&) {
  const array &x = primals[0], &w = primals[1], &dy = cotangents[0];
  std::vector<array> out;
  for (int arg : argnums) {
    out.push_back(arg == 0 ? make_input_grad(dy, w, spatial(x.shape()), params_, stream())
                           : make_weight_grad(x, dy, spatial(w.shape()), params_, stream()));
  }
  return out;
}

std::vector<array> Convolution::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  std::optional<array> acc;
  for (size_t i = 0; i < argnums.size(); ++i) {
    array term = argnums[i] == 0 ? make_conv(tangents[i], primals[1], params_, stream())
                                 : make_conv(primals[0], tangents[i], params_, stream());
    acc = acc ? add(*acc, term, stream()) : term;
  }
  return {*acc};
}

std::pair<std::vector<array>, std::vector<int>> Convolution::vmap(const std::vector<array>& inputs,
                                                                  const std::vector<int>& axes) {
  const Stream& s = stream();
  array x = axes[0] >= 0 ? moveaxis(inputs[0], axes[0], 0, s) : inputs[0];
  array w = axes[1] >= 0 ? moveaxis(inputs[1], axes[1], 0, s) : inputs[1];
  if (axes[1] < 0) {
    // Only x batched: the batch joins N.
    if (axes[0] < 0) return {{make_conv(x, w, params_, s)}, {-1}};
    const int b = x.shape(0);
    array y = make_conv(flatten(x, 0, 1, s), w, params_, s);
    return {{unflatten(y, 0, {b, x.shape(1)}, s)}, {0}};
  }
  const int b = w.shape(0);
  if (axes[0] < 0 && params_.groups == 1) {
    // Only w batched: the batch joins the output channels.
    array y = make_conv(x, flatten(w, 0, 1, s), params_, s);
    return {{unflatten(y, -1, {b, w.shape(1)}, s)}, {static_cast<int>(y.ndim()) - 1}};
  }
  // Both batched (x broadcast when it is not): batch b is groups [b * G, (b + 1) * G).
  if (axes[0] < 0) {
    Shape bs = x.shape();
    bs.insert(bs.begin(), b);
    x = broadcast_to(x, bs, s);
  }
  x = flatten(moveaxis(x, 0, -2, s), -2, -1, s);
  ConvParams p = params_;
  p.groups *= b;
  array y = make_conv(x, flatten(w, 0, 1, s), p, s);
  return {{unflatten(y, -1, {b, w.shape(1)}, s)}, {static_cast<int>(y.ndim()) - 1}};
}

// dw = WG(x, dy) is linear in x and in dy: <wbar, WG(x, dy)> = <dy, conv(x, wbar)>
// = <IG(dy, wbar), x>.
std::vector<array> ConvWeightGrad::vjp(const std::vector<array>& primals,
                                       const std::vector<array>& cotangents,
                                       const std::vector<int>& argnums, const std::vector<array>&) {
  const array &x = primals[0], &dy = primals[1], &wbar = cotangents[0];
  std::vector<array> out;
  for (int arg : argnums) {
    out.push_back(arg == 0 ? make_input_grad(dy, wbar, spatial(x.shape()), params_, stream())
                           : astype(make_conv(x, wbar, params_, stream()), dy.dtype(), stream()));
  }
  return out;
}

std::vector<array> ConvWeightGrad::jvp(const std::vector<array>& primals,
                                       const std::vector<array>& tangents,
                                       const std::vector<int>& argnums) {
  std::optional<array> acc;
  for (size_t i = 0; i < argnums.size(); ++i) {
    array term = argnums[i] == 0
                     ? make_weight_grad(tangents[i], primals[1], kernel_, params_, stream())
                     : make_weight_grad(primals[0], tangents[i], kernel_, params_, stream());
    acc = acc ? add(*acc, term, stream()) : term;
  }
  return {*acc};
}

std::pair<std::vector<array>, std::vector<int>> ConvWeightGrad::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return vmap_by_slices(inputs, axes, stream(), [&](const array& x, const array& dy) {
    return make_weight_grad(x, dy, kernel_, params_, stream());
  });
}

// dx = IG(dy, w) is linear in dy and in w: <xbar, IG(dy, w)> = <dy, conv(xbar, w)>
// = <WG(xbar, dy), w>.
std::vector<array> ConvInputGrad::vjp(const std::vector<array>& primals,
                                      const std::vector<array>& cotangents,
                                      const std::vector<int>& argnums, const std::vector<array>&) {
  const array &dy = primals[0], &w = primals[1], &xbar = cotangents[0];
  std::vector<array> out;
  for (int arg : argnums) {
    out.push_back(arg == 0 ? astype(make_conv(xbar, w, params_, stream()), dy.dtype(), stream())
                           : make_weight_grad(xbar, dy, spatial(w.shape()), params_, stream()));
  }
  return out;
}

std::vector<array> ConvInputGrad::jvp(const std::vector<array>& primals,
                                      const std::vector<array>& tangents,
                                      const std::vector<int>& argnums) {
  std::optional<array> acc;
  for (size_t i = 0; i < argnums.size(); ++i) {
    array term = argnums[i] == 0
                     ? make_input_grad(tangents[i], primals[1], input_, params_, stream())
                     : make_input_grad(primals[0], tangents[i], input_, params_, stream());
    acc = acc ? add(*acc, term, stream()) : term;
  }
  return {*acc};
}

std::pair<std::vector<array>, std::vector<int>> ConvInputGrad::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return vmap_by_slices(inputs, axes, stream(), [&](const array& dy, const array& w) {
    return make_input_grad(dy, w, input_, params_, stream());
  });
}

}  // namespace tessera
