// Shape ops (see tessera/ops.h). Views share the input's buffer where the layout allows:
// transpose, swapaxes, moveaxis, expand_dims, squeeze, broadcast_to, flip, split, and reshape /
// flatten / unflatten when the strides allow. concatenate, pad, tile, repeat copy.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {

// One dim of `shape` may be -1 (inferred).
array reshape(const array& a, Shape shape, StreamOrDevice s = {});
// Merge dims [start_axis, end_axis] into one.
array flatten(const array& a, int start_axis, int end_axis = -1, StreamOrDevice s = {});
array flatten(const array& a, StreamOrDevice s = {});
// Split dim `axis` into `shape` (one entry may be -1).
array unflatten(const array& a, int axis, Shape shape, StreamOrDevice s = {});

array squeeze(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array squeeze(const array& a, int axis, StreamOrDevice s = {});
// Remove every dim of size 1.
array squeeze(const array& a, StreamOrDevice s = {});
array expand_dims(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array expand_dims(const array& a, int axis, StreamOrDevice s = {});

array transpose(const array& a, std::vector<int> axes, StreamOrDevice s = {});
inline array transpose(const array& a, std::initializer_list<int> axes, StreamOrDevice s = {}) {
  return transpose(a, std::vector<int>(axes), s);
}
// Reverse the order of the dims.
array transpose(const array& a, StreamOrDevice s = {});
array swapaxes(const array& a, int axis1, int axis2, StreamOrDevice s = {});
array moveaxis(const array& a, int source, int destination, StreamOrDevice s = {});

array broadcast_to(const array& a, const Shape& shape, StreamOrDevice s = {});
std::vector<array> broadcast_arrays(const std::vector<array>& inputs, StreamOrDevice s = {});

// Inputs are promoted to a common dtype.
array concatenate(std::vector<array> arrays, int axis, StreamOrDevice s = {});
// Concatenate the flattened inputs.
array concatenate(std::vector<array> arrays, StreamOrDevice s = {});
array stack(const std::vector<array>& arrays, int axis, StreamOrDevice s = {});
array stack(const std::vector<array>& arrays, StreamOrDevice s = {});

// `num_splits` equal parts (the axis must divide evenly).
std::vector<array> split(const array& a, int num_splits, int axis, StreamOrDevice s = {});
std::vector<array> split(const array& a, int num_splits, StreamOrDevice s = {});
// Parts [0, i0), [i0, i1), ..., [ik, n) along `axis` (indices clamp to [0, n] like NumPy).
std::vector<array> split(const array& a, const Shape& indices, int axis, StreamOrDevice s = {});
std::vector<array> split(const array& a, const Shape& indices, StreamOrDevice s = {});
// The parts along `axis`, with the axis removed.
std::vector<array> unstack(const array& a, int axis, StreamOrDevice s = {});
std::vector<array> unstack(const array& a, StreamOrDevice s = {});
// `inputs` unchanged (sharing their buffers), such that evaluating any of them evaluates
// `dependencies` first (MLX's depends: orders side effects such as a send before a recv).
// Gradients flow to `inputs` only.
std::vector<array> depends(const std::vector<array>& inputs,
                           const std::vector<array>& dependencies);
// indexing "xy" (Cartesian) or "ij" (matrix).
std::vector<array> meshgrid(const std::vector<array>& arrays, bool sparse = false,
                            const std::string& indexing = "xy", StreamOrDevice s = {});

array repeat(const array& arr, int repeats, int axis, StreamOrDevice s = {});
// Repeat the elements of the flattened array.
array repeat(const array& arr, int repeats, StreamOrDevice s = {});
array tile(const array& arr, std::vector<int> reps, StreamOrDevice s = {});

// mode is "constant" (fill with pad_value), "edge" (repeat the border element), "reflect" (mirror
// about the border element) or "symmetric" (mirror, repeating it); as NumPy, a pad longer than
// the axis keeps mirroring.
array pad(const array& a, const std::vector<int>& axes, const Shape& low_pad_size,
          const Shape& high_pad_size, const array& pad_value = array(0),
          const std::string& mode = "constant", StreamOrDevice s = {});
array pad(const array& a, const std::vector<std::pair<int, int>>& pad_width,
          const array& pad_value = array(0), const std::string& mode = "constant",
          StreamOrDevice s = {});
array pad(const array& a, const std::pair<int, int>& pad_width, const array& pad_value = array(0),
          const std::string& mode = "constant", StreamOrDevice s = {});
array pad(const array& a, int pad_width, const array& pad_value = array(0),
          const std::string& mode = "constant", StreamOrDevice s = {});

// Reverse the elements along the given axes (a view with negative strides).
array flip(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array flip(const array& a, int axis, StreamOrDevice s = {});
array flip(const array& a, StreamOrDevice s = {});

// Roll elements along axes; without axes the array is rolled as if flattened.
array roll(const array& a, int shift, StreamOrDevice s = {});
array roll(const array& a, const Shape& shift, StreamOrDevice s = {});
array roll(const array& a, int shift, int axis, StreamOrDevice s = {});
array roll(const array& a, int shift, const std::vector<int>& axes, StreamOrDevice s = {});
array roll(const array& a, const Shape& shift, int axis, StreamOrDevice s = {});
array roll(const array& a, const Shape& shift, const std::vector<int>& axes,
           StreamOrDevice s = {});

array atleast_1d(const array& a, StreamOrDevice s = {});
std::vector<array> atleast_1d(const std::vector<array>& a, StreamOrDevice s = {});
array atleast_2d(const array& a, StreamOrDevice s = {});
std::vector<array> atleast_2d(const std::vector<array>& a, StreamOrDevice s = {});
array atleast_3d(const array& a, StreamOrDevice s = {});
std::vector<array> atleast_3d(const std::vector<array>& a, StreamOrDevice s = {});


// The n-th discrete difference along `axis`: a[1:] - a[:-1], n times (n = 0: a itself).
array diff(const array& a, int n = 1, int axis = -1, StreamOrDevice s = {});

}  // namespace tessera
