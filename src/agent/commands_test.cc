#include "hpod/agent/commands.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "hpod/base/crypto.h"

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

// hpodd asks for "hpod-deep-check" by name: the copy shipped with the agent is
// run, installed beside it or in the build tree; other names go to PATH.
TEST(CommandsTest, ShippedProgramsAreFoundBesideTheAgent) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "shipped";
  fs::remove_all(dir);
  fs::create_directories(dir / "bin");
  fs::create_directories(dir / "build/cmd/hpod-agent");
  fs::create_directories(dir / "build/cmd/hpod-deep-check");
  for (const fs::path& p :
       {dir / "bin/hpod-deep-check", dir / "build/cmd/hpod-deep-check/hpod-deep-check"}) {
    std::ofstream(p) << "#!/bin/sh\n";
    fs::permissions(p, fs::perms::owner_all);
  }
  EXPECT_EQ(ShippedProgram("hpod-deep-check", (dir / "bin/hpod-agent").string()),
            (dir / "bin/hpod-deep-check").string());
  EXPECT_EQ(ShippedProgram("hpod-deep-check", (dir / "build/cmd/hpod-agent/hpod-agent").string()),
            (dir / "build/cmd/hpod-deep-check/hpod-deep-check").string());
  EXPECT_EQ(ShippedProgram("hpod-missing", (dir / "bin/hpod-agent").string()), "hpod-missing");
  // A copy in the agent's state directory wins (a local node cannot see a build
  // tree under hpodd's /tmp).
  fs::create_directories(dir / "state");
  std::ofstream(dir / "state/hpod-deep-check") << "#!/bin/sh\n";
  fs::permissions(dir / "state/hpod-deep-check", fs::perms::owner_all);
  EXPECT_EQ(ShippedProgram("hpod-deep-check", (dir / "bin/hpod-agent").string(),
                           (dir / "state").string()),
            (dir / "state/hpod-deep-check").string());
  EXPECT_EQ(ShippedProgram("scontrol", (dir / "bin/hpod-agent").string()), "scontrol");
  fs::remove_all(dir);
}

TEST(CommandsTest, RunningSoftwareDigestsWhatTheAgentRuns) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "running_software";
  fs::remove_all(dir);
  fs::create_directories(dir / "bin");
  fs::create_directories(dir / "lib/hpod");
  fs::create_directories(dir / "state");
  std::ofstream(dir / "bin/hpod-agent") << "agent";
  std::ofstream(dir / "lib/hpod/spank_hpod.so") << "plugin";
  std::ofstream(dir / "state/hpod-deep-check") << "check";
  fs::permissions(dir / "state/hpod-deep-check", fs::perms::owner_all);
  auto sw = RunningSoftware((dir / "state").string(), (dir / "bin/hpod-agent").string());
  EXPECT_EQ(sw,
            (std::map<std::string, std::string>{{"hpod-agent", HexEncode(Sha256("agent"))},
                                                {"hpod-deep-check", HexEncode(Sha256("check"))},
                                                {"spank_hpod.so", HexEncode(Sha256("plugin"))}}));
  // A plugin in the state dir (a local node's copy) is the one slurmd loads there.
  std::ofstream(dir / "state/spank_hpod.so") << "node copy";
  sw = RunningSoftware((dir / "state").string(), (dir / "bin/hpod-agent").string());
  EXPECT_EQ(sw["spank_hpod.so"], HexEncode(Sha256("node copy")));
  fs::remove_all(dir);
}

TEST(CommandsTest, MalformedCommandIsAnsweredWithTheField) {
  CommandRunner runner({}, [](json) {});
  json reply = runner.Execute(
      ParseCommandRequest(json::parse(R"({"type":"command","id":"c-9","argv":["a",1]})")));
  EXPECT_EQ(reply["id"], "c-9");
  EXPECT_EQ(reply["exit_code"], -1);
  EXPECT_EQ(reply["error"], "malformed command: command: field 'argv[1]' must be a string");
}

TEST(CommandsTest, TimeoutAndStartFailureAndCap) {
  CommandRunnerOptions options;
  options.max_output_bytes = 1000;
  CommandRunner runner(options, [](json) {});
  json timed = runner.Execute(
      CommandRequest{"c-2", {"sleep", "10"}, {}, "", std::chrono::milliseconds(200), ""});
  EXPECT_EQ(timed["timed_out"], true);
  json missing = runner.Execute(CommandRequest{"c-3", {"/no/such/program"}, {}, "", {}, ""});
  EXPECT_NE(missing["error"].get<std::string>(), "");
  json big =
      runner.Execute(CommandRequest{"c-4", {"head", "-c", "5000", "/dev/zero"}, {}, "", {}, ""});
  EXPECT_LE(big["stdout"].get<std::string>().size(), 1000u);
}

TEST(CommandsTest, SubmitRunsConcurrentlyAndReplies) {
  // Each command waits until all four have started, so a runner that ran them one
  // at a time would see the first one time out instead of exiting 0.
  char dir_template[] = "/tmp/hpod-commands-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<json> replies;
  CommandRunner runner({}, [&](json reply) {
    std::lock_guard<std::mutex> lock(mu);
    replies.push_back(std::move(reply));
    cv.notify_all();
  });
  const std::string script =
      "touch " + dir + "/$0; while [ $(ls " + dir + " | wc -l) -lt 4 ]; do sleep 0.02; done";
  for (int i = 0; i < 4; ++i) {
    runner.Submit(CommandRequest{"c-" + std::to_string(i),
                                 {"sh", "-c", script, "c" + std::to_string(i)},
                                 {},
                                 "",
                                 std::chrono::milliseconds(20000),
                                 ""});
  }
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return replies.size() == 4; }));
  for (const auto& r : replies) {
    EXPECT_EQ(r["exit_code"], 0) << r.dump();
    EXPECT_FALSE(r["timed_out"].get<bool>()) << r.dump();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hpod::agent
