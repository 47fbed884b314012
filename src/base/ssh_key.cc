#include "hpod/base/ssh_key.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cstdint>
#include <memory>

#include "hpod/base/base64.h"
#include "hpod/base/crypto.h"

namespace hpod {

namespace {

constexpr std::string_view kBegin = "-----BEGIN OPENSSH PRIVATE KEY-----\n";
constexpr std::string_view kEnd = "-----END OPENSSH PRIVATE KEY-----\n";
constexpr std::string_view kMagic{"openssh-key-v1\0", 15};
constexpr std::string_view kType = "ssh-ed25519";

void PutU32(std::string& out, uint32_t v) {
  for (int shift : {24, 16, 8, 0}) out += static_cast<char>((v >> shift) & 0xff);
}

// RFC 4251 "string": a uint32 length, then the bytes.
void PutString(std::string& out, std::string_view s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

std::string PublicBlob(std::string_view pub) {
  std::string blob;
  PutString(blob, kType);
  PutString(blob, pub);
  return blob;
}

// Reads one "string" at `*pos`; false past the end.
bool GetString(std::string_view in, size_t* pos, std::string_view* out) {
  if (in.size() - *pos < 4 || *pos > in.size()) return false;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<uint8_t>(in[*pos + i]);
  *pos += 4;
  if (in.size() - *pos < n) return false;
  *out = in.substr(*pos, n);
  *pos += n;
  return true;
}

}  // namespace

StatusOr<SshKeyPair> GenerateEd25519SshKey(std::string_view comment) {
  if (comment.find('\n') != std::string_view::npos) {
    return InvalidArgumentError("an SSH key comment has no newline");
  }
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
      EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr), &EVP_PKEY_CTX_free);
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &raw) != 1) {
    return InternalError("OpenSSL could not make an Ed25519 key");
  }
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(raw, &EVP_PKEY_free);
  unsigned char seed[32], pub[32];
  size_t seed_len = sizeof(seed), pub_len = sizeof(pub);
  if (EVP_PKEY_get_raw_private_key(key.get(), seed, &seed_len) != 1 ||
      EVP_PKEY_get_raw_public_key(key.get(), pub, &pub_len) != 1 || seed_len != 32 ||
      pub_len != 32) {
    return InternalError("OpenSSL gave no raw Ed25519 key");
  }
  const std::string_view pub_bytes(reinterpret_cast<const char*>(pub), 32);
  const std::string blob = PublicBlob(pub_bytes);

  // openssh-key-v1 (OpenSSH's PROTOCOL.key): unencrypted, one key. The private
  // section repeats a random check word, then the key (seed || public) and the
  // comment, padded 1, 2, 3... to the 8-byte block of the "none" cipher.
  std::string priv;
  const std::string check = RandomBytes(4);
  priv += check;
  priv += check;
  PutString(priv, kType);
  PutString(priv, pub_bytes);
  PutString(priv, std::string(reinterpret_cast<const char*>(seed), 32) + std::string(pub_bytes));
  PutString(priv, comment);
  for (char pad = 1; priv.size() % 8 != 0; ++pad) priv += pad;
  std::string file(kMagic);
  PutString(file, "none");  // cipher
  PutString(file, "none");  // kdf
  PutString(file, "");      // kdf options
  PutU32(file, 1);
  PutString(file, blob);
  PutString(file, priv);
  OPENSSL_cleanse(seed, sizeof(seed));

  SshKeyPair out;
  const std::string b64 = Base64Encode(file);
  out.private_key = std::string(kBegin);
  for (size_t i = 0; i < b64.size(); i += 70) out.private_key += b64.substr(i, 70) + "\n";
  out.private_key += kEnd;
  out.public_key = std::string(kType) + " " + Base64Encode(blob);
  if (!comment.empty()) out.public_key += " " + std::string(comment);
  return out;
}

StatusOr<std::string> SshPublicKeyOf(std::string_view private_key) {
  if (private_key.substr(0, kBegin.size()) != kBegin) {
    return InvalidArgumentError("not an OpenSSH private key");
  }
  std::string body;
  for (char c : private_key.substr(kBegin.size())) {
    if (c == '-') break;
    if (c != '\n') body += c;
  }
  HPOD_ASSIGN_OR_RETURN(std::string file, Base64Decode(body));
  if (file.substr(0, kMagic.size()) != kMagic) return InvalidArgumentError("not openssh-key-v1");
  size_t pos = kMagic.size();
  std::string_view cipher, kdf, kdf_options, blob;
  if (!GetString(file, &pos, &cipher) || !GetString(file, &pos, &kdf) ||
      !GetString(file, &pos, &kdf_options) || file.size() - pos < 4) {
    return InvalidArgumentError("a truncated OpenSSH private key");
  }
  pos += 4;  // the number of keys
  if (!GetString(file, &pos, &blob)) return InvalidArgumentError("a truncated OpenSSH key");
  size_t bpos = 0;
  std::string_view type, pub;
  if (!GetString(blob, &bpos, &type) || type != kType || !GetString(blob, &bpos, &pub) ||
      pub.size() != 32) {
    return InvalidArgumentError("not an Ed25519 key");
  }
  return std::string(kType) + " " + Base64Encode(blob);
}

}  // namespace hpod
