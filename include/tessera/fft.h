// Fast Fourier transforms (namespace tessera::fft, as MLX's mlx/fft.h): complex64 results (real
// inputs for rfft*, float32 outputs for irfft*), any length in O(n log n) (mixed radix 2, 3, 4,
// 5, 7, ..., 13 and Bluestein's algorithm for larger prime factors). `n` / `s` pad with zeros or
// truncate the transformed axes first; norm scales as NumPy's "backward" (inverse by 1/n),
// "ortho" (both by 1/sqrt(n)) and "forward" (forward by 1/n).
#pragma once

#include <optional>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera::fft {

enum class FFTNorm { Backward, Ortho, Forward };

array fftn(const array& a, const Shape& n, const std::vector<int>& axes,
           FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array fftn(const array& a, const std::vector<int>& axes, FFTNorm norm = FFTNorm::Backward,
           StreamOrDevice s = {});
array fftn(const array& a, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array ifftn(const array& a, const Shape& n, const std::vector<int>& axes,
            FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array ifftn(const array& a, const std::vector<int>& axes, FFTNorm norm = FFTNorm::Backward,
            StreamOrDevice s = {});
array ifftn(const array& a, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
// Real input; the last axis keeps n / 2 + 1 frequencies.
array rfftn(const array& a, const Shape& n, const std::vector<int>& axes,
            FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array rfftn(const array& a, const std::vector<int>& axes, FFTNorm norm = FFTNorm::Backward,
            StreamOrDevice s = {});
array rfftn(const array& a, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
// Hermitian input (n / 2 + 1 frequencies on the last axis), real output of size n there.
array irfftn(const array& a, const Shape& n, const std::vector<int>& axes,
             FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array irfftn(const array& a, const std::vector<int>& axes, FFTNorm norm = FFTNorm::Backward,
             StreamOrDevice s = {});
array irfftn(const array& a, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});

inline array fft(const array& a, int n, int axis, FFTNorm norm = FFTNorm::Backward,
                 StreamOrDevice s = {}) {
  return fftn(a, {n}, {axis}, norm, s);
}
inline array fft(const array& a, int axis = -1, FFTNorm norm = FFTNorm::Backward,
                 StreamOrDevice s = {}) {
  return fftn(a, std::vector<int>{axis}, norm, s);
}
inline array ifft(const array& a, int n, int axis, FFTNorm norm = FFTNorm::Backward,
                  StreamOrDevice s = {}) {
  return ifftn(a, {n}, {axis}, norm, s);
}
inline array ifft(const array& a, int axis = -1, FFTNorm norm = FFTNorm::Backward,
                  StreamOrDevice s = {}) {
  return ifftn(a, std::vector<int>{axis}, norm, s);
}
inline array rfft(const array& a, int n, int axis, FFTNorm norm = FFTNorm::Backward,
                  StreamOrDevice s = {}) {
  return rfftn(a, {n}, {axis}, norm, s);
}
inline array rfft(const array& a, int axis = -1, FFTNorm norm = FFTNorm::Backward,
                  StreamOrDevice s = {}) {
  return rfftn(a, std::vector<int>{axis}, norm, s);
}
inline array irfft(const array& a, int n, int axis, FFTNorm norm = FFTNorm::Backward,
                   StreamOrDevice s = {}) {
  return irfftn(a, {n}, {axis}, norm, s);
}
inline array irfft(const array& a, int axis = -1, FFTNorm norm = FFTNorm::Backward,
                   StreamOrDevice s = {}) {
  return irfftn(a, std::vector<int>{axis}, norm, s);
}
inline array fft2(const array& a, const Shape& n, const std::vector<int>& axes = {-2, -1},
                  FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {}) {
  return fftn(a, n, axes, norm, s);
}
inline array fft2(const array& a, const std::vector<int>& axes = {-2, -1},
                  FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {}) {
  return fftn(a, axes, norm, s);
}
inline array ifft2(const array& a, const Shape& n, const std::vector<int>& axes = {-2, -1},
                   FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {}) {
  return ifftn(a, n, axes, norm, s);
}
inline array ifft2(const array& a, const std::vector<int>& axes = {-2, -1},
                   FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {}) {
  return ifftn(a, axes, norm, s);
}
inline array rfft2(const array& a, const Shape& n, const std::vector<int>& axes = {-2, -1},
                   FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {}) {
  return rfftn(a, n, axes, norm, s);
}
inline array rfft2(const array& a, const std::vector<int>& axes = {-2, -1},
                   FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {}) {
  return rfftn(a, axes, norm, s);
}
inline array irfft2(const array& a, const Shape& n, const std::vector<int>& axes = {-2, -1},
                    FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {}) {
  return irfftn(a, n, axes, norm, s);
}
inline array irfft2(const array& a, const std::vector<int>& axes = {-2, -1},
                    FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {}) {
  return irfftn(a, axes, norm, s);
}

// Sample frequencies of an n-point DFT with sample spacing d (rfftfreq: the non-negative ones).
array fftfreq(int n, double d = 1.0, StreamOrDevice s = {});
array rfftfreq(int n, double d = 1.0, StreamOrDevice s = {});
// Move the zero frequency to the middle (ifftshift undoes it); every axis by default.
array fftshift(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array fftshift(const array& a, StreamOrDevice s = {});
array ifftshift(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array ifftshift(const array& a, StreamOrDevice s = {});

}  // namespace tessera::fft

namespace tessera {

// The Hadamard transform along the last axis, whose size must be m * 2^k with m in 1, 12, 20, 28
// (MLX's matrices for m > 1), times scale (default 1/sqrt(n)).
// Real floating inputs; integers become float32.
array hadamard_transform(const array& a, std::optional<float> scale = std::nullopt,
                         StreamOrDevice s = {});

}  // namespace tessera
