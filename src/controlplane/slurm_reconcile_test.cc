// The cluster reconciler's Slurm side against fake agents: which `slurm` message
// each node gets, when a node counts as Running (its daemon runs the current
// configuration and, for compute nodes, slurmctld lists it as registered), roles
// from provisioning_parameters.json and from SlurmConfig. Removal is in
// slurm_removal_test.cc.

#include <algorithm>
#include <set>

#include "hpod/base/ssh_key.h"
#include "hpod/controlplane/slurm_plan.h"
#include "hpod/controlplane/slurm_reconcile_fixture.h"
#include "hpod/controlplane/slurm_reconciler.h"

namespace hpod::controlplane::slurm_testing {
namespace {

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
    EXPECT_TRUE(Declares(conf, w.hostname)) << conf;
  }
  EXPECT_EQ(m["node_names"].size(), 2u);
  EXPECT_FALSE(m["conf_hash"].get<std::string>().empty());
  std::string key = m["munge_key"];
  EXPECT_EQ(ValueOr(GetSetting(MungeKeySetting(id_)), ""), key);
  EXPECT_FALSE(m.contains("ssh_host_key")) << "not without cluster_sshd";
  EXPECT_FALSE(m.value("hold", false)) << "the controller is never held";
  // Workers are configured but held until slurmctld runs this configuration (a
  // configless slurmd started earlier would fail to fetch it).
  for (const auto& w : workers) {
    auto to_w = agents_.Sent(w.instance_id);
    ASSERT_FALSE(to_w.empty()) << w.instance_id;
    EXPECT_TRUE(to_w.back().value("hold", false));
    EXPECT_EQ(to_w.back()["conf_hash"], m["conf_hash"]);
    // The node set is the controller's business: n workers' messages would carry
    // n x n names.
    EXPECT_TRUE(to_w.back().value("node_names", json::array()).empty());
    agents_.Ack(w.instance_id, "held");
  }
  for (const auto& n : Nodes()) EXPECT_EQ(n.status, "Pending") << n.group_name;

  // slurmctld still starting: the controller is Pending and is not sent the
  // configuration again (its agent has it); workers, held, neither.
  size_t before = agents_.Sent(ctl.instance_id).size();
  size_t before_w = agents_.Sent(workers[0].instance_id).size();
  agents_.Ack(ctl.instance_id, "starting");
  Pass(1);
  EXPECT_EQ(Node(ctl.instance_id)->status, "Pending");
  EXPECT_EQ(agents_.Sent(ctl.instance_id).size(), before);
  EXPECT_EQ(agents_.Sent(workers[0].instance_id).size(), before_w);

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
    EXPECT_FALSE(to_w.back().value("hold", false));
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

TEST_F(SlurmReconcileTest, NodesGetTheirSlurmPartWhileTheirScriptsRun) {
  Create({Typed(Harness::Group("ctl", 1), "Controller"), Typed(Harness::Group("w", 1), "Compute")});
  SetLifecycle("Running");
  Pass();
  NodeRecord ctl = NodesOf("ctl").at(0);
  NodeRecord w = NodesOf("w").at(0);
  // slurm.conf before the scripts, as on HyperPod: the controller's part
  // unheld (its agent starts slurmctld when the scripts succeed or start it),
  // the worker's held.
  ASSERT_FALSE(agents_.Sent(ctl.instance_id).empty());
  EXPECT_FALSE(agents_.Sent(ctl.instance_id).back().value("hold", false));
  ASSERT_FALSE(agents_.Sent(w.instance_id).empty());
  EXPECT_TRUE(agents_.Sent(w.instance_id).back().value("hold", false));
  agents_.Ack(w.instance_id, "held");
  // A script started slurmctld (systemctl enable --now): the worker is let go,
  // but nobody is Running before its scripts succeeded.
  agents_.Ack(ctl.instance_id);
  Pass();
  EXPECT_FALSE(agents_.Sent(w.instance_id).back().value("hold", false));
  agents_.Ack(w.instance_id);
  for (const auto& n : Nodes()) EXPECT_EQ(n.status, "Pending") << n.group_name;

  // A worker that ran unheld is never held again: a restarting slurmctld (or a
  // new configuration it does not run yet) leaves the worker's slurmd alone.
  const size_t sent = agents_.Sent(w.instance_id).size();
  agents_.Ack(ctl.instance_id, "restarting");
  Pass(1);
  EXPECT_EQ(agents_.Sent(w.instance_id).size(), sent);
  // Nor before its agent reported again (hpodd restarted, the agent reconnects):
  // nothing says it never ran, so nothing is sent.
  agents_.Forget(w.instance_id);
  Pass(1);
  EXPECT_EQ(agents_.Sent(w.instance_id).size(), sent);
  agents_.Ack(w.instance_id);

  SucceedLifecycle();
  agents_.Ack(ctl.instance_id);
  agents_.SetReport(ctl.instance_id, {{w.hostname, "IDLE"}});
  Pass();
  for (const auto& n : Nodes()) EXPECT_EQ(n.status, "Running") << n.group_name;
}

TEST_F(SlurmReconcileTest, EachNodeNameHasItsOwnKeptSshHostKeyAndEveryNodeKnowsAll) {
  h_.options_.slurm.cluster_sshd = true;
  h_.reconciler_ = std::make_unique<ClusterReconciler>(*h_.store_, &provider_, h_.clock_,
                                                       h_.options_, nullptr, &agents_);
  Create({Typed(Harness::Group("ctl", 1), "Controller"), Typed(Harness::Group("w", 2), "Compute")});
  SucceedLifecycle();
  Pass();
  NodeRecord ctl = NodesOf("ctl").at(0);
  json m = agents_.Sent(ctl.instance_id).back();
  const std::string key = m["ssh_host_key"];
  const std::string known = m["ssh_known_hosts"];
  auto pub = SshPublicKeyOf(key);
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_NE(known.find(ctl.hostname + "," + ctl.private_ip + " " + *pub + "\n"), std::string::npos)
      << known;
  EXPECT_EQ(std::count(known.begin(), known.end(), '\n'), 3);
  agents_.Ack(ctl.instance_id);
  Pass();
  std::set<std::string> keys = {key};
  for (const auto& w : NodesOf("w")) {
    json to_w = agents_.Sent(w.instance_id).back();
    EXPECT_EQ(to_w["ssh_known_hosts"], known);
    EXPECT_EQ(to_w["conf_hash"], m["conf_hash"]);
    keys.insert(to_w["ssh_host_key"].get<std::string>());
  }
  EXPECT_EQ(keys.size(), 3u) << "one key per node";
  // Kept in the store: the name keeps its key in every later plan (a replacement
  // under the name gets it), and the hash covers the known_hosts lines.
  auto plan = BuildSlurmPlan(*h_.store_, id_, h_.options_.slurm);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->ssh_host_keys[ctl.hostname], key);
  EXPECT_EQ(plan->ssh_known_hosts, known);
  EXPECT_EQ(plan->conf_hash, m["conf_hash"]);
  EXPECT_NE(plan->conf_hash, slurm::FilesHash(plan->files));
}

// Nodes that share the provider's hosts file (send_hosts false: local nodes) get
// no address table, which to n nodes is n x n entries; one with an SSH host key
// gets its own entry, against which the agent checks the key's name.
TEST_F(SlurmReconcileTest, TheAddressTableGoesOnlyWhereNodesKeepTheirOwnHosts) {
  h_.options_.slurm.cluster_sshd = true;
  Create({Typed(Harness::Group("ctl", 1), "Controller"), Typed(Harness::Group("w", 2), "Compute")});
  SucceedLifecycle();
  Pass();
  NodeRecord w = NodesOf("w").at(0);
  SlurmOptions options = h_.options_.slurm;
  auto plan = BuildSlurmPlan(*h_.store_, id_, options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  options.send_hosts = true;  // pool hosts: every node's address
  EXPECT_EQ(SlurmMessage(*plan, w, options, "")["hosts"].size(), 3u);
  options.send_hosts = false;
  json m = SlurmMessage(*plan, w, options, "");
  EXPECT_EQ(m["hosts"], json({{w.hostname, w.private_ip}}));
  EXPECT_FALSE(m["ssh_host_key"].get<std::string>().empty());
  options.cluster_sshd = false;
  plan = BuildSlurmPlan(*h_.store_, id_, options);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(SlurmMessage(*plan, w, options, "").value("hosts", json::object()).empty());
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
  // While the scripts still run: the nodes fail at once (their agents would
  // otherwise wait for a slurm.conf that can never come).
  SetLifecycle("Running");
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
  // Each node is told that it has no Slurm, and why (its motd), until its agent
  // says it knows; `sinfo` there then says so instead of "DNS SRV lookup failed".
  for (const auto& n : Nodes()) {
    auto sent = agents_.Sent(n.instance_id);
    ASSERT_FALSE(sent.empty()) << n.instance_id;
    EXPECT_EQ(sent.back()["role"], "none");
    EXPECT_EQ(sent.back()["node_name"], n.hostname);
    EXPECT_EQ(sent.back()["motd"], kNoSlurmMotd);
    EXPECT_EQ(sent.back()["munge_key"], "");
    agents_.Ack(n.instance_id, "none");
  }
  const size_t sent = agents_.SentTotal();
  Pass();
  EXPECT_EQ(agents_.SentTotal(), sent);
  EXPECT_EQ(ClusterStatus(), "InService");
  // One cluster event says so too, once.
  auto events =
      h_.Call("ListClusterEvents", {{"ClusterName", "demo"}, {"ResourceType", "Cluster"}});
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  int said = 0;
  for (const auto& e : (*events)["Events"]) said += e.value("Description", "") == kNoSlurmEvent;
  EXPECT_EQ(said, 1);
  EXPECT_NE(std::string(kNoSlurmMotd).find("provisioning_parameters.json"), std::string::npos);
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

TEST(SlurmdOfThisInstanceTest, OneClockPerComparison) {
  const double launch = 1700000000;  // hpodd's clock
  auto row = [](double epoch, const std::string& state = "IDLE") {
    return slurm::SlurmNodeState{"ip-10-0-0-2", state, "", SlurmTime(epoch)};
  };
  const json agent = {{"daemon", "running"}, {"slurmd_started", launch - 90.5}};  // 90 s behind
  // The node's clock only: a row stamped since the agent's start counts, one before does not.
  EXPECT_TRUE(SlurmdOfThisInstance(row(launch - 89), agent, launch, ""));
  EXPECT_TRUE(SlurmdOfThisInstance(row(launch - 91), agent, launch, ""))  // the same second
      << "SlurmdStartTime is to the second";
  EXPECT_FALSE(SlurmdOfThisInstance(row(launch - 92), agent, launch, ""));
  EXPECT_FALSE(SlurmdOfThisInstance(row(launch - 89, "DOWN+NOT_RESPONDING"), agent, launch, ""));
  // The row a recovery marked never counts, however its time compares.
  EXPECT_FALSE(SlurmdOfThisInstance(row(launch - 80), agent, launch, SlurmTime(launch - 80)));
  EXPECT_TRUE(SlurmdOfThisInstance(row(launch - 80), agent, launch, SlurmTime(launch - 300)));
  // An agent without slurmd_started: hpodd's launch time, as before the field.
  const json old_agent = {{"daemon", "running"}};
  EXPECT_FALSE(SlurmdOfThisInstance(row(launch - 89), old_agent, launch, ""));
  EXPECT_TRUE(SlurmdOfThisInstance(row(launch + 1), old_agent, launch, ""));
  // No report from the instance's agent yet: none is its own.
  EXPECT_FALSE(SlurmdOfThisInstance(row(launch + 1), json(), launch, ""));
  // …where a marked row stamped after the launch cannot be told from a new one.
  EXPECT_TRUE(SlurmdOfThisInstance(row(launch + 1), old_agent, launch, SlurmTime(launch + 1)));
  EXPECT_FALSE(SlurmdOfThisInstance(row(launch - 5), old_agent, launch, SlurmTime(launch - 5)));
}

// A worker whose clock is off hpodd's (issue 25): it is Running once Slurm lists
// the slurmd its own agent started, judged on the worker's clock (slurmd_started
// against SlurmdStartTime) and never against hpodd's launch time.
class SlurmClockSkewTest : public SlurmReconcileTest, public ::testing::WithParamInterface<int> {};

TEST_P(SlurmClockSkewTest, AWorkerIsRunningOnceItsOwnSlurmdRegisteredByItsClock) {
  Create({Typed(Harness::Group("ctl", 1), "Controller"), Harness::Group("w", 1)});
  SucceedLifecycle();
  Pass();
  NodeRecord ctl = NodesOf("ctl").at(0);
  agents_.Ack(ctl.instance_id);
  Pass();
  NodeRecord w = NodesOf("w").at(0);
  h_.clock_.AdvanceTime(std::chrono::seconds(10));
  const double started = h_.clock_.NowEpochSeconds() + GetParam();  // the worker's clock
  agents_.Ack(w.instance_id, "running", started);
  agents_.SetReport(ctl.instance_id, {});
  // A row of a slurmd that started before the agent's (another that held the
  // NodeName): not this node's, whatever hpodd's clock says of it.
  agents_.SetNode(w.hostname, "IDLE", "", SlurmTime(started - 5));
  Pass();
  EXPECT_EQ(Node(w.instance_id)->status, "Pending");
  // Its own slurmd registered a second after the agent started it.
  agents_.SetNode(w.hostname, "IDLE", "", SlurmTime(started + 1));
  Pass();
  EXPECT_EQ(Node(w.instance_id)->status, "Running");
  EXPECT_EQ(ClusterStatus(), "InService");
}

INSTANTIATE_TEST_SUITE_P(WorkerClock, SlurmClockSkewTest, ::testing::Values(90, -90),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param > 0 ? std::string("Ahead90s")
                                                 : std::string("Behind90s");
                         });

}  // namespace
}  // namespace hpod::controlplane::slurm_testing
