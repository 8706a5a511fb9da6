// Strided copies with conversion (copy.h). Contiguous sources take a flat loop, transposing
// layouts go in tiles, others walk collapsed runs. Large copies split over the intra-op pool.
#include "backend/cpu/copy.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/strided.h"
#include "backend/cpu/vec16_ops.h"
#include "core/thread_pool.h"

namespace tessera::cpu {

namespace {

// Side of the square tiles a transposing copy moves at a time (two 32 x 32 blocks of the widest
// dtype, 16 KiB, stay in L1).
constexpr int64_t kTile = 32;

// A copy whose destination rows read the source with a stride while another dim of the source
// is contiguous (a transpose, e.g. contiguous(a.T)): row by row it would touch a new cache line
// for every element, so it goes tile by tile over those two dims, reading along the source's
// rows and writing along the destination's, for every index of the other dims. False (nothing
// done) for other layouts, and for dims too short to be worth tiling.
template <typename S, typename D>
bool copy_transposed(const S* s, D* d, const StridedView<2>& v) {
  const int nd = static_cast<int>(v.shape.size());
  const int a = nd - 1;  // the destination's contiguous dim
  if (nd < 2 || v.strides[0][a] == 1) return false;
  int b = -1;  // the source's contiguous dim
  for (int k = 0; k < a; ++k) {
    if (v.strides[0][k] == 1) b = k;
  }
  if (b < 0 || v.shape[a] < kTile || v.shape[b] < kTile) return false;
  std::vector<int> outer_dims;
  size_t outer = 1;
  for (int k = 0; k < a; ++k) {
    if (k == b) continue;
    outer_dims.push_back(k);
    outer *= static_cast<size_t>(v.shape[k]);
  }
  const int64_t na = v.shape[a], nb = v.shape[b];
  const int64_t ta = (na + kTile - 1) / kTile, tb = (nb + kTile - 1) / kTile;
  const int64_t sa = v.strides[0][a], da = v.strides[1][a], db = v.strides[1][b];
  const size_t tiles = outer * static_cast<size_t>(ta * tb);
  const size_t grain = std::max<size_t>(1, kElementwiseGrain / static_cast<size_t>(kTile * kTile));
  detail::parallel_for(tiles, grain, [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) {
      size_t o = t / static_cast<size_t>(ta * tb);
      const int64_t rem = static_cast<int64_t>(t % static_cast<size_t>(ta * tb));
      int64_t so = 0, dof = 0;  // the outer index's offsets
      for (auto k = outer_dims.rbegin(); k != outer_dims.rend(); ++k) {
        const auto i = static_cast<int64_t>(o % static_cast<size_t>(v.shape[*k]));
        o /= static_cast<size_t>(v.shape[*k]);
        so += i * v.strides[0][*k];
        dof += i * v.strides[1][*k];
      }
      const int64_t b0 = (rem / ta) * kTile, b1 = std::min(nb, b0 + kTile);
      const int64_t a0 = (rem % ta) * kTile, a1 = std::min(na, a0 + kTile);
      for (int64_t i = b0; i < b1; ++i) {
        const S* sp = s + so + i;
        D* dp = d + dof + i * db;
        for (int64_t j = a0; j < a1; ++j) dp[j * da] = detail::cast_scalar<D, S>(sp[j * sa]);
      }
    }
  });
  return true;
}

#if defined(__x86_64__)
// (g++ 12 warns of the undefined pass-through lanes in the intrinsics' unmasked forms.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// The first min(n, 16) of 16 lanes.
inline __mmask16 lanes(size_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}
// float32 to bfloat16, 16 lanes at a time, with the scalar cast's bits (vec16_ops.h): the
// rounding of every half-precision GEMM's float32 result (the scalar loop does not vectorise,
// and took as long as the transposes of a 512-row prefill's weights).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void narrow_bf16_avx512(
    const float* s, int64_t lds, int64_t rows, size_t n, bfloat16_t* d, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r, s += lds, d += ldd) {
    for (size_t i = 0; i < n; i += 16) {
      const __mmask16 m = lanes(n - i);
      ops::store_bf16(d + i, m, ops::round_bf16(_mm512_maskz_loadu_ps(m, s + i)));
    }
  }
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) void split_bf16_avx512(const float* s,
                                                                          bfloat16_t* hi,
                                                                          bfloat16_t* lo,
                                                                          size_t n) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = lanes(n - i);
    const __m512 x = _mm512_maskz_loadu_ps(m, s + i), h = ops::round_bf16(x);
    ops::store_bf16(hi + i, m, h);
    ops::store_bf16(lo + i, m, ops::round_bf16(_mm512_sub_ps(x, h)));
  }
}
#pragma GCC diagnostic pop
#endif

template <typename S, typename D>
void copy_typed(const array& src, array& dst) {
  const S* s = src.data<S>();
  D* d = dst.data<D>();
  const size_t n = dst.size();
  if (src.flags().row_contiguous) {
    detail::parallel_for(n, kElementwiseGrain, [&](size_t b, size_t e) {
      if constexpr (std::is_same_v<S, D>) {
        std::memcpy(d + b, s + b, (e - b) * sizeof(D));
      } else if constexpr (std::is_same_v<S, float> && std::is_same_v<D, bfloat16_t>) {
        narrow_to_bf16(s + b, d + b, e - b);
      } else if constexpr (std::is_same_v<S, bool>) {
        // Read as bytes: g++ does not vectorise loads of bool (a bool must be 0 or 1).
        const uint8_t* u = reinterpret_cast<const uint8_t*>(s);
        for (size_t i = b; i < e; ++i) d[i] = detail::cast_scalar<D, uint8_t>(u[i]);
      } else {
        for (size_t i = b; i < e; ++i) d[i] = detail::cast_scalar<D, S>(s[i]);
      }
    });
    return;
  }
  auto v = collapse<2>(dst.shape(), {src.strides(), detail::row_strides(dst.shape())});
  if (copy_transposed(s, d, v)) return;
  detail::parallel_for(n, kElementwiseGrain, [&](size_t b, size_t e) {
    for_each_run<2>(v, b, e, [&](const std::array<int64_t, 2>& off, int64_t len,
                                 const std::array<int64_t, 2>& st) {
      const S* sp = s + off[0];
      D* dp = d + off[1];
      for (int64_t i = 0; i < len; ++i) dp[i] = detail::cast_scalar<D, S>(sp[i * st[0]]);
    });
  });
}

}  // namespace

void narrow_rows_to_bf16(const float* src, int64_t lds, int64_t rows, int64_t cols,
                         bfloat16_t* dst, int64_t ldd) {
#if defined(__x86_64__)
  if (loop_isa() == LoopIsa::avx512) {
    return narrow_bf16_avx512(src, lds, rows, static_cast<size_t>(cols), dst, ldd);
  }
#endif
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) dst[r * ldd + j] = bfloat16_t(src[r * lds + j]);
  }
}

void narrow_to_bf16(const float* src, bfloat16_t* dst, size_t n) {
  narrow_rows_to_bf16(src, 0, 1, static_cast<int64_t>(n), dst, 0);
}

void split_to_bf16(const float* src, bfloat16_t* hi, bfloat16_t* lo, size_t n) {
#if defined(__x86_64__)
  if (loop_isa() == LoopIsa::avx512) return split_bf16_avx512(src, hi, lo, n);
#endif
  for (size_t i = 0; i < n; ++i) {
    hi[i] = bfloat16_t(src[i]);
    lo[i] = bfloat16_t(src[i] - static_cast<float>(hi[i]));
  }
}

void copy_into(const array& src, array& dst) {
  if (dst.size() == 0) return;
  detail::dispatch_dtype(src.dtype(), [&](auto s_tag) {
    detail::dispatch_dtype(dst.dtype(), [&](auto d_tag) {
      copy_typed<decltype(s_tag), decltype(d_tag)>(src, dst);
    });
  });
}

void copy_contiguous(const array& src, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  copy_into(src, out);
}

void allocate_or_donate(array& out, std::initializer_list<const array*> candidates) {
  for (const array* in : candidates) {
    if (in->is_donatable() && in->dtype() == out.dtype() && in->size() == out.size() &&
        in->data_size() == out.size() && in->itemsize() == out.itemsize()) {
      if (in->flags().row_contiguous && in->shape() == out.shape()) {
        out.copy_shared_buffer(*in, in->strides(), in->flags(), out.size(), in->offset());
      } else {
        out.copy_shared_buffer(*in, detail::row_strides(out.shape()), in->flags(), out.size(),
                               in->offset());
      }
      return;
    }
  }
  out.set_data(allocator::malloc(out.nbytes()));
}

array ensure_row_contiguous(const array& a) {
  if (a.flags().row_contiguous) return a;
  array out(allocator::malloc(a.nbytes()), a.shape(), a.dtype(), allocator::free);
  copy_into(a, out);
  return out;
}

}  // namespace tessera::cpu
