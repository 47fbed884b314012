// Auto-resume's questions (jobs.h): job_health judged from recovery records and
// node rows, and job_event records kept per job in the store.

#include "hpod/controlplane/jobs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

#include "hpod/controlplane/recovery.h"

namespace hpod::controlplane {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

store::RecoveryRecord Rec(const std::string& id, const std::string& host, const std::string& status,
                          double created) {
  store::RecoveryRecord r;
  r.recovery_id = id;
  r.hostname = host;
  r.status = status;
  r.created = created;
  r.action = "Replace";
  r.phase = status == kRecoveryInProgress ? "Launched" : "Resumed";
  r.timeline = Json::array(
      {{{"step", "Detected"}, {"time", created}}, {{"step", "Resumed"}, {"time", created + 2}}});
  return r;
}

store::NodeRecord Row(const std::string& host, const std::string& status = "Running") {
  store::NodeRecord n;
  n.hostname = host;
  n.status = status;
  return n;
}

const std::vector<store::NodeRecord> kRows = {Row("w1"), Row("w2"), Row("w3")};

std::string Verdict(const std::vector<store::RecoveryRecord>& recs,
                    const std::vector<store::NodeRecord>& rows = kRows, double since = 100,
                    bool automatic = true) {
  return JudgeJobNodes(recs, rows, {"w1", "w2", "w3"}, since, automatic)["verdict"];
}

TEST(JudgeJobNodesTest, HealthyWithoutRecoveriesOfTheJobsNodes) {
  EXPECT_EQ(Verdict({}), "healthy");
  // Another node's recovery, and an old one of w1 (before the step began), do not count.
  EXPECT_EQ(
      Verdict({Rec("r1", "w9", kRecoveryInProgress, 150), Rec("r0", "w1", kRecoverySucceeded, 50)}),
      "healthy");
}

TEST(JudgeJobNodesTest, InProgressThenRecoveredThenFailedWins) {
  EXPECT_EQ(Verdict({Rec("r1", "w2", kRecoveryInProgress, 150)}), "recovering");
  // An old recovery still in progress counts whatever its start.
  EXPECT_EQ(Verdict({Rec("r1", "w2", kRecoveryInProgress, 10)}), "recovering");
  Json j = JudgeJobNodes({Rec("r1", "w2", kRecoverySucceeded, 150)}, kRows, {"w1", "w2", "w3"}, 100,
                         true);
  EXPECT_EQ(j["verdict"], "recovered");
  EXPECT_EQ(j["nodes"][1]["state"], "recovered");
  EXPECT_EQ(j["nodes"][1]["recovery_id"], "r1");
  EXPECT_EQ(j["nodes"][1]["resumed"], 152);
  EXPECT_EQ(j["nodes"][0]["state"], "healthy");
  // One back, one still in progress: wait.
  EXPECT_EQ(Verdict({Rec("r1", "w2", kRecoverySucceeded, 150),
                     Rec("r2", "w3", kRecoveryInProgress, 151)}),
            "recovering");
  // A failed (or only reported) recovery: the retry could not succeed.
  for (const char* status : {kRecoveryFailed, kRecoveryReported}) {
    Json f =
        JudgeJobNodes({Rec("r1", "w2", status, 150), Rec("r2", "w3", kRecoveryInProgress, 151)},
                      kRows, {"w1", "w2", "w3"}, 100, true);
    EXPECT_EQ(f["verdict"], "failed") << status;
    EXPECT_THAT(f["message"].get<std::string>(), HasSubstr("w2"));
  }
}

// A killed node is Failure one pass before its recovery is written: with
// NodeRecovery=Automatic that is "recovering" (the job waits), never "failed" (the
// job would give up on a resume that is about to happen).
TEST(JudgeJobNodesTest, ANodeNotRunningWithoutARecoveryIsRecoveringUnlessRecoveryIsOff) {
  const std::vector<store::NodeRecord> rows = {Row("w1"), Row("w2", "Failure"), Row("w3")};
  EXPECT_EQ(Verdict({}, rows), "recovering");
  EXPECT_EQ(Verdict({}, rows, 100, /*automatic=*/false), "failed");
  Json j = JudgeJobNodes({}, kRows, {"w1", "login7"}, 0, true);
  EXPECT_EQ(j["verdict"], "healthy");
  EXPECT_EQ(j["nodes"][1]["state"], "unknown");
}

class JobServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = store::OpenSqliteStore({});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
    ASSERT_TRUE(store_
                    ->Write([](store::WriteTx& tx) -> Status {
                      store::ClusterRecord c;
                      c.id = "c1";
                      c.name = "demo";
                      HPOD_RETURN_IF_ERROR(tx.PutCluster(c));
                      store::NodeRecord n;
                      n.cluster_id = "c1";
                      n.instance_id = "i-1";
                      n.group_name = "w";
                      n.hostname = "w1";
                      n.status = "Running";
                      return tx.PutNode(n);
                    })
                    .ok());
  }
  Json Job(const std::string& id) {
    Json out;
    EXPECT_TRUE(store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(out, ReadJob(tx, "c1", id));
                      return OkStatus();
                    })
                    .ok());
    return out;
  }
  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
};

// `since` is the supervisor's reading of its node's clock; recoveries' times are
// hpodd's. With the asking node's clock offset (AgentService::ClockOffset) the
// answer is the same whichever way the node's clock is off.
TEST_F(JobServiceTest, SinceIsReadOnTheNodesClock) {
  const double t0 = clock_.NowEpochSeconds();
  ASSERT_TRUE(store_
                  ->Write([&](store::WriteTx& tx) -> Status {
                    store::RecoveryRecord r = Rec("rcv-1", "w1", kRecoverySucceeded, t0 + 100);
                    r.cluster_id = "c1";
                    r.instance_id = "i-1";
                    return tx.PutRecovery(r);
                  })
                  .ok());
  JobService jobs(*store_, clock_);
  auto ask = [&](double since_on_node, std::optional<double> offset) {
    return jobs.Answer("c1", {{"op", "job_health"}, {"nodes", {"w1"}}, {"since", since_on_node}},
                       offset)["verdict"];
  };
  // The step began at t0 + 50 by hpodd's clock, before the recovery: it failed
  // on the node, which was then recovered. A node 90 s ahead read t0 + 140.
  EXPECT_EQ(ask(t0 + 140 - 1, 90.0), "recovered");
  // A node 90 s behind read t0 - 40.
  EXPECT_EQ(ask(t0 - 40 - 1, -90.0), "recovered");
  // The step began at t0 + 130, after that recovery: nothing of the step's
  // failed. Ahead: t0 + 220; behind: t0 + 40 (which, taken as hpodd's time, would
  // be before the recovery and count it).
  EXPECT_EQ(ask(t0 + 220 - 1, 90.0), "healthy");
  EXPECT_EQ(ask(t0 + 40 - 1, -90.0), "healthy");
  // An agent older than heartbeat.time: `since` is taken as hpodd's time.
  EXPECT_EQ(ask(t0 + 50 - 1, std::nullopt), "recovered");
  EXPECT_EQ(ask(t0 + 130 - 1, std::nullopt), "healthy");
}

TEST_F(JobServiceTest, EventsAreKeptPerJobAndTheLatestGoodputWins) {
  JobService jobs(*store_, clock_);
  Json started = {{"op", "job_event"},
                  {"job_id", "12"},
                  {"event", "started"},
                  {"attempt", 0},
                  {"nodes", {"w1", "w2"}}};
  EXPECT_EQ(jobs.Answer("c1", started), Json({{"ok", true}}));
  EXPECT_EQ(jobs.Answer("c1", {{"op", "job_event"},
                               {"job_id", "12"},
                               {"event", "finished"},
                               {"exit_code", 0},
                               {"goodput", {{"goodput", 0.9}}},
                               {"ledger_tail", "big"}}),
            Json({{"ok", true}}));
  Json job = Job("12");
  ASSERT_EQ(job["events"].size(), 2u);
  EXPECT_EQ(job["events"][0]["event"], "started");
  EXPECT_FALSE(job["events"][1].contains("goodput"));
  EXPECT_FALSE(job["events"][1].contains("ledger_tail"));
  EXPECT_FALSE(job["events"][1].contains("op"));
  EXPECT_EQ(job["goodput"]["goodput"], 0.9);
  EXPECT_EQ(job["nodes"], Json({"w1", "w2"}));
  EXPECT_TRUE(job["finished"]);
  // A requeued job's new supervisor opens it again.
  jobs.Answer("c1", started);
  EXPECT_FALSE(Job("12")["finished"]);
}

TEST_F(JobServiceTest, BadRequestsGetAnErrorNamingTheField) {
  JobService jobs(*store_, clock_);
  auto error = [&](const Json& r) { return jobs.Answer("c1", r).value("error", ""); };
  EXPECT_THAT(error(Json::object()), HasSubstr("'op' is missing"));
  EXPECT_THAT(error({{"op", 3}}), HasSubstr("'op' must be a string"));
  EXPECT_THAT(error({{"op", "reboot"}}), HasSubstr("unknown op 'reboot'"));
  EXPECT_THAT(error({{"op", "job_event"}, {"event", "started"}}), HasSubstr("'job_id' is missing"));
  EXPECT_THAT(error({{"op", "job_event"}, {"job_id", "../x"}, {"event", "started"}}),
              HasSubstr("Slurm job id"));
  EXPECT_THAT(error({{"op", "job_event"}, {"job_id", "1"}, {"event", "exploded"}}),
              HasSubstr("'event' must be one of"));
  EXPECT_THAT(error({{"op", "job_health"}, {"nodes", "w1"}}), HasSubstr("'nodes' must be"));
  EXPECT_THAT(error({{"op", "job_health"}, {"nodes", {"w1"}}, {"since", "now"}}),
              HasSubstr("'since' must be a number"));
  EXPECT_EQ(jobs.Answer("c1", {{"op", "job_health"}, {"nodes", {"w1"}}})["verdict"], "healthy");
  EXPECT_THAT(jobs.Answer("gone", {{"op", "job_event"}, {"job_id", "1"}, {"event", "started"}})
                  .value("error", ""),
              HasSubstr("gone"));
}

// The job's record joined with its nodes' recoveries by time, also when the node
// sent a goodput summary of the wrong shape (it is any node program's to send).
TEST_F(JobServiceTest, DescribeJoinsRecoveriesByTimeAndSurvivesAMalformedSummary) {
  JobService jobs(*store_, clock_);
  Json ledger = {{"goodput", 0.5},
                 {"steps_rerun", 3},
                 {"attempts",
                  {{{"process_start", 100.0}, {"last_time", 110.0}, {"first_step_time", 101.0}},
                   {{"process_start", 118.0}, {"last_time", 130.0}, {"first_step_time", 119.5}}}},
                 {"gaps",
                  {{{"rendezvous_s", 0.1},
                    {"checkpoint_load_s", 0.2},
                    {"first_step_s", 1.5},
                    {"steps_rerun", 3}}}}};
  ASSERT_EQ(jobs.Answer("c1", {{"op", "job_event"},
                               {"job_id", "12"},
                               {"event", "started"},
                               {"time", 99.0},
                               {"nodes", {"w1", "w2"}}}),
            Json({{"ok", true}}));
  ASSERT_EQ(jobs.Answer("c1", {{"op", "job_event"},
                               {"job_id", "12"},
                               {"event", "finished"},
                               {"time", 131.0},
                               {"goodput", ledger}}),
            Json({{"ok", true}}));
  ASSERT_TRUE(store_
                  ->Write([](store::WriteTx& tx) -> Status {
                    auto r = Rec("rcv-aaaaaaaaaaaa", "w2", kRecoverySucceeded, 111.0);
                    r.cluster_id = "c1";
                    HPOD_RETURN_IF_ERROR(tx.PutRecovery(r));
                    auto other = Rec("rcv-bbbbbbbbbbbb", "w9", kRecoverySucceeded, 112.0);
                    other.cluster_id = "c1";  // not a node of the job
                    return tx.PutRecovery(other);
                  })
                  .ok());
  auto describe = [&]() {
    nlohmann::ordered_json out;
    Status s = store_->Read([&](store::ReadTx& tx) -> Status {
      HPOD_ASSIGN_OR_RETURN(auto c, tx.GetCluster("c1"));
      HPOD_ASSIGN_OR_RETURN(out, DescribeJobGoodput(tx, c, "12"));
      return OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  };
  auto out = describe();
  EXPECT_EQ(out["Attempts"], 1);
  EXPECT_TRUE(out["Finished"]);
  ASSERT_EQ(out["Failures"].size(), 1u) << out.dump();
  const auto& f = out["Failures"][0];
  EXPECT_EQ(f["Hostname"], "w2");
  EXPECT_DOUBLE_EQ(f["DetectionSeconds"].get<double>(), 1.0);    // 111 - last step at 110
  EXPECT_DOUBLE_EQ(f["ReplacementSeconds"].get<double>(), 2.0);  // Resumed at 113
  EXPECT_DOUBLE_EQ(f["RestartSeconds"].get<double>(), 5.0);      // next start at 118
  EXPECT_DOUBLE_EQ(f["CheckpointLoadSeconds"].get<double>(), 0.2);
  EXPECT_EQ(f["StepsRerun"], 3);
  EXPECT_DOUBLE_EQ(f["FaultToFirstStepSeconds"].get<double>(), 9.5);
  // A summary of the wrong shape reads as empty figures, never an exception.
  ASSERT_EQ(jobs.Answer("c1", {{"op", "job_event"},
                               {"job_id", "12"},
                               {"event", "finished"},
                               {"goodput", {{"attempts", 7}, {"gaps", {"x", 1}}}}}),
            Json({{"ok", true}}));
  out = describe();
  ASSERT_EQ(out["Failures"].size(), 1u);
  EXPECT_FALSE(out["Failures"][0].contains("DetectionSeconds"));
  Status missing = store_->Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(auto c, tx.GetCluster("c1"));
    return DescribeJobGoodput(tx, c, "99").status();
  });
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("--auto-resume"));
}

// A program that writes no ledger (a PyTorch script without hpod_goodput) still
// gets the recovery's and the supervisor's timings.
TEST_F(JobServiceTest, WithoutALedgerTheSupervisorsEventsGiveTheRestart) {
  JobService jobs(*store_, clock_);
  for (auto [event, time] :
       {std::pair{"started", 99.0}, std::pair{"ended", 112.0}, std::pair{"retrying", 113.5},
        std::pair{"started", 113.6}, std::pair{"finished", 140.0}}) {
    ASSERT_EQ(jobs.Answer("c1", {{"op", "job_event"},
                                 {"job_id", "13"},
                                 {"event", event},
                                 {"time", time},
                                 {"nodes", {"w1", "w2"}}}),
              Json({{"ok", true}}));
  }
  ASSERT_TRUE(store_
                  ->Write([](store::WriteTx& tx) -> Status {
                    auto r = Rec("rcv-cccccccccccc", "w2", kRecoverySucceeded, 111.0);
                    r.cluster_id = "c1";
                    return tx.PutRecovery(r);
                  })
                  .ok());
  nlohmann::ordered_json out;
  ASSERT_TRUE(store_
                  ->Read([&](store::ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(auto c, tx.GetCluster("c1"));
                    HPOD_ASSIGN_OR_RETURN(out, DescribeJobGoodput(tx, c, "13"));
                    return OkStatus();
                  })
                  .ok());
  EXPECT_EQ(out["Attempts"], 2);
  EXPECT_FALSE(out.contains("Goodput"));
  ASSERT_EQ(out["Failures"].size(), 1u) << out.dump();
  const auto& f = out["Failures"][0];
  EXPECT_DOUBLE_EQ(f["ReplacementSeconds"].get<double>(), 2.0);  // Resumed at 113
  EXPECT_NEAR(f["RestartSeconds"].get<double>(), 0.6, 1e-9);     // retry's srun at 113.6
  EXPECT_NEAR(f["StepRestartSeconds"].get<double>(), 2.6, 1e-9);
  EXPECT_FALSE(f.contains("DetectionSeconds"));  // no step times to bound it
}

// The node's times (events, ledger) are moved onto hpodd's clock with the offset
// its agent had when each event came, before they are joined with recoveries.
TEST_F(JobServiceTest, DescribeJoinsOnHpoddsClockWhateverTheNodesClock) {
  JobService jobs(*store_, clock_);
  ASSERT_TRUE(store_
                  ->Write([](store::WriteTx& tx) -> Status {
                    auto r = Rec("rcv-aaaaaaaaaaaa", "w2", kRecoverySucceeded, 111.0);
                    r.cluster_id = "c1";
                    return tx.PutRecovery(r);
                  })
                  .ok());
  for (double skew : {90.0, -90.0}) {
    const std::string job = skew > 0 ? "21" : "22";
    auto node = [&](double hpodd_time) { return hpodd_time + skew; };
    Json ledger = {
        {"attempts",
         {{{"process_start", node(100)}, {"last_time", node(110)}, {"first_step_time", node(101)}},
          {{"process_start", node(118)},
           {"last_time", node(130)},
           {"first_step_time", node(119.5)}}}},
        {"gaps", {{{"rendezvous_s", 0.1}, {"checkpoint_load_s", 0.2}, {"first_step_s", 1.5}}}}};
    ASSERT_EQ(jobs.Answer("c1",
                          {{"op", "job_event"},
                           {"job_id", job},
                           {"event", "started"},
                           {"time", node(99)},
                           {"nodes", {"w1", "w2"}}},
                          skew),
              Json({{"ok", true}}));
    ASSERT_EQ(jobs.Answer("c1",
                          {{"op", "job_event"},
                           {"job_id", job},
                           {"event", "finished"},
                           {"time", node(131)},
                           {"goodput", ledger}},
                          skew),
              Json({{"ok", true}}));
    nlohmann::ordered_json out;
    ASSERT_TRUE(store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(auto c, tx.GetCluster("c1"));
                      HPOD_ASSIGN_OR_RETURN(out, DescribeJobGoodput(tx, c, job));
                      return OkStatus();
                    })
                    .ok());
    ASSERT_EQ(out["Failures"].size(), 1u) << skew << " " << out.dump();
    const auto& f = out["Failures"][0];
    EXPECT_DOUBLE_EQ(f["DetectionSeconds"].get<double>(), 1.0) << skew;
    EXPECT_DOUBLE_EQ(f["RestartSeconds"].get<double>(), 5.0) << skew;
    EXPECT_DOUBLE_EQ(f["FaultToFirstStepSeconds"].get<double>(), 9.5) << skew;
    EXPECT_DOUBLE_EQ(out["Events"][0]["Time"].get<double>(), 99.0) << skew;  // hpodd's clock
  }
}

// Only the fields hpod reads are kept, each bounded.
TEST_F(JobServiceTest, EventsKeepOnlyKnownBoundedFields) {
  JobService jobs(*store_, clock_);
  ASSERT_EQ(jobs.Answer("c1", {{"op", "job_event"},
                               {"job_id", "5"},
                               {"event", "ended"},
                               {"message", std::string(5000, 'm')},
                               {"junk", std::string(100000, 'j')},
                               {"exit_code", 137}}),
            Json({{"ok", true}}));
  Json e = Job("5")["events"][0];
  EXPECT_FALSE(e.contains("junk"));
  EXPECT_EQ(e["message"].get<std::string>().size(), 1024u);
  EXPECT_EQ(e["exit_code"], 137);
}

}  // namespace
}  // namespace hpod::controlplane
