#include "hpod/controlplane/render.h"

#include <gtest/gtest.h>

#include <vector>

#include "hpod/api/model.h"
#include "hpod/controlplane/ids.h"

namespace hpod::controlplane {
namespace {

const api::Shape& Shape(const char* name) {
  const api::Shape* s = api::ServiceModel::Get().FindShape(name);
  EXPECT_NE(s, nullptr) << name;
  return *s;
}

// Members come out in the model's order, unknown and null ones left out, and each
// scalar as it came: its type (an integer stays an integer, a double a double),
// its text (escapes, non-ASCII) and its value.
TEST(RenderTest, InModelOrderKeepsEveryScalarAsItIs) {
  const nlohmann::json value = {
      {"LaunchTime", 1700000000.25},
      {"InstanceStatus", {{"Message", "line\n\"quoted\" é"}, {"Status", "Running"}}},
      {"InstanceId", "i-0123456789abcdef0"},
      {"InstanceGroupName", "workers"},
      {"NotInTheModel", true},
      {"NodeLogicalId", nullptr},
  };
  EXPECT_EQ(InModelOrder(Shape("ClusterNodeSummary"), value).dump(),
            R"({"InstanceGroupName":"workers","InstanceId":"i-0123456789abcdef0",)"
            R"("LaunchTime":1700000000.25,"InstanceStatus":{"Status":"Running",)"
            R"("Message":"line\n\"quoted\" é"}})");
  nlohmann::json integers = {{"LaunchTime", 1700000000}};
  auto out = InModelOrder(Shape("ClusterNodeSummary"), integers);
  EXPECT_TRUE(out["LaunchTime"].is_number_integer());
  EXPECT_EQ(out.dump(), R"({"LaunchTime":1700000000})");
  integers["LaunchTime"] = uint64_t{18446744073709551615u};
  EXPECT_EQ(InModelOrder(Shape("ClusterNodeSummary"), integers).dump(),
            R"({"LaunchTime":18446744073709551615})");
}

// RenderNodeSummary builds in the model's order itself: the same bytes as the
// generic way (an object of everything, the extra fields over it, InModelOrder).
TEST(RenderTest, ANodeSummaryIsWhatTheGenericRenderingGives) {
  store::NodeRecord node;
  node.group_name = "workers";
  node.instance_id = "i-0123456789abcdef0";
  node.logical_id = "workers-1";
  node.launch_time = 1700000000.5;
  node.status = "Running";
  node.message = "ok \"quoted\"";
  node.private_ip = "10.1.2.3";
  store::GroupRecord group;
  group.spec = {{"InstanceType", "ml.p5.48xlarge"}};
  auto generic = [&](const store::GroupRecord* g, bool logical, const nlohmann::json& extra) {
    nlohmann::json r;
    r["InstanceGroupName"] = node.group_name;
    r["InstanceId"] = node.instance_id;
    if (logical) r["NodeLogicalId"] = node.logical_id;
    r["InstanceType"] = g ? g->spec.value("InstanceType", "") : "";
    r["LaunchTime"] = node.launch_time;
    r["InstanceStatus"] = {{"Status", node.status}, {"Message", node.message}};
    if (!node.private_ip.empty())
      r["PrivateDnsHostname"] = PrivateDnsName(node.private_ip, "eu-west-1");
    r.update(extra);
    return InModelOrder(Shape("ClusterNodeSummary"), r).dump();
  };
  const nlohmann::json extras[] = {
      nlohmann::json::object(),
      {{"ImageVersionStatus", "UpToDate"}, {"LastSoftwareUpdateTime", 1700000100}},
      {{"InstanceStatus", {{"Status", "SystemUpdating"}, {"Message", "m"}}},
       {"DesiredImageId", "not in the summary"},
       {"InstanceType", nullptr}},
  };
  for (const auto& extra : extras) {
    for (bool logical : {false, true}) {
      for (const store::GroupRecord* g : std::vector<const store::GroupRecord*>{&group, nullptr}) {
        EXPECT_EQ(RenderNodeSummary(node, g, logical, "eu-west-1", extra).dump(),
                  generic(g, logical, extra))
            << extra.dump();
      }
    }
  }
  node.private_ip.clear();
  EXPECT_EQ(RenderNodeSummary(node, &group, true, "eu-west-1", extras[1]).dump(),
            generic(&group, true, extras[1]));
}

// RenderCluster overlays its own members on the specs without copying them: the
// same bytes as the generic way (the spec updated, then InModelOrder).
TEST(RenderTest, AClusterIsWhatTheGenericRenderingGives) {
  store::ClusterRecord cluster;
  cluster.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc";
  cluster.name = "demo";
  cluster.status = "InService";
  cluster.creation_time = 1700000000.25;
  cluster.spec = {{"VpcConfig", {{"Subnets", {"subnet-1"}}, {"SecurityGroupIds", {"sg-1"}}}},
                  {"Tags", {{{"Key", "team"}, {"Value", "ml \"infra\""}}}},
                  {"Orchestrator", nullptr},
                  {"NotInTheModel", 1}};
  std::vector<store::GroupRecord> groups(2);
  groups[0].name = "controller";
  groups[0].target_count = 1;
  groups[0].status = "InService";
  groups[0].spec = {
      {"InstanceGroupName", "controller"},
      {"InstanceType", "ml.c5.xlarge"},
      {"InstanceCount", 1},
      {"LifeCycleConfig", {{"SourceS3Uri", "s3://b/lc"}, {"OnCreate", "on_create.sh"}}},
      {"ExecutionRole", "arn:aws:iam::123456789012:role/r"},
      {"ThreadsPerCore", 1}};
  groups[1] = groups[0];
  groups[1].name = "workers";
  groups[1].target_count = 4;
  groups[1].spec["InstanceGroupName"] = "workers";
  groups[1].spec["InstanceCount"] = 4;
  const std::map<std::string, int> running = {{"workers", 3}};
  const std::map<std::string, nlohmann::json> extra = {
      {"workers", {{"CurrentImageId", "ami-1"}, {"Status", "Updating"}}}};
  auto generic = [&](const store::ClusterRecord& c) {
    nlohmann::json r = c.spec;
    r["ClusterArn"] = c.arn;
    r["ClusterName"] = c.name;
    r["ClusterStatus"] = c.status;
    r["CreationTime"] = c.creation_time;
    if (!c.failure_message.empty()) r["FailureMessage"] = c.failure_message;
    if (!r.contains("NodeRecovery")) r["NodeRecovery"] = "Automatic";
    nlohmann::json gs = nlohmann::json::array();
    for (const auto& g : groups) {
      nlohmann::json d = g.spec;
      auto it = running.find(g.name);
      d["CurrentCount"] = it == running.end() ? 0 : it->second;
      d["TargetCount"] = g.target_count;
      d["Status"] = g.status;
      d.erase("InstanceCount");
      if (auto e = extra.find(g.name); e != extra.end()) d.update(e->second);
      gs.push_back(std::move(d));
    }
    r["InstanceGroups"] = std::move(gs);
    return InModelOrder(Shape("DescribeClusterResponse"), r).dump();
  };
  EXPECT_EQ(RenderCluster(cluster, groups, running, extra).dump(), generic(cluster));
  cluster.failure_message = "capacity";
  cluster.spec["NodeRecovery"] = "None";
  EXPECT_EQ(RenderCluster(cluster, groups, running, extra).dump(), generic(cluster));
  groups.clear();
  EXPECT_EQ(RenderCluster(cluster, groups, running, extra).dump(), generic(cluster));
}

}  // namespace
}  // namespace hpod::controlplane
