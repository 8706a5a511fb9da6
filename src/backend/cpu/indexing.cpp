// CPU kernels of gather/scatter: indices are read once (any integer dtype, any layout), wrapped
// and range-checked on the worker thread; gathers then copy slices in parallel (memcpy when a
// slice is contiguous), scatters copy the input (donated when possible) and apply the updates
// serially in order, so duplicates accumulate (scatter_add) or the last write wins (scatter).
#include <atomic>
#include <cstring>
#include <string>

#include "backend/common/dispatch.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/strided.h"
#include "core/thread_pool.h"
#include "ops/indexing.h"
#include "ops/utils.h"

namespace tessera {

namespace {

// Wrap a raw index (negative counts from the end) into `x`; false when the start leaves no
// room for the slice (limit = size - extent + 1).
template <typename I>
inline bool wrap_index(I raw, int64_t size, int64_t limit, int64_t& x) {
  if constexpr (std::is_signed_v<I>) {
    x = static_cast<int64_t>(raw);
    if (x < 0) x += size;
    return x >= 0 && x < limit;
  } else {
    x = static_cast<int64_t>(raw);
    return limit > 0 && static_cast<uint64_t>(raw) < static_cast<uint64_t>(limit);
  }
}

[[noreturn]] void throw_bad_index(const char* op, const std::string& raw, int axis, int64_t size,
                                  int64_t extent) {
  throw std::invalid_argument(
      std::string("[") + op + "] index " + raw + " is out of bounds for axis " +
      std::to_string(axis) + " with size " + std::to_string(size) +
      (extent > 1 ? " for a slice of " + std::to_string(extent) + " elements" : std::string()));
}

// The first out-of-range index seen by parallel workers (kernels throw after the loop).
class BadIndex {
 public:
  template <typename I>
  void record(I raw) {
    bool expected = false;
    if (seen_.compare_exchange_strong(expected, true)) value_ = std::to_string(raw);
  }
  void throw_if_any(const char* op, int axis, int64_t size, int64_t extent = 1) {
    if (seen_.load()) throw_bad_index(op, value_, axis, size, extent);
  }

 private:
  std::atomic<bool> seen_{false};
  std::string value_;  // written once, by the thread that set seen_
};

template <typename F>
void dispatch_index(Dtype dt, const char* op, F&& f) {
  detail::dispatch_dtype(dt, [&](auto tag) {
    using I = decltype(tag);
    if constexpr (!std::is_integral_v<I> || std::is_same_v<I, bool>) {
      throw std::invalid_argument(std::string("[") + op + "] indices must have an integer dtype");
    } else {
      f(tag);
    }
  });
}

}  // namespace

namespace detail {

std::vector<int64_t> read_indices(const array& idx, int64_t size, const char* op, int axis,
                                  int64_t extent) {
  const int64_t limit = size - extent + 1;
  std::vector<int64_t> out(idx.size());
  if (out.empty()) return out;
  dispatch_index(idx.dtype(), op, [&](auto tag) {
    using I = decltype(tag);
    const I* p = idx.data<I>();
    auto v = cpu::collapse<1>(idx.shape(), {idx.strides()});
    size_t pos = 0;
    cpu::for_each_run<1>(v, 0, out.size(), [&](const std::array<int64_t, 1>& off, int64_t len,
                                               const std::array<int64_t, 1>& st) {
      for (int64_t i = 0; i < len; ++i) {
        I raw = p[off[0] + i * st[0]];
        if (!wrap_index(raw, size, limit, out[pos++])) {
          throw_bad_index(op, std::to_string(raw), axis, size, extent);
        }
      }
    });
  });
  return out;
}

}  // namespace detail

namespace {

// Element offsets (in `strides` units) of the starts selected by index arrays along `axes`.
// `slice` holds the extent of each slice along every dim of `a`.
std::vector<int64_t> start_offsets(const array& a, const std::vector<array>& inputs, size_t first,
                                   const std::vector<int>& axes, const Strides& strides,
                                   const Shape& slice, size_t n_idx, const char* op) {
  std::vector<int64_t> base(n_idx, 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    auto v = detail::read_indices(inputs[first + k], a.shape(axes[k]), op, axes[k],
                                  slice[axes[k]]);
    const int64_t st = strides[axes[k]];
    for (size_t i = 0; i < n_idx; ++i) base[i] += v[i] * st;
  }
  return base;
}

template <typename T>
T combine_sum(T o, T u) {
  if constexpr (std::is_same_v<T, bool>) {
    return o || u;
  } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
    return T(static_cast<float>(o) + static_cast<float>(u));
  } else {
    return static_cast<T>(o + u);
  }
}

template <typename T>
T combine_prod(T o, T u) {
  if constexpr (std::is_same_v<T, bool>) {
    return o && u;
  } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
    return T(static_cast<float>(o) * static_cast<float>(u));
  } else {
    return static_cast<T>(o * u);
  }
}

// Complex values order by real part, then imaginary part (as MLX).
template <typename T>
bool less(T x, T y) {
  if constexpr (std::is_same_v<T, complex64_t>) {
    return x.real() < y.real() || (x.real() == y.real() && x.imag() < y.imag());
  } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
    return static_cast<float>(x) < static_cast<float>(y);
  } else {
    return x < y;
  }
}

// Calls f(op) with op(T& out, T update) for the reduction.
template <typename T, typename F>
void dispatch_reduce(ScatterReduce r, F&& f) {
  switch (r) {
    case ScatterReduce::None: f([](T& o, T u) { o = u; }); break;
    case ScatterReduce::Sum: f([](T& o, T u) { o = combine_sum<T>(o, u); }); break;
    case ScatterReduce::Prod: f([](T& o, T u) { o = combine_prod<T>(o, u); }); break;
    case ScatterReduce::Max:
      f([](T& o, T u) {
        if (less<T>(o, u)) o = u;
      });
      break;
    case ScatterReduce::Min:
      f([](T& o, T u) {
        if (less<T>(u, o)) o = u;
      });
      break;
  }
}

// Give `out` a row-contiguous copy of `a`, reusing a's buffer when nothing else holds it.
void copy_or_donate(const array& a, array& out) {
  if (a.is_donatable() && a.flags().row_contiguous && a.data_size() == a.size()) {
    out.copy_shared_buffer(a, detail::row_strides(out.shape()), a.flags(), a.size(), a.offset());
  } else {
    cpu::copy_contiguous(a, out);
  }
}

const char* scatter_op_name(ScatterReduce r) {
  switch (r) {
    case ScatterReduce::None: return "scatter";
    case ScatterReduce::Sum: return "scatter_add";
    case ScatterReduce::Prod: return "scatter_prod";
    case ScatterReduce::Max: return "scatter_max";
    case ScatterReduce::Min: return "scatter_min";
  }
  return "scatter";
}

}  // namespace

void Gather::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const size_t slice_size = detail::shape_size(slice_sizes_);
  const size_t n_idx = out.size() / slice_size;
  auto v = cpu::collapse<2>(slice_sizes_, {a.strides(), detail::row_strides(slice_sizes_)});
  const bool flat = v.shape.size() == 1 && v.strides[0][0] == 1;
  const size_t grain = std::max<size_t>(1, cpu::kElementwiseGrain / slice_size);
  common::dispatch_itemsize(out.itemsize(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = a.data<T>();
    T* dst = out.data<T>();
    auto copy_slice = [&](const T* s, T* d) {
      if (slice_size == 1) {
        *d = *s;
      } else if (flat) {
        std::memcpy(d, s, slice_size * sizeof(T));
      } else {
        cpu::for_each_run<2>(v, 0, slice_size, [&](const std::array<int64_t, 2>& off,
                                                   int64_t len,
                                                   const std::array<int64_t, 2>& st) {
          for (int64_t j = 0; j < len; ++j) d[off[1] + j] = s[off[0] + j * st[0]];
        });
      }
    };
    if (axes_.size() == 1 && inputs[1].flags().row_contiguous) {
      // One contiguous index array: read, check and copy in a single parallel pass.
      const int ax = axes_[0];
      const int64_t size = a.shape(ax), extent = slice_sizes_[ax];
      const int64_t limit = size - extent + 1, stride = a.strides()[ax];
      BadIndex bad;
      dispatch_index(inputs[1].dtype(), op_, [&](auto itag) {
        using I = decltype(itag);
        const I* ip = inputs[1].data<I>();
        detail::parallel_for(n_idx, grain, [&](size_t b, size_t e) {
          for (size_t i = b; i < e; ++i) {
            int64_t x;
            if (!wrap_index(ip[i], size, limit, x)) {
              bad.record(ip[i]);
              continue;
            }
            copy_slice(src + x * stride, dst + i * slice_size);
          }
        });
      });
      bad.throw_if_any(op_, ax, size, extent);
      return;
    }
    auto base = start_offsets(a, inputs, 1, axes_, a.strides(), slice_sizes_, n_idx, op_);
    detail::parallel_for(n_idx, grain, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) copy_slice(src + base[i], dst + i * slice_size);
    });
  });
}

void Scatter::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  const array& updates = inputs.back();
  copy_or_donate(a, out);
  if (updates.size() == 0) return;
  const size_t idx_ndim = updates.ndim() - a.ndim();
  Shape slice(updates.shape().begin() + static_cast<long>(idx_ndim), updates.shape().end());
  const size_t slice_size = detail::shape_size(slice);
  const size_t n_idx = updates.size() / slice_size;
  auto base = start_offsets(a, inputs, 1, axes_, out.strides(), slice, n_idx,
                            scatter_op_name(reduce_));
  auto upd = cpu::ensure_row_contiguous(updates);
  Strides out_st = out.strides();
  auto v = cpu::collapse<2>(slice, {out_st, detail::row_strides(slice)});
  detail::dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* u = upd.data<T>();
    T* o = out.data<T>();
    dispatch_reduce<T>(reduce_, [&](auto op) {
      // Updates land in order; only the elements within one slice are independent.
      for (size_t i = 0; i < n_idx; ++i) {
        T* d = o + base[i];
        const T* s = u + i * slice_size;
        auto body = [&](size_t b, size_t e) {
          cpu::for_each_run<2>(v, b, e, [&](const std::array<int64_t, 2>& off, int64_t len,
                                            const std::array<int64_t, 2>& st) {
            for (int64_t j = 0; j < len; ++j) op(d[off[0] + j * st[0]], s[off[1] + j]);
          });
        };
        if (slice_size == 1) {
          op(*d, *s);
        } else if (slice_size >= cpu::kElementwiseGrain) {
          detail::parallel_for(slice_size, cpu::kElementwiseGrain, body);
        } else {
          body(0, slice_size);
        }
      }
    });
  });
}

void GatherAxis::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  const array& idx = inputs[1];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const int64_t size = a.shape(axis_);
  Strides a_st = a.strides();
  const int64_t axis_stride = a_st[axis_];
  a_st[axis_] = 0;  // the index supplies the position along axis_
  auto v = cpu::collapse<3>(out.shape(), {a_st, out.strides(), idx.strides()});
  BadIndex bad;
  common::dispatch_itemsize(out.itemsize(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = a.data<T>();
    T* dst = out.data<T>();
    dispatch_index(idx.dtype(), op_, [&](auto itag) {
      using I = decltype(itag);
      const I* ip = idx.data<I>();
      detail::parallel_for(out.size(), cpu::kElementwiseGrain, [&](size_t b, size_t e) {
        cpu::for_each_run<3>(v, b, e, [&](const std::array<int64_t, 3>& off, int64_t len,
                                          const std::array<int64_t, 3>& st) {
          const T* s = src + off[0];
          T* d = dst + off[1];
          const I* q = ip + off[2];
          for (int64_t j = 0; j < len; ++j) {
            int64_t x;
            I raw = q[j * st[2]];
            if (!wrap_index(raw, size, size, x)) {
              bad.record(raw);
              continue;
            }
            d[j * st[1]] = s[j * st[0] + x * axis_stride];
          }
        });
      });
    });
  });
  bad.throw_if_any(op_, axis_, size);
}

void ScatterAxis::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  const array& idx = inputs[1];
  const array& upd = inputs[2];
  copy_or_donate(a, out);
  if (upd.size() == 0) return;
  const char* op_name = reduce_ == ScatterReduce::Sum ? "scatter_add_axis" : "put_along_axis";
  const int64_t size = a.shape(axis_);
  Strides o_st = out.strides();
  const int64_t axis_stride = o_st[axis_];
  o_st[axis_] = 0;  // the index supplies the position along axis_
  auto v = cpu::collapse<3>(upd.shape(), {upd.strides(), o_st, idx.strides()});
  detail::dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* u = upd.data<T>();
    T* o = out.data<T>();
    dispatch_index(idx.dtype(), op_name, [&](auto itag) {
      using I = decltype(itag);
      const I* ip = idx.data<I>();
      dispatch_reduce<T>(reduce_, [&](auto op) {
        // Serial, in row-major order of the updates: duplicates apply in order.
        cpu::for_each_run<3>(v, 0, upd.size(), [&](const std::array<int64_t, 3>& off,
                                                    int64_t len,
                                                    const std::array<int64_t, 3>& st) {
          for (int64_t j = 0; j < len; ++j) {
            int64_t x;
            I raw = ip[off[2] + j * st[2]];
            if (!wrap_index(raw, size, size, x)) {
              throw_bad_index(op_name, std::to_string(raw), axis_, size, 1);
            }
            op(o[off[1] + j * st[1] + x * axis_stride], u[off[0] + j * st[0]]);
          }
        });
      });
    });
  });
}

}  // namespace tessera
