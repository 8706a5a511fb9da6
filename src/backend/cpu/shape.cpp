// CPU kernels of the shape family: views that share the input buffer (broadcast, reshape when
// the strides allow, transpose, expand_dims, squeeze, split, flip) and the block copies of
// concatenate and pad.
#include <algorithm>
#include <cstring>
#include <optional>

#include "backend/cpu/copy.h"
#include "backend/cpu/shape_util.h"
#include "backend/cpu/strided.h"
#include "core/thread_pool.h"
#include "ops/shape.h"

namespace tessera {

namespace cpu {

namespace {

template <typename T>
void copy_block_typed(const array& src, char* dst_bytes, const Strides& dst_strides) {
  const T* s = src.data<T>();
  T* d = reinterpret_cast<T*>(dst_bytes);
  auto v = collapse<2>(src.shape(), {src.strides(), dst_strides});
  detail::parallel_for(src.size(), kElementwiseGrain, [&](size_t b, size_t e) {
    for_each_run<2>(v, b, e, [&](const std::array<int64_t, 2>& off, int64_t len,
                                 const std::array<int64_t, 2>& st) {
      const T* sp = s + off[0];
      T* dp = d + off[1];
      if (st[0] == 1 && st[1] == 1) {
        std::memcpy(dp, sp, static_cast<size_t>(len) * sizeof(T));
      } else {
        for (int64_t i = 0; i < len; ++i) dp[i * st[1]] = sp[i * st[0]];
      }
    });
  });
}

}  // namespace

void copy_block(const array& src, char* dst, const Strides& dst_strides) {
  if (src.size() == 0) return;
  switch (src.itemsize()) {
    case 1: copy_block_typed<uint8_t>(src, dst, dst_strides); break;
    case 2: copy_block_typed<uint16_t>(src, dst, dst_strides); break;
    case 4: copy_block_typed<uint32_t>(src, dst, dst_strides); break;
    case 8: copy_block_typed<uint64_t>(src, dst, dst_strides); break;
    default: throw std::logic_error("[copy_block] unsupported item size");
  }
}

namespace {

template <typename T>
void fill_typed(array& out, const void* value) {
  T v;
  std::memcpy(&v, value, sizeof(T));
  T* o = out.data<T>();
  detail::parallel_for(out.size(), kElementwiseGrain,
                       [&](size_t b, size_t e) { std::fill(o + b, o + e, v); });
}

}  // namespace

void fill_bytes(array& out, const void* value) {
  if (out.size() == 0) return;
  switch (out.itemsize()) {
    case 1: fill_typed<uint8_t>(out, value); break;
    case 2: fill_typed<uint16_t>(out, value); break;
    case 4: fill_typed<uint32_t>(out, value); break;
    case 8: fill_typed<uint64_t>(out, value); break;
    default: throw std::logic_error("[fill_bytes] unsupported item size");
  }
}

}  // namespace cpu

void Broadcast::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  cpu::make_view(out, in, cpu::broadcast_strides(in, out.shape()), in.offset());
}

// Strides of `in` reshaped to `shape` without copying, or nullopt when impossible (NumPy's rule:
// each group of input dims merged into output dims must be contiguous among themselves).
static std::optional<Strides> reshape_strides(const array& in, const Shape& shape) {
  if (in.flags().row_contiguous || in.size() == 0) return detail::row_strides(shape);
  // Drop size-1 dims of the input.
  Shape ish;
  Strides ist;
  for (size_t i = 0; i < in.ndim(); ++i) {
    if (in.shape()[i] != 1) {
      ish.push_back(in.shape()[i]);
      ist.push_back(in.strides()[i]);
    }
  }
  Strides out(shape.size(), 0);
  size_t i = 0, o = 0;
  while (o < shape.size()) {
    if (shape[o] == 1) {
      out[o] = (i < ist.size() ? ist[i] * ish[i] : 1);
      ++o;
      continue;
    }
    if (i >= ish.size()) return std::nullopt;
    // Match a group: product of input dims [i, i2) == product of output dims [o, o2).
    int64_t ip = ish[i], op = shape[o];
    size_t i2 = i + 1, o2 = o + 1;
    while (ip != op) {
      if (ip < op) {
        if (i2 >= ish.size()) return std::nullopt;
        ip *= ish[i2++];
      } else {
        if (o2 >= shape.size()) return std::nullopt;
        op *= shape[o2++];
      }
    }
    for (size_t k = i; k + 1 < i2; ++k) {
      if (ist[k] != ist[k + 1] * ish[k + 1]) return std::nullopt;
    }
    int64_t st = ist[i2 - 1];
    for (size_t k = o2; k-- > o;) {
      out[k] = st;
      st *= shape[k];
    }
    i = i2;
    o = o2;
  }
  return out;
}

void Reshape::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (auto st = reshape_strides(in, out.shape())) {
    cpu::make_view(out, in, *st, in.offset());
    return;
  }
  // Row-major order is the same for both shapes, so write `in` densely in its own shape.
  out.set_data(allocator::malloc(out.nbytes()));
  cpu::copy_block(in, static_cast<char*>(out.raw_data()), detail::row_strides(in.shape()));
}

void Transpose::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  Strides st(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) st[i] = in.strides()[axes_[i]];
  cpu::make_view(out, in, st, in.offset());
}

void ExpandDims::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  Strides st(out.ndim());
  size_t j = axes_.size(), k = in.ndim();
  int64_t next = 1;  // stride a new size-1 dim takes: that of the dims to its right, merged
  for (size_t i = out.ndim(); i-- > 0;) {
    if (j > 0 && axes_[j - 1] == static_cast<int>(i)) {
      st[i] = next;
      --j;
    } else {
      --k;
      st[i] = in.strides()[k];
      next = in.strides()[k] * in.shape()[k];
    }
  }
  cpu::make_view(out, in, st, in.offset());
}

void Squeeze::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  Strides st;
  size_t j = 0;
  for (size_t i = 0; i < in.ndim(); ++i) {
    if (j < axes_.size() && axes_[j] == static_cast<int>(i)) {
      ++j;
    } else {
      st.push_back(in.strides()[i]);
    }
  }
  cpu::make_view(out, in, st, in.offset());
}

void Split::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  const int64_t stride = in.strides()[axis_];
  for (size_t k = 0; k < outputs.size(); ++k) {
    int64_t start = k == 0 ? 0 : indices_[k - 1];
    // Empty parts may start past the end; their offset is never read.
    if (outputs[k].size() == 0) start = 0;
    cpu::make_view(outputs[k], in, in.strides(), in.offset() + start * stride);
  }
}

void Flip::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  Strides st = in.strides();
  int64_t offset = in.offset();
  if (in.size() > 0) {
    for (int ax : axes_) {
      offset += static_cast<int64_t>(in.shape()[ax] - 1) * st[ax];
      st[ax] = -st[ax];
    }
  }
  cpu::make_view(out, in, st, offset);
}

void Concatenate::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const Strides ost = detail::row_strides(out.shape());
  char* base = static_cast<char*>(out.raw_data());
  int64_t pos = 0;
  for (const auto& in : inputs) {
    cpu::copy_block(in, base + pos * ost[axis_] * static_cast<int64_t>(out.itemsize()), ost);
    pos += in.shape()[axis_];
  }
}

void Pad::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  cpu::fill_bytes(out, inputs[1].raw_data());
  const Strides ost = detail::row_strides(out.shape());
  int64_t off = 0;
  for (size_t i = 0; i < axes_.size(); ++i) off += static_cast<int64_t>(low_[i]) * ost[axes_[i]];
  cpu::copy_block(in, static_cast<char*>(out.raw_data()) + off * static_cast<int64_t>(out.itemsize()),
                  ost);
}

void Depends::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) outputs[i].copy_shared_buffer(inputs[i]);
}

}  // namespace tessera
