#include "hpod/base/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace hpod {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

SubprocessResult RunArgv(std::vector<std::string> argv, std::chrono::milliseconds timeout = 10s) {
  SubprocessOptions o;
  o.argv = std::move(argv);
  o.timeout = timeout;
  auto r = RunCommand(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : SubprocessResult{};
}

// True when `pid` is gone or a zombie nobody reaped yet (it runs no code).
bool ProcessGone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = all.rfind(')');
  return paren != std::string::npos && paren + 2 < all.size() && all[paren + 2] == 'Z';
}

TEST(RunCommandTest, CapturesOutputAndExitCode) {
  auto r = RunArgv({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.signaled);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.stdout_data, "out\n");
  EXPECT_EQ(r.stderr_data, "err\n");
}

TEST(RunCommandTest, SignalIsReportedAs128PlusN) {
  auto r = RunArgv({"sh", "-c", "kill -USR1 $$"});
  EXPECT_TRUE(r.signaled);
  EXPECT_EQ(r.exit_code, 128 + SIGUSR1);
}

TEST(RunCommandTest, MergeStderr) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", "echo a; echo b >&2; echo c"};
  o.merge_stderr = true;
  auto r = RunCommand(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "a\nb\nc\n");
  EXPECT_EQ(r->stderr_data, "");
}

TEST(RunCommandTest, TimeoutKillsTheWholeGroup) {
  SubprocessOptions o;
  // The grandchild's pid is printed first; the shell then waits on its own sleep.
  o.argv = {"sh", "-c", "sleep 100 & echo $!; sleep 100"};
  o.timeout = 300ms;
  o.kill_grace = 1s;
  auto start = std::chrono::steady_clock::now();
  auto r = RunCommand(o);
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->timed_out);
  EXPECT_TRUE(r->signaled);
  EXPECT_EQ(r->exit_code, 128 + SIGTERM);
  // Far below the 100 s the sleeps would take: the timeout, not the sleep, ended it.
  EXPECT_LT(took, 30s);
  pid_t grandchild = std::stoi(r->stdout_data);
  ASSERT_GT(grandchild, 1);
  // SIGTERM was delivered to the group, so the grandchild is dying or dead; give
  // the kernel a moment to finish it (this waits for an event, not for timing).
  for (int i = 0; i < 100 && !ProcessGone(grandchild); ++i) usleep(10 * 1000);
  EXPECT_TRUE(ProcessGone(grandchild)) << "grandchild " << grandchild << " survived";
}

TEST(RunCommandTest, TimeoutEscalatesToSigkill) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"};
  o.timeout = 200ms;
  o.kill_grace = 200ms;
  auto r = RunCommand(o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, 128 + SIGKILL);
}

TEST(RunCommandTest, StreamsOutputToCallbacks) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", "echo a; sleep 0.2; echo b; echo e >&2"};
  std::vector<std::string> chunks;
  std::string err;
  o.on_stdout = [&](std::string_view c) { chunks.emplace_back(c); };
  o.on_stderr = [&](std::string_view c) { err += c; };
  auto r = RunCommand(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "");  // not accumulated when streamed
  ASSERT_GE(chunks.size(), 2u);   // the sleep separates two writes
  EXPECT_EQ(chunks.front(), "a\n");
  std::string all;
  for (auto& c : chunks) all += c;
  EXPECT_EQ(all, "a\nb\n");
  EXPECT_EQ(err, "e\n");
}

TEST(RunCommandTest, StdinData) {
  SubprocessOptions o;
  o.argv = {"wc", "-c"};
  o.stdin_data = std::string(300000, 'x');  // larger than a pipe buffer
  auto r = RunCommand(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::stoi(r->stdout_data), 300000);
}

TEST(RunCommandTest, StdinIsDevNullByDefault) {
  auto r = RunArgv({"cat"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_data, "");
}

TEST(RunCommandTest, EnvAndCwd) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", "echo \"$HPOD_X|$HPOD_EMPTY|${HOME:-nohome}\"; pwd"};
  o.env = {{"HPOD_X", "1"}, {"HPOD_EMPTY", ""}};
  o.cwd = "/usr";
  auto r = RunCommand(o);
  ASSERT_TRUE(r.ok());
  std::string home = getenv("HOME") ? getenv("HOME") : "nohome";
  EXPECT_EQ(r->stdout_data, "1||" + home + "\n/usr\n");

  o.clear_env = true;
  o.env = {{"HPOD_X", "2"}, {"PATH", "/usr/bin:/bin"}};
  r = RunCommand(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "2||nohome\n/usr\n");
}

TEST(RunCommandTest, UtsHostnameIsTheChildsAndItsChildrensOnly) {
  if (::geteuid() != 0) GTEST_SKIP() << "a UTS namespace needs root";
  char mine[256] = {};
  ASSERT_EQ(::gethostname(mine, sizeof(mine) - 1), 0);
  SubprocessOptions o;
  o.argv = {"sh", "-c", "hostname; sh -c hostname"};
  o.uts_hostname = "hpod-uts-test-node";
  auto r = RunCommand(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "hpod-uts-test-node\nhpod-uts-test-node\n");
  char after[256] = {};
  ASSERT_EQ(::gethostname(after, sizeof(after) - 1), 0);
  EXPECT_STREQ(after, mine);  // the machine's name is untouched
}

TEST(RunCommandTest, MissingProgramIsNotFound) {
  SubprocessOptions o;
  o.argv = {"hpod-no-such-program-xyz"};
  auto r = RunCommand(o);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("hpod-no-such-program-xyz"));
  o.argv = {"/nonexistent/prog"};
  EXPECT_EQ(RunCommand(o).status().code(), StatusCode::kNotFound);
}

TEST(RunCommandTest, BadCwdFailsToStart) {
  SubprocessOptions o;
  o.argv = {"true"};
  o.cwd = "/nonexistent-dir-hpod";
  auto r = RunCommand(o);
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("chdir"));
}

TEST(RunCommandTest, TruncatesCapturedOutput) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", "head -c 10000 /dev/zero"};
  o.max_captured_bytes = 100;
  auto r = RunCommand(o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->truncated);
  EXPECT_EQ(r->stdout_data.size(), 100u);
}

TEST(RunCheckedTest, ReturnsStdoutOrError) {
  auto ok = RunChecked({"echo", "hi"});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, "hi\n");
  auto bad = RunChecked({"sh", "-c", "echo first >&2; echo 'the reason' >&2; exit 2"});
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
  EXPECT_EQ(bad.status().message(),
            "sh -c echo first >&2; echo 'the reason' >&2; exit 2: the reason");
  auto slow = RunChecked({"sleep", "5"}, 100ms);
  EXPECT_EQ(slow.status().code(), StatusCode::kDeadlineExceeded);
}

TEST(SubprocessTest, WaitAndKill) {
  SubprocessOptions o;
  o.argv = {"sleep", "100"};
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->Wait(50ms), std::nullopt);
  (*p)->Kill();
  EXPECT_EQ((*p)->Wait(5s), 128 + SIGKILL);

  o.argv = {"sh", "-c", "exit 7"};
  p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->Wait(-1ms), 7);
}

TEST(SubprocessTest, OutputFile) {
  auto path = std::filesystem::temp_directory_path() /
              ("hpod-subprocess-" + std::to_string(getpid()) + ".log");
  SubprocessOptions o;
  o.argv = {"sh", "-c", "echo out; echo err >&2"};
  o.output_file = path.string();
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->Wait(5s), 0);
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), "out\nerr\n");
  std::filesystem::remove(path);
}

TEST(SubprocessTest, ReleasedChildOutlivesTheObject) {
  SubprocessOptions o;
  o.argv = {"sleep", "100"};
  pid_t pid;
  {
    auto p = Subprocess::Start(o);
    ASSERT_TRUE(p.ok());
    pid = (*p)->pid();
    (*p)->Release();
  }
  EXPECT_FALSE(ProcessGone(pid));
  ::kill(pid, SIGKILL);
  int status;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
}

TEST(SubprocessTest, DestructorKillsTheGroup) {
  SubprocessOptions o;
  o.argv = {"sleep", "100"};
  pid_t pid;
  {
    auto p = Subprocess::Start(o);
    ASSERT_TRUE(p.ok());
    pid = (*p)->pid();
  }
  EXPECT_TRUE(ProcessGone(pid));
}

TEST(SubprocessTest, PtyIsTheControllingTerminal) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", "tty; stty size; test -t 0 && echo stdin-is-tty"};
  int master = -1;
  auto p = Subprocess::Start(o, &master, 33, 101);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_GE(master, 0);
  std::string out;
  char buf[1024];
  while (true) {
    pollfd pfd = {master, POLLIN, 0};
    if (::poll(&pfd, 1, 5000) <= 0) break;
    ssize_t n = ::read(master, buf, sizeof(buf));
    if (n <= 0) break;  // EIO once the child closed the slave
    out.append(buf, n);
  }
  EXPECT_EQ((*p)->Wait(5s), 0);
  ::close(master);
  EXPECT_THAT(out, HasSubstr("/dev/pts/"));
  EXPECT_THAT(out, HasSubstr("33 101"));
  EXPECT_THAT(out, HasSubstr("stdin-is-tty"));
}

}  // namespace
}  // namespace hpod
