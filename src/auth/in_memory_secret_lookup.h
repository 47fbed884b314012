#pragma once

// A SecretLookup over a fixed map of access keys, for tests and for hpodd's
// static key file.
//
// Thread contract: immutable after construction; safe for concurrent use.

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "hpod/auth/sigv4.h"
#include "hpod/base/status.h"

namespace hpod::auth {

class InMemorySecretLookup final : public SecretLookup {
 public:
  // Access key id to secret access key.
  using SecretMap = std::map<std::string, std::string, std::less<>>;

  explicit InMemorySecretLookup(SecretMap secrets) : secrets_(std::move(secrets)) {}

  StatusOr<std::string> SecretFor(std::string_view access_key_id) const override {
    auto it = secrets_.find(access_key_id);
    // The key id is not secret, but the message stays generic: callers turn
    // kNotFound into AWS's UnrecognizedClientException text anyway.
    if (it == secrets_.end()) return NotFoundError("unknown access key");
    return it->second;
  }

 private:
  const SecretMap secrets_;
};

}  // namespace hpod::auth
