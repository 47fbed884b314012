#include "hpod/controlplane/cluster_reconciler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>

#include "hpod/api/states.h"
#include "hpod/controlplane/deep_health.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/provisioning.h"

namespace hpod::controlplane {

using api::ClusterInstanceStatus;
using api::ClusterStatus;
using api::Is;
using store::ClusterRecord;
using store::GroupRecord;
using store::NodeRecord;

namespace {

std::vector<NodeRecord> NodesOf(const std::vector<NodeRecord>& nodes, const std::string& group) {
  std::vector<NodeRecord> out;
  for (const auto& n : nodes) {
    if (n.group_name == group) out.push_back(n);
  }
  return out;
}

}  // namespace

ClusterReconciler::ClusterReconciler(store::Store& store, provider::Provider* provider,
                                     const Clock& clock, const ControlPlaneOptions& options,
                                     std::function<std::string(const std::string&)> bootstrap_token,
                                     SlurmAgents* slurm_agents)
    : store_(store),
      provider_(provider),
      clock_(clock),
      options_(options),
      slurm_(store, clock, options_, slurm_agents),
      nodes_(provider, clock, options_, std::move(bootstrap_token), slurm_),
      recovery_(store, provider, clock, slurm_agents),
      retry_(store, provider, clock, options_.retry),
      software_(store, clock),
      rollup_(store, clock) {
  nodes_.SetJoinedAt([this](const std::string& instance_id) -> std::optional<double> {
    std::optional<double> joined;
    Status s = store_.Read([&](store::ReadTx& tx) -> Status {
      auto host = tx.GetHostByInstanceId(instance_id);
      if (host.ok()) joined = host->joined;
      return host.ok() || host.status().code() == StatusCode::kNotFound ? OkStatus()
                                                                        : host.status();
    });
    if (!s.ok()) spdlog::warn("host of {}: {}", instance_id, s.ToString());
    return joined;
  });
}

WorkQueue::Result ClusterReconciler::Reconcile(const std::string& cluster_id) {
  Status s = PlanNodes(cluster_id);
  if (s.code() == StatusCode::kNotFound) return {OkStatus(), {}};  // deleted
  if (!s.ok()) return {s, {}};
  bool slurm_busy = false;
  auto changes = ActOnNodes(cluster_id, &slurm_busy);
  if (!changes.ok()) {
    if (changes.status().code() == StatusCode::kNotFound) return {OkStatus(), {}};
    return {changes.status(), {}};
  }
  auto converged = rollup_.RecordAndRollUp(cluster_id, *changes);
  if (!converged.ok()) {
    if (converged.status().code() == StatusCode::kNotFound) return {OkStatus(), {}};
    return {converged.status(), {}};
  }
  // A converged cluster is revisited by the daemon's periodic resync; one still
  // converging is polled.
  return {OkStatus(),
          *converged && !slurm_busy ? std::chrono::milliseconds(0) : options_.poll_interval};
}

// Phase 1: write intents. Decides which nodes should exist (creating rows for
// missing ones) and which should go (marking them), from a fresh read inside the
// transaction so a concurrent handler's change is never overwritten.
Status ClusterReconciler::PlanNodes(const std::string& cluster_id) {
  return store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(ClusterRecord c, tx.GetCluster(cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(cluster_id));
    auto mark_remove = [&](NodeRecord n) -> Status {
      if (n.remove) return OkStatus();
      n.remove = true;
      return tx.PutNode(n);
    };
    if (Is(c.status, ClusterStatus::kDeleting) || Is(c.status, ClusterStatus::kFailed)) {
      for (const auto& n : nodes) HPOD_RETURN_IF_ERROR(mark_remove(n));
      return OkStatus();
    }
    for (const GroupRecord& g : groups) {
      std::vector<NodeRecord> mine = NodesOf(nodes, g.name);
      if (g.deleting) {
        for (const auto& n : mine) HPOD_RETURN_IF_ERROR(mark_remove(n));
        continue;
      }
      // A node in Failure keeps its slot: it is not replaced here (replacing a
      // node is node recovery's decision), and it blocks nothing else — scale-up
      // launches the missing nodes beside it, and during provisioning the roll-up
      // fails (or rolls back) the operation that created it.
      std::vector<NodeRecord> live;
      for (const auto& n : mine) {
        if (!n.remove) live.push_back(n);
      }
      int have = static_cast<int>(live.size());
      if (have < g.target_count) {
        for (const NodeRecord& n :
             NewNodeRows(c, g.name, mine, g.target_count - have, clock_.NowEpochSeconds())) {
          HPOD_RETURN_IF_ERROR(tx.PutNode(n));
          HPOD_RETURN_IF_ERROR(RecordEvent(tx, clock_, c, NodeSubject(g.name, n.instance_id),
                                           EventLevel::kInfo,
                                           "Instance " + g.name + "-" + std::to_string(n.ordinal) +
                                               " is Pending: launch requested"));
        }
      } else if (have > g.target_count) {
        // Scale down: failed nodes first, then not-yet-running before running,
        // newest first.
        auto rank = [](const NodeRecord& n) {
          if (Is(n.status, ClusterInstanceStatus::kFailure)) return 0;
          return Is(n.status, ClusterInstanceStatus::kRunning) ? 2 : 1;
        };
        std::sort(live.begin(), live.end(), [&](const NodeRecord& a, const NodeRecord& b) {
          if (rank(a) != rank(b)) return rank(a) < rank(b);
          return a.ordinal > b.ordinal;
        });
        for (int i = 0; i < have - g.target_count; ++i) {
          HPOD_RETURN_IF_ERROR(mark_remove(live[i]));
        }
      }
    }
    return OkStatus();
  });
}

// Provider and agent calls, outside any transaction.
StatusOr<std::vector<NodeChange>> ClusterReconciler::ActOnNodes(const std::string& cluster_id,
                                                                bool* slurm_busy) {
  ClusterRecord c;
  std::vector<GroupRecord> groups;
  std::vector<NodeRecord> nodes;
  std::map<std::string, store::AgentRecord> agents;
  std::map<std::string, DeepCheck> deep;
  std::map<std::string, std::string> launch_images;  // group → the image its new nodes get
  auto read = [&]() {
    return store_.Read([&](store::ReadTx& tx) -> Status {
      HPOD_ASSIGN_OR_RETURN(c, tx.GetCluster(cluster_id));
      HPOD_ASSIGN_OR_RETURN(groups, tx.ListGroups(cluster_id));
      HPOD_ASSIGN_OR_RETURN(nodes, tx.ListNodes(cluster_id));
      HPOD_ASSIGN_OR_RETURN(auto list, tx.ListAgents(cluster_id));
      agents.clear();
      for (auto& a : list) agents[a.instance_id] = std::move(a);
      HPOD_ASSIGN_OR_RETURN(deep, LoadDeepChecks(tx, cluster_id));
      HPOD_ASSIGN_OR_RETURN(auto images, LoadGroupImages(tx, cluster_id));
      launch_images.clear();
      for (const auto& [group, image] : images) launch_images[group] = image.Launch();
      return OkStatus();
    });
  };
  // A software update's next step first: the recoveries it starts are taken in
  // this same pass.
  HPOD_RETURN_IF_ERROR(software_.Step(cluster_id).status());
  HPOD_RETURN_IF_ERROR(read());
  const bool winding_down =
      Is(c.status, ClusterStatus::kDeleting) || Is(c.status, ClusterStatus::kFailed);
  HPOD_ASSIGN_OR_RETURN(auto slurm,
                        slurm_.Begin(cluster_id, nodes, nodes_.AgentsDecide() && !winding_down));
  // Recoveries first: they may swap a node's row for its replacement's, which the
  // node concern then launches in this same pass.
  HPOD_ASSIGN_OR_RETURN(auto recovery, recovery_.Step(c, nodes, agents, slurm));
  if (recovery.rows_changed) HPOD_RETURN_IF_ERROR(read());
  // Continuous provisioning: a worker that failed to provision is launched again
  // (provisioning.h); its new row is launched by the node concern once due.
  HPOD_ASSIGN_OR_RETURN(bool retried, retry_.Step(c, groups, nodes, agents, recovery.recovering));
  if (retried) HPOD_RETURN_IF_ERROR(read());
  std::vector<NodeChange> changes;
  Status transient =
      nodes_.Act(c, groups, nodes, agents, slurm, recovery.held, launch_images, &changes);
  // A node whose deep health checks are due or running is not Running yet.
  GateDeepChecks(groups, nodes, deep, &changes);
  slurm_.Finish(slurm);
  *slurm_busy = slurm.busy || recovery.busy;
  // Record what was learnt even when some calls failed; the failure requeues.
  if (!transient.ok()) {
    auto recorded = rollup_.RecordAndRollUp(cluster_id, changes);
    if (!recorded.ok()) return recorded.status();
    return transient;
  }
  return changes;
}

}  // namespace hpod::controlplane
