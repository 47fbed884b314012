#pragma once

// SigV4 signing keys kept between requests (VerifyOptions::signing_keys).

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>

#include "hpod/base/thread_annotations.h"

namespace hpod::auth {

// Signing keys (SigV4's HMAC chain over secret, date, region and service) kept
// by everything they are derived from, so that a key's requests of one day
// derive it once rather than four HMACs each. Keyed by the secret itself, so a
// rotated secret never meets an old key. At most kMaxEntries; when full it starts
// afresh (a day's scopes are few).
//
// Thread contract: thread-safe.
class SigningKeyCache {
 public:
  static constexpr size_t kMaxEntries = 256;
  std::string Get(std::string_view secret, std::string_view date, std::string_view region,
                  std::string_view service);
  size_t size() const;

 private:
  mutable Mutex mu_;
  std::unordered_map<std::string, std::string> keys_ GUARDED_BY(mu_);
};

}  // namespace hpod::auth
