// Removing a node from Slurm through the cluster reconciler: drain, drop from
// slurm.conf, terminate, and the timeouts that bound each wait.

#include "hpod/controlplane/slurm_reconcile_fixture.h"

namespace hpod::controlplane::slurm_testing {
namespace {

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
  EXPECT_TRUE(Declares(old_conf, victim.hostname));

  // Drained: the controller gets a slurm.conf without it; still not terminated.
  agents_.SetReport(ctl.instance_id, {{victim.hostname, "IDLE+DRAIN"}, {keeper.hostname, "IDLE"}});
  Pass();
  auto to_ctl = agents_.Sent(ctl.instance_id);
  ASSERT_GT(to_ctl.size(), ctl_sent);
  std::string conf = to_ctl.back()["files"]["slurm.conf"];
  EXPECT_FALSE(Declares(conf, victim.hostname)) << conf;
  EXPECT_TRUE(Declares(conf, keeper.hostname)) << conf;
  EXPECT_EQ(to_ctl.back()["node_names"], json::array({keeper.hostname}));
  EXPECT_FALSE(Terminated(victim.instance_id));
  EXPECT_TRUE(Node(victim.instance_id).has_value());
  // The removed node itself gets no new configuration.
  EXPECT_NE(agents_.Sent(victim.instance_id).back()["conf_hash"], to_ctl.back()["conf_hash"]);
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
  EXPECT_FALSE(Declares(conf, victim.hostname));
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

}  // namespace
}  // namespace hpod::controlplane::slurm_testing
