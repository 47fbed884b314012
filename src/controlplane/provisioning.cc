#include "hpod/controlplane/provisioning.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "hpod/api/states.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/host_states.h"
#include "hpod/controlplane/ids.h"
#include "hpod/controlplane/recovery.h"
#include "hpod/controlplane/slurm_plan.h"
#include "hpod/controlplane/software_update.h"

namespace hpod::controlplane {

using api::ClusterInstanceStatus;
using store::NodeRecord;

bool IsContinuous(const store::ClusterRecord& cluster) {
  auto it = cluster.spec.find("NodeProvisioningMode");
  return it != cluster.spec.end() && it->is_string() && *it == "Continuous";
}

std::vector<NodeRecord> NewNodeRows(const store::ClusterRecord& cluster, const std::string& group,
                                    const std::vector<NodeRecord>& group_nodes, int count,
                                    double now) {
  std::set<int> used;
  for (const auto& n : group_nodes) used.insert(n.ordinal);
  std::vector<NodeRecord> out;
  int ordinal = 1;
  for (int i = 0; i < count; ++i) {
    while (used.count(ordinal)) ++ordinal;
    used.insert(ordinal);
    NodeRecord n;
    n.instance_id = NewInstanceId();
    n.cluster_id = cluster.id;
    n.group_name = group;
    n.ordinal = ordinal;
    n.status = api::NameString(ClusterInstanceStatus::kPending);
    n.launch_time = now;
    n.logical_id = NewNodeLogicalId(group + "-" + std::to_string(ordinal));
    n.created_generation = cluster.generation;
    out.push_back(std::move(n));
  }
  return out;
}

std::chrono::milliseconds RetryDelay(const ProvisioningRetryOptions& options, int attempt) {
  const int doublings = std::clamp(attempt - 1, 0, 30);
  const double ms = static_cast<double>(options.base_delay.count()) * std::pow(2.0, doublings);
  return std::chrono::milliseconds(
      static_cast<int64_t>(std::min(ms, static_cast<double>(options.max_delay.count()))));
}

bool FailedToProvision(const NodeRecord& node,
                       const std::map<std::string, store::AgentRecord>& agents) {
  if (node.remove || !api::Is(node.status, ClusterInstanceStatus::kFailure)) return false;
  auto a = agents.find(node.instance_id);
  return a == agents.end() || api::Parse<api::LifecycleState>(a->second.lifecycle_state) !=
                                  api::LifecycleState::kSucceeded;
}

StatusOr<bool> ProvisioningRetry::Step(const store::ClusterRecord& cluster,
                                       const std::vector<store::GroupRecord>& groups,
                                       const std::vector<NodeRecord>& nodes,
                                       const std::map<std::string, store::AgentRecord>& agents,
                                       const std::set<std::string>& recovering) {
  if (provider_ == nullptr || !IsContinuous(cluster) ||
      api::Is(cluster.status, api::ClusterStatus::kDeleting) ||
      api::Is(cluster.status, api::ClusterStatus::kFailed)) {
    return false;
  }
  std::vector<const NodeRecord*> failed;
  for (const auto& n : nodes) {
    if (FailedToProvision(n, agents) && !recovering.count(n.instance_id)) failed.push_back(&n);
  }
  if (failed.empty()) return false;
  std::optional<std::set<std::string>> priority;
  std::set<std::string> deleting;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(priority, PriorityGroups(tx, cluster.id, groups));
    return OkStatus();
  }));
  for (const auto& g : groups) {
    if (g.deleting) deleting.insert(g.name);
  }
  bool changed = false;
  for (const NodeRecord* f : failed) {
    // A priority node is never retried (rollup.h fails a cluster still Creating
    // for it); nor is any node while the roles are unknown, as it may be one.
    if (!priority || priority->count(f->group_name) || deleting.count(f->group_name)) continue;
    // One node's provider error does not hold up the others: the next pass
    // tries it again (Terminate and Describe are idempotent).
    auto gone = provider::TerminateAndCheckGone(*provider_, f->instance_id);
    if (!gone.ok()) {
      spdlog::warn("retrying {} of cluster {}: {}", f->instance_id, cluster.name,
                   gone.status().ToString());
      continue;
    }
    if (!*gone) continue;  // terminating; the next pass swaps the row
    const double now = clock_.NowEpochSeconds();
    NodeRecord next = *f;
    if (!provider_->Environment().replacement_keeps_address) {
      // Another machine with another address: the node gets the name of its new
      // address, as any new node does (Slurm learns it from slurm.conf).
      next.private_ip.clear();
      next.hostname.clear();
    }
    next.instance_id = NewInstanceId();
    next.status = api::NameString(ClusterInstanceStatus::kPending);
    next.launched = false;
    next.attempt = f->attempt + 1;
    const auto delay = RetryDelay(options_, next.attempt);
    next.not_before = now + static_cast<double>(delay.count()) / 1000.0;
    // The launch time is when it will launch: the agent's registration and
    // Slurm's ready timeouts count from it.
    next.launch_time = next.not_before;
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%.0f", static_cast<double>(delay.count()) / 1000.0);
    const std::string name = f->group_name + "-" + std::to_string(f->ordinal);
    next.message = "Launch attempt " + std::to_string(next.attempt + 1) + " of " + name + " in " +
                   secs + " s; attempt " + std::to_string(f->attempt + 1) + " (" + f->instance_id +
                   ") failed: " + f->message;
    HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
      auto current = tx.GetNodeById(f->instance_id);
      // Removed or changed meanwhile (BatchDelete, scale-down): the newer decision
      // stands; the machine is gone either way.
      if (!current.ok() && current.status().code() == StatusCode::kNotFound) return OkStatus();
      HPOD_RETURN_IF_ERROR(current.status());
      if (current->remove || !api::Is(current->status, ClusterInstanceStatus::kFailure)) {
        return OkStatus();
      }
      // A recovery a user asked for since this pass read them (BatchReplace of
      // the failed node) owns the node now.
      HPOD_ASSIGN_OR_RETURN(auto recoveries, ActiveRecoveries(tx, cluster.id));
      for (const auto& r : recoveries) {
        if (r.instance_id == f->instance_id) return OkStatus();
      }
      HPOD_RETURN_IF_ERROR(tx.DeleteNode(f->instance_id));
      HPOD_RETURN_IF_ERROR(ForgetNodeSoftware(tx, cluster.id, f->instance_id));
      // A failed launch is seldom its host's alone (a broken script, an agent
      // that cannot reach hpodd fail on every host alike): a pool host goes back
      // to the pool, as after an all-or-nothing failure; quarantining it would
      // empty the pool one retry at a time.
      HPOD_RETURN_IF_ERROR(EndHostTenure(
          tx, clock_, f->instance_id,
          "instance " + f->instance_id + " failed to provision and was terminated for a retry",
          /*failed=*/false));
      HPOD_RETURN_IF_ERROR(tx.PutNode(next));
      HPOD_RETURN_IF_ERROR(RecordEvent(
          tx, clock_, cluster, NodeSubject(f->group_name, f->instance_id), EventLevel::kWarn,
          "Instance terminated after it failed to provision: " + f->message));
      changed = true;
      return RecordEvent(tx, clock_, cluster, NodeSubject(next.group_name, next.instance_id),
                         EventLevel::kInfo,
                         "Instance " + next.instance_id + " is Pending: " + next.message +
                             " (continuous provisioning, NodeLogicalId " + next.logical_id + ")");
    }));
  }
  return changed;
}

}  // namespace hpod::controlplane
