// ClusterApi: the read-only operations (describe and list, with pagination).

#include <cstdio>
#include <map>
#include <optional>

#include "hpod/controlplane/cluster_api.h"
#include "hpod/controlplane/deep_health.h"
#include "hpod/controlplane/ids.h"
#include "hpod/controlplane/render.h"
#include "hpod/controlplane/software_update.h"

namespace hpod::controlplane {

using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

namespace {

constexpr int kDefaultPageSize = 100;

int PageSize(const json& req) { return req.value("MaxResults", kDefaultPageSize); }

std::string TimeKey(double t) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", t);
  return buf;
}

std::optional<double> OptTime(const json& req, const char* member) {
  if (!req.contains(member)) return std::nullopt;
  return req[member].get<double>();
}

// Reads a keyset position {"v": sort value, "id": id} from a decoded token.
StatusOr<store::PageAfter> AfterFrom(const json& pos) {
  if (!pos.is_object() || !pos.contains("v") || !pos.contains("id") || !pos["v"].is_string() ||
      !pos["id"].is_string()) {
    return InvalidArgumentError("The NextToken is invalid");
  }
  return store::PageAfter{pos["v"], pos["id"]};
}

// The keyset position of a request's NextToken; nullopt on the first page.
StatusOr<std::optional<store::PageAfter>> PageStart(const PageTokenCodec& tokens,
                                                    const std::string& scope, const json& req) {
  if (!req.contains("NextToken") || req["NextToken"].get<std::string>().empty()) {
    return std::optional<store::PageAfter>();
  }
  HPOD_ASSIGN_OR_RETURN(json pos, tokens.Decode(scope, req["NextToken"]));
  HPOD_ASSIGN_OR_RETURN(store::PageAfter after, AfterFrom(pos));
  return std::optional<store::PageAfter>(std::move(after));
}

std::string PageToken(const PageTokenCodec& tokens, const std::string& scope,
                      const std::string& sort_value, const std::string& id) {
  return tokens.Encode(scope, {{"v", sort_value}, {"id", id}});
}

}  // namespace

StatusOr<ordered_json> ClusterApi::DescribeCluster(const json& req) {
  ordered_json out;
  const std::string shipped = ShippedImage();
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    auto found = FindCluster(tx, req["ClusterName"]);
    if (found.status().code() == StatusCode::kNotFound) {
      return NotFoundError(std::string(found.status().message()) +
                           DeletedHint(tx, req["ClusterName"]));
    }
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, std::move(found));
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(c.id));
    HPOD_ASSIGN_OR_RETURN(auto running, tx.CountRunningNodes(c.id));
    HPOD_ASSIGN_OR_RETURN(SoftwareView software, LoadSoftwareView(tx, c.id, shipped, {}));
    std::map<std::string, json> extra;
    for (const auto& g : groups) extra[g.name] = GroupSoftwareFields(software, g.name);
    out = RenderCluster(c, groups, running, extra);
    if (software.update) out["HpodSoftwareUpdate"] = SoftwareUpdateSummary(*software.update);
    return OkStatus();
  }));
  return out;
}

StatusOr<ordered_json> ClusterApi::ListClusters(const json& req) {
  store::ClusterQuery q;
  q.created_after = OptTime(req, "CreationTimeAfter");
  q.created_before = OptTime(req, "CreationTimeBefore");
  q.name_contains = req.value("NameContains", "");
  q.sort_by_name = req.value("SortBy", "CREATION_TIME") == "NAME";
  q.ascending = req.value("SortOrder", "Ascending") == "Ascending";
  q.limit = PageSize(req) + 1;  // one extra tells whether another page exists
  const std::string scope = PageTokenCodec::ScopeOf("ListClusters", req);
  HPOD_ASSIGN_OR_RETURN(q.after, PageStart(tokens_, scope, req));
  std::vector<store::ClusterRecord> rows;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(rows, tx.ListClusters(q));
    return OkStatus();
  }));
  ordered_json out = ordered_json::object();
  ordered_json list = ordered_json::array();
  // Clusters tied to a training plan cannot exist in hpod, so that filter matches none.
  bool plan_filter = req.contains("TrainingPlanArn");
  for (size_t i = 0; i < rows.size() && static_cast<int>(i) < PageSize(req); ++i) {
    if (plan_filter) break;
    const auto& c = rows[i];
    list.push_back(ordered_json{{"ClusterArn", c.arn},
                                {"ClusterName", c.name},
                                {"CreationTime", c.creation_time},
                                {"ClusterStatus", c.status}});
  }
  if (static_cast<int>(rows.size()) > PageSize(req) && !plan_filter) {
    const auto& last = rows[PageSize(req) - 1];
    out["NextToken"] = PageToken(tokens_, scope,
                                 q.sort_by_name ? last.name : TimeKey(last.creation_time), last.id);
  }
  out["ClusterSummaries"] = std::move(list);
  return out;
}

StatusOr<ordered_json> ClusterApi::ListClusterNodes(const json& req) {
  store::NodeQuery q;
  q.launched_after = OptTime(req, "CreationTimeAfter");
  q.launched_before = OptTime(req, "CreationTimeBefore");
  q.group_contains = req.value("InstanceGroupNameContains", "");
  q.sort_by_name = req.value("SortBy", "CREATION_TIME") == "NAME";
  q.ascending = req.value("SortOrder", "Ascending") == "Ascending";
  q.limit = PageSize(req) + 1;
  bool logical = req.value("IncludeNodeLogicalIds", false);
  const std::string scope = PageTokenCodec::ScopeOf("ListClusterNodes", req);
  HPOD_ASSIGN_OR_RETURN(q.after, PageStart(tokens_, scope, req));
  ordered_json out = ordered_json::object();
  const std::string shipped = ShippedImage();
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, FindCluster(tx, req["ClusterName"]));
    q.cluster_id = c.id;
    HPOD_ASSIGN_OR_RETURN(auto rows, tx.QueryNodes(q));
    int page = PageSize(req);
    std::vector<std::string> shown;
    for (int i = 0; i < static_cast<int>(rows.size()) && i < page; ++i) {
      shown.push_back(rows[i].instance_id);
    }
    HPOD_ASSIGN_OR_RETURN(SoftwareView software, LoadSoftwareView(tx, c.id, shipped, shown));
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(c.id));
    std::map<std::string, const store::GroupRecord*> gmap;
    for (const auto& g : groups) gmap[g.name] = &g;
    ordered_json list = ordered_json::array();
    for (int i = 0; i < static_cast<int>(rows.size()) && i < page; ++i) {
      const auto& n = rows[i];
      auto it = gmap.find(n.group_name);
      list.push_back(RenderNodeSummary(n, it == gmap.end() ? nullptr : it->second, logical,
                                       options_.region, NodeSoftwareFields(software, n)));
    }
    if (static_cast<int>(rows.size()) > page) {
      const auto& last = rows[page - 1];
      out["NextToken"] =
          PageToken(tokens_, scope, q.sort_by_name ? last.group_name : TimeKey(last.launch_time),
                    last.instance_id);
    }
    out["ClusterNodeSummaries"] = std::move(list);
    return OkStatus();
  }));
  return out;
}

StatusOr<ordered_json> ClusterApi::DescribeClusterNode(const json& req) {
  bool by_id = req.contains("NodeId"), by_logical = req.contains("NodeLogicalId");
  if (by_id == by_logical) {
    return InvalidArgumentError("Specify exactly one of NodeId or NodeLogicalId");
  }
  ordered_json out;
  const std::string shipped = ShippedImage();
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, FindCluster(tx, req["ClusterName"]));
    std::string key = by_id ? req["NodeId"] : req["NodeLogicalId"];
    // By id, one read; a logical id has no index, so that form reads the cluster's nodes.
    std::vector<store::NodeRecord> nodes;
    if (by_id) {
      auto n = tx.GetNode(c.id, key);
      if (!n.ok() && n.status().code() != StatusCode::kNotFound) return n.status();
      if (n.ok()) nodes.push_back(std::move(*n));
    } else {
      HPOD_ASSIGN_OR_RETURN(nodes, tx.ListNodes(c.id));
    }
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(c.id));
    for (const auto& n : nodes) {
      if ((by_id ? n.instance_id : n.logical_id) != key) continue;
      HPOD_ASSIGN_OR_RETURN(SoftwareView software,
                            LoadSoftwareView(tx, c.id, shipped, {n.instance_id}));
      const store::GroupRecord* g = nullptr;
      for (const auto& gr : groups) {
        if (gr.name == n.group_name) g = &gr;
      }
      out = ordered_json{{"NodeDetails", RenderNodeDetails(n, g, options_.region,
                                                           NodeSoftwareFields(software, n))}};
      if (auto s = software.nodes.find(n.instance_id); s != software.nodes.end()) {
        // What the agent said it runs (hello.software): the digests the image is named from.
        out["NodeDetails"]["HpodSoftware"] = s->second.software;
      }
      // The node's last deep health check, as it stands (deep_health.h).
      auto deep = tx.GetSetting(DeepCheckSetting(c.id, n.instance_id));
      if (!deep.ok() && deep.status().code() != StatusCode::kNotFound) return deep.status();
      json j = deep.ok() ? json::parse(*deep, nullptr, false) : json();
      if (j.is_object()) {
        DeepCheck d = DeepCheck::FromJson(n.instance_id, j);
        ordered_json r{{"Status", d.state},
                       {"DeepHealthChecks", d.checks},
                       {"Origin", d.origin},
                       {"Message", d.message}};
        if (d.requested > 0) r["RequestedTime"] = d.requested;
        if (d.started > 0) r["StartTime"] = d.started;
        if (d.finished > 0) r["EndTime"] = d.finished;
        out["NodeDetails"]["HpodDeepHealthCheck"] = std::move(r);
      }
      return OkStatus();
    }
    return NotFoundError("Node '" + key + "' not found in cluster " + c.name + ".");
  }));
  return out;
}

StatusOr<ordered_json> ClusterApi::ListClusterEvents(const json& req) {
  store::EventQuery q;
  q.group_name = req.value("InstanceGroupName", "");
  q.instance_id = req.value("NodeId", "");
  q.resource_type = req.value("ResourceType", "");
  q.after_time = OptTime(req, "EventTimeAfter");
  q.before_time = OptTime(req, "EventTimeBefore");
  q.ascending = req.value("SortOrder", "Descending") == "Ascending";
  q.limit = PageSize(req) + 1;
  const std::string scope = PageTokenCodec::ScopeOf("ListClusterEvents", req);
  // The token names the cluster by id too: a name that moved from a deleted
  // cluster to a new one between two pages must not switch their events.
  std::string token_cluster;
  if (req.contains("NextToken") && !req["NextToken"].get<std::string>().empty()) {
    HPOD_ASSIGN_OR_RETURN(json pos, tokens_.Decode(scope, req["NextToken"]));
    if (!pos.is_array() || pos.size() != 2 || !pos[0].is_string() || !pos[1].is_number_integer()) {
      return InvalidArgumentError("The NextToken is invalid");
    }
    token_cluster = pos[0];
    q.after_seq = pos[1].get<int64_t>();
  }
  ordered_json out = ordered_json::object();
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, FindClusterOrDeleted(tx, req["ClusterName"]));
    if (!token_cluster.empty() && token_cluster != c.id) {
      return InvalidArgumentError("The NextToken is invalid: it pages another cluster's events");
    }
    q.cluster_id = c.id;
    HPOD_ASSIGN_OR_RETURN(auto rows, tx.QueryEvents(q));
    int page = PageSize(req);
    ordered_json list = ordered_json::array();
    for (int i = 0; i < static_cast<int>(rows.size()) && i < page; ++i) {
      list.push_back(RenderEvent(rows[i], false));
    }
    if (static_cast<int>(rows.size()) > page) {
      out["NextToken"] = tokens_.Encode(scope, json::array({c.id, rows[page - 1].seq}));
    }
    out["Events"] = std::move(list);
    return OkStatus();
  }));
  return out;
}

StatusOr<ordered_json> ClusterApi::DescribeClusterEvent(const json& req) {
  ordered_json out;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, FindClusterOrDeleted(tx, req["ClusterName"]));
    auto e = tx.GetEvent(c.id, req["EventId"]);
    if (!e.ok() && e.status().code() == StatusCode::kNotFound) {
      return NotFoundError("Event '" + req["EventId"].get<std::string>() +
                           "' not found in cluster " + c.name + ".");
    }
    HPOD_RETURN_IF_ERROR(e.status());
    out = ordered_json{{"EventDetails", RenderEvent(*e, true)}};
    return OkStatus();
  }));
  return out;
}

}  // namespace hpod::controlplane
