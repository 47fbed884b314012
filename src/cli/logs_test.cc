#include "hpod/cli/logs.h"

#include <gtest/gtest.h>

#include <sstream>

#include "hpod/cli/fake_transport.h"
#include "hpod/cli/main.h"

namespace hpod::cli {
namespace {

http::Response Chunk(const std::string& data, const std::string& token) {
  Json body = {{"Data", data}};
  if (!token.empty()) body["NextToken"] = token;
  return JsonResponse(200, body);
}

class LogsTest : public ::testing::Test {
 protected:
  Status Logs(bool follow, std::optional<int64_t> max_calls = std::nullopt,
              std::optional<std::string> stream = std::nullopt) {
    ApiClientOptions options;
    options.max_attempts = 1;
    ApiClient client(options, transport_, clock_, sleeper_);
    LogsOptions logs;
    logs.cluster_name = "ml";
    logs.node_id = "i-0123456789abcdef0";
    logs.stream = std::move(stream);
    logs.follow = follow;
    logs.max_calls = max_calls;
    return FollowNodeLogs(client, logs, sleeper_, out_);
  }

  FakeTransport transport_;
  FakeClock clock_;
  FakeSleeper sleeper_{clock_};
  std::ostringstream out_;
};

TEST_F(LogsTest, ReadsUntilNothingIsLeftWithoutSleeping) {
  transport_.Queue("HpodGetNodeLogs",
                   {Chunk("line 1\n", "t1"), Chunk("line 2\n", "t2"), Chunk("", "t2")});
  ASSERT_TRUE(Logs(false, std::nullopt, "Agent").ok());
  EXPECT_EQ(out_.str(), "line 1\nline 2\n");
  ASSERT_EQ(transport_.calls.size(), 3u);
  EXPECT_EQ(transport_.calls[0].body,
            Json({{"ClusterName", "ml"}, {"NodeId", "i-0123456789abcdef0"}, {"Stream", "Agent"}}));
  EXPECT_EQ(transport_.calls[1].body.value("NextToken", ""), "t1");
  EXPECT_EQ(transport_.calls[2].body.value("NextToken", ""), "t2");
  EXPECT_TRUE(sleeper_.sleeps.empty());
}

TEST_F(LogsTest, WithoutTokenOneCallIsAll) {
  transport_.Queue("HpodGetNodeLogs", {Chunk("all of it\n", "")});
  ASSERT_TRUE(Logs(false).ok());
  EXPECT_EQ(out_.str(), "all of it\n");
  EXPECT_EQ(transport_.CountCalls("HpodGetNodeLogs"), 1u);
  EXPECT_FALSE(transport_.calls[0].body.contains("Stream"));
}

TEST_F(LogsTest, FollowPollsEverySecondWithTheLatestToken) {
  transport_.Queue("HpodGetNodeLogs", {Chunk("a\n", "t1"), Chunk("", "t1"), Chunk("b\n", "t2"),
                                       Chunk("", ""), Chunk("", "t3")});
  ASSERT_TRUE(Logs(true, 6).ok());
  EXPECT_EQ(out_.str(), "a\nb\n");
  ASSERT_EQ(transport_.calls.size(), 6u);
  std::vector<std::string> tokens;
  for (const auto& c : transport_.calls) tokens.push_back(c.body.value("NextToken", "-"));
  // An answer without a token keeps the last one.
  EXPECT_EQ(tokens, (std::vector<std::string>{"-", "t1", "t1", "t2", "t2", "t3"}));
  // No wait after a chunk with data, one second after each empty answer.
  ASSERT_EQ(sleeper_.sleeps.size(), 3u);
  for (auto s : sleeper_.sleeps) EXPECT_EQ(s.count(), 1000);
}

TEST_F(LogsTest, ErrorsAreTheClisMessage) {
  transport_.Queue("HpodGetNodeLogs",
                   {ErrorResponse(400, "ResourceNotFound", "Node i-0123456789abcdef0 not found.")});
  Status s = Logs(true, 5);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.aws_type(), "ResourceNotFound");
  EXPECT_EQ(s.message(),
            "An error occurred (ResourceNotFound) when calling the HpodGetNodeLogs operation: "
            "Node i-0123456789abcdef0 not found.");
  EXPECT_EQ(transport_.CountCalls("HpodGetNodeLogs"), 1u);
}

class LogsCommandTest : public LogsTest {
 protected:
  int Run(std::vector<std::string> args) {
    out_.str("");
    err_.str("");
    Runtime rt = FakeRuntime(transport_, clock_, sleeper_, out_, err_);
    rt.logs_max_calls = 4;
    return cli::Run(args, rt);
  }
  std::ostringstream err_;
};

TEST_F(LogsCommandTest, PrintsRawDataAndFollows) {
  transport_.Queue("HpodGetNodeLogs",
                   {Chunk("{\"not\": \"json output\"}\n", "t1"), Chunk("", "t1")});
  EXPECT_EQ(Run({"logs", "--cluster-name", "ml", "--node-id", "i-0123456789abcdef0", "--follow",
                 "--output", "table"}),
            kExitOk)
      << err_.str();
  EXPECT_EQ(out_.str(), "{\"not\": \"json output\"}\n");
  EXPECT_EQ(transport_.CountCalls("HpodGetNodeLogs"), 4u);
  EXPECT_EQ(sleeper_.sleeps.size(), 2u);  // none after the last call
}

TEST_F(LogsCommandTest, Errors) {
  transport_.Queue("HpodGetNodeLogs",
                   {ErrorResponse(400, "ResourceNotFound", "Cluster x not found.")});
  EXPECT_EQ(Run({"logs", "--cluster-name", "x", "--node-id", "i-0123456789abcdef0"}), kExitService);
  EXPECT_EQ(err_.str(),
            "\nAn error occurred (ResourceNotFound) when calling the HpodGetNodeLogs operation: "
            "Cluster x not found.\n");
  EXPECT_EQ(Run({"logs", "--cluster-name", "x"}), kExitUsage);
  EXPECT_NE(err_.str().find("the following arguments are required: --node-id"), std::string::npos);
  EXPECT_EQ(Run({"logs", "--cluster-name", "x", "--node-id", "i-0123456789abcdef0", "--stream",
                 "Syslog"}),
            kExitUsage);
  EXPECT_NE(err_.str().find("argument --stream: Invalid choice: 'Syslog' (choose from "
                            "'LifecycleConfig', 'Agent')"),
            std::string::npos);
  EXPECT_EQ(
      Run({"logs", "--cluster-name", "x", "--node-id", "i-0123456789abcdef0", "--follow=yes"}),
      kExitUsage);
  EXPECT_EQ(transport_.CountCalls("HpodGetNodeLogs"), 1u);
}

}  // namespace
}  // namespace hpod::cli
