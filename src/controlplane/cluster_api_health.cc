// ClusterApi: StartClusterHealthCheck, deep health checks of Running nodes
// (deep_health.h). It writes one Requested record per node in one transaction
// and answers; the checker runs them and DescribeClusterNode follows them
// (DeepHealthCheckInProgress, then HpodDeepHealthCheck's result).

#include <map>
#include <set>

#include "hpod/api/states.h"
#include "hpod/controlplane/cluster_api.h"
#include "hpod/controlplane/deep_health.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/recovery.h"

namespace hpod::controlplane {

using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

StatusOr<ordered_json> ClusterApi::StartClusterHealthCheck(const json& req) {
  std::string cluster_id, arn;
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, FindCluster(tx, req["ClusterName"]));
    cluster_id = c.id;
    arn = c.arn;
    if (!api::Is(c.status, api::ClusterStatus::kInService) &&
        !api::Is(c.status, api::ClusterStatus::kUpdating)) {
      return InvalidArgumentError("Cluster " + c.name + " is " + c.status +
                                  "; deep health checks start on an InService cluster (a new "
                                  "node is checked by its group's OnStartDeepHealthChecks)");
    }
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(c.id));
    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(c.id));
    HPOD_ASSIGN_OR_RETURN(auto checks, LoadDeepChecks(tx, c.id));
    HPOD_ASSIGN_OR_RETURN(auto recoveries, ActiveRecoveries(tx, c.id));
    std::set<std::string> recovering;
    for (const auto& r : recoveries) {
      // The node recovered and its replacement, until the recovery is done (a
      // failed check would have no recovery of its own to start).
      recovering.insert(r.instance_id);
      if (!r.replacement_id.empty()) recovering.insert(r.replacement_id);
    }
    std::set<std::string> group_names;
    for (const auto& g : groups) group_names.insert(g.name);
    // Why a node cannot be checked now; "" when it can.
    auto refusal = [&](const store::NodeRecord& n) -> std::string {
      if (n.remove) return "is being removed";
      if (recovering.count(n.instance_id)) return "is being recovered";
      if (auto it = checks.find(n.instance_id); it != checks.end() && it->second.Active()) {
        return "is already being checked";
      }
      if (!api::Is(n.status, api::ClusterInstanceStatus::kRunning)) return "is " + n.status;
      return "";
    };
    std::map<std::string, std::vector<std::string>> chosen;  // instance id → checks
    std::map<std::string, const store::NodeRecord*> by_id;
    std::set<std::string> seen_groups;
    for (const auto& n : nodes) by_id[n.instance_id] = &n;
    for (const auto& cfg : req["DeepHealthCheckConfigurations"]) {
      const std::string group = cfg["InstanceGroupName"];
      if (!group_names.count(group)) {
        return InvalidArgumentError("Instance group '" + group + "' not found in cluster " +
                                    c.name);
      }
      if (!seen_groups.insert(group).second) {
        return InvalidArgumentError("DeepHealthCheckConfigurations names instance group '" + group +
                                    "' more than once");
      }
      std::vector<std::string> wanted = cfg["DeepHealthChecks"].get<std::vector<std::string>>();
      if (std::set<std::string>(wanted.begin(), wanted.end()).size() != wanted.size()) {
        return InvalidArgumentError("DeepHealthChecks of instance group '" + group +
                                    "' names a check twice");
      }
      if (cfg.contains("InstanceIds")) {
        for (const auto& id_json : cfg["InstanceIds"]) {
          const std::string id = id_json;
          auto it = by_id.find(id);
          if (it == by_id.end() || it->second->group_name != group) {
            return InvalidArgumentError("Instance " + id + " is not a node of instance group '" +
                                        group + "' of cluster " + c.name);
          }
          if (std::string why = refusal(*it->second); !why.empty()) {
            return InvalidArgumentError("Instance " + id + " " + why +
                                        "; only Running nodes can start deep health checks");
          }
          chosen[id] = wanted;
        }
        continue;
      }
      int added = 0;
      for (const auto& n : nodes) {
        if (n.group_name != group || !refusal(n).empty()) continue;
        chosen[n.instance_id] = wanted;
        ++added;
      }
      if (added == 0) {
        return InvalidArgumentError("Instance group '" + group +
                                    "' has no Running node to check (nodes being removed, "
                                    "recovered or checked are left out)");
      }
    }
    const double now = clock_.NowEpochSeconds();
    for (const auto& [id, wanted] : chosen) {
      DeepCheck d;
      d.instance_id = id;
      d.checks = wanted;
      d.origin = "StartClusterHealthCheck";
      d.requested = now;
      HPOD_RETURN_IF_ERROR(PutDeepCheck(tx, c.id, d));
      std::string list;
      for (const auto& w : wanted) list += (list.empty() ? "" : ", ") + w;
      HPOD_RETURN_IF_ERROR(RecordEvent(tx, clock_, c, NodeSubject(by_id[id]->group_name, id),
                                       EventLevel::kInfo,
                                       "Deep health checks requested on instance " + id +
                                           " (StartClusterHealthCheck): " + list));
    }
    return OkStatus();
  }));
  if (wake_) wake_(cluster_id);
  ordered_json out;
  out["ClusterArn"] = arn;
  return out;
}

}  // namespace hpod::controlplane
