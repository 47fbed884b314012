#include "hpod/controlplane/recovery_api.h"

#include "hpod/controlplane/cluster_api.h"
#include "hpod/controlplane/jobs.h"

namespace hpod::controlplane {

using nlohmann::json;
using nlohmann::ordered_json;

bool RecoveryApiHandles(const std::string& operation) {
  return operation == "HpodDescribeRecovery" || operation == "HpodListRecoveries" ||
         operation == "HpodDescribeJobGoodput";
}

ordered_json RenderRecovery(const store::RecoveryRecord& r) {
  ordered_json o;
  o["RecoveryId"] = r.recovery_id;
  o["InstanceGroupName"] = r.group_name;
  o["NodeId"] = r.instance_id;
  if (!r.replacement_id.empty()) o["ReplacementNodeId"] = r.replacement_id;
  o["Hostname"] = r.hostname;
  o["PrivateIpAddress"] = r.private_ip;
  o["Action"] = r.action;
  o["Source"] = r.source;
  o["Check"] = r.check;
  o["Reason"] = r.reason;
  o["Automatic"] = r.automatic;
  o["Phase"] = r.phase;
  o["Status"] = r.status;
  if (!r.message.empty()) o["Message"] = r.message;
  o["CreatedTime"] = r.created;
  if (r.finished > 0) o["FinishedTime"] = r.finished;
  ordered_json steps = ordered_json::array();
  for (const auto& s : r.timeline) {
    if (!s.is_object()) continue;
    auto str = [&](const char* key) {
      auto it = s.find(key);
      return it != s.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    auto time = s.find("time");
    steps.push_back(
        ordered_json{{"Step", str("step")},
                     {"Time", time != s.end() && time->is_number() ? time->get<double>() : 0.0},
                     {"Detail", str("detail")}});
  }
  o["Timeline"] = std::move(steps);
  return o;
}

StatusOr<ordered_json> CallRecoveryApi(store::Store& store, const std::string& operation,
                                       const json& req) {
  ordered_json out;
  HPOD_RETURN_IF_ERROR(store.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, ClusterApi::FindCluster(tx, req["ClusterName"]));
    if (operation == "HpodDescribeJobGoodput") {
      HPOD_ASSIGN_OR_RETURN(out, DescribeJobGoodput(tx, c, req["JobId"].get<std::string>()));
      return OkStatus();
    }
    if (operation == "HpodDescribeRecovery") {
      const std::string id = req["RecoveryId"].get<std::string>();  // required by the model
      auto r = tx.GetRecovery(id);
      if (!r.ok() || r->cluster_id != c.id) {
        return NotFoundError("Recovery " + id + " not found in cluster " + c.name)
            .WithAwsType("ResourceNotFound");
      }
      out["Recovery"] = RenderRecovery(*r);
      return OkStatus();
    }
    const std::string node = req.value("NodeId", "");
    HPOD_ASSIGN_OR_RETURN(auto all, tx.ListRecoveries(c.id));
    ordered_json list = ordered_json::array();
    for (const auto& r : all) {
      if (!node.empty() && r.instance_id != node && r.replacement_id != node) continue;
      list.push_back(RenderRecovery(r));
    }
    out["Recoveries"] = std::move(list);
    return OkStatus();
  }));
  return out;
}

}  // namespace hpod::controlplane
