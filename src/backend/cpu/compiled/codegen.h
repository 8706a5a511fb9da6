// C++ source for a Compiled primitive's kernel (codegen.cpp), built by jit.h.
#pragma once

#include <string>

#include "tessera/primitives/compiled.h"

namespace tessera::cpu {

// How the kernel reads one input, one character per input:
//   'd' dense: row-contiguous with the output's size, read at the output's flat index;
//   's' a single value (size 1 or every stride 0), read once;
//   'r' / 'b' / 'g' strided, along the innermost dim with stride 1 / 0 / any.
// With only 'd' and 's' inputs the kernel is one flat loop; otherwise it walks the collapsed
// dims (ndim, shape, strides: one row of ndim strides per input).
std::string fused_source(const Compiled& c, const std::string& layout);

// The kernel of a CompiledReduce for flat layouts ('d' and 's' only): it reduces the value at
// the flat elements [b, e) into out[0][0], with the eager reduction's order (16 lanes combined
// pairwise, then the tail; one sequential loop below 16 elements), so its partials combine as
// the eager kernel's do.
std::string fused_reduce_source(const CompiledReduce& c, const std::string& layout);

// The kernel of a CompiledRows: rows [b, e) of length shape[0] (its inputs as their roles say,
// dense). Each reduction combines a row as the eager reduction combines a contiguous row of at
// most 2^15 elements (the eval falls back beyond), so the results equal the unfused ops'. The
// last block of a row recomputes elements it already wrote: the outputs must not share memory
// with the inputs.
std::string fused_rows_source(const CompiledRows& c);

}  // namespace tessera::cpu
