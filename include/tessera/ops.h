// Every array operation, as in MLX's mlx/ops.h: same names, argument order and defaults, with a
// StreamOrDevice last. Declarations are grouped by family under tessera/ops/.
#pragma once

#include "tessera/ops/conv.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/elementwise.h"
#include "tessera/ops/indexing.h"
#include "tessera/ops/quantized.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/sort.h"
