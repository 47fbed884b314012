// The health concern (verdicts from heartbeats with a fake clock, restart grace,
// flapping, Slurm marks, health checks, lost contact with most of a cluster) and
// the queue's routing of keys.

#include "hpod/controlplane/health_reconciler.h"

#include <gtest/gtest.h>

#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/test_harness.h"

namespace hpod::controlplane {
namespace {

using testing::Harness;

// What hpodd knows of the agents, scripted by the test.
class FakeSignals final : public NodeSignals {
 public:
  AgentLiveness Liveness(const std::string& id) const override {
    auto it = live.find(id);
    AgentLiveness l = it == live.end() ? AgentLiveness{} : it->second;
    l.service_started = started;
    return l;
  }
  std::shared_ptr<const api::agentproto::HealthReport> Health(
      const std::string& id) const override {
    auto it = health.find(id);
    if (it == health.end()) return nullptr;
    return std::make_shared<const api::agentproto::HealthReport>(it->second);
  }
  std::shared_ptr<const SlurmNodesReport> SharedSlurmNodes(const std::string&) const override {
    return slurm ? std::make_shared<const SlurmNodesReport>(*slurm) : nullptr;
  }

  std::chrono::steady_clock::time_point started;
  std::map<std::string, AgentLiveness> live;
  std::map<std::string, api::agentproto::HealthReport> health;
  std::optional<SlurmNodesReport> slurm;
};

class HealthTest : public ::testing::Test {
 protected:
  HealthTest() {
    EXPECT_TRUE(h_.Call("CreateCluster",
                        {{"ClusterName", "demo"}, {"InstanceGroups", {Harness::Group("w", 2)}}})
                    .ok());
    h_.Converge();
    std::string arn = h_.Describe("demo")["ClusterArn"];
    id_ = arn.substr(arn.size() - 12);
    // Long after hpodd started: no grace left.
    h_.clock_.AdvanceTime(std::chrono::hours(1));
    EXPECT_TRUE(h_.store_
                    ->Write([&](store::WriteTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(nodes_, tx.ListNodes(id_));
                      for (const auto& n : nodes_) {
                        store::AgentRecord a;
                        a.instance_id = n.instance_id;
                        a.cluster_id = id_;
                        a.lifecycle_state = "Succeeded";
                        HPOD_RETURN_IF_ERROR(tx.PutAgent(a));
                      }
                      return OkStatus();
                    })
                    .ok());
    for (const auto& n : nodes_) Beat(n.instance_id);
  }

  // The node's agent is connected and just sent a heartbeat.
  void Beat(const std::string& id) {
    AgentLiveness& l = signals_.live[id];
    l.connected = true;
    l.connected_at = h_.clock_.SteadyNow();
    l.last_heartbeat = h_.clock_.SteadyNow();
  }
  NodeHealth Of(const std::string& id) {
    auto v = health_.Judge(id_);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    for (const auto& n : *v) {
      if (n.instance_id == id) return n;
    }
    ADD_FAILURE() << "no verdict for " << id;
    return {};
  }
  std::vector<store::RecoveryRecord> Recoveries() {
    std::vector<store::RecoveryRecord> out;
    EXPECT_TRUE(h_.store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(out, tx.ListRecoveries(id_));
                      return OkStatus();
                    })
                    .ok());
    return out;
  }
  static api::agentproto::HealthCheck Check(std::string name, std::string result,
                                            std::string verdict) {
    api::agentproto::HealthCheck c;
    c.name = std::move(name);
    c.result = std::move(result);
    c.verdict = std::move(verdict);
    c.reason = "scripted";
    return c;
  }

  Harness h_;
  std::string id_;
  std::vector<store::NodeRecord> nodes_;
  FakeSignals signals_;
  std::vector<std::string> woken_;
  HealthReconciler health_{
      *h_.store_, h_.clock_,          HealthOptions{},
      &signals_,  h_.provider_.get(), [this](const std::string& id) { woken_.push_back(id); }};
};

TEST_F(HealthTest, WithoutSignalsEveryNodeIsUnknownAndNothingChanges) {
  HealthReconciler blind(*h_.store_, h_.clock_, HealthOptions{}, nullptr, nullptr, nullptr);
  auto before = h_.Call("ListClusterEvents", {{"ClusterName", "demo"}});
  auto verdicts = blind.Judge(id_);
  ASSERT_TRUE(verdicts.ok());
  ASSERT_EQ(verdicts->size(), 2u);
  for (const auto& v : *verdicts) EXPECT_EQ(v.verdict, HealthVerdict::kUnknown);
  auto r = blind.Reconcile(id_);
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.requeue_after.count(), 0);
  EXPECT_EQ(h_.Call("ListClusterEvents", {{"ClusterName", "demo"}})->dump(), before->dump());
  EXPECT_TRUE(blind.Reconcile("nosuchcluster").status.ok());
  EXPECT_EQ(HealthVerdictName(HealthVerdict::kReplace), "Replace");
  EXPECT_EQ(HealthKey(id_), "health/" + id_);
}

TEST_F(HealthTest, MissedHeartbeatsBeyondTheTimeoutMeanReplace) {
  const std::string a = nodes_[0].instance_id;
  h_.clock_.AdvanceTime(std::chrono::milliseconds(5900));
  EXPECT_EQ(Of(a).verdict, HealthVerdict::kHealthy);
  // Watching clusters are polled: silence is noticed only by the clock.
  EXPECT_EQ(health_.Reconcile(id_).requeue_after, HealthOptions{}.poll_interval);
  h_.clock_.AdvanceTime(std::chrono::milliseconds(200));
  NodeHealth v = Of(a);
  EXPECT_EQ(v.verdict, HealthVerdict::kReplace);
  EXPECT_EQ(v.request.source, "Heartbeat");
  EXPECT_TRUE(v.request.node_dead);
  EXPECT_NE(v.reason.find("hangs"), std::string::npos) << v.reason;
}

// A controller's heartbeats may wait behind its Slurm table (a megabyte at
// 10,000 nodes) in its agent's outbox and in hpodd's reading: a frame of any
// type read meanwhile shows the agent alive, and silence past it still counts.
TEST_F(HealthTest, AnyFrameFromTheAgentCountsAsLife) {
  const std::string a = nodes_[0].instance_id;
  h_.clock_.AdvanceTime(std::chrono::milliseconds(4000));
  signals_.live[a].last_read = h_.clock_.SteadyNow();  // its Slurm table came
  h_.clock_.AdvanceTime(std::chrono::milliseconds(5900));
  EXPECT_EQ(Of(a).verdict, HealthVerdict::kHealthy) << "9.9 s after its heartbeat";
  h_.clock_.AdvanceTime(std::chrono::milliseconds(200));
  NodeHealth v = Of(a);
  EXPECT_EQ(v.verdict, HealthVerdict::kReplace);
  EXPECT_NE(v.reason.find("for 6 s"), std::string::npos) << v.reason;
}

// hpodd behind on its own reading (its listeners' I/O lag) does not blame the
// node for the bytes it has not read yet: the timeout grows by that lag.
TEST_F(HealthTest, HpoddsOwnReadLagIsNoSilenceOfTheNode) {
  const std::string a = nodes_[0].instance_id;
  signals_.live[a].read_lag = std::chrono::milliseconds(3000);
  h_.clock_.AdvanceTime(std::chrono::milliseconds(8900));
  EXPECT_EQ(Of(a).verdict, HealthVerdict::kHealthy) << "6 s timeout + 3 s of hpodd's lag";
  h_.clock_.AdvanceTime(std::chrono::milliseconds(200));
  EXPECT_EQ(Of(a).verdict, HealthVerdict::kReplace);
}

// A node under a deep health check is loaded on purpose: a silence of a few
// heartbeat timeouts is its stress run, not a hang; three are a hang.
TEST_F(HealthTest, ANodeUnderADeepCheckMayLagItsHeartbeatsForThreeTimeouts) {
  const std::string a = nodes_[0].instance_id;
  ASSERT_TRUE(h_.store_
                  ->Write([&](store::WriteTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(auto n, tx.GetNode(id_, a));
                    n.status = "DeepHealthCheckInProgress";
                    return tx.PutNode(n);
                  })
                  .ok());
  h_.clock_.AdvanceTime(std::chrono::seconds(12));
  EXPECT_EQ(Of(a).verdict, HealthVerdict::kHealthy);
  EXPECT_EQ(Of(nodes_[1].instance_id).verdict, HealthVerdict::kReplace);  // Running: 6 s
  h_.clock_.AdvanceTime(std::chrono::seconds(7));
  NodeHealth v = Of(a);
  EXPECT_EQ(v.verdict, HealthVerdict::kReplace);
  EXPECT_NE(v.reason.find("hangs"), std::string::npos) << v.reason;
}

TEST_F(HealthTest, AnAgentThatReconnectsInTimeIsHealthy) {
  const std::string a = nodes_[0].instance_id;
  signals_.live[a] = AgentLiveness{};
  signals_.live[a].disconnected_at = h_.clock_.SteadyNow();
  h_.clock_.AdvanceTime(std::chrono::seconds(5));
  EXPECT_EQ(Of(a).verdict, HealthVerdict::kHealthy);
  for (const auto& n : nodes_) Beat(n.instance_id);  // a is back
  h_.clock_.AdvanceTime(std::chrono::seconds(3));
  EXPECT_EQ(Of(a).verdict, HealthVerdict::kHealthy);
  ASSERT_TRUE(health_.Reconcile(id_).status.ok());
  EXPECT_TRUE(Recoveries().empty());
  // Gone for longer than the timeout: replaced.
  signals_.live[a] = AgentLiveness{};
  signals_.live[a].disconnected_at = h_.clock_.SteadyNow();
  h_.clock_.AdvanceTime(std::chrono::seconds(7));
  EXPECT_EQ(Of(a).verdict, HealthVerdict::kReplace);
  EXPECT_EQ(Of(a).request.check, "agent");
}

TEST_F(HealthTest, ARestartOfHpoddJudgesNobodyDuringTheGrace) {
  const std::string a = nodes_[0].instance_id;
  signals_.started = h_.clock_.SteadyNow();  // hpodd just started: nobody connected yet
  for (const auto& n : nodes_) signals_.live[n.instance_id] = AgentLiveness{};
  h_.clock_.AdvanceTime(HealthOptions{}.startup_grace - std::chrono::milliseconds(100));
  EXPECT_EQ(Of(a).verdict, HealthVerdict::kHealthy);
  h_.clock_.AdvanceTime(std::chrono::milliseconds(200));
  EXPECT_EQ(Of(a).verdict, HealthVerdict::kReplace);
}

TEST_F(HealthTest, ADeadMachineIsReplacedAtOnce) {
  const std::string a = nodes_[0].instance_id;
  signals_.live[a] = AgentLiveness{};
  signals_.live[a].disconnected_at = h_.clock_.SteadyNow();
  h_.provider_->BreakNode(a, "node stopped: its first process exited");
  NodeHealth v = Of(a);
  EXPECT_EQ(v.verdict, HealthVerdict::kReplace);
  EXPECT_EQ(v.request.source, "Instance");
  EXPECT_EQ(v.reason, "node stopped: its first process exited");
}

TEST_F(HealthTest, ANodeIsRecoveredOnceHoweverOftenItIsJudged) {
  const std::string a = nodes_[0].instance_id;
  h_.clock_.AdvanceTime(std::chrono::seconds(7));
  Beat(nodes_[1].instance_id);
  ASSERT_TRUE(health_.Reconcile(id_).status.ok());
  ASSERT_TRUE(health_.Reconcile(id_).status.ok());
  auto all = Recoveries();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].instance_id, a);
  EXPECT_EQ(all[0].action, "Replace");
  EXPECT_EQ(all[0].status, "InProgress");
  EXPECT_EQ(Of(a).verdict, HealthVerdict::kUnknown);   // in recovery: not judged again
  EXPECT_EQ(woken_, (std::vector<std::string>{id_}));  // the cluster pass carries it out
}

TEST_F(HealthTest, SlurmMarksAskForTheirAction) {
  const store::NodeRecord& n = nodes_[0];
  SlurmNodesReport r;
  r.nodes.push_back({n.hostname, "IDLE+DRAIN", "Action:Replace", "None"});
  signals_.slurm = r;
  EXPECT_EQ(Of(n.instance_id).verdict, HealthVerdict::kHealthy);  // drain is not the contract
  signals_.slurm->nodes[0] = {n.hostname, "MIXED+FAIL", "Action:Reboot", "None"};
  NodeHealth v = Of(n.instance_id);
  EXPECT_EQ(v.verdict, HealthVerdict::kReboot);
  EXPECT_EQ(v.request.source, "Slurm");
  EXPECT_FALSE(v.request.node_dead);  // its jobs run: wait for them
  signals_.slurm->nodes[0] = {n.hostname, "DOWN", "Action:Replace", "None"};
  v = Of(n.instance_id);
  EXPECT_EQ(v.verdict, HealthVerdict::kReplace);
  EXPECT_TRUE(v.request.node_dead);  // state=down: the last resort, jobs already killed
}

TEST_F(HealthTest, AFailingCheckWithoutAnActionVerdictOnlyReports) {
  api::agentproto::HealthReport r;
  r.checks = {Check("memory", "fail", ""), Check("gpu", "timeout", "Bogus")};
  signals_.health[nodes_[0].instance_id] = r;
  EXPECT_EQ(Of(nodes_[0].instance_id).verdict, HealthVerdict::kHealthy);
}

TEST_F(HealthTest, ANodeWhoseRecoveryFailedIsNotRecoveredAgainAtOnce) {
  const std::string a = nodes_[0].instance_id;
  ASSERT_TRUE(h_.store_
                  ->Write([&](store::WriteTx& tx) -> Status {
                    store::RecoveryRecord r;
                    r.recovery_id = "rcv-000000000001";
                    r.cluster_id = id_;
                    r.instance_id = a;
                    r.status = kRecoveryFailed;
                    r.finished = h_.clock_.NowEpochSeconds();
                    return tx.PutRecovery(r);
                  })
                  .ok());
  h_.clock_.AdvanceTime(std::chrono::seconds(7));  // its heartbeats are gone
  Beat(nodes_[1].instance_id);
  EXPECT_EQ(Of(a).verdict, HealthVerdict::kUnknown);
  h_.clock_.AdvanceTime(HealthOptions{}.failed_backoff);
  Beat(nodes_[1].instance_id);
  EXPECT_EQ(Of(a).verdict, HealthVerdict::kReplace);
}

// NodeRecovery None: a reported node is left as it is, until a later recovery
// of it (a BatchReboot keeps its instance id) ends the report; a fault after
// that is judged again.
TEST_F(HealthTest, AReportedNodeIsJudgedAgainOnceALaterRecoveryOfItRan) {
  const std::string a = nodes_[0].instance_id;
  const double now = h_.clock_.NowEpochSeconds();
  auto put = [&](const std::string& id, const char* status, double created) {
    store::RecoveryRecord r;
    r.recovery_id = id;
    r.cluster_id = id_;
    r.instance_id = a;
    r.status = status;
    r.created = created;
    r.finished = created + 1;
    r.automatic = std::string(status) != kRecoveryReported;
    return h_.store_->Write([&](store::WriteTx& tx) { return tx.PutRecovery(r); });
  };
  ASSERT_TRUE(put("rcv-000000000001", kRecoveryReported, now - 100).ok());
  h_.clock_.AdvanceTime(std::chrono::seconds(7));  // its heartbeats are gone
  Beat(nodes_[1].instance_id);
  EXPECT_EQ(Of(a).verdict, HealthVerdict::kUnknown);
  // The user rebooted it (same instance id); it came back, then went silent.
  ASSERT_TRUE(put("rcv-000000000002", kRecoverySucceeded, now - 50).ok());
  EXPECT_EQ(Of(a).verdict, HealthVerdict::kReplace);
}

TEST_F(HealthTest, TheWorstFailingCheckDecides) {
  const std::string a = nodes_[0].instance_id;
  api::agentproto::HealthReport r;
  r.checks = {Check("disk:/fsx", "fail", "Healthy"), Check("memory", "ok", "Healthy")};
  signals_.health[a] = r;
  EXPECT_EQ(Of(a).verdict, HealthVerdict::kHealthy);  // reported, no action
  r.checks.push_back(Check("memory", "fail", "Reboot"));
  r.checks.push_back(Check("flag_file", "fail", "Replace"));
  r.checks.push_back(Check("gpu", "timeout", "Reboot"));
  signals_.health[a] = r;
  NodeHealth v = Of(a);
  EXPECT_EQ(v.verdict, HealthVerdict::kReplace);
  EXPECT_EQ(v.request.check, "flag_file");
  EXPECT_EQ(v.request.source, "HealthCheck");
  EXPECT_FALSE(v.request.node_dead);
}

// Losing contact with most of the cluster at once (at least mass_loss_min nodes)
// blames hpodd's side: nobody is replaced for it, and the cluster is told once
// when the hold starts and once when it ends. Then lost contact counts again.
TEST_F(HealthTest, LosingContactWithMostNodesAtOnceReplacesNobody) {
  HealthOptions options;
  options.mass_loss_min = 2;
  HealthReconciler health(*h_.store_, h_.clock_, options, &signals_, h_.provider_.get(), nullptr);
  auto events = [&] {
    auto e = h_.Call("ListClusterEvents", {{"ClusterName", "demo"}});
    std::vector<std::string> out;
    for (const auto& ev : (*e)["Events"]) {
      std::string d = ev.value("Description", "");
      if (d.find("lost contact") != std::string::npos || d.find("is back") != std::string::npos) {
        out.push_back(d);
      }
    }
    return out;
  };
  h_.clock_.AdvanceTime(std::chrono::milliseconds(6100));
  auto verdicts = health.Judge(id_);
  ASSERT_TRUE(verdicts.ok());
  for (const auto& v : *verdicts) {
    EXPECT_EQ(v.verdict, HealthVerdict::kReplace);
    EXPECT_TRUE(v.held);
  }
  EXPECT_TRUE(health.Reconcile(id_).status.ok());
  EXPECT_TRUE(health.Reconcile(id_).status.ok());
  EXPECT_TRUE(Recoveries().empty());
  ASSERT_EQ(events().size(), 1u);
  EXPECT_NE(events()[0].find("lost contact with 2 of 2 nodes"), std::string::npos) << events()[0];

  // One node is heard again: one lost node is not most of the cluster.
  Beat(nodes_[0].instance_id);
  EXPECT_TRUE(health.Reconcile(id_).status.ok());
  auto recoveries = Recoveries();
  ASSERT_EQ(recoveries.size(), 1u);
  EXPECT_EQ(recoveries[0].instance_id, nodes_[1].instance_id);
  ASSERT_EQ(events().size(), 2u);
}

TEST_F(HealthTest, ManyNodesLosingTheControllerBlameTheController) {
  api::agentproto::HealthReport fail, ok;
  fail.checks = {Check("network", "fail", "Replace")};
  ok.checks = {Check("network", "ok", "Healthy")};
  // One node cut off while the other reaches the controller: that node's link.
  signals_.health[nodes_[0].instance_id] = fail;
  signals_.health[nodes_[1].instance_id] = ok;
  EXPECT_EQ(Of(nodes_[0].instance_id).verdict, HealthVerdict::kReplace);
  // Both cut off at once: the controller's side, so neither is replaced.
  signals_.health[nodes_[1].instance_id] = fail;
  EXPECT_EQ(Of(nodes_[0].instance_id).verdict, HealthVerdict::kHealthy);
  EXPECT_EQ(Of(nodes_[1].instance_id).verdict, HealthVerdict::kHealthy);
}

TEST(HealthControllerTest, WhileTheControllerIsDownNoWorkerIsBlamedForNotReachingIt) {
  Harness h;
  nlohmann::json ctl = Harness::Group("ctl", 1);
  ctl["SlurmConfig"] = {{"NodeType", "Controller"}};
  ASSERT_TRUE(h.Call("CreateCluster",
                     {{"ClusterName", "c"}, {"InstanceGroups", {ctl, Harness::Group("w", 1)}}})
                  .ok());
  h.Converge();
  std::string arn = h.Describe("c")["ClusterArn"];
  std::string id = arn.substr(arn.size() - 12);
  h.clock_.AdvanceTime(std::chrono::hours(1));
  std::vector<store::NodeRecord> nodes;
  ASSERT_TRUE(h.store_
                  ->Read([&](store::ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(nodes, tx.ListNodes(id));
                    return OkStatus();
                  })
                  .ok());
  FakeSignals signals;
  std::string worker, controller;
  for (const auto& n : nodes) (n.group_name == "ctl" ? controller : worker) = n.instance_id;
  for (const auto& n : nodes) {
    AgentLiveness& l = signals.live[n.instance_id];
    l.connected = true;
    l.connected_at = l.last_heartbeat.emplace(h.clock_.SteadyNow());
  }
  api::agentproto::HealthReport r;
  api::agentproto::HealthCheck net;
  net.name = "network";
  net.result = "fail";
  net.verdict = "Replace";
  r.checks = {net};
  signals.health[worker] = r;
  HealthReconciler health(*h.store_, h.clock_, HealthOptions{}, &signals, h.provider_.get(),
                          nullptr);
  auto verdict = [&]() {
    auto v = health.Judge(id);
    EXPECT_TRUE(v.ok());
    for (const auto& n : *v) {
      if (n.instance_id == worker) return n.verdict;
    }
    return HealthVerdict::kUnknown;
  };
  // The only worker alone loses the controller: its link, as far as hpod can tell.
  EXPECT_EQ(verdict(), HealthVerdict::kReplace);
  // The controller's agent is gone (the controller is down): not the worker's fault.
  signals.live[controller] = AgentLiveness{};
  signals.live[controller].disconnected_at = h.clock_.SteadyNow();
  EXPECT_EQ(verdict(), HealthVerdict::kHealthy);
}

TEST_F(HealthTest, TheControllerIsRebootedInsteadOfReplaced) {
  store::RecoveryRecord r;
  ASSERT_TRUE(h_.store_
                  ->Write([&](store::WriteTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(auto c, tx.GetCluster(id_));
                    HPOD_ASSIGN_OR_RETURN(
                        auto id, RequestRecovery(tx, h_.clock_, c, nodes_[0], true,
                                                 {RecoveryAction::kReplace, "HealthCheck", "x",
                                                  "scripted", false}));
                    HPOD_ASSIGN_OR_RETURN(r, tx.GetRecovery(id));
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(r.action, "Reboot");
  EXPECT_NE(r.reason.find("never replaced"), std::string::npos);
}

TEST(KeyRouterTest, PrefixedKeysGoToTheirConcernAndTheRestToTheClusterPass) {
  std::vector<std::string> seen;
  auto record = [&seen](std::string who) {
    return [&seen, who](const std::string& key) {
      seen.push_back(who + ":" + key);
      return WorkQueue::Result{OkStatus(), {}};
    };
  };
  KeyRouter router(record("cluster"));
  router.Route(std::string(kHealthKeyPrefix), record("health"));
  router.Route("slurm/", record("slurm"));
  router("abc123");
  router(HealthKey("abc123"));
  router("slurm/x");
  router("healthy");  // not the prefix "health/"
  EXPECT_EQ(seen, (std::vector<std::string>{"cluster:abc123", "health:abc123", "slurm:x",
                                            "cluster:healthy"}));
}

}  // namespace
}  // namespace hpod::controlplane
