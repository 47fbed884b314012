#include "hpod/controlplane/training_api.h"

#include <algorithm>
#include <chrono>
#include <tuple>
#include <utility>
#include <vector>

#include "hpod/api/states.h"
#include "hpod/controlplane/cluster_api.h"
#include "hpod/controlplane/slurm_plan.h"

namespace hpod::controlplane {
namespace {

namespace proto = api::agentproto;
using nlohmann::json;
using nlohmann::ordered_json;

ordered_json Warnings(const std::vector<std::string>& warnings) {
  ordered_json out = ordered_json::array();
  for (const auto& w : warnings) out.push_back(w);
  return out;
}

}  // namespace

TrainingApi::TrainingApi(store::Store& store, AgentService* agents, TrainingApiOptions options)
    : store_(store), agents_(agents), options_(options) {}

bool TrainingApi::Handles(const std::string& operation) {
  return operation == "HpodListTrainingRuns" || operation == "HpodGetTrainingMetrics";
}

StatusOr<TrainingApi::Answer> TrainingApi::Ask(const std::string& cluster_name,
                                               proto::TrainingQuery query) {
  std::string name = cluster_name;
  std::vector<store::NodeRecord> nodes;
  std::string controller_group;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, ClusterApi::FindCluster(tx, cluster_name));
    name = c.name;
    HPOD_ASSIGN_OR_RETURN(nodes, tx.ListNodes(c.id));
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(c.id));
    HPOD_ASSIGN_OR_RETURN(controller_group, ControllerGroup(tx, c.id, groups));
    return OkStatus();
  }));
  if (agents_ == nullptr) {
    return FailedPreconditionError(
        "hpodd runs no node agents (no node provider configured), so "
        "it cannot read /fsx");
  }
  std::erase_if(nodes, [](const store::NodeRecord& n) {
    return n.remove || !api::Is(n.status, api::ClusterInstanceStatus::kRunning);
  });
  std::sort(nodes.begin(), nodes.end(), [&](const auto& a, const auto& b) {
    return std::tuple(a.group_name != controller_group, a.group_name, a.ordinal) <
           std::tuple(b.group_name != controller_group, b.group_name, b.ordinal);
  });
  if (in_flight_.exchange(true)) {
    return ResourceExhaustedError(
               "another training query is being answered (hpodd asks one at a time); retry "
               "shortly")
        .WithAwsType("ThrottlingException");
  }
  struct Release {
    std::atomic<bool>& flag;
    ~Release() { flag.store(false); }
  } release{in_flight_};
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  int asked = 0;
  bool out_of_time = false;
  Status refused;  // the last node's FAILED_PRECONDITION (no /fsx there)
  for (const store::NodeRecord& n : nodes) {
    if (asked >= options_.max_nodes) break;
    if (!agents_->Liveness(n.instance_id).connected) continue;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      out_of_time = true;
      break;
    }
    ++asked;
    auto result = agents_->QueryTraining(n.instance_id, query, left);
    // Gone between the two calls: the next node may still answer.
    if (!result.ok() && result.status().code() == StatusCode::kFailedPrecondition) {
      --asked;
      continue;
    }
    if (!result.ok() && result.status().code() == StatusCode::kDeadlineExceeded) {
      return UnavailableError(std::string(result.status().message()) + "; try again");
    }
    if (!result.ok()) return result.status();
    if (!result->ok) {
      Status agent = result->ToStatus();
      // The path the caller gave is what was wrong (refused, missing, not a run).
      if (agent.code() == StatusCode::kInvalidArgument || agent.code() == StatusCode::kNotFound) {
        return InvalidArgumentError(agent.message());
      }
      // This node has no /fsx (not mounted yet, or lost): another may.
      if (agent.code() == StatusCode::kFailedPrecondition) {
        refused = agent.Annotate("the agent of " + n.instance_id);
        continue;
      }
      return agent.Annotate("the agent of " + n.instance_id);
    }
    return Answer{n.instance_id, std::move(*result)};
  }
  if (!refused.ok()) {
    return refused.Annotate("no node of cluster " + name + " could read /fsx (" +
                            std::to_string(asked) + " asked)");
  }
  if (out_of_time) {
    return UnavailableError("no answer from the nodes of cluster " + name + " within " +
                            std::to_string(options_.timeout.count()) + " ms; try again");
  }
  return FailedPreconditionError(
      "Cluster " + name +
      " has no Running node with a connected hpod agent to read /fsx from; wait until a node "
      "is Running (hpod list-cluster-nodes)");
}

StatusOr<ordered_json> TrainingApi::Call(const std::string& operation, const json& req) {
  proto::TrainingQuery query;
  if (operation == "HpodListTrainingRuns") {
    query.op = std::string(proto::TrainingQuery::kListRuns);
    HPOD_ASSIGN_OR_RETURN(Answer answer, Ask(req["ClusterName"], std::move(query)));
    ordered_json runs = ordered_json::array();
    for (const proto::TrainingRun& r : answer.result.runs) {
      ordered_json run;
      run["Path"] = r.path;
      run["Kind"] = r.kind;
      run["LastModifiedTime"] = r.last_modified;
      run["SizeBytes"] = r.size_bytes;
      runs.push_back(std::move(run));
    }
    ordered_json out;
    out["TrainingRuns"] = std::move(runs);
    out["NodeId"] = answer.node_id;
    out["Warnings"] = Warnings(answer.result.warnings);
    return out;
  }
  if (operation == "HpodGetTrainingMetrics") {
    query.op = std::string(proto::TrainingQuery::kReadRun);
    query.path = req["Path"];
    query.max_points = req.value("MaxPoints", 0);
    HPOD_ASSIGN_OR_RETURN(Answer answer, Ask(req["ClusterName"], std::move(query)));
    ordered_json series = ordered_json::array();
    for (const proto::TrainingSeries& s : answer.result.series) {
      ordered_json points = ordered_json::array();
      for (const proto::TrainingPoint& p : s.points) {
        ordered_json point;
        point["Step"] = p.step;
        point["WallTime"] = p.wall_time;
        point["Value"] = p.value;
        points.push_back(std::move(point));
      }
      ordered_json one;
      one["Tag"] = s.tag;
      one["Points"] = std::move(points);
      series.push_back(std::move(one));
    }
    ordered_json out;
    out["Series"] = std::move(series);
    out["Warnings"] = Warnings(answer.result.warnings);
    out["NodeId"] = answer.node_id;
    return out;
  }
  return UnimplementedError("operation " + operation + " is not served by TrainingApi");
}

}  // namespace hpod::controlplane
