// Primitive Load: the bytes of one tensor of a file, read when the array is evaluated (npy.h's
// lazy_tensor). load() has checked the header and that the bytes lie inside the file, so a
// tensor never used is never read, and the buffer a read fills can be donated to its consumer.
#include <stdexcept>

#include "tessera/primitive.h"
#include "io/npy.h"
#include "tessera/allocator.h"

namespace tessera::detail::io {

namespace {

class Load : public UnaryPrimitive {
 public:
  Load(Stream s, std::shared_ptr<const ByteReader> reader, std::string where, TensorBytes t)
      : UnaryPrimitive(s), reader_(std::move(reader)), where_(std::move(where)), t_(t) {}

  void eval_cpu(const std::vector<array>&, array& out) override {
    out.set_data(allocator::malloc(out.nbytes()));
    try {
      read_tensor(*reader_, t_, out.shape(), out.dtype(), out.data<uint8_t>());
    } catch (const std::exception& e) {
      // The file changed after load() checked it (truncated, replaced, an I/O error).
      throw std::runtime_error(where_ + ": reading the data failed: " + e.what());
    }
  }
  const char* name() const override { return "Load"; }

 private:
  std::shared_ptr<const ByteReader> reader_;
  std::string where_;
  TensorBytes t_;
};

}  // namespace

array lazy_tensor(std::shared_ptr<const ByteReader> r, std::string where, TensorBytes t,
                  Shape shape, Dtype dtype, StreamOrDevice s) {
  auto p = std::make_shared<Load>(to_stream(s), std::move(r), std::move(where), t);
  return array(std::move(shape), dtype, std::move(p), {});
}

}  // namespace tessera::detail::io
