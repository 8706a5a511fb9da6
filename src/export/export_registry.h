// The registry of primitives that import_function can rebuild (tessera/export.h): for each
// class with TESSERA_STATE, the key written into files (its class name) and how to build it
// again from the parameters it wrote. Defined in export_registry.cpp.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <typeindex>
#include <unordered_map>

#include "tessera/primitive.h"

namespace tessera::export_detail {

// Reads the parameters a primitive's write_state wrote and builds it again on the stream.
using PrimitiveReader = std::function<std::shared_ptr<Primitive>(StateReader&, Stream)>;

struct Registry {
  std::unordered_map<std::type_index, std::string> keys;     // typeid of the class -> key
  std::unordered_map<std::string, PrimitiveReader> readers;  // key -> rebuild
};

const Registry& registry();

}  // namespace tessera::export_detail
