// The registry of the GPU back end and the per-device evaluation (backend/device.h).
#include <atomic>

#include "backend/device.h"
#include "tessera/primitive.h"

namespace tessera::backend {

namespace {
std::atomic<DeviceBackend*> g_gpu{nullptr};
}  // namespace

void set_gpu_backend(DeviceBackend* backend) { g_gpu.store(backend, std::memory_order_release); }

DeviceBackend* gpu_backend() { return g_gpu.load(std::memory_order_acquire); }

void wait_for(const array& a, std::optional<Stream> reader) {
  DeviceBackend* b = gpu_backend();
  if (b != nullptr && a.buffer().owner() == &b->allocator()) b->wait_for(a, reader);
}

void evaluate(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (gpu_backend() != nullptr) {
    for (const array& in : inputs) wait_for(in, p.stream());
  }
  if (p.device().type != Device::gpu) {
    p.eval_cpu(inputs, outputs);
    return;
  }
  DeviceBackend* b = gpu_backend();
  if (b == nullptr) {
    p.eval_gpu(inputs, outputs);
    return;
  }
  allocator::ScopedAllocator device_memory(b->allocator());
  b->eval(p, inputs, outputs);
}

}  // namespace tessera::backend
