// The extension module tessera.core: MLX's mlx.core API over the C++ engine (see DESIGN.md's
// map: one binding file per area, each adding its part here).
#include "convert.h"

NB_MODULE(core, m) {
  using namespace tessera::python;
  m.doc() = "Tessera's array framework, with the API of MLX's mlx.core.";
  m.attr("__version__") = "0.1.0";
  init_dtype(m);
  init_device(m);
  init_array(m);
  init_ops(m);
  init_transforms(m);
  init_compile(m);
  init_trace(m);
  init_random(m);
  init_linalg(m);
  init_fft(m);
  init_fast(m);
  init_memory(m);
  init_io(m);
  init_distributed(m);
  install_sigint_handler();
  install_exit_hook();
  // Arrays a program keeps to the end (globals, graphs held by custom_function rules) are
  // still alive when the interpreter finalises; nanobind's leak report would only be noise.
  nb::set_leak_warnings(false);
}
