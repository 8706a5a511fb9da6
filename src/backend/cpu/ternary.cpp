// CPU kernel of Select (where): a bool condition picks between x and y, all three broadcast to
// the output shape. Row-contiguous operands (x or y may also be a single value) take a flat loop;
// others walk collapsed strided runs.
#include "backend/cpu/elementwise.h"
#include "tessera/primitives/elementwise.h"

namespace tessera {

namespace {

template <typename T>
void select_kernel(const array& c, const array& x, const array& y, array& out) {
  const size_t n = out.size();
  if (n == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  const bool* cp = c.data<bool>();
  const T* xp = x.data<T>();
  const T* yp = y.data<T>();
  const bool rc = c.flags().row_contiguous && c.size() == n;
  const bool rx = x.flags().row_contiguous && x.size() == n, sx = cpu::is_scalar_like(x);
  const bool ry = y.flags().row_contiguous && y.size() == n, sy = cpu::is_scalar_like(y);
  if (rc && (rx || sx) && (ry || sy)) {
    cpu::allocate_or_donate(out, {&x, &y});
    T* o = out.data<T>();
    // Compile-time scalar flags keep the inner loop free of branches on the layout.
    auto run = [&](auto x_scalar, auto y_scalar) {
      detail::parallel_for(n, cpu::kElementwiseGrain, [&, o](size_t lo, size_t hi) {
        for (size_t i = lo; i < hi; ++i) {
          const T a = decltype(x_scalar)::value ? xp[0] : xp[i];
          const T b = decltype(y_scalar)::value ? yp[0] : yp[i];
          o[i] = cp[i] ? a : b;
        }
      });
    };
    if (rx && ry) {
      run(std::false_type{}, std::false_type{});
    } else if (rx) {
      run(std::false_type{}, std::true_type{});
    } else if (ry) {
      run(std::true_type{}, std::false_type{});
    } else {
      run(std::true_type{}, std::true_type{});
    }
    return;
  }
  out.set_data(allocator::malloc(out.nbytes()));
  T* o = out.data<T>();
  auto v = cpu::collapse<4>(out.shape(), {c.strides(), x.strides(), y.strides(),
                                          detail::row_strides(out.shape())});
  detail::parallel_for(n, cpu::kElementwiseGrain, [&, o](size_t lo, size_t hi) {
    cpu::for_each_run<4>(v, lo, hi, [&](const std::array<int64_t, 4>& off, int64_t len,
                                        const std::array<int64_t, 4>& st) {
      const bool* cq = cp + off[0];
      const T* xq = xp + off[1];
      const T* yq = yp + off[2];
      T* oq = o + off[3];
      for (int64_t i = 0; i < len; ++i) oq[i] = cq[i * st[0]] ? xq[i * st[1]] : yq[i * st[2]];
    });
  });
}

}  // namespace

void Select::eval_cpu(const std::vector<array>& inputs, array& out) {
  detail::dispatch_dtype(out.dtype(), [&](auto tag) {
    select_kernel<decltype(tag)>(inputs[0], inputs[1], inputs[2], out);
  });
}

}  // namespace tessera
