// Streams: ordered queues of work on a device. Each CPU stream owns one worker thread that runs
// its kernels in submission order (src/core/scheduler.cpp).
#pragma once

#include <tuple>
#include <variant>
#include <vector>

#include "tessera/device.h"

namespace tessera {

struct Stream {
  int index;
  Device device;
  explicit Stream(int index, Device device) : index(index), device(device) {}
  bool operator==(const Stream&) const = default;
  bool operator<(const Stream& rhs) const {
    return std::tie(device, index) < std::tie(rhs.device, rhs.index);
  }
};

// One handle that stands for a stream of each thread's own (numbered apart from Streams): each
// thread that uses it gets a new stream the first time, and that one from then on.
struct ThreadLocalStream : Stream {
  using Stream::Stream;
};

// As MLX 0.32: streams belong to threads. Each thread has its own default stream per device
// (made the first time the thread asks for it), set_default_stream sets the calling thread's,
// and a stream made by new_stream is evaluated on only by the thread that made it: evaluating
// a graph with a node on another thread's stream is a std::runtime_error naming the stream.
// A thread's streams end with the thread (their queued work still runs).
Stream default_stream(Device d);
void set_default_stream(Stream s);
Stream new_stream(Device d);
// A stream any thread may evaluate on; keeping two threads from racing on it is the caller's job.
Stream new_thread_unsafe_stream(Device d);
ThreadLocalStream new_thread_local_stream(Device d);
// The calling thread's stream behind `s` (made now if this thread has not used `s` yet).
Stream stream_from_thread_local_stream(ThreadLocalStream s);
std::vector<Stream> get_streams();
// Block until every task submitted to the stream so far has run. A kernel error in the work an
// async_eval put on the stream is rethrown here (the first since the last synchronize), as MLX.
void synchronize();
void synchronize(Stream s);
void synchronize(ThreadLocalStream s);
// As MLX's clear_streams before a thread or the process ends: finishes the queued work of the
// streams the calling thread made. Unlike MLX's, they stay usable afterwards.
void clear_streams();

// The last argument of every op: a stream, a thread-local stream (the calling thread's), a
// device (its default stream) or nothing (the default device's default stream).
using StreamOrDevice = std::variant<std::monostate, Stream, ThreadLocalStream, Device>;
Stream to_stream(StreamOrDevice s);

}  // namespace tessera
