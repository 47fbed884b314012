// LocalProvider::InjectFault against FakeNodeHost: which host action each fault
// kind asks for. The same faults on real namespaces: local_provider_root_test.cc.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "hpod/base/clock.h"
#include "hpod/provider/local/local_provider.h"
#include "hpod/provider/local/local_provider_test_fixture.h"

namespace hpod::provider::local {
namespace {

using test_support::LocalProviderTest;
using test_support::ReadFile;
using ::testing::HasSubstr;
namespace fs = std::filesystem;
using Kind = FaultSpec::Kind;

FaultSpec Fault(Kind kind, int seconds = 0, int xid = 0) { return {kind, seconds, xid}; }

TEST_F(LocalProviderTest, FaultsNeedALiveKnownNode) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  EXPECT_EQ(p->InjectFault("i-x", Fault(Kind::kKillNode)).code(), StatusCode::kNotFound);
  host_.SimulateDeath(p->NodeProcess("i-1")->pid);
  Status s = p->InjectFault("i-1", Fault(Kind::kHang));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("is not running"));
}

TEST_F(LocalProviderTest, KillNodeKillsPidOneAndLeavesTheRestToRecovery) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  auto pid1 = *p->NodeProcess("i-1");
  ASSERT_TRUE(p->InjectFault("i-1", Fault(Kind::kKillNode)).ok());
  EXPECT_FALSE(host_.IsAlive(pid1));
  EXPECT_EQ(Observe(*p, "i-1").state, NodeState::kFailed);
  EXPECT_EQ(host_.netns(), std::set<std::string>{"hpn0"});  // not cleaned up
  EXPECT_TRUE(fs::exists(p->NodeDir("i-1") + "/node.json"));
  EXPECT_EQ(p->InjectFault("i-1", Fault(Kind::kKillNode)).code(), StatusCode::kFailedPrecondition);
}

TEST_F(LocalProviderTest, KillAgentAndKillSlurmdKillOnlyTheirProcess) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  auto pid1 = *p->NodeProcess("i-1");
  ProcessId agent = host_.AddNodeProcess(pid1.pid, "hpod-agent");
  ProcessId slurmd = host_.AddNodeProcess(pid1.pid, "slurmd");
  ProcessId other = host_.AddNodeProcess(pid1.pid, "python3");

  ASSERT_TRUE(p->InjectFault("i-1", Fault(Kind::kKillSlurmd)).ok());
  EXPECT_EQ(host_.signals(), (std::map<pid_t, int>{{slurmd.pid, SIGKILL}}));
  Status again = p->InjectFault("i-1", Fault(Kind::kKillSlurmd));
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.message(), "node i-1 runs no slurmd process");

  ASSERT_TRUE(p->InjectFault("i-1", Fault(Kind::kKillAgent)).ok());
  EXPECT_EQ(host_.signals(), (std::map<pid_t, int>{{slurmd.pid, SIGKILL}, {agent.pid, SIGKILL}}));
  EXPECT_EQ(host_.signals().count(other.pid), 0u);
  EXPECT_EQ(host_.signals().count(pid1.pid), 0u);
  EXPECT_EQ(p->InjectFault("i-1", Fault(Kind::kKillAgent)).code(), StatusCode::kFailedPrecondition);
}

TEST_F(LocalProviderTest, HangStopsEveryProcessAndTerminateStillWorks) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  auto pid1 = *p->NodeProcess("i-1");
  ProcessId a = host_.AddNodeProcess(pid1.pid, "hpod-agent");
  ProcessId b = host_.AddNodeProcess(pid1.pid, "slurmd");
  ASSERT_TRUE(p->InjectFault("i-1", Fault(Kind::kHang)).ok());
  EXPECT_EQ(host_.signals(),
            (std::map<pid_t, int>{{pid1.pid, SIGSTOP}, {a.pid, SIGSTOP}, {b.pid, SIGSTOP}}));
  // PID 1 first, so it cannot react to its children stopping.
  auto calls = host_.calls();
  auto first = std::find_if(calls.begin(), calls.end(),
                            [](const std::string& c) { return c.rfind("Signal", 0) == 0; });
  ASSERT_NE(first, calls.end());
  EXPECT_EQ(*first, "Signal " + std::to_string(pid1.pid) + " " + std::to_string(SIGSTOP));
  ASSERT_TRUE(p->Terminate("i-1").ok());
  EXPECT_EQ(host_.live_processes(), 0u);
}

TEST_F(LocalProviderTest, FlagFileIsWrittenInsideTheNodesMountNamespace) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  ASSERT_TRUE(p->InjectFault("i-1", Fault(Kind::kFlagFile)).ok());
  EXPECT_EQ(host_.calls().back(), "RunInNodeMounts " + std::to_string(p->NodeProcess("i-1")->pid) +
                                      " sh -c echo 1 >> /var/run/sagemaker_healthcheck_status");
}

// The faults behind failing deep health checks: the node's processes in a CPU
// cgroup of their own (removed with the node), and its side of the link shaped.
TEST_F(LocalProviderTest, CpuThrottleAndSlowLinkActOnTheNodeAndGoWithIt) {
  auto p = Make();
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  const auto pid1 = p->NodeProcess("i-1")->pid;
  ASSERT_TRUE(p->InjectFault("i-1", Fault(Kind::kCpuThrottle)).ok());
  EXPECT_EQ(host_.calls().back(), "ThrottleCpu " + std::to_string(pid1) + " hpod-throttle-i-1 2");
  ASSERT_TRUE(p->InjectFault("i-1", Fault(Kind::kSlowLink)).ok());
  EXPECT_EQ(host_.calls().back().rfind("ShapeEgress ", 0), 0u) << host_.calls().back();
  EXPECT_NE(host_.calls().back().find(" eth0 100000"), std::string::npos) << host_.calls().back();
  ASSERT_TRUE(p->Terminate("i-1").ok());
  auto calls = host_.calls();
  EXPECT_NE(std::find(calls.begin(), calls.end(), "RemoveCpuThrottle hpod-throttle-i-1"),
            calls.end());
}

TEST_F(LocalProviderTest, PartitionEndsAtItsDeadlineAlsoAfterARestart) {
  FakeClock clock;
  auto o = Options();
  o.clock = &clock;
  auto p = Make(o);
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  ASSERT_TRUE(p->Launch(Spec("i-2")).ok());
  EXPECT_EQ(p->InjectFault("i-1", Fault(Kind::kPartition, 0)).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(p->InjectFault("i-1", Fault(Kind::kPartition, 20)).ok());
  ASSERT_TRUE(p->InjectFault("i-2", Fault(Kind::kPartition, 60)).ok());
  EXPECT_EQ(host_.links_down(), (std::set<std::string>{"hpv0h", "hpv1h"}));
  auto node = nlohmann::json::parse(ReadFile(p->NodeDir("i-1") + "/node.json"));
  EXPECT_EQ(node["partition_until"], 1700000020.0);
  auto next = p->RestoreExpiredPartitions();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(*next, clock.Now() + std::chrono::seconds(20));
  EXPECT_EQ(host_.links_down().size(), 2u);

  // hpodd is down when the first partition ends; the next Create ends it.
  p.reset();
  clock.AdvanceTime(std::chrono::seconds(21));
  p = Make(o);
  EXPECT_EQ(host_.links_down(), std::set<std::string>{"hpv1h"});
  node = nlohmann::json::parse(ReadFile(p->NodeDir("i-1") + "/node.json"));
  EXPECT_EQ(node["partition_until"], 0);

  // The second ends while hpodd runs.
  clock.AdvanceTime(std::chrono::seconds(40));
  EXPECT_FALSE(p->RestoreExpiredPartitions().has_value());
  EXPECT_TRUE(host_.links_down().empty());
}

TEST_F(LocalProviderTest, PartitionTimerBringsTheLinkUpOnItsOwn) {
  auto p = Make();  // the real clock
  ASSERT_TRUE(p->Launch(Spec("i-1")).ok());
  ASSERT_TRUE(p->InjectFault("i-1", Fault(Kind::kPartition, 1)).ok());
  EXPECT_EQ(host_.links_down(), std::set<std::string>{"hpv0h"});
  // A condition with a generous deadline, never a bound on how fast.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!host_.links_down().empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(host_.links_down().empty());
}

}  // namespace
}  // namespace hpod::provider::local
