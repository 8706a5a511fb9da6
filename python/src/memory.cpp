// The allocator's statistics and limits: get_active_memory, get_peak_memory, get_cache_memory,
// reset_peak_memory, set_memory_limit, set_cache_limit, set_wired_limit, clear_cache.
#include "convert.h"

namespace tessera::python {

void init_memory(nb::module_& m) {
  m.def("get_active_memory", &get_active_memory, "Bytes held by live arrays.");
  m.def("get_peak_memory", &get_peak_memory, "The most bytes held at once since the last reset.");
  m.def("reset_peak_memory", &reset_peak_memory, "Restarts the peak count from the current use.");
  m.def("get_cache_memory", &get_cache_memory, "Bytes kept in the allocator's cache for reuse.");
  m.def("get_memory_limit", &get_memory_limit, "The limit on active plus cached bytes.");
  m.def("set_memory_limit", &set_memory_limit, "limit"_a,
        "Sets the memory limit in bytes; returns the previous one. An allocation past it first "
        "empties the cache, then raises RuntimeError naming the request and the limit.");
  m.def("set_cache_limit", &set_cache_limit, "limit"_a,
        "Sets how many bytes the cache may keep (0 disables it); returns the previous limit.");
  m.def("set_wired_limit", &set_wired_limit, "limit"_a,
        "Accepted for MLX compatibility: there is no wired memory here; returns 0.");
  m.def("clear_cache", &clear_cache, "Returns the cache's memory to the system.");
}

}  // namespace tessera::python
