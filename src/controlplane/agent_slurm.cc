// AgentService: the node's Slurm reports - each agent's own daemon state
// (`slurm_state`, with an event when its daemons restart or come back) and the
// controller's table of every Slurm node (`slurm_nodes`), kept in memory for the
// Slurm reconciler, the API and /metrics.
#include <spdlog/spdlog.h>

#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/agent_service_internal.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/slurm_plan.h"

namespace hpod::controlplane {

using nlohmann::json;
namespace proto = api::agentproto;

void AgentService::HandleSlurmState(const std::shared_ptr<Channel>& ch,
                                    const proto::SlurmStatus& status) {
  json state = status.ToJson();
  std::string before;
  {
    MutexLock lock(mu_);
    json& current = ch->slurm_state(*this);
    if (current == state) return;  // heartbeats repeat it
    if (current.is_object()) before = current.value("daemon", "");
    current = state;
  }
  const std::string& daemon = status.daemon;
  const bool trouble = daemon == "restarting" || daemon == "failed";
  const bool recovered = daemon == "running" && (before == "restarting" || before == "failed");
  if (trouble || recovered) {
    std::string text =
        trouble ? "Slurm: " + status.message
                : "Slurm: the node's " +
                      std::string(status.role == "controller" ? "slurmctld" : "Slurm daemons") +
                      " running again after " + std::to_string(status.restarts) + " restart(s)";
    Status s = store_.Write([&](store::WriteTx& tx) -> Status {
      HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, tx.GetCluster(ch->cluster_id));
      return RecordEvent(tx, clock_, c, NodeSubject(ch->group_name, ch->instance_id),
                         trouble ? EventLevel::kWarn : EventLevel::kInfo, text);
    });
    if (!s.ok()) spdlog::warn("slurm state of {}: {}", ch->instance_id, s.ToString());
  }
  if (on_change_) on_change_(ch->cluster_id);
}

void AgentService::HandleSlurmNodes(const std::shared_ptr<Channel>& ch,
                                    const proto::SlurmNodes& m) {
  // Only the controller's table counts: hpod drains, removes and declares nodes
  // Running by it, so another node's agent must not be able to stand in for it.
  std::string controller_group;
  Status s = store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(ch->cluster_id));
    HPOD_ASSIGN_OR_RETURN(controller_group, ControllerGroup(tx, ch->cluster_id, groups));
    return OkStatus();
  });
  if (!s.ok() || controller_group.empty() || controller_group != ch->group_name) {
    spdlog::warn("ignoring a Slurm node table from {} (group {}), which is not the controller",
                 ch->instance_id, ch->group_name);
    return;
  }
  SlurmNodesReport report;
  report.reporter = ch->instance_id;
  for (const auto& n : m.nodes) {
    report.nodes.push_back(slurm::SlurmNodeState{n.name, n.state, n.reason, n.slurmd_start_time});
  }
  report.Index();
  {
    MutexLock lock(mu_);
    slurm_nodes_[ch->cluster_id] = std::make_shared<const SlurmNodesReport>(std::move(report));
  }
  if (on_change_) on_change_(ch->cluster_id);
}

json AgentService::SlurmState(const std::string& instance_id) const {
  MutexLock lock(mu_);
  auto it = channels_.find(instance_id);
  if (it == channels_.end()) return nullptr;
  return it->second->slurm_state(*this);
}

std::optional<double> AgentService::ConnectedSince(const std::string& instance_id) const {
  MutexLock lock(mu_);
  auto it = channels_.find(instance_id);
  if (it == channels_.end()) return 0.0;  // not connected: known, and never "since"
  return it->second->connected_epoch;
}

std::optional<SlurmNodesReport> AgentService::SlurmNodes(const std::string& cluster_id) const {
  MutexLock lock(mu_);
  auto it = slurm_nodes_.find(cluster_id);
  if (it == slurm_nodes_.end()) return std::nullopt;
  return *it->second;
}

std::shared_ptr<const SlurmNodesReport> AgentService::SharedSlurmNodes(
    const std::string& cluster_id) const {
  MutexLock lock(mu_);
  auto it = slurm_nodes_.find(cluster_id);
  return it == slurm_nodes_.end() ? nullptr : it->second;
}

}  // namespace hpod::controlplane
