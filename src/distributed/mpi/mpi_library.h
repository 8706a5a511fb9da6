// The MPI library as the MPI backend sees it (mpi_group.h): loaded with dlopen at run time,
// its functions typed with the handle type of its ABI (H = void* for Open MPI, whose handles are
// the addresses of library globals; int for MPICH and its derivatives, whose handles are the
// constants of its mpi.h), and its predefined handles. Nothing here initialises MPI.
#pragma once

#include <cstddef>
#include <string>

namespace tessera::distributed::detail::mpi {

template <typename H>
using UserFn = void (*)(void* in, void* inout, int* len, H* type);

template <typename H>
struct Api {
  int (*Init_thread)(int*, char***, int, int*);
  int (*Initialized)(int*);
  int (*Finalized)(int*);
  int (*Finalize)();
  int (*Query_thread)(int*);
  int (*Comm_rank)(H, int*);
  int (*Comm_size)(H, int*);
  int (*Comm_dup)(H, H*);
  int (*Comm_split)(H, int, int, H*);
  int (*Comm_free)(H*);
  int (*Comm_set_errhandler)(H, H);
  int (*Allreduce)(const void*, void*, int, H, H, H);
  int (*Allgather)(const void*, int, H, void*, int, H, H);
  int (*Reduce_scatter_block)(const void*, void*, int, H, H, H);
  int (*Send)(const void*, int, H, int, int, H);
  int (*Recv)(void*, int, H, int, int, H, void*);
  int (*Get_count)(const void*, H, int*);
  int (*Bcast)(void*, int, H, int, H);
  int (*Alltoall)(const void*, int, H, void*, int, H, H);
  int (*Barrier)(H);
  int (*Op_create)(UserFn<H>, int, H*);
  int (*Op_free)(H*);
  int (*Type_contiguous)(int, H, H*);
  int (*Type_commit)(H*);
  int (*Type_free)(H*);
  int (*Error_string)(int, char*, int*);

  H comm_world{}, errors_return{};
  H byte{}, c_bool{}, u8{}, u16{}, u32{}, u64{}, i8{}, i16{}, i32{}, i64{}, f32{}, f64{}, c64{};
  H sum{}, max{}, min{}, lor{}, land{};
  void* in_place = nullptr;
  size_t status_tag_offset = 0;  // where MPI_Status holds MPI_TAG
};

constexpr int kThreadSerialized = 2;  // MPI_THREAD_SERIALIZED in both ABIs

enum class Abi { open_mpi, mpich };

struct Library {
  void* handle = nullptr;
  std::string name;     // what dlopen was given
  std::string version;  // MPI_Get_library_version's first line
  Abi abi = Abi::open_mpi;
  Api<void*> ompi{};
  Api<int> mpich{};
  std::string error;  // why no MPI is usable ("" when one is)
};

// The environment of a job that Open MPI's mpirun (OMPI_COMM_WORLD_* with PMIX_RANK) or MPICH's
// Hydra (PMI_* with PMI_FD / PMI_PORT) started: copied variables alone do not count.
bool launched_by_open_mpi();
bool launched_by_hydra();

// The process's MPI library: the first of TESSERA_MPI_LIBNAME, else the usual sonames (the
// launcher's own MPI first) that loads with every symbol; `error` says why when none does.
// Loaded once, never unloaded (MPI outlives main()).
Library& library();

}  // namespace tessera::distributed::detail::mpi
