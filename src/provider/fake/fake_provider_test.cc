#include "hpod/provider/fake/fake_provider.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

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
