// Reductions, scans, sorting, matrix products and the Array API aliases of tessera.core, with
// MLX's signatures.
#include <nanobind/stl/optional.h>

#include "ops_common.h"

namespace tessera::python {

using namespace ops_detail;

void init_ops_reduce(nb::module_& m) {
  // ---------------------------------------------------------------- reductions
  m.def(
      "median",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return median(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(),
      REDUCE_DOC("Median over the given axes (NaN where the input has one)."));
  m.def(
      "searchsorted",
      [](const array& seq, const ArrayLike& values, const std::string& side, StreamOrDevice s) {
        return searchsorted(seq, to_array(values.obj), side, s);
      },
      nb::arg(), nb::arg(), "side"_a = "left", nb::kw_only(), "stream"_a = nb::none(),
      "Where each value would be inserted in a sorted 1-D sequence to keep it sorted.\n\n"
      "Args:\n"
      "    sorted_sequence (array): The sorted 1-D sequence.\n"
      "    values (array): The values to place.\n"
      "    side (str, optional): ``'left'`` (before equal elements) or ``'right'``.\n\n"
      "Returns:\n"
      "    array: uint32 insertion indices, shaped like ``values``.\n");
  m.def(
      "kron", [](const array& a, const array& b, StreamOrDevice s) { return kron(a, b, s); },
      nb::arg(), nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
      "The Kronecker product of two arrays.\n\n"
      "Returns:\n"
      "    array: The Kronecker product.\n");
  m.def(
      "vecdot",
      [](const array& a, const array& b, int axis, StreamOrDevice s) { return vecdot(a, b, axis, s); },
      nb::arg(), nb::arg(), nb::kw_only(), "axis"_a = -1, "stream"_a = nb::none(),
      "The dot product of vectors along ``axis`` (the first conjugated).\n\n"
      "Returns:\n"
      "    array: The dot products.\n");
  m.def(
      "all",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return all(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), REDUCE_DOC("Logical and over the given axes."));
  m.def(
      "any",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return any(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), REDUCE_DOC("Logical or over the given axes."));
  m.def(
      "sum",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return sum(a, axes_or_all(axis, a), keepdims, s);
      },
      "array"_a, "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), REDUCE_DOC("Sum over the given axes."));
  m.def(
      "count_nonzero",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return count_nonzero(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), nb::kw_only(), "keepdims"_a = false,
      "stream"_a = nb::none(), REDUCE_DOC("Number of non-zero elements over the given axes."));
  m.def(
      "prod",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return prod(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), REDUCE_DOC("Product over the given axes."));
  m.def(
      "min",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return min(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), REDUCE_DOC("Minimum over the given axes."));
  m.def(
      "max",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return max(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), REDUCE_DOC("Maximum over the given axes."));
  m.def(
      "minmax",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        const std::vector<int> axes = axes_or_all(axis, a);
        return nb::make_tuple(min(a, axes, keepdims, s), max(a, axes, keepdims, s));
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(),
      REDUCE_DOC("The minimum and the maximum over the given axes, as the tuple (min, max): "
                 "min and max in one call."));
  m.def(
      "unique",
      [](const array& a, int size, bool return_index, bool return_inverse, bool return_counts,
         nb::object fill_value, StreamOrDevice s) -> nb::object {
        if (size < 0) {
          throw std::invalid_argument("[unique] Received negative size " + std::to_string(size) +
                                      "; size is how many entries the output has");
        }
        const int n = static_cast<int>(a.size());
        std::optional<array> fill;
        if (!fill_value.is_none()) {
          fill = to_array_like(fill_value, a);
          if (fill->size() != 1) {
            throw std::invalid_argument("[unique] Fill value must have one element, but got "
                                        "shape " + shape_str(fill->shape()) + ".");
          }
          fill = reshape(astype(*fill, a.dtype(), s), {}, s);
        }
        if (n == 0 && size > 0 && !fill) {
          throw std::invalid_argument("[unique] A fill value is required for an empty input with "
                                      "a non-zero size.");
        }
        // Sorted (stably, NaNs last), a group starts wherever a value differs from the one
        // before it (each NaN its own group; -0.0 and 0.0 one), and group g of the first `size`
        // goes to slot g; the rest, and every position but a group's first, go to slot `size`,
        // which is dropped.
        const array flat = reshape(a, {n}, s);
        const array perm = astype(argsort(flat, s), uint32, s);
        const array sorted = take(flat, perm, 0, s);
        array starts = ones({n}, bool_, s);
        if (n > 1) {
          starts = concatenate({ones({1}, bool_, s), not_equal(slice(sorted, {1}, {n}, s),
                                                               slice(sorted, {0}, {n - 1}, s), s)},
                               0, s);
        }
        const array group = subtract(cumsum(astype(starts, int32, s), 0, false, true, s),
                                     array(1), s);
        const array capped = minimum(group, array(size), s);
        const array slot = where(starts, capped, array(size), s);
        auto first_of_groups = [&](const array& per_position, const array& pad) {
          const array buffer = broadcast_to(pad, {size + 1}, s);
          const array filled = scatter(buffer, {slot}, reshape(per_position, {n, 1}, s), {0}, s);
          return slice(filled, {0}, {size}, s);
        };
        const array values = first_of_groups(
            sorted, fill ? *fill : (n > 0 ? take(sorted, 0, 0, s) : zeros({}, a.dtype(), s)));
        if (!return_index && !return_inverse && !return_counts) return nb::cast(values);
        nb::list out;
        out.append(values);
        if (return_index) {  // padding repeats the first entry, as MLX's
          out.append(first_of_groups(perm, n > 0 ? take(perm, 0, 0, s) : zeros({}, uint32, s)));
        }
        if (return_inverse) {
          const array position_group =
              astype(minimum(group, array(std::max(size - 1, 0)), s), uint32, s);
          const array inverse = n == 0 ? zeros({0}, uint32, s)
                                       : scatter(zeros({n}, uint32, s), {perm},
                                                 reshape(position_group, {n, 1}, s), {0}, s);
          out.append(reshape(inverse, a.shape(), s));
        }
        if (return_counts) {
          const array counts = scatter_add(zeros({size + 1}, int32, s), {capped},
                                           reshape(ones({n}, int32, s), {n, 1}, s), {0}, s);
          out.append(slice(counts, {0}, {size}, s));
        }
        return nb::tuple(out);
      },
      nb::arg(), "size"_a, "return_index"_a = false, "return_inverse"_a = false,
      "return_counts"_a = false, "fill_value"_a = nb::none(), nb::kw_only(),
      "stream"_a = nb::none(),
      "Returns the sorted unique elements of the flattened array, ``size`` of them: the output's "
      "shape does not depend on the values, so ``a`` is not evaluated. Entries past the last "
      "unique element hold ``fill_value`` (default: the smallest element) with a count of 0; a "
      "truncated output keeps the smallest ``size``, and ``inverse`` then points the dropped "
      "elements at the last entry. ``index`` (uint32) is each element's first position in the "
      "flattened array, ``inverse`` (uint32, the shape of ``a``) each element's entry, ``counts`` "
      "(int32) how often each occurs. Every NaN is its own element; -0.0 and 0.0 are one.\n\n"
      "Returns:\n    array, or the tuple (values, [index], [inverse], [counts]) when any is "
      "asked for.");
  m.def(
      "logsumexp",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return logsumexp(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(),
      REDUCE_DOC("log(sum(exp(a))) over the given axes, computed stably."));
  m.def(
      "mean",
      [](const array& a, const OptAxes& axis, bool keepdims, StreamOrDevice s) {
        return mean(a, axes_or_all(axis, a), keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(), REDUCE_DOC("Mean over the given axes."));
  m.def(
      "var",
      [](const array& a, const OptAxes& axis, bool keepdims, int ddof, StreamOrDevice s) {
        return var(a, axes_or_all(axis, a), keepdims, ddof, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, "ddof"_a = 0, nb::kw_only(),
      "stream"_a = nb::none(),
      REDUCE_DOC("Variance over the given axes, dividing by ``N - ddof`` (``ddof`` "
                 "defaults to 0)."));
  m.def(
      "std",
      [](const array& a, const OptAxes& axis, bool keepdims, int ddof, StreamOrDevice s) {
        return tessera::std(a, axes_or_all(axis, a), keepdims, ddof, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, "ddof"_a = 0, nb::kw_only(),
      "stream"_a = nb::none(),
      REDUCE_DOC("Standard deviation over the given axes, dividing by ``N - ddof`` "
                 "(``ddof`` defaults to 0)."));
  m.def(
      "argmin",
      [](const array& a, std::optional<int> axis, bool keepdims, StreamOrDevice s) {
        return axis ? argmin(a, *axis, keepdims, s) : argmin(a, keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(),
      "Index of the first minimum along an axis.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int, optional): The axis; ``None`` (the default) indexes the\n"
      "      flattened array.\n"
      "    keepdims (bool, optional): Keep the reduced axis. Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The uint32 indices.\n");
  m.def(
      "argmax",
      [](const array& a, std::optional<int> axis, bool keepdims, StreamOrDevice s) {
        return axis ? argmax(a, *axis, keepdims, s) : argmax(a, keepdims, s);
      },
      nb::arg(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(),
      "Index of the first maximum along an axis.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int, optional): The axis; ``None`` (the default) indexes the\n"
      "      flattened array.\n"
      "    keepdims (bool, optional): Keep the reduced axis. Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The uint32 indices.\n");
  m.def(
      "softmax",
      [](const array& a, const OptAxes& axis, bool precise, StreamOrDevice s) {
        return softmax(a, axes_or_all(axis, a), precise, s);
      },
      nb::arg(), "axis"_a = nb::none(), nb::kw_only(), "precise"_a = false, "stream"_a = nb::none(),
      "exp(a) normalised to sum to one over the given axes.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int or list(int), optional): The axes; ``None`` (the default)\n"
      "      uses every axis.\n"
      "    precise (bool, optional): Accumulate half-precision inputs in float32.\n"
      "      Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The softmax.\n");

  // ---------------------------------------------------------------- scans
  m.def(
      "cumsum",
      [](const array& a, std::optional<int> axis, bool reverse, bool inclusive,
         std::optional<Dtype> dtype, StreamOrDevice s) {
        return axis ? cumsum(a, *axis, reverse, inclusive, dtype, s)
                    : cumsum(a, reverse, inclusive, dtype, s);
      },
      nb::arg(), "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false, "inclusive"_a = true,
      "dtype"_a = nb::none(), "stream"_a = nb::none(),
      SCAN_DOC("Cumulative sum.") "    dtype (Dtype, optional): Accumulation and result dtype.\n"
                                  "\nReturns:\n    array: The running sums.\n");
  m.def(
      "cumprod",
      [](const array& a, std::optional<int> axis, bool reverse, bool inclusive,
         std::optional<Dtype> dtype, StreamOrDevice s) {
        return axis ? cumprod(a, *axis, reverse, inclusive, dtype, s)
                    : cumprod(a, reverse, inclusive, dtype, s);
      },
      nb::arg(), "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false, "inclusive"_a = true,
      "dtype"_a = nb::none(), "stream"_a = nb::none(),
      SCAN_DOC("Cumulative product.") "    dtype (Dtype, optional): Accumulation and result "
                                      "dtype.\n\nReturns:\n    array: The running products.\n");
  m.def(
      "cummax",
      [](const array& a, std::optional<int> axis, bool reverse, bool inclusive, StreamOrDevice s) {
        return axis ? cummax(a, *axis, reverse, inclusive, s) : cummax(a, reverse, inclusive, s);
      },
      nb::arg(), "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false, "inclusive"_a = true,
      "stream"_a = nb::none(),
      SCAN_DOC("Cumulative maximum.") "\nReturns:\n    array: The running maxima.\n");
  m.def(
      "cummin",
      [](const array& a, std::optional<int> axis, bool reverse, bool inclusive, StreamOrDevice s) {
        return axis ? cummin(a, *axis, reverse, inclusive, s) : cummin(a, reverse, inclusive, s);
      },
      nb::arg(), "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false, "inclusive"_a = true,
      "stream"_a = nb::none(),
      SCAN_DOC("Cumulative minimum.") "\nReturns:\n    array: The running minima.\n");
  m.def(
      "logcumsumexp",
      [](const array& a, std::optional<int> axis, bool reverse, bool inclusive,
         StreamOrDevice s) {
        return axis ? logcumsumexp(a, *axis, reverse, inclusive, s)
                    : logcumsumexp(a, reverse, inclusive, s);
      },
      nb::arg(), "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false, "inclusive"_a = true,
      "stream"_a = nb::none(),
      SCAN_DOC("Cumulative log(sum(exp(a))), computed stably.") "\nReturns:\n    array: The "
                                                                "running values.\n");

  // ---------------------------------------------------------------- sorting
  m.def(
      "sort",
      [](const array& a, std::optional<int> axis, StreamOrDevice s) {
        return axis ? sort(a, *axis, s) : sort(a, s);
      },
      nb::arg(), "axis"_a.none() = -1, nb::kw_only(), "stream"_a = nb::none(),
      "Sort an array along an axis (NaNs last).\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int or None, optional): The axis; ``None`` sorts the flattened\n"
      "      array. Default: ``-1``.\n\n"
      "Returns:\n"
      "    array: The sorted array.\n");
  m.def(
      "argsort",
      [](const array& a, std::optional<int> axis, StreamOrDevice s) {
        return axis ? argsort(a, *axis, s) : argsort(a, s);
      },
      nb::arg(), "axis"_a.none() = -1, nb::kw_only(), "stream"_a = nb::none(),
      "Indices that sort an array along an axis (a stable sort).\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    axis (int or None, optional): The axis; ``None`` sorts the flattened\n"
      "      array. Default: ``-1``.\n\n"
      "Returns:\n"
      "    array: The uint32 indices.\n");
  m.def(
      "partition",
      [](const array& a, int kth, std::optional<int> axis, StreamOrDevice s) {
        return axis ? partition(a, kth, *axis, s) : partition(a, kth, s);
      },
      nb::arg(), "kth"_a, "axis"_a.none() = -1, nb::kw_only(), "stream"_a = nb::none(),
      "Partially sort: the ``kth`` element lands where a full sort puts it, smaller\n"
      "ones before it and larger ones after, in no particular order.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    kth (int): The element index to place (negative counts from the end).\n"
      "    axis (int or None, optional): The axis; ``None`` uses the flattened\n"
      "      array. Default: ``-1``.\n\n"
      "Returns:\n"
      "    array: The partitioned array.\n");
  m.def(
      "argpartition",
      [](const array& a, int kth, std::optional<int> axis, StreamOrDevice s) {
        return axis ? argpartition(a, kth, *axis, s) : argpartition(a, kth, s);
      },
      nb::arg(), "kth"_a, "axis"_a.none() = -1, nb::kw_only(), "stream"_a = nb::none(),
      "Indices that partition an array (see :func:`partition`).\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    kth (int): The element index to place (negative counts from the end).\n"
      "    axis (int or None, optional): The axis; ``None`` uses the flattened\n"
      "      array. Default: ``-1``.\n\n"
      "Returns:\n"
      "    array: The uint32 indices.\n");
  m.def(
      "topk",
      [](const array& a, int k, std::optional<int> axis, StreamOrDevice s) {
        return axis ? topk(a, k, *axis, s) : topk(a, k, s);
      },
      nb::arg(), "k"_a, "axis"_a.none() = -1, nb::kw_only(), "stream"_a = nb::none(),
      "The ``k`` largest elements along an axis, in no particular order.\n\n"
      "Args:\n"
      "    a (array): Input array.\n"
      "    k (int): How many elements.\n"
      "    axis (int or None, optional): The axis; ``None`` uses the flattened\n"
      "      array. Default: ``-1``.\n\n"
      "Returns:\n"
      "    array: The selected elements.\n");

  // ---------------------------------------------------------------- matrix products
  m.def(
      "matmul", [](const array& a, const array& b, StreamOrDevice s) { return matmul(a, b, s); },
      nb::arg(), nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
      "Matrix product with NumPy's rules: 1-D operands are promoted to matrices\n"
      "(and the added axis removed) and leading axes broadcast.\n\n"
      "Args:\n"
      "    a (array): First operand.\n"
      "    b (array): Second operand.\n\n"
      "Returns:\n"
      "    array: The product.\n");
  m.def(
      "gather_mm",
      [](const array& a, const array& b, const std::optional<array>& lhs_indices,
         const std::optional<array>& rhs_indices, bool sorted_indices, StreamOrDevice s) {
        return gather_mm(a, b, lhs_indices, rhs_indices, sorted_indices, s);
      },
      nb::arg(), nb::arg(), "lhs_indices"_a = nb::none(), "rhs_indices"_a = nb::none(),
      nb::kw_only(), "sorted_indices"_a = false, "stream"_a = nb::none(),
      "Matrix multiplication with matrix-level gather.\n\n"
      "``lhs_indices`` and ``rhs_indices`` hold flat indices into the batch dimensions (all\n"
      "but the last two) of ``a`` and ``b``; they broadcast together, and each position\n"
      "multiplies the chosen matrices.\n\n"
      "Args:\n"
      "    a (array): Input (..., M, K).\n"
      "    b (array): Input (..., K, N).\n"
      "    lhs_indices (array, optional): Integer indices into a's matrices.\n"
      "    rhs_indices (array, optional): Integer indices into b's matrices.\n"
      "    sorted_indices (bool, optional): ``rhs_indices`` is sorted (a hint; the result\n"
      "        does not depend on it). Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The products, shaped broadcast(lhs_indices, rhs_indices) + (M, N).\n");
  m.def(
      "segmented_mm",
      [](const array& a, const array& b, const array& segments, StreamOrDevice s) {
        return segmented_mm(a, b, segments, s);
      },
      nb::arg(), nb::arg(), "segments"_a, nb::kw_only(), "stream"_a = nb::none(),
      "One matrix product per segment of the shared dimension.\n\n"
      "Args:\n"
      "    a (array): Matrix (M, K).\n"
      "    b (array): Matrix (K, N).\n"
      "    segments (array): Integer ``[start, end)`` pairs (..., 2) in ``[0, K]``.\n\n"
      "Returns:\n"
      "    array: (..., M, N): ``a[:, s0:s1] @ b[s0:s1]`` per segment.\n");
  m.def(
      "block_masked_mm",
      [](const array& a, const array& b, int block_size, const std::optional<array>& mask_out,
         const std::optional<array>& mask_lhs, const std::optional<array>& mask_rhs,
         StreamOrDevice s) {
        return block_masked_mm(a, b, block_size, mask_out, mask_lhs, mask_rhs, s);
      },
      nb::arg(), nb::arg(), "block_size"_a = 64, "mask_out"_a = nb::none(),
      "mask_lhs"_a = nb::none(), "mask_rhs"_a = nb::none(), nb::kw_only(),
      "stream"_a = nb::none(),
      "Matrix multiplication with block masking.\n\n"
      "The operands and the product are cut into ``block_size`` x ``block_size`` tiles;\n"
      "a bool mask keeps or zeroes a tile, a floating one scales it.\n\n"
      "Args:\n"
      "    a (array): Input (..., M, K).\n"
      "    b (array): Input (..., K, N).\n"
      "    block_size (int, optional): 32 or 64. Default: ``64``.\n"
      "    mask_out (array, optional): (..., ceil(M / bs), ceil(N / bs)).\n"
      "    mask_lhs (array, optional): (..., ceil(M / bs), ceil(K / bs)).\n"
      "    mask_rhs (array, optional): (..., ceil(K / bs), ceil(N / bs)).\n\n"
      "Returns:\n"
      "    array: The masked product.\n");
  m.def(
      "addmm",
      [](const array& c, const array& a, const array& b, float alpha, float beta,
         StreamOrDevice s) { return addmm(c, a, b, alpha, beta, s); },
      nb::arg(), nb::arg(), nb::arg(), "alpha"_a = 1.0f, "beta"_a = 1.0f, nb::kw_only(),
      "stream"_a = nb::none(),
      "``alpha * (a @ b) + beta * c``.\n\n"
      "Args:\n"
      "    c (array): The added array (broadcast to the product).\n"
      "    a (array): First factor.\n"
      "    b (array): Second factor.\n"
      "    alpha (float, optional): Scale of the product. Default: ``1.0``.\n"
      "    beta (float, optional): Scale of ``c``. Default: ``1.0``.\n\n"
      "Returns:\n"
      "    array: The result.\n");
  m.def(
      "inner", [](const array& a, const array& b, StreamOrDevice s) { return inner(a, b, s); },
      nb::arg(), nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
      "Inner product over the last axes of two arrays.\n\n"
      "Args:\n"
      "    a (array): First input.\n"
      "    b (array): Second input.\n\n"
      "Returns:\n"
      "    array: The inner product.\n");
  m.def(
      "outer", [](const array& a, const array& b, StreamOrDevice s) { return outer(a, b, s); },
      nb::arg(), nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
      "Outer product of two arrays (flattened first).\n\n"
      "Args:\n"
      "    a (array): First input.\n"
      "    b (array): Second input.\n\n"
      "Returns:\n"
      "    array: The 2-D outer product.\n");
  m.def(
      "tensordot",
      [](const array& a, const array& b,
         const std::variant<int, std::vector<std::vector<int>>>& axes, StreamOrDevice s) {
        if (auto* n = std::get_if<int>(&axes)) return tensordot(a, b, *n, s);
        const auto& pair = std::get<std::vector<std::vector<int>>>(axes);
        if (pair.size() != 2) {
          throw std::invalid_argument("[tensordot] axes must be a list of two lists of axes.");
        }
        return tensordot(a, b, pair[0], pair[1], s);
      },
      nb::arg(), nb::arg(), "axes"_a = 2, nb::kw_only(), "stream"_a = nb::none(),
      "Sum of products over the given axes of two arrays.\n\n"
      "Args:\n"
      "    a (array): First input.\n"
      "    b (array): Second input.\n"
      "    axes (int or list(list(int)), optional): The number of trailing axes\n"
      "      of ``a`` to contract with the leading axes of ``b``, or two lists\n"
      "      of axes to contract pairwise. Default: ``2``.\n\n"
      "Returns:\n"
      "    array: The tensor product.\n");

  // ---------------------------------------------------------------- Array API aliases
  m.attr("acos") = m.attr("arccos");
  m.attr("acosh") = m.attr("arccosh");
  m.attr("asin") = m.attr("arcsin");
  m.attr("asinh") = m.attr("arcsinh");
  m.attr("atan") = m.attr("arctan");
  m.attr("atanh") = m.attr("arctanh");
  m.attr("atan2") = m.attr("arctan2");
  m.attr("bitwise_left_shift") = m.attr("left_shift");
  m.attr("bitwise_right_shift") = m.attr("right_shift");
  m.attr("cumulative_prod") = m.attr("cumprod");
  m.attr("cumulative_sum") = m.attr("cumsum");
  m.attr("empty") = m.attr("zeros");
  m.attr("empty_like") = m.attr("zeros_like");
  m.attr("matrix_transpose") = m.attr("transpose");
  m.attr("pow") = m.attr("power");
}

}  // namespace tessera::python
