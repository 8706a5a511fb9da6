// The device seam (src/backend/device.h) proved without a GPU: a recording device, installed as
// Device::gpu, runs the CPU kernels but keeps its own memory and notes every primitive it
// evaluates and every question compile asks it. A graph on one of its streams must go through
// all of it: a kernel that ran without the device's eval, or a buffer that came from the CPU's
// allocator, fails these tests. Like a device that only queues its kernels, it leaves the
// outputs it computed unwritten (NaN bytes) until someone waits for them (wait_for, synchronize),
// so a read that skips the events between streams reads NaN and fails too.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/device.h"
#include "distributed/group_impl.h"
#include "distributed/reduce_kernels.h"
#include "tessera/primitive.h"
#include "tessera/tessera.h"

namespace {

using namespace tessera;

// Blocks from new[], each one known until it is freed.
class RecordingAllocator final : public allocator::Allocator {
 public:
  allocator::Buffer malloc(size_t size) override {
    const size_t block = size == 0 ? 64 : (size + 63) / 64 * 64;
    char* p = new char[block];
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(p);
    ++made_;
    return owned(p, size, block);
  }
  void free(allocator::Buffer b) override {
    if (block_of(b) == 0) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_.erase(b.raw_ptr());
      held_.erase(b.raw_ptr());
    }
    delete[] static_cast<char*>(b.raw_ptr());
  }
  size_t size(allocator::Buffer b) const override { return block_of(b) ? block_of(b) : b.size(); }

  // The queued writes: `n` bytes at `p` are what the device computed; until released the block
  // holds NaN bytes. A freed block's write is dropped.
  void hold(void* p, size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    if (held_.count(p) || n == 0) return;
    auto& bytes = held_[p];
    bytes.assign(static_cast<char*>(p), static_cast<char*>(p) + n);
    std::memset(p, 0xFF, n);
  }
  void release_held() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [p, bytes] : held_) std::memcpy(p, bytes.data(), bytes.size());
    held_.clear();
  }
  size_t held() {
    std::lock_guard<std::mutex> lock(mu_);
    return held_.size();
  }

  bool owns(const void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.count(p) > 0;
  }
  size_t live() {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.size();
  }
  int made() {
    std::lock_guard<std::mutex> lock(mu_);
    return made_;
  }

 private:
  std::mutex mu_;
  std::set<const void*> live_;
  std::map<void*, std::vector<char>> held_;
  int made_ = 0;
};

class RecordingDevice final : public backend::DeviceBackend {
 public:
  void eval(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs) override {
    memory_.release_held();  // the device runs its queue in order: earlier kernels are done
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++evaluated_[p.name()];
    }
    // The CPU kernels stand in for the device's; whatever they allocate comes from here.
    p.eval_cpu(inputs, outputs);
    // The new blocks (not an input's, which an output may share or take over) stay queued.
    for (const array& o : outputs) {
      bool fresh = o.buffer().owner() == &memory_;
      for (const array& in : inputs) fresh = fresh && in.buffer().raw_ptr() != o.buffer().raw_ptr();
      if (fresh) memory_.hold(o.buffer().raw_ptr(), o.buffer().size());
    }
  }
  void wait_for(const array&, std::optional<Stream> reader) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++waits_[!reader ? "host" : reader->device == Device::cpu ? "cpu" : "gpu"];
    }
    memory_.release_held();
  }
  void synchronize(Stream) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++waits_["synchronize"];
    }
    memory_.release_held();
  }
  allocator::Allocator& allocator() override { return memory_; }
  bool can_fuse() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++fuse_questions_;
    return true;
  }
  backend::KernelCounters kernel_counters() override { return {1000, 0}; }

  int evaluated(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = evaluated_.find(name);
    return it == evaluated_.end() ? 0 : it->second;
  }
  int fuse_questions() {
    std::lock_guard<std::mutex> lock(mu_);
    return fuse_questions_;
  }
  // How often a reader waited for the device: "host", "cpu" or "gpu" streams, "synchronize".
  int waits(const std::string& reader) {
    std::lock_guard<std::mutex> lock(mu_);
    return waits_[reader];
  }
  RecordingAllocator memory_;

 private:
  std::mutex mu_;
  std::map<std::string, int> evaluated_;
  std::map<std::string, int> waits_;
  int fuse_questions_ = 0;
};

// A group of two whose other rank holds this rank's values (a sum doubles them, a gather repeats
// them). It notes what the collectives' kernels hand it: the stream and whose memory the arrays
// are in.
class MirrorGroup final : public distributed::detail::GroupImpl {
 public:
  explicit MirrorGroup(RecordingAllocator& device_memory) : device_memory_(device_memory) {}
  TESSERA_GROUP_ARRAY_CALLS
  int rank() override { return 0; }
  int size() override { return 2; }
  const char* backend_name() override { return "mirror"; }
  std::shared_ptr<GroupImpl> split(int, int) override { throw std::logic_error("not here"); }
  void all_reduce(const void* in, void* out, size_t count, Dtype dtype,
                  distributed::detail::ReduceOp op) override {
    distributed::detail::reduce_buffers(out, in, in, count, dtype, op);
  }
  void all_gather(const void* in, void* out, size_t bytes) override {
    std::memcpy(out, in, bytes);
    std::memcpy(static_cast<char*>(out) + bytes, in, bytes);
  }
  void reduce_scatter(const void*, void*, size_t, Dtype, distributed::detail::ReduceOp) override {
    throw std::logic_error("not here");
  }
  void send(const void*, size_t, Dtype, int) override { throw std::logic_error("not here"); }
  void recv(void*, size_t, Dtype, int) override { throw std::logic_error("not here"); }
  void broadcast(void*, size_t, int) override { throw std::logic_error("not here"); }
  void all_to_all(const void*, void*, size_t) override { throw std::logic_error("not here"); }
  void barrier() override {}

  void all_reduce(const array& in, array& out, distributed::detail::ReduceOp op,
                  Stream stream) override {
    note(stream, {&in, &out});
    GroupImpl::all_reduce(in, out, op, stream);
  }
  void all_gather(const array& in, array& out, Stream stream) override {
    note(stream, {&in, &out});
    GroupImpl::all_gather(in, out, stream);
  }

  // Each call: its stream's device, and whether every array it got was in the device's memory.
  std::vector<std::pair<Device::DeviceType, bool>> calls;

 private:
  void note(Stream stream, std::initializer_list<const array*> arrays) {
    bool device_memory = true;
    for (const array* a : arrays) {
      device_memory = device_memory && device_memory_.owns(a->buffer().raw_ptr());
    }
    calls.emplace_back(stream.device.type, device_memory);
  }
  RecordingAllocator& device_memory_;
};

// Installs a recording device for one test, and removes it (after its streams' work) at the end.
class Device_ : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(is_available(Device::gpu));
    backend::set_gpu_backend(&device_);
    gpu_ = new_stream(Device::gpu);
  }
  void TearDown() override {
    synchronize(*gpu_);
    backend::set_gpu_backend(nullptr);
  }
  RecordingDevice device_;
  std::optional<Stream> gpu_;
};

}  // namespace

TEST_F(Device_, AGraphOnItsStreamRunsThroughItsEvalAndItsMemory) {
  EXPECT_TRUE(is_available(Device::gpu));
  EXPECT_EQ(device_count(Device::gpu), 1);
  const Stream s = *gpu_;
  {
    array x = arange(0.0, 8.0, 1.0, float32, s);
    array y = add(exp(x, s), multiply(x, x, s), s);
    array total = sum(y, false, s);
    eval(y, total);
    EXPECT_GE(device_.evaluated("Arange"), 1);
    EXPECT_GE(device_.evaluated("Exp"), 1);
    EXPECT_GE(device_.evaluated("Multiply"), 1);
    EXPECT_GE(device_.evaluated("Add"), 1);
    EXPECT_GE(device_.evaluated("Sum"), 1);
    // Every buffer the graph computed lives in the device's memory.
    EXPECT_TRUE(device_.memory_.owns(x.data<float>()));
    EXPECT_TRUE(device_.memory_.owns(y.data<float>()));
    EXPECT_TRUE(device_.memory_.owns(total.data<float>()));
    double expect = 0;
    for (int i = 0; i < 8; ++i) {
      EXPECT_NEAR(y.data<float>()[i], std::exp(i) + i * i, 1e-3 * (std::exp(i) + i * i));
      expect += std::exp(i) + i * i;
    }
    EXPECT_NEAR(total.item<float>(), expect, 1e-5 * expect);
  }
  // Freed buffers go back to the device's allocator (not the CPU's).
  EXPECT_EQ(device_.memory_.live(), 0u);
}

TEST_F(Device_, CpuWorkStaysOnTheCpuAndMeetsTheDevicesWorkByValue) {
  array a = full({4}, 2.0f);  // the CPU's
  eval(a);
  const int made = device_.memory_.made();
  array b = multiply(a, a);  // on the CPU stream
  array c = add(b, a, *gpu_);  // reads the CPU's array on the device
  eval(c);
  EXPECT_EQ(device_.evaluated("Multiply"), 0);
  EXPECT_EQ(device_.evaluated("Add"), 1);
  EXPECT_FALSE(device_.memory_.owns(b.data<float>()));
  EXPECT_TRUE(device_.memory_.owns(c.data<float>()));
  EXPECT_EQ(device_.memory_.made(), made + 1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.data<float>()[i], 6.0f);
}

TEST_F(Device_, CompileAsksTheDeviceAndItsFusedKernelsRunThere) {
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{exp(in[0] * in[1] + 1.0f)};
  };
  auto cf = compile(f);
  std::optional<array> result;
  {
    StreamContext on_device(*gpu_);
    array x = full({16}, 0.5f);
    array y = full({16}, 2.0f);
    result = cf({x, y})[0];
    eval(*result);
  }
  const array& out = *result;
  EXPECT_GE(device_.fuse_questions(), 1);
  EXPECT_GE(device_.evaluated("Compiled"), 1);
  EXPECT_EQ(device_.evaluated("Exp"), 0);  // fused, not run one by one
  EXPECT_TRUE(device_.memory_.owns(out.data<float>()));
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(out.data<float>()[i], std::exp(2.0f), 1e-5);
  // The device's counters join the CPU's (its 1000 builds).
  EXPECT_GE(detail::compile_stats().kernel_builds, 1000u);
}

TEST_F(Device_, GradientsOfWorkOnTheDeviceRunThere) {
  const Stream s = *gpu_;
  auto g = grad([s](const array& x) { return sum(multiply(x, sin(x, s), s), false, s); });
  array x = full({3}, 1.0f, s);
  array dx = g(x);
  eval(dx);
  EXPECT_GE(device_.evaluated("Cos"), 1);
  EXPECT_TRUE(device_.memory_.owns(dx.data<float>()));
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(dx.data<float>()[i], std::sin(1.0f) + std::cos(1.0f), 1e-6);
  }
}

TEST_F(Device_, ItsOutputsAreReadOnlyAfterWaitingForTheDevice) {
  const Stream s = *gpu_;
  array x = full({64}, 1.5f, s);  // held here, so exp writes a new block (not x's, donated)
  array y = exp(x, s);
  async_eval(y);
  // The device's worker ran the kernel and left its output queued (unwritten): what a CPU
  // kernel or the host would read without waiting for the device.
  for (int i = 0; i < 5000 && device_.memory_.held() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GT(device_.memory_.held(), 0u);
  ASSERT_TRUE(std::isnan(y.data<float>()[0]));
  // A kernel of a CPU stream reading it waits for the device first.
  const int cpu_waits = device_.waits("cpu");
  array z = add(y, array(1.0f));
  eval(z);
  EXPECT_GT(device_.waits("cpu"), cpu_waits);
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(z.data<float>()[i], std::exp(1.5f) + 1.0f);

  // The host waits in eval (array::wait) and in synchronize.
  array w = sqrt(full({8}, 4.0f, s), s);
  const int host_waits = device_.waits("host");
  eval(w);
  EXPECT_GT(device_.waits("host"), host_waits);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(w.data<float>()[i], 2.0f);
  array v = negative(full({8}, 3.0f, s), s);
  async_eval(v);
  synchronize(s);
  EXPECT_GE(device_.waits("synchronize"), 1);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(v.data<float>()[i], -3.0f);
}

TEST_F(Device_, CollectivesOnItsStreamRunThereOnItsArrays) {
  auto mirror = std::make_shared<MirrorGroup>(device_.memory_);
  distributed::Group group(mirror);
  const Stream s = *gpu_;
  array x = full({16}, 1.25f, s);
  array total = distributed::all_sum(x, group, s);
  array both = distributed::all_gather(x, group, s);
  eval(total, both);
  EXPECT_EQ(device_.evaluated("Sum AllReduce"), 1);
  EXPECT_EQ(device_.evaluated("AllGather"), 1);
  ASSERT_EQ(mirror->calls.size(), 2u);
  for (auto& [device, in_device_memory] : mirror->calls) {
    EXPECT_EQ(device, Device::gpu);
    EXPECT_TRUE(in_device_memory);
  }
  ASSERT_EQ(both.shape(), Shape({32}));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(total.data<float>()[i], 2.5f);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(both.data<float>()[i], 1.25f);
}

TEST(DeviceSeam, WithoutABackEndTheGpuIsUnavailableAndSaysSo) {
  backend::set_gpu_backend(nullptr);
  EXPECT_FALSE(is_available(Device::gpu));
  EXPECT_EQ(device_count(Device::gpu), 0);
  EXPECT_THROW(new_stream(Device::gpu), std::invalid_argument);
}
