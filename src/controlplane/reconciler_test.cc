// The reconciler's state machine: all-or-nothing creation, update rollback,
// transient provider errors, and convergence without orphans.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "hpod/controlplane/test_harness.h"

namespace hpod::controlplane {
namespace {

using nlohmann::json;
using testing::Harness;

json Req(const std::string& name, json groups) {
  return {{"ClusterName", name}, {"InstanceGroups", groups}};
}

std::set<std::string> StoreNodeIds(Harness& h, const std::string& cluster_id) {
  std::set<std::string> ids;
  EXPECT_TRUE(h.store_
                  ->Read([&](store::ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(cluster_id));
                    for (auto& n : nodes) ids.insert(n.instance_id);
                    return OkStatus();
                  })
                  .ok());
  return ids;
}

std::string IdOf(const json& describe) {
  std::string arn = describe["ClusterArn"];
  return arn.substr(arn.size() - 12);
}

TEST(ReconcilerTest, NodesGoPendingThenRunning) {
  provider::FakeProviderOptions po;
  po.pending_for = std::chrono::seconds(5);
  Harness h(po);
  ASSERT_TRUE(h.Call("CreateCluster", Req("demo", {Harness::Group("w", 2)})).ok());
  h.queue_->RunUntilIdle();
  auto nodes = h.Call("ListClusterNodes", {{"ClusterName", "demo"}});
  ASSERT_EQ((*nodes)["ClusterNodeSummaries"].size(), 2u);
  EXPECT_EQ((*nodes)["ClusterNodeSummaries"][0]["InstanceStatus"]["Status"], "Pending");
  h.Converge(5);  // 2.5 s of fake time
  EXPECT_EQ(h.Describe("demo")["ClusterStatus"], "Creating");
  h.Converge(10);
  EXPECT_EQ(h.Describe("demo")["ClusterStatus"], "InService");
}

TEST(ReconcilerTest, OneFailedNodeFailsTheCreateAndCleansUp) {
  provider::FakeProviderOptions po;
  po.fail_groups = {"bad"};
  Harness h(po);
  ASSERT_TRUE(
      h.Call("CreateCluster", Req("demo", {Harness::Group("ctl", 1), Harness::Group("bad", 2)}))
          .ok());
  h.Converge();
  json d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "Failed");
  std::string msg = d["FailureMessage"];
  EXPECT_EQ(msg.rfind("Instance i-", 0), 0u) << msg;
  EXPECT_NE(msg.find("failed to provision with the following error: \"Lifecycle scripts did not "
                     "run successfully."),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("Note that multiple instances may be impacted."), std::string::npos);
  EXPECT_EQ(d["InstanceGroups"][1]["Status"], "Failed");
  // All nodes of the failed operation are gone, at the provider and in the store.
  EXPECT_EQ(h.provider_->node_count(), 0u);
  EXPECT_TRUE(StoreNodeIds(h, IdOf(d)).empty());
  auto ev = h.Call("ListClusterEvents", {{"ClusterName", "demo"}, {"ResourceType", "Cluster"}});
  EXPECT_EQ((*ev)["Events"][0]["EventLevel"], "Error");
  // A failed cluster can be deleted.
  ASSERT_TRUE(h.Call("DeleteCluster", {{"ClusterName", "demo"}}).ok());
  h.Converge();
  EXPECT_EQ(h.Call("DescribeCluster", {{"ClusterName", "demo"}}).status().code(),
            StatusCode::kNotFound);
}

TEST(ReconcilerTest, NoCapacityUsesHyperPodWording) {
  provider::FakeProviderOptions po;
  po.capacity = 1;
  Harness h(po);
  ASSERT_TRUE(h.Call("CreateCluster", Req("demo", {Harness::Group("w", 2)})).ok());
  h.Converge();
  json d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "Failed");
  EXPECT_NE(
      d["FailureMessage"].get<std::string>().find("We currently do not have sufficient capacity"),
      std::string::npos);
}

TEST(ReconcilerTest, FailedUpdateRollsBack) {
  provider::FakeProviderOptions po;
  po.fail_groups = {"bad"};
  Harness h(po);
  ASSERT_TRUE(h.Call("CreateCluster", Req("demo", {Harness::Group("w", 2)})).ok());
  h.Converge();
  ASSERT_TRUE(h.Call("UpdateCluster",
                     {{"ClusterName", "demo"},
                      {"InstanceGroups", {Harness::Group("w", 3), Harness::Group("bad", 1)}}})
                  .ok());
  h.Converge();
  json d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "InService");
  EXPECT_NE(d["FailureMessage"].get<std::string>().find("failed to provision"), std::string::npos);
  ASSERT_EQ(d["InstanceGroups"].size(), 1u);  // the added group is rolled back
  EXPECT_EQ(d["InstanceGroups"][0]["TargetCount"], 2);
  EXPECT_EQ(d["InstanceGroups"][0]["CurrentCount"], 2);
  EXPECT_EQ(h.provider_->node_count(), 2u);
}

TEST(ReconcilerTest, TransientProviderErrorsAreRetried) {
  Harness h;
  ASSERT_TRUE(h.Call("CreateCluster", Req("demo", {Harness::Group("w", 3)})).ok());
  h.provider_->FailNextCalls(5);
  h.Converge(100);
  EXPECT_EQ(h.Describe("demo")["ClusterStatus"], "InService");
  EXPECT_EQ(h.provider_->node_count(), 3u);
}

TEST(ReconcilerTest, RestartMidwayConvergesWithoutOrphans) {
  // A "crash" is a fresh reconciler over the same store and provider at an
  // arbitrary point; repeated after every single step.
  Harness h;
  ASSERT_TRUE(
      h.Call("CreateCluster", Req("demo", {Harness::Group("ctl", 1), Harness::Group("w", 4)}))
          .ok());
  std::string id = IdOf(h.Describe("demo"));
  for (int step = 0; step < 30; ++step) {
    h.reconciler_ =
        std::make_unique<ClusterReconciler>(*h.store_, h.provider_.get(), h.clock_, h.options_);
    if (step % 3 == 0) h.provider_->FailNextCalls(1);
    (void)h.reconciler_->Reconcile(id);
    h.clock_.AdvanceTime(std::chrono::milliseconds(200));
    if (step == 10) {
      // The update is accepted once the cluster is InService; before that it must be
      // refused as a conflict, and nothing else.
      auto update = h.Call("UpdateCluster",
                           {{"ClusterName", "demo"}, {"InstanceGroups", {Harness::Group("w", 2)}}});
      if (!update.ok()) {
        EXPECT_EQ(update.status().code(), StatusCode::kFailedPrecondition)
            << update.status().ToString();
      }
    }
  }
  h.queue_->Add(id);
  h.Converge();
  json d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "InService");
  auto provider_ids = h.provider_->List(id);
  std::set<std::string> at_provider(provider_ids->begin(), provider_ids->end());
  EXPECT_EQ(at_provider, StoreNodeIds(h, id));
  int expected = 1 + d["InstanceGroups"][1]["TargetCount"].get<int>();
  EXPECT_EQ(static_cast<int>(at_provider.size()), expected);
}

TEST(ReconcilerTest, NoProviderFailsWithAClearMessage) {
  Harness h;
  h.reconciler_ = std::make_unique<ClusterReconciler>(*h.store_, nullptr, h.clock_, h.options_);
  ASSERT_TRUE(h.Call("CreateCluster", Req("demo", {Harness::Group("w", 1)})).ok());
  h.Converge();
  json d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "Failed");
  EXPECT_NE(d["FailureMessage"].get<std::string>().find("no node provider"), std::string::npos);
}

std::vector<std::string> EventTexts(Harness& h, const std::string& type) {
  auto ev = h.Call("ListClusterEvents", {{"ClusterName", "demo"}, {"ResourceType", type}});
  std::vector<std::string> out;
  for (const auto& e : (*ev)["Events"]) out.push_back(e["Description"]);
  return out;
}

// The worker group's node ids, in store order.
std::vector<std::string> WorkerIds(Harness& h, const std::string& cluster_id) {
  std::vector<std::string> ids;
  EXPECT_TRUE(h.store_
                  ->Read([&](store::ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(cluster_id));
                    for (auto& n : nodes) {
                      if (n.group_name == "w") ids.push_back(n.instance_id);
                    }
                    return OkStatus();
                  })
                  .ok());
  return ids;
}

bool AnyContains(const std::vector<std::string>& texts, const std::string& part) {
  for (const auto& t : texts) {
    if (t.find(part) != std::string::npos) return true;
  }
  return false;
}

TEST(ReconcilerTest, AFailedNodeDegradesItsGroupAndBlocksNoUpdate) {
  Harness h;
  ASSERT_TRUE(
      h.Call("CreateCluster", Req("demo", {Harness::Group("ctl", 1), Harness::Group("w", 2)}))
          .ok());
  h.Converge();
  std::string id = IdOf(h.Describe("demo"));
  std::string broken = WorkerIds(h, id)[0];
  h.provider_->BreakNode(broken, "the machine stopped answering");
  h.queue_->Add(id);
  h.Converge();
  json d = h.Describe("demo");
  // ClusterStatus has no Degraded: the cluster stays InService, its group says it.
  EXPECT_EQ(d["ClusterStatus"], "InService");
  EXPECT_EQ(d["InstanceGroups"][1]["Status"], "Degraded");
  EXPECT_EQ(d["InstanceGroups"][1]["CurrentCount"], 1);
  EXPECT_TRUE(AnyContains(EventTexts(h, "InstanceGroup"),
                          "from InService to Degraded: 1 of 2 instances in Failure"));
  EXPECT_TRUE(AnyContains(EventTexts(h, "Cluster"), "Instance group w is Degraded"));
  EXPECT_TRUE(AnyContains(EventTexts(h, "Cluster"), "the machine stopped answering"));
  // The failed node keeps its slot (recovery replaces it, not scale-up) and
  // blocks nothing: scaling up launches the missing nodes and the update ends.
  ASSERT_TRUE(h.Call("UpdateCluster",
                     {{"ClusterName", "demo"},
                      {"InstanceGroups", {Harness::Group("ctl", 1), Harness::Group("w", 4)}}})
                  .ok());
  h.Converge();
  d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "InService");
  EXPECT_EQ(d["InstanceGroups"][1]["TargetCount"], 4);
  EXPECT_EQ(d["InstanceGroups"][1]["CurrentCount"], 3);
  EXPECT_EQ(d["InstanceGroups"][1]["Status"], "Degraded");
  EXPECT_EQ(StoreNodeIds(h, id).size(), 5u);
  EXPECT_TRUE(StoreNodeIds(h, id).count(broken));
  // Deleting the failed node (which lowers the target, as BatchDeleteClusterNodes
  // does) heals the group.
  ASSERT_TRUE(
      h.Call("BatchDeleteClusterNodes", {{"ClusterName", "demo"}, {"NodeIds", {broken}}}).ok());
  h.Converge();
  d = h.Describe("demo");
  EXPECT_EQ(d["InstanceGroups"][1]["Status"], "InService");
  EXPECT_EQ(d["InstanceGroups"][1]["TargetCount"], 3);
  EXPECT_EQ(d["InstanceGroups"][1]["CurrentCount"], 3);
  EXPECT_FALSE(StoreNodeIds(h, id).count(broken));
  EXPECT_TRUE(AnyContains(EventTexts(h, "InstanceGroup"), "from Degraded to InService"));
}

TEST(ReconcilerTest, ScaleDownTakesAFailedNodeFirst) {
  Harness h;
  ASSERT_TRUE(h.Call("CreateCluster", Req("demo", {Harness::Group("w", 3)})).ok());
  h.Converge();
  std::string id = IdOf(h.Describe("demo"));
  std::string broken = WorkerIds(h, id)[0];
  h.provider_->BreakNode(broken, "gone");
  h.queue_->Add(id);
  h.Converge();
  ASSERT_TRUE(h.Call("UpdateCluster",
                     {{"ClusterName", "demo"}, {"InstanceGroups", {Harness::Group("w", 2)}}})
                  .ok());
  h.Converge();
  json d = h.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "InService");
  EXPECT_EQ(d["InstanceGroups"][0]["Status"], "InService");
  EXPECT_EQ(d["InstanceGroups"][0]["CurrentCount"], 2);
  EXPECT_FALSE(StoreNodeIds(h, id).count(broken));
}

// A replacement asks the provider for its predecessor's address (and so its
// hostname and Slurm NodeName) only where the provider declares that a
// replacement may keep it (NodeEnvironment::replacement_keeps_address).
TEST(ReconcilerTest, AReplacementKeepsItsAddressOnlyWhereTheProviderAllows) {
  for (bool keeps : {true, false}) {
    provider::FakeProviderOptions po;
    po.environment.replacement_keeps_address = keeps;
    Harness h(po);
    ASSERT_TRUE(h.Call("CreateCluster", Req("demo", {Harness::Group("w", 1)})).ok());
    h.Converge();
    auto before = h.Call("ListClusterNodes", {{"ClusterName", "demo"}});
    ASSERT_TRUE(before.ok());
    const json old = json::parse((*before)["ClusterNodeSummaries"][0].dump());
    const std::string old_id = old["InstanceId"];
    auto d = h.Call("DescribeClusterNode", {{"ClusterName", "demo"}, {"NodeId", old_id}});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    const std::string old_ip = (*d)["NodeDetails"]["PrivatePrimaryIp"];
    auto r = h.Call("BatchReplaceClusterNodes", {{"ClusterName", "demo"}, {"NodeIds", {old_id}}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    h.Converge(80);
    auto after = h.Call("ListClusterNodes", {{"ClusterName", "demo"}});
    ASSERT_TRUE(after.ok());
    ASSERT_EQ((*after)["ClusterNodeSummaries"].size(), 1u);
    const std::string new_id = (*after)["ClusterNodeSummaries"][0]["InstanceId"];
    ASSERT_NE(new_id, old_id) << "keeps=" << keeps << ": the node was not replaced";
    auto nd = h.Call("DescribeClusterNode", {{"ClusterName", "demo"}, {"NodeId", new_id}});
    ASSERT_TRUE(nd.ok()) << nd.status().ToString();
    const std::string new_ip = (*nd)["NodeDetails"]["PrivatePrimaryIp"];
    if (keeps) {
      EXPECT_EQ(new_ip, old_ip);
    } else {
      EXPECT_NE(new_ip, old_ip);
      EXPECT_FALSE(new_ip.empty());
    }
  }
}

// A node whose agent never registers fails once agent_register_timeout has passed
// since its launch. A network agent that joined hpodd meanwhile has started and
// reached it: its channel gets the whole timeout again from the join (thousands of
// machines joining at once can hold up hpodd's listener), and no more.
TEST(ReconcilerTest, AnAgentThatJoinedGetsTheRegisterTimeoutAgainFromItsJoin) {
  for (bool joins : {false, true}) {
    provider::FakeProviderOptions po;
    po.pending_for = std::chrono::milliseconds(0);
    po.agent_dir = ::testing::TempDir() + "register-agents-" + std::to_string(getpid());
    po.agent_endpoint = "https://127.0.0.1:1";
    Harness h(po);
    ASSERT_TRUE(h.Call("CreateCluster", Req("demo", {Harness::Group("w", 1)})).ok());
    h.Converge(4);
    auto nodes = h.NodesOf("demo", "w");
    ASSERT_EQ(nodes.size(), 1u);
    const std::string id = nodes[0].instance_id;
    h.clock_.AdvanceTime(std::chrono::seconds(100));
    if (joins) {
      store::HostRecord host;
      host.host_id = "h-00000000000000a1";
      host.machine_id = std::string(32, 'a');
      host.pool = "nodes";
      host.instance_id = id;
      host.joined = h.clock_.NowEpochSeconds();
      host.state = "Assigned";
      ASSERT_TRUE(h.store_->Write([&](store::WriteTx& tx) { return tx.PutHost(host); }).ok());
    }
    h.clock_.AdvanceTime(std::chrono::seconds(30));  // 130 s after the launch
    h.Converge(4);
    EXPECT_EQ(h.Describe("demo")["ClusterStatus"], joins ? "Creating" : "Failed") << joins;
    if (joins) {
      h.clock_.AdvanceTime(std::chrono::seconds(100));  // 130 s after the join
      h.Converge(4);
      EXPECT_EQ(h.Describe("demo")["ClusterStatus"], "Failed");
    }
    EXPECT_NE(h.Describe("demo")["FailureMessage"].get<std::string>().find(
                  "did not register with hpodd within 120 seconds"),
              std::string::npos)
        << joins;
    std::filesystem::remove_all(po.agent_dir);
  }
}

}  // namespace
}  // namespace hpod::controlplane
