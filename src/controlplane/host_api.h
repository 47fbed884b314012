#pragma once

// hpod's operations on join tokens and hosts (issue 25): HpodCreateJoinToken,
// HpodRevokeJoinToken, HpodListJoinTokens, HpodListHosts, HpodRevokeHost. The
// model (api/hpod_extensions_model.json) has checked each request's shape; this
// turns it into JoinService calls and the store's rows into answers. Tokens and
// hosts are admin business, except HpodListHosts (ClusterApi::IsReadOnly).
//
// Thread contract: thread-safe (JoinService is; the callbacks must be).

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/controlplane/join_service.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

class HostApi {
 public:
  // `connected(host)`: whether its agent holds a channel now. `disconnect(host)`:
  // closes that channel (after HpodRevokeHost, whose certificate the next
  // connection would be refused for anyway).
  HostApi(store::Store& store, const Clock& clock, JoinService& joins,
          std::function<bool(const store::HostRecord&)> connected,
          std::function<void(const store::HostRecord&)> disconnect);

  static bool Handles(const std::string& operation);
  StatusOr<nlohmann::ordered_json> Call(const std::string& operation, const nlohmann::json& req);

 private:
  StatusOr<nlohmann::ordered_json> CreateJoinToken(const nlohmann::json& req);
  StatusOr<nlohmann::ordered_json> RevokeJoinToken(const nlohmann::json& req);
  StatusOr<nlohmann::ordered_json> ListJoinTokens();
  StatusOr<nlohmann::ordered_json> ListHosts(const nlohmann::json& req);
  StatusOr<nlohmann::ordered_json> RevokeHost(const nlohmann::json& req);

  store::Store& store_;
  const Clock& clock_;
  JoinService& joins_;
  std::function<bool(const store::HostRecord&)> connected_;
  std::function<void(const store::HostRecord&)> disconnect_;
};

}  // namespace hpod::controlplane
