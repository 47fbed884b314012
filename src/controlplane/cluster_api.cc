// ClusterApi: dispatch and the operations that change clusters.

#include "hpod/controlplane/cluster_api.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "hpod/api/states.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/ids.h"
#include "hpod/controlplane/lifecycle_bundle.h"
#include "hpod/controlplane/provisioning.h"
#include "hpod/controlplane/render.h"
#include "hpod/controlplane/slurm_plan.h"
#include "hpod/controlplane/software_update.h"

namespace hpod::controlplane {

using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

namespace {

// Cluster-level members kept verbatim in ClusterRecord::spec.
const char* const kClusterSpecMembers[] = {
    "VpcConfig",   "Tags",     "NodeRecovery",         "Orchestrator",
    "ClusterRole", "HpodPool", "HpodSharedFilesystem", "NodeProvisioningMode"};

struct Unsupported {
  const char* member;
  const char* why;
};

const Unsupported kUnsupportedClusterMembers[] = {
    {"RestrictedInstanceGroups",
     "restricted instance groups (SageMaker-managed training "
     "plans) have no self-hosted equivalent"},
    {"TieredStorageConfig", "tiered checkpoint storage is not available yet"},
    {"AutoScaling", "cluster autoscaling (Karpenter) applies to EKS clusters; hpod runs Slurm"},
};

const Unsupported kUnsupportedGroupMembers[] = {
    {"InstanceRequirements", "flexible instance types are not available; set InstanceType"},
    {"TrainingPlanArn", "training plans reserve AWS capacity and have no self-hosted equivalent"},
    {"ScheduledUpdateConfig", "scheduled software updates are not available yet"},
    {"KubernetesConfig", "EKS orchestration is not available; hpod runs Slurm"},
    {"CapacityRequirements", "spot/on-demand capacity choices do not apply to hpod providers"},
    {"MinInstanceCount",
     "a group of a cluster with NodeProvisioningMode Continuous serves with the nodes that "
     "run and launches the rest in the background; omit MinInstanceCount"},
    {"NetworkInterface", "EFA interface selection is not available"},
};

Status Refuse(const std::string& field, const std::string& why) {
  return InvalidArgumentError(field + " is not supported by hpod: " + why);
}

std::string NotFoundMessage(const std::string& name) {
  return "Cluster with name or ARN '" + name + "' not found.";
}

}  // namespace

// HpodSharedFilesystem (cluster or group): what the model cannot say.
Status CheckSharedFilesystem(const json& holder, const std::string& path) {
  auto fs = holder.find("HpodSharedFilesystem");
  if (fs == holder.end() || !fs->is_object()) return OkStatus();
  if (fs->value("Type", "") != "Existing" && fs->value("Source", "").empty()) {
    return InvalidArgumentError(path + "HpodSharedFilesystem.Source is required for Type " +
                                fs->value("Type", "") +
                                ": say what to mount at /fsx (10.0.0.5:/export/fsx), or use "
                                "Type Existing when every host has it mounted already");
  }
  return OkStatus();
}

Status CheckSupportedClusterFields(const json& req) {
  HPOD_RETURN_IF_ERROR(CheckSharedFilesystem(req, ""));
  for (const auto& u : kUnsupportedClusterMembers) {
    if (req.contains(u.member)) return Refuse(u.member, u.why);
  }
  if (req.contains("Orchestrator") && req["Orchestrator"].contains("Eks")) {
    return Refuse("Orchestrator.Eks", "EKS orchestration is not available; hpod runs Slurm");
  }
  if (req.contains("Orchestrator") && req["Orchestrator"].size() != 1) {
    return InvalidArgumentError("Orchestrator must set exactly one of Eks or Slurm");
  }
  return OkStatus();
}

Status CheckSupportedGroupFields(const json& group, const std::string& path) {
  HPOD_RETURN_IF_ERROR(CheckSharedFilesystem(group, path + "."));
  for (const auto& u : kUnsupportedGroupMembers) {
    if (group.contains(u.member)) return Refuse(path + "." + u.member, u.why);
  }
  if (group.contains("ImageId") && group["ImageId"] != "default") {
    return Refuse(path + ".ImageId", "custom AMIs do not apply; use \"default\" or omit it");
  }
  if (!group.contains("InstanceType")) {
    return InvalidArgumentError(path + ".InstanceType is required: name an ml.* instance type");
  }
  if (auto checks = group.find("OnStartDeepHealthChecks"); checks != group.end()) {
    std::set<std::string> seen;
    for (const auto& c : *checks) {
      if (!seen.insert(c.get<std::string>()).second) {
        return InvalidArgumentError(path + ".OnStartDeepHealthChecks names " +
                                    c.get<std::string>() + " twice; give each check once");
      }
    }
  }
  return OkStatus();
}

Status CheckLifecycleSourceVisible(const json& group, const std::string& path,
                                   const provider::NodeEnvironment& env) {
  auto lc = group.find("LifeCycleConfig");
  if (lc == group.end() || !lc->is_object()) return OkStatus();
  const std::string uri = lc->value("SourceS3Uri", "");
  if (uri.rfind("file://", 0) != 0) return OkStatus();
  const std::string where = path + ".LifeCycleConfig.SourceS3Uri of instance group '" +
                            group.value("InstanceGroupName", "") + "' is " + uri;
  if (env.ships_file_sources) {
    // hpodd reads it and sends the scripts: it must be readable here, now.
    auto bundle = ReadLifecycleBundle(uri, lc->value("OnCreate", ""));
    if (!bundle.ok()) return InvalidArgumentError(where + ": " + bundle.status().message());
    return OkStatus();
  }
  if (!env.sees_hpodd_files) {
    return InvalidArgumentError(
        where +
        ", a directory on hpodd's machine, which this provider's nodes do not see (they "
        "are other machines). Put the lifecycle scripts where every node can fetch them: "
        "an s3:// prefix or an https:// URL");
  }
  const std::string dir = uri.substr(7);
  if (dir.empty() || dir[0] != '/') return OkStatus();  // not a host path hpodd can judge
  // Judged as the nodes would open it: symlinks resolved on this machine, which
  // the nodes share (/var/run is /run).
  std::error_code ec;
  std::filesystem::path resolved = std::filesystem::weakly_canonical(dir, ec);
  const std::string hidden = env.PrivateDirOf(ec ? dir : resolved.string());
  if (hidden.empty()) return OkStatus();
  return InvalidArgumentError(
      where + ", which the nodes cannot see: each node has its own " + hidden + ", so the host's " +
      dir +
      " is not there. Put the lifecycle scripts in a directory the nodes share with the host "
      "(e.g. under /var/tmp or /srv), or use an s3:// source");
}

ClusterApi::ClusterApi(store::Store& store, const Clock& clock, const ControlPlaneOptions& options,
                       PageTokenCodec tokens, std::function<void(const std::string&)> wake,
                       const provider::Provider* provider)
    : store_(store),
      clock_(clock),
      options_(options),
      tokens_(std::move(tokens)),
      wake_(std::move(wake)),
      provider_(provider) {}

bool ClusterApi::IsReadOnly(const std::string& op) {
  static const std::set<std::string> kReadOnly = {
      "DescribeCluster",       "ListClusters",         "ListClusterNodes",
      "DescribeClusterNode",   "ListClusterEvents",    "DescribeClusterEvent",
      "HpodStartSession",      "HpodGetNodeLogs",      "HpodListSlurmNodes",
      "HpodDescribeRecovery",  "HpodListRecoveries",   "HpodDescribeJobGoodput",
      "HpodGetCallerIdentity", "HpodListTrainingRuns", "HpodGetTrainingMetrics",
      "HpodListHosts",         "HpodDescribeHost",     "ListTags"};
  return kReadOnly.count(op) > 0;
}

bool ClusterApi::AnswersFromStoreOnly(const std::string& op) {
  // Not DescribeClusterNode: ApiServer adds the agent's clock offset to it.
  static const std::set<std::string> kStoreOnly = {"DescribeCluster", "ListClusters",
                                                   "ListClusterNodes", "ListClusterEvents",
                                                   "DescribeClusterEvent"};
  return kStoreOnly.count(op) > 0;
}

StatusOr<ordered_json> ClusterApi::Call(const api::Operation& op, const json& req) {
  const std::string& n = op.name;
  if (n == "CreateCluster") return CreateCluster(req);
  if (n == "UpdateCluster") return UpdateCluster(req);
  if (n == "DeleteCluster") return DeleteCluster(req);
  if (n == "DescribeCluster") return DescribeCluster(req);
  if (n == "ListClusters") return ListClusters(req);
  if (n == "ListClusterNodes") return ListClusterNodes(req);
  if (n == "DescribeClusterNode") return DescribeClusterNode(req);
  if (n == "BatchDeleteClusterNodes") return BatchDeleteClusterNodes(req);
  if (n == "BatchRebootClusterNodes") return BatchRebootClusterNodes(req);
  if (n == "BatchReplaceClusterNodes") return BatchReplaceClusterNodes(req);
  if (n == "BatchAddClusterNodes") return BatchAddClusterNodes(req);
  if (n == "StartClusterHealthCheck") return StartClusterHealthCheck(req);
  if (n == "UpdateClusterSoftware") return UpdateClusterSoftware(req);
  if (n == "ListClusterEvents") return ListClusterEvents(req);
  if (n == "DescribeClusterEvent") return DescribeClusterEvent(req);
  if (n == "AddTags") return AddTags(req);
  if (n == "ListTags") return ListTags(req);
  if (n == "DeleteTags") return DeleteTags(req);
  return UnimplementedError("operation " + n + " is not implemented")
      .WithAwsType("UnknownOperationException");
}

StatusOr<store::ClusterRecord> ClusterApi::FindCluster(store::ReadTx& tx,
                                                       const std::string& name_or_arn) {
  StatusOr<store::ClusterRecord> c = NotFoundError("");
  if (auto id = ClusterIdFromArn(name_or_arn)) {
    c = tx.GetCluster(*id);
    // An ARN from another region or account names another cluster.
    if (c.ok() && c->arn != name_or_arn) c = NotFoundError("");
  } else {
    c = tx.GetClusterByName(name_or_arn);
  }
  if (!c.ok() && c.status().code() == StatusCode::kNotFound) {
    return NotFoundError(NotFoundMessage(name_or_arn));
  }
  return c;
}

StatusOr<store::ClusterRecord> ClusterApi::FindClusterOrDeleted(store::ReadTx& tx,
                                                                const std::string& name_or_arn) {
  auto live = FindCluster(tx, name_or_arn);
  if (live.ok() || live.status().code() != StatusCode::kNotFound) return live;
  StatusOr<store::DeletedClusterRecord> gone = NotFoundError("");
  if (auto id = ClusterIdFromArn(name_or_arn)) {
    gone = tx.GetDeletedCluster(*id);
    if (gone.ok() && gone->arn != name_or_arn) gone = NotFoundError("");
  } else {
    gone = tx.GetDeletedClusterByName(name_or_arn);
  }
  if (!gone.ok()) {
    if (gone.status().code() == StatusCode::kNotFound) return live.status();
    return gone.status();
  }
  store::ClusterRecord c;
  c.id = gone->id;
  c.name = gone->name;
  c.arn = gone->arn;
  c.failure_message = gone->failure_message;
  c.creation_time = gone->creation_time;
  return c;
}

std::string ClusterApi::DeletedHint(store::ReadTx& tx, const std::string& name_or_arn) const {
  auto id = ClusterIdFromArn(name_or_arn);
  auto gone = id ? tx.GetDeletedCluster(*id) : tx.GetDeletedClusterByName(name_or_arn);
  if (!gone.ok() || (id && gone->arn != name_or_arn)) return "";
  const double until =
      gone->deleted + static_cast<double>(options_.deleted_cluster_retention.count());
  std::string hint = " Cluster " + gone->name + " (" + gone->arn + ") was deleted at " +
                     FormatUtc(gone->deleted) + "; its events and node logs stay readable until " +
                     FormatUtc(until) + " (list-cluster-events --cluster-name " + gone->arn + ").";
  if (!gone->failure_message.empty()) hint += " Its last FailureMessage: " + gone->failure_message;
  return hint;
}

StatusOr<ordered_json> ClusterApi::CreateCluster(const json& req) {
  HPOD_RETURN_IF_ERROR(CheckSupportedClusterFields(req));
  if (req.contains("Tags")) HPOD_RETURN_IF_ERROR(CheckTags(req["Tags"]));
  if (!req.contains("InstanceGroups") || req["InstanceGroups"].empty()) {
    return InvalidArgumentError("InstanceGroups is required: define at least one instance group");
  }
  std::set<std::string> names;
  int total = 0;
  for (size_t i = 0; i < req["InstanceGroups"].size(); ++i) {
    const json& g = req["InstanceGroups"][i];
    std::string path = "InstanceGroups[" + std::to_string(i) + "]";
    HPOD_RETURN_IF_ERROR(CheckSupportedGroupFields(g, path));
    if (provider_)
      HPOD_RETURN_IF_ERROR(CheckLifecycleSourceVisible(g, path, provider_->Environment()));
    if (!names.insert(g["InstanceGroupName"].get<std::string>()).second) {
      return InvalidArgumentError("Instance group name '" +
                                  g["InstanceGroupName"].get<std::string>() +
                                  "' is used more than once; group names must be unique");
    }
    total += g["InstanceCount"].get<int>();
  }
  if (total > options_.max_nodes_per_cluster) {
    return ResourceExhaustedError("The cluster would have " + std::to_string(total) +
                                  " instances; the limit is " +
                                  std::to_string(options_.max_nodes_per_cluster) + " per cluster");
  }
  {
    std::vector<store::GroupRecord> proposed;
    for (const json& g : req["InstanceGroups"]) {
      store::GroupRecord gr;
      gr.name = g["InstanceGroupName"];
      gr.spec = g;
      gr.target_count = g["InstanceCount"];
      proposed.push_back(std::move(gr));
    }
    HPOD_RETURN_IF_ERROR(CheckSlurmConfig(proposed));
  }

  store::ClusterRecord c;
  c.id = NewClusterId();
  c.name = req["ClusterName"];
  c.arn = ClusterArn(options_.region, options_.account_id, c.id);
  c.status = api::NameString(api::ClusterStatus::kCreating);
  c.creation_time = clock_.NowEpochSeconds();
  c.generation = 1;
  for (const char* m : kClusterSpecMembers) {
    if (req.contains(m)) c.spec[m] = req[m];
  }
  const std::string image = ShippedImage();  // the groups' software (software_update.h)
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    auto existing = tx.GetClusterByName(c.name);
    if (existing.ok()) {
      return AlreadyExistsError("Cluster with name '" + c.name + "' already exists (" +
                                existing->arn + ", " + existing->status + ")");
    }
    if (existing.status().code() != StatusCode::kNotFound) return existing.status();
    // Never the id of a deleted cluster still kept: its history would mix in.
    while (tx.GetDeletedCluster(c.id).ok()) {
      c.id = NewClusterId();
      c.arn = ClusterArn(options_.region, options_.account_id, c.id);
    }
    HPOD_ASSIGN_OR_RETURN(auto ids, tx.ListClusterIds());
    if (static_cast<int>(ids.size()) >= options_.max_clusters) {
      return ResourceExhaustedError("The account already has " + std::to_string(ids.size()) +
                                    " clusters, the maximum; delete one first");
    }
    HPOD_RETURN_IF_ERROR(tx.PutCluster(c));
    int position = 0;
    for (const json& g : req["InstanceGroups"]) {
      store::GroupRecord gr;
      gr.cluster_id = c.id;
      gr.name = g["InstanceGroupName"];
      gr.position = position++;
      gr.spec = g;
      gr.target_count = g["InstanceCount"];
      gr.previous_target_count = -1;
      gr.status = api::NameString(api::InstanceGroupStatus::kCreating);
      HPOD_RETURN_IF_ERROR(tx.PutGroup(gr));
      if (!image.empty()) HPOD_RETURN_IF_ERROR(PutGroupImage(tx, c.id, gr.name, {image, ""}));
    }
    return RecordEvent(tx, clock_, c, ClusterSubject(), EventLevel::kInfo,
                       "Cluster creation started with " + std::to_string(total) + " instances in " +
                           std::to_string(position) + " instance groups");
  }));
  wake_(c.id);
  return ordered_json{{"ClusterArn", c.arn}};
}

StatusOr<ordered_json> ClusterApi::UpdateCluster(const json& req) {
  HPOD_RETURN_IF_ERROR(CheckSupportedClusterFields(req));
  std::set<std::string> to_delete;
  if (req.contains("InstanceGroupsToDelete")) {
    for (const auto& n : req["InstanceGroupsToDelete"]) to_delete.insert(n.get<std::string>());
  }
  std::set<std::string> named;
  if (req.contains("InstanceGroups")) {
    for (size_t i = 0; i < req["InstanceGroups"].size(); ++i) {
      const json& g = req["InstanceGroups"][i];
      std::string path = "InstanceGroups[" + std::to_string(i) + "]";
      HPOD_RETURN_IF_ERROR(CheckSupportedGroupFields(g, path));
      if (provider_)
        HPOD_RETURN_IF_ERROR(CheckLifecycleSourceVisible(g, path, provider_->Environment()));
      std::string name = g["InstanceGroupName"];
      if (!named.insert(name).second) {
        return InvalidArgumentError("Instance group name '" + name + "' is used more than once");
      }
      if (to_delete.count(name)) {
        return InvalidArgumentError("Instance group '" + name +
                                    "' is both updated and listed in InstanceGroupsToDelete");
      }
    }
  }
  std::string cluster_id, arn;
  const std::string image = ShippedImage();  // for the groups it adds
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, FindCluster(tx, req["ClusterName"]));
    const bool continuous = IsContinuous(c);
    if (req.contains("NodeProvisioningMode") && !continuous) {
      return InvalidArgumentError(
          "NodeProvisioningMode can be set only when a cluster is created: cluster " + c.name +
          " provisions all-or-nothing; create a new cluster with NodeProvisioningMode Continuous");
    }
    // Continuous provisioning takes an update while earlier ones still converge.
    const bool open = api::Is(c.status, api::ClusterStatus::kInService) ||
                      (continuous && api::Is(c.status, api::ClusterStatus::kCreating));
    if (!open) {
      return FailedPreconditionError("Cluster " + c.name + " is " + c.status +
                                     "; it can be updated only when InService" +
                                     (continuous ? " or Creating" : ""));
    }
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(c.id));
    HPOD_ASSIGN_OR_RETURN(std::string controller_group, ControllerGroup(tx, c.id, groups));
    std::map<std::string, store::GroupRecord> by_name;
    int next_position = 0;
    for (auto& g : groups) {
      next_position = std::max(next_position, g.position + 1);
      by_name[g.name] = g;
    }
    for (const auto& name : to_delete) {
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        return InvalidArgumentError("InstanceGroupsToDelete names '" + name +
                                    "', which is not an instance group of cluster " + c.name);
      }
      if (name == controller_group) {
        return InvalidArgumentError("Instance group '" + name +
                                    "' is the Slurm controller group and cannot be deleted");
      }
    }
    int total = 0;
    for (auto& [name, g] : by_name) {
      if (!to_delete.count(name) && !named.count(name)) total += g.target_count;
    }
    c.generation += 1;
    if (req.contains("InstanceGroups")) {
      for (const json& g : req["InstanceGroups"]) {
        std::string name = g["InstanceGroupName"];
        total += g["InstanceCount"].get<int>();
        auto it = by_name.find(name);
        store::GroupRecord gr;
        if (it != by_name.end()) {
          gr = it->second;
          if (gr.deleting) {
            return FailedPreconditionError("Instance group '" + name + "' is being deleted");
          }
          if (g["InstanceType"] != gr.spec["InstanceType"]) {
            return InvalidArgumentError(
                "InstanceType of instance group '" + name + "' cannot change (" +
                gr.spec["InstanceType"].get<std::string>() + " → " +
                g["InstanceType"].get<std::string>() + "); add a new group instead");
          }
          // A node's Slurm role is fixed for its life (its daemons, its place in
          // slurm.conf); a new role means a new group, as with instance types.
          if (gr.spec.value("SlurmConfig", json()) != g.value("SlurmConfig", json())) {
            return InvalidArgumentError("SlurmConfig of instance group '" + name +
                                        "' cannot change; add a new group instead");
          }
          gr.previous_target_count = gr.target_count;
          gr.status = api::NameString(api::InstanceGroupStatus::kUpdating);
        } else {
          gr.cluster_id = c.id;
          gr.name = name;
          gr.position = next_position++;
          gr.previous_target_count = -1;
          gr.status = api::NameString(api::InstanceGroupStatus::kCreating);
          if (!image.empty()) HPOD_RETURN_IF_ERROR(PutGroupImage(tx, c.id, name, {image, ""}));
        }
        gr.spec = g;
        gr.target_count = g["InstanceCount"];
        HPOD_RETURN_IF_ERROR(tx.PutGroup(gr));
        HPOD_RETURN_IF_ERROR(RecordEvent(
            tx, clock_, c, GroupSubject(name), EventLevel::kInfo,
            "Instance group target set to " + std::to_string(gr.target_count) + " instances"));
      }
    }
    if (total > options_.max_nodes_per_cluster) {
      return ResourceExhaustedError("The cluster would have " + std::to_string(total) +
                                    " instances; the limit is " +
                                    std::to_string(options_.max_nodes_per_cluster));
    }
    for (const auto& name : to_delete) {
      store::GroupRecord gr = by_name[name];
      gr.deleting = true;
      gr.status = api::NameString(api::InstanceGroupStatus::kDeleting);
      gr.previous_target_count = gr.target_count;
      HPOD_RETURN_IF_ERROR(tx.PutGroup(gr));
      HPOD_RETURN_IF_ERROR(RecordEvent(tx, clock_, c, GroupSubject(name), EventLevel::kInfo,
                                       "Instance group deletion started"));
    }
    {
      // The groups as they will be: Slurm roles must still make sense (the
      // transaction rolls back otherwise).
      HPOD_ASSIGN_OR_RETURN(auto after, tx.ListGroups(c.id));
      std::erase_if(after, [](const store::GroupRecord& g) { return g.deleting; });
      HPOD_RETURN_IF_ERROR(CheckSlurmConfig(after));
      HPOD_RETURN_IF_ERROR(CheckFileRoles(tx, c.id, after));
    }
    if (req.contains("NodeRecovery")) c.spec["NodeRecovery"] = req["NodeRecovery"];
    if (req.contains("Orchestrator")) c.spec["Orchestrator"] = req["Orchestrator"];
    // All-or-nothing: the cluster is Updating until every change converged (or
    // rolled back). Continuous: it stays as it is; its groups show the change.
    if (!continuous) {
      c.status = api::NameString(api::ClusterStatus::kUpdating);
      c.failure_message.clear();
    }
    HPOD_RETURN_IF_ERROR(tx.PutCluster(c));
    HPOD_RETURN_IF_ERROR(RecordEvent(tx, clock_, c, ClusterSubject(), EventLevel::kInfo,
                                     continuous ? "Cluster update accepted (continuous "
                                                  "provisioning: the groups converge in the "
                                                  "background)"
                                                : "Cluster update started"));
    cluster_id = c.id;
    arn = c.arn;
    return OkStatus();
  }));
  wake_(cluster_id);
  return ordered_json{{"ClusterArn", arn}};
}

StatusOr<ordered_json> ClusterApi::DeleteCluster(const json& req) {
  std::string cluster_id, arn;
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, FindCluster(tx, req["ClusterName"]));
    cluster_id = c.id;
    arn = c.arn;
    // Deleting twice is accepted: the second call asks for what is under way.
    if (api::Is(c.status, api::ClusterStatus::kDeleting)) return OkStatus();
    c.status = api::NameString(api::ClusterStatus::kDeleting);
    HPOD_RETURN_IF_ERROR(tx.PutCluster(c));
    return RecordEvent(tx, clock_, c, ClusterSubject(), EventLevel::kInfo,
                       "Cluster deletion started");
  }));
  wake_(cluster_id);
  return ordered_json{{"ClusterArn", arn}};
}

StatusOr<ordered_json> ClusterApi::BatchDeleteClusterNodes(const json& req) {
  if (!req.contains("NodeIds") && !req.contains("NodeLogicalIds")) {
    return InvalidArgumentError("Specify NodeIds or NodeLogicalIds");
  }
  ordered_json out = ordered_json::object();
  ordered_json failed = ordered_json::array(), ok = ordered_json::array();
  ordered_json failed_logical = ordered_json::array(), ok_logical = ordered_json::array();
  std::string cluster_id;
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, FindCluster(tx, req["ClusterName"]));
    cluster_id = c.id;
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(c.id));
    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(c.id));
    HPOD_ASSIGN_OR_RETURN(std::string controller_group, ControllerGroup(tx, c.id, groups));
    std::map<std::string, store::GroupRecord> gmap;
    for (auto& g : groups) gmap[g.name] = g;
    // Returns "" on success, else the error code; fills `message`.
    auto remove = [&](store::NodeRecord* n, std::string* message) -> std::string {
      if (api::Is(c.status, api::ClusterStatus::kDeleting)) {
        *message = "Cluster " + c.name + " is being deleted";
        return "InvalidNodeStatus";
      }
      auto& g = gmap[n->group_name];
      if (n->group_name == controller_group) {
        *message = "Node " + n->instance_id + " is in the controller group and cannot be deleted";
        return "NodeIdInUse";
      }
      if (n->remove || api::Is(n->status, api::ClusterInstanceStatus::kShuttingDown))
        return "";  // already going: idempotent
      n->remove = true;
      if (Status s = tx.PutNode(*n); !s.ok()) {
        *message = s.message();
        return "InvalidNodeStatus";
      }
      if (g.target_count > 0) g.target_count -= 1;
      if (Status s = tx.PutGroup(g); !s.ok()) {
        *message = s.message();
        return "InvalidNodeStatus";
      }
      (void)RecordEvent(tx, clock_, c, NodeSubject(n->group_name, n->instance_id),
                        EventLevel::kInfo, "Node deletion requested by BatchDeleteClusterNodes");
      return "";
    };
    auto find = [&](const std::string& key, bool logical) -> store::NodeRecord* {
      for (auto& n : nodes) {
        if ((logical ? n.logical_id : n.instance_id) == key) return &n;
      }
      return nullptr;
    };
    for (const char* member : {"NodeIds", "NodeLogicalIds"}) {
      bool logical = std::string(member) == "NodeLogicalIds";
      if (!req.contains(member)) continue;
      for (const auto& idv : req[member]) {
        std::string id = idv;
        std::string message, code;
        store::NodeRecord* n = find(id, logical);
        if (n == nullptr) {
          code = "NodeIdNotFound";  // the model has no separate code for logical ids
          message = "Node " + id + " not found in cluster " + c.name;
        } else {
          code = remove(n, &message);
        }
        if (code.empty()) {
          (logical ? ok_logical : ok).push_back(id);
        } else if (logical) {
          failed_logical.push_back({{"Code", code}, {"Message", message}, {"NodeLogicalId", id}});
        } else {
          failed.push_back({{"Code", code}, {"Message", message}, {"NodeId", id}});
        }
      }
    }
    return OkStatus();
  }));
  wake_(cluster_id);
  constexpr char kShape[] = "BatchDeleteClusterNodesResponse";
  if (req.contains("NodeIds")) {
    SetListMember(out, kShape, "Failed", failed);
    SetListMember(out, kShape, "Successful", ok);
  }
  if (req.contains("NodeLogicalIds")) {
    SetListMember(out, kShape, "FailedNodeLogicalIds", failed_logical);
    SetListMember(out, kShape, "SuccessfulNodeLogicalIds", ok_logical);
  }
  return out;
}

}  // namespace hpod::controlplane
