// device_info (tessera/device.h): the CPU's model name and architecture, read once.
#include <sys/utsname.h>

#include <fstream>
#include <stdexcept>
#include <string>

#include "tessera/device.h"

namespace tessera {

namespace {

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.starts_with("model name")) {
      if (auto n = line.find(": "); n != std::string::npos) return line.substr(n + 2);
    }
  }
  return "unknown";
}

std::string machine() {
  utsname u{};
  return uname(&u) == 0 ? std::string(u.machine) : "unknown";
}

}  // namespace

const DeviceInfo& device_info(const Device& d) {
  if (!is_available(d)) {
    throw std::invalid_argument(std::string("[device_info] ") +
                                (d.type == Device::gpu ? "gpu" : "cpu") + ":" +
                                std::to_string(d.index) +
                                " is not available in this build; only the CPU (index 0) is");
  }
  static const DeviceInfo info{{"device_name", cpu_model_name()}, {"architecture", machine()}};
  return info;
}

}  // namespace tessera
