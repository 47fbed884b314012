#include "hpod/base/signals.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "hpod/base/subprocess.h"

namespace hpod {
namespace {

using namespace std::chrono_literals;

// What the watcher saw, for the test thread to wait on.
class Seen {
 public:
  void Add(int sig) {
    std::lock_guard<std::mutex> l(mu_);
    signals_.push_back(sig);
    cv_.notify_all();
  }
  // The signals seen once `n` have arrived, or what arrived within 10 s.
  std::vector<int> WaitFor(size_t n) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, 10s, [&] { return signals_.size() >= n; });
    return signals_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> signals_;
};

bool BlockedInThisThread(int sig) {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  return sigismember(&now, sig) == 1;
}

// Takes a pending `sig` so later tests in this process start clean.
void Drain(int sig) {
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  timespec zero{};
  while (sigtimedwait(&one, nullptr, &zero) == sig) {
  }
}

TEST(SignalWatcherTest, DeliversEachSignalToTheCallbackInOrder) {
  Seen seen;
  auto w = SignalWatcher::Start({SIGUSR1, SIGUSR2}, [&](int sig) { seen.Add(sig); });
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
  ASSERT_EQ(seen.WaitFor(1).size(), 1u);
  ASSERT_EQ(kill(getpid(), SIGUSR2), 0);
  EXPECT_EQ(seen.WaitFor(2), (std::vector<int>{SIGUSR1, SIGUSR2}));
}

TEST(SignalWatcherTest, ASignalThatArrivedBeforeStartIsDeliveredFirst) {
  // As hpod-train's .preinit_array block leaves it: blocked, pending, unread.
  BlockSignals({SIGUSR1});
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
  Seen seen;
  auto w = SignalWatcher::Start({SIGUSR1}, [&](int sig) { seen.Add(sig); });
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(seen.WaitFor(1), std::vector<int>{SIGUSR1});
}

TEST(SignalWatcherTest, ThreadsStartedAfterwardsInheritTheMask) {
  auto w = SignalWatcher::Start({SIGTERM, SIGINT}, [](int) {});
  ASSERT_TRUE(w.ok());
  std::atomic<bool> term{false}, intr{false};
  std::thread t([&] {
    term = BlockedInThisThread(SIGTERM);
    intr = BlockedInThisThread(SIGINT);
  });
  t.join();
  EXPECT_TRUE(term);
  EXPECT_TRUE(intr);
}

TEST(SignalWatcherTest, AfterStopTheSignalsStayBlockedInsteadOfKilling) {
  {
    auto w = SignalWatcher::Start({SIGUSR1}, [](int) {});
    ASSERT_TRUE(w.ok());
  }
  // SIGUSR1's default action would end this test process.
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
  sigset_t pending;
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGUSR1), 1);
  Drain(SIGUSR1);
}

TEST(SignalWatcherTest, SurvivesAStormWhileOtherThreadsAllocate) {
  std::atomic<int> calls{0};
  auto w = SignalWatcher::Start({SIGUSR1}, [&](int) { calls.fetch_add(1); });
  ASSERT_TRUE(w.ok());
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < 2; ++t) {
    workers.emplace_back([&] {
      while (!stop) {
        std::vector<std::vector<char>> v(64);
        for (auto& b : v) b.resize(4096 + v.size());
      }
    });
  }
  for (int i = 0; i < 5000; ++i) ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
  stop = true;
  for (auto& t : workers) t.join();
  // Arrivals coalesce while the watcher is busy, so only "some" is exact.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (calls.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_GT(calls.load(), 0);
  EXPECT_LE(calls.load(), 5000);
}

TEST(SignalWatcherTest, RefusesWhatCannotBeWatched) {
  EXPECT_EQ(SignalWatcher::Start({}, [](int) {}).status().code(), StatusCode::kInvalidArgument);
  auto kill9 = SignalWatcher::Start({SIGTERM, SIGKILL}, [](int) {});
  EXPECT_EQ(kill9.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(kill9.status().message().find("SIGKILL"), std::string::npos);
}

TEST(SignalsTest, ResetForExecEmptiesTheMaskAndRestoresDefaults) {
  BlockSignals({SIGTERM, SIGUSR2});
  signal(SIGHUP, SIG_IGN);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ResetSignalsForExec();
    sigset_t now;
    sigprocmask(SIG_BLOCK, nullptr, &now);
    struct sigaction hup;
    sigaction(SIGHUP, nullptr, &hup);
    const bool clean = sigismember(&now, SIGTERM) == 0 && sigismember(&now, SIGUSR2) == 0 &&
                       hup.sa_handler == SIG_DFL;
    _exit(clean ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  signal(SIGHUP, SIG_DFL);
}

TEST(SignalsTest, SubprocessChildrenStartUnblocked) {
  // A daemon blocks SIGTERM for its watcher; its children must not inherit it.
  BlockSignals({SIGTERM, SIGINT});
  SubprocessOptions o;
  o.argv = {"sh", "-c", "grep '^SigBlk' /proc/self/status"};
  auto r = RunCommand(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "SigBlk:\t0000000000000000\n");
}

TEST(SignalsTest, Names) {
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(SignalName(1000), "signal 1000");
}

}  // namespace
}  // namespace hpod
