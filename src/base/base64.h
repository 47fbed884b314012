#pragma once

// Base64 (RFC 4648), the one implementation in hpod: the standard alphabet with
// padding for the CLI's botocore-compatible pagination tokens, the URL-safe
// alphabet without padding for page tokens, munge keys and ids.
//
// Thread contract: pure functions; safe from any thread.

#include <string>
#include <string_view>

#include "hpod/base/status.h"

namespace hpod {

enum class Base64Alphabet {
  kStandard,  // RFC 4648 §4: A-Z a-z 0-9 + /
  kUrl,       // RFC 4648 §5: A-Z a-z 0-9 - _
};

struct Base64Options {
  Base64Alphabet alphabet = Base64Alphabet::kStandard;
  // Encode: append '=' up to a multiple of 4 characters. Decode: '=' may end
  // the text and the symbols plus padding must fill whole 4-character groups;
  // when false, '=' is a bad character like any other outside the alphabet.
  bool pad = true;
  // Decode only: skip characters outside the alphabet instead of refusing them,
  // as Python's base64.b64decode(validate=False) does (botocore decodes the
  // CLI's --starting-token that way).
  bool skip_unknown = false;
};

// `bytes` encoded with `options.alphabet`, padded when `options.pad`.
std::string Base64Encode(std::string_view bytes, const Base64Options& options = {});

// The bytes `text` encodes. kInvalidArgument, naming the problem, for a
// character outside the alphabet (with its offset; unless skip_unknown), data
// after padding, or a length no encoding has (one symbol left over, or with
// `pad`, symbols plus padding that do not fill whole groups). Unused low bits of
// the last symbol are ignored.
StatusOr<std::string> Base64Decode(std::string_view text, const Base64Options& options = {});

// The URL-safe, unpadded form: {.alphabet = Base64Alphabet::kUrl, .pad = false}.
std::string Base64UrlEncode(std::string_view bytes);
StatusOr<std::string> Base64UrlDecode(std::string_view text);

}  // namespace hpod
