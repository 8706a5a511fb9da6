// Devices. This build computes on the CPU; the GPU type exists so MLX code compiles and so a
// later CUDA backend slots in (is_available(Device::gpu) is false until then).
#pragma once

#include <cstddef>
#include <string>
#include <tuple>
#include <unordered_map>
#include <variant>

namespace tessera {

struct Device {
  enum class DeviceType { cpu, gpu };
  static constexpr DeviceType cpu = DeviceType::cpu;
  static constexpr DeviceType gpu = DeviceType::gpu;

  Device(DeviceType type, int index = 0) : type(type), index(index) {}  // NOLINT
  DeviceType type;
  int index;

  bool operator==(const Device&) const = default;
  bool operator<(const Device& rhs) const {
    return std::tie(type, index) < std::tie(rhs.type, rhs.index);
  }
};

inline bool operator==(const Device& d, Device::DeviceType t) { return d.type == t; }

const Device& default_device();
// Throws std::invalid_argument for a device this build cannot use.
void set_default_device(const Device& d);
bool is_available(const Device& d);

// MLX's backend queries: this build has neither (its CUDA backend comes later).
namespace metal {
inline bool is_available() { return false; }
}  // namespace metal
namespace cuda {
inline bool is_available() { return false; }
}  // namespace cuda
int device_count(Device::DeviceType type);

// What a device is, as MLX's device_info: for the CPU, "device_name" (its model name) and
// "architecture" (the machine, e.g. x86_64). Throws std::invalid_argument for a device this
// build cannot use.
using DeviceInfo = std::unordered_map<std::string, std::variant<std::string, size_t>>;
const DeviceInfo& device_info(const Device& d = default_device());

}  // namespace tessera
