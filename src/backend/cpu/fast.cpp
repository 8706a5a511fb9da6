// CPU kernels of the tessera::fast primitives (ops/fast.h). Each rounds where its composite's ops
// round, with the same functors (unary_ops.h), so a primitive and its composite agree bit for bit.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "backend/cpu/copy.h"
#include "backend/cpu/numeric.h"
#include "backend/cpu/unary_ops.h"
#include "core/thread_pool.h"
#include "ops/fast.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

// x (B, N, T, D) row-contiguous; cos / sin tables per batch entry (the offset may differ).
template <typename T>
void rope_rows(const array& x, const int32_t* offset, size_t n_offsets, const float* freqs,
               int dims, bool traditional, std::optional<float> base, float scale, T* out) {
  using C = cpu::compute_t<T>;
  const int B = x.shape(0), N = x.shape(1), L = x.shape(2), D = x.shape(3), half = dims / 2;
  const T* xp = x.data<T>();
  // The composite: inv_freq = exp(-i * (log(base) / half)) or 1 / freqs[i], theta = position *
  // inv_freq, all float32; cos and sin rounded to T; the rotation in T's arithmetic.
  std::vector<float> inv_freq(half);
  const float step = base ? static_cast<float>(std::log(*base) / half) : 0.0f;
  for (int i = 0; i < half; ++i) {
    inv_freq[i] = base ? cpu::ops::ExpOp{}(static_cast<float>(-i) * step) : 1.0f / freqs[i];
  }
  auto mul = [](T a, T b) { return static_cast<T>(static_cast<C>(a) * static_cast<C>(b)); };
  auto add = [](T a, T b) { return static_cast<T>(static_cast<C>(a) + static_cast<C>(b)); };
  auto sub = [](T a, T b) { return static_cast<T>(static_cast<C>(a) - static_cast<C>(b)); };
  std::vector<T> cos_t(static_cast<size_t>(L) * half), sin_t(cos_t.size());
  for (int b = 0; b < B; ++b) {
    if (b == 0 || n_offsets > 1) {
      const float off = static_cast<float>(offset[n_offsets > 1 ? b : 0]);
      for (int t = 0; t < L; ++t) {
        const float pos = (static_cast<float>(t) + off) * scale;
        for (int i = 0; i < half; ++i) {
          const float theta = pos * inv_freq[i];
          cos_t[static_cast<size_t>(t) * half + i] = static_cast<T>(cpu::ops::CosOp{}(theta));
          sin_t[static_cast<size_t>(t) * half + i] = static_cast<T>(cpu::ops::SinOp{}(theta));
        }
      }
    }
    detail::parallel_for(static_cast<size_t>(N) * L, 64, [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        const size_t row = static_cast<size_t>(b) * N * L + r;
        const T* in = xp + row * D;
        T* o = out + row * D;
        const T* c = cos_t.data() + (r % L) * half;
        const T* s = sin_t.data() + (r % L) * half;
        for (int i = 0; i < half; ++i) {
          const int i1 = traditional ? 2 * i : i, i2 = traditional ? 2 * i + 1 : half + i;
          const T x1 = in[i1], x2 = in[i2];
          o[i1] = sub(mul(x1, c[i]), mul(x2, s[i]));
          o[i2] = add(mul(x1, s[i]), mul(x2, c[i]));
        }
        for (int i = dims; i < D; ++i) o[i] = in[i];
      }
    });
  }
}

// Rows of x (row-contiguous, D per row) to out_type: the composite's float32 sum of squares
// times 1/D, plus eps, 1/sqrt, the product rounded to T, then times the weight in T's arithmetic.
template <typename In, typename T>
void rms_rows(const array& x, const T* weight, float eps, T* out) {
  using C = cpu::compute_t<T>;
  const int D = x.shape(-1);
  const size_t rows = D ? x.size() / D : 0;
  const In* xp = x.data<In>();
  const float inv_d = 1.0f / static_cast<float>(D);
  const size_t grain = std::max<size_t>(1, 16384 / std::max(D, 1));
  detail::parallel_for(rows, grain, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const In* in = xp + r * D;
      T* o = out + r * D;
      float ss = 0.0f;
      for (int i = 0; i < D; ++i) {
        const float v = static_cast<float>(in[i]);
        ss += v * v;
      }
      const float scale = cpu::ops::RsqrtOp{}(ss * inv_d + eps);
      for (int i = 0; i < D; ++i) {
        const T y = static_cast<T>(static_cast<float>(in[i]) * scale);
        o[i] = weight ? static_cast<T>(static_cast<C>(y) * static_cast<C>(weight[i])) : y;
      }
    }
  });
}

// f(T{}) for the floating dtype d (the dtypes of the fast ops' composites).
template <typename F>
void dispatch_floating(const char* op, Dtype d, F f) {
  switch (d) {
    case Dtype::Val::float32: return f(float{});
    case Dtype::Val::float16: return f(float16_t{});
    case Dtype::Val::bfloat16: return f(bfloat16_t{});
    case Dtype::Val::float64: return f(double{});
    default:
      throw std::invalid_argument(std::string("[") + op + "] no kernel for dtype " +
                                  dtype_name(d));
  }
}

}  // namespace

void RMSNorm::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  const array w = inputs.size() > 1 ? cpu::ensure_row_contiguous(inputs[1]) : array(0.0f);
  out.set_data(allocator::malloc(out.nbytes()));
  dispatch_floating("rms_norm", out.dtype(), [&](auto out_tag) {
    using T = decltype(out_tag);
    const T* wp = inputs.size() > 1 ? w.data<T>() : nullptr;
    dispatch_floating("rms_norm", x.dtype(), [&](auto in_tag) {
      rms_rows<decltype(in_tag), T>(x, wp, eps_, out.data<T>());
    });
  });
}

void RoPE::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  const array offset = cpu::ensure_row_contiguous(inputs[1]);
  const float* freqs = nullptr;
  array f = inputs.size() > 2 ? cpu::ensure_row_contiguous(inputs[2]) : array(0.0f);
  if (inputs.size() > 2) freqs = f.data<float>();
  out.set_data(allocator::malloc(out.nbytes()));
  dispatch_floating("rope", out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    rope_rows<T>(x, offset.data<int32_t>(), offset.size(), freqs, dims_, traditional_, base_,
                 scale_, out.data<T>());
  });
}

}  // namespace tessera
