#include "hpod/slurm/spank/environment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "hpod/slurm/spank/options.h"

namespace hpod::spank {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(DecideLocal, SupervisesInsideAnAllocationOnly) {
  EXPECT_EQ(DecideLocal(1, true, Env({{"SLURM_JOB_ID", "12"}})).decision,
            LocalDecision::kSupervise);
  EXPECT_EQ(DecideLocal(0, true, Env({{"SLURM_JOB_ID", "12"}})).decision, LocalDecision::kRunOnce);
  EXPECT_EQ(DecideLocal(0, false, Env({{"SLURM_JOB_ID", "12"}})).decision, LocalDecision::kRunOnce);
  LocalChoice outside = DecideLocal(2, true, Env({}));
  EXPECT_EQ(outside.decision, LocalDecision::kNoAllocation);
  EXPECT_EQ(outside.line,
            "[Auto Resume] Error: --auto-resume needs an allocation (sbatch or salloc "
            "--exclusive); running the step once without it");
}

TEST(DecideLocal, AChildSrunOfASupervisorRunsOnce) {
  LocalChoice c = DecideLocal(1, true, Env({{"SLURM_JOB_ID", "12"}, {kAttemptEnv, "0"}}));
  EXPECT_EQ(c.decision, LocalDecision::kRunOnce);
  EXPECT_TRUE(c.line.empty());
}

TEST(DecideLocal, ReadsTheValueSbatchPropagatedWhenTheCallbackDidNotRun) {
  LocalChoice c = DecideLocal(0, false, Env({{"SLURM_JOB_ID", "12"}, {kPropagatedOptionEnv, "3"}}));
  EXPECT_EQ(c.decision, LocalDecision::kSupervise);
  EXPECT_EQ(c.retries, 3);
  // The command line wins over the job's value: the callback saw it last.
  EXPECT_EQ(
      DecideLocal(0, true, Env({{"SLURM_JOB_ID", "12"}, {kPropagatedOptionEnv, "3"}})).decision,
      LocalDecision::kRunOnce);
  LocalChoice bad =
      DecideLocal(0, false, Env({{"SLURM_JOB_ID", "12"}, {kPropagatedOptionEnv, "x"}}));
  EXPECT_EQ(bad.decision, LocalDecision::kRunOnce);
  EXPECT_THAT(bad.line, HasSubstr("--auto-resume=x"));
}

TEST(SetupFromEnv, ReadsTheJobAndPutsTheLedgerInTheSubmitDir) {
  SupervisorSetup s = SetupFromEnv(2, Env({{"SLURM_JOB_ID", "12"},
                                           {"SLURM_JOB_NODELIST", "ip-10-77-0-[11-12]"},
                                           {"SLURM_RESTART_COUNT", "1"},
                                           {"SLURM_SUBMIT_DIR", "/home/u/run"}}));
  EXPECT_EQ(s.config.job_id, "12");
  EXPECT_EQ(s.config.max_attempts, 2);
  EXPECT_EQ(s.config.restart, 1);
  EXPECT_THAT(s.config.nodes, ElementsAre("ip-10-77-0-11", "ip-10-77-0-12"));
  EXPECT_EQ(s.config.grace, std::chrono::seconds(10));
  EXPECT_EQ(s.config.recovery_timeout, std::chrono::seconds(900));
  EXPECT_EQ(s.agent_socket, "/run/hpod-agent/agent.sock");
  EXPECT_EQ(s.ledger_dir, "/home/u/run/.hpod");
  EXPECT_EQ(s.config.ledger_path, "/home/u/run/.hpod/goodput-12.jsonl");
  EXPECT_THAT(s.runner.env, ElementsAre(std::pair<std::string, std::string>(
                                kGoodputFileEnv, "/home/u/run/.hpod/goodput-12.jsonl")));
  EXPECT_TRUE(s.warnings.empty());
}

TEST(SetupFromEnv, KeepsTheUsersLedgerAndOverrides) {
  SupervisorSetup s = SetupFromEnv(1, Env({{"SLURM_JOB_ID", "12"},
                                           {kGoodputFileEnv, "/data/ledger.jsonl"},
                                           {kAgentSocketEnv, "/tmp/a.sock"},
                                           {kGraceEnv, "0"},
                                           {kTimeoutEnv, "60"}}));
  EXPECT_EQ(s.config.ledger_path, "/data/ledger.jsonl");
  EXPECT_TRUE(s.ledger_dir.empty());
  EXPECT_TRUE(s.runner.env.empty());
  EXPECT_EQ(s.agent_socket, "/tmp/a.sock");
  EXPECT_EQ(s.config.grace, std::chrono::seconds(0));
  EXPECT_EQ(s.config.recovery_timeout, std::chrono::seconds(60));
}

TEST(SetupFromEnv, BadValuesKeepDefaultsWithALine) {
  SupervisorSetup s = SetupFromEnv(
      1, Env({{"SLURM_JOB_ID", "12"}, {"SLURM_JOB_NODELIST", "n[1-"}, {kTimeoutEnv, "soon"}}));
  EXPECT_TRUE(s.config.nodes.empty());
  EXPECT_EQ(s.config.recovery_timeout, std::chrono::seconds(900));
  ASSERT_EQ(s.warnings.size(), 2u);
  EXPECT_THAT(s.warnings[0], HasSubstr("SLURM_JOB_NODELIST"));
  EXPECT_EQ(s.warnings[1],
            "[Auto Resume] Error: JobID: 12 HPOD_AUTO_RESUME_TIMEOUT_S=soon: expected whole "
            "seconds; using 900");
}

}  // namespace
}  // namespace hpod::spank
