// The extension module tessera.core: MLX's mlx.core API over the C++ engine (see DESIGN.md's
// map: one binding file per area, each adding its part here).
#include "convert.h"

NB_MODULE(core, m) {
  using namespace tessera::python;
  m.doc() = "Tessera's array framework, with the API of MLX's mlx.core.";
  // Programs written for MLX read mx.__version__ to decide what the API offers: it is the MLX
  // release whose API this implements (tests/python/data/mlx_0_32_4_names.json); Tessera's own
  // version is __tessera_version__ (and tessera.__version__).
  m.attr("__version__") = "0.32.4";
  m.attr("__tessera_version__") = "0.1.0";
  init_dtype(m);
  init_device(m);
  init_array(m);
  init_ops(m);
  init_array_methods(m);
  init_transforms(m);
  init_compile(m);
  init_trace(m);
  init_random(m);
  init_linalg(m);
  init_fft(m);
  init_fast(m);
  init_memory(m);
  init_io(m);
  init_export(m);
  init_distributed(m);
  install_sigint_handler();
  install_exit_hook();
  // Arrays a program keeps to the end (globals, graphs held by custom_function rules) are
  // still alive when the interpreter finalises; nanobind's leak report would only be noise.
  nb::set_leak_warnings(false);
}
