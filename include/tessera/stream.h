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

Stream default_stream(Device d);
void set_default_stream(Stream s);
Stream new_stream(Device d);
std::vector<Stream> get_streams();
// Block until every task submitted to the stream so far has run. A kernel error in the work an
// async_eval put on the stream is rethrown here (the first since the last synchronize), as MLX.
void synchronize();
void synchronize(Stream s);
// As MLX's clear_streams at exit: finishes every stream's queued work.
void clear_streams();

// The last argument of every op: a stream, a device (its default stream) or nothing (the default
// device's default stream).
using StreamOrDevice = std::variant<std::monostate, Stream, Device>;
Stream to_stream(StreamOrDevice s);

}  // namespace tessera
