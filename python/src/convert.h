// Python values <-> arrays: scalars, nested lists and tuples, NumPy arrays (any dtype, strides
// or byte order), buffer-protocol objects; and back: item(), tolist(), NumPy views.
#pragma once

#include <exception>
#include <type_traits>

#include "common.h"

namespace tessera::python {

// ---- blocking calls: the GIL released, SIGINT honoured ----

namespace blocking_detail {
void enter() noexcept;
void leave() noexcept;
// After a blocking call: if SIGINT arrived, clears the engine's interrupt request and runs
// Python's handler (KeyboardInterrupt by default), throwing nb::python_error if it raised.
void check_signals();
// Before a thread takes the GIL back: false once the interpreter is exiting (the atexit hook of
// install_exit_hook ran), and the thread must then park() instead. Python would end a daemon
// thread that asks for the GIL during finalization with pthread_exit, and that unwinding is
// swallowed by nanobind's dispatcher ("FATAL: exception not rethrown": the process aborts).
bool begin_retake() noexcept;
void end_retake() noexcept;
[[noreturn]] void park() noexcept;  // waits for the process to end
}  // namespace blocking_detail

// Registers the atexit hook above: it marks the interpreter as exiting, then lets the threads
// already on their way back to the GIL take it (up to 2 s) before finalization starts.
void install_exit_hook();

// Installs (once, at import) a SIGINT handler that, while a blocking call runs, asks the engine
// to stop (core/interrupt.h) and then chains to Python's own handler.
void install_sigint_handler();

// Runs f() without the GIL. A daemon thread whose call ends while the interpreter exits waits
// there for the process to end (see begin_retake).
template <typename F>
void without_gil(F&& f) {
  PyThreadState* saved = PyEval_SaveThread();
  std::exception_ptr error;
  try {
    f();
  } catch (...) {
    error = std::current_exception();
  }
  if (!blocking_detail::begin_retake()) blocking_detail::park();
  PyEval_RestoreThread(saved);
  blocking_detail::end_retake();
  if (error) std::rethrow_exception(error);
}

// Runs f() without the GIL. A Ctrl-C meanwhile makes the engine give up within ~100 ms (the
// kernels not started yet are skipped, a waiting collective fails and leaves its group out of
// step) and is raised here as Python's handler decides (KeyboardInterrupt by default).
template <typename F>
void blocking(F&& f) {
  blocking_detail::enter();
  std::exception_ptr error;
  try {
    without_gil(f);
  } catch (...) {
    error = std::current_exception();
  }
  blocking_detail::leave();
  blocking_detail::check_signals();  // a KeyboardInterrupt replaces the engine's error
  if (error) std::rethrow_exception(error);
}

// As mx.array(obj, dtype): Python bool -> bool, int -> int32 (int64 when it does not fit),
// float -> float32, complex -> complex64; NumPy float64 / complex128 -> float32 / complex64
// (as MLX) unless `dtype` says otherwise. Ragged lists are a ValueError naming the depth.
array to_array(nb::handle obj, std::optional<Dtype> dtype = std::nullopt);

// mx.from_dlpack(obj, copy=): a copy, with the source's strides where they are non-negative
// and dense enough (a transposed or stepped view keeps its layout, as MLX); copy=False is a
// ValueError (nothing is ever shared).
array from_dlpack(nb::handle obj, std::optional<bool> copy);

// Operands of a binary op: a Python scalar takes the other operand's dtype when that is an
// array of a kind the scalar fits (an int with any number array, a float with inexact ones), as
// MLX does, so `x + 1` keeps x's dtype.
array to_array_like(nb::handle obj, const array& like);
std::pair<array, array> to_arrays(const ArrayLike& a, const ArrayLike& b);
inline array to_array(const ArrayLike& a) { return to_array(a.obj); }

// Evaluate (without the GIL) and read.
nb::object to_scalar(array a);  // a.item()
nb::object to_list(array a);    // a.tolist()

// A NumPy array that views `a`'s buffer and keeps it alive (evaluates `a` first). bfloat16 has
// no NumPy dtype: TypeError naming it.
nb::object to_numpy(array a);

}  // namespace tessera::python
