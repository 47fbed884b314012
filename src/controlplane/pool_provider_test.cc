// The pool provider (pool_provider.h) over a real SQLite store, with the host
// channels replaced by a record of what was sent and a set of connected hosts.

#include "hpod/controlplane/pool_provider.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "hpod/base/clock.h"
#include "hpod/controlplane/host_states.h"

namespace hpod::controlplane {
namespace {

using api::HostState;
using provider::NodeState;
using ::testing::HasSubstr;

class PoolProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = store::OpenSqliteStore({});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    pool_ = std::make_unique<PoolProvider>(*store_, clock_,
                                           PoolProviderOptions{"https://10.0.0.1:8451", ""});
    pool_->SetHostLink({[this](const std::string& h) { return connected_.count(h) > 0; },
                        [this](const std::string& h, const nlohmann::json& frame) {
                          if (!connected_.count(h)) return false;
                          sent_.push_back({h, frame.value("instance_id", "?")});
                          frames_.push_back(frame);
                          return true;
                        },
                        [this](const std::string& h)
                            -> std::optional<std::chrono::steady_clock::time_point> {
                          auto it = lost_.find(h);
                          if (it == lost_.end()) return std::nullopt;
                          return it->second;
                        }});
  }

  // The cluster "demo" with group "workers" (of `pool`, with `fs` as its shared
  // filesystem when it is an object) and a node row for each id, as the
  // reconciler writes them before it launches.
  void Cluster(const std::vector<std::string>& ids, const std::string& pool = "",
               const nlohmann::json& fs = nullptr) {
    ASSERT_TRUE(store_
                    ->Write([&](store::WriteTx& tx) -> Status {
                      store::ClusterRecord c;
                      c.id = "abcdefabcdef";
                      c.name = "demo";
                      c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefabcdef";
                      c.status = "Creating";
                      HPOD_RETURN_IF_ERROR(tx.PutCluster(c));
                      store::GroupRecord g;
                      g.cluster_id = c.id;
                      g.name = "workers";
                      g.spec = {{"InstanceType", "ml.c5.large"}};
                      if (!pool.empty()) g.spec["HpodPool"] = pool;
                      if (fs.is_object()) g.spec["HpodSharedFilesystem"] = fs;
                      g.target_count = static_cast<int>(ids.size());
                      HPOD_RETURN_IF_ERROR(tx.PutGroup(g));
                      int ordinal = 0;
                      for (const std::string& id : ids) {
                        store::NodeRecord n;
                        n.instance_id = id;
                        n.cluster_id = c.id;
                        n.group_name = "workers";
                        n.ordinal = ++ordinal;
                        n.logical_id = "logical-" + std::to_string(ordinal);
                        n.status = "Pending";
                        HPOD_RETURN_IF_ERROR(tx.PutNode(n));
                      }
                      return OkStatus();
                    })
                    .ok());
  }

  // A Spare host of `pool`, connected, that connected from `ip` as `name`.
  void Spare(const std::string& id, const std::string& pool, const std::string& ip,
             const std::string& name) {
    store::HostRecord h;
    h.host_id = id;
    h.machine_id = std::string(32, 'a');
    h.pool = pool;
    h.token_id = "tok";
    h.instance_type = "ml.c5.large";
    h.facts = {{"channel_address", ip}, {"hostname", name}};
    ASSERT_TRUE(store_
                    ->Write([&](store::WriteTx& tx) {
                      return RecordHostJoin(tx, clock_, h, HostState::kSpare, "test");
                    })
                    .ok());
    connected_.insert(id);
  }

  store::HostRecord Get(const std::string& id) {
    store::HostRecord h;
    EXPECT_TRUE(store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(h, tx.GetHost(id));
                      return OkStatus();
                    })
                    .ok());
    return h;
  }

  std::vector<std::string> HistoryOf(const std::string& id) {
    std::vector<std::string> to;
    EXPECT_TRUE(store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(auto h, tx.ListHostHistory(id));
                      for (const auto& r : h) to.push_back(r.to_state);
                      return OkStatus();
                    })
                    .ok());
    return to;
  }

  static provider::LaunchSpec Spec(const std::string& id, const std::string& pool = "") {
    provider::LaunchSpec s;
    s.instance_id = id;
    s.cluster_id = "abcdefabcdef";
    s.cluster_name = "demo";
    s.group_name = "workers";
    s.instance_name = "workers-1";
    s.instance_type = "ml.c5.large";
    if (!pool.empty()) s.group_spec["HpodPool"] = pool;
    return s;
  }

  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<PoolProvider> pool_;
  std::set<std::string> connected_;
  std::vector<std::pair<std::string, std::string>> sent_;  // host, assigned instance
  std::vector<nlohmann::json> frames_;                       // every frame sent
  std::map<std::string, std::chrono::steady_clock::time_point> lost_;  // dropped, no goodbye
};

TEST_F(PoolProviderTest, DeclaresNetworkAgentsThatGetFileSourcesSent) {
  provider::NodeEnvironment env = pool_->Environment();
  EXPECT_TRUE(env.Validate().ok());
  EXPECT_EQ(env.agent_url, "https://10.0.0.1:8451");
  EXPECT_FALSE(env.sees_hpodd_files);
  EXPECT_TRUE(env.ships_file_sources);
  EXPECT_TRUE(pool_->RunsAgents());
  EXPECT_TRUE(pool_->CapacityArrives());
}

TEST_F(PoolProviderTest, ALaunchTakesASpareOfItsPoolAndTellsTheHostOnce) {
  Cluster({"i-00000000000000001"}, "rack2");
  Spare("h-0000000000000001", "default", "10.9.0.11", "rack1-a");
  Spare("h-0000000000000002", "rack2", "10.9.0.12", "rack2-a");
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001", "rack2")).ok());
  store::HostRecord h = Get("h-0000000000000002");
  EXPECT_EQ(h.state, "Assigned");
  EXPECT_EQ(h.instance_id, "i-00000000000000001");
  EXPECT_EQ(h.group_name, "workers");
  EXPECT_EQ(Get("h-0000000000000001").state, "Spare");
  // Again (a reconciler repeating itself): the same host, nothing more reserved.
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001", "rack2")).ok());
  EXPECT_EQ(Get("h-0000000000000001").state, "Spare");
  EXPECT_EQ(sent_.front(), std::make_pair(std::string("h-0000000000000002"),
                                          std::string("i-00000000000000001")));

  auto d = pool_->Describe("i-00000000000000001");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->state, NodeState::kRunning);
  EXPECT_EQ(d->private_ip, "10.9.0.12");
  EXPECT_EQ(d->hostname, "rack2-a");
  auto listed = pool_->List("abcdefabcdef");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(*listed, std::vector<std::string>{"i-00000000000000001"});
  EXPECT_EQ(pool_->Describe("i-99999999999999999").status().code(), StatusCode::kNotFound);
}

// A group that names no pool takes the cluster's.
TEST_F(PoolProviderTest, AGroupWithoutAPoolTakesTheClusters) {
  Cluster({"i-00000000000000001"});
  ASSERT_TRUE(store_
                  ->Write([&](store::WriteTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, tx.GetCluster("abcdefabcdef"));
                    c.spec["HpodPool"] = "rack9";
                    return tx.PutCluster(c);
                  })
                  .ok());
  Spare("h-0000000000000001", "default", "10.9.0.11", "a");
  EXPECT_EQ(pool_->Launch(Spec("i-00000000000000001")).message(),
            "no Spare host of type ml.c5.large in pool rack9");
  Spare("h-0000000000000002", "rack9", "10.9.0.12", "b");
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001")).ok());
  EXPECT_EQ(Get("h-0000000000000002").instance_id, "i-00000000000000001");
}

TEST_F(PoolProviderTest, NoSpareIsResourceExhaustedAndADisconnectedHostIsNoSpare) {
  Cluster({"i-00000000000000001"});
  Spare("h-0000000000000001", "default", "10.9.0.11", "a");
  connected_.clear();
  Status s = pool_->Launch(Spec("i-00000000000000001"));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "no Spare host of type ml.c5.large in pool default");
  EXPECT_EQ(Get("h-0000000000000001").state, "Spare");
  connected_.insert("h-0000000000000001");
  EXPECT_TRUE(pool_->Launch(Spec("i-00000000000000001")).ok());
}

TEST_F(PoolProviderTest, TerminateWipesTheHostWhichIsThenSpareAgain) {
  Cluster({"i-00000000000000001"});
  Spare("h-0000000000000001", "default", "10.9.0.11", "a");
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001")).ok());
  pool_->OnHostStatus("h-0000000000000001", {"i-00000000000000001", ""});
  ASSERT_TRUE(pool_->Terminate("i-00000000000000001").ok());
  EXPECT_EQ(sent_.back().second, "");  // serve nothing
  EXPECT_EQ(pool_->Describe("i-00000000000000001")->state, NodeState::kTerminating);
  // The host says its tenure is gone: Spare, through Draining, each with its row.
  pool_->OnHostStatus("h-0000000000000001", {"", ""});
  store::HostRecord h = Get("h-0000000000000001");
  EXPECT_EQ(h.state, "Spare");
  EXPECT_EQ(h.instance_id, "");
  EXPECT_THAT(HistoryOf(h.host_id), ::testing::ElementsAre("Spare", "Assigned", "Draining",
                                                           "Spare"));
  EXPECT_EQ(pool_->Describe("i-00000000000000001").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(pool_->Terminate("i-00000000000000001").ok());  // gone: a no-op
}

// A reachable host whose node is replaced wipes its tenure, and is Quarantined
// with the recovery's reason, not returned to the pool.
TEST_F(PoolProviderTest, AHostWhoseNodeIsReplacedIsQuarantinedOnceWiped) {
  Cluster({"i-00000000000000001"});
  Spare("h-0000000000000001", "default", "10.9.0.11", "a");
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001")).ok());
  ASSERT_TRUE(store_
                  ->Write([&](store::WriteTx& tx) {
                    store::RecoveryRecord r;
                    r.recovery_id = "rcv-000000000001";
                    r.cluster_id = "abcdefabcdef";
                    r.group_name = "workers";
                    r.instance_id = "i-00000000000000001";
                    r.action = "Replace";
                    r.status = "InProgress";
                    r.phase = "Drained";
                    r.reason = "health check flag_file";
                    return tx.PutRecovery(r);
                  })
                  .ok());
  ASSERT_TRUE(pool_->Terminate("i-00000000000000001").ok());
  pool_->OnHostStatus("h-0000000000000001", {"", "", false, false});
  store::HostRecord h = Get("h-0000000000000001");
  EXPECT_EQ(h.state, "Quarantined");
  EXPECT_THAT(h.state_reason, HasSubstr("replacement (recovery rcv-000000000001)"));
  EXPECT_THAT(h.state_reason, HasSubstr("flag_file"));
  EXPECT_EQ(pool_->Describe("i-00000000000000001").status().code(), StatusCode::kNotFound);
}

// A host whose channel dropped without a goodbye, and stays away, is lost: its
// node fails at once (and is replaced), as a local node whose agent died.
TEST_F(PoolProviderTest, AHostLostWithoutAGoodbyeFailsItsNodeAfterTheGrace) {
  Cluster({"i-00000000000000001"});
  Spare("h-0000000000000001", "default", "10.9.0.11", "a");
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001")).ok());
  connected_.clear();
  lost_["h-0000000000000001"] = clock_.SteadyNow();
  clock_.AdvanceTime(std::chrono::milliseconds(500));
  EXPECT_EQ(pool_->Describe("i-00000000000000001")->state, NodeState::kRunning);  // a blip
  clock_.AdvanceTime(std::chrono::milliseconds(600));
  auto d = pool_->Describe("i-00000000000000001");
  EXPECT_EQ(d->state, NodeState::kFailed);
  EXPECT_THAT(d->message, HasSubstr("is lost: its agent's connection dropped 1100 ms ago"));
}

TEST_F(PoolProviderTest, AnUnreachableHostIsTerminatedNowAndWipedWhenItReturns) {
  Cluster({"i-00000000000000001"});
  Spare("h-0000000000000001", "default", "10.9.0.11", "a");
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001")).ok());
  connected_.clear();
  ASSERT_TRUE(pool_->Terminate("i-00000000000000001").ok());
  EXPECT_EQ(pool_->Describe("i-00000000000000001")->state, NodeState::kTerminated);
  // The node's row goes (the roll-up ends the tenure): the host drains.
  store::HostRecord h = Get("h-0000000000000001");
  ASSERT_TRUE(store_
                  ->Write([&](store::WriteTx& tx) {
                    return EndHostTenure(tx, clock_, "i-00000000000000001", "terminated");
                  })
                  .ok());
  EXPECT_EQ(Get(h.host_id).state, "Draining");
  // It comes back still holding the tenure: told to serve nothing, then Spare.
  connected_.insert(h.host_id);
  sent_.clear();
  pool_->OnHostStatus(h.host_id, {"i-00000000000000001", ""});
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].second, "");
  EXPECT_EQ(Get(h.host_id).state, "Draining");
  pool_->OnHostStatus(h.host_id, {"", ""});
  EXPECT_EQ(Get(h.host_id).state, "Spare");
}

TEST_F(PoolProviderTest, AHostThatServesTheWrongInstanceIsToldWhatToServe) {
  Cluster({"i-00000000000000001"});
  Spare("h-0000000000000001", "default", "10.9.0.11", "a");
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001")).ok());
  sent_.clear();
  pool_->OnHostStatus("h-0000000000000001", {"", ""});  // restarted before it started
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].second, "i-00000000000000001");
  EXPECT_EQ(Get("h-0000000000000001").state, "Assigned");  // not taken for a wipe
  sent_.clear();
  // Its tenure is on disk but its node agent does not run (an agent restart):
  // told again, which starts it; once it runs, nothing more is said.
  pool_->OnHostStatus("h-0000000000000001", {"i-00000000000000001", "", false});
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].second, "i-00000000000000001");
  sent_.clear();
  pool_->OnHostStatus("h-0000000000000001", {"i-00000000000000001", "", true});
  EXPECT_TRUE(sent_.empty());
  // A tenure that failed to start is not asked for again in a loop.
  pool_->OnHostStatus("h-0000000000000001", {"i-00000000000000001", "disk full", false});
  EXPECT_TRUE(sent_.empty());
}

TEST_F(PoolProviderTest, ARebootWaitsForANewBootIdAndFailsTheNodePastItsDeadline) {
  Cluster({"i-00000000000000001"});
  Spare("h-0000000000000001", "default", "10.9.0.11", "a");
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001")).ok());
  auto boot = [&](const std::string& id) {
    ASSERT_TRUE(store_
                    ->Write([&](store::WriteTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(store::HostRecord h, tx.GetHost("h-0000000000000001"));
                      h.facts["boot_id"] = id;
                      return tx.PutHost(h);
                    })
                    .ok());
  };
  boot("boot-1");
  ASSERT_TRUE(pool_->Reboot("i-00000000000000001", "rcv-1").ok());
  EXPECT_EQ(Get("h-0000000000000001").state, "Rebooting");
  EXPECT_EQ(Get("h-0000000000000001").instance_id, "i-00000000000000001");
  ASSERT_TRUE(pool_->Reboot("i-00000000000000001", "rcv-1").ok());  // a repeat: nothing more
  EXPECT_EQ(HistoryOf("h-0000000000000001").size(), 3u);
  EXPECT_EQ(pool_->Describe("i-00000000000000001")->state, NodeState::kPending);
  // Its agent reconnects before the machine went down: still rebooting.
  sent_.clear();
  pool_->OnHostStatus("h-0000000000000001", {"i-00000000000000001", "", true});
  EXPECT_EQ(Get("h-0000000000000001").state, "Rebooting");
  EXPECT_TRUE(sent_.empty());
  // Back with a new boot: Assigned again, and told to start its node.
  boot("boot-2");
  pool_->OnHostStatus("h-0000000000000001", {"i-00000000000000001", "", false});
  EXPECT_EQ(Get("h-0000000000000001").state, "Assigned");
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].second, "i-00000000000000001");
  EXPECT_EQ(pool_->Describe("i-00000000000000001")->state, NodeState::kRunning);

  // Another reboot that never comes back: the node fails after the deadline.
  ASSERT_TRUE(pool_->Reboot("i-00000000000000001", "rcv-2").ok());
  clock_.AdvanceTime(std::chrono::seconds(301));
  auto d = pool_->Describe("i-00000000000000001");
  EXPECT_EQ(d->state, NodeState::kFailed);
  EXPECT_THAT(d->message, HasSubstr("did not come back from reboot rcv-2 within 300 s"));
  EXPECT_EQ(pool_->Reboot("i-99999999999999999", "x").code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace hpod::controlplane

namespace hpod::controlplane {
namespace {

// Faults go to the host's agent; kill-node is the power hook's, and what would
// harm a machine of the admin's is refused.
TEST_F(PoolProviderTest, FaultsGoToTheHostAndKillNodeNeedsThePowerHook) {
  Cluster({"i-00000000000000001"});
  Spare("h-0000000000000001", "default", "10.9.0.11", "a");
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001")).ok());
  using Kind = provider::FaultSpec::Kind;
  ASSERT_TRUE(pool_->InjectFault("i-00000000000000001", {Kind::kPartition, 5, 0}).ok());
  EXPECT_EQ(frames_.back()["type"], "fault");
  EXPECT_EQ(frames_.back()["kind"], "partition");
  EXPECT_EQ(frames_.back()["seconds"], 5);
  EXPECT_EQ(pool_->InjectFault("i-00000000000000001", {Kind::kDiskFull, 0, 0}).code(),
            StatusCode::kUnimplemented);
  Status kill = pool_->InjectFault("i-00000000000000001", {Kind::kKillNode, 0, 0});
  EXPECT_EQ(kill.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(kill.message(), HasSubstr("--power-command"));
  connected_.clear();
  EXPECT_EQ(pool_->InjectFault("i-00000000000000001", {Kind::kFlagFile, 0, 0}).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(pool_->InjectFault("i-99999999999999999", {Kind::kFlagFile, 0, 0}).code(),
            StatusCode::kNotFound);
}

// The shared filesystem travels with the assignment; a host that fails its
// check is Quarantined and the instance goes to another Spare, or waits.
TEST_F(PoolProviderTest, AHostThatFailsTheSharedFilesystemCheckIsQuarantinedAndReplaced) {
  Cluster({"i-00000000000000001", "i-00000000000000002"}, "",
          {{"Type", "nfs4"}, {"Source", "10.9.0.5:/export/fsx"}, {"Options", "hard"}});
  Spare("h-0000000000000001", "default", "10.9.0.11", "a");
  ASSERT_TRUE(pool_->Launch(Spec("i-00000000000000001")).ok());
  ASSERT_EQ(frames_.size(), 1u);
  const nlohmann::json fs = frames_[0]["shared_fs"];
  EXPECT_EQ(fs["fs_type"], "nfs4");
  EXPECT_EQ(fs["source"], "10.9.0.5:/export/fsx");
  EXPECT_EQ(fs["options"], "hard");
  EXPECT_EQ(fs["marker_name"], ".hpod-fsx-abcdefabcdef");
  EXPECT_THAT(fs["marker_value"].get<std::string>(), HasSubstr("cluster/abcdefabcdef"));
  EXPECT_TRUE(fs["writer"]);  // the lowest logical id writes the marker

  pool_->OnHostStatus("h-0000000000000001",
                      {"", "shared filesystem check failed: /fsx is not writable", false, true});
  store::HostRecord bad = Get("h-0000000000000001");
  EXPECT_EQ(bad.state, "Quarantined");
  EXPECT_EQ(bad.instance_id, "");
  EXPECT_THAT(bad.state_reason, HasSubstr("/fsx is not writable"));
  // No other Spare: the instance waits, Pending, saying why.
  auto d = pool_->Describe("i-00000000000000001");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->state, NodeState::kPending);
  EXPECT_THAT(d->message, HasSubstr("no Spare host of type ml.c5.large in pool default"));
  EXPECT_THAT(d->message, HasSubstr("failed its check"));
  // A host joins: it takes the instance.
  Spare("h-0000000000000002", "default", "10.9.0.12", "b");
  d = pool_->Describe("i-00000000000000001");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->state, NodeState::kRunning);
  EXPECT_EQ(d->private_ip, "10.9.0.12");
  EXPECT_EQ(Get("h-0000000000000002").instance_id, "i-00000000000000001");
  EXPECT_EQ(sent_.back(), std::make_pair(std::string("h-0000000000000002"),
                                         std::string("i-00000000000000001")));
}

}  // namespace
}  // namespace hpod::controlplane
