// NumPy .npy encoding and decoding (npy.cpp), shared by the .npy front end and the .npz archive
// code (npz.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/byte_io.h"
#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera::detail::io {

// Bounds we accept when reading (docs/io.md): NumPy writes headers under 200 bytes for the dtypes
// we support, and its own reader refuses headers over 10000 bytes by default.
inline constexpr uint64_t kMaxNpyHeaderBytes = 65536;
inline constexpr size_t kMaxNpyDims = 64;

struct NpyHeader {
  Dtype dtype = float32;
  Shape shape;
  bool fortran_order = false;
  // Bytes per scalar to reverse for big-endian data (0: none; complex swaps each half).
  size_t swap_unit = 0;
  uint64_t data_offset = 0;  // magic, version, length field and header text come before
  uint64_t nbytes = 0;       // element count x item size, overflow-checked
  std::string prefix;        // the raw bytes [0, data_offset)
};

// Validates magic, version, header length and the header dict; reads nothing past the header.
// Throws std::invalid_argument "<where>: <what is wrong>".
NpyHeader read_npy_header(const ByteReader& r, const std::string& where);

// Called with every byte of the source, in order, exactly once, as read (before byte swapping):
// the .npz reader checks the entry's CRC-32 with it.
using RawObserver = std::function<void(const void* data, size_t n)>;

// Where a tensor's bytes lie in a source and how they become a row-contiguous buffer.
struct TensorBytes {
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  size_t swap_unit = 0;  // as NpyHeader's
  bool fortran_order = false;
};

// Reads tensor `t` of `shape` and `dtype` from `r` into `dst` (t.nbytes): big-endian data
// swapped, Fortran order reordered, bool bytes normalised to 0/1 (a C++ bool holds 0 or 1).
// `observe` sees the bytes as read.
void read_tensor(const ByteReader& r, const TensorBytes& t, const Shape& shape, Dtype dtype,
                 uint8_t* dst, const RawObserver* observe = nullptr);

// The array stored in `r`, evaluated and row-contiguous (as read_tensor). Bytes after the data
// are ignored, as NumPy does, but passed to `observe` when one is given.
array read_npy(const ByteReader& r, const std::string& where, const RawObserver* observe = nullptr);

// An array whose bytes read_tensor reads from `r` when it is evaluated, on stream `s` (primitive
// Load, lazy_load.cpp): the caller has checked that the bytes lie inside `r`. `where` names the
// file and the tensor in the error of a read that fails then (the file shrank meanwhile).
array lazy_tensor(std::shared_ptr<const ByteReader> r, std::string where, TensorBytes t,
                  Shape shape, Dtype dtype, StreamOrDevice s);

// The .npy file behind `r` as such an array: its header and size checked now (the errors of
// read_npy), its data read when the array is evaluated, as MLX's load.
array load_npy_lazy(std::shared_ptr<const ByteReader> r, const std::string& where, StreamOrDevice s);

// The header bytes (magic through the final '\n') that np.save writes for a C-order array
// (bfloat16 as '<V2', as MLX).
std::string npy_header(const Shape& shape, Dtype dtype);

// `a` evaluated and row-contiguous, so that a.data<char>() holds its a.nbytes() bytes in order.
array prepare_for_save(array a);

// Named arrays in key order (the same arrays give the same bytes), evaluated together and made
// row-contiguous before any file is created, so that a failed evaluation leaves no half-written
// file (.npz and safetensors).
using PreparedArrays = std::vector<std::pair<std::string, array>>;
PreparedArrays prepare_sorted_for_save(const std::unordered_map<std::string, array>& arrays);

}  // namespace tessera::detail::io
