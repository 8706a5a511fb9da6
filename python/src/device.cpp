// Devices and streams: Device, DeviceType, tessera.core.cpu / gpu, default_device, new_stream,
// the stream(...) context manager, synchronize; mx.metal / mx.cuda availability queries.
#include <sstream>

#include "convert.h"

namespace tessera::python {

namespace {

std::string device_repr(const Device& d) {
  std::ostringstream os;
  os << "Device(" << (d.type == Device::cpu ? "cpu" : "gpu") << ", " << d.index << ")";
  return os.str();
}

// `with tessera.core.stream(s):` makes s (a stream or a device) the default inside the block.
struct PyStreamContext {
  explicit PyStreamContext(StreamOrDevice s) : target(s) {}
  StreamOrDevice target;
  std::optional<StreamContext> ctx;
};

}  // namespace

void init_device(nb::module_& m) {
  nb::enum_<Device::DeviceType>(m, "DeviceType", "The kind of a device.")
      .value("cpu", Device::cpu)
      .value("gpu", Device::gpu);
  nb::class_<Device>(m, "Device", "A device to run operations on.")
      .def(nb::init<Device::DeviceType, int>(), "type"_a, "index"_a = 0)
      .def_ro("type", &Device::type, "The device's type.")
      .def("__repr__", &device_repr)
      .def("__eq__", [](const Device& d, nb::handle o) {
        if (nb::isinstance<Device::DeviceType>(o)) return d.type == nb::cast<Device::DeviceType>(o);
        return nb::isinstance<Device>(o) && d == nb::cast<Device>(o);
      }, "other"_a.none())
      .def("__hash__", [](const Device& d) { return static_cast<int>(d.type) * 1000 + d.index; });
  nb::implicitly_convertible<Device::DeviceType, Device>();
  m.attr("cpu") = nb::cast(Device::cpu);
  m.attr("gpu") = nb::cast(Device::gpu);
  m.def("default_device", &default_device, "The device operations run on by default.");
  m.def("set_default_device", &set_default_device, "device"_a, "Sets the default device.");
  m.def("is_available", &is_available, "device"_a, "Whether this build can run on the device.");
  m.def("device_count", &device_count, "device_type"_a, "How many devices of a type there are.");
  m.def(
      "device_info",
      [](std::optional<Device> d) {
        nb::dict out;
        for (const auto& [k, v] : device_info(d.value_or(default_device()))) {
          out[k.c_str()] = std::visit([](const auto& x) { return nb::cast(x); }, v);
        }
        return out;
      },
      "d"_a = nb::none(),
      "A dict describing the device: device_name (the CPU's model) and architecture.");

  nb::class_<Stream>(m, "Stream", "An ordered queue of work on a device.")
      .def_ro("device", &Stream::device, "The stream's device.")
      .def("__repr__", [](const Stream& s) {
        return "Stream(" + device_repr(s.device) + ", " + std::to_string(s.index) + ")";
      })
      .def("__eq__", [](const Stream& s, nb::handle o) {
        return nb::isinstance<Stream>(o) && s == nb::cast<Stream>(o);
      }, "other"_a.none())
      .def("__hash__", [](const Stream& s) { return s.index; });
  m.def("default_stream", &default_stream, "device"_a, "The default stream of a device.");
  m.def("set_default_stream", &set_default_stream, "stream"_a,
        "Makes a stream the default of its device (and that device the default).");
  m.def("new_stream", &new_stream, "device"_a, "A new stream on a device.");
  m.def(
      "clear_streams",
      [] {
        reset_random_state();
        detail::compile_clear_cache();
      },
      "As MLX's (its test runner calls it between tests): the implicit random key restarts from "
      "this process's seed and compile's cache of traced functions is emptied. Tessera's streams "
      "are not per thread, so none is destroyed.");
  m.def(
      "synchronize",
      [](StreamOrDevice s) { blocking([&] { synchronize(to_stream(s)); }); },
      "stream"_a = nb::none(),
      "Waits until the stream's work is done (a device: its default stream; None: the default "
      "stream).");

  nb::class_<PyStreamContext>(m, "StreamContext", "Makes a stream or device the default inside a with block.")
      .def(nb::init<StreamOrDevice>(), "s"_a)
      .def("__enter__", [](PyStreamContext& c) { c.ctx.emplace(c.target); })
      .def("__exit__", [](PyStreamContext& c, nb::handle, nb::handle, nb::handle) { c.ctx.reset(); },
           "exc_type"_a.none(), "exc_value"_a.none(), "traceback"_a.none());
  m.def("stream", [](StreamOrDevice s) { return new PyStreamContext(s); }, "s"_a,
        "A context manager: `with stream(s):` runs the block's operations on s.");

  auto metal = m.def_submodule("metal", "Apple GPUs: not available in this build.");
  metal.def("is_available", [] { return false; }, "Always False: Tessera has no Metal backend.");
  auto cuda = m.def_submodule("cuda", "NVIDIA GPUs: not available in this build yet.");
  cuda.def("is_available", [] { return false; }, "False until the CUDA backend lands.");
}

}  // namespace tessera::python
