// Saving and loading arrays: NumPy .npy and .npz, and safetensors, with MLX's C++ names
// (mlx/io.h). Loaded arrays are evaluated; saving evaluates its inputs. See docs/io.md.
//
// Every file is validated before any array data is read. A file that is truncated, corrupt or
// uses something we do not support throws std::invalid_argument naming the file, the entry or
// tensor, and what is wrong. A file that cannot be opened throws std::invalid_argument (path and
// strerror); a failed write throws std::runtime_error naming the path.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera {

// Tensors and the "__metadata__" string map of a safetensors file, as MLX's SafetensorsLoad.
using SafetensorsLoad = std::pair<std::unordered_map<std::string, array>,
                                  std::unordered_map<std::string, std::string>>;

// ---- .npy: one array ----

// Reads a .npy file (format 1.0, 2.0 or 3.0; little- or big-endian; C or Fortran order) whatever
// its extension. Dtypes: bool, (u)int8..64, float16/32/64, complex64, and '<V2' as bfloat16 (how
// MLX writes bfloat16). complex128, float128, strings, objects and structured dtypes are refused.
// `s` is accepted for MLX compatibility; the data lands in host memory.
array load(const std::string& file, StreamOrDevice s = {});
// Writes `a` as .npy in C order, laid out as np.save lays it out; appends ".npy" to `file` when
// it does not end with it (as MLX and NumPy). bfloat16 is written as '<V2' (MLX's convention;
// NumPy reads it as 2-byte void).
void save(const std::string& file, array a);

// ---- .npz: a zip archive of .npy files ----

// Reads an archive from np.savez (stored) or np.savez_compressed (deflate), zip64 included. Keys
// are the entry names without their ".npy" suffix.
std::unordered_map<std::string, array> load_npz(const std::string& file, StreamOrDevice s = {});
// Writes each array as "<key>.npy" (stored, or deflate when `compressed`); appends ".npz" to
// `file` when it does not end with it (as np.savez).
void savez(const std::string& file, const std::unordered_map<std::string, array>& arrays,
           bool compressed = false);

// ---- safetensors ----

// Reads a safetensors file. Dtype codes BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16,
// F32, F64, C64, and F8_E4M3 (converted to bfloat16, as MLX does).
SafetensorsLoad load_safetensors(const std::string& file, StreamOrDevice s = {});
// Writes tensors in key order with the data 8-byte aligned; appends ".safetensors" to `file` when
// it does not end with it (as MLX). Empty metadata writes no "__metadata__" entry.
void save_safetensors(const std::string& file, std::unordered_map<std::string, array> arrays,
                      std::unordered_map<std::string, std::string> metadata = {});

// ---- the same formats in memory (file-like objects in Python, tests) ----
// `name` stands for the file in error messages.

array load_npy_bytes(std::string_view bytes, const std::string& name = "<bytes>");
std::string save_npy_bytes(array a);
std::unordered_map<std::string, array> load_npz_bytes(std::string_view bytes,
                                                      const std::string& name = "<bytes>");
std::string savez_bytes(const std::unordered_map<std::string, array>& arrays,
                        bool compressed = false);
SafetensorsLoad load_safetensors_bytes(std::string_view bytes,
                                       const std::string& name = "<bytes>");
std::string save_safetensors_bytes(std::unordered_map<std::string, array> arrays,
                                   std::unordered_map<std::string, std::string> metadata = {});

}  // namespace tessera
