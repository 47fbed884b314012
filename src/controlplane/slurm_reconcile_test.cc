// The cluster reconciler's Slurm side against fake agents: which `slurm` message
// each node gets, when a node counts as Running (its daemon runs the current
// configuration and, for compute nodes, slurmctld lists it as registered), roles
// from provisioning_parameters.json, and removing a node from Slurm (drain, drop
// from slurm.conf, terminate) with its timeout.

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/slurm_plan.h"
#include "hpod/controlplane/test_harness.h"

namespace hpod::controlplane {
namespace {

using nlohmann::json;
using store::NodeRecord;
using testing::Harness;

// The fake provider's nodes, with agents on them.
class AgentRunningProvider final : public provider::Provider {
 public:
  explicit AgentRunningProvider(provider::FakeProvider& fake) : fake_(fake) {}
  Status Launch(const provider::LaunchSpec& spec) override { return fake_.Launch(spec); }
  Status Terminate(const std::string& id) override { return fake_.Terminate(id); }
  StatusOr<provider::NodeObservation> Describe(const std::string& id) override {
    return fake_.Describe(id);
  }
  StatusOr<std::vector<std::string>> List(const std::string& cluster_id) override {
    return fake_.List(cluster_id);
  }
  bool RunsAgents() const override { return true; }

 private:
  provider::FakeProvider& fake_;
};

// Records what the reconciler asks of the agents; the test scripts their answers.
// Thread-safe.
class FakeSlurmAgents final : public SlurmAgents {
 public:
  json SlurmState(const std::string& instance_id) const override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = states_.find(instance_id);
    return it == states_.end() ? json() : it->second;
  }
  std::optional<SlurmNodesReport> SlurmNodes(const std::string&) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return report_;
  }
  bool Send(const std::string& instance_id, const json& message) override {
    std::lock_guard<std::mutex> lock(mu_);
    sent_[instance_id].push_back(message);
    return true;
  }
  StatusOr<CommandResult> Run(const std::string& instance_id, const std::vector<std::string>& argv,
                              std::chrono::milliseconds) override {
    std::lock_guard<std::mutex> lock(mu_);
    runs_.emplace_back(instance_id, argv);
    return CommandResult{};
  }

  // The agent applied the last message it got and its daemon is `daemon`.
  void Ack(const std::string& instance_id, const std::string& daemon = "running") {
    std::lock_guard<std::mutex> lock(mu_);
    const json& m = sent_.at(instance_id).back();
    states_[instance_id] = {{"role", m["role"]},
                            {"conf_hash", m["conf_hash"]},
                            {"daemon", daemon},
                            {"restarts", 0},
                            {"message", ""}};
  }
  void SetReport(const std::string& reporter,
                 const std::vector<std::pair<std::string, std::string>>& nodes) {
    std::lock_guard<std::mutex> lock(mu_);
    SlurmNodesReport r;
    r.reporter = reporter;
    for (const auto& [name, state] : nodes) {
      r.nodes.push_back({name, state, "", "2024-01-01T00:00:00"});
    }
    report_ = r;
  }
  void ClearReport() {
    std::lock_guard<std::mutex> lock(mu_);
    report_.reset();
  }
  std::vector<json> Sent(const std::string& instance_id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sent_.find(instance_id);
    return it == sent_.end() ? std::vector<json>() : it->second;
  }
  size_t SentTotal() const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& [id, v] : sent_) n += v.size();
    return n;
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> Runs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return runs_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, json> states_;
  std::optional<SlurmNodesReport> report_;
  std::map<std::string, std::vector<json>> sent_;
  std::vector<std::pair<std::string, std::vector<std::string>>> runs_;
};

std::string ValueOr(const StatusOr<std::string>& s, const std::string& otherwise) {
  return s.ok() ? *s : otherwise;
}

json Req(const std::string& name, json groups) {
  return {{"ClusterName", name}, {"InstanceGroups", groups}};
}

json Typed(json group, const std::string& node_type) {
  group["SlurmConfig"] = {{"NodeType", node_type}};
  return group;
}

class SlurmReconcileTest : public ::testing::Test {
 protected:
  SlurmReconcileTest() : provider_(*h_.provider_) {
    h_.reconciler_ = std::make_unique<ClusterReconciler>(*h_.store_, &provider_, h_.clock_,
                                                         h_.options_, nullptr, &agents_);
  }

  // Creates the cluster and runs until its machines are up (agents not yet done).
  void Create(const json& groups) {
    auto r = h_.Call("CreateCluster", Req("demo", groups));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::string arn = h_.Describe("demo")["ClusterArn"];
    id_ = arn.substr(arn.size() - 12);
    Pass(3);
    for (const auto& n : Nodes()) ASSERT_FALSE(n.private_ip.empty()) << n.instance_id;
  }

  // Queues the cluster (a fake agent's change wakes nothing) and runs `rounds`.
  void Pass(int rounds = 3) {
    h_.queue_->Add(id_);
    h_.Converge(rounds);
  }

  std::vector<NodeRecord> Nodes() {
    std::vector<NodeRecord> out;
    EXPECT_TRUE(h_.store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(out, tx.ListNodes(id_));
                      return OkStatus();
                    })
                    .ok());
    return out;
  }
  std::vector<NodeRecord> NodesOf(const std::string& group) {
    std::vector<NodeRecord> out;
    for (auto& n : Nodes()) {
      if (n.group_name == group) out.push_back(n);
    }
    return out;
  }
  std::optional<NodeRecord> Node(const std::string& instance_id) {
    for (auto& n : Nodes()) {
      if (n.instance_id == instance_id) return n;
    }
    return std::nullopt;
  }

  // Every node's lifecycle scripts succeeded.
  void SucceedLifecycle() {
    ASSERT_TRUE(h_.store_
                    ->Write([&](store::WriteTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(id_));
                      for (const auto& n : nodes) {
                        store::AgentRecord a;
                        a.instance_id = n.instance_id;
                        a.cluster_id = id_;
                        a.lifecycle_state = "Succeeded";
                        HPOD_RETURN_IF_ERROR(tx.PutAgent(a));
                      }
                      return OkStatus();
                    })
                    .ok());
  }

  void PutSetting(const std::string& key, const std::string& value) {
    ASSERT_TRUE(
        h_.store_->Write([&](store::WriteTx& tx) { return tx.PutSetting(key, value); }).ok());
  }
  StatusOr<std::string> GetSetting(const std::string& key) {
    StatusOr<std::string> out = NotFoundError("unread");
    EXPECT_TRUE(h_.store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      out = tx.GetSetting(key);
                      return OkStatus();
                    })
                    .ok());
    return out;
  }

  std::string ClusterStatus() { return h_.Describe("demo")["ClusterStatus"]; }

  bool Terminated(const std::string& instance_id) {
    for (const auto& a : h_.provider_->actions()) {
      if (a.verb == "Terminate" && a.instance_id == instance_id) return true;
    }
    return false;
  }

  // A Slurm cluster (controller + 2 compute) InService with every node
  // registered; returns the controller.
  NodeRecord SlurmClusterInService() {
    Create({Typed(Harness::Group("ctl", 1), "Controller"), Harness::Group("w", 2)});
    SucceedLifecycle();
    Pass();
    NodeRecord ctl = NodesOf("ctl").at(0);
    agents_.Ack(ctl.instance_id);
    Pass();
    for (const auto& n : NodesOf("w")) agents_.Ack(n.instance_id);
    std::vector<std::pair<std::string, std::string>> report;
    for (const auto& n : NodesOf("w")) report.emplace_back(n.hostname, "IDLE");
    agents_.SetReport(ctl.instance_id, report);
    Pass();
    EXPECT_EQ(ClusterStatus(), "InService");
    return ctl;
  }

  Harness h_;
  AgentRunningProvider provider_;
  FakeSlurmAgents agents_;
  std::string id_;
};

TEST_F(SlurmReconcileTest, NodesAreRunningOnceTheirSlurmIsUp) {
  Create({Typed(Harness::Group("ctl", 1), "Controller"), Typed(Harness::Group("w", 2), "Compute")});
  // Machines up, lifecycle not yet done: nothing is sent.
  EXPECT_EQ(agents_.SentTotal(), 0u);
  for (const auto& n : Nodes()) EXPECT_EQ(n.status, "Pending");

  SucceedLifecycle();
  Pass();
  NodeRecord ctl = NodesOf("ctl").at(0);
  std::vector<NodeRecord> workers = NodesOf("w");
  ASSERT_EQ(workers.size(), 2u);

  auto to_ctl = agents_.Sent(ctl.instance_id);
  ASSERT_FALSE(to_ctl.empty());
  const json& m = to_ctl.back();
  EXPECT_EQ(m["type"], "slurm");
  EXPECT_EQ(m["role"], "controller");
  EXPECT_EQ(m["node_name"], ctl.hostname);
  EXPECT_EQ(m["controller_addr"], ctl.private_ip);
  ASSERT_TRUE(m.contains("files"));
  std::string conf = m["files"]["slurm.conf"];
  for (const auto& w : workers) {
    EXPECT_NE(conf.find("NodeName=" + w.hostname + " "), std::string::npos) << conf;
  }
  EXPECT_EQ(m["node_names"].size(), 2u);
  EXPECT_FALSE(m["conf_hash"].get<std::string>().empty());
  std::string key = m["munge_key"];
  EXPECT_EQ(ValueOr(GetSetting(MungeKeySetting(id_)), ""), key);
  // Workers wait until slurmctld runs this configuration (a configless slurmd
  // started earlier would fail to fetch it).
  for (const auto& w : workers) EXPECT_TRUE(agents_.Sent(w.instance_id).empty());
  for (const auto& n : Nodes()) EXPECT_EQ(n.status, "Pending") << n.group_name;

  // slurmctld still starting: the controller is Pending and is not sent the
  // configuration again (its agent has it); workers still wait.
  size_t before = agents_.Sent(ctl.instance_id).size();
  agents_.Ack(ctl.instance_id, "starting");
  Pass(1);
  EXPECT_EQ(Node(ctl.instance_id)->status, "Pending");
  EXPECT_EQ(agents_.Sent(ctl.instance_id).size(), before);
  for (const auto& w : workers) EXPECT_TRUE(agents_.Sent(w.instance_id).empty());

  // slurmctld runs: the controller is Running and the workers get their role.
  agents_.Ack(ctl.instance_id);
  Pass();
  EXPECT_EQ(Node(ctl.instance_id)->status, "Running");
  EXPECT_EQ(agents_.Sent(ctl.instance_id).size(), before);
  for (const auto& w : workers) {
    auto to_w = agents_.Sent(w.instance_id);
    ASSERT_FALSE(to_w.empty()) << w.instance_id;
    EXPECT_EQ(to_w.back()["type"], "slurm");
    EXPECT_EQ(to_w.back()["role"], "compute");
    EXPECT_EQ(to_w.back()["node_name"], w.hostname);
    EXPECT_EQ(to_w.back()["controller_addr"], ctl.private_ip);
    EXPECT_EQ(to_w.back()["conf_hash"], m["conf_hash"]);
    EXPECT_EQ(to_w.back()["munge_key"], key);  // one key for the whole cluster
    EXPECT_FALSE(to_w.back().contains("files"));
    EXPECT_EQ(Node(w.instance_id)->status, "Pending");
  }
  // Until they report the configuration it is sent again on every pass.
  for (const auto& w : workers) EXPECT_GT(agents_.Sent(w.instance_id).size(), 1u);

  // slurmd runs on the workers, but slurmctld has not listed them yet.
  for (const auto& w : workers) agents_.Ack(w.instance_id);
  agents_.SetReport(ctl.instance_id, {});
  Pass();
  for (const auto& w : workers) EXPECT_EQ(Node(w.instance_id)->status, "Pending");
  EXPECT_EQ(ClusterStatus(), "Creating");

  // Another agent's report does not speak for the controller.
  agents_.SetReport(workers[0].instance_id,
                    {{workers[0].hostname, "IDLE"}, {workers[1].hostname, "IDLE"}});
  Pass();
  for (const auto& w : workers) EXPECT_EQ(Node(w.instance_id)->status, "Pending");

  // One registered, one not responding.
  agents_.SetReport(ctl.instance_id,
                    {{workers[0].hostname, "IDLE"}, {workers[1].hostname, "DOWN+NOT_RESPONDING"}});
  Pass();
  EXPECT_EQ(Node(workers[0].instance_id)->status, "Running");
  EXPECT_EQ(Node(workers[1].instance_id)->status, "Pending");
  EXPECT_EQ(ClusterStatus(), "Creating");

  agents_.SetReport(ctl.instance_id,
                    {{workers[0].hostname, "IDLE"}, {workers[1].hostname, "IDLE"}});
  Pass();
  for (const auto& n : Nodes()) EXPECT_EQ(n.status, "Running") << n.group_name;
  EXPECT_EQ(ClusterStatus(), "InService");
}

TEST_F(SlurmReconcileTest, ProvisioningParametersNamingAnUnknownGroupFailTheCluster) {
  Create({Harness::Group("ctl", 1), Harness::Group("w", 1)});
  PutSetting(ProvisioningParametersSetting(id_),
             json({{"version", "1.0.0"},
                   {"workload_manager", "slurm"},
                   {"controller_group", "ctl"},
                   {"worker_groups",
                    {{{"instance_group_name", "w"}, {"partition_name", "dev"}},
                     {{"instance_group_name", "gpu-workers"}, {"partition_name", "dev"}}}}})
                 .dump());
  SucceedLifecycle();
  Pass(4);
  json d = h_.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "Failed");
  std::string msg = d.value("FailureMessage", "");
  EXPECT_NE(msg.find("gpu-workers"), std::string::npos) << msg;
  EXPECT_EQ(agents_.SentTotal(), 0u);
}

TEST_F(SlurmReconcileTest, NoSlurmConfigAndNoParametersMeansPlainNodes) {
  Create({Harness::Group("a", 1), Harness::Group("b", 1)});
  SucceedLifecycle();
  // Nothing reported yet: roles may still come from the lifecycle prefix.
  Pass();
  for (const auto& n : Nodes()) EXPECT_EQ(n.status, "Pending");
  EXPECT_EQ(ClusterStatus(), "Creating");
  // The agent reported that the prefix has no provisioning_parameters.json.
  PutSetting(ProvisioningParametersSetting(id_), "null");
  Pass();
  for (const auto& n : Nodes()) EXPECT_EQ(n.status, "Running");
  EXPECT_EQ(ClusterStatus(), "InService");
  EXPECT_EQ(agents_.SentTotal(), 0u);
}

TEST_F(SlurmReconcileTest, ProvisioningParametersGiveTheRoles) {
  Create({Harness::Group("ctl", 1), Harness::Group("w", 1)});
  PutSetting(ProvisioningParametersSetting(id_),
             json({{"version", "1.0.0"},
                   {"workload_manager", "slurm"},
                   {"controller_group", "ctl"},
                   {"worker_groups", {{{"instance_group_name", "w"}, {"partition_name", "dev"}}}}})
                 .dump());
  SucceedLifecycle();
  Pass();
  NodeRecord ctl = NodesOf("ctl").at(0);
  NodeRecord w = NodesOf("w").at(0);
  ASSERT_FALSE(agents_.Sent(ctl.instance_id).empty());
  EXPECT_EQ(agents_.Sent(ctl.instance_id).back()["role"], "controller");
  agents_.Ack(ctl.instance_id);
  Pass();
  ASSERT_FALSE(agents_.Sent(w.instance_id).empty());
  EXPECT_EQ(agents_.Sent(w.instance_id).back()["role"], "compute");
  std::string conf = agents_.Sent(ctl.instance_id).back()["files"]["slurm.conf"];
  EXPECT_NE(conf.find("PartitionName=dev"), std::string::npos) << conf;
}

TEST_F(SlurmReconcileTest, ARemovedNodeIsDrainedDroppedThenTerminated) {
  NodeRecord ctl = SlurmClusterInService();
  NodeRecord victim = NodesOf("w").at(0);
  NodeRecord keeper = NodesOf("w").at(1);
  auto r = h_.Call("BatchDeleteClusterNodes",
                   {{"ClusterName", "demo"}, {"NodeIds", {victim.instance_id}}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)["Successful"].size(), 1u);
  const size_t ctl_sent = agents_.Sent(ctl.instance_id).size();
  const std::string old_conf = agents_.Sent(ctl.instance_id).back()["files"]["slurm.conf"];

  // Still IDLE in Slurm: drained on the controller, kept in slurm.conf, alive.
  Pass();
  bool drained = false;
  for (const auto& [instance, argv] : agents_.Runs()) {
    if (instance != ctl.instance_id) continue;
    ASSERT_GE(argv.size(), 6u);
    // SLURM_CONF always: a host's own /etc/slurm must never be the one reached.
    EXPECT_EQ(argv[0], "env");
    EXPECT_EQ(argv[1], "SLURM_CONF=/opt/slurm/etc/slurm.conf");
    EXPECT_EQ(argv[2], "scontrol");
    EXPECT_EQ(argv[3], "update");
    EXPECT_EQ(argv[4], "nodename=" + victim.hostname);
    EXPECT_EQ(argv[5], "state=drain");
    drained = true;
  }
  EXPECT_TRUE(drained);
  for (const auto& [instance, argv] : agents_.Runs()) EXPECT_EQ(instance, ctl.instance_id);
  EXPECT_FALSE(Terminated(victim.instance_id));
  ASSERT_TRUE(Node(victim.instance_id).has_value());
  EXPECT_EQ(Node(victim.instance_id)->status, "ShuttingDown");
  // The controller's configuration is unchanged (same hash: nothing new to send).
  EXPECT_EQ(agents_.Sent(ctl.instance_id).size(), ctl_sent);
  EXPECT_NE(old_conf.find("NodeName=" + victim.hostname + " "), std::string::npos);

  // Drained: the controller gets a slurm.conf without it; still not terminated.
  agents_.SetReport(ctl.instance_id, {{victim.hostname, "IDLE+DRAIN"}, {keeper.hostname, "IDLE"}});
  Pass();
  auto to_ctl = agents_.Sent(ctl.instance_id);
  ASSERT_GT(to_ctl.size(), ctl_sent);
  std::string conf = to_ctl.back()["files"]["slurm.conf"];
  EXPECT_EQ(conf.find("NodeName=" + victim.hostname + " "), std::string::npos) << conf;
  EXPECT_NE(conf.find("NodeName=" + keeper.hostname + " "), std::string::npos) << conf;
  EXPECT_EQ(to_ctl.back()["node_names"], json::array({keeper.hostname}));
  EXPECT_FALSE(Terminated(victim.instance_id));
  EXPECT_TRUE(Node(victim.instance_id).has_value());
  // The removed node itself gets no new configuration.
  EXPECT_EQ(agents_.Sent(victim.instance_id).back()["node_names"].size(), 2u);
  // The cluster is not converged while Slurm still has the node.
  EXPECT_NE(ClusterStatus(), "Failed");

  // The controller restarted with the new node set and forgot it: terminated.
  // The remaining worker then gets the new configuration too.
  agents_.Ack(ctl.instance_id);
  agents_.SetReport(ctl.instance_id, {{keeper.hostname, "IDLE"}});
  Pass();
  EXPECT_TRUE(Terminated(victim.instance_id));
  EXPECT_FALSE(Node(victim.instance_id).has_value());
  ASSERT_FALSE(agents_.Sent(keeper.instance_id).empty());
  EXPECT_EQ(agents_.Sent(keeper.instance_id).back()["conf_hash"], to_ctl.back()["conf_hash"]);
  agents_.Ack(keeper.instance_id);
  Pass();
  EXPECT_EQ(Node(keeper.instance_id)->status, "Running");
  EXPECT_EQ(ClusterStatus(), "InService");
}

TEST_F(SlurmReconcileTest, ARemovalThatSlurmNeverCompletesTimesOut) {
  NodeRecord ctl = SlurmClusterInService();
  NodeRecord victim = NodesOf("w").at(0);
  ASSERT_TRUE(h_.Call("BatchDeleteClusterNodes",
                      {{"ClusterName", "demo"}, {"NodeIds", {victim.instance_id}}})
                  .ok());
  Pass(2);
  EXPECT_FALSE(Terminated(victim.instance_id));
  EXPECT_FALSE(agents_.Runs().empty());
  // The node stays IDLE in Slurm (the drain never lands).
  h_.clock_.AdvanceTime(h_.options_.slurm.remove_timeout + std::chrono::seconds(1));
  Pass(2);
  EXPECT_TRUE(Terminated(victim.instance_id));
  EXPECT_FALSE(Node(victim.instance_id).has_value());
}

TEST_F(SlurmReconcileTest, ADrainedNodeSlurmKeepsListingTimesOut) {
  NodeRecord ctl = SlurmClusterInService();
  NodeRecord victim = NodesOf("w").at(0);
  NodeRecord keeper = NodesOf("w").at(1);
  agents_.SetReport(ctl.instance_id, {{victim.hostname, "IDLE+DRAIN"}, {keeper.hostname, "IDLE"}});
  ASSERT_TRUE(h_.Call("BatchDeleteClusterNodes",
                      {{"ClusterName", "demo"}, {"NodeIds", {victim.instance_id}}})
                  .ok());
  Pass(2);
  // Already drained: no drain command, out of slurm.conf, but Slurm still has it
  // (the controller never applied the new configuration).
  EXPECT_TRUE(agents_.Runs().empty());
  std::string conf = agents_.Sent(ctl.instance_id).back()["files"]["slurm.conf"];
  EXPECT_EQ(conf.find("NodeName=" + victim.hostname + " "), std::string::npos);
  EXPECT_FALSE(Terminated(victim.instance_id));
  h_.clock_.AdvanceTime(h_.options_.slurm.remove_timeout + std::chrono::seconds(1));
  Pass(2);
  EXPECT_TRUE(Terminated(victim.instance_id));
  EXPECT_FALSE(Node(victim.instance_id).has_value());
}

TEST_F(SlurmReconcileTest, WithoutTheControllersViewARemovalWaits) {
  NodeRecord ctl = SlurmClusterInService();
  NodeRecord victim = NodesOf("w").at(0);
  agents_.ClearReport();  // e.g. hpodd restarted and the controller's agent is away
  ASSERT_TRUE(h_.Call("BatchDeleteClusterNodes",
                      {{"ClusterName", "demo"}, {"NodeIds", {victim.instance_id}}})
                  .ok());
  Pass(2);
  EXPECT_FALSE(Terminated(victim.instance_id));
  EXPECT_EQ(Node(victim.instance_id)->status, "ShuttingDown");
  h_.clock_.AdvanceTime(h_.options_.slurm.remove_timeout + std::chrono::seconds(1));
  Pass(2);
  EXPECT_TRUE(Terminated(victim.instance_id));
}

TEST_F(SlurmReconcileTest, ANodeSlurmNeverKnewIsTerminatedAtOnce) {
  NodeRecord ctl = SlurmClusterInService();
  NodeRecord victim = NodesOf("w").at(0);
  NodeRecord keeper = NodesOf("w").at(1);
  agents_.SetReport(ctl.instance_id, {{keeper.hostname, "IDLE"}});
  ASSERT_TRUE(h_.Call("BatchDeleteClusterNodes",
                      {{"ClusterName", "demo"}, {"NodeIds", {victim.instance_id}}})
                  .ok());
  Pass(2);
  EXPECT_TRUE(Terminated(victim.instance_id));
  EXPECT_TRUE(agents_.Runs().empty());
}

TEST_F(SlurmReconcileTest, CreateClusterChecksSlurmConfig) {
  auto two = h_.Call("CreateCluster", Req("demo", {Typed(Harness::Group("c1", 1), "Controller"),
                                                   Typed(Harness::Group("c2", 1), "Controller")}));
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().code(), StatusCode::kInvalidArgument);
  std::string msg(two.status().message());
  EXPECT_NE(msg.find("c1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("c2"), std::string::npos) << msg;

  auto big =
      h_.Call("CreateCluster",
              Req("demo", {Typed(Harness::Group("ctl", 2), "Controller"), Harness::Group("w", 1)}));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(big.status().message()).find("ctl"), std::string::npos)
      << big.status().message();

  auto none = h_.Call("CreateCluster", Req("demo", {Typed(Harness::Group("w", 1), "Compute")}));
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  // Nothing was created.
  EXPECT_EQ(h_.Call("DescribeCluster", {{"ClusterName", "demo"}}).status().code(),
            StatusCode::kNotFound);
}

TEST_F(SlurmReconcileTest, ANodeWhoseSlurmNeverComesUpFailsAfterTheReadyTimeout) {
  Create({Typed(Harness::Group("ctl", 1), "Controller"), Harness::Group("w", 1)});
  SucceedLifecycle();
  Pass();
  // The controller's agent never acknowledges its configuration.
  for (const auto& n : Nodes()) EXPECT_EQ(n.status, "Pending") << n.instance_id;
  // (Each Pass also moves the clock by a few poll intervals.)
  h_.clock_.AdvanceTime(h_.options_.slurm.ready_timeout - std::chrono::seconds(10));
  Pass();
  EXPECT_EQ(h_.Describe("demo")["ClusterStatus"], "Creating");
  h_.clock_.AdvanceTime(std::chrono::seconds(20));
  Pass();
  json d = h_.Describe("demo");
  EXPECT_EQ(d["ClusterStatus"], "Failed");
  std::string why = d.value("FailureMessage", "");
  EXPECT_NE(why.find("Slurm on the instance did not come up within 300 s"), std::string::npos)
      << why;
}

TEST_F(SlurmReconcileTest, UpdateClusterCannotChangeAGroupsSlurmRole) {
  Create({Harness::Group("ctl", 1), Harness::Group("w", 1)});
  PutSetting(ProvisioningParametersSetting(id_), "null");  // plain nodes: InService at once
  SucceedLifecycle();
  Pass();
  ASSERT_EQ(h_.Describe("demo")["ClusterStatus"], "InService");
  auto r = h_.Call("UpdateCluster", {{"ClusterName", "demo"},
                                     {"InstanceGroups", {Typed(Harness::Group("w", 2), "Login")}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("SlurmConfig of instance group 'w'"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(h_.Describe("demo")["ClusterStatus"], "InService");  // nothing changed
}

TEST_F(SlurmReconcileTest, FileRolesMustNameNewGroupsButMayNameGoneOnes) {
  Create({Harness::Group("ctl", 1), Harness::Group("w", 1)});
  PutSetting(
      ProvisioningParametersSetting(id_),
      json({{"controller_group", "ctl"},
            {"worker_groups", {{{"instance_group_name", "w"}}, {{"instance_group_name", "gone"}}}}})
          .dump());
  auto check = [&](std::vector<std::string> names) {
    std::vector<store::GroupRecord> groups;
    for (const auto& n : names) {
      store::GroupRecord g;
      g.name = n;
      g.spec = Harness::Group(n, 1);
      g.target_count = 1;
      groups.push_back(g);
    }
    Status out;
    EXPECT_TRUE(h_.store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      out = CheckFileRoles(tx, id_, groups);
                      return OkStatus();
                    })
                    .ok());
    return out;
  };
  // "gone" was deleted since: fine. A new group the file does not name: refused,
  // saying which group to add.
  EXPECT_TRUE(check({"ctl", "w"}).ok());
  Status added = check({"ctl", "w", "new-workers"});
  EXPECT_EQ(added.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(added.message()).find("new-workers"), std::string::npos) << added.message();
}

TEST_F(SlurmReconcileTest, DeleteClusterRemovesItsSettings) {
  SlurmClusterInService();
  PutSetting(ProvisioningParametersSetting(id_), "null");
  ASSERT_TRUE(GetSetting(MungeKeySetting(id_)).ok());
  PutSetting("cluster/other/munge_key", "keep");
  ASSERT_TRUE(h_.Call("DeleteCluster", {{"ClusterName", "demo"}}).ok());
  Pass(10);
  ASSERT_EQ(h_.Call("DescribeCluster", {{"ClusterName", "demo"}}).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(GetSetting(MungeKeySetting(id_)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(GetSetting(ProvisioningParametersSetting(id_)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ValueOr(GetSetting("cluster/other/munge_key"), ""), "keep");
}

}  // namespace
}  // namespace hpod::controlplane
