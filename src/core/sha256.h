// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): the ring authenticates connections with the
// job token (distributed/ring/handshake.cpp), the CPU JIT names its kernels by their source. Self-contained: no crypto library dependency.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::detail {

using Digest256 = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t len);
  void update(std::string_view s) { update(s.data(), s.size()); }
  Digest256 finish();  // the object must not be updated afterwards

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

Digest256 sha256(const void* data, size_t len);
Digest256 sha256(std::string_view s);
Digest256 hmac_sha256(const void* key, size_t key_len, const void* msg, size_t msg_len);
Digest256 hmac_sha256(std::string_view key, std::string_view msg);
std::string to_hex(const uint8_t* data, size_t len);
inline std::string to_hex(const Digest256& d) { return to_hex(d.data(), d.size()); }
// Comparison whose time does not depend on where the inputs differ.
bool constant_time_equal(const uint8_t* a, const uint8_t* b, size_t len);

}  // namespace tessera::detail
