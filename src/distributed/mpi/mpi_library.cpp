// Loading the MPI library (see mpi_library.h).
#include "distributed/mpi/mpi_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "tessera/config.h"

namespace tessera::distributed::detail::mpi {

namespace {

template <typename F>
bool load_fn(void* lib, const char* name, F& f, std::string& missing) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) missing += std::string(missing.empty() ? "" : ", ") + name;
  return f != nullptr;
}

template <typename H>
void load_functions(void* lib, Api<H>& a, std::string& missing) {
#define TESSERA_MPI_FN(n) load_fn(lib, "MPI_" #n, a.n, missing)
  TESSERA_MPI_FN(Init_thread);
  TESSERA_MPI_FN(Initialized);
  TESSERA_MPI_FN(Finalized);
  TESSERA_MPI_FN(Finalize);
  TESSERA_MPI_FN(Query_thread);
  TESSERA_MPI_FN(Comm_rank);
  TESSERA_MPI_FN(Comm_size);
  TESSERA_MPI_FN(Comm_dup);
  TESSERA_MPI_FN(Comm_split);
  TESSERA_MPI_FN(Comm_free);
  TESSERA_MPI_FN(Comm_set_errhandler);
  TESSERA_MPI_FN(Allreduce);
  TESSERA_MPI_FN(Allgather);
  TESSERA_MPI_FN(Reduce_scatter_block);
  TESSERA_MPI_FN(Send);
  TESSERA_MPI_FN(Recv);
  TESSERA_MPI_FN(Get_count);
  TESSERA_MPI_FN(Bcast);
  TESSERA_MPI_FN(Alltoall);
  TESSERA_MPI_FN(Barrier);
  TESSERA_MPI_FN(Op_create);
  TESSERA_MPI_FN(Op_free);
  TESSERA_MPI_FN(Type_contiguous);
  TESSERA_MPI_FN(Type_commit);
  TESSERA_MPI_FN(Type_free);
  TESSERA_MPI_FN(Error_string);
#undef TESSERA_MPI_FN
}

// Open MPI: a predefined handle is the address of a library global.
void load_open_mpi_handles(void* lib, Api<void*>& a, std::string& missing) {
  auto g = [&](const char* name, void*& h) {
    h = dlsym(lib, name);
    if (!h) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  g("ompi_mpi_comm_world", a.comm_world);
  g("ompi_mpi_errors_return", a.errors_return);
  g("ompi_mpi_byte", a.byte);
  g("ompi_mpi_c_bool", a.c_bool);
  g("ompi_mpi_uint8_t", a.u8);
  g("ompi_mpi_uint16_t", a.u16);
  g("ompi_mpi_uint32_t", a.u32);
  g("ompi_mpi_uint64_t", a.u64);
  g("ompi_mpi_int8_t", a.i8);
  g("ompi_mpi_int16_t", a.i16);
  g("ompi_mpi_int32_t", a.i32);
  g("ompi_mpi_int64_t", a.i64);
  g("ompi_mpi_float", a.f32);
  g("ompi_mpi_double", a.f64);
  g("ompi_mpi_c_float_complex", a.c64);
  g("ompi_mpi_op_sum", a.sum);
  g("ompi_mpi_op_max", a.max);
  g("ompi_mpi_op_min", a.min);
  g("ompi_mpi_op_lor", a.lor);
  g("ompi_mpi_op_land", a.land);
  a.in_place = reinterpret_cast<void*>(1);
  a.status_tag_offset = 4;  // {source, tag, error, cancelled, size_t count}
}

// MPICH (and the MPICH ABI: Intel MPI, MVAPICH): predefined handles are constants of mpi.h.
void set_mpich_handles(Api<int>& a) {
  a.comm_world = 0x44000000;
  a.errors_return = 0x54000001;
  a.byte = 0x4c00010d;
  a.c_bool = 0x4c00013f;
  a.u8 = 0x4c00013b;
  a.u16 = 0x4c00023c;
  a.u32 = 0x4c00043d;
  a.u64 = 0x4c00083e;
  a.i8 = 0x4c000137;
  a.i16 = 0x4c000238;
  a.i32 = 0x4c000439;
  a.i64 = 0x4c00083a;
  a.f32 = 0x4c00040a;
  a.f64 = 0x4c00080b;
  a.c64 = 0x4c000840;
  a.max = 0x58000001;
  a.min = 0x58000002;
  a.sum = 0x58000003;
  a.land = 0x58000005;
  a.lor = 0x58000007;
  a.in_place = reinterpret_cast<void*>(-1);
  a.status_tag_offset = 12;  // {count_lo, count_hi_and_cancelled, source, tag, error}
}

bool env_set(const char* name) {
  auto v = config::get_string(name);
  return v && !v->empty();
}

// The names to try, the launcher's MPI first: two MPIs installed side by side is common.
std::vector<std::string> candidate_names() {
  if (auto n = config::get_string("TESSERA_MPI_LIBNAME"); n && !n->empty()) return {*n};
  const std::vector<std::string> open_mpi = {"libmpi.so.40", "libmpi.so"};
  const std::vector<std::string> mpich = {"libmpich.so.12", "libmpi.so.12", "libmpich.so"};
  std::vector<std::string> out = launched_by_hydra() ? mpich : open_mpi;
  const auto& rest = launched_by_hydra() ? open_mpi : mpich;
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

// The first line of the library's version text, "" when it has no such function.
std::string library_version(void* lib) {
  auto get = reinterpret_cast<int (*)(char*, int*)>(dlsym(lib, "MPI_Get_library_version"));
  if (!get) return "";
  std::vector<char> buf(16384, '\0');  // MPI_MAX_LIBRARY_VERSION_STRING: 256 / 8192
  int len = 0;
  if (get(buf.data(), &len) != 0) return "";
  std::string v(buf.data(), std::min<size_t>(std::strlen(buf.data()), buf.size()));
  if (auto nl = v.find('\n'); nl != std::string::npos) v.resize(nl);
  while (!v.empty() && (v.back() == ' ' || v.back() == ',')) v.pop_back();
  return v;
}

Library load_library() {
  Library lib;
  std::string tried;
  for (const auto& name : candidate_names()) {
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);  // Open MPI's plugins need GLOBAL
    if (!h) {
      const char* e = dlerror();
      tried += "\n  " + name + ": " + (e ? e : "not found");
      continue;
    }
    std::string missing;
    const std::string version = library_version(h);
    if (dlsym(h, "ompi_mpi_comm_world")) {
      lib.abi = Abi::open_mpi;
      load_functions(h, lib.ompi, missing);
      load_open_mpi_handles(h, lib.ompi, missing);
    } else if (version.find("MPICH") != std::string::npos ||
               version.find("Intel") != std::string::npos ||
               version.find("MVAPICH") != std::string::npos) {
      lib.abi = Abi::mpich;
      load_functions(h, lib.mpich, missing);
      set_mpich_handles(lib.mpich);
    } else {
      tried += "\n  " + name + ": loaded, but it is neither Open MPI nor of the MPICH family (" +
               (version.empty() ? "no MPI_Get_library_version" : version) + ")";
      dlclose(h);
      continue;
    }
    if (!missing.empty()) {
      tried += "\n  " + name + ": loaded, but it lacks " + missing;
      dlclose(h);
      continue;
    }
    lib.handle = h;
    lib.name = name;
    lib.version = version;
    return lib;
  }
  lib.error = "no MPI library could be loaded; tried:" + tried +
              "\n  (install Open MPI or MPICH, or set TESSERA_MPI_LIBNAME to the library's path)";
  return lib;
}

}  // namespace

// The launchers' own connection variables, beside the rank and size: copied OMPI_* / PMI_*
// variables alone must not start MPI (it would wait for a launcher that does not exist).
bool launched_by_open_mpi() { return env_set("OMPI_COMM_WORLD_SIZE") && env_set("PMIX_RANK"); }
bool launched_by_hydra() {
  return !launched_by_open_mpi() && env_set("PMI_SIZE") && env_set("PMI_RANK") &&
         (env_set("PMI_FD") || env_set("PMI_PORT"));
}

Library& library() {
  static Library* lib = new Library(load_library());  // never unloaded: MPI outlives main()
  return *lib;
}

}  // namespace tessera::distributed::detail::mpi
