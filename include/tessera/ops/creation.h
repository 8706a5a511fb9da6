// Creation and conversion ops (see tessera/ops.h).
#pragma once

#include <optional>
#include <type_traits>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {

array arange(double start, double stop, double step, Dtype dtype, StreamOrDevice s = {});
array arange(double start, double stop, double step, StreamOrDevice s = {});
array arange(double start, double stop, Dtype dtype, StreamOrDevice s = {});
array arange(double start, double stop, StreamOrDevice s = {});
array arange(double stop, Dtype dtype, StreamOrDevice s = {});
array arange(double stop, StreamOrDevice s = {});
array arange(int start, int stop, int step, StreamOrDevice s = {});
array arange(int start, int stop, StreamOrDevice s = {});
array arange(int stop, StreamOrDevice s = {});

array linspace(double start, double stop, int num = 50, Dtype dtype = float32,
               StreamOrDevice s = {});
// endpoint = false leaves `stop` out (num samples of [start, stop) spaced (stop - start) / num).
array linspace(double start, double stop, int num, bool endpoint, Dtype dtype = float32,
               StreamOrDevice s = {});

array astype(array a, Dtype dtype, StreamOrDevice s = {});
// Reinterpret the bytes of `a` as `dtype` (the last dim scales with the size ratio).
array view(const array& a, const Dtype& dtype, StreamOrDevice s = {});
array as_strided(array a, Shape shape, Strides strides, size_t offset, StreamOrDevice s = {});
array copy(array a, StreamOrDevice s = {});
// A row-contiguous array equal to `a` (allow_col_major keeps a column-major input as is).
array contiguous(const array& a, bool allow_col_major = false, StreamOrDevice s = {});

array full(Shape shape, array vals, Dtype dtype, StreamOrDevice s = {});
array full(Shape shape, array vals, StreamOrDevice s = {});
template <typename T>
array full(Shape shape, T val, Dtype dtype, StreamOrDevice s = {}) {
  return full(std::move(shape), array(val, dtype), s);
}
template <typename T>
array full(Shape shape, T val, StreamOrDevice s = {}) {
  return full(std::move(shape), array(val), s);
}
// As MLX: the shape is a's broadcast with vals', the dtype a's (or the one given).
array full_like(const array& a, array vals, Dtype dtype, StreamOrDevice s = {});
array full_like(const array& a, array vals, StreamOrDevice s = {});
template <typename T>
  requires(!std::is_same_v<std::decay_t<T>, array>)
array full_like(const array& a, T val, Dtype dtype, StreamOrDevice s = {}) {
  return full_like(a, array(val, dtype), dtype, s);
}
template <typename T>
  requires(!std::is_same_v<std::decay_t<T>, array>)
array full_like(const array& a, T val, StreamOrDevice s = {}) {
  return full_like(a, array(val, a.dtype()), s);
}
array zeros(const Shape& shape, Dtype dtype, StreamOrDevice s = {});
inline array zeros(const Shape& shape, StreamOrDevice s = {}) { return zeros(shape, float32, s); }
array zeros_like(const array& a, StreamOrDevice s = {});
array zeros_like(const array& a, Dtype dtype, StreamOrDevice s = {});
array ones(const Shape& shape, Dtype dtype, StreamOrDevice s = {});
inline array ones(const Shape& shape, StreamOrDevice s = {}) { return ones(shape, float32, s); }
array ones_like(const array& a, StreamOrDevice s = {});
array ones_like(const array& a, Dtype dtype, StreamOrDevice s = {});

array eye(int n, int m, int k, Dtype dtype, StreamOrDevice s = {});
inline array eye(int n, Dtype dtype, StreamOrDevice s = {}) { return eye(n, n, 0, dtype, s); }
inline array eye(int n, int m, StreamOrDevice s = {}) { return eye(n, m, 0, float32, s); }
inline array eye(int n, int m, int k, StreamOrDevice s = {}) { return eye(n, m, k, float32, s); }
inline array eye(int n, StreamOrDevice s = {}) { return eye(n, n, 0, float32, s); }
array identity(int n, Dtype dtype, StreamOrDevice s = {});
inline array identity(int n, StreamOrDevice s = {}) { return identity(n, float32, s); }
array tri(int n, int m, int k, Dtype type, StreamOrDevice s = {});
inline array tri(int n, Dtype type, StreamOrDevice s = {}) { return tri(n, n, 0, type, s); }
array tril(array x, int k = 0, StreamOrDevice s = {});
array triu(array x, int k = 0, StreamOrDevice s = {});


// NumPy's window functions of M points (float32): an empty array for M < 1, [1] for M == 1.
array hanning(int M, StreamOrDevice s = {});
array hamming(int M, StreamOrDevice s = {});
array bartlett(int M, StreamOrDevice s = {});
array blackman(int M, StreamOrDevice s = {});

}  // namespace tessera
