// ClusterApi: SageMaker's AddTags, ListTags and DeleteTags, for cluster ARNs.
//
// A cluster's tags are the `Tags` of its spec (CreateCluster's, then these
// operations'): one list, in the order keys were first added, at most 50 (the
// model's TagList), keys unique, none beginning with "aws:" (reserved, as on
// SageMaker). The model already bounds lengths and characters. Tags change
// nothing a reconciler acts on, so no handler here wakes one.

#include <algorithm>
#include <set>

#include "hpod/controlplane/cluster_api.h"
#include "hpod/controlplane/ids.h"

namespace hpod::controlplane {

using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

namespace {

constexpr size_t kMaxTags = 50;  // TagList's max in the model

// The cluster an ARN names: kInvalidArgument for a SageMaker ARN of another
// kind (hpod keeps clusters only), kNotFound in SageMaker's words for a cluster
// that is not (or no longer) here.
StatusOr<store::ClusterRecord> TaggedCluster(store::ReadTx& tx, const std::string& arn) {
  if (!ClusterIdFromArn(arn)) {
    return InvalidArgumentError(
        "hpod keeps tags on clusters only: " + arn +
        " is not a cluster ARN (arn:aws:sagemaker:REGION:ACCOUNT:cluster/ID, as CreateCluster "
        "and DescribeCluster return it)");
  }
  return ClusterApi::FindCluster(tx, arn);
}

json TagsOf(const store::ClusterRecord& c) {
  auto it = c.spec.find("Tags");
  return it != c.spec.end() && it->is_array() ? *it : json::array();
}

}  // namespace

Status CheckTags(const json& tags) {
  std::set<std::string> keys;
  for (const json& t : tags) {
    const std::string key = t.value("Key", "");
    if (key.rfind("aws:", 0) == 0) {
      return InvalidArgumentError("Tag key '" + key +
                                  "': keys beginning with aws: are reserved for AWS use");
    }
    if (!keys.insert(key).second) {
      return InvalidArgumentError("Tag key '" + key + "' is given twice; each key once");
    }
  }
  return OkStatus();
}

StatusOr<ordered_json> ClusterApi::AddTags(const json& req) {
  const json& add = req["Tags"];
  HPOD_RETURN_IF_ERROR(CheckTags(add));
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, TaggedCluster(tx, req["ResourceArn"]));
    json tags = TagsOf(c);
    for (const json& t : add) {
      auto same = std::find_if(tags.begin(), tags.end(),
                               [&](const json& old) { return old.value("Key", "") == t["Key"]; });
      if (same != tags.end()) {
        (*same)["Value"] = t["Value"];  // a key added again takes the new value
      } else {
        tags.push_back({{"Key", t["Key"]}, {"Value", t["Value"]}});
      }
    }
    if (tags.size() > kMaxTags) {
      return InvalidArgumentError("Cluster " + c.name + " would have " +
                                  std::to_string(tags.size()) + " tags; a resource has at most " +
                                  std::to_string(kMaxTags) + " (DeleteTags makes room)");
    }
    c.spec["Tags"] = std::move(tags);
    return tx.PutCluster(c);
  }));
  ordered_json out = ordered_json::object();
  out["Tags"] = add;
  return out;
}

StatusOr<ordered_json> ClusterApi::DeleteTags(const json& req) {
  std::set<std::string> gone;
  for (const json& k : req["TagKeys"]) gone.insert(k.get<std::string>());
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, TaggedCluster(tx, req["ResourceArn"]));
    json kept = json::array();
    for (const json& t : TagsOf(c)) {
      if (!gone.count(t.value("Key", ""))) kept.push_back(t);
    }
    c.spec["Tags"] = std::move(kept);  // a key it does not have is no error, as on SageMaker
    return tx.PutCluster(c);
  }));
  return ordered_json::object();
}

StatusOr<ordered_json> ClusterApi::ListTags(const json& req) {
  // hpod never returns a NextToken here (below): any token is not one of its.
  if (!req.value("NextToken", "").empty()) return InvalidArgumentError("The NextToken is invalid");
  ordered_json out = ordered_json::object();
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, TaggedCluster(tx, req["ResourceArn"]));
    // One page always: a cluster has at most 50 tags and MaxResults is at least
    // 50 (ListTagsMaxResults), so no NextToken is ever needed.
    out["Tags"] = TagsOf(c);
    return OkStatus();
  }));
  return out;
}

}  // namespace hpod::controlplane
