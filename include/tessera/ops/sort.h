// Ops of the sort family (see tessera/ops.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {

}  // namespace tessera
