// CPU kernels of the quantization family. Packing (MLX's): element j of a row is bits
// [j * bits, (j + 1) * bits) of the row's little-endian byte stream. quantize and dequantize
// follow MLX's CPU arithmetic step for step (float group statistics, rint, T-rounded product then
// sum), so MLX's packed arrays dequantize to the same values; this file is built without
// floating-point contraction (CMakeLists) so no product and sum fuse into one rounding.
// quantized_matmul never materialises the dequantized matrix: per group,
// sum_k x_k (s q_k + b) = s * dot(x, q) + b * sum(x), with the group's q unpacked once for every
// row of x.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/cpu/copy.h"
#include "backend/cpu/elementwise.h"
#include "ops/quantized.h"

namespace tessera {

namespace {

// q values count..count+n of a packed row (bytes), as floats.
void unpack(const uint8_t* row, int bits, int64_t first, int64_t n, float* out) {
  if (bits == 4 && first % 2 == 0) {
    const uint8_t* p = row + first / 2;
    for (int64_t i = 0; i < n / 2; ++i) {
      out[2 * i] = static_cast<float>(p[i] & 0xF);
      out[2 * i + 1] = static_cast<float>(p[i] >> 4);
    }
    return;
  }
  if (bits == 8) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(row[first + i]);
    return;
  }
  const unsigned mask = (1u << bits) - 1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pos = (first + i) * bits;
    const int64_t byte = pos >> 3;
    const int shift = static_cast<int>(pos & 7);
    unsigned v = row[byte];
    if (shift + bits > 8) v |= static_cast<unsigned>(row[byte + 1]) << 8;
    out[i] = static_cast<float>((v >> shift) & mask);
  }
}

template <typename T>
float as_float(T v) {
  return static_cast<float>(v);
}

// A value of the input type in the accumulation type A (double stays exact).
template <typename A, typename T>
A to_acc(T v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return static_cast<A>(static_cast<float>(v));
  }
}

template <typename T, typename A>
T from_acc(A v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return T(static_cast<float>(v));
  }
}

template <typename T>
void quantize_rows(const array& w_in, std::vector<array>& outputs, int group_size, int bits) {
  const array w = cpu::ensure_row_contiguous(w_in);
  for (auto& o : outputs) o.set_data(allocator::malloc(o.nbytes()));
  const T* src = w.data<T>();
  auto* packed = reinterpret_cast<uint8_t*>(outputs[0].data<uint32_t>());
  T* scales = outputs[1].data<T>();
  T* biases = outputs[2].data<T>();
  const int64_t k = w.shape(-1), rows = k == 0 ? 0 : static_cast<int64_t>(w.size()) / k;
  const int64_t row_bytes = k * bits / 8, groups = k / group_size;
  const float n_bins = static_cast<float>((1 << bits) - 1), eps = 1e-7f;
  cpu::parallel_blocks(static_cast<size_t>(rows), 64, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      uint8_t* out = packed + r * row_bytes;
      std::memset(out, 0, static_cast<size_t>(row_bytes));
      for (int64_t g = 0; g < groups; ++g) {
        const T* x = src + r * k + g * group_size;
        float w_min = std::numeric_limits<float>::infinity(), w_max = -w_min;
        for (int j = 0; j < group_size; ++j) {
          w_max = std::max(w_max, as_float(x[j]));
          w_min = std::min(w_min, as_float(x[j]));
        }
        const bool mask = std::abs(w_min) > std::abs(w_max);
        float scale = std::max((w_max - w_min) / n_bins, eps);
        scale = mask ? scale : -scale;
        const float edge = mask ? w_min : w_max;
        const float q0 = std::rint(edge / scale);
        float bias = 0.0f;
        if (q0 != 0.0f) {
          scale = edge / q0;
          bias = edge;
        }
        for (int j = 0; j < group_size; ++j) {
          float q = std::rint((as_float(x[j]) - bias) / scale);
          q = std::min(std::max(q, 0.0f), n_bins);
          const int64_t pos = (g * group_size + j) * bits;
          const unsigned v = static_cast<unsigned>(q) << (pos & 7);
          out[pos >> 3] |= static_cast<uint8_t>(v & 0xFF);
          if ((pos & 7) + bits > 8) out[(pos >> 3) + 1] |= static_cast<uint8_t>(v >> 8);
        }
        scales[r * groups + g] = T(scale);
        biases[r * groups + g] = T(bias);
      }
    }
  });
}

template <typename T>
void dequantize_rows(const array& w_in, const array& s_in, const array& b_in, array& out,
                     int group_size, int bits) {
  const array w = cpu::ensure_row_contiguous(w_in), sc = cpu::ensure_row_contiguous(s_in),
              bi = cpu::ensure_row_contiguous(b_in);
  out.set_data(allocator::malloc(out.nbytes()));
  const auto* packed = reinterpret_cast<const uint8_t*>(w.data<uint32_t>());
  const T* scales = sc.data<T>();
  const T* biases = bi.data<T>();
  T* dst = out.data<T>();
  const int64_t k = out.shape(-1), rows = k == 0 ? 0 : static_cast<int64_t>(out.size()) / k;
  const int64_t row_bytes = k * bits / 8, groups = k / group_size;
  cpu::parallel_blocks(static_cast<size_t>(rows), 64, [&](size_t r0, size_t r1) {
    std::vector<float> q(static_cast<size_t>(group_size));
    for (size_t r = r0; r < r1; ++r) {
      for (int64_t g = 0; g < groups; ++g) {
        unpack(packed + r * row_bytes, bits, g * group_size, group_size, q.data());
        const T s = scales[r * groups + g], b = biases[r * groups + g];
        T* o = dst + r * k + g * group_size;
        // Two roundings to T, as MLX's multiply then add.
        for (int j = 0; j < group_size; ++j) o[j] = T(s * T(q[j])) + b;
      }
    }
  });
}

// out (M, N) = x (M, K) @ W^T, W (N, K) packed; accumulation in A.
template <typename T, typename A>
void qmm_transposed(const T* x, const uint8_t* packed, const T* scales, const T* biases, T* out,
                    int64_t m, int64_t n, int64_t k, int group_size, int bits) {
  const int64_t groups = k / group_size, row_bytes = k * bits / 8;
  // x in A, and the sum of each of its groups.
  std::vector<A> xa(static_cast<size_t>(m * k)), xsum(static_cast<size_t>(m * groups), A(0));
  for (int64_t i = 0; i < m * k; ++i) xa[i] = to_acc<A>(x[i]);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      A acc = 0;
      for (int j = 0; j < group_size; ++j) acc += xa[r * k + g * group_size + j];
      xsum[r * groups + g] = acc;
    }
  }
  // Output columns in blocks: each block unpacks its weight rows once for every row of x.
  cpu::parallel_blocks(static_cast<size_t>(n), 16, [&](size_t n0, size_t n1) {
    std::vector<float> q(static_cast<size_t>(k));
    for (size_t col = n0; col < n1; ++col) {
      unpack(packed + col * row_bytes, bits, 0, k, q.data());
      const T* s = scales + col * groups;
      const T* b = biases + col * groups;
      for (int64_t r = 0; r < m; ++r) {
        const A* xr = xa.data() + r * k;
        A total = 0;
        for (int64_t g = 0; g < groups; ++g) {
          const A* xg = xr + g * group_size;
          const float* qg = q.data() + g * group_size;
          A dot = 0;
          for (int j = 0; j < group_size; ++j) dot += xg[j] * static_cast<A>(qg[j]);
          total += to_acc<A>(s[g]) * dot + to_acc<A>(b[g]) * xsum[r * groups + g];
        }
        out[r * n + col] = from_acc<T>(total);
      }
    }
  });
}

// out (M, N) = x (M, K) @ W, W (K, N) packed along N: column blocks (whole groups) in parallel,
// each adding x[:, k] * W[k, block] over k.
template <typename T, typename A>
void qmm_plain(const T* x, const uint8_t* packed, const T* scales, const T* biases, T* out,
               int64_t m, int64_t n, int64_t k, int group_size, int bits) {
  const int64_t groups = n / group_size, row_bytes = n * bits / 8;
  cpu::parallel_blocks(static_cast<size_t>(groups), 4, [&](size_t g0, size_t g1) {
    const int64_t c0 = static_cast<int64_t>(g0) * group_size, width = (g1 - g0) * group_size;
    std::vector<float> q(static_cast<size_t>(width));
    std::vector<A> wrow(static_cast<size_t>(width)), acc(static_cast<size_t>(m * width), A(0));
    for (int64_t kk = 0; kk < k; ++kk) {
      unpack(packed + kk * row_bytes, bits, c0, width, q.data());
      for (size_t g = g0; g < g1; ++g) {
        const A s = to_acc<A>(scales[kk * groups + g]);
        const A b = to_acc<A>(biases[kk * groups + g]);
        const int64_t off = (static_cast<int64_t>(g) - static_cast<int64_t>(g0)) * group_size;
        for (int j = 0; j < group_size; ++j) wrow[off + j] = s * static_cast<A>(q[off + j]) + b;
      }
      for (int64_t r = 0; r < m; ++r) {
        const A xv = to_acc<A>(x[r * k + kk]);
        A* ar = acc.data() + r * width;
        for (int64_t j = 0; j < width; ++j) ar[j] += xv * wrow[j];
      }
    }
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < width; ++j) out[r * n + c0 + j] = from_acc<T>(acc[r * width + j]);
    }
  });
}

template <typename F>
void by_float_dtype(const char* op, Dtype dt, F f) {
  if (dt == float32) {
    f(float{});
  } else if (dt == float16) {
    f(float16_t{});
  } else if (dt == bfloat16) {
    f(bfloat16_t{});
  } else if (dt == float64) {
    f(double{});
  } else {
    throw std::invalid_argument(std::string("[") + op + "] no CPU kernel for dtype " +
                                dtype_name(dt));
  }
}

}  // namespace

void AffineQuantize::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  by_float_dtype("quantize", inputs[0].dtype(), [&](auto t) {
    quantize_rows<decltype(t)>(inputs[0], outputs, group_size_, bits_);
  });
}

void AffineDequantize::eval_cpu(const std::vector<array>& inputs, array& out) {
  by_float_dtype("dequantize", out.dtype(), [&](auto t) {
    dequantize_rows<decltype(t)>(inputs[0], inputs[1], inputs[2], out, group_size_, bits_);
  });
}

void QuantizedMatmul::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  const array w = cpu::ensure_row_contiguous(inputs[1]);
  const array sc = cpu::ensure_row_contiguous(inputs[2]);
  const array bi = cpu::ensure_row_contiguous(inputs[3]);
  const int64_t kx = x.shape(-1), m = static_cast<int64_t>(x.size()) / std::max<int64_t>(kx, 1);
  const int64_t n = out.shape(-1);
  const auto* packed = reinterpret_cast<const uint8_t*>(w.data<uint32_t>());
  by_float_dtype("quantized_matmul", out.dtype(), [&](auto t) {
    using T = decltype(t);
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    if (transpose_) {
      qmm_transposed<T, A>(x.data<T>(), packed, sc.data<T>(), bi.data<T>(), out.data<T>(), m, n,
                           kx, group_size_, bits_);
    } else {
      qmm_plain<T, A>(x.data<T>(), packed, sc.data<T>(), bi.data<T>(), out.data<T>(), m, n, kx,
                      group_size_, bits_);
    }
  });
}

}  // namespace tessera
