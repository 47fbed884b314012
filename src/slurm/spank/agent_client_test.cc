#include "hpod/slurm/spank/agent_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hpod/slurm/spank/spank_test_util.h"

namespace hpod::spank {
namespace {

using testing::FakeAgentServer;
using ::testing::HasSubstr;
using testing::TempDir;

UnixSocketAgentClient Client(const std::string& path, int timeout_ms = 5000) {
  UnixSocketAgentClient::Options o;
  o.socket_path = path;
  o.timeout = std::chrono::milliseconds(timeout_ms);
  return UnixSocketAgentClient(o);
}

TEST(AgentClient, AsksJobHealthOnOneLineAndReadsTheAnswer) {
  TempDir dir;
  FakeAgentServer server(dir.path("agent.sock"), [](const nlohmann::json&) {
    return std::optional<std::string>(
        R"({"verdict":"recovering","message":"replacing","nodes":[{"name":"ip-10-77-0-12",)"
        R"("state":"recovering","recovery_id":"r-abc","action":"Replace","phase":"Launched",)"
        R"("status":"InProgress"},{"name":"ip-10-77-0-11","state":"healthy"}]})");
  });
  auto client = Client(dir.path("agent.sock"));
  StatusOr<HealthAnswer> a =
      client.JobHealth(HealthQuery{"12", {"ip-10-77-0-11", "ip-10-77-0-12"}, 1700000000.5});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->verdict, Verdict::kRecovering);
  EXPECT_EQ(a->message, "replacing");
  ASSERT_EQ(a->nodes.size(), 2u);
  EXPECT_EQ(a->nodes[0].name, "ip-10-77-0-12");
  EXPECT_EQ(a->nodes[0].state, NodeState::kRecovering);
  EXPECT_EQ(a->nodes[0].recovery_id, "r-abc");
  EXPECT_EQ(a->nodes[0].action, "Replace");
  EXPECT_EQ(a->nodes[0].phase, "Launched");
  EXPECT_EQ(a->nodes[0].status, "InProgress");
  EXPECT_EQ(a->nodes[1].state, NodeState::kHealthy);

  auto requests = server.Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0], nlohmann::json::parse(R"({"op":"job_health","job_id":"12",
      "nodes":["ip-10-77-0-11","ip-10-77-0-12"],"since":1700000000.5})"));
}

TEST(AgentClient, ReportsAnEventAndReadsOk) {
  TempDir dir;
  FakeAgentServer server(dir.path("agent.sock"), [](const nlohmann::json&) {
    return std::optional<std::string>(R"({"ok":true})");
  });
  auto client = Client(dir.path("agent.sock"));
  JobEvent e;
  e.job_id = "12";
  e.step_id = "0";
  e.event = EventKind::kRetrying;
  e.attempt = 0;
  e.max_attempts = 2;
  e.time = 1700000001;
  e.exit_code = 137;
  e.recovery_ids = {"r-abc"};
  EXPECT_TRUE(client.Report(e).ok());
  auto requests = server.Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0]["op"], "job_event");
  EXPECT_EQ(requests[0]["event"], "retrying");
  EXPECT_EQ(requests[0]["exit_code"], 137);
  EXPECT_EQ(requests[0]["recovery_ids"], nlohmann::json({"r-abc"}));
  EXPECT_FALSE(requests[0].contains("ledger_tail"));
}

TEST(AgentClient, TheAgentsErrorIsUnavailableWithItsText) {
  TempDir dir;
  FakeAgentServer server(dir.path("agent.sock"), [](const nlohmann::json&) {
    return std::optional<std::string>(R"({"error":"hpodd is not connected"})");
  });
  auto client = Client(dir.path("agent.sock"));
  StatusOr<HealthAnswer> a = client.JobHealth(HealthQuery{"12", {}, 0});
  EXPECT_EQ(a.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(a.status().message(), HasSubstr("hpodd is not connected"));
  EXPECT_EQ(client.Report(JobEvent{}).code(), StatusCode::kUnavailable);
}

TEST(AgentClient, AnAgentThatNeverAnswersTimesOut) {
  TempDir dir;
  FakeAgentServer server(dir.path("agent.sock"),
                         [](const nlohmann::json&) { return std::optional<std::string>(); });
  auto client = Client(dir.path("agent.sock"), 200);
  StatusOr<HealthAnswer> a = client.JobHealth(HealthQuery{"12", {}, 0});
  EXPECT_EQ(a.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(a.status().message(), HasSubstr(dir.path("agent.sock")));
}

TEST(AgentClient, AMissingSocketIsUnavailableNamingThePath) {
  TempDir dir;
  auto client = Client(dir.path("missing.sock"));
  StatusOr<HealthAnswer> a = client.JobHealth(HealthQuery{"12", {}, 0});
  EXPECT_EQ(a.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(a.status().message(), HasSubstr(dir.path("missing.sock")));
  EXPECT_THAT(a.status().message(), HasSubstr("No such file"));
}

TEST(AgentClient, ClosedWithoutAnswerAndGarbageAreErrors) {
  TempDir dir;
  int calls = 0;
  FakeAgentServer server(dir.path("agent.sock"), [&calls](const nlohmann::json&) {
    return std::optional<std::string>(calls++ == 0 ? "" : "HTTP/1.1 400 Bad Request");
  });
  auto client = Client(dir.path("agent.sock"));
  EXPECT_EQ(client.JobHealth(HealthQuery{}).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(client.JobHealth(HealthQuery{}).status().code(), StatusCode::kInternal);
}

TEST(AgentCodec, AnswersAreReadLeniently) {
  auto a = HealthAnswerFromJson(nlohmann::json::parse(
      R"({"verdict":"failed","nodes":[{"name":"n1","state":"exploded"},7],"extra":1})"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->verdict, Verdict::kFailed);
  ASSERT_EQ(a->nodes.size(), 1u);
  EXPECT_EQ(a->nodes[0].state, NodeState::kUnknown);
  EXPECT_EQ(HealthAnswerFromJson(nlohmann::json::parse(R"({"verdict":"maybe"})")).status().code(),
            StatusCode::kInternal);
  EXPECT_EQ(HealthAnswerFromJson(nlohmann::json::parse(R"({"nodes":[]})")).status().code(),
            StatusCode::kInternal);
  EXPECT_EQ(HealthAnswerFromJson(nlohmann::json::parse("[1]")).status().code(),
            StatusCode::kInternal);
}

TEST(AgentCodec, EventsLeaveOutUnsetFields) {
  JobEvent e;
  e.job_id = "12";
  e.event = EventKind::kStarted;
  e.nodes = {"n1"};
  e.max_attempts = 1;
  e.time = 5;
  EXPECT_EQ(JobEventToJson(e), nlohmann::json::parse(R"({"op":"job_event","job_id":"12",
      "step_id":"","restart":0,"attempt":0,"event":"started","time":5.0,"nodes":["n1"],
      "max_attempts":1})"));
  e.event = EventKind::kFinished;
  e.exit_code = 0;
  e.ledger_tail = "{\"event\":\"end\"}\n";
  nlohmann::json j = JobEventToJson(e);
  EXPECT_EQ(j["event"], "finished");
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["ledger_tail"], "{\"event\":\"end\"}\n");
}

}  // namespace
}  // namespace hpod::spank
