// Random-access byte sources and sequential sinks (files and memory) under the format code of
// src/io: parsers read through a ByteReader, writers emit through a ByteWriter, so each format is
// written once for files and for in-memory bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "tessera/allocator.h"

namespace tessera::detail::io {

// "[load] a.npy: " + what, as std::invalid_argument (bad or corrupt input).
[[noreturn]] void fail(const std::string& where, const std::string& what);

// Bytes that can be read at any offset. Parsers bounds-check every read against size() before
// calling read(); read() checks again and fails (invalid_argument) rather than read past the end.
class ByteReader {
 public:
  virtual ~ByteReader() = default;
  virtual uint64_t size() const = 0;
  // Copies [offset, offset + n) into dst.
  virtual void read(uint64_t offset, void* dst, size_t n) const = 0;
  std::string read_string(uint64_t offset, size_t n) const;
  // Throws unless [offset, offset + n) lies inside the source (overflow-safe).
  void check_range(uint64_t offset, uint64_t n, const std::string& where,
                   const std::string& what) const;
};

class MemoryReader final : public ByteReader {
 public:
  explicit MemoryReader(std::string_view bytes) : bytes_(bytes) {}
  uint64_t size() const override { return bytes_.size(); }
  void read(uint64_t offset, void* dst, size_t n) const override;

 private:
  std::string_view bytes_;  // not owned
};

// A regular file opened read-only; reads with pread. Opening fails with invalid_argument naming
// the path and strerror; an I/O error later is a runtime_error.
class FileReader final : public ByteReader {
 public:
  explicit FileReader(const std::string& path, const std::string& who);
  ~FileReader() override;
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;
  uint64_t size() const override { return size_; }
  void read(uint64_t offset, void* dst, size_t n) const override;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The bytes [offset, offset + size) of a parent reader (a stored zip entry).
class SubReader final : public ByteReader {
 public:
  SubReader(const ByteReader& parent, uint64_t offset, uint64_t size)
      : parent_(parent), offset_(offset), size_(size) {}
  uint64_t size() const override { return size_; }
  void read(uint64_t offset, void* dst, size_t n) const override;

 private:
  const ByteReader& parent_;
  uint64_t offset_;
  uint64_t size_;
};

// A sequential sink that can also patch bytes it already wrote (zip headers get their CRC and
// sizes after the data).
class ByteWriter {
 public:
  virtual ~ByteWriter() = default;
  virtual void write(const void* data, size_t n) = 0;
  virtual void write_at(uint64_t offset, const void* data, size_t n) = 0;
  virtual uint64_t tell() const = 0;
  void write(std::string_view s) { write(s.data(), s.size()); }
};

class StringWriter final : public ByteWriter {
 public:
  void write(const void* data, size_t n) override;
  void write_at(uint64_t offset, const void* data, size_t n) override;
  uint64_t tell() const override { return out_.size(); }
  std::string take() { return std::move(out_); }
  using ByteWriter::write;

 private:
  std::string out_;
};

// Creates or truncates `path`. Failing to create, write or close it is std::runtime_error
// naming the path and strerror (as MLX). close() reports a failed final flush; the destructor
// closes silently.
class FileWriter final : public ByteWriter {
 public:
  FileWriter(const std::string& path, const std::string& who);
  ~FileWriter() override;
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;
  void write(const void* data, size_t n) override;
  void write_at(uint64_t offset, const void* data, size_t n) override;
  uint64_t tell() const override { return pos_; }
  void close();
  using ByteWriter::write;

 private:
  std::string path_;
  std::string who_;
  int fd_ = -1;
  uint64_t pos_ = 0;
};

// An allocator buffer that is freed unless handed on with release().
class OwnedBuffer {
 public:
  explicit OwnedBuffer(size_t n) : buf_(allocator::malloc(n)) {}
  ~OwnedBuffer() {
    if (buf_) allocator::free(buf_);
  }
  OwnedBuffer(const OwnedBuffer&) = delete;
  OwnedBuffer& operator=(const OwnedBuffer&) = delete;
  uint8_t* data() const { return static_cast<uint8_t*>(buf_.raw_ptr()); }
  allocator::Buffer release() {
    allocator::Buffer b = buf_;
    buf_ = allocator::Buffer();
    return b;
  }

 private:
  allocator::Buffer buf_;
};

// Little-endian integer loads and stores.
inline uint64_t load_le(const void* p, int n) {
  const auto* b = static_cast<const uint8_t*>(p);
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}
inline uint16_t le16(const void* p) { return static_cast<uint16_t>(load_le(p, 2)); }
inline uint32_t le32(const void* p) { return static_cast<uint32_t>(load_le(p, 4)); }
inline uint64_t le64(const void* p) { return load_le(p, 8); }
inline void put_le(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// *out = a * b (a + b); true when that overflows uint64.
inline bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}
inline bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_add_overflow(a, b, out);
}

inline bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Untrusted text for error messages: in quotes, non-printable bytes and backslashes as \xNN,
// cut after `max` bytes.
std::string printable(std::string_view s, size_t max = 64);

}  // namespace tessera::detail::io
