#pragma once

// Hashing, MACs, encodings and randomness used across hpod (SigV4, tokens, ids).
// Backed by OpenSSL 3. All functions are pure or use the OS CSPRNG; thread-safe.

#include <cstdint>
#include <string>
#include <string_view>

// Base64UrlEncode/Base64UrlDecode live in base64.h; included here for the
// callers that still reach them through this header.
#include "hpod/base/base64.h"
#include "hpod/base/status.h"

namespace hpod {

// Raw 32-byte SHA-256 digest of `data`.
std::string Sha256(std::string_view data);
// Lowercase hex SHA-256 of the file at `path`, read in chunks (a program of tens
// of MiB is never held whole). kNotFound when it does not exist.
StatusOr<std::string> Sha256FileHex(const std::string& path);
// Raw 32-byte HMAC-SHA256 of `data` under `key`.
std::string HmacSha256(std::string_view key, std::string_view data);

std::string HexEncode(std::string_view bytes);  // lowercase
StatusOr<std::string> HexDecode(std::string_view hex);

// Constant-time equality (for signatures and secrets).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// `n` bytes from the OS CSPRNG.
std::string RandomBytes(size_t n);
// An RFC 4122 version-4 UUID, lowercase ("1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b").
std::string NewUuid4();
// `n` characters drawn uniformly from `alphabet` (rejection sampling, no modulo bias).
std::string RandomString(size_t n, std::string_view alphabet);

}  // namespace hpod
