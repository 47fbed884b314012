#include "hpod/provider/fake/fake_provider.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace hpod::provider {
namespace {

LaunchSpec Spec(const std::string& id, const std::string& group = "workers") {
  LaunchSpec s;
  s.instance_id = id;
  s.cluster_id = "c1";
  s.group_name = group;
  s.instance_type = "ml.c5.xlarge";
  return s;
}

TEST(FakeProviderTest, PendingThenRunningThenTerminated) {
  FakeClock clock;
  FakeProviderOptions o;
  o.pending_for = std::chrono::seconds(2);
  FakeProvider p(clock, o);
  ASSERT_TRUE(p.Launch(Spec("i-1")).ok());
  ASSERT_TRUE(p.Launch(Spec("i-1")).ok());  // idempotent
  EXPECT_EQ(p.node_count(), 1u);
  EXPECT_EQ(p.Describe("i-1")->state, NodeState::kPending);
  clock.AdvanceTime(std::chrono::seconds(3));
  auto d = p.Describe("i-1");
  EXPECT_EQ(d->state, NodeState::kRunning);
  EXPECT_FALSE(d->private_ip.empty());
  ASSERT_TRUE(p.Terminate("i-1").ok());
  EXPECT_EQ(p.Describe("i-1")->state, NodeState::kTerminated);
  EXPECT_EQ(p.Describe("i-1").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(p.Terminate("i-1").ok());  // idempotent on a gone node
}

// TerminateAndCheckGone (provider.h): false while terminating, then true, and
// true for an id the provider no longer knows; a transient error is returned.
TEST(FakeProviderTest, TerminateAndCheckGoneFollowsTheTermination) {
  FakeClock clock;
  FakeProviderOptions o;
  o.terminating_for = std::chrono::seconds(2);
  FakeProvider p(clock, o);
  ASSERT_TRUE(p.Launch(Spec("i-1")).ok());
  auto gone = TerminateAndCheckGone(p, "i-1");
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_FALSE(*gone);
  clock.AdvanceTime(std::chrono::seconds(3));
  for (const char* id : {"i-1", "i-never"}) {
    gone = TerminateAndCheckGone(p, id);
    ASSERT_TRUE(gone.ok()) << gone.status().ToString();
    EXPECT_TRUE(*gone) << id;
  }
  p.FailNextCalls(1);
  EXPECT_EQ(TerminateAndCheckGone(p, "i-1").status().code(), StatusCode::kUnavailable);
}

TEST(FakeProviderTest, FailuresAndCapacity) {
  FakeClock clock;
  FakeProviderOptions o;
  o.fail_groups = {"bad"};
  o.capacity = 2;
  FakeProvider p(clock, o);
  ASSERT_TRUE(p.Launch(Spec("i-1", "bad")).ok());
  EXPECT_EQ(p.Describe("i-1")->state, NodeState::kFailed);
  ASSERT_TRUE(p.Launch(Spec("i-2")).ok());
  EXPECT_EQ(p.Launch(Spec("i-3")).code(), StatusCode::kResourceExhausted);
  p.FailNextCalls(1);
  EXPECT_EQ(p.Describe("i-2").status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(p.Describe("i-2").ok());
}

TEST(FakeProviderTest, StateDirSurvivesRestart) {
  auto dir = std::filesystem::temp_directory_path() / ("hpod-fake-" + std::to_string(getpid()));
  FakeClock clock;
  FakeProviderOptions o;
  o.state_dir = dir.string();
  {
    FakeProvider p(clock, o);
    ASSERT_TRUE(p.Launch(Spec("i-1")).ok());
  }
  {
    FakeProvider p(clock, o);
    EXPECT_EQ(p.node_count(), 1u);
    EXPECT_EQ(p.Describe("i-1")->state, NodeState::kRunning);
    EXPECT_EQ(p.List("c1")->size(), 1u);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hpod::provider

namespace hpod::provider {
namespace {

// The node simulator's hand-off (FakeProviderOptions::agent_dir): a launch leaves
// the agent config a real provider would put into the node, a reboot rewrites it
// with the next boot, and termination removes it.
TEST(FakeProviderTest, AgentDirHoldsEachLiveNodesAgentConfig) {
  FakeClock clock;
  FakeProviderOptions o;
  o.agent_dir = ::testing::TempDir() + "fake-agents-" + std::to_string(getpid());
  o.agent_endpoint = "unix:///run/hpodd/agent.sock";
  FakeProvider p(clock, o);
  EXPECT_TRUE(p.RunsAgents());
  EXPECT_EQ(p.Environment().agent_socket, "/run/hpodd/agent.sock");
  LaunchSpec spec = Spec("i-1");
  spec.bootstrap_token = "tok";
  spec.private_ip = "10.1.2.3";
  ASSERT_TRUE(p.Launch(spec).ok());
  const std::string file = o.agent_dir + "/i-1.json";
  auto read = [&] {
    std::ifstream f(file);
    return nlohmann::json::parse(f, nullptr, false);
  };
  nlohmann::json j = read();
  EXPECT_EQ(j.value("bootstrap_token", ""), "tok");
  EXPECT_EQ(j.value("endpoint", ""), "unix:///run/hpodd/agent.sock");
  EXPECT_EQ(j.value("hostname", ""), "ip-10-1-2-3");
  EXPECT_EQ(j.value("cluster_id", ""), "c1");
  EXPECT_EQ(j.value("boot", -1), 0);
  ASSERT_TRUE(p.Reboot("i-1", "r1").ok());
  EXPECT_EQ(read().value("boot", -1), 1);
  EXPECT_EQ(read().value("bootstrap_token", ""), "tok");
  ASSERT_TRUE(p.Terminate("i-1").ok());
  EXPECT_FALSE(std::filesystem::exists(file));
  std::filesystem::remove_all(o.agent_dir);

  FakeProvider without(clock, FakeProviderOptions{});
  EXPECT_FALSE(without.RunsAgents());
  EXPECT_TRUE(without.Environment().agent_socket.empty());
}

// Network agents (an https:// endpoint): the nodes dial hpodd's agent listener,
// and each config holds the launch's join token, never a bootstrap token.
TEST(FakeProviderTest, NetworkAgentsGetTheLaunchsJoinToken) {
  FakeClock clock;
  FakeProviderOptions o;
  o.agent_dir = ::testing::TempDir() + "fake-net-agents-" + std::to_string(getpid());
  o.agent_endpoint = "https://127.0.0.1:8451";
  FakeProvider p(clock, o);
  EXPECT_TRUE(p.RunsAgents());
  NodeEnvironment env = p.Environment();
  EXPECT_EQ(env.agent_url, "https://127.0.0.1:8451");
  EXPECT_TRUE(env.agent_socket.empty());
  EXPECT_TRUE(env.Validate().ok()) << env.Validate().ToString();
  LaunchSpec spec = Spec("i-1");
  spec.bootstrap_token = "hpodjoin1.pin.id.secret";
  ASSERT_TRUE(p.Launch(spec).ok());
  std::ifstream f(o.agent_dir + "/i-1.json");
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  EXPECT_EQ(j.value("join_token", ""), "hpodjoin1.pin.id.secret");
  EXPECT_FALSE(j.contains("bootstrap_token")) << j.dump();
  EXPECT_EQ(j.value("endpoint", ""), "https://127.0.0.1:8451");
  std::filesystem::remove_all(o.agent_dir);
}

}  // namespace
}  // namespace hpod::provider
