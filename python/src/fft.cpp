// tessera.core.fft: include/tessera/fft.h with MLX's signatures.
#include "convert.h"

#include <algorithm>
#include <optional>
#include <vector>
#include <string>

#include "tessera/fft.h"

namespace tessera::python {

namespace {

fft::FFTNorm parse_norm(const std::string& norm, const char* op) {
  if (norm == "backward") return fft::FFTNorm::Backward;
  if (norm == "ortho") return fft::FFTNorm::Ortho;
  if (norm == "forward") return fft::FFTNorm::Forward;
  throw std::invalid_argument(std::string("[") + op + "] norm must be 'backward', 'ortho' or "
                              "'forward'; got '" + norm + "'");
}

using Fn1 = array (*)(const array&, const Shape&, const std::vector<int>&, fft::FFTNorm,
                      StreamOrDevice);
using FnAxes = array (*)(const array&, const std::vector<int>&, fft::FFTNorm, StreamOrDevice);
using FnAll = array (*)(const array&, fft::FFTNorm, StreamOrDevice);

#define FFT1_DOC(what)                                                                     \
  what "\n\nArgs:\n"                                                                       \
       "    a (array): Input array.\n"                                                     \
       "    n (int, optional): Size of the transformed axis (the input is cut or padded\n" \
       "      with zeros). Default: the input's size there.\n"                             \
       "    axis (int, optional): Axis to transform. Default: ``-1``.\n"                   \
       "    norm (str, optional): ``'backward'``, ``'ortho'`` or ``'forward'``.\n\n"       \
       "Returns:\n    array: The transform.\n"

#define FFTN_DOC(what)                                                                       \
  what "\n\nArgs:\n"                                                                         \
       "    a (array): Input array.\n"                                                       \
       "    s (list(int), optional): Sizes of the transformed axes (cut or zero-padded).\n"  \
       "    axes (list(int), optional): Axes to transform (default: the last ``len(s)``, or\n" \
       "      every axis).\n"                                                                \
       "    norm (str, optional): ``'backward'``, ``'ortho'`` or ``'forward'``.\n\n"         \
       "Returns:\n    array: The transform.\n"

void def_one(nb::module_& m, const char* name, Fn1 fn, const char* doc) {
  m.def(
      name,
      [fn, name](const array& a, std::optional<int> n, int axis, const std::string& norm,
                 StreamOrDevice s) {
        const fft::FFTNorm nm = parse_norm(norm, name);
        if (!n) {
          Shape sz;
          const bool irfft = std::string(name) == "irfft";
          const int ax = axis < 0 ? axis + static_cast<int>(a.ndim()) : axis;
          if (ax < 0 || ax >= static_cast<int>(a.ndim())) {
            throw std::invalid_argument(std::string("[") + name + "] axis " +
                                        std::to_string(axis) + " is out of range for an array "
                                        "of " + std::to_string(a.ndim()) + " dims");
          }
          sz.push_back(irfft ? (a.shape(ax) - 1) * 2 : a.shape(ax));
          return fn(a, sz, {axis}, nm, s);
        }
        return fn(a, Shape{*n}, {axis}, nm, s);
      },
      "a"_a, "n"_a = nb::none(), "axis"_a = -1, "norm"_a = "backward", "stream"_a = nb::none(),
      doc);
}

void def_n(nb::module_& m, const char* name, Fn1 fn, FnAxes fn_axes, FnAll fn_all,
           std::optional<std::vector<int>> default_axes, const char* doc) {
  m.def(
      name,
      [fn, fn_axes, fn_all, name](const array& a, const std::optional<Shape>& sizes,
                                  const std::optional<std::vector<int>>& axes,
                                  const std::string& norm, StreamOrDevice s) {
        const fft::FFTNorm nm = parse_norm(norm, name);
        if (sizes && axes) return fn(a, *sizes, *axes, nm, s);
        if (axes) return fn_axes(a, *axes, nm, s);
        if (sizes) {
          // The last len(s) axes.
          std::vector<int> ax;
          for (size_t i = 0; i < sizes->size(); ++i) {
            ax.push_back(static_cast<int>(a.ndim() - sizes->size() + i));
          }
          return fn(a, *sizes, ax, nm, s);
        }
        return fn_all(a, nm, s);
      },
      "a"_a, "s"_a = nb::none(), "axes"_a = default_axes ? nb::cast(*default_axes) : nb::none(),
      "norm"_a = "backward", "stream"_a = nb::none(), doc);
}

// The analysis window of stft / istft: `window` (win_length then unused) or a rectangle of
// win_length (default n_fft), zero-padded to n_fft with its centre at n_fft / 2.
array stft_window(const std::optional<array>& window, std::optional<int> win_length, int n_fft,
                  const char* op, StreamOrDevice s) {
  array w = window ? astype(*window, float32, s) : ones({win_length.value_or(n_fft)}, float32, s);
  if (w.ndim() != 1) {
    throw std::invalid_argument(std::string("[") + op + "] window must be a one-dimensional "
                                "array; got " + std::to_string(w.ndim()) + " dimensions");
  }
  const int length = w.shape(0);
  if (length > n_fft) {
    throw std::invalid_argument(std::string("[") + op + "] window length " +
                                std::to_string(length) + " must not exceed n_fft " +
                                std::to_string(n_fft));
  }
  const int left = (n_fft - length) / 2;
  return pad(w, {0}, {left}, {n_fft - length - left}, array(0.0f), "constant", s);
}

// Indices into `length` samples of the signal padded by `pad` on each side with NumPy's
// "reflect" (repeated when the pad is longer than the signal) or "edge".
array padding_indices(int length, int pad, const std::string& mode) {
  std::vector<int> index(static_cast<size_t>(length + 2 * pad));
  const int period = 2 * (length - 1);
  for (int p = -pad; p < length + pad; ++p) {
    int i = 0;
    if (mode == "edge") {
      i = std::clamp(p, 0, length - 1);
    } else if (length > 1) {
      const int q = ((p % period) + period) % period;
      i = q < length ? q : period - q;
    }
    index[static_cast<size_t>(p + pad)] = i;
  }
  return array(index.begin(), Shape{length + 2 * pad}, int32);
}

// The frame starts (frames x n_fft) sample indices: frame f covers [f * hop, f * hop + n_fft).
array frame_indices(int frames, int hop, int n_fft, StreamOrDevice s) {
  return add(expand_dims(multiply(arange(frames, int32, s), array(hop), s), 1, s),
             expand_dims(arange(n_fft, int32, s), 0, s), s);
}

}  // namespace

void init_fft(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("fft", "Fast Fourier transforms.");
  def_one(m, "fft", &fft::fftn, FFT1_DOC("One-dimensional discrete Fourier transform."));
  def_one(m, "ifft", &fft::ifftn, FFT1_DOC("One-dimensional inverse discrete Fourier transform."));
  def_one(m, "rfft", &fft::rfftn, FFT1_DOC("One-dimensional transform of a real input (n/2+1 frequencies)."));
  def_one(m, "irfft", &fft::irfftn,
          FFT1_DOC("Inverse of rfft: a real output of size n (default 2 * (frequencies - 1))."));
  const std::vector<int> two{-2, -1};
  def_n(m, "fft2", &fft::fftn, &fft::fftn, &fft::fftn, two, FFTN_DOC("Two-dimensional discrete Fourier transform."));
  def_n(m, "ifft2", &fft::ifftn, &fft::ifftn, &fft::ifftn, two, FFTN_DOC("Two-dimensional inverse transform."));
  def_n(m, "rfft2", &fft::rfftn, &fft::rfftn, &fft::rfftn, two, FFTN_DOC("Two-dimensional transform of a real input."));
  def_n(m, "irfft2", &fft::irfftn, &fft::irfftn, &fft::irfftn, two, FFTN_DOC("Inverse of rfft2."));
  def_n(m, "fftn", &fft::fftn, &fft::fftn, &fft::fftn, std::nullopt, FFTN_DOC("n-dimensional discrete Fourier transform."));
  def_n(m, "ifftn", &fft::ifftn, &fft::ifftn, &fft::ifftn, std::nullopt, FFTN_DOC("n-dimensional inverse transform."));
  def_n(m, "rfftn", &fft::rfftn, &fft::rfftn, &fft::rfftn, std::nullopt, FFTN_DOC("n-dimensional transform of a real input."));
  def_n(m, "irfftn", &fft::irfftn, &fft::irfftn, &fft::irfftn, std::nullopt, FFTN_DOC("Inverse of rfftn."));
  m.def("fftfreq", &fft::fftfreq, "n"_a, "d"_a = 1.0, "stream"_a = nb::none(),
        "Sample frequencies of an n-point transform with sample spacing d.");
  m.def("rfftfreq", &fft::rfftfreq, "n"_a, "d"_a = 1.0, "stream"_a = nb::none(),
        "The non-negative sample frequencies (as rfft returns them).");
  m.def(
      "fftshift",
      [](const array& a, const std::optional<std::variant<int, std::vector<int>>>& axes,
         StreamOrDevice s) {
        if (!axes) return fft::fftshift(a, s);
        if (auto* i = std::get_if<int>(&*axes)) return fft::fftshift(a, std::vector<int>{*i}, s);
        return fft::fftshift(a, std::get<std::vector<int>>(*axes), s);
      },
      "a"_a, "axes"_a = nb::none(), "stream"_a = nb::none(),
      "Move the zero frequency to the middle of the given axes (every axis by default).");
  m.def(
      "ifftshift",
      [](const array& a, const std::optional<std::variant<int, std::vector<int>>>& axes,
         StreamOrDevice s) {
        if (!axes) return fft::ifftshift(a, s);
        if (auto* i = std::get_if<int>(&*axes)) return fft::ifftshift(a, std::vector<int>{*i}, s);
        return fft::ifftshift(a, std::get<std::vector<int>>(*axes), s);
      },
      "a"_a, "axes"_a = nb::none(), "stream"_a = nb::none(), "The inverse of fftshift.");
  m.def(
      "stft",
      [](const array& x, int n_fft, std::optional<int> hop_length, std::optional<int> win_length,
         const std::optional<array>& window, bool center, const std::string& pad_mode,
         const std::string& norm, std::optional<bool> onesided, StreamOrDevice s) {
        if (x.ndim() == 0) {
          throw std::invalid_argument("[stft] Input must have at least one dimension.");
        }
        if (n_fft <= 0) throw std::invalid_argument("[stft] n_fft must be positive.");
        const int hop = hop_length.value_or(n_fft / 4);
        if (hop <= 0) throw std::invalid_argument("[stft] hop_length must be positive.");
        const fft::FFTNorm nm = parse_norm(norm, "stft");
        const bool is_complex = x.dtype() == complex64;
        const bool one = onesided.value_or(!is_complex);
        const array w = stft_window(window, win_length, n_fft, "stft", s);
        // A one-sided transform of a complex signal takes its real part, as MLX's.
        array signal = astype(is_complex && one ? real(x, s) : x,
                              is_complex && !one ? complex64 : float32, s);
        const int axis = static_cast<int>(x.ndim()) - 1;
        if (center) {
          const int half = n_fft / 2;
          if (pad_mode == "constant") {
            signal = pad(signal, {axis}, {half}, {half}, array(0.0f), "constant", s);
          } else if (pad_mode == "reflect" || pad_mode == "edge") {
            signal = take(signal, padding_indices(x.shape(axis), half, pad_mode), axis, s);
          } else {
            throw std::invalid_argument("[stft] pad_mode must be 'reflect', 'constant' or "
                                        "'edge'; got '" + pad_mode + "'");
          }
        }
        const int length = signal.shape(axis);
        if (length < n_fft) {
          throw std::invalid_argument("[stft] Input is too short for the given n_fft: " +
                                      std::to_string(length) + " samples, n_fft " +
                                      std::to_string(n_fft));
        }
        const int frames = 1 + (length - n_fft) / hop;
        // (..., frames, n_fft) windowed frames, transformed along the last axis.
        const array framed = multiply(take(signal, frame_indices(frames, hop, n_fft, s), axis, s),
                                      w, s);
        const array spectrum = one ? fft::rfft(framed, n_fft, -1, nm, s)
                                   : fft::fft(framed, n_fft, -1, nm, s);
        return astype(swapaxes(spectrum, -1, -2, s), complex64, s);
      },
      "x"_a, "n_fft"_a = 2048, "hop_length"_a = nb::none(), "win_length"_a = nb::none(),
      "window"_a = nb::none(), "center"_a = true, "pad_mode"_a = "reflect", "norm"_a = "backward",
      "onesided"_a = nb::none(), "stream"_a = nb::none(),
      "Short-Time Fourier Transform. Splits the last axis of ``x`` into overlapping frames of "
      "length ``n_fft`` (``hop_length`` apart, default ``n_fft // 4``), applies ``window`` "
      "(centred and zero-padded to ``n_fft``; default a rectangle of ``win_length``, default "
      "``n_fft``), and takes the Fourier transform of each frame. ``center`` pads both ends by "
      "``n_fft // 2`` (``pad_mode``: ``'reflect'``, ``'constant'`` or ``'edge'``); ``onesided`` "
      "(default: for real input) keeps the non-negative frequencies.\n\n"
      "Returns:\n    array: complex64, shape ``(..., n_freq, n_frames)``.");
  m.def(
      "istft",
      [](const array& stft_matrix, std::optional<int> n_fft_arg, std::optional<int> hop_length,
         std::optional<int> win_length, const std::optional<array>& window, bool center,
         const std::string& norm, std::optional<bool> onesided, std::optional<int> length,
         StreamOrDevice s) {
        if (stft_matrix.ndim() < 2) {
          throw std::invalid_argument("[istft] Input must have at least two dimensions (freq, "
                                      "frames).");
        }
        const int nd = static_cast<int>(stft_matrix.ndim());
        const int freqs = stft_matrix.shape(nd - 2), frames = stft_matrix.shape(nd - 1);
        const bool one = onesided.value_or(true);
        const int n_fft = n_fft_arg.value_or(one ? 2 * (freqs - 1) : freqs);
        const int hop = hop_length.value_or(n_fft / 4);
        if (hop <= 0) throw std::invalid_argument("[istft] hop_length must be positive.");
        const fft::FFTNorm nm = parse_norm(norm, "istft");
        const array w = stft_window(window, win_length, n_fft, "istft", s);
        // (..., frames, n_fft) frames, windowed again, overlap-added and divided by the summed
        // squared window (floored at 1e-8, as MLX's).
        const array spectra = swapaxes(stft_matrix, -1, -2, s);
        array framed = one ? fft::irfft(spectra, n_fft, -1, nm, s)
                           : real(fft::ifft(spectra, n_fft, -1, nm, s), s);
        framed = multiply(astype(framed, float32, s), w, s);
        const int total = n_fft + hop * (frames - 1);
        const array positions =
            reshape(frame_indices(frames, hop, n_fft, s), {frames * n_fft}, s);
        Shape batch(stft_matrix.shape().begin(), stft_matrix.shape().end() - 2);
        Shape flat_shape = batch;
        flat_shape.push_back(frames * n_fft);
        Shape out_shape = batch;
        out_shape.push_back(total);
        const array sum = scatter_add_axis(zeros(out_shape, float32, s),
                                           broadcast_to(positions, flat_shape, s),
                                           reshape(framed, flat_shape, s), -1, s);
        const array envelope = scatter_add_axis(
            zeros({total}, float32, s), positions,
            reshape(broadcast_to(square(w, s), {frames, n_fft}, s), {frames * n_fft}, s), 0, s);
        array y = divide(sum, maximum(envelope, array(1e-8f), s), s);
        const int start = center ? n_fft / 2 : 0;
        const int want = length ? std::max(*length, 0) : std::max(total - 2 * start, 0);
        const int have = std::clamp(total - start, 0, want);
        Shape lo(y.ndim(), 0), hi = y.shape();
        lo.back() = start;
        hi.back() = start + have;
        y = slice(y, lo, hi, s);
        const int last = static_cast<int>(y.ndim()) - 1;
        return have < want ? pad(y, {last}, {0}, {want - have}, array(0.0f), "constant", s) : y;
      },
      "stft_matrix"_a, "n_fft"_a = nb::none(), "hop_length"_a = nb::none(),
      "win_length"_a = nb::none(), "window"_a = nb::none(), "center"_a = true,
      "norm"_a = "backward", "onesided"_a = nb::none(), "length"_a = nb::none(),
      "stream"_a = nb::none(),
      "Inverse Short-Time Fourier Transform: overlap-adds the windowed inverse transform of each "
      "frame of ``stft_matrix`` (``(..., n_freq, n_frames)``), divided by the summed squared "
      "window. ``n_fft`` defaults to ``2 * (n_freq - 1)`` (one-sided, the default) or "
      "``n_freq``; ``length`` trims or zero-pads the output.\n\n"
      "Returns:\n    array: The real float32 signal.");
  parent.def("hadamard_transform", &hadamard_transform, "a"_a, "scale"_a = nb::none(),
             "stream"_a = nb::none(),
             "The Hadamard transform along the last axis, times ``scale`` (default\n"
             "``1 / sqrt(n)``). The axis' size must be ``m * 2**k`` with ``m`` in 1, 12, 20, 28.");
}

}  // namespace tessera::python
