// Shape ops composed from the shape primitives: pad (the Pad primitive for "constant", split +
// broadcast_to + concatenate for "edge", take for "reflect" / "symmetric"), repeat, tile, roll, meshgrid, atleast_*d. Their
// derivatives come from the primitives they are built of.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <stdexcept>

#include "ops/shape.h"
#include "ops/utils.h"
#include "tessera/ops.h"

namespace tessera {

// ---- pad ----

namespace {

array edge_pad(array x, const std::vector<int>& axes, const Shape& low, const Shape& high,
               StreamOrDevice s) {
  for (size_t i = 0; i < axes.size(); ++i) {
    const int ax = axes[i];
    const int n = x.shape()[ax];
    if (low[i] == 0 && high[i] == 0) continue;
    if (n == 0) {
      throw std::invalid_argument("[pad] cannot pad the empty axis " + std::to_string(ax) +
                                  " of shape " + detail::shape_str(x.shape()) +
                                  " in \"edge\" mode");
    }
    std::vector<array> parts;
    if (low[i] > 0) {
      Shape sh = x.shape();
      sh[ax] = low[i];
      parts.push_back(broadcast_to(split(x, Shape{1}, ax, s)[0], sh, s));
    }
    parts.push_back(x);
    if (high[i] > 0) {
      Shape sh = x.shape();
      sh[ax] = high[i];
      parts.push_back(broadcast_to(split(x, Shape{n - 1}, ax, s)[1], sh, s));
    }
    x = concatenate(std::move(parts), ax, s);
  }
  return x;
}

// "reflect" mirrors about the edge element (period 2(n - 1)), "symmetric" repeats it (period
// 2n); pads longer than the axis keep mirroring, as NumPy does. Built as take() of an index
// vector per axis, so the derivative comes from take.
array mirror_pad(array x, const std::vector<int>& axes, const Shape& low, const Shape& high,
                 bool symmetric, StreamOrDevice s) {
  for (size_t i = 0; i < axes.size(); ++i) {
    const int ax = axes[i];
    const int64_t n = x.shape()[ax];
    if (low[i] == 0 && high[i] == 0) continue;
    if (n == 0) {
      throw std::invalid_argument("[pad] cannot pad the empty axis " + std::to_string(ax) +
                                  " of shape " + detail::shape_str(x.shape()) + " in \"" +
                                  (symmetric ? "symmetric" : "reflect") + "\" mode");
    }
    const int64_t period = symmetric ? 2 * n : std::max<int64_t>(2 * (n - 1), 1);
    const int64_t total = n + low[i] + high[i];
    std::vector<int32_t> idx(static_cast<size_t>(total));
    for (int64_t p = 0; p < total; ++p) {
      const int64_t m = ((p - low[i]) % period + period) % period;
      idx[static_cast<size_t>(p)] =
          static_cast<int32_t>(m < n ? m : (symmetric ? period - 1 - m : period - m));
    }
    x = take(x, array(idx.begin(), Shape{static_cast<int32_t>(total)}, int32), ax, s);
  }
  return x;
}

}  // namespace

array pad(const array& a, const std::vector<int>& axes, const Shape& low_pad_size,
          const Shape& high_pad_size, const array& pad_value, const std::string& mode,
          StreamOrDevice s) {
  if (axes.size() != low_pad_size.size() || axes.size() != high_pad_size.size()) {
    throw std::invalid_argument("[pad] got " + std::to_string(axes.size()) + " axes but " +
                                std::to_string(low_pad_size.size()) + " low and " +
                                std::to_string(high_pad_size.size()) + " high padding sizes");
  }
  const int ndim = static_cast<int>(a.ndim());
  std::vector<int> norm(axes.size());
  std::vector<bool> seen(ndim, false);
  Shape out_shape = a.shape();
  for (size_t i = 0; i < axes.size(); ++i) {
    norm[i] = detail::normalize_axis("pad", axes[i], ndim);
    if (seen[norm[i]]) {
      throw std::invalid_argument("[pad] repeated axis " + std::to_string(axes[i]));
    }
    seen[norm[i]] = true;
    if (low_pad_size[i] < 0 || high_pad_size[i] < 0) {
      throw std::invalid_argument("[pad] padding sizes must be non-negative, got (" +
                                  std::to_string(low_pad_size[i]) + ", " +
                                  std::to_string(high_pad_size[i]) + ") for axis " +
                                  std::to_string(axes[i]));
    }
    int64_t n = static_cast<int64_t>(out_shape[norm[i]]) + low_pad_size[i] + high_pad_size[i];
    out_shape[norm[i]] = detail::checked_dim("pad", n, "padded axis " + std::to_string(axes[i]));
  }
  if (mode == "constant") {
    if (pad_value.size() != 1) {
      throw std::invalid_argument("[pad] pad_value must hold a single value, got shape " +
                                  detail::shape_str(pad_value.shape()));
    }
    array v = astype(reshape(pad_value, Shape{}, s), a.dtype(), s);
    return array(std::move(out_shape), a.dtype(),
                 std::make_shared<Pad>(to_stream(s), std::move(norm), low_pad_size,
                                       high_pad_size),
                 {a, std::move(v)});
  }
  if (mode == "edge") return edge_pad(a, norm, low_pad_size, high_pad_size, s);
  if (mode == "reflect" || mode == "symmetric") {
    return mirror_pad(a, norm, low_pad_size, high_pad_size, mode == "symmetric", s);
  }
  throw std::invalid_argument("[pad] invalid mode \"" + mode +
                              "\"; expected \"constant\", \"edge\", \"reflect\" or \"symmetric\"");
}

array pad(const array& a, const std::vector<std::pair<int, int>>& pad_width,
          const array& pad_value, const std::string& mode, StreamOrDevice s) {
  // NumPy: a single pair applies to every axis.
  if (pad_width.size() == 1 && a.ndim() != 1) {
    return pad(a, pad_width[0], pad_value, mode, s);
  }
  if (pad_width.size() != a.ndim()) {
    throw std::invalid_argument("[pad] got " + std::to_string(pad_width.size()) +
                                " (low, high) pairs for an array with " +
                                std::to_string(a.ndim()) + " dimensions");
  }
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  Shape low, high;
  for (auto& [l, h] : pad_width) {
    low.push_back(l);
    high.push_back(h);
  }
  return pad(a, axes, low, high, pad_value, mode, s);
}

array pad(const array& a, const std::pair<int, int>& pad_width, const array& pad_value,
          const std::string& mode, StreamOrDevice s) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  return pad(a, axes, Shape(a.ndim(), pad_width.first), Shape(a.ndim(), pad_width.second),
             pad_value, mode, s);
}

array pad(const array& a, int pad_width, const array& pad_value, const std::string& mode,
          StreamOrDevice s) {
  return pad(a, std::pair<int, int>{pad_width, pad_width}, pad_value, mode, s);
}

// ---- repeat / tile ----

array repeat(const array& arr, int repeats, int axis, StreamOrDevice s) {
  const int ax = detail::normalize_axis("repeat", axis, static_cast<int>(arr.ndim()));
  if (repeats < 0) {
    throw std::invalid_argument("[repeat] repeats must be non-negative, got " +
                                std::to_string(repeats));
  }
  if (repeats == 1) return arr;
  Shape shape = arr.shape();
  const int32_t n = detail::checked_dim("repeat", static_cast<int64_t>(shape[ax]) * repeats,
                                        "the repeated axis");
  // (.., n, ..) -> (.., n, 1, ..) -> broadcast (.., n, r, ..) -> reshape (.., n*r, ..) (copies).
  Shape wide = shape;
  wide.insert(wide.begin() + ax + 1, repeats);
  array out = broadcast_to(expand_dims(arr, ax + 1, s), wide, s);
  shape[ax] = n;
  return reshape(out, std::move(shape), s);
}

array repeat(const array& arr, int repeats, StreamOrDevice s) {
  return repeat(flatten(arr, s), repeats, 0, s);
}

array tile(const array& arr, std::vector<int> reps, StreamOrDevice s) {
  for (int r : reps) {
    if (r < 0) {
      std::string m;
      for (size_t i = 0; i < reps.size(); ++i) {
        if (i) m += ",";
        m += std::to_string(reps[i]);
      }
      throw std::invalid_argument("[tile] reps must be non-negative, got (" + m + ")");
    }
  }
  Shape shape = arr.shape();
  if (reps.size() < shape.size()) reps.insert(reps.begin(), shape.size() - reps.size(), 1);
  if (shape.size() < reps.size()) shape.insert(shape.begin(), reps.size() - shape.size(), 1);
  // Each dim n with reps r becomes (1, n) broadcast to (r, n), then merged into r*n.
  Shape expanded, wide, final_shape;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (reps[i] != 1) {
      expanded.push_back(1);
      wide.push_back(reps[i]);
    }
    expanded.push_back(shape[i]);
    wide.push_back(shape[i]);
    final_shape.push_back(detail::checked_dim("tile", static_cast<int64_t>(reps[i]) * shape[i],
                                              "tiled axis " + std::to_string(i)));
  }
  array x = reshape(arr, std::move(expanded), s);
  x = broadcast_to(x, wide, s);
  return reshape(x, std::move(final_shape), s);
}

// ---- roll ----

array roll(const array& a, const Shape& shift, const std::vector<int>& axes, StreamOrDevice s) {
  if (axes.empty()) return a;
  if (shift.size() < axes.size()) {
    throw std::invalid_argument("[roll] need one shift per axis, got " +
                                std::to_string(shift.size()) + " shifts for " +
                                std::to_string(axes.size()) + " axes");
  }
  array result = a;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int ax = detail::normalize_axis("roll", axes[i], static_cast<int>(a.ndim()));
    const int64_t n = a.shape()[ax];
    if (n == 0) continue;
    int64_t sh = static_cast<int64_t>(shift[i]) % n;
    if (sh < 0) sh += n;
    if (sh == 0) continue;
    auto parts = split(result, Shape{static_cast<int32_t>(n - sh)}, ax, s);
    result = concatenate({parts[1], parts[0]}, ax, s);
  }
  return result;
}

array roll(const array& a, int shift, StreamOrDevice s) {
  Shape shape = a.shape();
  return reshape(roll(flatten(a, s), Shape{shift}, std::vector<int>{0}, s), std::move(shape), s);
}

// The total of several shifts along one axis (MLX: an overflow_error when it leaves 32 bits).
int32_t total_shift(const Shape& shift) {
  int64_t total = 0;
  for (int v : shift) total += v;
  return detail::checked_dim("roll", total, "the sum of the shifts");
}

array roll(const array& a, const Shape& shift, StreamOrDevice s) {
  return roll(a, total_shift(shift), s);
}

array roll(const array& a, int shift, int axis, StreamOrDevice s) {
  return roll(a, Shape{shift}, std::vector<int>{axis}, s);
}

array roll(const array& a, int shift, const std::vector<int>& axes, StreamOrDevice s) {
  return roll(a, Shape(axes.size(), shift), axes, s);
}

array roll(const array& a, const Shape& shift, int axis, StreamOrDevice s) {
  return roll(a, Shape{total_shift(shift)}, std::vector<int>{axis}, s);
}

// ---- meshgrid ----

std::vector<array> meshgrid(const std::vector<array>& arrays, bool sparse,
                            const std::string& indexing, StreamOrDevice s) {
  if (indexing != "xy" && indexing != "ij") {
    throw std::invalid_argument("[meshgrid] indexing must be \"xy\" or \"ij\", got \"" +
                                indexing + "\"");
  }
  const size_t n = arrays.size();
  std::vector<array> out;
  for (size_t i = 0; i < n; ++i) {
    Shape shape(n, 1);
    shape[i] = -1;
    out.push_back(reshape(arrays[i], std::move(shape), s));
  }
  if (indexing == "xy" && n > 1) {
    // Cartesian: the first two outputs vary along dims 1 and 0.
    Shape shape(n, 1);
    shape[1] = -1;
    out[0] = reshape(arrays[0], shape, s);
    shape[1] = 1;
    shape[0] = -1;
    out[1] = reshape(arrays[1], std::move(shape), s);
  }
  if (!sparse) out = broadcast_arrays(out, s);
  return out;
}

// ---- atleast_*d ----

array atleast_1d(const array& a, StreamOrDevice s) {
  return a.ndim() == 0 ? reshape(a, Shape{1}, s) : a;
}

array atleast_2d(const array& a, StreamOrDevice s) {
  switch (a.ndim()) {
    case 0: return reshape(a, Shape{1, 1}, s);
    case 1: return reshape(a, Shape{1, a.shape()[0]}, s);
    default: return a;
  }
}

array atleast_3d(const array& a, StreamOrDevice s) {
  switch (a.ndim()) {
    case 0: return reshape(a, Shape{1, 1, 1}, s);
    case 1: return reshape(a, Shape{1, a.shape()[0], 1}, s);
    case 2: return reshape(a, Shape{a.shape()[0], a.shape()[1], 1}, s);
    default: return a;
  }
}

std::vector<array> atleast_1d(const std::vector<array>& a, StreamOrDevice s) {
  std::vector<array> out;
  for (const auto& x : a) out.push_back(atleast_1d(x, s));
  return out;
}

std::vector<array> atleast_2d(const std::vector<array>& a, StreamOrDevice s) {
  std::vector<array> out;
  for (const auto& x : a) out.push_back(atleast_2d(x, s));
  return out;
}

std::vector<array> atleast_3d(const std::vector<array>& a, StreamOrDevice s) {
  std::vector<array> out;
  for (const auto& x : a) out.push_back(atleast_3d(x, s));
  return out;
}


array diff(const array& a, int n, int axis, StreamOrDevice s) {
  if (a.ndim() == 0) throw std::invalid_argument("[diff] needs an array of 1 or more dims");
  const int ax = detail::normalize_axis("diff", axis, static_cast<int>(a.ndim()));
  if (n < 0) throw std::invalid_argument("[diff] order n must be non-negative; got " + std::to_string(n));
  array x = a;
  for (int i = 0; i < n && x.shape(ax) > 0; ++i) {
    Shape lo(x.ndim(), 0), hi = x.shape(), stop = x.shape();
    lo[ax] = 1;
    stop[ax] = x.shape(ax) - 1;
    x = subtract(slice(x, lo, hi, s), slice(x, Shape(x.ndim(), 0), stop, s), s);
  }
  return x;
}

}  // namespace tessera
