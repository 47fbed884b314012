// Node recovery's state machine in the cluster pass (recovery_reconciler.h),
// against the fake provider and fake agents: the Slurm commands it sends, the
// row swap of a replacement, the resume once a newer slurmd registered,
// NodeRecovery=None, and a restart of hpodd at every step. Reboots:
// recovery_reboot_test.cc.

#include "hpod/controlplane/recovery.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "hpod/controlplane/jobs.h"
#include "hpod/controlplane/recovery_test_fixture.h"

namespace hpod::controlplane::slurm_testing {
namespace {

TEST_F(RecoveryTest, ReplaceKeepsTheNameAndAddressAndResumesOnlyANewerSlurmd) {
  NodeRecord ctl = SlurmClusterInService();
  NodeRecord a = NodesOf("w").at(0);
  agents_.SetNode(a.hostname, "IDLE", "", SlurmTime(a.launch_time + 1));  // its own slurmd
  std::string rid = Request(a, RecoveryAction::kReplace, /*dead=*/true);
  ASSERT_EQ(rid.rfind("rcv-", 0), 0u);
  // A second request for the same node is the same recovery.
  EXPECT_EQ(Request(a, RecoveryAction::kReplace, true), rid);

  agents_.SetRunOutput("7.0 7.1\n");
  Pass(1);
  // Marked in Slurm as HyperPod does, its steps cancelled (the node is dead), terminated.
  EXPECT_TRUE(
      RanCommand("scontrol update nodename=" + a.hostname + " state=fail reason=Action:Replace"))
      << ::testing::PrintToString(Commands());
  EXPECT_TRUE(RanCommand("bash -c"));
  agents_.SetRunOutput("");
  EXPECT_TRUE(Terminated(a.instance_id));
  store::RecoveryRecord r = Recovery(rid);
  ASSERT_FALSE(r.replacement_id.empty());
  EXPECT_EQ(r.phase, "Launched");
  std::optional<NodeRecord> b = Node(r.replacement_id);
  ASSERT_TRUE(b.has_value());
  EXPECT_FALSE(Node(a.instance_id).has_value());
  EXPECT_EQ(b->hostname, a.hostname);
  EXPECT_EQ(b->private_ip, a.private_ip);
  EXPECT_EQ(b->ordinal, a.ordinal);
  // The logical node survives: NodeLogicalId names it, InstanceId the machine.
  EXPECT_FALSE(a.logical_id.empty());
  EXPECT_EQ(b->logical_id, a.logical_id);
  EXPECT_NE(b->instance_id, a.instance_id);
  EXPECT_EQ(NodesOf("w").size(), 2u);  // the group's count never changed
  Pass(1);
  b = Node(r.replacement_id);
  EXPECT_TRUE(b->launched);
  EXPECT_EQ(b->private_ip, a.private_ip);  // the provider kept the address

  // The old slurmd's row (registered before the launch) does not count.
  store::AgentRecord agent;
  ASSERT_TRUE(h_.store_
                  ->Write([&](store::WriteTx& tx) -> Status {
                    agent.instance_id = b->instance_id;
                    agent.cluster_id = id_;
                    agent.lifecycle_state = "Succeeded";
                    return tx.PutAgent(agent);
                  })
                  .ok());
  Pass(1);
  agents_.Ack(b->instance_id);
  agents_.SetNode(b->hostname, "IDLE+FAIL", "Action:Replace", SlurmTime(b->launch_time - 60));
  Pass();
  EXPECT_EQ(Node(b->instance_id)->status, "Pending");
  EXPECT_FALSE(RanCommand("scontrol update nodename=" + a.hostname + " state=resume"));
  // Nor does the old slurmd's start time when it falls in the launch's second.
  agents_.SetNode(b->hostname, "IDLE", "", SlurmTime(a.launch_time + 1));
  Pass();
  EXPECT_FALSE(RanCommand("scontrol update nodename=" + a.hostname + " state=resume"));

  agents_.SetNode(b->hostname, "IDLE+FAIL", "Action:Replace", SlurmTime(b->launch_time + 1));
  Pass();
  EXPECT_EQ(Node(b->instance_id)->status, "Running");
  EXPECT_TRUE(RanCommand("scontrol update nodename=" + a.hostname + " state=resume"));
  // Done only once the controller's table shows the mark gone (a table from
  // before the resume would read as a new Action:Replace request).
  EXPECT_EQ(Recovery(rid).status, "InProgress");
  agents_.SetNode(b->hostname, "IDLE", "", SlurmTime(b->launch_time + 1));
  Pass();
  r = Recovery(rid);
  EXPECT_EQ(r.status, "Succeeded") << r.message;
  EXPECT_EQ(Steps(rid),
            (std::vector<std::string>{"Detected", "Marked", "StepsCancelled", "Terminated",
                                      "Launched", "LifecycleDone", "SlurmdRegistered", "Resumed"}));
  // The controller never got a new configuration: slurmctld was not restarted.
  for (const auto& m : agents_.Sent(ctl.instance_id)) {
    EXPECT_EQ(m["conf_hash"], agents_.Sent(ctl.instance_id).front()["conf_hash"]);
  }
  EXPECT_EQ(ClusterStatus(), "InService");
}

TEST_F(RecoveryTest, ALiveNodeIsReplacedOnlyAfterItsJobsLeft) {
  SlurmClusterInService();
  NodeRecord a = NodesOf("w").at(0);
  std::string rid = Request(a, RecoveryAction::kReplace, /*dead=*/false);
  Pass(1);
  EXPECT_EQ(Recovery(rid).phase, "Marked");
  // FAILING while a job runs: nothing is terminated.
  agents_.SetNode(a.hostname, "ALLOCATED+FAIL", "Action:Replace");
  Pass();
  EXPECT_FALSE(Terminated(a.instance_id));
  EXPECT_EQ(Recovery(rid).phase, "Marked");
  EXPECT_FALSE(RanCommand("bash -c"));  // no steps cancelled on a live node
  agents_.SetNode(a.hostname, "IDLE+FAIL", "Action:Replace");
  Pass(1);
  EXPECT_TRUE(Terminated(a.instance_id));
  EXPECT_EQ(Steps(rid)[2], "Drained");
}

// An auto-resume job waits for the node while the node would wait for the job:
// its steps on the marked node are cancelled instead, and the node is replaced
// while the job keeps its allocation.
TEST_F(RecoveryTest, AnAutoResumeJobsStepsAreCancelledInsteadOfWaitedFor) {
  SlurmClusterInService();
  NodeRecord a = NodesOf("w").at(0);
  JobService jobs(*h_.store_, h_.clock_);
  ASSERT_EQ(jobs.Answer(id_, {{"op", "job_event"}, {"job_id", "42"}, {"event", "started"}}),
            json({{"ok", true}}));
  std::string rid = Request(a, RecoveryAction::kReplace, /*dead=*/false);
  Pass(1);
  agents_.SetNode(a.hostname, "ALLOCATED+FAIL", "Action:Replace");
  agents_.SetRunOutput("42\n");  // squeue: job 42 on the node; then the step ids
  Pass(1);
  EXPECT_TRUE(RanCommand("squeue -h -w " + a.hostname + " -o %A"));
  EXPECT_TRUE(RanCommand("bash -c"));
  EXPECT_EQ(Steps(rid)[2], "StepsCancelled");
  EXPECT_FALSE(RanCommand("scontrol requeue"));  // its batch script runs elsewhere
  Pass();
  EXPECT_TRUE(Terminated(a.instance_id));
  // A finished supervisor is no longer waited on by its node... nor does it wait.
  ASSERT_EQ(jobs.Answer(id_, {{"op", "job_event"}, {"job_id", "42"}, {"event", "finished"}}),
            json({{"ok", true}}));
  bool supervised = true;
  ASSERT_TRUE(h_.store_
                  ->Read([&](store::ReadTx& tx) -> Status {
                    supervised = JobIsSupervised(tx, id_, "42");
                    return OkStatus();
                  })
                  .ok());
  EXPECT_FALSE(supervised);
}

// A dead node's steps are cancelled (never its batch/extern steps); of the jobs
// whose batch script ran there, the auto-resume ones are requeued at once, any
// other is left to Slurm, as on HyperPod.
TEST_F(RecoveryTest, ADeadBatchHostRequeuesOnlyItsAutoResumeJobs) {
  SlurmClusterInService();
  NodeRecord a = NodesOf("w").at(0);
  JobService jobs(*h_.store_, h_.clock_);
  ASSERT_EQ(jobs.Answer(id_, {{"op", "job_event"}, {"job_id", "43"}, {"event", "started"}}),
            json({{"ok", true}}));
  agents_.SetRunOutput("43 " + a.hostname + "\n44 " + a.hostname + "\n");
  std::string rid = Request(a, RecoveryAction::kReplace, /*dead=*/true);
  Pass(2);
  EXPECT_EQ(Steps(rid)[2], "StepsCancelled");
  bool batch_filtered = false;
  for (const auto& c : Commands()) {
    batch_filtered |=
        c.rfind("bash -c", 0) == 0 && c.find("grep -v -e batch -e extern") != std::string::npos;
  }
  EXPECT_TRUE(batch_filtered);
  EXPECT_TRUE(RanCommand("scontrol requeue 43"));
  EXPECT_FALSE(RanCommand("scontrol requeue 44"));  // not an auto-resume job
}

// A live batch host (a graceful Replace: an update, a user's mark): its job is
// requeued, and the node goes only once Slurm ended the job on it, or after
// kSettleSeconds; sooner, slurmctld's retried termination of the job would hit
// the replacement, which has the node's name, and kill the job's next run.
TEST_F(RecoveryTest, ALiveBatchHostWaitsForItsRequeuedJobToEnd) {
  SlurmClusterInService();
  NodeRecord a = NodesOf("w").at(0);
  JobService jobs(*h_.store_, h_.clock_);
  ASSERT_EQ(jobs.Answer(id_, {{"op", "job_event"}, {"job_id", "45"}, {"event", "started"}}),
            json({{"ok", true}}));
  std::string rid = Request(a, RecoveryAction::kReplace, /*dead=*/false);
  Pass(1);
  agents_.SetNode(a.hostname, "ALLOCATED+FAIL", "Action:Replace");
  agents_.SetRunOutput("45 " + a.hostname + "\n");  // every squeue: the job, still here
  Pass(1);
  EXPECT_TRUE(RanCommand("scontrol requeue 45"));
  Pass(3);
  EXPECT_TRUE(RanCommand("squeue -h -t CG -w " + a.hostname));
  EXPECT_FALSE(Terminated(a.instance_id)) << "the requeued job still ends on the node";
  agents_.SetRunOutput("");  // Slurm ended it there
  Pass();
  EXPECT_TRUE(Terminated(a.instance_id));
  auto steps = Steps(rid);
  EXPECT_NE(std::find(steps.begin(), steps.end(), "Settled"), steps.end());

  // Bounded: a job that never ends on the node holds it kSettleSeconds at most.
  NodeRecord b = NodesOf("w").at(1);
  ASSERT_EQ(jobs.Answer(id_, {{"op", "job_event"}, {"job_id", "46"}, {"event", "started"}}),
            json({{"ok", true}}));
  std::string second = Request(b, RecoveryAction::kReplace, /*dead=*/false);
  Pass(1);
  agents_.SetNode(b.hostname, "ALLOCATED+FAIL", "Action:Replace");
  agents_.SetRunOutput("46 " + b.hostname + "\n");
  Pass(2);
  EXPECT_FALSE(Terminated(b.instance_id));
  h_.clock_.AdvanceTime(std::chrono::seconds(31));
  Pass(2);
  EXPECT_TRUE(Terminated(b.instance_id));
  EXPECT_NE(Recovery(second).status, "Failed");
}

TEST_F(RecoveryTest, ANodeRemovedMeanwhileIsNotReplaced) {
  SlurmClusterInService();
  NodeRecord a = NodesOf("w").at(0);
  std::string rid = Request(a, RecoveryAction::kReplace, /*dead=*/false);
  Pass(1);  // marked; waits for the FAIL mark and the jobs
  ASSERT_EQ(Recovery(rid).phase, "Marked");
  // BatchDeleteClusterNodes meanwhile: the user's decision wins.
  ASSERT_TRUE(
      h_.Call("BatchDeleteClusterNodes", {{"ClusterName", "demo"}, {"NodeIds", {a.instance_id}}})
          .ok());
  agents_.SetNode(a.hostname, "IDLE+FAIL", "Action:Replace");
  Pass();
  store::RecoveryRecord r = Recovery(rid);
  EXPECT_EQ(r.status, "Cancelled") << r.message;
  EXPECT_TRUE(r.replacement_id.empty());
  // Scaled down, not replaced: no new row, and the old one is on its way out.
  std::vector<NodeRecord> rows = NodesOf("w");
  EXPECT_EQ(rows.size(), 2u);
  ASSERT_TRUE(Node(a.instance_id).has_value());
  EXPECT_TRUE(Node(a.instance_id)->remove);
}

TEST_F(RecoveryTest, AMarkClearedWhileWaitingIsSetAgain) {
  SlurmClusterInService();
  NodeRecord a = NodesOf("w").at(0);
  std::string rid = Request(a, RecoveryAction::kReplace, /*dead=*/false);
  Pass(1);
  ASSERT_EQ(Recovery(rid).phase, "Marked");
  size_t marks = 0;
  auto count = [&] {
    size_t n = 0;
    for (const auto& c : Commands())
      n += c.find("state=fail reason=Action:Replace") != std::string::npos;
    return n;
  };
  marks = count();
  // A user resumed the node before its jobs ended: the table shows no mark.
  agents_.SetNode(a.hostname, "ALLOCATED", "");
  h_.clock_.AdvanceTime(std::chrono::seconds(6));
  Pass(1);
  EXPECT_GT(count(), marks);
  EXPECT_EQ(Recovery(rid).status, "InProgress");
}

TEST_F(RecoveryTest, NodeRecoveryNoneOnlyMarks) {
  SlurmClusterInService();
  SetNodeRecovery("None");
  NodeRecord a = NodesOf("w").at(0);
  std::string rid = Request(a, RecoveryAction::kReplace, true);
  Pass();
  store::RecoveryRecord r = Recovery(rid);
  EXPECT_EQ(r.status, "Reported");
  EXPECT_FALSE(r.automatic);
  EXPECT_TRUE(RanCommand("scontrol update nodename=" + a.hostname + " state=fail"));
  EXPECT_FALSE(Terminated(a.instance_id));
  EXPECT_TRUE(Node(a.instance_id).has_value());
}

TEST_F(RecoveryTest, ARestartAtEveryStepFinishesTheRecoveryOnce) {
  SlurmClusterInService();
  NodeRecord a = NodesOf("w").at(0);
  std::string rid = Request(a, RecoveryAction::kReplace, true);
  // A new reconciler (hpodd restarted) before every pass.
  for (int i = 0; i < 6; ++i) {
    h_.reconciler_ = std::make_unique<ClusterReconciler>(*h_.store_, &provider_, h_.clock_,
                                                         h_.options_, nullptr, &agents_);
    Pass(1);
  }
  store::RecoveryRecord r = Recovery(rid);
  ASSERT_FALSE(r.replacement_id.empty());
  NodeRecord b = *Node(r.replacement_id);
  ReplacementUp(b);
  for (int i = 0; i < 4; ++i) {
    h_.reconciler_ = std::make_unique<ClusterReconciler>(*h_.store_, &provider_, h_.clock_,
                                                         h_.options_, nullptr, &agents_);
    Pass(1);
  }
  EXPECT_EQ(Recovery(rid).status, "Succeeded");
  int launches = 0, terminates = 0;
  for (const auto& act : h_.provider_->actions()) {
    launches += act.verb == "Launch" && act.instance_id != a.instance_id &&
                act.instance_id == b.instance_id;
    terminates += act.verb == "Terminate";
  }
  EXPECT_GE(launches, 1);
  EXPECT_EQ(NodesOf("w").size(), 2u);  // no duplicated, no orphaned node
  std::set<std::string> ids;
  for (const auto& n : Nodes()) ids.insert(n.instance_id);
  EXPECT_FALSE(ids.count(a.instance_id));
  EXPECT_TRUE(ids.count(b.instance_id));
  int recoveries = 0;
  ASSERT_TRUE(h_.store_
                  ->Read([&](store::ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(auto all, tx.ListRecoveries(id_));
                    recoveries = static_cast<int>(all.size());
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(recoveries, 1);
}

// Workers whose clocks are off hpodd's (issue 25): whether Slurm's row is the new
// slurmd's is judged on the worker's clock alone (the agent's slurmd_started
// against SlurmdStartTime), never against hpodd's launch time.
class RecoverySkewTest : public RecoveryTest, public ::testing::WithParamInterface<int> {
 protected:
  // The workers' clock: hpodd's plus the skew.
  double WorkerNow() { return h_.clock_.NowEpochSeconds() + GetParam(); }
  void Advance(int s) { h_.clock_.AdvanceTime(std::chrono::seconds(s)); }
  bool Resumed(const NodeRecord& n) {
    return RanCommand("scontrol update nodename=" + n.hostname + " state=resume");
  }
  void AgentUp(const std::string& instance_id) {
    ASSERT_TRUE(h_.store_
                    ->Write([&](store::WriteTx& tx) -> Status {
                      store::AgentRecord a;
                      a.instance_id = instance_id;
                      a.cluster_id = id_;
                      a.lifecycle_state = "Succeeded";
                      return tx.PutAgent(a);
                    })
                    .ok());
  }
};

TEST_P(RecoverySkewTest, AReplacementsSlurmdIsToldFromTheOldOnesRowOnTheWorkersClock) {
  SlurmClusterInService();
  NodeRecord a = NodesOf("w").at(0);
  // a's agent started its slurmd, which registered a second later (a's clock).
  agents_.Ack(a.instance_id, "running", WorkerNow());
  const std::string old_row = SlurmTime(WorkerNow() + 1);
  agents_.SetNode(a.hostname, "IDLE", "", old_row);
  Advance(30);
  std::string rid = Request(a, RecoveryAction::kReplace, /*dead=*/true);
  Pass(1);  // marked (the old row's start recorded), steps cancelled, terminated
  EXPECT_EQ(Recovery(rid).stale_slurmd_start, old_row);
  agents_.SetNode(a.hostname, "IDLE+FAIL", "Action:Replace", old_row);
  const std::string b_id = Recovery(rid).replacement_id;
  ASSERT_FALSE(b_id.empty());
  Pass(1);  // launched
  Advance(20);
  AgentUp(b_id);
  Pass(1);  // b gets its role
  // ... with the old row's start, which its slurmd must not show.
  bool told = false;
  for (const json& m : agents_.Sent(b_id)) {
    if (m.value("type", "") == "slurm") told = m.value("avoid_start_time", "") == old_row;
  }
  EXPECT_TRUE(told) << "the replacement's slurm message lacks avoid_start_time " << old_row;
  // b's agent runs its slurmd; Slurm still shows the old one's row.
  agents_.Ack(b_id, "running", WorkerNow());
  Pass();
  EXPECT_EQ(Node(b_id)->status, "Pending");
  EXPECT_FALSE(Resumed(a)) << "the old slurmd's row was taken for the new one's";
  Advance(1);
  agents_.SetNode(a.hostname, "IDLE+FAIL", "Action:Replace", SlurmTime(WorkerNow()));
  Pass();
  EXPECT_EQ(Node(b_id)->status, "Running");
  EXPECT_TRUE(Resumed(a)) << "the new slurmd's row was not recognized";
  agents_.SetNode(a.hostname, "IDLE", "", SlurmTime(WorkerNow()));
  Pass();
  store::RecoveryRecord r = Recovery(rid);
  EXPECT_EQ(r.status, "Succeeded") << r.message;
  EXPECT_EQ(Steps(rid),
            (std::vector<std::string>{"Detected", "Marked", "StepsCancelled", "Terminated",
                                      "Launched", "LifecycleDone", "SlurmdRegistered", "Resumed"}));
}

TEST_P(RecoverySkewTest, ARebootedNodesSlurmdIsToldFromTheOldOnesRowOnItsClock) {
  SlurmClusterInService();
  NodeRecord a = NodesOf("w").at(1);
  agents_.Ack(a.instance_id, "running", WorkerNow());
  const std::string old_row = SlurmTime(WorkerNow() + 1);
  agents_.SetNode(a.hostname, "IDLE", "", old_row);
  Advance(30);
  std::string rid = Request(a, RecoveryAction::kReboot, /*dead=*/true);
  Pass(1);
  agents_.SetNode(a.hostname, "IDLE+FAIL", "Action:Reboot", old_row);
  // The agent from before the reboot still speaks for the node (its channel has
  // not closed yet), and so does Slurm's row of its slurmd: neither is new.
  Pass();
  EXPECT_EQ(Node(a.instance_id)->status, "Pending");
  EXPECT_FALSE(Resumed(a));
  // Back: its new agent starts a new slurmd, whose row follows.
  Advance(20);
  agents_.Ack(a.instance_id, "running", WorkerNow());
  Pass();
  EXPECT_EQ(Node(a.instance_id)->status, "Pending");
  Advance(1);
  agents_.SetNode(a.hostname, "IDLE+FAIL", "Action:Reboot", SlurmTime(WorkerNow()));
  Pass();
  EXPECT_EQ(Node(a.instance_id)->status, "Running");
  EXPECT_TRUE(Resumed(a));
  agents_.SetNode(a.hostname, "IDLE", "", SlurmTime(WorkerNow()));
  Pass();
  EXPECT_EQ(Recovery(rid).status, "Succeeded") << Recovery(rid).message;
}

INSTANTIATE_TEST_SUITE_P(WorkerClock, RecoverySkewTest, ::testing::Values(90, -90),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param > 0 ? std::string("Ahead90s")
                                                 : std::string("Behind90s");
                         });

}  // namespace
}  // namespace hpod::controlplane::slurm_testing
