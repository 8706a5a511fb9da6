// Saving and loading arrays: NumPy .npy and .npz, safetensors and GGUF, with MLX's C++ names
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
#include <variant>
#include <vector>

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
// Lazy, as MLX's: the header is checked against the file now (a bad file throws here, naming
// it), the data is read when the array is evaluated, on stream `s`; the file stays open until
// then.
array load(const std::string& file, StreamOrDevice s = {});
// Writes `a` as .npy in C order, laid out as np.save lays it out; appends ".npy" to `file` when
// it does not end with it (as MLX and NumPy). bfloat16 is written as '<V2' (MLX's convention;
// NumPy reads it as 2-byte void).
void save(const std::string& file, array a);

// ---- .npz: a zip archive of .npy files ----

// Reads an archive from np.savez (stored) or np.savez_compressed (deflate), zip64 included. Keys
// are the entry names without their ".npy" suffix. Read at once (`s` is accepted for MLX
// compatibility).
std::unordered_map<std::string, array> load_npz(const std::string& file, StreamOrDevice s = {});
// Writes each array as "<key>.npy" (stored, or deflate when `compressed`); appends ".npz" to
// `file` when it does not end with it (as np.savez).
void savez(const std::string& file, const std::unordered_map<std::string, array>& arrays,
           bool compressed = false);

// ---- safetensors ----

// Reads a safetensors file. Dtype codes BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16,
// F32, F64, C64; F8_E4M3 and F8_E8M0 load as their bytes (uint8), as MLX 0.32 (from_fp8 decodes
// e4m3). Lazy as load(): every header field is checked now, each tensor is read when its array
// is evaluated, on stream `s` (a tensor never used is never read).
SafetensorsLoad load_safetensors(const std::string& file, StreamOrDevice s = {});
// Writes tensors in key order with the data 8-byte aligned; appends ".safetensors" to `file` when
// it does not end with it (as MLX). Empty metadata writes no "__metadata__" entry.
void save_safetensors(const std::string& file, std::unordered_map<std::string, array> arrays,
                      std::unordered_map<std::string, std::string> metadata = {});

// ---- GGUF (llama.cpp's format, versions 2 and 3, little-endian) ----

// A metadata value: a 0-d array (scalars), a 1-d array (arrays of numbers or bools), a string, or
// a list of strings; as MLX's GGUFMetaData.
using GGUFMetaData = std::variant<std::monostate, array, std::string, std::vector<std::string>>;
using GGUFLoad = std::pair<std::unordered_map<std::string, array>,
                           std::unordered_map<std::string, GGUFMetaData>>;

// Reads a GGUF file. Tensors F32, F16, BF16, F64, I8, I16, I32, I64 load as they are (shapes in
// Tessera's order: ggml's dimensions reversed); Q4_0, Q4_1 and Q8_0 as MLX does, in its affine
// format with group size 32 -- "<name>" (packed uint32 codes, 4 or 8 bits), "<prefix>.scales"
// and "<prefix>.biases" (float16; float32 where a bias would overflow float16), <prefix> being
// the name without ".weight"; Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K decoded to float16.
// Metadata: integers, bools and floats as 0-d / 1-d arrays of their own dtype (FLOAT64 stays
// float64; MLX narrows it to float32), strings, lists of strings. Other tensor types, arrays of
// arrays, and anything truncated or inconsistent throw std::invalid_argument naming the entry.
GGUFLoad load_gguf(const std::string& file, StreamOrDevice s = {});
// Writes a version-3 GGUF file, tensors and metadata in key order, data aligned to 32 bytes (or
// to a uint32 "general.alignment" in the metadata); appends ".gguf" when missing (as MLX).
// Tensor dtypes: float32, float16, bfloat16, float64, int8, int16, int32, int64 (MLX: the first
// two and int8..int32). Metadata arrays must be 0-d or 1-d of bool, (u)int8..64, float32 or
// float64.
void save_gguf(std::string file, std::unordered_map<std::string, array> array_map,
               std::unordered_map<std::string, GGUFMetaData> meta_data = {});

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
GGUFLoad load_gguf_bytes(std::string_view bytes, const std::string& name = "<bytes>");
std::string save_gguf_bytes(std::unordered_map<std::string, array> arrays,
                            std::unordered_map<std::string, GGUFMetaData> metadata = {});

}  // namespace tessera
