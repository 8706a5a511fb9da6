// NumPy .npz: a zip archive (zip.h) of .npy entries (npy.h); the public load_npz/savez
// (tessera/io.h).
#include <algorithm>
#include <cstdio>

#include "io/byte_io.h"
#include "io/npy.h"
#include "io/zip.h"
#include "tessera/io.h"
#include "tessera/eval.h"

namespace tessera {

namespace {

using ArrayMap = std::unordered_map<std::string, array>;
using namespace detail::io;

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

ArrayMap read_npz(const ByteReader& r, const std::string& where) {
  const std::vector<ZipEntry> entries = read_zip_directory(r, where);
  ArrayMap out;
  for (const ZipEntry& e : entries) {
    if (ends_with(e.name, "/") && e.uncompressed_size == 0) continue;  // a directory
    const std::string ew = where + ": entry " + printable(e.name);
    std::string key = ends_with(e.name, ".npy") ? e.name.substr(0, e.name.size() - 4) : e.name;
    if (out.count(key)) fail(ew, "gives the key " + printable(key) + " a second time");
    if (e.method == kZipStored) {
      SubReader sub(r, e.data_offset, e.compressed_size);
      uint32_t crc = 0;
      const RawObserver observe = [&crc](const void* d, size_t n) {
        crc = crc32_update(crc, d, n);
      };
      array a = read_npy(sub, ew, &observe);
      if (crc != e.crc32) {
        fail(ew, "CRC-32 mismatch: the archive records " + hex(e.crc32) + ", the data gives " +
                     hex(crc) + "; the data is corrupt");
      }
      out.emplace(std::move(key), std::move(a));
    } else {
      const std::string bytes = inflate_entry(r, e, ew);
      MemoryReader mem(bytes);
      out.emplace(std::move(key), read_npy(mem, ew));
    }
  }
  return out;
}

using Prepared = PreparedArrays;

void write_npz(ByteWriter& w, const Prepared& arrays, bool compressed) {
  ZipWriter zip(w);
  for (const auto& [key, a] : arrays) {
    zip.begin_entry(key + ".npy", compressed);
    const std::string header = npy_header(a.shape(), a.dtype());
    zip.write(header.data(), header.size());
    if (a.nbytes() > 0) zip.write(a.data<char>(), a.nbytes());
    zip.end_entry();
  }
  zip.finish();
}

}  // namespace

std::unordered_map<std::string, array> load_npz(const std::string& file, StreamOrDevice s) {
  FileReader r(file, "[load_npz]");
  return read_npz(r, "[load_npz] " + file);
}

void savez(const std::string& file, const std::unordered_map<std::string, array>& arrays,
           bool compressed) {
  const Prepared prepared = prepare_sorted_for_save(arrays);
  const std::string path = ends_with(file, ".npz") ? file : file + ".npz";
  FileWriter w(path, "[savez]");
  write_npz(w, prepared, compressed);
  w.close();
}

std::unordered_map<std::string, array> load_npz_bytes(std::string_view bytes,
                                                      const std::string& name) {
  MemoryReader r(bytes);
  return read_npz(r, "[load_npz] " + name);
}

std::string savez_bytes(const std::unordered_map<std::string, array>& arrays, bool compressed) {
  StringWriter w;
  write_npz(w, prepare_sorted_for_save(arrays), compressed);
  return w.take();
}

}  // namespace tessera
