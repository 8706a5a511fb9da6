// Defaults of the Primitive interface: a primitive without a GPU kernel, a derivative or a
// batching rule says so by name instead of returning something wrong.
#include "tessera/primitive.h"

#include <sstream>
#include <stdexcept>

namespace tessera {

namespace {
[[noreturn]] void not_supported(const Primitive& p, const char* what) {
  std::ostringstream os;
  os << "[" << what << "] not implemented for the primitive ";
  p.print(os);
  throw std::invalid_argument(os.str());
}
}  // namespace

void Primitive::eval_gpu(const std::vector<array>&, std::vector<array>&) {
  std::ostringstream os;
  os << "[eval_gpu] the primitive ";
  print(os);
  os << " has no GPU kernel in this build (it computes on the CPU only); run it on a CPU stream";
  throw std::runtime_error(os.str());
}

void UnaryPrimitive::eval_gpu(const std::vector<array>& inputs, array& out) {
  std::vector<array> outputs{out};
  Primitive::eval_gpu(inputs, outputs);
}

std::vector<array> Primitive::vjp(const std::vector<array>&, const std::vector<array>&,
                                  const std::vector<int>&, const std::vector<array>&) {
  not_supported(*this, "vjp");
}

std::vector<array> Primitive::jvp(const std::vector<array>&, const std::vector<array>&,
                                  const std::vector<int>&) {
  not_supported(*this, "jvp");
}

std::pair<std::vector<array>, std::vector<int>> Primitive::vmap(const std::vector<array>&,
                                                                const std::vector<int>&) {
  not_supported(*this, "vmap");
}

std::vector<Shape> Primitive::output_shapes(const std::vector<array>&) {
  not_supported(*this, "output_shapes");
}

}  // namespace tessera
