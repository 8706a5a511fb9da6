// The primitive classes a program may name, as MLX's mlx/primitives.h: to inspect a graph
// (typeid(out.primitive()) == typeid(Exp), a Reduce's type and axes, a Compiled node's program),
// or to build a node directly (array(shape, uint32, std::make_shared<ArgReduce>(s, ...), {x})).
// The elementwise family (Abs ... LogicalOr), the reduce family (Reduce, ArgReduce, Scan,
// Softmax, LogSumExp) and compile's Compiled. The other families are declared in src/ops/ and
// become public the same way, by moving their header under tessera/primitives/.
// A new primitive of one's own needs only tessera/primitive.h.
#pragma once

#include "tessera/primitive.h"
#include "tessera/primitives/compiled.h"
#include "tessera/primitives/elementwise.h"
#include "tessera/primitives/reduce.h"
