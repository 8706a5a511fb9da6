// A minimal ZIP reader and writer for .npz (zip.cpp): stored and deflate entries (zlib), zip64,
// one disk, no encryption. Transport only: it knows nothing of .npy.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/byte_io.h"

namespace tessera::detail::io {

inline constexpr uint16_t kZipStored = 0;
inline constexpr uint16_t kZipDeflate = 8;
// Deflate expands at most 1032:1; an entry that claims more is corrupt (or a zip bomb).
inline constexpr uint64_t kMaxDeflateRatio = 1032;

struct ZipEntry {
  std::string name;
  uint16_t method = kZipStored;
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint64_t local_header_offset = 0;
  uint64_t data_offset = 0;  // where the entry's bytes start, from its local header
};

// The entries of the archive in `r`, in central-directory order, after checking the end record,
// the central directory and every local header: all inside the file, sizes consistent, entries
// not overlapping, names unique, methods stored or deflate. Throws std::invalid_argument
// "<where>: ..." (naming the entry when one is at fault).
std::vector<ZipEntry> read_zip_directory(const ByteReader& r, const std::string& where);

// The uncompressed bytes of a deflate entry, with its size and CRC-32 checked.
std::string inflate_entry(const ByteReader& r, const ZipEntry& e, const std::string& where);

// Incremental CRC-32 (zlib's), for stored entries read in pieces.
inline uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  return static_cast<uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), n));
}

// Writes an archive laid out as Python's zipfile does for np.savez: zip64 extra fields in every
// local header (patched with the CRC and sizes once the entry is done), zip64 records in the
// central directory only where a size or offset needs them. Timestamps are 1980-01-01 00:00, so
// the same arrays give the same bytes.
class ZipWriter {
 public:
  explicit ZipWriter(ByteWriter& out) : out_(out) {}
  ~ZipWriter();
  ZipWriter(const ZipWriter&) = delete;
  ZipWriter& operator=(const ZipWriter&) = delete;

  void begin_entry(const std::string& name, bool deflate);
  void write(const void* data, size_t n);
  void end_entry();
  // Central directory and end records; the writer is done afterwards.
  void finish();

 private:
  using Written = ZipEntry;  // what the central directory repeats (data_offset unused)
  void deflate_chunk(const void* data, size_t n, int flush);

  ByteWriter& out_;
  std::vector<Written> done_;
  bool open_ = false;
  Written cur_;
  std::unique_ptr<z_stream> z_;  // live while a deflate entry is open
  std::string zbuf_;             // deflate output staging
};

}  // namespace tessera::detail::io
