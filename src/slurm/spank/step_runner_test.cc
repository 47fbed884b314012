#include "hpod/slurm/spank/step_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "hpod/slurm/spank/options.h"
#include "hpod/slurm/spank/spank_test_util.h"

namespace hpod::spank {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Not;
using testing::TempDir;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(AttemptArgv, OverlapGoesRightAfterArgv0FromTheFirstRetry) {
  std::vector<std::string> argv = {"srun", "--auto-resume=1", "-N3", "train.sh"};
  EXPECT_EQ(AttemptArgv(argv, 0, true), argv);
  EXPECT_THAT(AttemptArgv(argv, 1, true),
              ElementsAre("srun", "--overlap", "--auto-resume=1", "-N3", "train.sh"));
  EXPECT_THAT(AttemptArgv(argv, 2, true),
              ElementsAre("srun", "--overlap", "--auto-resume=1", "-N3", "train.sh"));
  EXPECT_EQ(AttemptArgv(argv, 1, false), argv);
}

TEST(AttemptEnv, OverridesReplaceInheritedValues) {
  char a[] = "PATH=/bin";
  char b[] = "HPOD_AUTO_RESUME_ATTEMPT=0";
  char c[] = "EMPTY=";
  char* base[] = {a, b, c, nullptr};
  EXPECT_THAT(AttemptEnv(base, {{"HPOD_AUTO_RESUME_ATTEMPT", "1"}, {"NEW", "x"}}),
              ElementsAre("PATH=/bin", "EMPTY=", "HPOD_AUTO_RESUME_ATTEMPT=1", "NEW=x"));
  EXPECT_THAT(AttemptEnv(nullptr, {{"A", "1"}}), ElementsAre("A=1"));
}

TEST(ReadCmdline, SplitsOnNul) {
  TempDir dir;
  {
    std::ofstream f(dir.path("cmdline"), std::ios::binary);
    f << std::string("srun\0--auto-resume=1\0\0hostname\0", 30);
  }
  auto argv = ReadCmdline(dir.path("cmdline"));
  ASSERT_TRUE(argv.ok());
  EXPECT_THAT(*argv, ElementsAre("srun", "--auto-resume=1", "", "hostname"));
  EXPECT_FALSE(ReadCmdline(dir.path("missing")).ok());
  auto self = ReadCmdline();
  ASSERT_TRUE(self.ok());
  EXPECT_FALSE(self->empty());
}

// A stand-in for srun: records its attempt, ledger variable and arguments, reports
// $STEP as its step id like the child srun's plugin, and exits with $CODE.
class ForkExecRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    script_ = dir_.path("fake-srun");
    std::ofstream f(script_);
    f << "#!/bin/sh\n"
         "echo \"$HPOD_AUTO_RESUME_ATTEMPT|$HPOD_GOODPUT_FILE|$*\" >> \"$OUT\"\n"
         "if [ -n \"$STEP\" ]; then echo \"$STEP\" > /proc/self/fd/$HPOD_AUTO_RESUME_STEP_FD; fi\n"
         "if [ -n \"$READY\" ]; then touch \"$READY\"; exec sleep 60; fi\n"
         "if [ -n \"$KILL\" ]; then kill -KILL $$; fi\n"
         "exit ${CODE:-0}\n";
    f.close();
    chmod(script_.c_str(), 0755);
    options_.executable = script_;
    options_.argv = {script_, "-N3", "train.sh"};
    options_.env = {{"OUT", dir_.path("out")}, {kGoodputFileEnv, "/submit/.hpod/goodput-12.jsonl"}};
  }

  TempDir dir_;
  std::string script_;
  ForkExecOptions options_;
};

TEST_F(ForkExecRunnerTest, SetsTheAttemptAndInsertsOverlapFromAttemptOne) {
  options_.env.emplace_back("CODE", "3");
  ForkExecRunner runner(options_);
  auto first = runner.Run(0, {});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->exit_code, 3);
  EXPECT_EQ(first->user_signal, 0);
  auto second = runner.Run(1, {});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(ReadAll(dir_.path("out")),
            "0|/submit/.hpod/goodput-12.jsonl|-N3 train.sh\n"
            "1|/submit/.hpod/goodput-12.jsonl|--overlap -N3 train.sh\n");
}

TEST_F(ForkExecRunnerTest, ReadsTheStepIdTheChildReports) {
  options_.env.emplace_back("STEP", "7");
  ForkExecRunner runner(options_);
  auto r = runner.Run(0, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->step_id, "7");
  options_.step_id_pipe = false;
  options_.env.pop_back();
  ForkExecRunner no_pipe(options_);
  EXPECT_EQ(no_pipe.Run(0, {})->step_id, "");
}

TEST_F(ForkExecRunnerTest, ASignalDeathIs128PlusTheSignal) {
  options_.env.emplace_back("KILL", "1");
  ForkExecRunner runner(options_);
  auto r = runner.Run(0, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 128 + SIGKILL);
  EXPECT_EQ(r->user_signal, 0);
}

TEST_F(ForkExecRunnerTest, AnExecFailureIs127) {
  options_.executable = dir_.path("no-such-srun");
  ForkExecRunner runner(options_);
  auto r = runner.Run(0, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 127);
}

TEST_F(ForkExecRunnerTest, ForwardsTheUsersSigtermAndRemembersIt) {
  const std::string ready = dir_.path("ready");
  options_.env.emplace_back("READY", ready);
  ForkExecRunner runner(options_);
  std::thread user([&ready] {
    // Waits for the child to run (a bound, not a timing assertion), then plays the
    // user's `kill -TERM <srun>`.
    for (int i = 0; i < 3000 && !std::filesystem::exists(ready); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(getpid(), SIGTERM);
  });
  auto r = runner.Run(0, {});
  user.join();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->user_signal, SIGTERM);
  EXPECT_EQ(r->exit_code, 128 + SIGTERM);
  // Run restored the default disposition.
  struct sigaction now {};
  sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

TEST_F(ForkExecRunnerTest, TheWatchEndsTheChildAndIsAskedWhileItRuns) {
  // The child would sleep 60 s; the watch says "end it" on its third call.
  const std::string ready = dir_.path("ready");
  options_.env.emplace_back("READY", ready);
  options_.watch_interval = std::chrono::milliseconds(20);
  ForkExecRunner runner(options_);
  int calls = 0;
  auto r = runner.Run(0, [&] { return ++calls == 3; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(calls, 3);
  EXPECT_TRUE(r->ended_by_watch);
  EXPECT_EQ(r->exit_code, 128 + SIGKILL);
  // A watch that never fires leaves a normal exit alone.
  options_.env.pop_back();
  ForkExecRunner quick(options_);
  auto q = quick.Run(0, [] { return false; });
  ASSERT_TRUE(q.ok());
  EXPECT_FALSE(q->ended_by_watch);
  EXPECT_EQ(q->exit_code, 0);
}

TEST(ReportStepIdToSupervisor, WritesOnlyToItsParentsPipe) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::string fd = std::to_string(fds[1]);
  const std::string parent = std::to_string(getppid());
  EXPECT_EQ(ReportStepIdToSupervisor(fd.c_str(), "999999999", getppid(), "4").code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReportStepIdToSupervisor(nullptr, parent.c_str(), getppid(), "4").code(),
            StatusCode::kFailedPrecondition);
  ASSERT_TRUE(ReportStepIdToSupervisor(fd.c_str(), parent.c_str(), getppid(), "4").ok());
  char buf[8] = {};
  EXPECT_EQ(read(fds[0], buf, sizeof(buf)), 2);
  EXPECT_STREQ(buf, "4\n");
  close(fds[0]);

  // A number that names a regular file (a task on another node) is left alone.
  TempDir dir;
  std::ofstream(dir.path("file")) << "";
  FILE* f = fopen(dir.path("file").c_str(), "w");
  const std::string file_fd = std::to_string(fileno(f));
  EXPECT_EQ(ReportStepIdToSupervisor(file_fd.c_str(), parent.c_str(), getppid(), "4").code(),
            StatusCode::kFailedPrecondition);
  fclose(f);
  EXPECT_EQ(ReadAll(dir.path("file")), "");
}

}  // namespace
}  // namespace hpod::spank
