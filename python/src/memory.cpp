// The allocator's statistics and limits: get_active_memory, get_peak_memory, get_cache_memory,
// reset_peak_memory, set_memory_limit, set_cache_limit, set_wired_limit, clear_cache.
#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <string_view>

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

  m.def(
      "get_array_buffer_size",
      [](nb::args args) {
        std::set<const void*> seen;
        size_t total = 0;
        std::function<void(nb::handle)> walk = [&](nb::handle h) {
          if (nb::isinstance<array>(h)) {
            const array& a = nb::cast<const array&>(h);
            if (a.status() != array::Status::available) {
              throw std::invalid_argument("[get_array_buffer_size] Arrays must be evaluated "
                                          "before querying buffer size; call mx.eval first");
            }
            if (a.buffer() && seen.insert(a.buffer().raw_ptr()).second) total += a.buffer_size();
          } else if (nb::isinstance<nb::dict>(h)) {
            for (auto [k, v] : nb::borrow<nb::dict>(h)) walk(v);
          } else if (nb::isinstance<nb::list>(h) || nb::isinstance<nb::tuple>(h)) {
            for (nb::handle v : h) walk(v);
          }
        };
        for (nb::handle h : args) walk(h);
        return total;
      },
      "Get the size of the buffers backing arrays in bytes: each unique buffer once (a view "
      "counts its whole base buffer). Arguments are arrays or trees (dicts, lists, tuples) of "
      "arrays; other leaves are ignored. Arrays must be evaluated first.");

  // mx.metal's memory functions: MLX 0.32 keeps them as deprecated forwarders that print a
  // notice to stderr the first time each is called (not a Python warning, as MLX).
  nb::module_ metal = nb::borrow<nb::module_>(m.attr("metal"));
  for (const char* name : {"get_active_memory", "get_peak_memory", "reset_peak_memory",
                           "get_cache_memory", "set_memory_limit", "set_cache_limit",
                           "set_wired_limit", "clear_cache", "device_info"}) {
    nb::object target = m.attr(name);
    auto noticed = std::make_shared<std::atomic<bool>>(false);
    metal.attr(name) = nb::cpp_function(
        [name, target, noticed](nb::args args) -> nb::object {
          if (!noticed->exchange(true)) {
            std::fprintf(stderr, "mx.metal.%s is deprecated and will be removed in a future "
                                 "version. Use mx.%s instead.\n", name, name);
          }
          if (std::string_view(name) == "device_info") return nb::dict();  // no Metal device
          return target(*args);
        },
        nb::name(name), "Deprecated: forwards to the function of the same name in tessera.core.");
  }
  metal.def("start_capture", [](const std::string&) {}, "path"_a,
            "A Metal capture: does nothing here (no Metal device), as MLX's CPU build.");
  metal.def("stop_capture", [] {}, "Ends a Metal capture: does nothing here.");
}

}  // namespace tessera::python
