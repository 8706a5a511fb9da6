// Files and memory as byte sources and sinks for the array formats (byte_io.h).
#include "io/byte_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace tessera::detail::io {

void fail(const std::string& where, const std::string& what) {
  throw std::invalid_argument(where + ": " + what);
}

std::string ByteReader::read_string(uint64_t offset, size_t n) const {
  std::string s(n, '\0');
  read(offset, s.data(), n);
  return s;
}

void ByteReader::check_range(uint64_t offset, uint64_t n, const std::string& where,
                             const std::string& what) const {
  uint64_t end = 0;
  if (add_overflows(offset, n, &end) || end > size()) {
    fail(where, what + " (" + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                    ") runs past the end of the data (" + std::to_string(size()) +
                    " bytes); the file is truncated or corrupt");
  }
}

namespace {
[[noreturn]] void read_past_end(uint64_t offset, size_t n, uint64_t size) {
  // Parsers check ranges first, so this is a missed check, reported as bad input, not a crash.
  throw std::invalid_argument("[io] read of " + std::to_string(n) + " bytes at offset " +
                              std::to_string(offset) + " past the end of " +
                              std::to_string(size) + " bytes");
}
bool in_range(uint64_t offset, size_t n, uint64_t size) {
  return offset <= size && n <= size - offset;
}
}  // namespace

void MemoryReader::read(uint64_t offset, void* dst, size_t n) const {
  if (!in_range(offset, n, bytes_.size())) read_past_end(offset, n, bytes_.size());
  if (n > 0) std::memcpy(dst, bytes_.data() + offset, n);
}

void SubReader::read(uint64_t offset, void* dst, size_t n) const {
  if (!in_range(offset, n, size_)) read_past_end(offset, n, size_);
  parent_.read(offset_ + offset, dst, n);
}

FileReader::FileReader(const std::string& path, const std::string& who) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    throw std::invalid_argument(who + " cannot open " + path + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw std::invalid_argument(who + " cannot stat " + path + ": " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw std::invalid_argument(who + " " + path +
                                " is not a regular file (a directory, pipe or device); give the "
                                "path of a saved file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

void FileReader::read(uint64_t offset, void* dst, size_t n) const {
  if (!in_range(offset, n, size_)) read_past_end(offset, n, size_);
  auto* out = static_cast<char*>(dst);
  while (n > 0) {
    const size_t chunk = n < (size_t{1} << 30) ? n : (size_t{1} << 30);
    const ssize_t got = ::pread(fd_, out, chunk, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      throw std::runtime_error("[io] reading " + path_ + " at offset " + std::to_string(offset) +
                               " failed: " + std::strerror(err));
    }
    if (got == 0) {
      throw std::invalid_argument("[io] " + path_ + " ended at offset " + std::to_string(offset) +
                                  " while reading it (" + std::to_string(size_) +
                                  " bytes when opened); was it truncated meanwhile?");
    }
    out += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
}

void StringWriter::write(const void* data, size_t n) {
  if (n > 0) out_.append(static_cast<const char*>(data), n);
}

void StringWriter::write_at(uint64_t offset, const void* data, size_t n) {
  if (offset > out_.size() || n > out_.size() - offset) {
    throw std::logic_error("[io] StringWriter::write_at past the end");
  }
  if (n > 0) std::memcpy(out_.data() + offset, data, n);
}

FileWriter::FileWriter(const std::string& path, const std::string& who)
    : path_(path), who_(who) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    const int err = errno;
    throw std::runtime_error(who + " cannot create " + path + ": " + std::strerror(err));
  }
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void FileWriter::write(const void* data, size_t n) {
  write_at(pos_, data, n);
  pos_ += n;
}

void FileWriter::write_at(uint64_t offset, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const size_t chunk = n < (size_t{1} << 30) ? n : (size_t{1} << 30);
    const ssize_t put = ::pwrite(fd_, p, chunk, static_cast<off_t>(offset));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) {
      const int err = put < 0 ? errno : EIO;
      throw std::runtime_error(who_ + " writing " + path_ + " failed at offset " +
                               std::to_string(offset) + ": " + std::strerror(err) +
                               " (is the disk full?); the file is incomplete");
    }
    p += put;
    offset += static_cast<uint64_t>(put);
    n -= static_cast<size_t>(put);
  }
}

void FileWriter::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    throw std::runtime_error(who_ + " closing " + path_ + " failed: " + std::strerror(err) +
                             "; the file may be incomplete");
  }
}

std::string printable(std::string_view s, size_t max) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  out += s.size() > max ? "'..." : "'";
  return out;
}

}  // namespace tessera::detail::io
