// Rolling software updates: records, and UpdateClusterSoftware's checks and
// writes (software_update.h). The steps are in software_update_run.cc.

#include "hpod/controlplane/software_update.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "hpod/api/software_image.h"
#include "hpod/api/states.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/slurm_plan.h"

namespace hpod::controlplane {

using nlohmann::json;

namespace {

std::vector<std::string> Strings(const json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& v : *it) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

double Number(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0;
}

std::string Text(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

// The image most of `group`'s nodes report; "" when none reports one.
std::string MostReported(const std::vector<store::NodeRecord>& nodes, const std::string& group,
                         const std::map<std::string, NodeSoftware>& software) {
  std::map<std::string, int> count;
  for (const auto& n : nodes) {
    auto it = software.find(n.instance_id);
    if (n.group_name == group && !n.remove && it != software.end() && !it->second.image.empty()) {
      ++count[it->second.image];
    }
  }
  std::string best;
  for (const auto& [image, k] : count) {
    if (best.empty() || k > count[best]) best = image;
  }
  return best;
}

Status CheckSize(const json& deployment, const char* key) {
  auto policy = deployment.find("RollingUpdatePolicy");
  if (policy == deployment.end() || !policy->contains(key)) return OkStatus();
  const json& size = (*policy)[key];
  if (Text(size, "Type") == "CAPACITY_PERCENTAGE" && Number(size, "Value") > 100) {
    return InvalidArgumentError(std::string("RollingUpdatePolicy.") + key +
                                " is a CAPACITY_PERCENTAGE above 100; give 1 to 100");
  }
  return OkStatus();
}

}  // namespace

bool SoftwareUpdate::AutoRollback() const {
  auto it = deployment.find("AutoRollbackConfiguration");
  return it != deployment.end() && it->is_array() && !it->empty();
}

json SoftwareUpdate::ToJson() const {
  return json{{"status", status},     {"groups", groups},         {"target", target},
              {"previous", previous}, {"deployment", deployment}, {"batch", batch},
              {"updated", updated},   {"reverted", reverted},     {"next_batch_at", next_batch_at},
              {"batches", batches},   {"started", started},       {"ended", ended},
              {"message", message},   {"failure", failure}};
}

SoftwareUpdate SoftwareUpdate::FromJson(const json& j) {
  SoftwareUpdate u;
  if (!j.is_object()) return u;
  u.status = Text(j, "status");
  u.groups = Strings(j, "groups");
  u.target = Text(j, "target");
  if (auto it = j.find("previous"); it != j.end() && it->is_object()) {
    for (const auto& [g, image] : it->items()) {
      if (image.is_string()) u.previous[g] = image.get<std::string>();
    }
  }
  if (auto it = j.find("deployment"); it != j.end() && it->is_object()) u.deployment = *it;
  u.batch = Strings(j, "batch");
  u.updated = Strings(j, "updated");
  u.reverted = Strings(j, "reverted");
  u.next_batch_at = Number(j, "next_batch_at");
  u.batches = static_cast<int>(Number(j, "batches"));
  u.started = Number(j, "started");
  u.ended = Number(j, "ended");
  u.message = Text(j, "message");
  u.failure = Text(j, "failure");
  return u;
}

std::string SoftwareUpdateSetting(const std::string& cluster_id) {
  return "cluster/" + cluster_id + "/software-update";
}
std::string GroupImageSetting(const std::string& cluster_id, const std::string& group) {
  return "cluster/" + cluster_id + "/group-image/" + group;
}
std::string NodeSoftwareSetting(const std::string& cluster_id, const std::string& instance_id) {
  return "cluster/" + cluster_id + "/node-software/" + instance_id;
}

StatusOr<std::optional<SoftwareUpdate>> LoadSoftwareUpdate(store::ReadTx& tx,
                                                           const std::string& cluster_id) {
  auto value = tx.GetSetting(SoftwareUpdateSetting(cluster_id));
  if (value.status().code() == StatusCode::kNotFound) return std::optional<SoftwareUpdate>();
  if (!value.ok()) return value.status();
  return std::optional<SoftwareUpdate>(
      SoftwareUpdate::FromJson(json::parse(*value, nullptr, false)));
}

Status PutSoftwareUpdate(store::WriteTx& tx, const std::string& cluster_id,
                         const SoftwareUpdate& u) {
  return tx.PutSetting(SoftwareUpdateSetting(cluster_id), u.ToJson().dump());
}

namespace {

// The records under `prefix`, each read by `parse` from its JSON object, keyed by
// the rest of its key; a value that is not an object is skipped (it is data).
template <typename T>
StatusOr<std::map<std::string, T>> LoadRecords(store::ReadTx& tx, const std::string& prefix,
                                               T (*parse)(const json&)) {
  HPOD_ASSIGN_OR_RETURN(auto settings, tx.ListSettings(prefix));
  std::map<std::string, T> out;
  for (const auto& [key, value] : settings) {
    json j = json::parse(value, nullptr, false);
    if (j.is_object()) out[key.substr(prefix.size())] = parse(j);
  }
  return out;
}

GroupImage ParseGroupImage(const json& j) { return {Text(j, "current"), Text(j, "desired")}; }

NodeSoftware ParseNodeSoftware(const json& j) {
  NodeSoftware s;
  s.image = Text(j, "image");
  if (auto it = j.find("software"); it != j.end() && it->is_object()) {
    for (const auto& [name, digest] : it->items()) {
      if (digest.is_string()) s.software[name] = digest.get<std::string>();
    }
  }
  s.reported = Number(j, "reported");
  s.updated = Number(j, "updated");
  return s;
}

}  // namespace

StatusOr<std::map<std::string, GroupImage>> LoadGroupImages(store::ReadTx& tx,
                                                            const std::string& cluster_id) {
  return LoadRecords(tx, GroupImageSetting(cluster_id, ""), &ParseGroupImage);
}

Status PutGroupImage(store::WriteTx& tx, const std::string& cluster_id, const std::string& group,
                     const GroupImage& image) {
  return tx.PutSetting(GroupImageSetting(cluster_id, group),
                       json{{"current", image.current}, {"desired", image.desired}}.dump());
}

StatusOr<std::map<std::string, NodeSoftware>> LoadNodeSoftware(store::ReadTx& tx,
                                                               const std::string& cluster_id) {
  return LoadRecords(tx, NodeSoftwareSetting(cluster_id, ""), &ParseNodeSoftware);
}

StatusOr<std::map<std::string, NodeSoftware>> LoadNodeSoftware(
    store::ReadTx& tx, const std::string& cluster_id,
    const std::vector<std::string>& instance_ids) {
  std::vector<std::string> keys;
  keys.reserve(instance_ids.size());
  for (const auto& id : instance_ids) keys.push_back(NodeSoftwareSetting(cluster_id, id));
  HPOD_ASSIGN_OR_RETURN(auto values, tx.GetSettings(keys));
  const size_t prefix = NodeSoftwareSetting(cluster_id, "").size();
  std::map<std::string, NodeSoftware> out;
  for (const auto& [key, value] : values) {
    json j = json::parse(value, nullptr, false);
    if (j.is_object()) out[key.substr(prefix)] = ParseNodeSoftware(j);
  }
  return out;
}

Status RecordNodeSoftware(store::WriteTx& tx, const Clock& clock, const std::string& cluster_id,
                          const std::string& instance_id,
                          const std::map<std::string, std::string>& software) {
  const std::string key = NodeSoftwareSetting(cluster_id, instance_id);
  json j = json::object();
  if (auto old = tx.GetSetting(key); old.ok()) {
    j = json::parse(*old, nullptr, false);
    if (!j.is_object()) j = json::object();
  }
  const std::string image = api::ImageIdOf(software);
  if (Text(j, "image") == image && j.value("software", json::object()) == json(software)) {
    return OkStatus();
  }
  j["image"] = image;
  j["software"] = software;
  j["reported"] = clock.NowEpochSeconds();
  return tx.PutSetting(key, j.dump());
}

Status ForgetNodeSoftware(store::WriteTx& tx, const std::string& cluster_id,
                          const std::string& instance_id) {
  return tx.DeleteSetting(NodeSoftwareSetting(cluster_id, instance_id));
}

int BatchSize(const json* size, int count) {
  count = std::max(count, 1);
  if (size == nullptr || !size->is_object()) return count;
  const double value = Number(*size, "Value");
  if (Text(*size, "Type") == "CAPACITY_PERCENTAGE") {
    return std::clamp(static_cast<int>(count * value / 100), 1, count);
  }
  return std::clamp(static_cast<int>(value), 1, count);
}

Status StartSoftwareUpdate(store::WriteTx& tx, const Clock& clock, store::ClusterRecord& c,
                           const json& req, const std::string& current_image,
                           const std::function<bool(const std::string&)>& has_image) {
  if (!api::Is(c.status, api::ClusterStatus::kInService)) {  // ConflictException, as the model
    return FailedPreconditionError("Cluster " + c.name + " is " + c.status +
                                   "; its software is updated while it is InService");
  }
  HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(c.id));
  HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(c.id));
  HPOD_ASSIGN_OR_RETURN(std::string controller, ControllerGroup(tx, c.id, groups));
  HPOD_ASSIGN_OR_RETURN(auto images, LoadGroupImages(tx, c.id));
  HPOD_ASSIGN_OR_RETURN(auto software, LoadNodeSoftware(tx, c.id));
  std::map<std::string, store::GroupRecord*> by_name;
  for (auto& g : groups) {
    if (!g.deleting) by_name[g.name] = &g;
  }
  SoftwareUpdate u;
  if (auto it = req.find("InstanceGroups"); it != req.end()) {
    for (const auto& spec : *it) {
      const std::string name = spec.value("InstanceGroupName", "");
      if (!by_name.count(name)) {
        return InvalidArgumentError("Instance group " + name + " is not in cluster " + c.name);
      }
      if (std::find(u.groups.begin(), u.groups.end(), name) != u.groups.end()) {
        return InvalidArgumentError("Instance group " + name + " is named twice in InstanceGroups");
      }
      u.groups.push_back(name);
    }
  } else {
    for (const auto& g : groups) {
      if (!g.deleting) u.groups.push_back(g.name);
    }
  }
  // The controller last: it is rebooted into the new software, and while it
  // restarts, slurmctld does not answer (the workers' jobs run on meanwhile).
  std::stable_partition(u.groups.begin(), u.groups.end(),
                        [&](const std::string& g) { return g != controller; });
  std::string asked = req.value("ImageId", "default");  // the model allows upper-case hex
  std::transform(asked.begin(), asked.end(), asked.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  u.target = asked == "default" ? current_image : asked;
  if (u.target != current_image && !has_image(u.target)) {
    return InvalidArgumentError(
        "ImageId " + asked + " is not software this hpodd holds; it ships " +
        (current_image.empty() ? std::string("none (its nodes run their hosts' own software)")
                               : current_image) +
        ": install the hpod you want beside hpodd, restart it, and update with ImageId default");
  }
  if (auto it = req.find("DeploymentConfig"); it != req.end()) u.deployment = *it;
  HPOD_RETURN_IF_ERROR(CheckSize(u.deployment, "MaximumBatchSize"));
  HPOD_RETURN_IF_ERROR(CheckSize(u.deployment, "RollbackMaximumBatchSize"));
  if (auto it = u.deployment.find("AutoRollbackConfiguration"); it != u.deployment.end()) {
    for (const auto& alarm : *it) {
      const std::string name = alarm.value("AlarmName", "");
      if (name != kNodeHealthAlarm) {
        return InvalidArgumentError(
            "AlarmName " + name + " is not an alarm hpod knows: hpod has no CloudWatch; give " +
            kNodeHealthAlarm + " (a node of a batch did not come back healthy with the new " +
            "software) to roll back on it");
      }
    }
  }
  if (u.target.empty() && u.AutoRollback()) {
    return InvalidArgumentError(
        "This hpodd's nodes run their hosts' own software (it ships no image), so an update "
        "re-provisions them and has nothing to roll back to: leave out AutoRollbackConfiguration");
  }
  for (const auto& g : u.groups) {
    GroupImage& image = images[g];
    if (image.current.empty()) {
      // A group from before images: what its nodes report, if hpodd can launch it.
      image.current = MostReported(nodes, g, software);
      if (!image.current.empty() && image.current != current_image && !has_image(image.current)) {
        image.current.clear();
      }
    }
    if (image.current.empty() && u.AutoRollback()) {
      return InvalidArgumentError("The software of instance group " + g +
                                  " is unknown or no longer held by hpodd, so it could not be "
                                  "rolled back: leave out AutoRollbackConfiguration");
    }
    u.previous[g] = image.current;
    image.desired = u.target;
    HPOD_RETURN_IF_ERROR(PutGroupImage(tx, c.id, g, image));
    store::GroupRecord& group = *by_name[g];
    group.status = api::NameString(api::InstanceGroupStatus::kSystemUpdating);
    HPOD_RETURN_IF_ERROR(tx.PutGroup(group));
  }
  const double now = clock.NowEpochSeconds();
  u.started = now;
  u.message = "updating " + Join(u.groups) + " to " +
              (u.target.empty() ? std::string("their hosts' software") : u.target);
  HPOD_RETURN_IF_ERROR(PutSoftwareUpdate(tx, c.id, u));
  const std::string from = c.status;
  c.status = api::NameString(api::ClusterStatus::kSystemUpdating);
  HPOD_RETURN_IF_ERROR(tx.PutCluster(c));
  return RecordEvent(tx, clock, c, ClusterSubject(), EventLevel::kInfo,
                     "Cluster status changed from " + from + " to " + c.status +
                         ": UpdateClusterSoftware, " + u.message);
}

}  // namespace hpod::controlplane
