#include "hpod/agent/health/health_checks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace hpod::agent::health {
namespace {

using namespace std::chrono_literals;
namespace proto = api::agentproto;

// Returns whatever the test set last.
class ScriptedCheck final : public Check {
 public:
  ScriptedCheck(std::string name, std::shared_ptr<Outcome> next)
      : name_(std::move(name)), next_(std::move(next)) {}
  std::string name() const override { return name_; }
  Outcome Run() override { return *next_; }

 private:
  const std::string name_;
  const std::shared_ptr<Outcome> next_;
};

// Blocks in Run until released, like statvfs of a hung /fsx.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> runs{0};
  void Release() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

class HangingCheck final : public Check {
 public:
  explicit HangingCheck(std::shared_ptr<Gate> gate) : gate_(std::move(gate)) {}
  std::string name() const override { return "disk:/fsx"; }
  Outcome Run() override {
    ++gate_->runs;
    std::unique_lock<std::mutex> lock(gate_->mu);
    gate_->cv.wait(lock, [&] { return gate_->open; });
    return Outcome::Ok();
  }
  Verdict TimeoutVerdict() const override { return Verdict::kReboot; }

 private:
  const std::shared_ptr<Gate> gate_;
};

std::vector<std::unique_ptr<Check>> Checks(std::unique_ptr<Check> a, std::unique_ptr<Check> b) {
  std::vector<std::unique_ptr<Check>> v;
  v.push_back(std::move(a));
  v.push_back(std::move(b));
  return v;
}

TEST(HealthCheckerTest, ReportsOnlyWhenAResultVerdictOrReasonChanges) {
  FakeClock clock;
  auto memory = std::make_shared<Outcome>(Outcome::Ok());
  auto flag = std::make_shared<Outcome>(Outcome::Ok());
  std::vector<proto::HealthReport> reports;
  HealthChecker checker({}, clock,
                        Checks(std::make_unique<ScriptedCheck>("memory", memory),
                               std::make_unique<ScriptedCheck>("flag_file", flag)),
                        [&](const proto::HealthReport& r) { reports.push_back(r); });
  EXPECT_EQ(checker.Current().seq, 0);
  EXPECT_TRUE(checker.Current().checks.empty());

  proto::HealthReport first = checker.RunOnce();
  ASSERT_EQ(reports.size(), 1u);  // the first round always reports
  EXPECT_EQ(first, reports[0]);
  EXPECT_EQ(first.seq, 1);
  ASSERT_EQ(first.checks.size(), 2u);
  EXPECT_EQ(first.checks[0].name, "memory");
  EXPECT_EQ(first.checks[0].result, "ok");
  EXPECT_EQ(first.checks[0].verdict, "Healthy");
  EXPECT_EQ(first.checks[1].name, "flag_file");
  EXPECT_DOUBLE_EQ(first.checks[0].time, clock.NowEpochSeconds());

  clock.AdvanceTime(2s);
  checker.RunOnce();  // the same results at a later time: no report
  EXPECT_EQ(reports.size(), 1u);
  EXPECT_EQ(checker.Current().seq, 1);

  *flag = Outcome::Fail(Verdict::kReplace, "HyperPod's fault flag file x is set");
  checker.RunOnce();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[1].seq, 2);
  EXPECT_EQ(reports[1].checks[1].result, "fail");
  EXPECT_EQ(reports[1].checks[1].verdict, "Replace");
  EXPECT_EQ(reports[1].checks[1].reason, "HyperPod's fault flag file x is set");
  EXPECT_EQ(checker.Current(), reports[1]);

  *flag = Outcome::Fail(Verdict::kReplace, "another reason");  // reason only
  checker.RunOnce();
  EXPECT_EQ(reports.size(), 3u);
  *flag = Outcome::Fail(Verdict::kReboot, "another reason");  // verdict only
  checker.RunOnce();
  EXPECT_EQ(reports.size(), 4u);
  *flag = Outcome::Ok();
  checker.RunOnce();
  checker.RunOnce();
  ASSERT_EQ(reports.size(), 5u);
  EXPECT_EQ(reports[4].checks[1].result, "ok");
  EXPECT_EQ(reports[4].seq, 5);
}

TEST(HealthCheckerTest, AHungCheckTimesOutAndIsNotStartedAgainUntilItReturns) {
  FakeClock clock;
  auto gate = std::make_shared<Gate>();
  auto other = std::make_shared<Outcome>(Outcome::Ok());
  HealthCheckerOptions options;
  options.timeout = 50ms;
  HealthChecker checker(options, clock,
                        Checks(std::make_unique<HangingCheck>(gate),
                               std::make_unique<ScriptedCheck>("memory", other)),
                        nullptr);
  proto::HealthReport r = checker.RunOnce();
  ASSERT_EQ(r.checks.size(), 2u);
  EXPECT_EQ(r.checks[0].name, "disk:/fsx");
  EXPECT_EQ(r.checks[0].result, "timeout");
  EXPECT_EQ(r.checks[0].verdict, "Reboot");  // the check's TimeoutVerdict
  EXPECT_EQ(r.checks[0].reason, "check did not finish within 50 ms");
  EXPECT_EQ(r.checks[1].result, "ok");  // the others are judged as usual

  *other = Outcome::Fail(Verdict::kReboot, "low");
  r = checker.RunOnce();
  EXPECT_EQ(r.checks[0].result, "timeout");
  EXPECT_EQ(r.checks[1].result, "fail");
  EXPECT_EQ(gate->runs.load(), 1) << "a hung check must not be started again";

  gate->Release();
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (r.checks[0].result != "ok" && std::chrono::steady_clock::now() < deadline) {
    r = checker.RunOnce();
  }
  EXPECT_EQ(r.checks[0].result, "ok");  // the late result of the hung run, or a new run's
  EXPECT_EQ(r.checks[0].verdict, "Healthy");
  r = checker.RunOnce();  // idle again: started and waited for as usual
  EXPECT_EQ(r.checks[0].result, "ok");
  EXPECT_GE(gate->runs.load(), 2);
}

TEST(HealthCheckerTest, StopReturnsWhileACheckIsStuck) {
  static FakeClock clock;  // the stuck worker reads it after the checker is gone
  auto gate = std::make_shared<Gate>();
  HealthCheckerOptions options;
  options.timeout = 20ms;
  {
    std::vector<std::unique_ptr<Check>> checks;
    checks.push_back(std::make_unique<HangingCheck>(gate));
    HealthChecker checker(options, clock, std::move(checks), nullptr);
    EXPECT_EQ(checker.RunOnce().checks[0].result, "timeout");
  }                 // ~HealthChecker leaves the stuck worker behind
  gate->Release();  // it then exits on its own, dropping its check (and its gate)
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (gate.use_count() > 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(gate.use_count(), 1);
}

TEST(HealthCheckerTest, TheIntervalThreadReportsUntilStopped) {
  FakeClock clock;
  auto flag = std::make_shared<Outcome>(Outcome::Ok());
  std::mutex mu;
  std::condition_variable cv;
  std::vector<proto::HealthReport> reports;
  HealthCheckerOptions options;
  options.interval = 5ms;
  std::vector<std::unique_ptr<Check>> checks;
  checks.push_back(std::make_unique<ScriptedCheck>("flag_file", flag));
  HealthChecker checker(options, clock, std::move(checks), [&](const proto::HealthReport& r) {
    std::lock_guard<std::mutex> lock(mu);
    reports.push_back(r);
    cv.notify_all();
  });
  checker.Start();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 30s, [&] { return reports.size() == 1; }));
  }
  *flag = Outcome::Fail(Verdict::kReplace, "set");
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 30s, [&] { return reports.size() >= 2; }));
    EXPECT_EQ(reports[1].checks[0].verdict, "Replace");
  }
  checker.Stop();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(reports.size(), 2u);
}

TEST(HealthCheckerTest, NamesMatchTheWire) {
  EXPECT_EQ(ResultName(Result::kOk), "ok");
  EXPECT_EQ(ResultName(Result::kFail), "fail");
  EXPECT_EQ(ResultName(Result::kTimeout), "timeout");
  EXPECT_EQ(ResultName(Result::kSkipped), "skipped");
  EXPECT_EQ(VerdictName(Verdict::kHealthy), "Healthy");
  EXPECT_EQ(VerdictName(Verdict::kReboot), "Reboot");
  EXPECT_EQ(VerdictName(Verdict::kReplace), "Replace");
  // Every name parses on the wire.
  for (Result r : {Result::kOk, Result::kFail, Result::kTimeout, Result::kSkipped}) {
    proto::HealthCheck c{"x", std::string(ResultName(r)), "Reboot", "", 0, 0};
    EXPECT_TRUE(proto::HealthCheck::FromJson(c.ToJson()).ok());
  }
}

}  // namespace
}  // namespace hpod::agent::health
