// A process-wide request to stop: set from a signal handler (the Python layer's SIGINT handler
// during a blocking call), it makes evaluation skip the kernels not yet started (their outputs
// get an error) and makes blocking collectives give up within ~100 ms, leaving their group
// failed (out of step with its peers). Lock-free, so async-signal-safe.
#pragma once

namespace tessera::detail {

void request_interrupt() noexcept;
bool interrupt_requested() noexcept;
void clear_interrupt() noexcept;

}  // namespace tessera::detail
