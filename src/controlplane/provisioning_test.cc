// Continuous provisioning (provisioning.h) and BatchAddClusterNodes, driven with
// a fake clock and the fake provider.

#include "hpod/controlplane/provisioning.h"

#include <gtest/gtest.h>

#include "hpod/api/errors.h"
#include "hpod/controlplane/ids.h"
#include "hpod/controlplane/test_harness.h"

namespace hpod::controlplane {
namespace {

using nlohmann::json;
using testing::Harness;

constexpr char kBadType[] = "ml.p4d.24xlarge";  // the fake fails every node of it

json Controller() {
  json g = Harness::Group("controller", 1);
  g["SlurmConfig"] = {{"NodeType", "Controller"}};
  return g;
}

json Workers(int count, const std::string& type = "ml.c5.xlarge") {
  json g = Harness::Group("workers", count, type);
  g["SlurmConfig"] = {{"NodeType", "Compute"}, {"PartitionNames", {"dev"}}};
  return g;
}

json CreateReq(json groups, bool continuous = true) {
  json req = {{"ClusterName", "demo"}, {"InstanceGroups", std::move(groups)}};
  if (continuous) req["NodeProvisioningMode"] = "Continuous";
  return req;
}

provider::FakeProviderOptions FailingType() {
  provider::FakeProviderOptions po;
  po.fail_instance_types = {kBadType};
  return po;
}

std::vector<store::NodeRecord> Nodes(Harness& h, const std::string& group) {
  std::vector<store::NodeRecord> out;
  const std::string id =
      ClusterIdFromArn(h.Describe("demo")["ClusterArn"].get<std::string>()).value_or("");
  EXPECT_TRUE(h.store_
                  ->Read([&](store::ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(auto all, tx.ListNodes(id));
                    for (auto& n : all) {
                      if (n.group_name == group) out.push_back(n);
                    }
                    return OkStatus();
                  })
                  .ok());
  return out;
}

int Launches(Harness& h) {
  int n = 0;
  for (const auto& a : h.provider_->actions()) n += a.verb == "Launch";
  return n;
}

json Events(Harness& h) {
  auto r = h.Call("ListClusterEvents", {{"ClusterName", "demo"}, {"MaxResults", 100}});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return json::parse(r->dump())["Events"];
}

bool HasEvent(Harness& h, const std::string& text) {
  for (const auto& e : Events(h)) {
    if (e["Description"].get<std::string>().find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(RetryDelayTest, DoublesFromTheBaseUpToTheCap) {
  ProvisioningRetryOptions o;
  o.base_delay = std::chrono::seconds(5);
  o.max_delay = std::chrono::seconds(60);
  EXPECT_EQ(RetryDelay(o, 1), std::chrono::seconds(5));
  EXPECT_EQ(RetryDelay(o, 2), std::chrono::seconds(10));
  EXPECT_EQ(RetryDelay(o, 4), std::chrono::seconds(40));
  EXPECT_EQ(RetryDelay(o, 5), std::chrono::seconds(60));
  EXPECT_EQ(RetryDelay(o, 1000), std::chrono::seconds(60));
}

// The default mode fails the whole cluster for one worker; Continuous serves
// with its controller and keeps launching the workers, each retry later than the
// last, the logical node kept.
TEST(ContinuousProvisioningTest, ServesOnceTheControllerRunsAndRetriesFailedWorkers) {
  {
    Harness all_or_nothing(FailingType());
    ASSERT_TRUE(
        all_or_nothing.Call("CreateCluster", CreateReq({Controller(), Workers(2, kBadType)}, false))
            .ok());
    all_or_nothing.Converge();
    EXPECT_EQ(all_or_nothing.Describe("demo")["ClusterStatus"], "Failed");
  }
  Harness h(FailingType());
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq({Controller(), Workers(2, kBadType)})).ok());
  h.Converge(2);
  json d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "InService");
  EXPECT_EQ(d["NodeProvisioningMode"], "Continuous");
  EXPECT_EQ(d["InstanceGroups"][0]["Status"], "InService");
  EXPECT_EQ(d["InstanceGroups"][1]["Status"], "Creating");
  EXPECT_EQ(d["InstanceGroups"][1]["CurrentCount"], 0);
  EXPECT_TRUE(HasEvent(h, "continuous provisioning"));

  auto first = Nodes(h, "workers");
  ASSERT_EQ(first.size(), 2u);
  std::map<int, std::string> logical;
  for (const auto& n : first) logical[n.ordinal] = n.logical_id;
  // 20 s of passes: attempts at 0 s, 5 s and 15 s (5 s, then 10 s between).
  h.Converge(40);
  auto now = Nodes(h, "workers");
  ASSERT_EQ(now.size(), 2u);
  for (const auto& n : now) {
    EXPECT_EQ(n.logical_id, logical[n.ordinal]) << "a retry keeps the logical node";
    EXPECT_EQ(n.attempt, 3) << n.message;
    EXPECT_EQ(n.status, "Pending");
    EXPECT_NE(n.message.find("Launch attempt 4 of workers-"), std::string::npos) << n.message;
    EXPECT_NE(n.message.find("failed: Lifecycle scripts did not run"), std::string::npos);
    EXPECT_GT(n.not_before, h.clock_.NowEpochSeconds()) << "waits 20 s before attempt 4";
    EXPECT_EQ(n.launch_time, n.not_before);
  }
  EXPECT_EQ(Launches(h), 1 + 2 * 3);
  EXPECT_TRUE(HasEvent(h, "Instance terminated after it failed to provision"));
  d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "InService");
  EXPECT_EQ(d["InstanceGroups"][1]["Status"], "Creating");
}

// A worker that fails once is launched again and joins: the group and the
// cluster converge with the same logical node under a new instance id.
TEST(ContinuousProvisioningTest, AWorkerThatFailsOnceJoinsOnItsRetry) {
  provider::FakeProviderOptions po;
  po.pending_for = std::chrono::seconds(2);
  Harness h(po);
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq({Controller(), Workers(2)})).ok());
  h.Converge(1);
  auto before = Nodes(h, "workers");
  ASSERT_EQ(before.size(), 2u);
  h.provider_->BreakNode(before[0].instance_id, "Lifecycle script on_create.sh exited 1");
  h.Converge(40);
  json d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "InService");
  EXPECT_EQ(d["InstanceGroups"][1]["Status"], "InService");
  EXPECT_EQ(d["InstanceGroups"][1]["CurrentCount"], 2);
  auto after = Nodes(h, "workers");
  ASSERT_EQ(after.size(), 2u);
  EXPECT_NE(after[0].instance_id, before[0].instance_id);
  EXPECT_EQ(after[0].logical_id, before[0].logical_id);
  EXPECT_EQ(after[0].attempt, 1);
  EXPECT_EQ(after[0].status, "Running");
  EXPECT_EQ(after[1].instance_id, before[1].instance_id);
  EXPECT_EQ(after[1].attempt, 0);
}

// Only workers are retried: a controller that fails while the cluster is being
// created fails it, as the default mode does.
TEST(ContinuousProvisioningTest, AFailedControllerFailsTheCreation) {
  Harness h(FailingType());
  json ctl = Controller();
  ctl["InstanceType"] = kBadType;
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq({ctl, Workers(1)})).ok());
  h.Converge();
  json d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "Failed");
  EXPECT_NE(d["FailureMessage"].get<std::string>().find("failed to provision"), std::string::npos);
  // Wound down as any failed cluster: no node left, no group back in service.
  EXPECT_EQ(h.provider_->node_count(), 0u);
  EXPECT_EQ(d["InstanceGroups"][1]["Status"], "Failed");
}

// While no Slurm roles are known (no SlurmConfig, no provisioning_parameters.json
// reported), any node may be the controller: a failure fails the creation.
TEST(ContinuousProvisioningTest, WithoutKnownRolesAFailureFailsTheCreation) {
  Harness h(FailingType());
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq({Harness::Group("controller", 1),
                                                 Harness::Group("workers", 1, kBadType)}))
                  .ok());
  h.Converge();
  EXPECT_EQ(h.Describe("demo")["ClusterStatus"], "Failed");
}

// A login node that fails after the cluster is in service is not retried (it is
// a priority node): its group is Degraded, the cluster stays InService.
TEST(ContinuousProvisioningTest, APriorityNodeThatFailsLaterLeavesItsGroupDegraded) {
  Harness h(FailingType());
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq({Controller(), Workers(1)})).ok());
  h.Converge();
  json login = Harness::Group("login", 1, kBadType);
  login["SlurmConfig"] = {{"NodeType", "Login"}};
  ASSERT_TRUE(h.Call("UpdateCluster", {{"ClusterName", "demo"}, {"InstanceGroups", {login}}}).ok());
  h.Converge();
  json d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "InService");
  EXPECT_EQ(d["InstanceGroups"][2]["Status"], "Degraded");
  auto nodes = Nodes(h, "login");
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].attempt, 0) << "never launched again";
  EXPECT_EQ(Launches(h), 3);
}

// UpdateCluster is taken while a continuous cluster is still Creating, and the
// cluster's status is left alone; the mode itself is set only at creation.
TEST(ContinuousProvisioningTest, UpdatesWhileCreatingAndKeepsTheModeFixed) {
  Harness h;
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq({Controller(), Workers(1)})).ok());
  auto up = h.Call("UpdateCluster", {{"ClusterName", "demo"}, {"InstanceGroups", {Workers(3)}}});
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_EQ(h.Describe("demo")["ClusterStatus"], "Creating");
  h.Converge();
  json d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "InService");
  EXPECT_EQ(d["InstanceGroups"][1]["CurrentCount"], 3);
  EXPECT_EQ(d["InstanceGroups"][1]["Status"], "InService");
  // In service, an update leaves the cluster InService (its group shows it).
  ASSERT_TRUE(
      h.Call("UpdateCluster", {{"ClusterName", "demo"}, {"InstanceGroups", {Workers(4)}}}).ok());
  d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "InService");
  EXPECT_EQ(d["InstanceGroups"][1]["Status"], "Updating");

  Harness plain;
  ASSERT_TRUE(plain.Call("CreateCluster", CreateReq({Controller(), Workers(1)}, false)).ok());
  plain.Converge();
  auto mode = plain.Call("UpdateCluster",
                         {{"ClusterName", "demo"}, {"NodeProvisioningMode", "Continuous"}});
  EXPECT_EQ(mode.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mode.status().message().find("only when a cluster is created"), std::string::npos);
}

TEST(BatchAddClusterNodesTest, AddsNodesWithLogicalIdsThatRun) {
  Harness h;
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq({Controller(), Workers(1)})).ok());
  h.Converge();
  auto r = h.Call("BatchAddClusterNodes",
                  {{"ClusterName", "demo"},
                   {"NodesToAdd",
                    {{{"InstanceGroupName", "workers"}, {"IncrementTargetCountBy", 2}},
                     {{"InstanceGroupName", "nope"}, {"IncrementTargetCountBy", 1}}}}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  json out = json::parse(r->dump());
  ASSERT_EQ(out["Successful"].size(), 2u);
  EXPECT_EQ(out["Successful"][0]["InstanceGroupName"], "workers");
  EXPECT_EQ(out["Successful"][0]["Status"], "Pending");
  ASSERT_EQ(out["Failed"].size(), 1u);
  EXPECT_EQ(out["Failed"][0]["InstanceGroupName"], "nope");
  EXPECT_EQ(out["Failed"][0]["ErrorCode"], "InstanceGroupNotFound");
  EXPECT_EQ(out["Failed"][0]["FailedCount"], 1);
  json d = h.Describe("demo");
  EXPECT_EQ(d["InstanceGroups"][1]["TargetCount"], 3);
  EXPECT_EQ(d["InstanceGroups"][1]["Status"], "Updating");
  EXPECT_EQ(d["ClusterStatus"], "InService");
  h.Converge();
  d = h.Describe("demo");
  EXPECT_EQ(d["InstanceGroups"][1]["CurrentCount"], 3);
  EXPECT_EQ(d["InstanceGroups"][1]["Status"], "InService");
  for (const auto& added : out["Successful"]) {
    auto n = h.Call("DescribeClusterNode",
                    {{"ClusterName", "demo"}, {"NodeLogicalId", added["NodeLogicalId"]}});
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_EQ((*n)["NodeDetails"]["InstanceStatus"]["Status"], "Running");
  }
}

TEST(BatchAddClusterNodesTest, AClientTokenAnswersTheSameNodesForEightHours) {
  Harness h;
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq({Controller(), Workers(1)})).ok());
  h.Converge();
  json req = {{"ClusterName", "demo"},
              {"ClientToken", "add-1"},
              {"NodesToAdd", {{{"InstanceGroupName", "workers"}, {"IncrementTargetCountBy", 1}}}}};
  auto first = h.Call("BatchAddClusterNodes", req);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  h.Converge();
  auto again = h.Call("BatchAddClusterNodes", req);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)["Successful"][0]["NodeLogicalId"], (*first)["Successful"][0]["NodeLogicalId"]);
  EXPECT_EQ((*again)["Successful"][0]["Status"], "Running") << "the node's status now";
  EXPECT_EQ(h.Describe("demo")["InstanceGroups"][1]["TargetCount"], 2) << "nothing added twice";

  json other = req;
  other["NodesToAdd"][0]["IncrementTargetCountBy"] = 2;
  auto clash = h.Call("BatchAddClusterNodes", other);
  EXPECT_EQ(clash.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(clash.status().message().find("other parameters"), std::string::npos);

  h.clock_.AdvanceTime(std::chrono::hours(8) + std::chrono::seconds(1));
  auto later = h.Call("BatchAddClusterNodes", req);
  ASSERT_TRUE(later.ok());
  EXPECT_NE((*later)["Successful"][0]["NodeLogicalId"], (*first)["Successful"][0]["NodeLogicalId"]);
  EXPECT_EQ(h.Describe("demo")["InstanceGroups"][1]["TargetCount"], 3);
}

TEST(BatchAddClusterNodesTest, RefusesWhatItCannotAdd) {
  Harness plain;
  ASSERT_TRUE(plain.Call("CreateCluster", CreateReq({Controller(), Workers(1)}, false)).ok());
  plain.Converge();
  json add = {{"ClusterName", "demo"},
              {"NodesToAdd", {{{"InstanceGroupName", "workers"}, {"IncrementTargetCountBy", 1}}}}};
  auto r = plain.Call("BatchAddClusterNodes", add);
  EXPECT_EQ(api::ToApiError(r.status()).type, "ValidationException");
  EXPECT_NE(r.status().message().find("only supported for clusters using Continuous"),
            std::string::npos);

  ControlPlaneOptions co;
  co.max_nodes_per_cluster = 40;
  Harness h({}, co);
  ASSERT_TRUE(h.Call("CreateCluster", CreateReq({Controller(), Workers(1)})).ok());
  EXPECT_EQ(
      h.Call("BatchAddClusterNodes", {{"ClusterName", "nope"}, {"NodesToAdd", add["NodesToAdd"]}})
          .status()
          .code(),
      StatusCode::kNotFound);
  json many = add;
  many["NodesToAdd"] = {{{"InstanceGroupName", "workers"}, {"IncrementTargetCountBy", 30}},
                        {{"InstanceGroupName", "controller"}, {"IncrementTargetCountBy", 21}}};
  r = h.Call("BatchAddClusterNodes", many);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("at most 50"), std::string::npos);
  many["NodesToAdd"] = {{{"InstanceGroupName", "workers"}, {"IncrementTargetCountBy", 39}}};
  EXPECT_EQ(api::ToApiError(h.Call("BatchAddClusterNodes", many).status()).type,
            "ResourceLimitExceeded");
  // Only one controller: the controller group cannot grow.
  r = h.Call(
      "BatchAddClusterNodes",
      {{"ClusterName", "demo"},
       {"NodesToAdd", {{{"InstanceGroupName", "controller"}, {"IncrementTargetCountBy", 1}}}}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)["Failed"].size(), 1u);
  EXPECT_EQ((*r)["Failed"][0]["ErrorCode"], "InvalidInstanceGroupStatus");
  EXPECT_EQ(h.Describe("demo")["InstanceGroups"][0]["TargetCount"], 1);
  json twice = add;
  twice["NodesToAdd"].push_back(add["NodesToAdd"][0]);
  EXPECT_EQ(h.Call("BatchAddClusterNodes", twice).status().code(), StatusCode::kInvalidArgument);

  json odd = add;
  odd["NodesToAdd"] = {{{"InstanceGroupName", "workers"},
                        {"IncrementTargetCountBy", 1},
                        {"InstanceTypes", {"ml.g5.xlarge"}}},
                       {{"InstanceGroupName", "controller"},
                        {"IncrementTargetCountBy", 1},
                        {"AvailabilityZones", {"us-west-2a"}}}};
  r = h.Call("BatchAddClusterNodes", odd);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["Successful"].size(), 0u);
  ASSERT_EQ((*r)["Failed"].size(), 2u);
  EXPECT_EQ((*r)["Failed"][0]["ErrorCode"], "IncompatibleInstanceTypes");
  EXPECT_EQ((*r)["Failed"][1]["ErrorCode"], "IncompatibleAvailabilityZones");
  EXPECT_EQ(h.Describe("demo")["InstanceGroups"][1]["TargetCount"], 1);
  // The group's own type is fine.
  odd["NodesToAdd"] = {{{"InstanceGroupName", "workers"},
                        {"IncrementTargetCountBy", 1},
                        {"InstanceTypes", {"ml.g5.xlarge", "ml.c5.xlarge"}}}};
  r = h.Call("BatchAddClusterNodes", odd);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["Successful"].size(), 1u);
}

}  // namespace
}  // namespace hpod::controlplane
