// The node's systemctl (units.h) over SlurmNode's fake daemons: what runs
// before the lifecycle scripts succeeded, under hpodd's hold, and after a
// systemctl stop or start.

#include <algorithm>
#include <csignal>
#include <mutex>

#include "hpod/agent/slurm_node.h"
#include "hpod/agent/slurm_node_test_fixture.h"

namespace hpod::agent {
namespace {

using namespace slurm_node_testing;  // NOLINT: the fixture's helpers

UnitRequest Request(UnitVerb verb, std::vector<std::string> units, bool now = false) {
  UnitRequest r;
  r.verb = verb;
  r.units = std::move(units);
  r.now = now;
  r.wait_ms = 10000;
  return r;
}

UnitState One(const StatusOr<std::vector<UnitState>>& units) {
  EXPECT_TRUE(units.ok()) << units.status().ToString();
  EXPECT_EQ(units.ok() ? units->size() : 0u, 1u);
  return units.ok() && units->size() == 1 ? units->front() : UnitState{};
}

TEST_F(SlurmNodeTest, BeforeTheScriptsSucceededOnlySystemctlStartsSlurm) {
  Start(/*auto_start=*/false);
  node_->Apply(Spec("compute", "h1"));
  ASSERT_TRUE(WaitForDaemon("held", "h1")) << node_->State().ToJson().dump();
  // munged runs (as on HyperPod's AMI); slurmd waits.
  ASSERT_TRUE(WaitFor([&] { return Count("munged.argv") == 1; }));
  UnitState slurmd = One(node_->ControlUnits(Request(UnitVerb::kQuery, {"slurmd"})));
  EXPECT_EQ(slurmd.active, "inactive");
  EXPECT_NE(slurmd.message.find("lifecycle scripts succeeded"), std::string::npos)
      << slurmd.message;
  EXPECT_TRUE(WaitFor([&] {
    return One(node_->ControlUnits(Request(UnitVerb::kQuery, {"munge"}))).active == "active";
  }));
  EXPECT_FALSE(fs::exists(rec_ + "/slurmd.argv"));

  // The script's `systemctl enable --now slurmd`: active when it returns.
  slurmd = One(node_->ControlUnits(Request(UnitVerb::kEnable, {"slurmd"}, /*now=*/true)));
  EXPECT_EQ(slurmd.active, "active");
  EXPECT_GT(slurmd.pid, 0);
  ASSERT_TRUE(WaitFor([&] { return Count("slurmd.argv") == 1; }));
  EXPECT_EQ(node_->State().daemon, "running");

  // The scripts succeed: hpod's start is the same daemon, not a second one.
  node_->SetAutoStart(true);
  UnitState after = One(node_->ControlUnits(Request(UnitVerb::kQuery, {"slurmd"})));
  EXPECT_EQ(after.pid, slurmd.pid);
  EXPECT_EQ(Count("slurmd.argv"), 1u);
}

TEST_F(SlurmNodeTest, AHeldSpecRunsNoSlurmdUntilReleased) {
  Start();
  SlurmSpec spec = Spec("compute", "h1");
  spec.hold = true;
  node_->Apply(spec);
  ASSERT_TRUE(WaitForDaemon("held", "h1"));
  EXPECT_TRUE(node_->State().held);
  EXPECT_NE(One(node_->ControlUnits(Request(UnitVerb::kQuery, {"slurmd"}))).message.find("held"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(rec_ + "/slurmd.argv"));
  spec.hold = false;
  node_->Apply(spec);
  ASSERT_TRUE(WaitForDaemon("running", "h1"));
  EXPECT_FALSE(node_->State().held);
  ASSERT_TRUE(WaitFor([&] { return Count("slurmd.argv") == 1; }));
}

TEST_F(SlurmNodeTest, ASystemctlStopIsNotUndoneUntilAStart) {
  Start();
  node_->Apply(Spec("compute", "h1"));
  ASSERT_TRUE(WaitForDaemon("running", "h1"));
  ASSERT_TRUE(WaitFor([&] { return PidOf("slurmd") > 0; }));
  const int first = PidOf("slurmd");

  EXPECT_FALSE(One(node_->ControlUnits(Request(UnitVerb::kQuery, {"slurmd"}))).stopped);
  UnitState stopped = One(node_->ControlUnits(Request(UnitVerb::kStop, {"slurmd"})));
  EXPECT_EQ(stopped.active, "inactive");
  EXPECT_TRUE(stopped.stopped) << "what a pool host's unit ends on (systemd_unit.h)";
  EXPECT_EQ(stopped.pid, 0);
  EXPECT_NE(stopped.message.find("stopped by systemctl"), std::string::npos);
  EXPECT_NE(::kill(first, 0), 0) << "slurmd still runs";
  ASSERT_TRUE(WaitForDaemon("held", "h1"));
  // Several supervision passes later it is still down (a crash would have been
  // restarted after 50 ms).
  for (int i = 0; i < 3; ++i) node_->ControlUnits(Request(UnitVerb::kQuery, {}));
  EXPECT_EQ(Count("slurmd.argv"), 1u);

  UnitState restarted = One(node_->ControlUnits(Request(UnitVerb::kRestart, {"slurmd"})));
  EXPECT_EQ(restarted.active, "active");
  ASSERT_TRUE(WaitFor([&] { return Count("slurmd.argv") == 2; }));
  UnitState again = One(node_->ControlUnits(Request(UnitVerb::kRestart, {"slurmd"})));
  EXPECT_NE(again.pid, restarted.pid);
  ASSERT_TRUE(WaitFor([&] { return Count("slurmd.argv") == 3; }));
  EXPECT_EQ(node_->State().restarts, 0) << "a restart asked for is no crash";
}

TEST_F(SlurmNodeTest, AStartOfAUnitTheRoleDoesNotRunSaysWhy) {
  Start();
  node_->Apply(Spec("controller", "h1"));
  ASSERT_TRUE(WaitForDaemon("running", "h1"));
  auto r = node_->ControlUnits(Request(UnitVerb::kStart, {"slurmd"}));
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("controller"), std::string::npos) << r.status().message();
  r = node_->ControlUnits(Request(UnitVerb::kStart, {"slurmdbd"}));
  EXPECT_NE(r.status().message().find("without accounting"), std::string::npos)
      << r.status().message();
  // A stop of it is a no-op, as systemd's of an inactive unit.
  EXPECT_EQ(One(node_->ControlUnits(Request(UnitVerb::kStop, {"slurmd"}))).active, "inactive");
  // Every unit is listed, each with the logs journalctl reads.
  auto all = node_->ControlUnits(Request(UnitVerb::kQuery, {}));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), std::size(kUnitNames));
  for (const UnitState& u : *all) {
    if (u.name == "slurmctld") {
      EXPECT_EQ(u.active, "active");
      EXPECT_EQ(u.logs.front(), options_.log_dir + "/slurm/slurmctld.log");
    }
  }
  // disable/enable are remembered and reported.
  EXPECT_FALSE(One(node_->ControlUnits(Request(UnitVerb::kDisable, {"slurmctld"}))).enabled);
  EXPECT_TRUE(One(node_->ControlUnits(Request(UnitVerb::kEnable, {"slurmctld"}))).enabled);
}

TEST_F(SlurmNodeTest, AStartBeforeTheRoleArrivesWaitsForIt) {
  Start(/*auto_start=*/false);
  UnitRequest r = Request(UnitVerb::kStart, {"slurmd"});
  r.wait_ms = 50;
  UnitState pending = One(node_->ControlUnits(r));
  EXPECT_EQ(pending.active, "activating");
  EXPECT_NE(pending.message.find("waiting for hpodd"), std::string::npos);
  EXPECT_FALSE(node_->WaitForRole(std::chrono::milliseconds(10)));
  node_->Apply(Spec("compute", "h1"));
  EXPECT_TRUE(node_->WaitForRole(std::chrono::seconds(10)));
  // The start stands: slurmd runs though the scripts have not succeeded.
  ASSERT_TRUE(WaitForDaemon("running", "h1"));
  ASSERT_TRUE(WaitFor([&] { return Count("slurmd.argv") == 1; }));
}

TEST_F(SlurmNodeTest, AQueryWithoutAWaitAnswersWhatTheLastPassPublished) {
  Start();
  UnitRequest q = Request(UnitVerb::kQuery, {"slurmd"});
  q.wait_ms = 0;
  // Before any pass: the unit by name, nothing known of it yet.
  UnitState before = One(node_->ControlUnits(q));
  EXPECT_EQ(before.name, "slurmd");
  EXPECT_EQ(before.active, "inactive");
  node_->Apply(Spec("compute", "h1"));
  ASSERT_TRUE(WaitForDaemon("running", "h1"));
  ASSERT_TRUE(WaitFor([&] { return PidOf("slurmd") > 0; }));
  ASSERT_TRUE(WaitFor([&] {
    UnitState now = One(node_->ControlUnits(q));
    return now.active == "active" && now.pid == PidOf("slurmd");
  }));
}

TEST_F(SlurmNodeTest, AReloadSendsTheRunningDaemonSighupAndRestartsNothing) {
  // A slurmd that records each SIGHUP (the units' ExecReload) and keeps running.
  WriteTestFile(tmp_ / "bin/slurmd",
                "#!/bin/bash\n"
                "trap 'echo hup >> " +
                    rec_ + "/slurmd.hup' HUP\n" + "echo $$ > " + rec_ + "/slurmd.pid.tmp && mv " +
                    rec_ + "/slurmd.pid.tmp " + rec_ +
                    "/slurmd.pid\n"
                    "while true; do sleep 0.05; done\n",
                0755);
  Start();
  node_->Apply(Spec("compute", "h1"));
  ASSERT_TRUE(WaitForDaemon("running", "h1"));
  ASSERT_TRUE(WaitFor([&] { return PidOf("slurmd") > 0; }));
  const int pid = PidOf("slurmd");
  UnitState reloaded = One(node_->ControlUnits(Request(UnitVerb::kReload, {"slurmd"})));
  EXPECT_EQ(reloaded.active, "active");
  ASSERT_TRUE(WaitFor([&] { return Count("slurmd.hup") == 1; }));
  EXPECT_EQ(PidOf("slurmd"), pid);
  EXPECT_EQ(::kill(pid, 0), 0) << "the daemon runs on";
  EXPECT_EQ(node_->State().restarts, 0);
  // A stopped unit has nothing to reload: systemd fails that reload too.
  One(node_->ControlUnits(Request(UnitVerb::kStop, {"slurmd"})));
  auto refused = node_->ControlUnits(Request(UnitVerb::kReload, {"slurmd"}));
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(), "Unit slurmd.service is not active, cannot reload.");
  EXPECT_EQ(Count("slurmd.hup"), 1u);
}

TEST_F(SlurmNodeTest, EachTimeAUnitBecomesActiveTheCallbackHearsOfItButNotAfterAStop) {
  std::mutex mu;
  std::vector<std::string> heard;
  options_.on_unit_active = [&](const std::string& unit) {
    std::lock_guard<std::mutex> lock(mu);
    heard.push_back(unit);
  };
  auto times = [&](const std::string& unit) {
    std::lock_guard<std::mutex> lock(mu);
    return std::count(heard.begin(), heard.end(), unit);
  };
  Start();
  node_->Apply(Spec("compute", "h1"));
  ASSERT_TRUE(WaitForDaemon("running", "h1"));
  ASSERT_TRUE(WaitFor([&] { return times("slurmd") == 1 && times("munge") == 1; }));
  // hpod restarts a slurmd that died: active again, heard again.
  ASSERT_TRUE(WaitFor([&] { return PidOf("slurmd") > 0; }));
  ::kill(PidOf("slurmd"), SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return times("slurmd") == 2; }));
  One(node_->ControlUnits(Request(UnitVerb::kStop, {"slurmd"})));
  for (int i = 0; i < 3; ++i) node_->ControlUnits(Request(UnitVerb::kQuery, {}));
  EXPECT_EQ(times("slurmd"), 2);
  One(node_->ControlUnits(Request(UnitVerb::kStart, {"slurmd"})));
  ASSERT_TRUE(WaitFor([&] { return times("slurmd") == 3; }));
  EXPECT_EQ(times("munge"), 1);
  EXPECT_EQ(times("slurmctld"), 0);
}

}  // namespace
}  // namespace hpod::agent
