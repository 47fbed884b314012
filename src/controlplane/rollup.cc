#include "hpod/controlplane/rollup.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "hpod/controlplane/events.h"
#include "hpod/controlplane/host_states.h"
#include "hpod/controlplane/ids.h"
#include "hpod/controlplane/provisioning.h"
#include "hpod/controlplane/slurm_plan.h"
#include "hpod/controlplane/software_update.h"

namespace hpod::controlplane {

using api::ClusterInstanceStatus;
using api::ClusterStatus;
using api::InstanceGroupStatus;
using api::Is;
using api::NameString;
using store::ClusterRecord;
using store::GroupRecord;
using store::NodeRecord;

namespace {

bool InGroup(const NodeRecord& n, const GroupRecord& g) { return n.group_name == g.name; }

// In Failure and not on its way out: the node reconciler's phase, one definition.
bool Failed(const NodeRecord& n) { return PhaseOf(n) == api::NodePhase::kFailed; }

// A group has converged when it has its target count of nodes, none on its way
// out, each Running or in Failure. A failed node keeps its slot (it is not
// replaced until node recovery does), so it neither blocks an update nor makes
// hpod launch another; the operation that created it has already failed or
// rolled back (RollUp below checks that first).
bool GroupConverged(const GroupRecord& g, const std::vector<NodeRecord>& nodes) {
  if (g.deleting) return false;
  int have = 0;
  for (const auto& n : nodes) {
    if (!InGroup(n, g)) continue;
    if (n.remove) return false;
    if (!Is(n.status, ClusterInstanceStatus::kRunning) && !Failed(n)) return false;
    ++have;
  }
  return have == g.target_count;
}

// "1 of 3 instances in Failure: w-2 (i-…): <why>", or empty when none is.
std::string FailedSummary(const GroupRecord& g, const std::vector<NodeRecord>& nodes) {
  int total = 0, failed = 0;
  const NodeRecord* first = nullptr;
  for (const auto& n : nodes) {
    if (!InGroup(n, g) || n.remove) continue;
    ++total;
    if (!Failed(n)) continue;
    ++failed;
    if (first == nullptr) first = &n;
  }
  if (failed == 0) return "";
  std::string s = std::to_string(failed) + " of " + std::to_string(total) +
                  (total == 1 ? " instance" : " instances") + " in Failure: " + g.name + "-" +
                  std::to_string(first->ordinal) + " (" + first->instance_id + ")";
  if (!first->message.empty()) s += ": " + first->message;
  return s;
}

}  // namespace

std::string ProvisioningFailureMessage(const std::string& instance_id, const std::string& why) {
  return "Instance " + instance_id + " failed to provision with the following error: \"" + why +
         "\" Note that multiple instances may be impacted.";
}

StatusOr<bool> ClusterRollUp::RecordAndRollUp(const std::string& cluster_id,
                                              const std::vector<NodeChange>& changes) {
  bool converged = false;
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(ClusterRecord c, tx.GetCluster(cluster_id));
    for (const NodeChange& o : changes) {
      auto current = tx.GetNode(cluster_id, o.instance_id);
      if (!current.ok()) continue;  // deleted meanwhile
      NodeRecord n = *current;
      if (o.gone) {
        HPOD_RETURN_IF_ERROR(tx.DeleteNode(n.instance_id));
        HPOD_RETURN_IF_ERROR(ForgetNodeSoftware(tx, cluster_id, n.instance_id));
        HPOD_RETURN_IF_ERROR(EndHostTenure(tx, clock_, n.instance_id,
                                           "instance " + n.instance_id + " was terminated"));
        HPOD_RETURN_IF_ERROR(RecordEvent(tx, clock_, c, NodeSubject(n.group_name, n.instance_id),
                                         EventLevel::kInfo, "Instance terminated"));
        continue;
      }
      bool changed = false;
      if (o.launched && !n.launched) {
        n.launched = true;
        if (Is(n.status, ClusterInstanceStatus::kPending)) n.message.clear();  // waits no more
        changed = true;
      }
      if (o.waiting && o.message != n.message) {
        // Pending → Pending: no status change, but what it waits for is news
        // ("no Spare host of type T in pool P: 2 of 3" as hosts join).
        n.message = o.message;
        changed = true;
        HPOD_RETURN_IF_ERROR(RecordEvent(tx, clock_, c, NodeSubject(n.group_name, n.instance_id),
                                         EventLevel::kWarn,
                                         "Instance waits for capacity: " + o.message));
      }
      if (!o.private_ip.empty() && o.private_ip != n.private_ip) {
        n.private_ip = o.private_ip;
        // The name is the logical node's: set once, kept by a replacement that
        // runs on another machine with another address (slurmd -N takes it).
        if (n.hostname.empty()) {
          n.hostname = o.hostname.empty() ? HostnameFromIp(o.private_ip) : o.hostname;
        }
        changed = true;
      }
      // A node marked for removal only moves towards ShuttingDown.
      std::string next = o.status ? NameString(*o.status) : n.status;
      if (n.remove && !Is(next, ClusterInstanceStatus::kShuttingDown)) next = n.status;
      const bool failure = Is(next, ClusterInstanceStatus::kFailure);
      if (next != n.status || (o.status && o.message != n.message && failure)) {
        std::string from = n.status;
        n.status = next;
        n.message = o.message;
        changed = true;
        EventLevel level = failure ? EventLevel::kError : EventLevel::kInfo;
        std::string text = "Instance status changed from " + from + " to " + next;
        if (!o.message.empty()) text += ": " + o.message;
        HPOD_RETURN_IF_ERROR(
            RecordEvent(tx, clock_, c, NodeSubject(n.group_name, n.instance_id), level, text));
      }
      if (changed) HPOD_RETURN_IF_ERROR(tx.PutNode(n));
    }

    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(cluster_id));

    if (Is(c.status, ClusterStatus::kDeleting)) {
      if (nodes.empty()) {
        spdlog::info("cluster {} ({}) deleted", c.name, c.id);
        // Its events stay readable for a while (options.h, deleted_cluster_retention).
        store::DeletedClusterRecord gone;
        gone.id = c.id;
        gone.name = c.name;
        gone.arn = c.arn;
        gone.failure_message = c.failure_message;
        gone.creation_time = c.creation_time;
        gone.deleted = clock_.NowEpochSeconds();
        HPOD_RETURN_IF_ERROR(
            RecordEvent(tx, clock_, c, ClusterSubject(), EventLevel::kInfo, "Cluster deleted"));
        HPOD_RETURN_IF_ERROR(tx.RetireCluster(gone));
        converged = true;
      }
      return OkStatus();
    }
    // Groups being deleted disappear once their last node is gone.
    for (auto it = groups.begin(); it != groups.end();) {
      bool empty = std::none_of(nodes.begin(), nodes.end(),
                                [&](const NodeRecord& n) { return InGroup(n, *it); });
      if (it->deleting && empty) {
        HPOD_RETURN_IF_ERROR(tx.DeleteGroup(c.id, it->name));
        HPOD_RETURN_IF_ERROR(tx.DeleteSetting(GroupImageSetting(c.id, it->name)));
        HPOD_RETURN_IF_ERROR(RecordEvent(tx, clock_, c, GroupSubject(it->name), EventLevel::kInfo,
                                         "Instance group deleted"));
        it = groups.erase(it);
      } else {
        ++it;
      }
    }
    auto set_group_status = [&](GroupRecord& g, InstanceGroupStatus status,
                                const std::string& why) -> Status {
      if (Is(g.status, status)) return OkStatus();
      std::string from = g.status;
      g.status = NameString(status);
      HPOD_RETURN_IF_ERROR(tx.PutGroup(g));
      std::string text = "Instance group status changed from " + from + " to " + g.status;
      if (!why.empty()) text += ": " + why;
      const bool degraded = status == InstanceGroupStatus::kDegraded;
      HPOD_RETURN_IF_ERROR(RecordEvent(tx, clock_, c, GroupSubject(g.name),
                                       degraded ? EventLevel::kWarn : EventLevel::kInfo, text));
      // ClusterStatus has no Degraded: the cluster's own events say it instead.
      if (!degraded) return OkStatus();
      return RecordEvent(tx, clock_, c, ClusterSubject(), EventLevel::kWarn,
                         "Instance group " + g.name + " is Degraded: " + why);
    };
    // InService, or Degraded while a node of the group is in Failure.
    auto set_in_service = [&](GroupRecord& g) -> Status {
      std::string failed = FailedSummary(g, nodes);
      return failed.empty() ? set_group_status(g, InstanceGroupStatus::kInService, "")
                            : set_group_status(g, InstanceGroupStatus::kDegraded, failed);
    };
    auto set_cluster_status = [&](ClusterStatus status, EventLevel level,
                                  const std::string& why) -> Status {
      if (Is(c.status, status)) return OkStatus();
      std::string from = c.status;
      c.status = NameString(status);
      HPOD_RETURN_IF_ERROR(tx.PutCluster(c));
      std::string text = "Cluster status changed from " + from + " to " + c.status;
      if (!why.empty()) text += ": " + why;
      return RecordEvent(tx, clock_, c, ClusterSubject(), level, text);
    };

    const bool creating = Is(c.status, ClusterStatus::kCreating);
    const bool updating = Is(c.status, ClusterStatus::kUpdating);
    // Continuous provisioning's roll-up runs while the cluster is Creating or
    // InService; a Failed one is wound down as any other.
    const bool continuous =
        IsContinuous(c) && (creating || Is(c.status, ClusterStatus::kInService));
    std::optional<std::set<std::string>> priority;
    std::map<std::string, store::AgentRecord> agents;
    if (continuous) {
      HPOD_ASSIGN_OR_RETURN(priority, PriorityGroups(tx, c.id, groups));
      HPOD_ASSIGN_OR_RETURN(auto list, tx.ListAgents(c.id));
      for (auto& a : list) agents[a.instance_id] = std::move(a);
    }
    // A failed node that continuous provisioning launches again (provisioning.h).
    auto retried = [&](const NodeRecord& n) {
      return continuous && priority && !priority->count(n.group_name) &&
             FailedToProvision(n, agents);
    };
    const NodeRecord* failed = nullptr;  // a node the current operation failed to provision
    for (const auto& n : nodes) {
      // Continuous provisioning retries workers; a priority node fails it, as does
      // any node while the roles are unknown.
      if (continuous && priority && !priority->count(n.group_name)) continue;
      if (Failed(n) && (creating || n.created_generation == c.generation)) {
        failed = &n;
        break;
      }
    }
    bool all_converged = true;
    for (const auto& g : groups) all_converged &= GroupConverged(g, nodes);
    bool nothing_pending =
        std::none_of(nodes.begin(), nodes.end(), [](const NodeRecord& n) { return n.remove; });

    if (creating && failed != nullptr) {
      c.failure_message = ProvisioningFailureMessage(failed->instance_id, failed->message);
      for (auto& g : groups) {
        HPOD_RETURN_IF_ERROR(set_group_status(g, InstanceGroupStatus::kFailed, ""));
      }
      HPOD_RETURN_IF_ERROR(
          set_cluster_status(ClusterStatus::kFailed, EventLevel::kError, c.failure_message));
      // Cleanup of the nodes happens in the next pass (Failed → remove all).
      return OkStatus();
    }
    if (updating && failed != nullptr) {
      c.failure_message = ProvisioningFailureMessage(failed->instance_id, failed->message);
      for (auto& g : groups) {
        if (g.previous_target_count < 0) {
          g.deleting = true;
          g.status = NameString(InstanceGroupStatus::kDeleting);
        } else {
          g.target_count = g.previous_target_count;
          g.deleting = false;
        }
        HPOD_RETURN_IF_ERROR(tx.PutGroup(g));
      }
      for (auto n : nodes) {
        if (n.created_generation == c.generation && !n.remove) {
          n.remove = true;
          HPOD_RETURN_IF_ERROR(tx.PutNode(n));
        }
      }
      return set_cluster_status(ClusterStatus::kRollingBack, EventLevel::kError, c.failure_message);
    }
    if (continuous) {
      // No operation to finish: a group is settled once each of its nodes runs or
      // failed for good (a failed node being launched again is not settled), and
      // then InService (Degraded while one is in Failure); the cluster is
      // InService once each priority group has a node that runs.
      bool all_settled = nothing_pending;
      std::set<std::string> up;
      for (const auto& n : nodes) {
        if (!n.remove && Is(n.status, ClusterInstanceStatus::kRunning)) up.insert(n.group_name);
      }
      for (auto& g : groups) {
        if (g.deleting) continue;
        int have = 0;
        bool settled = true;
        for (const auto& n : nodes) {
          if (!InGroup(n, g)) continue;
          ++have;
          settled &= !n.remove && !retried(n) &&
                     (Is(n.status, ClusterInstanceStatus::kRunning) || Failed(n));
        }
        settled &= have == g.target_count;
        all_settled &= settled;
        if (settled) HPOD_RETURN_IF_ERROR(set_in_service(g));
      }
      if (creating) {
        // Without known roles, any group may be the controller's: each must have
        // a node that runs.
        const bool ready =
            priority ? std::all_of(priority->begin(), priority->end(),
                                   [&](const std::string& name) { return up.count(name) > 0; })
                     : std::all_of(groups.begin(), groups.end(), [&](const GroupRecord& g) {
                         return g.deleting || g.target_count == 0 || up.count(g.name) > 0;
                       });
        if (ready) {
          HPOD_RETURN_IF_ERROR(
              set_cluster_status(ClusterStatus::kInService, EventLevel::kInfo,
                                 "continuous provisioning: " +
                                     std::string(priority ? "the controller and login nodes run"
                                                          : "a node of each group runs") +
                                     "; the other nodes join as they come up"));
        }
      }
      converged = Is(c.status, ClusterStatus::kInService) && all_settled;
      return OkStatus();
    }
    const bool in_operation = creating || updating || Is(c.status, ClusterStatus::kRollingBack);
    if (in_operation && all_converged && nothing_pending) {
      for (auto& g : groups) {
        g.previous_target_count = -1;
        HPOD_RETURN_IF_ERROR(tx.PutGroup(g));
        HPOD_RETURN_IF_ERROR(set_in_service(g));
      }
      HPOD_RETURN_IF_ERROR(set_cluster_status(ClusterStatus::kInService, EventLevel::kInfo, ""));
    } else if (Is(c.status, ClusterStatus::kInService)) {
      // In service, a group follows its nodes: Degraded while one is in Failure,
      // InService again once it is gone.
      for (auto& g : groups) {
        if (g.deleting) continue;
        bool settled = Is(g.status, InstanceGroupStatus::kInService) ||
                       Is(g.status, InstanceGroupStatus::kDegraded);
        if (settled) HPOD_RETURN_IF_ERROR(set_in_service(g));
      }
    }
    converged = (Is(c.status, ClusterStatus::kInService) && all_converged && nothing_pending) ||
                (Is(c.status, ClusterStatus::kFailed) && nodes.empty());
    return OkStatus();
  }));
  return converged;
}

}  // namespace hpod::controlplane
