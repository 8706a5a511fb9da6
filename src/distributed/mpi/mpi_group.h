// The MPI backend (DESIGN.md section 4; MLX's behaviour in shared/reference/mlx-distributed.md
// section 3.2, with its gaps filled). libmpi is loaded at run time with dlopen, never linked:
// TESSERA_MPI_LIBNAME (or MLX_MPI_LIBNAME) names it, else the usual sonames of Open MPI and
// MPICH are tried, the one matching the launcher first. Both ABIs are spoken (Open MPI's
// handles are addresses of library globals, MPICH's are integer constants).
//
// Threads: MPI is initialised with MPI_THREAD_SERIALIZED and every call of every MPI group
// holds one process-wide lock, so the stream worker (or the caller, when eval runs inline) may
// be any thread. Collectives run on the CPU stream, as the ring's.
//
// Mismatches: unless TESSERA_MPI_CHECK=0, each collective starts with one MPI_Allreduce of a
// 64-byte description (an all_reduce of up to 32 bytes travels inside it: one MPI call in
// all), so ranks that call different operations, sizes or dtypes get an error naming each
// rank's call instead of MPI's silent truncation; send/recv carry the
// dtype in the message tag and the receiver checks the byte count. Timeouts: MPI calls cannot
// be interrupted, so a call that outlives TESSERA_DIST_TIMEOUT ends the process with a message
// naming the operation (mpirun then stops the job) instead of hanging forever.
#pragma once

#include <memory>
#include <string>

#include "distributed/group_impl.h"

namespace tessera::distributed::detail {

// Whether an MPI library can be loaded (dlopen and every symbol), without initialising MPI;
// `why` receives the reason when it cannot.
bool mpi_available(std::string* why = nullptr);

// Whether this process was started by an MPI launcher (Open MPI's mpirun, MPICH's Hydra) into
// a job of more than one process, per the environment they set.
bool started_by_mpi_launcher();

// The world group of the MPI job: nullptr when this process was not started by an MPI
// launcher (strict: an error saying so). A job that was, but whose libmpi cannot be loaded or
// initialised, is an error naming the library and the reason (not a quiet singleton).
std::shared_ptr<GroupImpl> init_mpi(bool strict);

}  // namespace tessera::distributed::detail
