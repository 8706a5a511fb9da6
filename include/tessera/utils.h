// Printing arrays as MLX does (`array([4, 4, 4], dtype=float32)`, summarised when large).
#pragma once

#include <ostream>

#include "tessera/array.h"

namespace tessera {

// Evaluates the array if needed.
std::ostream& operator<<(std::ostream& os, array a);
std::ostream& operator<<(std::ostream& os, const Shape& s);

}  // namespace tessera
