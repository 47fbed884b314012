#include "hpod/controlplane/render.h"

#include <map>
#include <string_view>
#include <vector>

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

namespace {

// A structure of `shape` in model order: each member from `over` if there (a
// null there leaves it out), else from `base` unless it is `base_skip`. As
// InModelOrder(shape, base updated with over) gives, without copying `base` (a
// cluster's or group's spec) into that updated object first. `ready`, when
// not null, is the member `ready_name`'s value, already rendered.
ordered_json Overlaid(const api::Shape& shape, const nlohmann::json& base,
                      const nlohmann::json& over, std::string_view base_skip,
                      std::string_view ready_name = {}, ordered_json* ready = nullptr) {
  ordered_json out = ordered_json::object();
  for (const api::Member& m : shape.members) {
    if (ready != nullptr && m.name == ready_name) {
      out[m.name] = std::move(*ready);
      continue;
    }
    const nlohmann::json* v = nullptr;
    if (auto it = over.find(m.name); it != over.end()) {
      v = &*it;
    } else if (base.is_object() && m.name != base_skip) {
      if (auto b = base.find(m.name); b != base.end()) v = &*b;
    }
    if (v != nullptr && !v->is_null()) out[m.name] = InModelOrder(*m.shape, *v);
  }
  return out;
}

}  // namespace

ordered_json RenderCluster(const store::ClusterRecord& cluster,
                           const std::vector<store::GroupRecord>& groups,
                           const std::map<std::string, int>& running,
                           const std::map<std::string, nlohmann::json>& group_extra) {
  static const api::Shape& response = ShapeNamed("DescribeClusterResponse");
  static const api::Shape& details = ShapeNamed("ClusterInstanceGroupDetails");
  // The cluster's spec holds VpcConfig, Tags, NodeRecovery, Orchestrator, ...;
  // these are hpod's own.
  nlohmann::json over = {{"ClusterArn", cluster.arn},
                         {"ClusterName", cluster.name},
                         {"ClusterStatus", cluster.status},
                         {"CreationTime", cluster.creation_time}};
  if (!cluster.failure_message.empty()) over["FailureMessage"] = cluster.failure_message;
  if (!cluster.spec.is_object() || !cluster.spec.contains("NodeRecovery")) {
    over["NodeRecovery"] = "Automatic";
  }
  ordered_json list = ordered_json::array();
  for (const auto& g : groups) {
    auto it = running.find(g.name);
    nlohmann::json group_over = {{"CurrentCount", it == running.end() ? 0 : it->second},
                                 {"TargetCount", g.target_count},
                                 {"Status", g.status}};
    if (auto extra = group_extra.find(g.name); extra != group_extra.end()) {
      group_over.update(extra->second);
    }
    // A group's InstanceCount is its request; TargetCount says it here.
    list.push_back(Overlaid(details, g.spec, group_over, "InstanceCount"));
  }
  return Overlaid(response, cluster.spec, over, "", "InstanceGroups", &list);
}

ordered_json RenderNodeSummary(const store::NodeRecord& node, const store::GroupRecord* group,
                               bool include_logical_id, const std::string& region,
                               const nlohmann::json& extra) {
  // Built in the model's order member by member, as InModelOrder would put it,
  // without the unordered object that InModelOrder then copies: a page holds a
  // hundred summaries, and that copy was most of ListClusterNodes' rendering.
  // `extra` wins over what the node says, as an update of that object would.
  enum class Field { kGroup, kId, kLogicalId, kType, kLaunch, kStatus, kDns, kOnlyExtra };
  static const api::Shape& shape = ShapeNamed("ClusterNodeSummary");
  static const std::vector<Field> fields = [] {
    const std::map<std::string, Field> known = {
        {"InstanceGroupName", Field::kGroup}, {"InstanceId", Field::kId},
        {"NodeLogicalId", Field::kLogicalId}, {"InstanceType", Field::kType},
        {"LaunchTime", Field::kLaunch},       {"InstanceStatus", Field::kStatus},
        {"PrivateDnsHostname", Field::kDns}};
    std::vector<Field> out;
    for (const api::Member& m : shape.members) {
      auto it = known.find(m.name);
      out.push_back(it == known.end() ? Field::kOnlyExtra : it->second);
    }
    return out;
  }();
  ordered_json out = ordered_json::object();
  for (size_t i = 0; i < fields.size(); ++i) {
    const api::Member& m = shape.members[i];
    if (!extra.empty()) {
      if (auto e = extra.find(m.name); e != extra.end()) {
        if (!e->is_null()) out[m.name] = InModelOrder(*m.shape, *e);
        continue;
      }
    }
    switch (fields[i]) {
      case Field::kGroup:
        out[m.name] = node.group_name;
        break;
      case Field::kId:
        out[m.name] = node.instance_id;
        break;
      case Field::kLogicalId:
        if (include_logical_id) out[m.name] = node.logical_id;
        break;
      case Field::kType:
        out[m.name] = group ? group->spec.value("InstanceType", "") : "";
        break;
      case Field::kLaunch:
        out[m.name] = node.launch_time;
        break;
      case Field::kStatus:
        out[m.name] = InModelOrder(*m.shape, {{"Status", node.status}, {"Message", node.message}});
        break;
      case Field::kDns:
        if (!node.private_ip.empty()) out[m.name] = PrivateDnsName(node.private_ip, region);
        break;
      case Field::kOnlyExtra:
        break;
    }
  }
  return out;
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
