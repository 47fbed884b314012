#include "hpod/auth/signing_key_cache.h"

#include "hpod/auth/canonical.h"

namespace hpod::auth {

std::string SigningKeyCache::Get(std::string_view secret, std::string_view date,
                                 std::string_view region, std::string_view service) {
  // NUL separates the parts. The scope's parts hold none (the parser takes only
  // printable credentials), so the key reads back one way from its end even
  // were a secret to hold one.
  std::string key;
  key.reserve(secret.size() + date.size() + region.size() + service.size() + 3);
  key.append(secret).push_back('\0');
  key.append(date).push_back('\0');
  key.append(region).push_back('\0');
  key.append(service);
  {
    MutexLock lock(mu_);
    if (auto it = keys_.find(key); it != keys_.end()) return it->second;
  }
  std::string derived = internal::SigningKey(secret, date, region, service);
  MutexLock lock(mu_);
  if (keys_.size() >= kMaxEntries) keys_.clear();
  keys_.emplace(std::move(key), derived);
  return derived;
}

size_t SigningKeyCache::size() const {
  MutexLock lock(mu_);
  return keys_.size();
}

}  // namespace hpod::auth
