// Sessions on a node of a cluster without Slurm: Slurm's commands answer with a
// one-line hint, in the shells sessions run (`bash -l`, `bash -lc CMD`).

#include "hpod/agent/session.h"

#include <gtest/gtest.h>

#include "hpod/agent/test_util.h"
#include "hpod/api/agent_protocol.h"
#include "hpod/base/subprocess.h"

namespace hpod::agent {
namespace {

using testing::TempDir;
using testing::WriteTestFile;

SubprocessResult Bash(const std::map<std::string, std::string>& env,
                      std::vector<std::string> argv) {
  SubprocessOptions o;
  o.argv = std::move(argv);
  o.env = env;
  o.timeout = std::chrono::seconds(20);
  auto r = RunCommand(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : SubprocessResult{};
}

TEST(NoSlurmSessionTest, OnlyNodesMarkedWithoutSlurmGetTheHints) {
  TempDir dir;
  EXPECT_TRUE(SessionEnvironment(dir / "no-slurm").empty());
  WriteTestFile(dir / "no-slurm", "x\n");
  auto env = SessionEnvironment(dir / "no-slurm");
  EXPECT_EQ(env.size(), 7u);
  EXPECT_EQ(NoSlurmHint("sinfo"),
            "sinfo: this hpod cluster has no Slurm (no instance group has a Slurm role); see "
            "/opt/hpod/motd");
}

TEST(NoSlurmSessionTest, SlurmCommandsPrintTheHintAndFailInLoginShells) {
  TempDir dir;
  WriteTestFile(dir / "no-slurm", "x\n");
  const auto env = SessionEnvironment(dir / "no-slurm");
  // `hpod start-session --command sinfo` runs `bash -lc sinfo`: /etc/profile
  // resets PATH, the exported functions survive.
  for (const char* command : kSlurmCommands) {
    SubprocessResult r = Bash(env, {"bash", "-lc", std::string(command) + " --version"});
    EXPECT_EQ(r.exit_code, 1) << command;
    EXPECT_EQ(r.stderr_data, NoSlurmHint(command) + "\n") << command;
    EXPECT_EQ(r.stdout_data, "") << command;
  }
  // A real sinfo on PATH is shadowed, in child bash processes (a user's script) too.
  WriteTestFile(dir / "bin/sinfo", "#!/bin/sh\necho real sinfo\n", 0755);
  auto with_path = env;
  with_path["PATH"] = dir.path() + "/bin:/usr/bin:/bin";
  SubprocessResult nested = Bash(with_path, {"bash", "-c", "bash -c sinfo; echo status $?"});
  EXPECT_EQ(nested.stdout_data, "status 1\n");
  EXPECT_EQ(nested.stderr_data, NoSlurmHint("sinfo") + "\n");
  // Without the marker the same shell runs the real one.
  SubprocessResult plain = Bash({{"PATH", with_path["PATH"]}}, {"bash", "-c", "sinfo"});
  EXPECT_EQ(plain.stdout_data, "real sinfo\n");
}

}  // namespace
}  // namespace hpod::agent

namespace hpod::agent {
namespace {

nlohmann::json Open(const std::string& user, std::vector<std::string> argv = {}) {
  api::agentproto::OpenSession m;
  m.session_id = "s-1";
  m.argv = std::move(argv);
  m.user = user;
  return m.ToJson();
}

TEST(SessionUserTest, RunsAsTheUserThroughRunuser) {
  auto root = ParseSessionRequest(Open(""));
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(SessionArgv(*root)[0], "/bin/bash");
  EXPECT_EQ(SessionArgv(*root).back().find("runuser"), std::string::npos);

  auto shell = ParseSessionRequest(Open("alice"));
  ASSERT_TRUE(shell.ok()) << shell.status().ToString();
  const std::vector<std::string> login = SessionArgv(*shell);
  ASSERT_EQ(login.size(), 4u);
  EXPECT_NE(login[2].find("exec runuser -l \"$0\""), std::string::npos) << login[2];
  EXPECT_EQ(login[3], "alice");  // $0: never part of the script

  auto cmd = ParseSessionRequest(Open("alice", {"bash", "-lc", "id -un"}));
  ASSERT_TRUE(cmd.ok());
  EXPECT_FALSE(cmd->unprivileged);
  nlohmann::json limited = Open("alice");
  limited["unprivileged"] = true;
  EXPECT_TRUE(ParseSessionRequest(limited)->unprivileged);
  EXPECT_EQ(SessionArgv(*cmd),
            (std::vector<std::string>{"runuser", "-u", "alice", "--", "bash", "-lc", "id -un"}));

  for (const std::string& bad :
       std::vector<std::string>{"Alice", "a b", "x;id", "-x", "1ab", std::string(33, 'a')}) {
    EXPECT_FALSE(ParseSessionRequest(Open(bad)).ok()) << bad;
  }
}

}  // namespace
}  // namespace hpod::agent
