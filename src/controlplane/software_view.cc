// Rolling software updates: what the read operations show (software_update.h).

#include <algorithm>

#include "hpod/api/states.h"
#include "hpod/controlplane/recovery.h"
#include "hpod/controlplane/software_update.h"

namespace hpod::controlplane {

using nlohmann::json;

namespace {

// UpToDate when `image` is the software hpodd ships now (or it ships none).
std::string VersionStatus(const std::string& image, const std::string& shipped) {
  return shipped.empty() || image == shipped ? "UpToDate" : "UpdateAvailable";
}

}  // namespace

StatusOr<SoftwareView> LoadSoftwareView(store::ReadTx& tx, const std::string& cluster_id,
                                        const std::string& shipped,
                                        const std::vector<std::string>& nodes) {
  SoftwareView v;
  v.shipped = shipped;
  HPOD_ASSIGN_OR_RETURN(v.update, LoadSoftwareUpdate(tx, cluster_id));
  HPOD_ASSIGN_OR_RETURN(v.images, LoadGroupImages(tx, cluster_id));
  HPOD_ASSIGN_OR_RETURN(v.nodes, LoadNodeSoftware(tx, cluster_id, nodes));
  if (v.update && v.update->Active()) {
    for (const auto& id : v.update->batch) {
      auto r = tx.GetRecovery(id);
      if (!r.ok() || !RecoveryActive(*r)) continue;
      v.updating.insert(r->instance_id);
      if (!r->replacement_id.empty()) v.updating.insert(r->replacement_id);
    }
  }
  return v;
}

json GroupSoftwareFields(const SoftwareView& v, const std::string& group) {
  json out = json::object();
  auto image = v.images.find(group);
  if (image != v.images.end() && !image->second.current.empty()) {
    out["CurrentImageId"] = image->second.current;
    out["DesiredImageId"] = image->second.Launch();
    out["ImageVersionStatus"] = VersionStatus(image->second.current, v.shipped);
  }
  if (v.update && std::find(v.update->groups.begin(), v.update->groups.end(), group) !=
                      v.update->groups.end()) {
    out["SoftwareUpdateStatus"] = v.update->status;
    if (v.update->Active()) out["ActiveSoftwareUpdateConfig"] = v.update->deployment;
  }
  return out;
}

json NodeSoftwareFields(const SoftwareView& v, const store::NodeRecord& node) {
  json out = json::object();
  auto s = v.nodes.find(node.instance_id);
  if (s != v.nodes.end() && !s->second.image.empty()) {
    out["CurrentImageId"] = s->second.image;
    out["ImageVersionStatus"] = VersionStatus(s->second.image, v.shipped);
    if (s->second.updated > 0) out["LastSoftwareUpdateTime"] = s->second.updated;
  }
  auto image = v.images.find(node.group_name);
  if (image != v.images.end() && !image->second.Launch().empty()) {
    out["DesiredImageId"] = image->second.Launch();
  }
  // The old node from its drain to its end, its replacement until resumed.
  if (v.updating.count(node.instance_id) &&
      !api::Is(node.status, api::ClusterInstanceStatus::kFailure)) {
    out["InstanceStatus"] = {
        {"Status", api::NameString(api::ClusterInstanceStatus::kSystemUpdating)},
        {"Message", node.message}};
  }
  return out;
}

json SoftwareUpdateSummary(const SoftwareUpdate& u) {
  json out{{"Status", u.status},    {"InstanceGroups", u.groups}, {"TargetImageId", u.target},
           {"Batches", u.batches},  {"UpdatedNodes", u.updated},  {"Message", u.message},
           {"StartTime", u.started}};
  if (!u.reverted.empty()) out["RevertedNodes"] = u.reverted;
  if (!u.failure.empty()) out["FailureReason"] = u.failure;
  if (u.ended > 0) out["EndTime"] = u.ended;
  return out;
}

}  // namespace hpod::controlplane
