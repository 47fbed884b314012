// ClusterApi: BatchAddClusterNodes, the scaling call of continuous provisioning
// (provisioning.h). It raises each named group's target by its increment and
// writes the new nodes' rows in the same transaction, so the NodeLogicalIds it
// returns exist from the moment it answers; the reconciler launches them.
//
// ClientToken: the same token with the same request within 8 hours answers the
// same NodeLogicalIds with their current status and adds nothing (SageMaker's
// contract); with another request it is a ValidationException. Tokens are kept
// as settings of the cluster (`cluster/<id>/add-token/<token>`), so they go with
// it.

#include <map>
#include <set>

#include "hpod/api/states.h"
#include "hpod/controlplane/cluster_api.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/provisioning.h"
#include "hpod/controlplane/render.h"
#include "hpod/controlplane/slurm_plan.h"

namespace hpod::controlplane {

using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

namespace {

constexpr double kTokenLifetimeSeconds = 8 * 3600;
constexpr int kMaxNodesPerRequest = 50;

std::string TokenSetting(const std::string& cluster_id, const std::string& token) {
  return "cluster/" + cluster_id + "/add-token/" + token;
}

// A Failed entry of the response (BatchAddClusterNodesError).
ordered_json AddError(const std::string& group, const std::string& code, int count,
                      const std::string& message) {
  return {{"InstanceGroupName", group},
          {"ErrorCode", code},
          {"FailedCount", count},
          {"Message", message}};
}

// Why `spec` cannot add to `group` (ErrorCode, message), or an empty code.
std::pair<std::string, std::string> Incompatible(const json& spec, const store::GroupRecord& g) {
  if (g.deleting) {
    return {"InvalidInstanceGroupStatus",
            "Instance group '" + g.name + "' is being deleted; no node can be added to it"};
  }
  if (spec.contains("AvailabilityZones")) {
    return {"IncompatibleAvailabilityZones",
            "hpod's nodes have no availability zones; omit AvailabilityZones"};
  }
  const std::string type = g.spec.value("InstanceType", "");
  if (spec.contains("InstanceTypes")) {
    bool named = false;
    for (const auto& t : spec["InstanceTypes"]) named |= t == type;
    if (!named) {
      return {"IncompatibleInstanceTypes", "Instance group '" + g.name + "' runs " + type +
                                               "; InstanceTypes must include it (or be omitted)"};
    }
  }
  return {"", ""};
}

}  // namespace

StatusOr<ordered_json> ClusterApi::BatchAddClusterNodes(const json& req) {
  int asked = 0;
  std::set<std::string> named;
  for (const auto& spec : req["NodesToAdd"]) {
    asked += spec["IncrementTargetCountBy"].get<int>();
    if (!named.insert(spec["InstanceGroupName"].get<std::string>()).second) {
      return InvalidArgumentError("NodesToAdd names instance group '" +
                                  spec["InstanceGroupName"].get<std::string>() +
                                  "' more than once; give each group one increment");
    }
  }
  if (asked > kMaxNodesPerRequest) {
    return InvalidArgumentError("NodesToAdd asks for " + std::to_string(asked) +
                                " nodes; one request adds at most " +
                                std::to_string(kMaxNodesPerRequest) + " across its groups");
  }
  const std::string token = req.value("ClientToken", "");
  ordered_json ok = ordered_json::array(), failed = ordered_json::array();
  std::string cluster_id;
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, FindCluster(tx, req["ClusterName"]));
    cluster_id = c.id;
    if (!IsContinuous(c)) {
      return InvalidArgumentError(
          "BatchAddClusterNodes is only supported for clusters using Continuous as the "
          "NodeProvisioningMode; cluster " +
          c.name + " provisions all-or-nothing: raise a group's InstanceCount with UpdateCluster");
    }
    if (!api::Is(c.status, api::ClusterStatus::kInService) &&
        !api::Is(c.status, api::ClusterStatus::kCreating)) {
      return InvalidArgumentError("Cluster " + c.name + " is " + c.status +
                                  "; nodes can be added while it is Creating or InService");
    }
    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(c.id));
    const double now = clock_.NowEpochSeconds();
    // The request as the token remembers it: the cluster by id (named or by ARN
    // alike); json objects dump with sorted keys.
    const std::string digest = json{{"Cluster", c.id}, {"NodesToAdd", req["NodesToAdd"]}}.dump();
    if (!token.empty()) {
      auto kept = tx.GetSetting(TokenSetting(c.id, token));
      if (!kept.ok() && kept.status().code() != StatusCode::kNotFound) return kept.status();
      json before = kept.ok() ? json::parse(*kept, nullptr, false) : json();
      if (before.is_object() && now - before.value("created", 0.0) < kTokenLifetimeSeconds) {
        if (before.value("digest", "") != digest) {
          return InvalidArgumentError("ClientToken '" + token +
                                      "' was used within the last 8 hours with other "
                                      "parameters; use a new token for a new request");
        }
        // The same request again: its nodes as they are now, nothing added.
        std::map<std::string, const store::NodeRecord*> by_logical;
        for (const auto& n : nodes) by_logical[n.logical_id] = &n;
        for (const auto& added : before.value("nodes", json::array())) {
          auto it = by_logical.find(added.value("id", ""));
          ok.push_back({{"NodeLogicalId", added.value("id", "")},
                        {"InstanceGroupName", added.value("group", "")},
                        {"Status", it == by_logical.end() ? "NotFound" : it->second->status}});
        }
        for (const auto& f : before.value("failed", json::array())) {
          failed.push_back(ordered_json::parse(f.dump()));
        }
        return OkStatus();
      }
    }
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(c.id));
    int total = 0;
    for (const auto& g : groups) total += g.target_count;
    if (total + asked > options_.max_nodes_per_cluster) {
      return ResourceExhaustedError("The cluster would have " + std::to_string(total + asked) +
                                    " instances; the limit is " +
                                    std::to_string(options_.max_nodes_per_cluster));
    }
    json remembered = json::array();
    for (const auto& spec : req["NodesToAdd"]) {
      const std::string name = spec["InstanceGroupName"];
      const int count = spec["IncrementTargetCountBy"];
      auto g = std::find_if(groups.begin(), groups.end(),
                            [&](const store::GroupRecord& gr) { return gr.name == name; });
      if (g == groups.end()) {
        failed.push_back(AddError(name, "InstanceGroupNotFound", count,
                                  "Instance group '" + name + "' not found in cluster " + c.name));
        continue;
      }
      if (auto [code, why] = Incompatible(spec, *g); !code.empty()) {
        failed.push_back(AddError(name, code, count, why));
        continue;
      }
      // The Slurm roles must still make sense with the new count (one controller).
      {
        std::vector<store::GroupRecord> after = groups;
        std::erase_if(after, [](const store::GroupRecord& gr) { return gr.deleting; });
        for (auto& gr : after) {
          if (gr.name == name) gr.target_count += count;
        }
        Status roles = CheckSlurmConfig(after);
        if (roles.ok()) roles = CheckFileRoles(tx, c.id, after);
        if (!roles.ok()) {
          failed.push_back(
              AddError(name, "InvalidInstanceGroupStatus", count, std::string(roles.message())));
          continue;
        }
      }
      std::vector<store::NodeRecord> mine;
      for (const auto& n : nodes) {
        if (n.group_name == name) mine.push_back(n);
      }
      for (const store::NodeRecord& n : NewNodeRows(c, name, mine, count, now)) {
        HPOD_RETURN_IF_ERROR(tx.PutNode(n));
        HPOD_RETURN_IF_ERROR(RecordEvent(
            tx, clock_, c, NodeSubject(name, n.instance_id), EventLevel::kInfo,
            "Instance " + name + "-" + std::to_string(n.ordinal) +
                " is Pending: launch requested by BatchAddClusterNodes (NodeLogicalId " +
                n.logical_id + ")"));
        ok.push_back(
            {{"NodeLogicalId", n.logical_id}, {"InstanceGroupName", name}, {"Status", n.status}});
        remembered.push_back({{"id", n.logical_id}, {"group", name}});
        nodes.push_back(n);
      }
      g->target_count += count;
      // A group still Creating stays so; a settled one shows the change.
      if (!api::Is(g->status, api::InstanceGroupStatus::kCreating)) {
        g->status = api::NameString(api::InstanceGroupStatus::kUpdating);
      }
      HPOD_RETURN_IF_ERROR(tx.PutGroup(*g));
      HPOD_RETURN_IF_ERROR(RecordEvent(tx, clock_, c, GroupSubject(name), EventLevel::kInfo,
                                       "Instance group target raised by " + std::to_string(count) +
                                           " to " + std::to_string(g->target_count) +
                                           " instances by BatchAddClusterNodes"));
    }
    if (token.empty()) return OkStatus();
    return tx.PutSetting(TokenSetting(c.id, token), json{{"created", now},
                                                         {"digest", digest},
                                                         {"nodes", remembered},
                                                         {"failed", json::parse(failed.dump())}}
                                                        .dump());
  }));
  wake_(cluster_id);
  return ordered_json{{"Successful", std::move(ok)}, {"Failed", std::move(failed)}};
}

}  // namespace hpod::controlplane
