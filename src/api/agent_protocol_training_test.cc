#include "hpod/api/agent_protocol_training.h"

#include <gtest/gtest.h>

namespace hpod::api::agentproto {
namespace {

using nlohmann::json;

template <typename T>
void ExpectRoundTrip(const T& value) {
  json j = value.ToJson();
  auto back = T::FromJson(json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString() << " for " << j.dump();
  EXPECT_EQ(*back, value) << j.dump();
}

TEST(AgentProtocolTrainingTest, MessagesRoundTrip) {
  ExpectRoundTrip(TrainingQuery{"t-1", "list_runs", "", 0});
  ExpectRoundTrip(TrainingQuery{"t-2", "read_run", "/fsx/a/tb", 500});
  TrainingResult runs;
  runs.id = "t-1";
  runs.runs = {{"/fsx/a/tb", "tensorboard", 1700000000.5, 1120},
               {"/fsx/a/metrics.jsonl", "jsonl", 1700000001, 980}};
  runs.warnings = {"stopped after 20000 entries"};
  ExpectRoundTrip(runs);
  TrainingResult series;
  series.id = "t-2";
  series.series = {{"train/loss", {{1, 1700000000.25, 6.25}, {2, 1700000000.5, 6.0}}},
                   {"train/lr", {}}};
  ExpectRoundTrip(series);
  ExpectRoundTrip(TrainingResult::Failed("t-3", InvalidArgumentError("outside /fsx")));
  ExpectRoundTrip(TrainingResult{"t-4", true, "", "", {}, {}, {}});
}

TEST(AgentProtocolTrainingTest, WireFormat) {
  EXPECT_EQ(TrainingQuery({"t-1", "list_runs", "", 0}).ToJson().dump(),
            R"({"id":"t-1","op":"list_runs","type":"training_query"})");
  // A success carries no code or error; empty lists are left out.
  EXPECT_EQ(TrainingResult({"t-1", true, "", "", {}, {}, {}}).ToJson().dump(),
            R"({"id":"t-1","ok":true,"type":"training_result"})");
  TrainingResult one;
  one.id = "t-2";
  one.series = {{"loss", {{7, 0, 1.5}}}};
  EXPECT_EQ(one.ToJson().dump(),
            R"({"id":"t-2","ok":true,"series":[{"points":[{"step":7,"value":1.5,)"
            R"("wall_time":0.0}],"tag":"loss"}],"type":"training_result"})");
}

TEST(AgentProtocolTrainingTest, ErrorsKeepTheirCode) {
  TrainingResult bad = TrainingResult::Failed("t-1", InvalidArgumentError("path x is outside"));
  EXPECT_EQ(bad.code, "INVALID_ARGUMENT");
  EXPECT_EQ(bad.ToStatus(), InvalidArgumentError("path x is outside"));
  EXPECT_EQ(TrainingResult::Failed("t", NotFoundError("gone")).ToStatus().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(TrainingResult::Failed("t", ResourceExhaustedError("busy")).ToStatus().code(),
            StatusCode::kResourceExhausted);
  // A code this hpodd does not know is an internal error, with the agent's message.
  TrainingResult odd{"t", false, "SOMETHING_NEW", "why", {}, {}, {}};
  EXPECT_EQ(odd.ToStatus(), InternalError("why"));
  EXPECT_TRUE(TrainingResult{}.ToStatus().ok());
}

TEST(AgentProtocolTrainingTest, MalformedFieldsAreNamed) {
  auto query = [](const char* text) { return TrainingQuery::FromJson(json::parse(text)).status(); };
  auto result = [](const char* text) {
    return TrainingResult::FromJson(json::parse(text)).status();
  };
  const std::vector<std::pair<Status, std::string>> cases = {
      {query(R"({"op":"list_runs"})"), "training_query: field 'id' is missing"},
      {query(R"({"id":"t","op":"delete"})"),
       "training_query: field 'op' must be one of list_runs, read_run (not 'delete')"},
      {query(R"({"id":"t","op":"read_run"})"),
       "training_query: field 'path' is missing (op read_run reads one run)"},
      {query(R"({"id":"t","op":"read_run","path":"/fsx/x","max_points":-1})"),
       "training_query: field 'max_points' must be >= 0"},
      {query(R"({"id":"t","op":"read_run","path":"/fsx/x","max_points":1.5})"),
       "training_query: field 'max_points' must be an integer"},
      {query(R"({"type":"training_result","id":"t","op":"list_runs"})"),
       "training_query: field 'type' must be \"training_query\""},
      {result(R"({"id":"t"})"), "training_result: field 'ok' is missing"},
      {result(R"({"id":"t","ok":true,"runs":{}})"),
       "training_result: field 'runs' must be an array"},
      {result(R"({"id":"t","ok":true,"runs":[{"path":"/fsx/a","kind":"csv"}]})"),
       "training_result: field 'runs[0].kind' must be one of tensorboard, jsonl (not 'csv')"},
      {result(R"({"id":"t","ok":true,"series":[{"tag":"a","points":[{"step":1,"value":1},
                                                                {"step":2,"value":"x"}]}]})"),
       "training_result: field 'series[0].points[1].value' must be a number"},
      {result(R"({"id":"t","ok":true,"series":[{"points":[]}]})"),
       "training_result: field 'series[0].tag' is missing"},
      {result(R"({"id":"t","ok":true,"warnings":[1]})"),
       "training_result: field 'warnings[0]' must be a string"},
  };
  for (const auto& [status, want] : cases) {
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << want;
    EXPECT_EQ(status.message(), want);
  }
  // Unknown fields are ignored; null reads as absent.
  auto ok = TrainingResult::FromJson(
      json::parse(R"({"id":"t","ok":true,"runs":null,"extra":[1],"series":[]})"));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(ok->runs.empty());
}

}  // namespace
}  // namespace hpod::api::agentproto
