#include "hpod/controlplane/node_api.h"

#include <cmath>
#include <optional>

#include "hpod/controlplane/cluster_api.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/slurm_plan.h"

namespace hpod::controlplane {

using nlohmann::json;
using nlohmann::ordered_json;

NodeApi::NodeApi(store::Store& store, const Clock& clock, AgentService* agents, NodeLogs& logs,
                 provider::Provider* provider)
    : store_(store),
      clock_(clock),
      agents_(agents),
      logs_(logs),
      provider_(provider),
      training_(store, agents) {}

bool NodeApi::Handles(const std::string& operation) {
  return operation == "HpodStartSession" || operation == "HpodGetNodeLogs" ||
         operation == "HpodListSlurmNodes" || operation == "HpodInjectFault" ||
         TrainingApi::Handles(operation);
}

StatusOr<ordered_json> NodeApi::Call(const api::Operation& operation, const json& request,
                                     const Caller& caller) {
  if (operation.name == "HpodStartSession") return StartSession(request, caller);
  if (operation.name == "HpodGetNodeLogs") return GetNodeLogs(request);
  if (operation.name == "HpodListSlurmNodes") return ListSlurmNodes(request);
  if (operation.name == "HpodInjectFault") return InjectFault(request);
  if (TrainingApi::Handles(operation.name)) return training_.Call(operation.name, request);
  return UnimplementedError("operation " + operation.name + " is not served by NodeApi");
}

void NodeApi::AddNodeFacts(const std::string& operation, ordered_json& response) const {
  if (operation != "DescribeClusterNode" || agents_ == nullptr) return;
  auto details = response.find("NodeDetails");
  if (details == response.end() || !details->is_object()) return;
  auto id = details->find("InstanceId");
  if (id == details->end() || !id->is_string()) return;
  if (std::optional<double> offset = agents_->ClockOffset(id->get<std::string>())) {
    (*details)["HpodClockOffsetSeconds"] = std::round(*offset * 1000) / 1000;
  }
}

StatusOr<ordered_json> NodeApi::StartSession(const json& req, const Caller& caller) {
  // A shell as root is the whole node: admin keys only. (The model's pattern has
  // checked the name.)
  const std::string user = req.value("User", "");
  if (!caller.admin && (user.empty() || user == "root")) {
    return PermissionDeniedError(
               "The access key's role is 'user': it opens shells as a cluster user only. Name "
               "one (User, or hpod start-session --user NAME); root shells need an admin key")
        .WithAwsType("AccessDeniedException");
  }
  // sagemaker-cluster:<cluster-id>_<group>-<instance-id>; the model's pattern has
  // checked the shape, so the split points exist.
  const std::string target = req["Target"];
  const std::string body = target.substr(target.find(':') + 1);
  const std::string cluster_id = body.substr(0, body.find('_'));
  const size_t i = body.rfind("-i-");
  const std::string group = body.substr(cluster_id.size() + 1, i - cluster_id.size() - 1);
  const std::string instance_id = body.substr(i + 1);
  store::NodeRecord node;
  store::ClusterRecord cluster;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    auto c = tx.GetCluster(cluster_id);
    if (!c.ok()) {
      return NotFoundError("Cluster with id " + cluster_id + " not found (target " + target + ")")
          .WithAwsType("ResourceNotFound");
    }
    cluster = *c;
    auto n = tx.GetNode(cluster_id, instance_id);
    if (!n.ok() || n->group_name != group) {
      return NotFoundError("Node " + instance_id + " of instance group " + group +
                           " not found in cluster " + cluster.name)
          .WithAwsType("ResourceNotFound");
    }
    node = *n;
    return OkStatus();
  }));
  if (agents_ == nullptr) {
    return FailedPreconditionError("hpodd runs no node agents (no node provider configured)");
  }
  int rows = req.value("Rows", 24), cols = req.value("Cols", 80);
  HPOD_ASSIGN_OR_RETURN(SessionGrant grant,
                        agents_->StartSession(instance_id, req.value("Command", ""), user,
                                              !caller.admin, rows, cols));
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    std::string who = caller.access_key_id.empty() ? "an unauthenticated caller"
                                                   : "access key " + caller.access_key_id;
    return RecordEvent(tx, clock_, cluster, NodeSubject(group, instance_id), EventLevel::kInfo,
                       "Session " + grant.session_id + " started by " + who +
                           (req.contains("Command") ? " (command" : " (interactive shell") +
                           (user.empty() ? ")" : " as " + user + ")"));
  }));
  ordered_json out;
  out["SessionId"] = grant.session_id;
  // The relay is on the listener the request came to: TLS there, TLS here.
  out["StreamUrl"] = std::string(caller.tls ? "wss://" : "ws://") + caller.host + "/v1/sessions/" +
                     grant.session_id;
  out["TokenValue"] = grant.token;
  return out;
}

StatusOr<ordered_json> NodeApi::GetNodeLogs(const json& req) {
  const std::string instance_id = req["NodeId"];
  std::string cluster_id;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    // A deleted cluster's node logs stay readable for a while, by its ARN or name.
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c,
                          ClusterApi::FindClusterOrDeleted(tx, req["ClusterName"]));
    cluster_id = c.id;
    return OkStatus();
  }));
  const std::string stream = req.value("Stream", "LifecycleConfig");
  const size_t limit = req.value("Limit", 1 << 20);
  auto chunk = logs_.Read(cluster_id, instance_id, stream, req.value("NextToken", ""), limit);
  if (!chunk.ok() && chunk.status().code() == StatusCode::kNotFound) {
    // Distinguish "no such node" from "nothing logged yet".
    Status known = store_.Read(
        [&](store::ReadTx& tx) { return tx.GetNode(cluster_id, instance_id).status(); });
    if (!known.ok()) {
      return NotFoundError("Node '" + instance_id + "' not found and has no logs.")
          .WithAwsType("ResourceNotFound");
    }
    ordered_json out;
    out["Data"] = "";
    out["NextToken"] = "";
    return out;
  }
  if (!chunk.ok()) return chunk.status();
  ordered_json out;
  out["Data"] = chunk->data;
  out["NextToken"] = chunk->next_token;
  return out;
}

StatusOr<ordered_json> NodeApi::ListSlurmNodes(const json& req) {
  std::string cluster_id;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, ClusterApi::FindCluster(tx, req["ClusterName"]));
    cluster_id = c.id;
    return OkStatus();
  }));
  // No report is not an error: a cluster whose controller has not connected yet
  // (or has no Slurm at all) still lists its nodes, just without Slurm's view.
  std::optional<SlurmNodesReport> report;
  if (agents_ != nullptr) report = agents_->SlurmNodes(cluster_id);
  ordered_json out;
  out["SlurmNodes"] = ordered_json::array();
  if (report.has_value()) {
    for (const slurm::SlurmNodeState& n : report->nodes) {
      ordered_json node;
      node["NodeName"] = n.name;
      node["State"] = n.state;
      node["Reason"] = n.reason;
      node["SlurmdStartTime"] = n.slurmd_start_time;
      out["SlurmNodes"].push_back(std::move(node));
    }
    out["ReportedBy"] = report->reporter;
  }
  out["Available"] = report.has_value();
  return out;
}

StatusOr<ordered_json> NodeApi::InjectFault(const json& req) {
  const std::string instance_id = req["NodeId"];
  const std::string kind_name = req["Kind"];
  // The model's enum has checked the name; a kind it lists that the provider
  // interface lacks is a bug caught here rather than injected as something else.
  std::optional<provider::FaultSpec::Kind> kind = provider::ParseFaultKind(kind_name);
  if (!kind.has_value()) return InternalError("fault kind " + kind_name + " is not known");
  provider::FaultSpec fault;
  fault.kind = *kind;
  fault.seconds = req.value("Seconds", 0);
  fault.xid = req.value("XidCode", 0);
  if (fault.kind == provider::FaultSpec::Kind::kPartition && !req.contains("Seconds")) {
    return InvalidArgumentError(
        "Kind partition needs Seconds: how long the node's link stays down (--seconds 1-3600)");
  }
  if (fault.kind == provider::FaultSpec::Kind::kGpuXid && !req.contains("XidCode")) {
    return InvalidArgumentError(
        "Kind gpu-xid needs XidCode: the Xid to report, e.g. 79 (--xid-code 1-1000)");
  }
  store::ClusterRecord cluster;
  store::NodeRecord node;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(cluster, ClusterApi::FindCluster(tx, req["ClusterName"]));
    auto n = tx.GetNode(cluster.id, instance_id);
    if (!n.ok()) {
      return NotFoundError("Node " + instance_id + " not found in cluster " + cluster.name +
                           " (see list-cluster-nodes)")
          .WithAwsType("ResourceNotFound");
    }
    node = *n;
    return OkStatus();
  }));
  if (!node.launched) {
    return InvalidArgumentError("Node " + instance_id + " of cluster " + cluster.name +
                                " has not been launched yet; wait until it is Pending or Running");
  }
  if (provider_ == nullptr) {
    return FailedPreconditionError("hpodd runs no node provider, so it cannot inject faults");
  }
  // Never inside a store transaction: the provider acts on real processes.
  Status injected_status = provider_->InjectFault(instance_id, fault);
  // A kind this provider cannot inject is the caller's to change: say which and why.
  if (injected_status.code() == StatusCode::kUnimplemented) {
    return InvalidArgumentError(std::string(injected_status.message()));
  }
  HPOD_RETURN_IF_ERROR(injected_status);
  const double injected = clock_.NowEpochSeconds();
  std::string what = kind_name;
  if (fault.kind == provider::FaultSpec::Kind::kPartition) {
    what += " for " + std::to_string(fault.seconds) + " s";
  } else if (fault.kind == provider::FaultSpec::Kind::kGpuXid) {
    what += " (Xid " + std::to_string(fault.xid) + ")";
  }
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    return RecordEvent(tx, clock_, cluster, NodeSubject(node.group_name, instance_id),
                       EventLevel::kWarn, "Fault injected by hpod inject-fault: " + what);
  }));
  ordered_json out;
  out["NodeId"] = instance_id;
  out["Kind"] = kind_name;
  out["InjectedTime"] = injected;
  return out;
}

}  // namespace hpod::controlplane
