// Rolling software updates (software_update.h): UpdateClusterSoftware's checks,
// batches through Replace recoveries, the images the replacements get, the wait
// between batches, a failed batch with and without rollback, and what the read
// operations show.

#include "hpod/controlplane/software_update.h"

#include <gtest/gtest.h>

#include <set>

#include "hpod/api/software_image.h"
#include "hpod/base/crypto.h"
#include "hpod/controlplane/ids.h"
#include "hpod/controlplane/recovery.h"
#include "hpod/controlplane/test_harness.h"

namespace hpod::controlplane {
namespace {

using nlohmann::json;
using testing::Harness;

// The programs of a version of hpod, as an agent reports them.
std::map<std::string, std::string> Software(const std::string& version) {
  return {{"hpod-agent", HexEncode(Sha256("agent " + version))},
          {"spank_hpod.so", HexEncode(Sha256("plugin " + version))}};
}
const std::string kOld = api::ImageIdOf(Software("1"));
const std::string kNew = api::ImageIdOf(Software("2"));

provider::FakeProviderOptions Images(std::set<std::string> failing = {}) {
  provider::FakeProviderOptions o;
  o.images = {kOld};
  o.fail_images = std::move(failing);
  return o;
}

json Controller() {
  json g = Harness::Group("controller", 1);
  g["SlurmConfig"] = {{"NodeType", "Controller"}};
  return g;
}

json Workers(int count) {
  json g = Harness::Group("workers", count);
  g["SlurmConfig"] = {{"NodeType", "Compute"}, {"PartitionNames", {"dev"}}};
  return g;
}

json Batch(int value, const std::string& type = "INSTANCE_COUNT") {
  return {{"RollingUpdatePolicy", {{"MaximumBatchSize", {{"Type", type}, {"Value", value}}}}}};
}

class SoftwareUpdateTest : public ::testing::Test {
 protected:
  explicit SoftwareUpdateTest(provider::FakeProviderOptions o = Images()) : h_(std::move(o)) {}

  void Create(int workers) {
    ASSERT_TRUE(h_.Call("CreateCluster", {{"ClusterName", "demo"},
                                          {"InstanceGroups", {Controller(), Workers(workers)}}})
                    .ok());
    Run(20);
    ASSERT_EQ(h_.Describe("demo")["ClusterStatus"], "InService");
  }
  std::string ClusterId() { return h_.ClusterId("demo"); }
  std::vector<store::NodeRecord> Nodes(const std::string& group) {
    return h_.NodesOf("demo", group, /*live_only=*/true);
  }
  std::vector<store::RecoveryRecord> Recoveries() {
    std::vector<store::RecoveryRecord> out;
    const std::string id = ClusterId();
    EXPECT_TRUE(h_.store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(out, tx.ListRecoveries(id));
                      return OkStatus();
                    })
                    .ok());
    return out;
  }
  // Each launched node's agent says what it runs, as its hello would: the
  // programs of the image it was launched with (`lie` overrides one node's).
  void Report() {
    const std::string id = ClusterId();
    for (const char* group : {"controller", "workers"}) {
      for (const auto& n : Nodes(group)) {
        if (!n.launched) continue;
        std::string image = h_.provider_->ImageOf(n.instance_id);
        auto software = image == kNew ? Software("2") : Software("1");
        if (lie_.count(n.hostname) && lie_[n.hostname] == 0) software = Software("3");
        ASSERT_TRUE(h_.store_
                        ->Write([&](store::WriteTx& tx) {
                          return RecordNodeSoftware(tx, h_.clock_, id, n.instance_id, software);
                        })
                        .ok());
      }
    }
  }
  // Reconciles with agents reporting; records the most update recoveries in
  // flight at once.
  void Run(int rounds) {
    for (int i = 0; i < rounds; ++i) {
      Report();
      h_.queue_->RunUntilIdle();
      int active = 0;
      for (const auto& r : Recoveries()) {
        active += r.source == kSoftwareUpdateSource && RecoveryActive(r);
      }
      most_in_flight_ = std::max(most_in_flight_, active);
      h_.clock_.AdvanceTime(h_.options_.poll_interval);
    }
  }
  StatusOr<nlohmann::ordered_json> Update(json req) {
    req["ClusterName"] = "demo";
    return h_.Call("UpdateClusterSoftware", req);
  }
  json Group(const std::string& name) {
    const json d = h_.Describe("demo");  // kept: a range-for over a temporary's member dangles
    for (const auto& g : d["InstanceGroups"]) {
      if (g["InstanceGroupName"] == name) return g;
    }
    return json();
  }
  std::vector<std::string> Hostnames(const std::string& group) {
    std::vector<std::string> out;
    for (const auto& n : Nodes(group)) out.push_back(n.hostname);
    return out;
  }

  Harness h_;
  std::map<std::string, int> lie_;
  int most_in_flight_ = 0;
};

TEST_F(SoftwareUpdateTest, RefusesWhatItCannotDo) {
  Create(2);
  auto refused = [&](json req, const std::string& words,
                     StatusCode code = StatusCode::kInvalidArgument) {
    auto r = Update(req);
    ASSERT_FALSE(r.ok()) << req.dump();
    EXPECT_EQ(r.status().code(), code);
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
  };
  refused({{"InstanceGroups", {{{"InstanceGroupName", "nope"}}}}}, "is not in cluster demo");
  refused({{"InstanceGroups",
            {{{"InstanceGroupName", "workers"}}, {{"InstanceGroupName", "workers"}}}}},
          "named twice");
  refused({{"ImageId", "ami-0123456789abcdef0"}},
          "is not software this hpodd holds; it ships " + kOld);
  refused({{"DeploymentConfig", Batch(101, "CAPACITY_PERCENTAGE")}}, "above 100");
  json alarms = Batch(1);
  alarms["AutoRollbackConfiguration"] = {{{"AlarmName", "cpu-high"}}};
  refused({{"DeploymentConfig", alarms}}, "give hpod-node-health");
  // Nothing was written by a refusal.
  EXPECT_EQ(h_.Describe("demo")["ClusterStatus"], "InService");
  EXPECT_FALSE(h_.Describe("demo").contains("HpodSoftwareUpdate"));
  // ImageId in upper case, as the model allows, names the same image.
  h_.provider_->ShipImage(kNew);
  std::string upper = kNew;
  std::transform(upper.begin() + 4, upper.end(), upper.begin() + 4, ::toupper);
  ASSERT_TRUE(Update({{"ImageId", upper}}).ok());
  EXPECT_EQ(h_.Describe("demo")["HpodSoftwareUpdate"]["TargetImageId"], kNew);
  // One at a time.
  refused({}, "is SystemUpdating", StatusCode::kFailedPrecondition);  // ConflictException
}

TEST_F(SoftwareUpdateTest, ReplacesOneBatchAtATimeWithTheNewImage) {
  Create(3);
  const auto hostnames = Hostnames("workers");
  const std::string controller = Nodes("controller")[0].instance_id;
  EXPECT_EQ(Group("workers")["CurrentImageId"], kOld);
  EXPECT_EQ(Group("workers")["ImageVersionStatus"], "UpToDate");
  h_.provider_->ShipImage(kNew);  // hpod was upgraded beside hpodd
  EXPECT_EQ(Group("workers")["ImageVersionStatus"], "UpdateAvailable");

  auto r = Update({{"DeploymentConfig", Batch(1)}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["ClusterArn"], h_.Describe("demo")["ClusterArn"]);
  json d = h_.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "SystemUpdating");
  EXPECT_EQ(Group("workers")["Status"], "SystemUpdating");
  EXPECT_EQ(Group("workers")["DesiredImageId"], kNew);
  EXPECT_EQ(Group("workers")["SoftwareUpdateStatus"], "InProgress");
  EXPECT_EQ(Group("workers")["ActiveSoftwareUpdateConfig"], Batch(1));

  // The first pass takes one node, which reads SystemUpdating.
  h_.queue_->RunUntilIdle();
  int updating = 0;
  const auto listed = h_.Call("ListClusterNodes", {{"ClusterName", "demo"}});
  ASSERT_TRUE(listed.ok());
  for (const auto& n : listed->at("ClusterNodeSummaries")) {
    updating += n["InstanceStatus"]["Status"] == "SystemUpdating";
  }
  EXPECT_EQ(updating, 1);

  Run(80);
  d = h_.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "InService");
  EXPECT_EQ(d["HpodSoftwareUpdate"]["Status"], "Succeeded") << d.dump();
  EXPECT_EQ(d["HpodSoftwareUpdate"]["Batches"], 4) << "three workers, then the controller";
  EXPECT_EQ(most_in_flight_, 1) << "batch size 1";
  EXPECT_EQ(Group("workers")["Status"], "InService");
  EXPECT_EQ(Group("workers")["CurrentImageId"], kNew);
  EXPECT_EQ(Group("workers")["SoftwareUpdateStatus"], "Succeeded");
  EXPECT_FALSE(Group("workers").contains("ActiveSoftwareUpdateConfig"));
  // The controller was rebooted into the new image, last; never replaced.
  EXPECT_EQ(Group("controller")["CurrentImageId"], kNew);
  EXPECT_EQ(Group("controller")["ImageVersionStatus"], "UpToDate");
  ASSERT_EQ(Nodes("controller").size(), 1u);
  EXPECT_EQ(Nodes("controller")[0].instance_id, controller);
  EXPECT_EQ(h_.provider_->ImageOf(controller), kNew);
  // Each worker was replaced once, keeping its hostname, with the new image.
  EXPECT_EQ(Hostnames("workers"), hostnames);
  std::vector<std::string> actions;
  for (const auto& rec : Recoveries()) {
    if (rec.source != kSoftwareUpdateSource) continue;
    actions.push_back(rec.group_name + " " + rec.action);
    EXPECT_EQ(rec.status, kRecoverySucceeded);
  }
  std::sort(actions.begin(), actions.end());
  EXPECT_EQ(actions, (std::vector<std::string>{"controller Reboot", "workers Replace",
                                               "workers Replace", "workers Replace"}));
  for (const auto& n : Nodes("workers")) {
    EXPECT_EQ(h_.provider_->ImageOf(n.instance_id), kNew);
    auto node =
        h_.Call("DescribeClusterNode", {{"ClusterName", "demo"}, {"NodeId", n.instance_id}});
    ASSERT_TRUE(node.ok());
    json details = json::parse(node->dump())["NodeDetails"];
    EXPECT_EQ(details["CurrentImageId"], kNew);
    EXPECT_EQ(details["ImageVersionStatus"], "UpToDate");
    EXPECT_TRUE(details.contains("LastSoftwareUpdateTime"));
    EXPECT_EQ(details["HpodSoftware"], json(Software("2")));
    EXPECT_EQ(details["InstanceStatus"]["Status"], "Running");
  }
  // The replaced nodes' records went with their rows.
  const std::string id = ClusterId();
  size_t records = 0;
  ASSERT_TRUE(h_.store_
                  ->Read([&](store::ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(auto all, LoadNodeSoftware(tx, id));
                    records = all.size();
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(records, 4u);
}

// The read operations load the software records of the nodes they show only:
// at 10,000 nodes, reading the cluster's made every DescribeCluster parse 10,000.
TEST_F(SoftwareUpdateTest, TheReadViewLoadsOnlyTheNodesItShows) {
  Create(3);
  const std::string id = ClusterId();
  const std::string shown = Nodes("workers")[1].instance_id;
  SoftwareView view;
  ASSERT_TRUE(h_.store_
                  ->Read([&](store::ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(view, LoadSoftwareView(tx, id, "", {shown, "i-none"}));
                    return OkStatus();
                  })
                  .ok());
  ASSERT_EQ(view.nodes.size(), 1u);
  EXPECT_EQ(view.nodes.begin()->first, shown);
  EXPECT_EQ(view.nodes.begin()->second.image, kOld);
  EXPECT_EQ(view.nodes.begin()->second.software, Software("1"));

  // Every page of ListClusterNodes still shows each of its nodes' image status
  // (which needs the node's record: UpdateAvailable once another image ships).
  h_.provider_->ShipImage(kNew);
  std::set<std::string> seen;
  json req = {{"ClusterName", "demo"}, {"MaxResults", 3}};
  for (int page = 0; page < 3; ++page) {
    auto r = h_.Call("ListClusterNodes", req);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const json out = json::parse(r->dump());
    for (const auto& n : out["ClusterNodeSummaries"]) {
      EXPECT_EQ(n.value("ImageVersionStatus", ""), "UpdateAvailable") << n.dump();
      seen.insert(n["InstanceId"].get<std::string>());
    }
    if (!out.contains("NextToken")) break;
    req["NextToken"] = out["NextToken"];
  }
  EXPECT_EQ(seen.size(), 4u);  // the controller and three workers
}

TEST_F(SoftwareUpdateTest, WaitsBetweenBatches) {
  Create(2);
  h_.provider_->ShipImage(kNew);
  json config = Batch(1);
  config["WaitIntervalInSeconds"] = 600;
  ASSERT_TRUE(Update({{"DeploymentConfig", config},
                      {"InstanceGroups", {{{"InstanceGroupName", "workers"}}}}})
                  .ok());
  Run(40);  // the first batch; then 600 s of waiting have not passed
  auto count = [&] {
    int k = 0;
    for (const auto& r : Recoveries()) k += r.source == kSoftwareUpdateSource;
    return k;
  };
  EXPECT_EQ(count(), 1);
  json u = h_.Describe("demo")["HpodSoftwareUpdate"];
  EXPECT_EQ(u["Status"], "InProgress");
  EXPECT_NE(u["Message"].get<std::string>().find("a next batch waits 600 s"), std::string::npos)
      << u;
  h_.clock_.AdvanceTime(std::chrono::seconds(600));
  Run(40);
  EXPECT_EQ(count(), 2);
  EXPECT_EQ(h_.Describe("demo")["HpodSoftwareUpdate"]["Status"], "Succeeded");
}

TEST(SoftwareUpdateBatchTest, SizesFromTheModelsCapacitySizeConfig) {
  EXPECT_EQ(BatchSize(nullptr, 5), 5);
  json count = {{"Type", "INSTANCE_COUNT"}, {"Value", 2}};
  EXPECT_EQ(BatchSize(&count, 5), 2);
  count["Value"] = 9;
  EXPECT_EQ(BatchSize(&count, 5), 5);
  json percent = {{"Type", "CAPACITY_PERCENTAGE"}, {"Value", 50}};
  EXPECT_EQ(BatchSize(&percent, 3), 1);
  EXPECT_EQ(BatchSize(&percent, 10), 5);
  percent["Value"] = 1;
  EXPECT_EQ(BatchSize(&percent, 10), 1) << "at least one";
}

class SoftwareUpdateFailureTest : public SoftwareUpdateTest {
 protected:
  SoftwareUpdateFailureTest() : SoftwareUpdateTest(Images({kNew})) {}
};

TEST_F(SoftwareUpdateFailureTest, AFailedBatchRollsBackWhatTheUpdateChanged) {
  Create(3);
  h_.provider_->ShipImage(kNew);  // whose nodes fail their lifecycle scripts
  json config = Batch(1);
  config["AutoRollbackConfiguration"] = {{{"AlarmName", "hpod-node-health"}}};
  ASSERT_TRUE(Update({{"DeploymentConfig", config}}).ok());
  Run(100);
  json d = h_.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "InService");
  json u = d["HpodSoftwareUpdate"];
  EXPECT_EQ(u["Status"], "RollbackComplete") << u;
  EXPECT_NE(u["FailureReason"].get<std::string>().find("batch 1 failed"), std::string::npos) << u;
  EXPECT_EQ(u["UpdatedNodes"].size(), 1u) << "it stopped after the first batch";
  EXPECT_EQ(u["RevertedNodes"], u["UpdatedNodes"]);
  EXPECT_EQ(Group("workers")["CurrentImageId"], kOld);
  EXPECT_EQ(Group("workers")["SoftwareUpdateStatus"], "RollbackComplete");
  for (const auto& n : Nodes("workers")) {
    EXPECT_EQ(h_.provider_->ImageOf(n.instance_id), kOld) << n.hostname;
    EXPECT_EQ(n.status, "Running") << n.hostname;
  }
}

TEST_F(SoftwareUpdateFailureTest, WithoutRollbackAFailedBatchStopsTheUpdate) {
  Create(3);
  h_.provider_->ShipImage(kNew);
  ASSERT_TRUE(Update({{"DeploymentConfig", Batch(1)}}).ok());
  Run(60);
  json u = h_.Describe("demo")["HpodSoftwareUpdate"];
  EXPECT_EQ(u["Status"], "Failed") << u;
  EXPECT_EQ(h_.Describe("demo")["ClusterStatus"], "InService");
  EXPECT_EQ(Group("workers")["CurrentImageId"], kOld) << "new nodes get what worked";
  int untouched = 0;
  for (const auto& n : Nodes("workers")) untouched += h_.provider_->ImageOf(n.instance_id) == kOld;
  EXPECT_EQ(untouched, 2);
}

TEST_F(SoftwareUpdateTest, AReplacementRunningOtherSoftwareFailsItsBatch) {
  Create(2);
  h_.provider_->ShipImage(kNew);
  const auto hostnames = Hostnames("workers");
  lie_[hostnames[0]] = 0;  // its agent reports programs of neither image
  lie_[hostnames[1]] = 0;
  ASSERT_TRUE(Update({{"DeploymentConfig", Batch(1)}}).ok());
  Run(60);
  json u = h_.Describe("demo")["HpodSoftwareUpdate"];
  EXPECT_EQ(u["Status"], "Failed") << u;
  EXPECT_NE(u["FailureReason"].get<std::string>().find(", not " + kNew), std::string::npos) << u;
}

TEST_F(SoftwareUpdateTest, ANodeDeletedFromItsBatchDoesNotFailTheUpdate) {
  Create(3);
  h_.provider_->ShipImage(kNew);
  ASSERT_TRUE(Update({{"DeploymentConfig", Batch(1)}}).ok());
  h_.queue_->RunUntilIdle();  // the first batch takes a worker
  std::string taken;
  for (const auto& r : Recoveries()) {
    if (r.source == kSoftwareUpdateSource) taken = r.instance_id;
  }
  ASSERT_FALSE(taken.empty());
  auto deleted =
      h_.Call("BatchDeleteClusterNodes", {{"ClusterName", "demo"}, {"NodeIds", {taken}}});
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  Run(80);
  json u = h_.Describe("demo")["HpodSoftwareUpdate"];
  EXPECT_EQ(u["Status"], "Succeeded") << u;
  for (const auto& n : Nodes("workers")) EXPECT_EQ(h_.provider_->ImageOf(n.instance_id), kNew);
}

// A provider whose nodes run their hosts' software (pool hosts): no image to
// compare, and replacements on other hosts get other hostnames; each logical
// node is replaced once all the same.
class SoftwareUpdateNoImageTest : public SoftwareUpdateTest {
 protected:
  static provider::FakeProviderOptions NoImages() {
    provider::FakeProviderOptions o;
    o.environment.replacement_keeps_address = false;
    return o;
  }
  SoftwareUpdateNoImageTest() : SoftwareUpdateTest(NoImages()) {}
};

TEST_F(SoftwareUpdateNoImageTest, ReprovisionsEachNodeOnce) {
  Create(3);
  json alarms = Batch(1);
  alarms["AutoRollbackConfiguration"] = {{{"AlarmName", "hpod-node-health"}}};
  auto refused = Update({{"DeploymentConfig", alarms}});
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << "nothing to roll back to";
  ASSERT_TRUE(Update({{"DeploymentConfig", Batch(1)}}).ok());
  Run(100);
  json u = h_.Describe("demo")["HpodSoftwareUpdate"];
  EXPECT_EQ(u["Status"], "Succeeded") << u;
  EXPECT_EQ(u["UpdatedNodes"].size(), 4u) << u;
  int recoveries = 0;
  for (const auto& r : Recoveries()) recoveries += r.source == kSoftwareUpdateSource;
  EXPECT_EQ(recoveries, 4) << "three workers replaced and the controller rebooted, once each";
}

}  // namespace
}  // namespace hpod::controlplane
