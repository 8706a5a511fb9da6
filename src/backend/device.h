// The device seam: what a device other than the CPU brings, and the one place the core evaluates
// a primitive through it. A back end (a CUDA one; the tests' recording device) implements
// DeviceBackend and installs it for Device::gpu; from then on is_available(Device::gpu) holds,
// gpu streams can be made (each with a worker thread, as a CPU stream), and every primitive on
// one evaluates through the back end's eval with its allocator serving allocator::malloc.
// compile asks it (compile_hooks.h) whether fused kernels can be built there.
#pragma once

#include <vector>

#include "backend/compile_hooks.h"
#include "tessera/allocator.h"
#include "tessera/array.h"

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
};

// Install the back end of Device::gpu (nullptr: none). Install it before making gpu streams and
// remove it only when no work is queued on them; the caller keeps it alive meanwhile.
void set_gpu_backend(DeviceBackend* backend);
DeviceBackend* gpu_backend();

// The kernel of `p` on its stream's device: eval_cpu on the CPU; on Device::gpu the installed
// back end's eval, or p.eval_gpu when none is (which names the primitive in its error).
void evaluate(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs);

}  // namespace tessera::backend
