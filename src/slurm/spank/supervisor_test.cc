#include "hpod/slurm/spank/supervisor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <deque>
#include <fstream>

#include "hpod/slurm/spank/spank_test_util.h"

namespace hpod::spank {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kNode[] = "ip-10-77-0-12";

// The fakes are used from the test's thread only.
// Answers job_health from a script; the last answer repeats.
class FakeAgent final : public AgentClient {
 public:
  std::string Address() const override { return "/run/hpod-agent/agent.sock"; }
  StatusOr<HealthAnswer> JobHealth(const HealthQuery& q) override {
    queries.push_back(q);
    StatusOr<HealthAnswer> a = answers.front();
    if (answers.size() > 1) answers.pop_front();
    return a;
  }
  Status Report(const JobEvent& e) override {
    events.push_back(e);
    return report_status;
  }
  std::vector<std::string> EventNames() const {
    std::vector<std::string> out;
    for (const auto& e : events) out.emplace_back(EventKindName(e.event));
    return out;
  }

  std::deque<StatusOr<HealthAnswer>> answers;
  Status report_status;
  std::vector<HealthQuery> queries;
  std::vector<JobEvent> events;
};

// Returns scripted results per attempt; each attempt takes `duration` of fake time.
class FakeRunner final : public StepRunner {
 public:
  explicit FakeRunner(FakeClock& clock) : clock_(clock) {}
  StatusOr<RunResult> Run(int attempt, const StepWatch& watch) override {
    attempts.push_back(attempt);
    watched.push_back(static_cast<bool>(watch));
    if (watch && watch_calls > 0) {
      // The step would run long; the watch is asked once per fake second.
      for (int i = 0; i < watch_calls; ++i) {
        clock_.AdvanceTime(std::chrono::seconds(1));
        if (watch()) {
          RunResult r;
          r.exit_code = 137;
          r.ended_by_watch = true;
          watch_calls = 0;
          return r;
        }
      }
    }
    clock_.AdvanceTime(duration);
    if (results.empty()) return UnavailableError("fork: out of processes");
    RunResult r = results.front();
    if (results.size() > 1) results.pop_front();
    return r;
  }
  std::deque<RunResult> results;
  std::vector<int> attempts;
  std::vector<bool> watched;
  int watch_calls = 0;  // > 0: ask the watch up to this many times in the next attempt
  std::chrono::seconds duration{30};

 private:
  FakeClock& clock_;
};

class FakeSleeper final : public Sleeper {
 public:
  explicit FakeSleeper(FakeClock& clock) : clock_(clock) {}
  void Sleep(std::chrono::milliseconds d) override {
    clock_.AdvanceTime(d);
    ++sleeps;
  }
  int sleeps = 0;

 private:
  FakeClock& clock_;
};

class FakeOutput final : public Output {
 public:
  void Line(std::string_view line) override { lines.emplace_back(line); }
  std::vector<std::string> lines;
};

HealthAnswer Answer(Verdict v, NodeState state = NodeState::kHealthy, std::string phase = "",
                    std::string status = "") {
  HealthAnswer a;
  a.verdict = v;
  if (state != NodeState::kHealthy) {
    a.nodes.push_back(NodeHealth{kNode, state, "r-abc", "Replace", phase, status});
  }
  a.nodes.push_back(NodeHealth{"ip-10-77-0-11", NodeState::kHealthy, "", "", "", ""});
  return a;
}
HealthAnswer Healthy() { return Answer(Verdict::kHealthy); }
HealthAnswer Recovering(std::string phase) {
  return Answer(Verdict::kRecovering, NodeState::kRecovering, std::move(phase), "InProgress");
}
HealthAnswer Recovered() {
  return Answer(Verdict::kRecovered, NodeState::kRecovered, "Resumed", "Succeeded");
}
HealthAnswer Failed() {
  HealthAnswer a = Answer(Verdict::kFailed, NodeState::kFailed, "Launching", "Failed");
  a.message = "no capacity for a replacement";
  return a;
}

RunResult Rc(int rc, std::string step = "0", int user_signal = 0) {
  return RunResult{rc, user_signal, std::move(step)};
}

class SuperviseTest : public ::testing::Test {
 protected:
  SuperviseTest() : runner_(clock_), sleeper_(clock_) {
    config_.job_id = "12";
    config_.max_attempts = 2;
    config_.nodes = {"ip-10-77-0-11", kNode};
    config_.poll_interval = std::chrono::seconds(1);  // round figures in the lines
  }
  int Run() { return Supervise(config_, agent_, runner_, clock_, sleeper_, out_); }
  std::string Info(std::string_view step, std::string_view text) {
    return FormatLine(Severity::kInfo, "12", step, text);
  }
  std::string Error(std::string_view step, std::string_view text) {
    return FormatLine(Severity::kError, "12", step, text);
  }
  int ErrorLines() const {
    int n = 0;
    for (const auto& l : out_.lines) n += l.rfind("[Auto Resume] Error: ", 0) == 0;
    return n;
  }

  FakeClock clock_;
  SupervisorConfig config_;
  FakeAgent agent_;
  FakeRunner runner_;
  FakeSleeper sleeper_;
  FakeOutput out_;
};

// (a)
TEST_F(SuperviseTest, NodeFailedRecoveringRecoveredRetriesOnceAndReturnsTheRetrysCode) {
  const double start = clock_.NowEpochSeconds();
  runner_.results = {Rc(137, "0"), Rc(0, "1")};
  agent_.answers = {Recovering("Launched"), Recovering("Registered"), Recovered(), Healthy()};
  EXPECT_EQ(Run(), 0);
  EXPECT_THAT(runner_.attempts, ElementsAre(0, 1));
  EXPECT_THAT(
      out_.lines,
      ElementsAre(
          Info("0", "Initiating communication with cluster agent to diagnose health of nodes"),
          Info("0", "Response from cluster agent: JobId=12, ResumeAction=RETRYSTEP"),
          Info("0", "Job failed - replacing nodes ip-10-77-0-12 (Replace, recovery r-abc)"),
          Info("0", "Node ip-10-77-0-12: Replace Registered (InProgress), recovery r-abc"),
          Info("0", "Node ip-10-77-0-12 recovered (r-abc, 2.0 s)"),
          Info("0", "Retrying step. Attempt number: 1"),
          Info("1", "Initiating communication with cluster agent to diagnose health of nodes"),
          Info("1", "Response from cluster agent: JobId=12, ResumeAction=NONE")));
  EXPECT_THAT(agent_.EventNames(),
              ElementsAre("started", "ended", "retrying", "started", "ended", "finished"));
  EXPECT_EQ(agent_.events[1].exit_code, 137);
  EXPECT_EQ(agent_.events[1].step_id, "0");
  EXPECT_THAT(agent_.events[2].recovery_ids, ElementsAre("r-abc"));
  EXPECT_EQ(agent_.events[3].attempt, 1);
  EXPECT_EQ(agent_.events[5].exit_code, 0);
  EXPECT_EQ(agent_.events[5].step_id, "1");
  EXPECT_THAT(agent_.events[5].recovery_ids, ElementsAre("r-abc"));
  ASSERT_EQ(agent_.queries.size(), 4u);
  EXPECT_EQ(agent_.queries[0].since, start - 1);
  EXPECT_EQ(agent_.queries[0].job_id, "12");
  EXPECT_THAT(agent_.queries[0].nodes, ElementsAre("ip-10-77-0-11", kNode));
  // The retry's question covers only its own attempt.
  EXPECT_GT(agent_.queries[3].since, start + 30);
}

TEST_F(SuperviseTest, TheWatchEndsARunningStepOnceANodeOfItIsRecovering) {
  // While attempt 0 runs, the agent says healthy twice, then recovering: the step
  // is ended at once, not left to srun's wait for the lost node.
  runner_.watch_calls = 100;
  runner_.results = {Rc(0, "1")};
  agent_.answers = {Healthy(),   Healthy(), Recovering("Launched"), Recovering("Launched"),
                    Recovered(), Healthy()};
  EXPECT_EQ(Run(), 0);
  EXPECT_THAT(runner_.attempts, ElementsAre(0, 1));
  EXPECT_THAT(runner_.watched, ElementsAre(true, true));
  ASSERT_GE(out_.lines.size(), 2u);
  EXPECT_EQ(out_.lines[0],
            Info("", "a node of the step failed and hpod is recovering it: ending the step now"));
  EXPECT_EQ(agent_.events[1].exit_code, 137);
  EXPECT_THAT(agent_.EventNames(),
              ElementsAre("started", "ended", "retrying", "started", "ended", "finished"));
  // Three watch questions, then the usual decision's, all about attempt 0.
  EXPECT_EQ(agent_.queries[0].since, agent_.queries[3].since);
}

TEST_F(SuperviseTest, WithoutTheWatchTheRunnerIsNotAsked) {
  config_.watch_running_step = false;
  runner_.results = {Rc(0)};
  agent_.answers = {Healthy()};
  EXPECT_EQ(Run(), 0);
  EXPECT_THAT(runner_.watched, ElementsAre(false));
}

// (b)
TEST_F(SuperviseTest, AnApplicationErrorOnHealthyNodesIsNotRetried) {
  runner_.results = {Rc(3)};
  agent_.answers = {Healthy()};
  EXPECT_EQ(Run(), 3);
  EXPECT_THAT(runner_.attempts, ElementsAre(0));
  EXPECT_THAT(out_.lines,
              Contains(Info("0", "Response from cluster agent: JobId=12, ResumeAction=NONE")));
  EXPECT_EQ(
      out_.lines.back(),
      Info("0", "step exited with 3 and every node is healthy: an application error, not retried"));
  // It asked again through the grace period, once a second, before deciding.
  EXPECT_EQ(sleeper_.sleeps, 10);
  EXPECT_EQ(agent_.queries.size(), 11u);
  EXPECT_THAT(agent_.EventNames(), ElementsAre("started", "ended", "finished"));
  EXPECT_EQ(agent_.events.back().exit_code, 3);
}

TEST_F(SuperviseTest, ASuccessOnHealthyNodesEndsAtOnce) {
  runner_.results = {Rc(0)};
  agent_.answers = {Healthy()};
  EXPECT_EQ(Run(), 0);
  EXPECT_EQ(sleeper_.sleeps, 0);
  EXPECT_EQ(ErrorLines(), 0);
}

// (c)
TEST_F(SuperviseTest, APeerThatDiedBeforeTheAgentNoticedIsCaughtWithinTheGrace) {
  runner_.results = {Rc(1), Rc(0, "1")};
  agent_.answers = {Healthy(),   Healthy(), Healthy(), Recovering("Launched"),
                    Recovered(), Healthy()};
  EXPECT_EQ(Run(), 0);
  EXPECT_THAT(runner_.attempts, ElementsAre(0, 1));
  EXPECT_THAT(out_.lines, Contains(Info("0", "Retrying step. Attempt number: 1")));
}

// (d)
TEST_F(SuperviseTest, AttemptsExhaustedStopsWithTheStepsCode) {
  config_.max_attempts = 1;
  runner_.results = {Rc(137, "0"), Rc(137, "1")};
  agent_.answers = {Recovered(), Recovering("Launched")};
  EXPECT_EQ(Run(), 137);
  EXPECT_THAT(runner_.attempts, ElementsAre(0, 1));
  EXPECT_EQ(out_.lines.back(),
            Error("1", "no attempts left: all 1 retries of --auto-resume=1 used; not retried"));
  EXPECT_EQ(agent_.events.back().message, "attempts exhausted");
}

TEST_F(SuperviseTest, AttemptsExhaustedAfterAZeroExitStillFails) {
  config_.max_attempts = 0;
  runner_.results = {Rc(0)};
  agent_.answers = {Recovering("Launched")};
  EXPECT_EQ(Run(), 1);
  EXPECT_THAT(runner_.attempts, ElementsAre(0));
}

// (e)
TEST_F(SuperviseTest, AnUnreachableAgentKeepsTheStepsCodeWithOneErrorLine) {
  runner_.results = {Rc(3)};
  agent_.answers = {
      UnavailableError("connect /run/hpod-agent/agent.sock: No such file or directory")};
  agent_.report_status =
      UnavailableError("connect /run/hpod-agent/agent.sock: No such file or directory");
  EXPECT_EQ(Run(), 3);
  EXPECT_EQ(ErrorLines(), 1);
  EXPECT_EQ(out_.lines.back(),
            Error("0",
                  "cannot reach the cluster agent at /run/hpod-agent/agent.sock: connect "
                  "/run/hpod-agent/agent.sock: No such file or directory; keeping the step's exit "
                  "code 3"));
  EXPECT_THAT(runner_.attempts, ElementsAre(0));
}

TEST_F(SuperviseTest, FailedReportsAreShownOnceAndChangeNothing) {
  runner_.results = {Rc(137, "0"), Rc(0, "1")};
  agent_.answers = {Recovered(), Healthy()};
  agent_.report_status = InternalError("the agent did not answer {\"ok\":true}");
  EXPECT_EQ(Run(), 0);
  EXPECT_EQ(ErrorLines(), 1);
  EXPECT_THAT(out_.lines.back(), HasSubstr("could not report to the cluster agent"));
  EXPECT_EQ(agent_.events.size(), 6u);
}

// (f)
TEST_F(SuperviseTest, AFailedRecoveryIsNotRetried) {
  runner_.results = {Rc(137)};
  agent_.answers = {Failed()};
  EXPECT_EQ(Run(), 137);
  EXPECT_THAT(runner_.attempts, ElementsAre(0));
  EXPECT_THAT(out_.lines,
              Contains(Info("0", "Response from cluster agent: JobId=12, ResumeAction=NONE")));
  EXPECT_EQ(out_.lines.back(),
            Error("0",
                  "Job failed - nodes could not be recovered: ip-10-77-0-12 (Replace, recovery "
                  "r-abc, Failed): no capacity for a replacement; not retried"));
}

TEST_F(SuperviseTest, ARecoveryThatFailsWhileWaitingIsNotRetriedAndAZeroExitBecomesOne) {
  runner_.results = {Rc(0)};
  agent_.answers = {Recovering("Launched"), Failed()};
  EXPECT_EQ(Run(), 1);
  EXPECT_THAT(runner_.attempts, ElementsAre(0));
  EXPECT_THAT(out_.lines.back(), HasSubstr("could not be recovered"));
}

// (g)
TEST_F(SuperviseTest, AUserSignalIsNotRetriedAndTheAgentIsNotAsked) {
  runner_.results = {Rc(130, "0", SIGINT)};
  agent_.answers = {Recovered()};
  EXPECT_EQ(Run(), 130);
  EXPECT_THAT(runner_.attempts, ElementsAre(0));
  EXPECT_TRUE(agent_.queries.empty());
  EXPECT_EQ(out_.lines.back(),
            Info("0", "step ended after the user's SIGINT was forwarded to it: not retried"));
  EXPECT_THAT(agent_.EventNames(), ElementsAre("started", "ended", "finished"));
}

// (h)
TEST_F(SuperviseTest, ANodeFailureIsRetriedEvenWhenSrunExitedZero) {
  runner_.results = {Rc(0, "0"), Rc(0, "1")};
  agent_.answers = {Recovered(), Healthy()};
  EXPECT_EQ(Run(), 0);
  EXPECT_THAT(runner_.attempts, ElementsAre(0, 1));
  EXPECT_EQ(sleeper_.sleeps, 0);  // recovered already: no waiting
}

// (i)
TEST_F(SuperviseTest, ARecoveryThatTakesTooLongTimesOut) {
  config_.recovery_timeout = std::chrono::seconds(5);
  runner_.results = {Rc(137)};
  agent_.answers = {Recovering("Launched")};
  EXPECT_EQ(Run(), 137);
  EXPECT_THAT(runner_.attempts, ElementsAre(0));
  EXPECT_EQ(sleeper_.sleeps, 5);
  EXPECT_EQ(
      out_.lines.back(),
      Error("0", "nodes still recovering after 5 s (HPOD_AUTO_RESUME_TIMEOUT_S); not retried"));
  EXPECT_EQ(agent_.events.back().message, "recovery timed out");
}

TEST_F(SuperviseTest, TheAgentGoingAwayWhileWaitingIsShownOnceAndWaitingGoesOn) {
  runner_.results = {Rc(137), Rc(0, "1")};
  agent_.answers = {Recovering("Launched"), UnavailableError("restarting"),
                    UnavailableError("restarting"), Recovered(), Healthy()};
  EXPECT_EQ(Run(), 0);
  EXPECT_EQ(ErrorLines(), 1);
  EXPECT_THAT(runner_.attempts, ElementsAre(0, 1));
}

TEST_F(SuperviseTest, AStepThatCannotStartEndsWithOne) {
  runner_.results = {};
  agent_.answers = {Healthy()};
  EXPECT_EQ(Run(), 1);
  EXPECT_THAT(out_.lines.back(), HasSubstr("cannot start the step: fork: out of processes"));
  EXPECT_THAT(agent_.EventNames(), ElementsAre("started", "finished"));
}

TEST_F(SuperviseTest, LinesLeaveOutAnUnknownStepId) {
  runner_.results = {Rc(0, "")};
  agent_.answers = {Healthy()};
  Run();
  EXPECT_EQ(out_.lines[0],
            "[Auto Resume] Info: JobID: 12 Initiating communication with cluster agent to "
            "diagnose health of nodes");
  EXPECT_THAT(out_.lines, Not(Contains(HasSubstr("StepID"))));
}

TEST(AttachLedger, ASummaryWhenTheLedgerHasAStartElseTheTail) {
  testing::TempDir dir;
  const std::string ledger = dir.path("goodput-12.jsonl");
  {
    std::ofstream f(ledger);
    f << R"({"event":"start","time":10,"process_start":9,"job_id":"12","attempt":0})"
      << "\n"
      << R"({"event":"step","time":11,"step":1,"step_s":1.0})"
      << "\n";
  }
  JobEvent e;
  AttachLedger(ledger, e);
#if HPOD_SPANK_HAVE_GOODPUT
  ASSERT_TRUE(e.goodput.has_value());
  EXPECT_TRUE(e.goodput->contains("goodput"));
  EXPECT_FALSE(e.ledger_tail.has_value());
#else
  ASSERT_TRUE(e.ledger_tail.has_value());
  EXPECT_THAT(*e.ledger_tail, HasSubstr("\"start\""));
#endif

  JobEvent none;
  AttachLedger(dir.path("missing.jsonl"), none);
  EXPECT_FALSE(none.goodput.has_value());
  EXPECT_FALSE(none.ledger_tail.has_value());
}

TEST(AttachLedger, ALongLedgerWithoutAStartIsSentAsItsTailFromALineBoundary) {
  testing::TempDir dir;
  const std::string ledger = dir.path("goodput-12.jsonl");
  std::string line = R"({"event":"step","time":11,"step":1,"step_s":1.0})";
  {
    std::ofstream f(ledger);
    for (std::size_t written = 0; written < 2 * kMaxLedgerTailBytes; written += line.size() + 1) {
      f << line << "\n";
    }
  }
  JobEvent e;
  AttachLedger(ledger, e);
  ASSERT_TRUE(e.ledger_tail.has_value());
  EXPECT_LE(e.ledger_tail->size(), kMaxLedgerTailBytes);
  EXPECT_GT(e.ledger_tail->size(), kMaxLedgerTailBytes - line.size() - 1);
  EXPECT_EQ(e.ledger_tail->substr(0, line.size()), line);
}

}  // namespace
}  // namespace hpod::spank
