#include "hpod/auth/join_token.h"

#include <vector>

#include "hpod/base/crypto.h"

namespace hpod::auth {
namespace {

constexpr std::string_view kAlphanumeric =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
constexpr size_t kPinLength = 64;

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
bool IsAlnum(char c) { return kAlphanumeric.find(c) != std::string_view::npos; }

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t dot = s.find(sep, start);
    parts.push_back(s.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

}  // namespace

StatusOr<JoinToken> ParseJoinToken(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  const size_t first = text.find_first_not_of(kSpace);
  text = first == std::string_view::npos
             ? std::string_view()
             : text.substr(first, text.find_last_not_of(kSpace) - first + 1);
  const std::string shape = "(hpodjoin1.<CA pin>.<id>.<secret>)";
  std::vector<std::string_view> parts = Split(text, '.');
  if (parts[0] != kJoinTokenPrefix) {
    if (parts[0].substr(0, 8) == "hpodjoin") {
      return InvalidArgumentError("join token version '" + std::string(parts[0].substr(8)) +
                                  "' is not supported; this hpod reads " +
                                  std::string(kJoinTokenPrefix) + " tokens");
    }
    return InvalidArgumentError("not a join token: it does not start with " +
                                std::string(kJoinTokenPrefix) + ". " + shape);
  }
  if (parts.size() != 4) {
    return InvalidArgumentError("join token has " + std::to_string(parts.size()) +
                                " dot-separated parts, not 4 " + shape);
  }
  JoinToken token;
  token.ca_pin = std::string(parts[1]);
  for (char& c : token.ca_pin) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  }
  if (token.ca_pin.size() != kPinLength) {
    return InvalidArgumentError("join token CA pin has " + std::to_string(token.ca_pin.size()) +
                                " characters, not 64 (hex SHA-256 of the CA certificate)");
  }
  for (char c : token.ca_pin) {
    if (!IsLowerHex(c)) return InvalidArgumentError("join token CA pin is not hexadecimal");
  }
  token.id = std::string(parts[2]);
  bool id_ok = token.id.size() == kJoinTokenIdLength;
  for (char c : token.id) id_ok = id_ok && IsLowerHex(c);
  if (!id_ok) {
    return InvalidArgumentError("join token id is not 8 lowercase hexadecimal characters (got " +
                                std::to_string(token.id.size()) + " characters)");
  }
  token.secret = std::string(parts[3]);
  bool secret_ok = token.secret.size() == kJoinTokenSecretLength;
  for (char c : token.secret) secret_ok = secret_ok && IsAlnum(c);
  if (!secret_ok) {
    // Its length only: the secret itself must not reach a log.
    return InvalidArgumentError("join token secret is not 32 letters and digits (got " +
                                std::to_string(token.secret.size()) + " characters)");
  }
  return token;
}

std::string FormatJoinToken(const JoinToken& token) {
  return std::string(kJoinTokenPrefix) + "." + token.ca_pin + "." + token.id + "." + token.secret;
}

JoinToken NewJoinToken(const std::string& ca_pin) {
  JoinToken token;
  token.ca_pin = ca_pin;
  token.id = HexEncode(RandomBytes(kJoinTokenIdLength / 2));
  token.secret = RandomString(kJoinTokenSecretLength, kAlphanumeric);
  return token;
}

std::string HashJoinSecret(std::string_view secret) { return HexEncode(Sha256(secret)); }

bool JoinSecretMatches(std::string_view secret, std::string_view secret_hash) {
  return ConstantTimeEquals(HashJoinSecret(secret), secret_hash);
}

}  // namespace hpod::auth
