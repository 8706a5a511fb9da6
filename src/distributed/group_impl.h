// The backend interface behind distributed::Group (DESIGN.md section 4). The collectives' kernels
// call it on arrays and the stream they run on (MLX's shape: a backend that queues on a device's
// stream, as NCCL does, works on the device's arrays); the host backends (ring, MPI) move the
// raw bytes of evaluated, row-contiguous buffers, which the array calls hand them by default.
// Every blocking call has a deadline and throws std::runtime_error that names the operation, its
// size and dtype, this rank, and the peer (rank and address).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "tessera/array.h"
#include "tessera/dtype.h"
#include "tessera/stream.h"

namespace tessera::distributed::detail {

enum class ReduceOp { sum, max, min };

class GroupImpl {
 public:
  virtual ~GroupImpl() = default;
  virtual int rank() = 0;
  virtual int size() = 0;
  virtual const char* backend_name() = 0;
  // Ranks with the same color form a new group, ordered by key (key < 0: current rank).
  virtual std::shared_ptr<GroupImpl> split(int color, int key) = 0;

  // `count` elements of `dtype`; `in` may equal `out` (in place). Identical result on every rank.
  virtual void all_reduce(const void* in, void* out, size_t count, Dtype dtype, ReduceOp op) = 0;
  // all_reduce(sum) divided by size(), for float16 / bfloat16 / float32 / float64 (the bits of
  // the eager `all_sum(x) / size()`). Backends that can divide each reduced block while it is in
  // cache override it; this one divides `out` afterwards.
  virtual void all_mean(const void* in, void* out, size_t count, Dtype dtype);
  // Every rank contributes `bytes` from `in`; `out` holds size() * bytes in rank order.
  virtual void all_gather(const void* in, void* out, size_t bytes) = 0;
  // `in` holds size() * count elements; rank r receives the reduction of block r in `out`.
  virtual void reduce_scatter(const void* in, void* out, size_t count, Dtype dtype,
                              ReduceOp op) = 0;
  // Point to point between any two ranks of the group.
  virtual void send(const void* in, size_t bytes, Dtype dtype, int dst) = 0;
  virtual void recv(void* out, size_t bytes, Dtype dtype, int src) = 0;
  // `buf` of root is copied to every rank's `buf`.
  virtual void broadcast(void* buf, size_t bytes, int root) = 0;
  // `in` holds size() blocks of `bytes`; block j goes to rank j; `out` block i came from rank i.
  virtual void all_to_all(const void* in, void* out, size_t bytes) = 0;
  virtual void barrier() = 0;

  // The collectives on arrays, as the primitives' kernels call them on `stream`'s worker: inputs
  // row-contiguous, outputs with their buffers set (in place: `in` and `out` share one). The
  // defaults hand the host bytes to the calls above; a device's backend overrides them.
  virtual void all_reduce(const array& in, array& out, ReduceOp op, tessera::Stream stream);
  virtual void all_mean(const array& in, array& out, tessera::Stream stream);
  virtual void all_gather(const array& in, array& out, tessera::Stream stream);
  virtual void reduce_scatter(const array& in, array& out, ReduceOp op, tessera::Stream stream);
  virtual void send(const array& in, int dst, tessera::Stream stream);
  virtual void recv(array& out, int src, tessera::Stream stream);
  virtual void broadcast(array& buf, int root, tessera::Stream stream);
  virtual void all_to_all(const array& in, array& out, tessera::Stream stream);
  virtual void barrier(tessera::Stream stream);
};

// A backend declares the byte calls it implements and keeps the array calls visible with this
// (a declaration of one overload would hide the others).
#define TESSERA_GROUP_ARRAY_CALLS                                                              \
  using GroupImpl::all_reduce;                                                                 \
  using GroupImpl::all_mean;                                                                   \
  using GroupImpl::all_gather;                                                                 \
  using GroupImpl::reduce_scatter;                                                             \
  using GroupImpl::send;                                                                       \
  using GroupImpl::recv;                                                                       \
  using GroupImpl::broadcast;                                                                  \
  using GroupImpl::all_to_all;                                                                 \
  using GroupImpl::barrier;

}  // namespace tessera::distributed::detail
