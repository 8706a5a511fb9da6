// ZIP archives for .npz (zip.h): the central-directory reader with its validation, deflate
// decoding, and the writer that lays archives out as Python's zipfile does for np.savez.
#include "io/zip.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <unordered_set>

namespace tessera::detail::io {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr size_t kLocalLen = 30;
constexpr size_t kCentralLen = 46;
constexpr size_t kEndLen = 22;
constexpr size_t kZip64EndLen = 56;
constexpr size_t kZip64LocatorLen = 20;
constexpr uint64_t kMaxComment = 0xFFFF;
// Python's zipfile switches to zip64 fields past this (some readers treat 32-bit sizes as signed).
constexpr uint64_t kZip64Limit = (uint64_t{1} << 31) - 1;
constexpr uint16_t kUtf8Flag = 0x0800;
constexpr uint16_t kDosDate1980 = 0x0021;  // 1980-01-01
constexpr uint16_t kVersion45 = 45;        // zip64
constexpr uint16_t kMadeByUnix45 = 0x032d;
constexpr uint32_t kMode0600 = 0600u << 16;

std::string num(uint64_t v) { return std::to_string(v); }

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::string method_name(uint16_t m) {
  switch (m) {
    case 1: return " (shrink)";
    case 6: return " (implode)";
    case 9: return " (deflate64)";
    case 12: return " (bzip2)";
    case 14: return " (lzma)";
    case 93: return " (zstandard)";
    case 95: return " (xz)";
    default: return "";
  }
}

bool is_ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// Owns an inflate stream.
struct Inflater {
  z_stream zs{};
  Inflater() {
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
      throw std::runtime_error("[io] zlib inflateInit2 failed (out of memory?)");
    }
  }
  ~Inflater() { inflateEnd(&zs); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;
};

// Reads the zip64 extended-information extra field: it holds, in order, exactly the fields whose
// 32-bit values are the 0xFFFFFFFF marker.
void read_zip64_extra(std::string_view extra, ZipEntry& e, uint64_t& disk_start,
                      const std::string& where) {
  size_t q = 0;
  while (extra.size() - q >= 4) {
    const uint16_t id = le16(extra.data() + q);
    const uint16_t sz = le16(extra.data() + q + 2);
    if (extra.size() - q - 4 < sz) {
      fail(where, "an extra field (id " + num(id) + ", " + num(sz) +
                      " bytes) runs past the end of the entry's extra data");
    }
    if (id == 1) {
      std::string_view z = extra.substr(q + 4, sz);
      size_t at = 0;
      auto take = [&](uint64_t& field, int bytes, const char* what) {
        if (z.size() - at < static_cast<size_t>(bytes)) {
          fail(where, std::string("the zip64 extra field is too short to hold the ") + what);
        }
        field = load_le(z.data() + at, bytes);
        at += static_cast<size_t>(bytes);
      };
      if (e.uncompressed_size == 0xFFFFFFFFu) take(e.uncompressed_size, 8, "uncompressed size");
      if (e.compressed_size == 0xFFFFFFFFu) take(e.compressed_size, 8, "compressed size");
      if (e.local_header_offset == 0xFFFFFFFFu) {
        take(e.local_header_offset, 8, "local header offset");
      }
      if (disk_start == 0xFFFFu) take(disk_start, 4, "disk number");
    }
    q += 4 + sz;
  }
}

}  // namespace

std::vector<ZipEntry> read_zip_directory(const ByteReader& r, const std::string& where) {
  const uint64_t size = r.size();
  if (size < kEndLen) {
    fail(where, "not a zip archive: " + num(size) + " bytes, fewer than the " + num(kEndLen) +
                    "-byte end-of-central-directory record");
  }
  // The end record sits in the last 22 + 65535 bytes (its comment is at most 65535 bytes).
  const uint64_t tail_len = std::min<uint64_t>(size, kEndLen + kMaxComment);
  const uint64_t tail_start = size - tail_len;
  const std::string tail = r.read_string(tail_start, static_cast<size_t>(tail_len));
  int64_t found = -1;
  for (int64_t i = static_cast<int64_t>(tail_len - kEndLen); i >= 0; --i) {
    const char* p = tail.data() + i;
    if (le32(p) == kEndSig &&
        static_cast<uint64_t>(i) + kEndLen + le16(p + 20) <= tail_len) {
      found = i;
      break;
    }
  }
  if (found < 0) {
    std::string hint;
    if (size >= 6 && r.read_string(0, 6) == "\x93NUMPY") hint = " (it is a .npy file: use load)";
    fail(where, "not a zip archive: no end-of-central-directory record in its last " +
                    num(tail_len) + " bytes; the file is truncated or is not an .npz" + hint);
  }
  const char* end = tail.data() + found;
  const uint64_t end_pos = tail_start + static_cast<uint64_t>(found);
  uint64_t disk = le16(end + 4), cd_disk = le16(end + 6);
  uint64_t n_disk = le16(end + 8), n_total = le16(end + 10);
  uint64_t cd_size = le32(end + 12), cd_offset = le32(end + 16);
  uint64_t cd_limit = end_pos;  // the central directory ends before the end records

  if (end_pos >= kZip64LocatorLen) {
    const uint64_t loc_pos = end_pos - kZip64LocatorLen;
    const std::string loc = r.read_string(loc_pos, kZip64LocatorLen);
    if (le32(loc.data()) == kZip64LocatorSig) {
      const uint64_t z_pos = le64(loc.data() + 8);
      if (le32(loc.data() + 4) != 0 || le32(loc.data() + 16) > 1) {
        fail(where, "a multi-disk (spanned) archive, which is not supported");
      }
      if (z_pos > loc_pos || loc_pos - z_pos < kZip64EndLen) {
        fail(where, "the zip64 end record offset " + num(z_pos) +
                        " does not lie inside the file before its locator at " + num(loc_pos));
      }
      const std::string z = r.read_string(z_pos, kZip64EndLen);
      if (le32(z.data()) != kZip64EndSig) {
        fail(where, "no zip64 end-of-central-directory record at offset " + num(z_pos) +
                        " where its locator points");
      }
      disk = le32(z.data() + 16);
      cd_disk = le32(z.data() + 20);
      n_disk = le64(z.data() + 24);
      n_total = le64(z.data() + 32);
      cd_size = le64(z.data() + 40);
      cd_offset = le64(z.data() + 48);
      cd_limit = z_pos;
    }
  }
  if (disk != 0 || cd_disk != 0 || n_disk != n_total) {
    fail(where, "a multi-disk (spanned) archive, which is not supported");
  }
  uint64_t cd_end = 0;
  if (add_overflows(cd_offset, cd_size, &cd_end) || cd_end > cd_limit) {
    fail(where, "the central directory (" + num(cd_size) + " bytes at offset " + num(cd_offset) +
                    ") does not lie inside the file before the end record at offset " +
                    num(cd_limit) + "; the archive is truncated or corrupt");
  }
  uint64_t min_cd = 0;
  if (mul_overflows(n_total, kCentralLen, &min_cd) || min_cd > cd_size) {
    fail(where, "the end record claims " + num(n_total) +
                    " entries, more than a central directory of " + num(cd_size) +
                    " bytes can hold");
  }
  const std::string cd = r.read_string(cd_offset, static_cast<size_t>(cd_size));

  std::vector<ZipEntry> entries;
  entries.reserve(static_cast<size_t>(n_total));
  size_t p = 0;
  for (uint64_t i = 0; i < n_total; ++i) {
    const std::string at = " (central directory entry " + num(i) + " at offset " +
                           num(cd_offset + p) + ")";
    if (cd.size() - p < kCentralLen) fail(where, "the central directory is cut short" + at);
    const char* c = cd.data() + p;
    if (le32(c) != kCentralSig) fail(where, "bad central directory signature" + at);
    ZipEntry e;
    const uint16_t flags = le16(c + 8);
    e.method = le16(c + 10);
    e.crc32 = le32(c + 16);
    e.compressed_size = le32(c + 20);
    e.uncompressed_size = le32(c + 24);
    const size_t nlen = le16(c + 28), xlen = le16(c + 30), clen = le16(c + 32);
    uint64_t disk_start = le16(c + 34);
    e.local_header_offset = le32(c + 42);
    if (cd.size() - p - kCentralLen < nlen + xlen + clen) {
      fail(where, "the name, extra field or comment runs past the central directory" + at);
    }
    e.name = cd.substr(p + kCentralLen, nlen);
    const std::string ew = where + ": entry " + printable(e.name);
    read_zip64_extra(std::string_view(cd).substr(p + kCentralLen + nlen, xlen), e, disk_start, ew);
    if (flags & 1) fail(ew, "is encrypted; encrypted archives are not supported");
    if (e.method != kZipStored && e.method != kZipDeflate) {
      fail(ew, "uses compression method " + num(e.method) + method_name(e.method) +
                   "; only stored (0) and deflate (8) are supported, which np.savez and "
                   "np.savez_compressed write");
    }
    if (disk_start != 0) {
      fail(ew, "starts on disk " + num(disk_start) + "; spanned archives are not supported");
    }
    if (e.method == kZipStored && e.compressed_size != e.uncompressed_size) {
      fail(ew, "is stored (not compressed) but its sizes differ: " + num(e.compressed_size) +
                   " bytes stored, " + num(e.uncompressed_size) + " declared");
    }
    p += kCentralLen + nlen + xlen + clen;
    entries.push_back(std::move(e));
  }
  if (p != cd.size()) {
    fail(where, "the central directory holds " + num(cd.size() - p) +
                    " bytes beyond its " + num(n_total) + " entries; the archive is corrupt");
  }

  std::unordered_set<std::string> names;
  for (ZipEntry& e : entries) {
    const std::string ew = where + ": entry " + printable(e.name);
    if (!names.insert(e.name).second) fail(ew, "appears twice in the archive");
    const uint64_t off = e.local_header_offset;
    if (off > cd_offset || cd_offset - off < kLocalLen) {
      fail(ew, "its local header offset " + num(off) +
                   " is not inside the data area, which ends at the central directory (offset " +
                   num(cd_offset) + ")");
    }
    const std::string lh = r.read_string(off, kLocalLen);
    if (le32(lh.data()) != kLocalSig) fail(ew, "no local file header at offset " + num(off));
    if (le16(lh.data() + 8) != e.method) {
      fail(ew, "its local header says compression method " + num(le16(lh.data() + 8)) +
                   ", the central directory " + num(e.method));
    }
    const uint64_t lnlen = le16(lh.data() + 26), lxlen = le16(lh.data() + 28);
    const uint64_t data_off = off + kLocalLen + lnlen + lxlen;
    if (data_off > cd_offset || cd_offset - data_off < e.compressed_size) {
      fail(ew, "its data (" + num(e.compressed_size) + " bytes after the local header at offset " +
                   num(off) + ") runs into the central directory at offset " + num(cd_offset) +
                   "; the archive is truncated or corrupt");
    }
    if (r.read_string(off + kLocalLen, static_cast<size_t>(lnlen)) != e.name) {
      fail(ew, "its local header names a different file");
    }
    e.data_offset = data_off;
  }
  // Entries must not share bytes (overlapping entries are a zip-bomb technique).
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return entries[a].local_header_offset < entries[b].local_header_offset;
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const ZipEntry& a = entries[order[k - 1]];
    const ZipEntry& b = entries[order[k]];
    if (a.data_offset + a.compressed_size > b.local_header_offset) {
      fail(where, "entries " + printable(a.name) + " and " + printable(b.name) +
                      " overlap; the archive is corrupt");
    }
  }
  return entries;
}

std::string inflate_entry(const ByteReader& r, const ZipEntry& e, const std::string& where) {
  uint64_t bound = 0;
  if (mul_overflows(e.compressed_size, kMaxDeflateRatio, &bound) ||
      add_overflows(bound, 1024, &bound) || e.uncompressed_size > bound) {
    fail(where, "declares " + num(e.uncompressed_size) + " bytes uncompressed from " +
                    num(e.compressed_size) +
                    " compressed, more than deflate can produce; the archive is corrupt");
  }
  std::string out(static_cast<size_t>(e.uncompressed_size), '\0');
  Inflater inf;
  z_stream& zs = inf.zs;
  std::string in;
  uint64_t in_off = e.data_offset;
  uint64_t in_left = e.compressed_size;
  size_t out_pos = 0;
  unsigned char spare[1];
  int stalls = 0;
  while (true) {
    if (zs.avail_in == 0 && in_left > 0) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(in_left, 1 << 20));
      in.resize(k);
      r.read(in_off, in.data(), k);
      in_off += k;
      in_left -= k;
      zs.next_in = reinterpret_cast<Bytef*>(in.data());
      zs.avail_in = static_cast<uInt>(k);
    }
    const size_t room = out.size() - out_pos;
    // With the output full, offer one spare byte: any output there means too much data.
    zs.next_out = room > 0 ? reinterpret_cast<Bytef*>(out.data() + out_pos) : spare;
    zs.avail_out = room > 0 ? static_cast<uInt>(std::min<size_t>(room, 1u << 30)) : 1;
    const uInt out_before = zs.avail_out, in_before = zs.avail_in;
    const int ret = inflate(&zs, Z_NO_FLUSH);
    const size_t produced = out_before - zs.avail_out;
    if (room == 0 && produced > 0) {
      fail(where, "inflates to more than the " + num(e.uncompressed_size) +
                      " bytes its header declares; the archive is corrupt");
    }
    out_pos += produced;
    if (ret == Z_STREAM_END) break;
    if (ret == Z_DATA_ERROR || ret == Z_NEED_DICT) {
      fail(where, std::string("its deflate data is corrupt (zlib: ") +
                      (zs.msg ? zs.msg : "invalid data") + ")");
    }
    if (ret == Z_MEM_ERROR) throw std::runtime_error("[io] zlib inflate ran out of memory");
    if (produced == 0 && zs.avail_in == in_before) {
      if (zs.avail_in == 0 && in_left == 0) {
        fail(where, "its deflate data ends before the stream does (" + num(e.compressed_size) +
                        " bytes); the archive is truncated or corrupt");
      }
      if (++stalls > 2) {
        fail(where, "zlib inflate made no progress (code " + std::to_string(ret) + ")");
      }
    } else {
      stalls = 0;
    }
  }
  if (out_pos != out.size()) {
    fail(where, "inflates to " + num(out_pos) + " bytes but its header declares " +
                    num(e.uncompressed_size));
  }
  const uint32_t crc = crc32_update(0, out.data(), out.size());
  if (crc != e.crc32) {
    fail(where, "CRC-32 mismatch: the archive records " + hex32(e.crc32) + ", the data gives " +
                    hex32(crc) + "; the data is corrupt");
  }
  return out;
}

ZipWriter::~ZipWriter() {
  if (z_) deflateEnd(z_.get());
}

void ZipWriter::begin_entry(const std::string& name, bool deflate) {
  if (open_) throw std::logic_error("[io] ZipWriter::begin_entry with an entry open");
  if (name.size() > 0xFFFF) {
    throw std::invalid_argument("[savez] the entry name " + printable(name) + " is " +
                                num(name.size()) + " bytes; zip allows at most 65535");
  }
  cur_ = Written();
  cur_.name = name;
  cur_.method = deflate ? kZipDeflate : kZipStored;
  cur_.local_header_offset = out_.tell();
  std::string h;
  put_le(h, kLocalSig, 4);
  put_le(h, kVersion45, 2);
  put_le(h, is_ascii(name) ? 0 : kUtf8Flag, 2);
  put_le(h, cur_.method, 2);
  put_le(h, 0, 2);  // time 00:00
  put_le(h, kDosDate1980, 2);
  put_le(h, 0, 4);  // CRC-32, patched
  put_le(h, 0xFFFFFFFFu, 4);
  put_le(h, 0xFFFFFFFFu, 4);
  put_le(h, name.size(), 2);
  put_le(h, 20, 2);
  h += name;
  put_le(h, 1, 2);  // zip64 extra: uncompressed and compressed sizes, patched
  put_le(h, 16, 2);
  put_le(h, 0, 8);
  put_le(h, 0, 8);
  out_.write(h);
  if (deflate) {
    z_ = std::make_unique<z_stream>();
    *z_ = z_stream{};
    if (deflateInit2(z_.get(), Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK) {
      z_.reset();
      throw std::runtime_error("[savez] zlib deflateInit2 failed (out of memory?)");
    }
    zbuf_.resize(1 << 16);
  }
  open_ = true;
}

void ZipWriter::deflate_chunk(const void* data, size_t n, int flush) {
  const auto* p = static_cast<const Bytef*>(data);
  do {
    const size_t take = std::min<size_t>(n, 1u << 30);
    z_->next_in = const_cast<Bytef*>(p);
    z_->avail_in = static_cast<uInt>(take);
    p += take;
    n -= take;
    const int f = n == 0 ? flush : Z_NO_FLUSH;
    while (true) {
      z_->next_out = reinterpret_cast<Bytef*>(zbuf_.data());
      z_->avail_out = static_cast<uInt>(zbuf_.size());
      const int ret = deflate(z_.get(), f);
      if (ret == Z_STREAM_ERROR) throw std::runtime_error("[savez] zlib deflate failed");
      const size_t have = zbuf_.size() - z_->avail_out;
      out_.write(zbuf_.data(), have);
      cur_.compressed_size += have;
      if (f == Z_FINISH ? ret == Z_STREAM_END : z_->avail_out != 0) break;
    }
  } while (n > 0);
}

void ZipWriter::write(const void* data, size_t n) {
  if (!open_) throw std::logic_error("[io] ZipWriter::write with no entry open");
  if (n == 0) return;
  cur_.crc32 = crc32_update(cur_.crc32, data, n);
  cur_.uncompressed_size += n;
  if (cur_.method == kZipStored) {
    out_.write(data, n);
    cur_.compressed_size += n;
  } else {
    deflate_chunk(data, n, Z_NO_FLUSH);
  }
}

void ZipWriter::end_entry() {
  if (!open_) throw std::logic_error("[io] ZipWriter::end_entry with no entry open");
  if (cur_.method == kZipDeflate) {
    deflate_chunk(nullptr, 0, Z_FINISH);
    deflateEnd(z_.get());
    z_.reset();
  }
  std::string crc, sizes;
  put_le(crc, cur_.crc32, 4);
  put_le(sizes, cur_.uncompressed_size, 8);
  put_le(sizes, cur_.compressed_size, 8);
  out_.write_at(cur_.local_header_offset + 14, crc.data(), crc.size());
  out_.write_at(cur_.local_header_offset + kLocalLen + cur_.name.size() + 4, sizes.data(),
                sizes.size());
  done_.push_back(std::move(cur_));
  open_ = false;
}

void ZipWriter::finish() {
  if (open_) throw std::logic_error("[io] ZipWriter::finish with an entry open");
  const uint64_t cd_start = out_.tell();
  for (const Written& w : done_) {
    const bool big_sizes = w.uncompressed_size > kZip64Limit || w.compressed_size > kZip64Limit;
    const bool big_offset = w.local_header_offset > kZip64Limit;
    std::string extra;
    if (big_sizes || big_offset) {
      put_le(extra, 1, 2);
      put_le(extra, (big_sizes ? 16 : 0) + (big_offset ? 8 : 0), 2);
      if (big_sizes) {
        put_le(extra, w.uncompressed_size, 8);
        put_le(extra, w.compressed_size, 8);
      }
      if (big_offset) put_le(extra, w.local_header_offset, 8);
    }
    std::string c;
    put_le(c, kCentralSig, 4);
    put_le(c, kMadeByUnix45, 2);
    put_le(c, kVersion45, 2);
    put_le(c, is_ascii(w.name) ? 0 : kUtf8Flag, 2);
    put_le(c, w.method, 2);
    put_le(c, 0, 2);
    put_le(c, kDosDate1980, 2);
    put_le(c, w.crc32, 4);
    put_le(c, big_sizes ? 0xFFFFFFFFu : w.compressed_size, 4);
    put_le(c, big_sizes ? 0xFFFFFFFFu : w.uncompressed_size, 4);
    put_le(c, w.name.size(), 2);
    put_le(c, extra.size(), 2);
    put_le(c, 0, 2);  // comment
    put_le(c, 0, 2);  // disk
    put_le(c, 0, 2);  // internal attributes
    put_le(c, kMode0600, 4);
    put_le(c, big_offset ? 0xFFFFFFFFu : w.local_header_offset, 4);
    c += w.name;
    c += extra;
    out_.write(c);
  }
  const uint64_t cd_size = out_.tell() - cd_start;
  const uint64_t count = done_.size();
  std::string e;
  if (count > 0xFFFF || cd_size > kZip64Limit || cd_start > kZip64Limit) {
    const uint64_t z_pos = out_.tell();
    put_le(e, kZip64EndSig, 4);
    put_le(e, kZip64EndLen - 12, 8);
    put_le(e, kVersion45, 2);
    put_le(e, kVersion45, 2);
    put_le(e, 0, 4);
    put_le(e, 0, 4);
    put_le(e, count, 8);
    put_le(e, count, 8);
    put_le(e, cd_size, 8);
    put_le(e, cd_start, 8);
    put_le(e, kZip64LocatorSig, 4);
    put_le(e, 0, 4);
    put_le(e, z_pos, 8);
    put_le(e, 1, 4);
  }
  put_le(e, kEndSig, 4);
  put_le(e, 0, 2);
  put_le(e, 0, 2);
  put_le(e, std::min<uint64_t>(count, 0xFFFF), 2);
  put_le(e, std::min<uint64_t>(count, 0xFFFF), 2);
  put_le(e, std::min<uint64_t>(cd_size, 0xFFFFFFFFu), 4);
  put_le(e, std::min<uint64_t>(cd_start, 0xFFFFFFFFu), 4);
  put_le(e, 0, 2);
  out_.write(e);
}

}  // namespace tessera::detail::io
