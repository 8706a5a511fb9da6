// Strided copies with conversion (copy.h). Contiguous sources take a flat loop; others walk
// collapsed runs. Large copies split over the intra-op pool.
#include "backend/cpu/copy.h"

#include <cstring>

#include "backend/cpu/strided.h"
#include "core/thread_pool.h"

namespace tessera::cpu {

namespace {

template <typename S, typename D>
void copy_typed(const array& src, array& dst) {
  const S* s = src.data<S>();
  D* d = dst.data<D>();
  const size_t n = dst.size();
  if (src.flags().row_contiguous) {
    detail::parallel_for(n, kElementwiseGrain, [&](size_t b, size_t e) {
      if constexpr (std::is_same_v<S, D>) {
        std::memcpy(d + b, s + b, (e - b) * sizeof(D));
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

void allocate_or_donate(array& out, const std::vector<const array*>& candidates) {
  for (const array* in : candidates) {
    if (in->is_donatable() && in->dtype() == out.dtype() && in->size() == out.size() &&
        in->data_size() == out.size() && in->itemsize() == out.itemsize()) {
      out.copy_shared_buffer(*in, detail::row_strides(out.shape()), in->flags(), out.size(),
                             in->offset());
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
