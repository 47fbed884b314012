// ClusterApi: BatchRebootClusterNodes and BatchReplaceClusterNodes.
//
// Both ask for the node recovery the health reconciler would start
// (recovery.h): the handler only writes the intent, one RecoveryRecord per
// accepted node, in one transaction for the whole call, and wakes the cluster's
// reconciler, which reboots or replaces the nodes. Per-node refusals use the
// model's codes (BatchReboot/ReplaceClusterNodesErrorCode), which are not
// BatchDeleteClusterNodes' (NodeIdNotFound, ...):
//   InstanceIdNotFound    no such node in the cluster
//   InvalidInstanceStatus not Running or Failure, being deleted, never launched, or (Replace
//                         only) a Slurm controller node
//   InstanceIdInUse       a recovery of the node is already in progress
// InternalServerError is never answered per node: a store error aborts the whole
// call (its transaction may hold half of the writes), and the caller retries it.

#include <set>
#include <string>
#include <vector>

#include "hpod/api/states.h"
#include "hpod/api/validate.h"
#include "hpod/controlplane/cluster_api.h"
#include "hpod/controlplane/recovery.h"
#include "hpod/controlplane/render.h"
#include "hpod/controlplane/slurm_plan.h"

namespace hpod::controlplane {

using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

namespace {

struct Outcome {
  std::string code;  // "" = accepted
  std::string message;
};

// The refusal for `node`, or an empty code when it may be recovered. `recovery`
// is the one in progress for the node, if any.
Outcome CheckNode(const store::ClusterRecord& c, const store::NodeRecord& node, bool is_controller,
                  RecoveryAction action, const std::string& operation,
                  const store::RecoveryRecord* recovery) {
  const std::string& id = node.instance_id;
  const std::string verb = action == RecoveryAction::kReboot ? "rebooted" : "replaced";
  if (api::Is(c.status, api::ClusterStatus::kDeleting)) {
    return {"InvalidInstanceStatus", "Cluster " + c.name + " is being deleted"};
  }
  // The model: "you cannot replace instances that are configured as Slurm
  // controller nodes". It says nothing of the kind for a reboot, which
  // RequestRecovery supports for the controller (its disk is kept).
  if (is_controller && action == RecoveryAction::kReplace) {
    return {"InvalidInstanceStatus", "Node " + id + " is a Slurm controller node (instance group " +
                                         node.group_name + ") and cannot be replaced with " +
                                         operation + "; use BatchRebootClusterNodes"};
  }
  if (node.remove || api::Is(node.status, api::ClusterInstanceStatus::kShuttingDown)) {
    return {"InvalidInstanceStatus", "Node " + id + " is being deleted"};
  }
  // Before the status check: a node being rebooted or replaced is not Running
  // because of that recovery, and "in use" says why.
  if (recovery != nullptr) {
    return {"InstanceIdInUse", "Node " + id + " is already being recovered (" +
                                   recovery->recovery_id + ": " + recovery->action + ")"};
  }
  // A node in Failure is what these operations are for (it may have been only
  // reported, under NodeRecovery=None); one still provisioning is not.
  const bool running_or_failed = api::Is(node.status, api::ClusterInstanceStatus::kRunning) ||
                                 api::Is(node.status, api::ClusterInstanceStatus::kFailure);
  if (!running_or_failed || !node.launched) {
    return {"InvalidInstanceStatus",
            "Node " + id + " is " + node.status + "; only a Running or failed node can be " + verb};
  }
  return {};
}

}  // namespace

StatusOr<ordered_json> ClusterApi::BatchRebootClusterNodes(const json& req) {
  return BatchRecoverClusterNodes(req, "BatchRebootClusterNodes");
}

StatusOr<ordered_json> ClusterApi::BatchReplaceClusterNodes(const json& req) {
  return BatchRecoverClusterNodes(req, "BatchReplaceClusterNodes");
}

StatusOr<ordered_json> ClusterApi::BatchRecoverClusterNodes(const json& req,
                                                            const std::string& operation) {
  if (!req.contains("NodeIds") && !req.contains("NodeLogicalIds")) {
    return InvalidArgumentError("Specify NodeIds or NodeLogicalIds");
  }
  // The server has validated the request already; this repeats it so the 1-25
  // limit holds for every caller of ClusterApi, in AWS's words.
  const api::Operation* op = api::ServiceModel::Get().FindOperation(operation);
  HPOD_CHECK(op != nullptr);
  HPOD_RETURN_IF_ERROR(api::ValidateValue(*op->input, req));
  const RecoveryAction action =
      operation == "BatchRebootClusterNodes" ? RecoveryAction::kReboot : RecoveryAction::kReplace;
  RecoveryRequest request;
  request.action = action;
  request.source = operation;
  request.check = "api";
  request.reason = "requested by " + operation;
  request.node_dead = false;

  ordered_json ok = ordered_json::array(), failed = ordered_json::array();
  ordered_json ok_logical = ordered_json::array(), failed_logical = ordered_json::array();
  std::string cluster_id;
  bool accepted_any = false;
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, FindCluster(tx, req["ClusterName"]));
    cluster_id = c.id;
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(c.id));
    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(c.id));
    HPOD_ASSIGN_OR_RETURN(std::string controller_group, ControllerGroup(tx, c.id, groups));
    // Recoveries in progress, with those this call starts: a node is in use when
    // one of them is its own, its replacement's, or its hostname's (the rule of
    // RequestRecovery, which would otherwise answer that recovery's id).
    HPOD_ASSIGN_OR_RETURN(std::vector<store::RecoveryRecord> active, ActiveRecoveries(tx, c.id));
    auto in_use = [&](const store::NodeRecord& n) -> const store::RecoveryRecord* {
      for (const auto& r : active) {
        if (r.instance_id == n.instance_id || r.replacement_id == n.instance_id ||
            (!n.hostname.empty() && r.hostname == n.hostname)) {
          return &r;
        }
      }
      return nullptr;
    };
    auto recover = [&](const store::NodeRecord& n) -> StatusOr<Outcome> {
      bool is_controller = !controller_group.empty() && n.group_name == controller_group;
      Outcome o = CheckNode(c, n, is_controller, action, operation, in_use(n));
      if (!o.code.empty()) return o;
      StatusOr<std::string> id = RequestRecovery(tx, clock_, c, n, is_controller, request);
      if (id.status().code() == StatusCode::kFailedPrecondition) {
        return Outcome{"InvalidInstanceStatus", id.status().message()};
      }
      HPOD_RETURN_IF_ERROR(id.status());
      HPOD_ASSIGN_OR_RETURN(store::RecoveryRecord written, tx.GetRecovery(*id));
      active.push_back(std::move(written));
      accepted_any = true;
      return Outcome{};
    };
    for (const char* member : {"NodeIds", "NodeLogicalIds"}) {
      if (!req.contains(member)) continue;
      const bool logical = std::string(member) == "NodeLogicalIds";
      std::set<std::string> seen;  // a repeated id is answered once
      for (const auto& idv : req[member]) {
        const std::string id = idv;
        if (!seen.insert(id).second) continue;
        const store::NodeRecord* node = nullptr;
        for (const auto& n : nodes) {
          if ((logical ? n.logical_id : n.instance_id) == id) node = &n;
        }
        Outcome o{"InstanceIdNotFound", "Node " + id + " not found in cluster " + c.name};
        if (node != nullptr) {
          HPOD_ASSIGN_OR_RETURN(o, recover(*node));
        }
        if (o.code.empty()) {
          (logical ? ok_logical : ok).push_back(id);
        } else {
          (logical ? failed_logical : failed)
              .push_back({{logical ? "NodeLogicalId" : "NodeId", id},
                          {"ErrorCode", o.code},
                          {"Message", o.message}});
        }
      }
    }
    return OkStatus();
  }));
  if (accepted_any) wake_(cluster_id);
  ordered_json out = ordered_json::object();
  const std::string shape = op->output->name;  // Batch{Reboot,Replace}ClusterNodesResponse
  if (req.contains("NodeIds")) {
    SetListMember(out, shape.c_str(), "Successful", ok);
    SetListMember(out, shape.c_str(), "Failed", failed);
  }
  if (req.contains("NodeLogicalIds")) {
    SetListMember(out, shape.c_str(), "FailedNodeLogicalIds", failed_logical);
    SetListMember(out, shape.c_str(), "SuccessfulNodeLogicalIds", ok_logical);
  }
  return out;
}

}  // namespace hpod::controlplane
