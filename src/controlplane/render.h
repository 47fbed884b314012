#pragma once

// Records → response JSON in the shapes of botocore's model, members in model
// order (the CLI's json output keeps response order, as AWS's does).
//
// Thread contract: stateless functions.

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpod/api/model.h"
#include "hpod/store/records.h"

namespace hpod::controlplane {

using ordered_json = nlohmann::ordered_json;

// Copies the members of `value` that `shape` knows, recursively, in model order.
ordered_json InModelOrder(const api::Shape& shape, const nlohmann::json& value);

// DescribeClusterResponse.
// `running` is the CurrentCount of each group (store::ReadTx::CountRunningNodes).
// `group_extra` adds members to a group's ClusterInstanceGroupDetails (its software).
ordered_json RenderCluster(const store::ClusterRecord& cluster,
                           const std::vector<store::GroupRecord>& groups,
                           const std::map<std::string, int>& running,
                           const std::map<std::string, nlohmann::json>& group_extra = {});
// ClusterNodeSummary / ClusterNodeDetails. `group` may be null for a group that
// was deleted while its nodes shut down.
// `extra` adds or replaces members (a node's software, software_update.h).
ordered_json RenderNodeSummary(const store::NodeRecord& node, const store::GroupRecord* group,
                               bool include_logical_id, const std::string& region,
                               const nlohmann::json& extra = nlohmann::json::object());
ordered_json RenderNodeDetails(const store::NodeRecord& node, const store::GroupRecord* group,
                               const std::string& region,
                               const nlohmann::json& extra = nlohmann::json::object());
// ClusterEventSummary / ClusterEventDetail.
ordered_json RenderEvent(const store::EventRecord& event, bool detail);

// Sets `list` as `member` of `out`, a `response_shape` being built, unless it is
// empty and the model says that list holds at least one item: SageMaker then
// leaves the member out (BatchDeleteClusterNodes' Successful when none was).
void SetListMember(ordered_json& out, const char* response_shape, const std::string& member,
                   ordered_json list);

// True for node statuses that count as a live member of its group.
bool IsLiveNode(const store::NodeRecord& node);

}  // namespace hpod::controlplane
