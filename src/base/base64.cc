#include "hpod/base/base64.h"

#include <array>
#include <cstdint>
#include <cstdio>

namespace hpod {
namespace {

constexpr char kStandardAlphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr char kUrlAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

const char* Symbols(Base64Alphabet alphabet) {
  return alphabet == Base64Alphabet::kUrl ? kUrlAlphabet : kStandardAlphabet;
}

// Symbol -> 6-bit value, -1 for characters outside the alphabet.
std::array<int, 256> ReverseTable(Base64Alphabet alphabet) {
  std::array<int, 256> rev;
  rev.fill(-1);
  const char* symbols = Symbols(alphabet);
  for (int k = 0; k < 64; ++k) rev[static_cast<unsigned char>(symbols[k])] = k;
  return rev;
}

std::string Printable(unsigned char c) {
  if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
  char buf[8];
  std::snprintf(buf, sizeof(buf), "0x%02x", c);
  return buf;
}

}  // namespace

std::string Base64Encode(std::string_view bytes, const Base64Options& options) {
  const char* symbols = Symbols(options.alphabet);
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k])); };
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t v = b(i) << 16 | b(i + 1) << 8 | b(i + 2);
    for (int s = 18; s >= 0; s -= 6) out.push_back(symbols[(v >> s) & 63]);
  }
  if (size_t rest = bytes.size() - i; rest > 0) {
    uint32_t v = b(i) << 16;
    if (rest == 2) v |= b(i + 1) << 8;
    out.push_back(symbols[(v >> 18) & 63]);
    out.push_back(symbols[(v >> 12) & 63]);
    if (rest == 2) out.push_back(symbols[(v >> 6) & 63]);
    if (options.pad) out.append(rest == 2 ? "=" : "==");
  }
  return out;
}

StatusOr<std::string> Base64Decode(std::string_view text, const Base64Options& options) {
  const std::array<int, 256> rev = ReverseTable(options.alphabet);
  const char* alphabet_name = options.alphabet == Base64Alphabet::kUrl ? "url" : "standard";
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  size_t symbols = 0;
  size_t padding = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '=' && options.pad) {
      ++padding;
      continue;
    }
    const int v = rev[c];
    if (v < 0) {
      if (options.skip_unknown) continue;
      return InvalidArgumentError("invalid base64: character " + Printable(c) + " at offset " +
                                  std::to_string(i) + " is not in the " + alphabet_name +
                                  " alphabet");
    }
    if (padding > 0) {
      return InvalidArgumentError("invalid base64: data after padding at offset " +
                                  std::to_string(i));
    }
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    ++symbols;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (symbols % 4 == 1) {
    return InvalidArgumentError("invalid base64 length: " + std::to_string(symbols) +
                                " symbols leave one over, which encodes no byte");
  }
  if (options.pad && (symbols + padding) % 4 != 0) {
    return InvalidArgumentError("invalid base64 length: " + std::to_string(symbols) +
                                " symbols and " + std::to_string(padding) +
                                " '=' do not fill whole 4-character groups");
  }
  return out;
}

std::string Base64UrlEncode(std::string_view bytes) {
  return Base64Encode(bytes, {.alphabet = Base64Alphabet::kUrl, .pad = false});
}

StatusOr<std::string> Base64UrlDecode(std::string_view text) {
  return Base64Decode(text, {.alphabet = Base64Alphabet::kUrl, .pad = false});
}

}  // namespace hpod
