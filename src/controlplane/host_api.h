#pragma once

// hpod's operations on join tokens and hosts (issues 25, 26): HpodCreateJoinToken,
// HpodRevokeJoinToken, HpodListJoinTokens, HpodListHosts, HpodDescribeHost,
// HpodReleaseHost, HpodRetireHost, HpodRevokeHost. The model
// (api/hpod_extensions_model.json) has checked each request's shape; this turns
// it into JoinService calls and host state changes (host_states.h), and the
// store's rows into answers. Tokens and hosts are admin business, except
// HpodListHosts and HpodDescribeHost (ClusterApi::IsReadOnly).
//
// Thread contract: thread-safe (JoinService is; the callbacks must be).

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "hpod/api/agent_protocol.h"
#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/controlplane/join_service.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

struct HostApiHooks {
  // Whether the host's agent holds a channel now.
  std::function<bool(const store::HostRecord&)> connected;
  // Closes that channel (after HpodRevokeHost, whose certificate the next
  // connection would be refused for anyway).
  std::function<void(const store::HostRecord&)> disconnect;
  // The latest health report of the agent serving an instance, if any.
  std::function<std::optional<api::agentproto::HealthReport>(const std::string& instance_id)>
      health;
};

class HostApi {
 public:
  // `joins` is null in an hpodd without the agents' listener (--agent-listen):
  // the hosts of earlier runs are read, released, retired and revoked all the
  // same, and what needs the CA (join tokens) is refused with what to do.
  HostApi(store::Store& store, const Clock& clock, JoinService* joins, HostApiHooks hooks);

  static bool Handles(const std::string& operation);
  StatusOr<nlohmann::ordered_json> Call(const std::string& operation, const nlohmann::json& req);

 private:
  StatusOr<nlohmann::ordered_json> CreateJoinToken(const nlohmann::json& req);
  StatusOr<nlohmann::ordered_json> RevokeJoinToken(const nlohmann::json& req);
  StatusOr<nlohmann::ordered_json> ListJoinTokens();
  StatusOr<nlohmann::ordered_json> ListHosts(const nlohmann::json& req);
  StatusOr<nlohmann::ordered_json> DescribeHost(const nlohmann::json& req);
  // HpodReleaseHost (Quarantined or Retired → Spare) and HpodRetireHost.
  StatusOr<nlohmann::ordered_json> SetHostState(const std::string& op, const nlohmann::json& req);
  StatusOr<nlohmann::ordered_json> RevokeHost(const nlohmann::json& req);

  store::Store& store_;
  const Clock& clock_;
  // The JoinService, or the one-line refusal when there is none.
  StatusOr<JoinService*> Joins();

  JoinService* const joins_;
  const HostApiHooks hooks_;
};

}  // namespace hpod::controlplane
