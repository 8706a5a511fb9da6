// Convolutions (see tessera/ops.h), channels last as MLX: input (N, spatial..., C_in), weight
// (C_out, kernel spatial..., C_in / groups), output (N, out spatial..., C_out). Inputs of any
// floating dtype (promoted together); float16 / bfloat16 accumulate in float32.
#pragma once

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {

// The general convolution, of 1 to 3 spatial dims: output position o along a dim reads the
// input at o * stride + j * kernel_dilation - padding_lo for kernel tap j, in the input dilated
// by input_dilation (input_dilation - 1 zeros between elements) and padded with padding_lo /
// padding_hi zeros (negative padding crops that many positions of the dilated input;
// MLX crops whole input elements). flip: the kernel is reversed along every spatial
// dim (a true convolution rather than a correlation). A vector of size 1 (or empty: the default)
// applies to every spatial dim.
array conv_general(array input, array weight, std::vector<int> stride = {},
                   std::vector<int> padding_lo = {}, std::vector<int> padding_hi = {},
                   std::vector<int> kernel_dilation = {}, std::vector<int> input_dilation = {},
                   int groups = 1, bool flip = false, StreamOrDevice s = {});
// The same with one padding for both ends.
array conv_general(const array& input, const array& weight, std::vector<int> stride,
                   std::vector<int> padding, std::vector<int> kernel_dilation,
                   std::vector<int> input_dilation, int groups = 1, bool flip = false,
                   StreamOrDevice s = {});

array conv1d(const array& input, const array& weight, int stride = 1, int padding = 0,
             int dilation = 1, int groups = 1, StreamOrDevice s = {});
array conv2d(const array& input, const array& weight, const std::pair<int, int>& stride = {1, 1},
             const std::pair<int, int>& padding = {0, 0},
             const std::pair<int, int>& dilation = {1, 1}, int groups = 1, StreamOrDevice s = {});
array conv3d(const array& input, const array& weight,
             const std::tuple<int, int, int>& stride = {1, 1, 1},
             const std::tuple<int, int, int>& padding = {0, 0, 0},
             const std::tuple<int, int, int>& dilation = {1, 1, 1}, int groups = 1,
             StreamOrDevice s = {});

// Transposed convolutions (MLX's: a flipped convolution of the input dilated by `stride`),
// weight (C_out, kernel spatial..., C_in / groups); output_padding adds that many positions at
// the high end of each output dim.
array conv_transpose1d(const array& input, const array& weight, int stride = 1, int padding = 0,
                       int dilation = 1, int output_padding = 0, int groups = 1,
                       StreamOrDevice s = {});
array conv_transpose2d(const array& input, const array& weight,
                       const std::pair<int, int>& stride = {1, 1},
                       const std::pair<int, int>& padding = {0, 0},
                       const std::pair<int, int>& dilation = {1, 1},
                       const std::pair<int, int>& output_padding = {0, 0}, int groups = 1,
                       StreamOrDevice s = {});
array conv_transpose3d(const array& input, const array& weight,
                       const std::tuple<int, int, int>& stride = {1, 1, 1},
                       const std::tuple<int, int, int>& padding = {0, 0, 0},
                       const std::tuple<int, int, int>& dilation = {1, 1, 1},
                       const std::tuple<int, int, int>& output_padding = {0, 0, 0},
                       int groups = 1, StreamOrDevice s = {});

// The discrete convolution of two non-empty 1-D arrays (the shorter one is the kernel, flipped
// as in signal processing); mode "full", "same" or "valid" as NumPy's convolve.
array convolve(const array& a, const array& v, const std::string& mode = "full",
               StreamOrDevice s = {});

}  // namespace tessera
