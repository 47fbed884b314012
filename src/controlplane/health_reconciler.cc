#include "hpod/controlplane/health_reconciler.h"

#include <map>

#include "hpod/api/states.h"

namespace hpod::controlplane {

std::string HealthKey(const std::string& cluster_id) {
  return std::string(kHealthKeyPrefix) + cluster_id;
}

std::string_view HealthVerdictName(HealthVerdict v) {
  switch (v) {
    case HealthVerdict::kUnknown:
      return "Unknown";
    case HealthVerdict::kHealthy:
      return "Healthy";
    case HealthVerdict::kReboot:
      return "Reboot";
    case HealthVerdict::kReplace:
      return "Replace";
  }
  return "Unknown";
}

StatusOr<std::vector<NodeHealth>> HealthReconciler::Judge(const std::string& cluster_id) {
  std::vector<NodeHealth> out;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto agents, tx.ListAgents(cluster_id));
    std::map<std::string, const store::AgentRecord*> by_id;
    for (const auto& a : agents) by_id[a.instance_id] = &a;
    for (const auto& n : nodes) {
      NodeHealth h;
      h.instance_id = n.instance_id;
      // No health checks yet: a running node with an agent is healthy, anything
      // else has nothing to judge by.
      if (api::Is(n.status, api::ClusterInstanceStatus::kRunning) && by_id.count(n.instance_id)) {
        h.verdict = HealthVerdict::kHealthy;
      }
      out.push_back(std::move(h));
    }
    return OkStatus();
  }));
  return out;
}

WorkQueue::Result HealthReconciler::Reconcile(const std::string& cluster_id) {
  auto verdicts = Judge(cluster_id);
  if (!verdicts.ok() && verdicts.status().code() == StatusCode::kNotFound) return {OkStatus(), {}};
  if (!verdicts.ok()) return {verdicts.status(), {}};
  // No verdict asks for an action yet (see the header); recovery acts here.
  return {OkStatus(), {}};
}

}  // namespace hpod::controlplane
