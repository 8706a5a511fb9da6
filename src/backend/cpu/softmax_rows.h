// One row of a softmax in float32, as attention's kernels (fast.cpp, attention_decode.cpp) run it
// block by block: the row's maximum, then its exponentials and their sum.
#pragma once

namespace tessera::cpu {

// The largest of y[0..n) and m (16 lane maxima: one dependency chain per lane, not per value).
float row_max(const float* y, int n, float m);

// y[j] = exp(y[j] - m) for j < n; returns their sum (16 lane sums, then those in order). One
// body, compiled once per instruction set (TESSERA_CPU_ISA's choice): the exponentials are most
// of attention's arithmetic besides its two products.
float exp_shift_sum(float* y, int n, float m);

}  // namespace tessera::cpu
