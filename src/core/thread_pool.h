// The shared intra-op thread pool (sized to the cores, TESSERA_NUM_THREADS overrides). Kernels
// split large loops with parallel_for; small ones run inline.
#pragma once

#include <cstddef>
#include <functional>

namespace tessera::detail {

// Threads that work on one parallel_for (the caller included).
int num_threads();

// Run f(begin, end) over disjoint chunks covering [0, n). Chunks hold at least `grain` items; the
// calling thread runs one chunk itself, then every chunk no pool thread has started, and waits
// only for chunks in progress. A call from inside a chunk runs serially.
void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& f);

}  // namespace tessera::detail
