// Devices and streams: Device, DeviceType, tessera.core.cpu / gpu, default_device, new_stream,
// the stream(...) context manager, synchronize; mx.metal / mx.cuda availability queries.
#include <sstream>
#include <thread>

#include "convert.h"

namespace tessera::python {

namespace {

std::string device_repr(const Device& d) {
  std::ostringstream os;
  os << "Device(" << (d.type == Device::cpu ? "cpu" : "gpu") << ", " << d.index << ")";
  return os.str();
}

std::string stream_repr(const char* kind, const Stream& s) {
  return std::string(kind) + "(" + device_repr(s.device) + ", " + std::to_string(s.index) + ")";
}

// `with tessera.core.stream(s):` makes s (a stream or a device) the default inside the block;
// the block ends on the thread it began on (the defaults it restores are that thread's).
struct PyStreamContext {
  explicit PyStreamContext(StreamOrDevice s) : target(s) {}
  StreamOrDevice target;
  std::optional<StreamContext> ctx;
  std::thread::id owner;
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

  nb::class_<Stream>(m, "Stream", "A stream for running operations on a given device.")
      .def_ro("device", &Stream::device, "The stream's device.")
      .def("__repr__", [](const Stream& s) { return stream_repr("Stream", s); })
      .def("__eq__", [](const Stream& s, nb::handle o) {
        return nb::isinstance<Stream>(o) && s == nb::cast<Stream>(o);
      }, "other"_a.none())
      .def("__hash__", [](const Stream& s) { return s.index; });
  nb::class_<ThreadLocalStream>(
      m, "ThreadLocalStream",
      "A stream that will be unique per thread and can be used to run operations on a given "
      "device: each thread that uses it runs on a stream of its own.")
      .def_prop_ro("device", [](const ThreadLocalStream& s) { return s.device; }, "The device.")
      .def("__repr__",
           [](const ThreadLocalStream& s) { return stream_repr("ThreadLocalStream", s); })
      .def("__eq__", [](const ThreadLocalStream& s, nb::handle o) {
        return nb::isinstance<ThreadLocalStream>(o) && s == nb::cast<ThreadLocalStream>(o);
      }, "other"_a.none())
      .def("__hash__", [](const ThreadLocalStream& s) { return s.index; });
  m.def("default_stream", &default_stream, "device"_a,
        "The calling thread's default stream of a device (each thread has its own).");
  m.def("set_default_stream", &set_default_stream, "stream"_a,
        "Makes the stream the calling thread's default for its device (the default device stays).");
  m.def("new_stream", &new_stream, "device"_a,
        "Make a new stream on the given device. The stream can only be used on the thread where "
        "it was created: evaluating on it from another thread raises RuntimeError.");
  m.def("new_thread_unsafe_stream", &new_thread_unsafe_stream, "device"_a,
        "Make a new stream that can be used in any thread. Unlike new_stream, it can be passed "
        "to and evaluated on from any thread; keeping two threads from racing on it is the "
        "caller's job.");
  m.def("new_thread_local_stream", &new_thread_local_stream, "device"_a,
        "Make a new stream that will be unique per thread: one handle, and each thread that "
        "uses it gets a stream of its own.");
  m.def(
      "clear_streams",
      [] {
        reset_random_state();
        detail::compile_clear_cache();
        blocking([] { clear_streams(); });
      },
      "Call before a thread or the process ends, as MLX: waits for the work queued on the streams "
      "this thread made, restarts the implicit random key from this process's seed and empties "
      "compile's cache of traced functions. Unlike MLX's, the streams stay usable.");
  m.def(
      "synchronize",
      [](StreamOrDevice s) { blocking([&] { synchronize(to_stream(s)); }); },
      "stream"_a = nb::none(),
      "Waits until the stream's work is done (a device: its default stream; a ThreadLocalStream: "
      "this thread's; None: the default stream).");

  nb::class_<PyStreamContext>(m, "StreamContext", "Makes a stream or device the default inside a with block.")
      .def(nb::init<StreamOrDevice>(), "s"_a)
      .def("__enter__", [](PyStreamContext& c) {
        c.ctx.emplace(c.target);
        c.owner = std::this_thread::get_id();
      })
      .def("__exit__", [](PyStreamContext& c, nb::handle, nb::handle, nb::handle) {
        if (c.ctx && c.owner != std::this_thread::get_id()) {
          throw std::runtime_error(
              "[StreamContext] Destroyed in a different thread than it was constructed in: a "
              "`with stream(...)` block must end on the thread it began on");
        }
        c.ctx.reset();
      }, "exc_type"_a.none(), "exc_value"_a.none(), "traceback"_a.none());
  m.def("stream", [](StreamOrDevice s) { return new PyStreamContext(s); }, "s"_a,
        "A context manager: `with stream(s):` runs the block's operations on s (a Stream, a "
        "ThreadLocalStream, a Device) on this thread.");

  auto metal = m.def_submodule("metal", "Apple GPUs: not available in this build.");
  metal.def("is_available", [] { return false; }, "Always False: Tessera has no Metal backend.");
  auto cuda = m.def_submodule("cuda", "NVIDIA GPUs: not available in this build yet.");
  cuda.def("is_available", [] { return false; }, "False until the CUDA backend lands.");
}

}  // namespace tessera::python
