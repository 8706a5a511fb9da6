// Front ends of tessera::fft (the shape handling of n / s / axes and the norms, fftfreq,
// fftshift) and the derivatives of FFT. Kernel in backend/cpu/fft.cpp.
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>

#include "ops/fft.h"
#include "ops/utils.h"
#include "tessera/fft.h"
#include "tessera/ops.h"

namespace tessera::fft {

namespace {

double scale_for(const Shape& n, FFTNorm norm, bool inverse) {
  double count = 1.0;
  for (int v : n) count *= v;
  switch (norm) {
    case FFTNorm::Backward:
      return 1.0;
    case FFTNorm::Ortho:
      return inverse ? std::sqrt(count) : 1.0 / std::sqrt(count);
    case FFTNorm::Forward:
      return inverse ? count : 1.0 / count;
  }
  return 1.0;
}

array transform(const char* op, const array& a, Shape n, const std::vector<int>& axes, bool real,
                bool inverse, FFTNorm norm, StreamOrDevice s) {
  if (a.ndim() < 1) {
    throw std::invalid_argument(std::string("[") + op + "] needs an array of 1 or more dims");
  }
  if (n.size() != axes.size()) {
    throw std::invalid_argument(std::string("[") + op + "] " + std::to_string(n.size()) +
                                " sizes for " + std::to_string(axes.size()) + " axes");
  }
  if (axes.empty()) return a;
  std::vector<int> ax;
  for (int v : axes) ax.push_back(detail::normalize_axis(op, v, static_cast<int>(a.ndim())));
  if (std::set<int>(ax.begin(), ax.end()).size() != ax.size()) {
    throw std::invalid_argument(std::string("[") + op + "] an axis appears twice");
  }
  for (size_t i = 0; i < n.size(); ++i) {
    if (n[i] <= 0) {
      throw std::invalid_argument(std::string("[") + op + "] transform size " +
                                  std::to_string(n[i]) + " must be positive");
    }
  }
  if (real && !inverse && issubdtype(a.dtype(), complexfloating)) {
    throw std::invalid_argument(std::string("[") + op + "] needs a real input; got complex64");
  }
  // The input's shape along the axes: n (the last axis n/2+1 for irfft), padded or cut to it.
  Shape in_shape = a.shape();
  for (size_t i = 0; i < ax.size(); ++i) in_shape[ax[i]] = n[i];
  if (real && inverse) in_shape[ax.back()] = n.back() / 2 + 1;
  array in = a;
  Shape stop = in.shape();
  bool cut = false, grow = false;
  for (size_t d = 0; d < in_shape.size(); ++d) {
    cut |= in_shape[d] < in.shape(static_cast<int>(d));
    grow |= in_shape[d] > in.shape(static_cast<int>(d));
    stop[d] = std::min(stop[d], in_shape[d]);
  }
  if (cut) in = slice(in, Shape(in.ndim(), 0), stop, s);
  if (grow) {
    std::vector<std::pair<int, int>> widths;
    for (size_t d = 0; d < in_shape.size(); ++d) widths.push_back({0, in_shape[d] - in.shape(static_cast<int>(d))});
    in = pad(in, widths, array(0, in.dtype()), "constant", s);
  }
  Shape out_shape = in_shape;
  if (real) out_shape[ax.back()] = inverse ? n.back() : n.back() / 2 + 1;
  const Dtype in_type = real && !inverse ? float32 : complex64;
  const Dtype out_type = real && inverse ? float32 : complex64;
  array out(out_shape, out_type,
            std::make_shared<FFT>(to_stream(s), ax, inverse, real, real ? n.back() : 0),
            {astype(in, in_type, s)});
  const double k = scale_for(n, norm, inverse);
  return k == 1.0 ? out : multiply(out, array(k, out_type), s);
}

array transform(const char* op, const array& a, const std::vector<int>& axes, bool real,
                bool inverse, FFTNorm norm, StreamOrDevice s) {
  Shape n;
  for (int v : axes) n.push_back(a.shape(detail::normalize_axis(op, v, static_cast<int>(a.ndim()))));
  if (real && inverse && !n.empty()) n.back() = (n.back() - 1) * 2;
  return transform(op, a, n, axes, real, inverse, norm, s);
}

std::vector<int> all_axes(const array& a) {
  std::vector<int> ax(a.ndim());
  std::iota(ax.begin(), ax.end(), 0);
  return ax;
}

}  // namespace

array fftn(const array& a, const Shape& n, const std::vector<int>& axes, FFTNorm norm,
           StreamOrDevice s) {
  return transform("fftn", a, n, axes, false, false, norm, s);
}
array fftn(const array& a, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("fftn", a, axes, false, false, norm, s);
}
array fftn(const array& a, FFTNorm norm, StreamOrDevice s) { return fftn(a, all_axes(a), norm, s); }
array ifftn(const array& a, const Shape& n, const std::vector<int>& axes, FFTNorm norm,
            StreamOrDevice s) {
  return transform("ifftn", a, n, axes, false, true, norm, s);
}
array ifftn(const array& a, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("ifftn", a, axes, false, true, norm, s);
}
array ifftn(const array& a, FFTNorm norm, StreamOrDevice s) { return ifftn(a, all_axes(a), norm, s); }
array rfftn(const array& a, const Shape& n, const std::vector<int>& axes, FFTNorm norm,
            StreamOrDevice s) {
  return transform("rfftn", a, n, axes, true, false, norm, s);
}
array rfftn(const array& a, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("rfftn", a, axes, true, false, norm, s);
}
array rfftn(const array& a, FFTNorm norm, StreamOrDevice s) { return rfftn(a, all_axes(a), norm, s); }
array irfftn(const array& a, const Shape& n, const std::vector<int>& axes, FFTNorm norm,
             StreamOrDevice s) {
  return transform("irfftn", a, n, axes, true, true, norm, s);
}
array irfftn(const array& a, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {
  return transform("irfftn", a, axes, true, true, norm, s);
}
array irfftn(const array& a, FFTNorm norm, StreamOrDevice s) {
  return irfftn(a, all_axes(a), norm, s);
}

array fftfreq(int n, double d, StreamOrDevice s) {
  if (n <= 0 || d == 0.0) {
    throw std::invalid_argument("[fftfreq] needs n > 0 and d != 0; got n = " + std::to_string(n) +
                                ", d = " + std::to_string(d));
  }
  array k = concatenate({arange(0, (n + 1) / 2, float32, s), arange(-(n / 2), 0, float32, s)}, 0, s);
  return multiply(k, array(static_cast<float>(1.0 / (n * d)), float32), s);
}

array rfftfreq(int n, double d, StreamOrDevice s) {
  if (n <= 0 || d == 0.0) {
    throw std::invalid_argument("[rfftfreq] needs n > 0 and d != 0; got n = " +
                                std::to_string(n) + ", d = " + std::to_string(d));
  }
  return multiply(arange(0, n / 2 + 1, float32, s), array(static_cast<float>(1.0 / (n * d)), float32), s);
}

namespace {

array shift(const char* op, const array& a, const std::vector<int>& axes, bool inverse,
            StreamOrDevice s) {
  if (axes.empty()) return a;
  Shape shifts;
  std::vector<int> ax;
  for (int v : axes) {
    const int d = detail::normalize_axis(op, v, static_cast<int>(a.ndim()));
    ax.push_back(d);
    const int k = a.shape(d) / 2;
    shifts.push_back(inverse ? -k : k);
  }
  return roll(a, shifts, ax, s);
}

}  // namespace

array fftshift(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  return shift("fftshift", a, axes, false, s);
}
array fftshift(const array& a, StreamOrDevice s) { return fftshift(a, all_axes(a), s); }
array ifftshift(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  return shift("ifftshift", a, axes, true, s);
}
array ifftshift(const array& a, StreamOrDevice s) { return ifftshift(a, all_axes(a), s); }

}  // namespace tessera::fft

namespace tessera {

bool FFT::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const FFT*>(&other);
  return o && o->axes_ == axes_ && o->inverse_ == inverse_ && o->real_ == real_;
}

namespace {

// `outer` at DC (and at the Nyquist frequency of an even length), `inner` elsewhere, shaped to
// broadcast along `axis` of an array of rank nd with `len` frequencies there.
array frequency_weights(int len, bool even, int axis, int nd, double inner, double outer,
                        Dtype dt, const Stream& s) {
  Shape shape(nd, 1);
  shape[axis] = len;
  array idx = reshape(arange(0, len, int32, s), shape, s);
  const int last = len - 1 + (even ? 0 : 1);
  array inside = logical_and(greater(idx, array(0, int32), s), less(idx, array(last, int32), s), s);
  return where(inside, array(inner, dt), array(outer, dt), s);
}

}  // namespace

// The transforms are linear. For the complex ones the adjoint of the unnormalised DFT is n times
// the normalised inverse (MLX's convention for complex cotangents: conj of the derivative). The
// real ones count every frequency but DC / Nyquist twice in the forward pass.
std::vector<array> FFT::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents,
                            const std::vector<int>& argnums, const std::vector<array>&) {
  const Stream& s = stream();
  const array &in = primals[0], &g = cotangents[0];
  double count = 1.0;
  for (int ax : axes_) count *= (inverse_ ? g.shape(ax) : in.shape(ax));
  const int nd = static_cast<int>(in.ndim()), last = axes_.back();
  if (real_ && inverse_) {
    // x (n/2+1 frequencies) -> y (n reals).
    const bool even = g.shape(last) % 2 == 0;
    array w = frequency_weights(in.shape(last), even, last, nd, 2.0 / count, 1.0 / count,
                                complex64, s);
    return {multiply(fft::rfftn(g, axes_, fft::FFTNorm::Backward, s),
                     w, s)};
  }
  if (real_) {
    const bool even = in.shape(last) % 2 == 0;
    Shape n;
    for (int ax : axes_) n.push_back(in.shape(ax));
    array w = frequency_weights(g.shape(last), even, last, nd, 0.5, 1.0, complex64, s);
    return {multiply(fft::irfftn(multiply(g, w, s), n, axes_, fft::FFTNorm::Backward, s),
                     array(static_cast<float>(count), float32), s)};
  }
  if (inverse_) {
    return {multiply(fft::fftn(g, axes_, fft::FFTNorm::Backward, s),
                     array(1.0 / count, complex64), s)};
  }
  return {multiply(fft::ifftn(g, axes_, fft::FFTNorm::Backward, s), array(count, complex64), s)};
}

std::vector<Shape> FFT::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs[0].shape();
  if (real_) out[axes_.back()] = inverse_ ? real_length_ : real_length_ / 2 + 1;
  return {out};
}

array FFT::apply(const array& x, int axis_shift) const {
  std::vector<int> ax;
  for (int a : axes_) ax.push_back(a + axis_shift);
  auto prim = std::make_shared<FFT>(stream(), ax, inverse_, real_, real_length_);
  const Dtype in_type = real_ && !inverse_ ? float32 : complex64;
  const Dtype out_type = real_ && inverse_ ? float32 : complex64;
  array in = astype(x, in_type, stream());
  Shape shape = prim->output_shapes({in})[0];
  return array(std::move(shape), out_type, prim, {in});
}

// Linear: the tangent's transform.
std::vector<array> FFT::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                            const std::vector<int>& argnums) {
  return {apply(tangents[0])};
}

std::pair<std::vector<array>, std::vector<int>> FFT::vmap(const std::vector<array>& inputs,
                                                          const std::vector<int>& axes) {
  if (axes[0] < 0) return {{apply(inputs[0])}, {-1}};
  return {{apply(moveaxis(inputs[0], axes[0], 0, stream()), 1)}, {0}};
}

namespace {

// Hadamard matrices of orders 12, 20 and 28 from N. J. A. Sloane's library of Hadamard
// matrices, the ones MLX uses, so transforms agree with MLX's value for value. Row i is a bit
// mask over the columns: bit j set where H[i][j] = +1.
constexpr uint32_t kH12[12] = {0x0000ffd, 0x0000554, 0x0000c37, 0x0000691, 0x00000df, 0x0000a45,
                               0x0000373, 0x0000919, 0x0000dc3, 0x0000469, 0x000070f, 0x00001a5};
constexpr uint32_t kH20[20] = {0x006cc21, 0x00d1c42, 0x00ab884, 0x005f108, 0x00b6610,
                               0x009c83e, 0x003945d, 0x007289b, 0x00e5117, 0x00ca60f,
                               0x00f05ac, 0x00e8b58, 0x00d92b1, 0x00ba163, 0x007c2c6,
                               0x0008592, 0x0010b05, 0x002122a, 0x0042074, 0x00840c9};
constexpr uint32_t kH28[28] = {0x3296181, 0x6528382, 0xc854704, 0x92a8e08, 0x2751c10, 0x4ca7820,
                               0x994b0c0, 0x4b980bc, 0x9534178, 0x2a6c271, 0x54d8463, 0xa9b0847,
                               0x536500f, 0xa4ce01e, 0x7804cda, 0xf009935, 0xe21326a, 0xc6224d5,
                               0x8e409ab, 0x1e81356, 0x3d0262d, 0x030ed66, 0x041dacd, 0x083b51b,
                               0x1072ab6, 0x20e15ec, 0x41c2b59, 0x81856b3};

array hadamard_of(const array& a, float scale, bool transposed, StreamOrDevice s) {
  const Dtype dt = issubdtype(a.dtype(), floating) ? a.dtype() : float32;
  return array(a.shape(), dt, std::make_shared<Hadamard>(to_stream(s), scale, transposed),
               {astype(a, dt, s)});
}

}  // namespace

const uint32_t* hadamard_rows(int m) {
  switch (m) {
    case 12: return kH12;
    case 20: return kH20;
    case 28: return kH28;
    default: return nullptr;
  }
}

int hadamard_factor(int64_t n) {
  for (int m : {1, 12, 20, 28}) {
    if (n % m != 0) continue;
    const int64_t p = n / m;
    if ((p & (p - 1)) == 0) return m;
  }
  throw std::invalid_argument("[hadamard_transform] the last axis (" + std::to_string(n) +
                              ") must be m * 2^k with m in (1, 12, 20, 28)");
}

array hadamard_transform(const array& a, std::optional<float> scale, StreamOrDevice s) {
  if (a.ndim() == 0) {  // a transform of size 1, as MLX: the value times the scale
    return reshape(hadamard_transform(reshape(a, {1}, s), scale, s), {}, s);
  }
  const int n = a.shape(-1);
  if (n <= 0) {
    throw std::invalid_argument("[hadamard_transform] the last axis is empty (size " +
                                std::to_string(n) + ")");
  }
  hadamard_factor(n);
  if (issubdtype(a.dtype(), complexfloating)) {
    throw std::invalid_argument("[hadamard_transform] complex inputs are not supported");
  }
  return hadamard_of(a, scale.value_or(1.0f / std::sqrt(static_cast<float>(n))), false, s);
}

// H is linear: the jvp is the transform itself, the vjp the transposed one (H_20 and H_28 are
// not symmetric).
std::vector<array> Hadamard::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                                 const std::vector<int>&, const std::vector<array>&) {
  return {hadamard_of(cotangents[0], scale_, !transposed_, stream())};
}
std::vector<array> Hadamard::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                 const std::vector<int>&) {
  return {hadamard_of(tangents[0], scale_, transposed_, stream())};
}
std::pair<std::vector<array>, std::vector<int>> Hadamard::vmap(const std::vector<array>& inputs,
                                                               const std::vector<int>& axes) {
  const int last = static_cast<int>(inputs[0].ndim()) - 1;
  if (axes[0] == last) {
    array x = moveaxis(inputs[0], last, 0, stream());
    return {{hadamard_of(x, scale_, transposed_, stream())}, {0}};
  }
  return {{hadamard_of(inputs[0], scale_, transposed_, stream())}, axes};
}

}  // namespace tessera
