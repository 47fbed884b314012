#include "hpod/agent/commands.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

namespace hpod::agent {
namespace {

using nlohmann::json;

TEST(CommandsTest, ParsesAndRuns) {
  CommandRunner runner({}, [](json) {});
  auto request = ParseCommandRequest(json::parse(
      R"({"type":"command","id":"c-1","argv":["sh","-c","echo $X; echo e >&2; exit 4"],
          "env":{"X":"hello"},"cwd":"/","timeout_ms":5000})"));
  json reply = runner.Execute(request);
  EXPECT_EQ(reply["type"], "command_result");
  EXPECT_EQ(reply["id"], "c-1");
  EXPECT_EQ(reply["exit_code"], 4);
  EXPECT_EQ(reply["stdout"], "hello\n");
  EXPECT_EQ(reply["stderr"], "e\n");
  EXPECT_EQ(reply["timed_out"], false);
  EXPECT_EQ(reply["error"], "");
}

TEST(CommandsTest, TimeoutAndStartFailureAndCap) {
  CommandRunnerOptions options;
  options.max_output_bytes = 1000;
  CommandRunner runner(options, [](json) {});
  json timed = runner.Execute(
      CommandRequest{"c-2", {"sleep", "10"}, {}, "", std::chrono::milliseconds(200)});
  EXPECT_EQ(timed["timed_out"], true);
  json missing = runner.Execute(CommandRequest{"c-3", {"/no/such/program"}, {}, "", {}});
  EXPECT_NE(missing["error"].get<std::string>(), "");
  json big = runner.Execute(CommandRequest{"c-4", {"head", "-c", "5000", "/dev/zero"}, {}, "", {}});
  EXPECT_LE(big["stdout"].get<std::string>().size(), 1000u);
}

TEST(CommandsTest, SubmitRunsConcurrentlyAndReplies) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> ids;
  CommandRunner runner({}, [&](json reply) {
    std::lock_guard<std::mutex> lock(mu);
    ids.push_back(reply["id"]);
    cv.notify_all();
  });
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 4; ++i) {
    runner.Submit(CommandRequest{"c-" + std::to_string(i), {"sleep", "0.5"}, {}, "", {}});
  }
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return ids.size() == 4; }));
  // Four half-second commands in parallel take well under their serial 2 s.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1800));
}

}  // namespace
}  // namespace hpod::agent
