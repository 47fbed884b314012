#include "hpod/controlplane/render.h"

#include "hpod/api/states.h"
#include "hpod/controlplane/ids.h"

namespace hpod::controlplane {
namespace {

const api::Shape& ShapeNamed(const char* name) {
  // The names below are in the compiled-in model (checked by model tests), so a
  // miss is a build defect.
  const api::Shape* s = api::ServiceModel::Get().FindShape(name);
  if (s == nullptr) std::abort();
  return *s;
}

}  // namespace

void SetListMember(ordered_json& out, const char* response_shape, const std::string& member,
                   ordered_json list) {
  const api::Member* m = ShapeNamed(response_shape).FindMember(member);
  if (m == nullptr) std::abort();  // a member the model has not: a build defect
  if (list.empty() && m->shape->min.value_or(0) >= 1) return;
  out[member] = std::move(list);
}

ordered_json InModelOrder(const api::Shape& shape, const nlohmann::json& value) {
  switch (shape.type) {
    case api::ShapeType::kStructure: {
      ordered_json out = ordered_json::object();
      if (!value.is_object()) return out;
      for (const api::Member& m : shape.members) {
        auto it = value.find(m.name);
        if (it == value.end() || it->is_null()) continue;
        out[m.name] = InModelOrder(*m.shape, *it);
      }
      return out;
    }
    case api::ShapeType::kList: {
      ordered_json out = ordered_json::array();
      if (!value.is_array()) return out;
      for (const auto& v : value) out.push_back(InModelOrder(*shape.member, v));
      return out;
    }
    case api::ShapeType::kMap: {
      ordered_json out = ordered_json::object();
      if (!value.is_object()) return out;
      for (const auto& [k, v] : value.items()) out[k] = InModelOrder(*shape.value, v);
      return out;
    }
    default:
      // A scalar, copied as it is: json and ordered_json are distinct types, and a
      // dump and parse of each one was a fifth of ListClusterNodes' CPU (a page
      // of 100 nodes has about 1,500 of them).
      switch (value.type()) {
        case nlohmann::json::value_t::string:
          return value.get_ref<const std::string&>();
        case nlohmann::json::value_t::boolean:
          return value.get<bool>();
        case nlohmann::json::value_t::number_integer:
          return value.get<int64_t>();
        case nlohmann::json::value_t::number_unsigned:
          return value.get<uint64_t>();
        case nlohmann::json::value_t::number_float:
          return value.get<double>();
        case nlohmann::json::value_t::null:
          return nullptr;
        default:  // an object or array where the model says scalar: kept whole
          return ordered_json::parse(value.dump());
      }
  }
}

bool IsLiveNode(const store::NodeRecord& node) {
  return !node.remove && !api::Is(node.status, api::ClusterInstanceStatus::kFailure) &&
         !api::Is(node.status, api::ClusterInstanceStatus::kShuttingDown);
}

ordered_json RenderCluster(const store::ClusterRecord& cluster,
                           const std::vector<store::GroupRecord>& groups,
                           const std::map<std::string, int>& running,
                           const std::map<std::string, nlohmann::json>& group_extra) {
  nlohmann::json r = cluster.spec;  // VpcConfig, Tags, NodeRecovery, Orchestrator, ...
  r["ClusterArn"] = cluster.arn;
  r["ClusterName"] = cluster.name;
  r["ClusterStatus"] = cluster.status;
  r["CreationTime"] = cluster.creation_time;
  if (!cluster.failure_message.empty()) r["FailureMessage"] = cluster.failure_message;
  if (!r.contains("NodeRecovery")) r["NodeRecovery"] = "Automatic";
  nlohmann::json gs = nlohmann::json::array();
  for (const auto& g : groups) {
    nlohmann::json d = g.spec;
    auto it = running.find(g.name);
    d["CurrentCount"] = it == running.end() ? 0 : it->second;
    d["TargetCount"] = g.target_count;
    d["Status"] = g.status;
    d.erase("InstanceCount");
    if (auto extra = group_extra.find(g.name); extra != group_extra.end()) {
      d.update(extra->second);
    }
    gs.push_back(std::move(d));
  }
  r["InstanceGroups"] = std::move(gs);
  return InModelOrder(ShapeNamed("DescribeClusterResponse"), r);
}

ordered_json RenderNodeSummary(const store::NodeRecord& node, const store::GroupRecord* group,
                               bool include_logical_id, const std::string& region,
                               const nlohmann::json& extra) {
  nlohmann::json r;
  r["InstanceGroupName"] = node.group_name;
  r["InstanceId"] = node.instance_id;
  if (include_logical_id) r["NodeLogicalId"] = node.logical_id;
  r["InstanceType"] = group ? group->spec.value("InstanceType", "") : "";
  r["LaunchTime"] = node.launch_time;
  r["InstanceStatus"] = {{"Status", node.status}, {"Message", node.message}};
  if (!node.private_ip.empty()) r["PrivateDnsHostname"] = PrivateDnsName(node.private_ip, region);
  r.update(extra);
  return InModelOrder(ShapeNamed("ClusterNodeSummary"), r);
}

ordered_json RenderNodeDetails(const store::NodeRecord& node, const store::GroupRecord* group,
                               const std::string& region, const nlohmann::json& extra) {
  nlohmann::json r = group ? group->spec : nlohmann::json::object();
  r["InstanceGroupName"] = node.group_name;
  r["InstanceId"] = node.instance_id;
  r["NodeLogicalId"] = node.logical_id;
  r["InstanceStatus"] = {{"Status", node.status}, {"Message", node.message}};
  r["LaunchTime"] = node.launch_time;
  if (!node.private_ip.empty()) {
    r["PrivatePrimaryIp"] = node.private_ip;
    r["PrivateDnsHostname"] = PrivateDnsName(node.private_ip, region);
  }
  r.update(extra);
  return InModelOrder(ShapeNamed("ClusterNodeDetails"), r);
}

ordered_json RenderEvent(const store::EventRecord& e, bool detail) {
  nlohmann::json r;
  r["EventId"] = e.event_id;
  r["ClusterArn"] = e.cluster_arn;
  r["ClusterName"] = e.cluster_name;
  if (!e.group_name.empty()) r["InstanceGroupName"] = e.group_name;
  if (!e.instance_id.empty()) r["InstanceId"] = e.instance_id;
  r["ResourceType"] = e.resource_type;
  r["EventTime"] = e.time;
  r["Description"] = e.description;
  r["EventLevel"] = e.level;
  return InModelOrder(ShapeNamed(detail ? "ClusterEventDetail" : "ClusterEventSummary"), r);
}

}  // namespace hpod::controlplane
