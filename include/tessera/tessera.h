// Umbrella header: the whole public C++ API, plus <iostream> so that the examples of the README
// and docs (which print arrays with std::cout) compile with this one include, as with MLX's.
#pragma once

#include <iostream>

#include "tessera/array.h"
#include "tessera/compile.h"
#include "tessera/config.h"
#include "tessera/device.h"
#include "tessera/distributed.h"
#include "tessera/dtype.h"
#include "tessera/einsum.h"
#include "tessera/export.h"
#include "tessera/fast.h"
#include "tessera/fft.h"
#include "tessera/io.h"
#include "tessera/graph_utils.h"
#include "tessera/linalg.h"
#include "tessera/memory.h"
#include "tessera/ops.h"
#include "tessera/random.h"
#include "tessera/stream.h"
#include "tessera/trace.h"
#include "tessera/transforms.h"
#include "tessera/utils.h"
