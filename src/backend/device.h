// The device seam: what a device other than the CPU brings, and the one place the core evaluates
// a primitive through it. A back end (a CUDA one; the tests' recording device) implements
// DeviceBackend and installs it for Device::gpu; from then on is_available(Device::gpu) holds,
// gpu streams can be made (each with a worker thread, as a CPU stream), and every primitive on
// one evaluates through the back end's eval with its allocator serving allocator::malloc.
// compile asks it (compile_hooks.h) whether fused kernels can be built there.
#pragma once

#include <optional>
#include <vector>

#include "backend/compile_hooks.h"
#include "tessera/allocator.h"
#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {
class Primitive;
}

namespace tessera::backend {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // Compute the outputs of `p` (a CUDA back end: p.eval_gpu). On the stream's worker thread,
  // with allocator() serving allocator::malloc.
  virtual void eval(Primitive& p, const std::vector<array>& inputs,
                    std::vector<array>& outputs) = 0;
  // The device's memory.
  virtual allocator::Allocator& allocator() = 0;
  // compile's questions (compile_hooks.h) for this device.
  virtual bool can_fuse() = 0;
  virtual KernelCounters kernel_counters() { return {}; }
  virtual void forget_kernels() {}
  // The events between streams. `input`, in this device's memory, is about to be read: by a
  // kernel of stream `reader` (a CPU stream or one of this device's), or by the host when reader
  // is empty (array::wait, so eval returning it). Return once that read is safe. A back end whose
  // eval only queues the work (CUDA) makes reader wait for the event it recorded after writing
  // input: a device-side wait on its own streams, on the host otherwise. Default: nothing to
  // wait for (eval finished the work before it returned).
  virtual void wait_for(const array& input, std::optional<Stream> reader) {}
  // Every kernel queued on `s` has finished (after synchronize(s) drained its queue).
  virtual void synchronize(Stream s) {}
};

// Install the back end of Device::gpu (nullptr: none). Install it before making gpu streams and
// remove it only when no work is queued on them; the caller keeps it alive meanwhile.
void set_gpu_backend(DeviceBackend* backend);
DeviceBackend* gpu_backend();

// The kernel of `p` on its stream's device: eval_cpu on the CPU; on Device::gpu the installed
// back end's eval, or p.eval_gpu when none is (which names the primitive in its error). Inputs
// in the device's memory are waited for first (wait_for).
void evaluate(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs);

// Before `a` is read by a kernel of `reader` (empty: the host): the installed device waits as it
// must when `a` is in its memory (DeviceBackend::wait_for); nothing otherwise.
void wait_for(const array& a, std::optional<Stream> reader);

}  // namespace tessera::backend
