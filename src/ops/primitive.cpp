// Defaults of the Primitive interface: a primitive without a derivative or batching rule says
// so by name instead of returning something wrong.
#include "ops/primitive.h"

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
