#pragma once

// Join tokens: what a person pastes on a machine so that its agent joins hpodd's
// pool (issue 25). One line, safe to paste through a terminal:
//
//   hpodjoin1.<CA pin: 64 lowercase hex>.<id: 8 lowercase hex>.<secret: 32 [A-Za-z0-9]>
//
// The pin (pki::CaPin) lets the agent trust hpodd's TLS certificate before it has
// the CA: it accepts a server whose chain ends in a CA with that SHA-256. The id is
// public: it names the token in the store, in logs and in `hpod` output. The secret
// proves the agent was given the token; hpodd keeps only HashJoinSecret(secret),
// so a copy of the store lets nobody join. 32 characters of 62 give ~190 bits.
//
// Thread contract: free functions over values; safe from any thread.

#include <string>
#include <string_view>

#include "hpod/base/status.h"

namespace hpod::auth {

inline constexpr std::string_view kJoinTokenPrefix = "hpodjoin1";
inline constexpr size_t kJoinTokenIdLength = 8;
inline constexpr size_t kJoinTokenSecretLength = 32;

struct JoinToken {
  std::string ca_pin;  // 64 lowercase hex
  std::string id;      // 8 lowercase hex
  std::string secret;  // 32 [A-Za-z0-9]; never logged
};

// Parses a pasted token; surrounding whitespace (a copied newline) is ignored and
// an upper-case pin is lowered. kInvalidArgument with one line naming the first
// part that is wrong — the prefix or version, the number of parts, the pin's
// length or characters, the id, the secret. The message never contains the secret.
StatusOr<JoinToken> ParseJoinToken(std::string_view text);

// The token's text; ParseJoinToken(FormatJoinToken(t)) == t for a well-formed t.
std::string FormatJoinToken(const JoinToken& token);

// A token with a new random id and secret (the OS CSPRNG) for the CA `ca_pin`.
JoinToken NewJoinToken(const std::string& ca_pin);

// What the store keeps of a secret: lowercase hex SHA-256 (64 characters).
std::string HashJoinSecret(std::string_view secret);

// Whether `secret` hashes to `secret_hash`, compared in constant time.
bool JoinSecretMatches(std::string_view secret, std::string_view secret_hash);

}  // namespace hpod::auth
