// Memory statistics and limits of the caching allocator (src/core/allocator.cpp).
//
// Unlike MLX's CPU backend, the memory limit is enforced: an allocation that would take the
// active bytes past it first trims the cache, then throws std::runtime_error naming the request,
// the active bytes and the limit. The limit defaults to 0.8 x physical RAM (as MLX), the cache
// limit to the memory limit.
#pragma once

#include <cstddef>

namespace tessera {

size_t get_active_memory();
size_t get_peak_memory();
void reset_peak_memory();
size_t get_cache_memory();
// Each setter returns the previous value.
size_t set_memory_limit(size_t limit);
size_t get_memory_limit();
size_t set_cache_limit(size_t limit);
void clear_cache();
// Metal only in MLX; a no-op returning 0 here.
size_t set_wired_limit(size_t limit);

}  // namespace tessera
