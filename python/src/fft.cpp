// tessera.core.fft: include/tessera/fft.h with MLX's signatures.
#include "convert.h"

#include <optional>
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
  parent.def("hadamard_transform", &hadamard_transform, "a"_a, "scale"_a = nb::none(),
             "stream"_a = nb::none(),
             "The Hadamard transform along the last axis, times ``scale`` (default\n"
             "``1 / sqrt(n)``). The axis' size must be ``m * 2**k`` with ``m`` in 1, 12, 20, 28.");
}

}  // namespace tessera::python
