#pragma once

// NextToken values: opaque to clients, bound to the operation and its filters,
// and tamper-checked with an HMAC under a secret the store keeps. A token whose
// MAC fails, that was issued for another operation or other filters, or that is
// malformed is answered with ValidationException, never misread.
//
// Thread contract: immutable after construction; thread-safe.

#include <nlohmann/json.hpp>
#include <string>

#include "hpod/base/status.h"

namespace hpod::controlplane {

class PageTokenCodec {
 public:
  explicit PageTokenCodec(std::string secret) : secret_(std::move(secret)) {}

  // `scope` names the operation and its filters (e.g. a hash of the request minus
  // NextToken/MaxResults); `position` is where the next page starts.
  std::string Encode(const std::string& scope, const nlohmann::json& position) const;
  StatusOr<nlohmann::json> Decode(const std::string& scope, const std::string& token) const;

  // A stable scope string for `request` with the pagination members removed.
  static std::string ScopeOf(const std::string& operation, const nlohmann::json& request);

 private:
  std::string secret_;
};

}  // namespace hpod::controlplane
