#pragma once

// hpod's own operations on nodes (src/api/hpod_extensions_model.json), served
// beside the SageMaker ones with the same protocol and authentication:
//   HpodStartSession  → a one-time WebSocket URL and token for a shell on a node
//                       (the shape of SSM's StartSession), recorded as an event;
//   HpodGetNodeLogs   → a node's lifecycle-script or agent log, resumable by token;
//   HpodListSlurmNodes → Slurm's view of the cluster's nodes (state, reason) as the
//                       controller's agent last reported it; Available=false until
//                       one has;
//   HpodInjectFault    → a fault in a launched node through the provider (admin
//                       keys only: it is not in ClusterApi::IsReadOnly's set),
//                       recorded as a Warn event of the node;
//   HpodListTrainingRuns, HpodGetTrainingMetrics → served by TrainingApi
//                       (training_api.h): /fsx's training runs, read by an agent;
// and hpod's members of SageMaker's answers that come from the agents (AddNodeFacts).
//
// Thread contract: safe for concurrent calls.

#include <nlohmann/json.hpp>
#include <string>

#include "hpod/api/model.h"
#include "hpod/base/clock.h"
#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/node_logs.h"
#include "hpod/controlplane/training_api.h"
#include "hpod/provider/provider.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

struct Caller {
  std::string access_key_id;  // "" with --insecure-no-auth
  std::string host;           // Host header the request came to (for StreamUrl)
  bool tls = false;           // it came over TLS: StreamUrl is wss://
  // The key's role is admin (or hpodd runs --insecure-no-auth): root shells.
  // Keys of the user role open shells as a named user other than root only.
  bool admin = false;
};

class NodeApi {
 public:
  // `agents` may be null (no provider with agents): sessions then fail clearly
  // and HpodListSlurmNodes answers Available=false. `provider` may be null (none
  // configured): HpodInjectFault then fails clearly. Both are borrowed.
  NodeApi(store::Store& store, const Clock& clock, AgentService* agents, NodeLogs& logs,
          provider::Provider* provider);

  static bool Handles(const std::string& operation);
  StatusOr<nlohmann::ordered_json> Call(const api::Operation& operation,
                                        const nlohmann::json& request, const Caller& caller);

  // Adds what hpodd knows of a node only in memory to ClusterApi's answer to
  // `operation`: DescribeClusterNode gets NodeDetails.HpodClockOffsetSeconds
  // (AgentService::ClockOffset, to the millisecond) while it is known. Other
  // answers are left as they are.
  void AddNodeFacts(const std::string& operation, nlohmann::ordered_json& response) const;

 private:
  StatusOr<nlohmann::ordered_json> StartSession(const nlohmann::json& req, const Caller& caller);
  StatusOr<nlohmann::ordered_json> GetNodeLogs(const nlohmann::json& req);
  StatusOr<nlohmann::ordered_json> ListSlurmNodes(const nlohmann::json& req);
  StatusOr<nlohmann::ordered_json> InjectFault(const nlohmann::json& req);

  store::Store& store_;
  const Clock& clock_;
  AgentService* const agents_;
  NodeLogs& logs_;
  provider::Provider* const provider_;
  TrainingApi training_;
};

}  // namespace hpod::controlplane
