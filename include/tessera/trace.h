// Timeline trace (docs/compile.md, "Timeline trace"): a Chrome-trace / Perfetto JSON file with a
// track per stream thread and per pool thread, a slice per kernel (primitive, shapes, dtype,
// bytes) and per collective (op, bytes, peer, time waiting for peers versus moving data), and
// markers for compile's cache misses and compiler runs. TESSERA_TRACE=path.json traces the whole
// run; `tessera launch --trace DIR` writes one file per rank and a merged one.
#pragma once

#include <string>

namespace tessera {

// Starts recording; the file is written by stop_trace() (or at exit). Throws
// std::invalid_argument when a trace is already being recorded.
void start_trace(const std::string& path);
// Writes the trace started by start_trace (or TESSERA_TRACE) and stops recording; returns the
// path written, or "" when nothing was being recorded. Throws std::runtime_error naming the path
// when it cannot be written.
std::string stop_trace();
bool is_tracing();

}  // namespace tessera
