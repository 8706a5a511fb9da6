// einsum and einsum_path (as MLX's mlx/einsum.h): NumPy's subscripts ("ij,jk->ik", implicit
// outputs, "..." for broadcast dims, repeated labels as diagonals). The contraction order is
// NumPy's greedy one (einsum_path returns what numpy.einsum_path returns as its path); each
// pairwise contraction is one batched matmul.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {

// {the path (operand positions contracted at each step, the result appended last), a text
// summary of the contraction}.
std::pair<std::vector<std::vector<int>>, std::string> einsum_path(
    const std::string& subscripts, const std::vector<array>& operands);
array einsum(const std::string& subscripts, const std::vector<array>& operands,
             StreamOrDevice s = {});

}  // namespace tessera
