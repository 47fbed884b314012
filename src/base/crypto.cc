#include "hpod/base/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace hpod {

std::string Sha256(std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out, &len, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<char*>(out), len);
}

StatusOr<std::string> Sha256FileHex(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) {
    const int err = errno;
    std::string what = "reading " + path + ": " + std::strerror(err);
    return err == ENOENT ? NotFoundError(what) : InternalError(what);
  }
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return InternalError("SHA-256 context");
  }
  std::string buf(1 << 20, '\0');
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) {
    EVP_DigestUpdate(ctx.get(), buf.data(), n);
  }
  if (std::ferror(f.get())) return InternalError("reading " + path + ": I/O error");
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), out, &len);
  return HexEncode(std::string_view(reinterpret_cast<char*>(out), len));
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

static int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

StatusOr<std::string> HexDecode(std::string_view hex) {
  if (hex.size() % 2 != 0) return InvalidArgumentError("odd-length hex string");
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = HexValue(hex[i]), lo = HexValue(hex[i + 1]);
    if (hi < 0 || lo < 0) return InvalidArgumentError("invalid hex digit");
    out.push_back(static_cast<char>(hi << 4 | lo));
  }
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string NewUuid4() {
  std::string b = RandomBytes(16);
  b[6] = static_cast<char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string h = HexEncode(b);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20);
}

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(out.data() + got, n - got, 0);
    if (r > 0) got += static_cast<size_t>(r);
  }
  return out;
}

std::string RandomString(size_t n, std::string_view alphabet) {
  std::string out;
  out.reserve(n);
  // Largest multiple of alphabet.size() that fits a byte: rejecting above it
  // keeps every character equally likely.
  const unsigned limit = 256 - 256 % alphabet.size();
  while (out.size() < n) {
    for (unsigned char c : RandomBytes(n * 2)) {
      if (c >= limit) continue;
      out.push_back(alphabet[c % alphabet.size()]);
      if (out.size() == n) break;
    }
  }
  return out;
}

}  // namespace hpod
