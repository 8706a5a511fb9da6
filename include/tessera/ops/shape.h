// Shape ops (see tessera/ops.h). Views share the input's buffer where the layout allows.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {

array reshape(const array& a, Shape shape, StreamOrDevice s = {});
array broadcast_to(const array& a, const Shape& shape, StreamOrDevice s = {});

}  // namespace tessera
