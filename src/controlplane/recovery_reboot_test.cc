// Reboots in node recovery (recovery_reconciler.h): the instance kept, a new
// slurmd and a new agent connection awaited, a failed reboot escalated, and a
// live controller's slurmctld state saved (and its exit awaited) first.

#include <gtest/gtest.h>

#include <algorithm>

#include "hpod/controlplane/recovery.h"
#include "hpod/controlplane/recovery_test_fixture.h"

namespace hpod::controlplane::slurm_testing {
namespace {

TEST_F(RecoveryTest, RebootKeepsTheInstanceAndWaitsForANewSlurmd) {
  SlurmClusterInService();
  NodeRecord a = NodesOf("w").at(1);
  agents_.SetNode(a.hostname, "IDLE", "", SlurmTime(a.launch_time + 1));
  std::string rid = Request(a, RecoveryAction::kReboot, /*dead=*/true);
  Pass(1);
  EXPECT_TRUE(
      RanCommand("scontrol update nodename=" + a.hostname + " state=fail reason=Action:Reboot"));
  int reboots = 0;
  for (const auto& act : h_.provider_->actions()) reboots += act.verb == "Reboot";
  EXPECT_EQ(reboots, 1);
  EXPECT_FALSE(Terminated(a.instance_id));
  std::optional<NodeRecord> row = Node(a.instance_id);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->status, "Pending");
  Pass();
  EXPECT_EQ(Node(a.instance_id)->status, "Pending");  // the old slurmd's row
  EXPECT_EQ(Recovery(rid).status, "InProgress");
  agents_.SetNode(a.hostname, "IDLE+FAIL", "Action:Reboot", SlurmTime(row->launch_time + 1));
  Pass();
  EXPECT_EQ(Node(a.instance_id)->status, "Running");
  agents_.SetNode(a.hostname, "IDLE", "", SlurmTime(row->launch_time + 1));
  Pass();
  EXPECT_EQ(Recovery(rid).status, "Succeeded");
  reboots = 0;
  for (const auto& act : h_.provider_->actions()) reboots += act.verb == "Reboot";
  EXPECT_EQ(reboots, 1);  // once, however many passes
}

// A reboot that does not bring the node back (its provider fails it: a pool
// host past its reboot deadline) becomes a replacement of the same logical node.
TEST_F(RecoveryTest, ARebootThatFailsIsEscalatedToAReplacement) {
  SlurmClusterInService();
  NodeRecord a = NodesOf("w").at(1);
  agents_.SetNode(a.hostname, "IDLE", "", SlurmTime(a.launch_time + 1));
  std::string rid = Request(a, RecoveryAction::kReboot, /*dead=*/true);
  Pass(1);
  EXPECT_EQ(Recovery(rid).phase, "Launched");
  h_.provider_->BreakNode(a.instance_id, "its host did not come back from reboot");
  Pass();
  store::RecoveryRecord r = Recovery(rid);
  EXPECT_EQ(r.action, "Replace");
  EXPECT_EQ(r.status, "InProgress");
  EXPECT_THAT(Steps(rid), ::testing::Contains("Escalated"));
  EXPECT_TRUE(Terminated(a.instance_id));
  ASSERT_FALSE(r.replacement_id.empty());
  std::optional<NodeRecord> b = Node(r.replacement_id);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->hostname, a.hostname);
  EXPECT_EQ(b->logical_id, a.logical_id);
}

TEST_F(RecoveryTest, TheControllerIsRebootedNeverReplaced) {
  NodeRecord ctl = SlurmClusterInService();
  std::string rid = Request(ctl, RecoveryAction::kReplace, true, /*is_controller=*/true);
  store::RecoveryRecord r = Recovery(rid);
  EXPECT_EQ(r.action, "Reboot");
  Pass(1);
  EXPECT_FALSE(Terminated(ctl.instance_id));
  EXPECT_FALSE(RanCommand("scontrol update nodename=" + ctl.hostname));  // it cannot mark itself
  EXPECT_EQ(Recovery(rid).phase, "Launched");
}

// A rebooted node is back only once its agent connected after the reboot: the
// connection of the old boot (a hung controller's stays open until the machine
// restarts) says nothing of the new one.
TEST_F(RecoveryTest, ARebootWaitsForTheAgentOfTheNewBoot) {
  NodeRecord ctl = SlurmClusterInService();
  agents_.SetConnectedSince(ctl.instance_id, h_.clock_.NowEpochSeconds() - 60);
  std::string rid = Request(ctl, RecoveryAction::kReboot, /*dead=*/true, /*is_controller=*/true);
  Pass(6);
  EXPECT_GT(RecoveryStepTime(Recovery(rid), "Rebooted"), 0);
  EXPECT_EQ(Recovery(rid).status, "InProgress");
  EXPECT_EQ(RecoveryStepTime(Recovery(rid), "LifecycleDone"), 0);
  agents_.SetConnectedSince(ctl.instance_id, h_.clock_.NowEpochSeconds() + 1);
  Pass(6);
  EXPECT_EQ(Recovery(rid).status, "Succeeded") << Recovery(rid).message;
}

// A live controller (BatchRebootClusterNodes, a software update) saves
// slurmctld's state before the reboot: what it held only in memory (a job that
// just ended) would otherwise come back as it was at the last periodic save.
TEST_F(RecoveryTest, ALiveControllerSavesSlurmctldsStateBeforeItsReboot) {
  NodeRecord ctl = SlurmClusterInService();
  std::string rid = Request(ctl, RecoveryAction::kReboot, false, /*is_controller=*/true);
  Pass(3);
  EXPECT_TRUE(RanCommand("scontrol shutdown slurmctld"));
  auto steps = Steps(rid);
  auto saved = std::find(steps.begin(), steps.end(), "StateSaved");
  auto rebooted = std::find(steps.begin(), steps.end(), "RebootRequested");
  ASSERT_NE(saved, steps.end());
  ASSERT_NE(rebooted, steps.end());
  EXPECT_LT(saved - steps.begin(), rebooted - steps.begin()) << "saved, then rebooted";
}

// The shutdown only asks: the reboot waits while slurmctld is still writing its
// state (pgrep finds it), and goes on once it is gone, or after 20 s
// (kStateSaveSeconds) when it never exits.
class ControllerRebootTest : public RecoveryTest {
 protected:
  // Asks the controller's reboot while its slurmctld keeps running; returns the
  // recovery once the state save was asked.
  std::string RebootWhileSlurmctldRuns() {
    NodeRecord ctl = SlurmClusterInService();
    agents_.SetRunOutput("4242\n");  // every command, pgrep included, prints a pid
    std::string rid = Request(ctl, RecoveryAction::kReboot, false, /*is_controller=*/true);
    Pass(3);
    EXPECT_GT(RecoveryStepTime(Recovery(rid), "StateSaved"), 0);
    EXPECT_TRUE(RanCommand("pgrep -x slurmctld"));
    EXPECT_EQ(RecoveryStepTime(Recovery(rid), "RebootRequested"), 0) << "slurmctld still runs";
    return rid;
  }
};

TEST_F(ControllerRebootTest, WaitsForSlurmctldToExit) {
  std::string rid = RebootWhileSlurmctldRuns();
  Pass(3);
  EXPECT_EQ(RecoveryStepTime(Recovery(rid), "RebootRequested"), 0);
  agents_.SetRunOutput("");  // gone
  Pass(3);
  EXPECT_GT(RecoveryStepTime(Recovery(rid), "RebootRequested"), 0);
}

TEST_F(ControllerRebootTest, GoesOnWhenSlurmctldNeverExits) {
  std::string rid = RebootWhileSlurmctldRuns();
  h_.clock_.AdvanceTime(std::chrono::seconds(21));
  Pass(3);
  EXPECT_GT(RecoveryStepTime(Recovery(rid), "RebootRequested"), 0);
}

}  // namespace
}  // namespace hpod::controlplane::slurm_testing
