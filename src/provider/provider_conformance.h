#pragma once

// The suite every Provider passes (typed GoogleTest): what the control plane
// relies on, whatever the nodes are. A new provider starts life by instantiating
// it:
//
//   INSTANTIATE_TYPED_TEST_SUITE_P(Mine, ProviderConformanceTest, MyHarness);
//
// A harness is a default-constructible type with:
//   Provider& provider();           // the provider under test, fresh per test
//   LaunchSpec Spec(const std::string& instance_id, const std::string& cluster_id);
//   void Advance();                 // lets the world move on by one step (a fake
//                                   // clock ticks, a fake host settles); may block
//                                   // briefly, never long
//   int Starts(const std::string& instance_id);  // how often the node's machine
//                                   // was started: its launch and every reboot that
//                                   // took effect
// Every harness must run unprivileged (the local provider's runs over a
// FakeNodeHost); real machines are the e2e tests' business.
//
// Thread contract: test-only; one test thread.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "hpod/provider/provider.h"

namespace hpod::provider::conformance {

template <typename Harness>
class ProviderConformanceTest : public ::testing::Test {
 protected:
  Harness h_;

  // Describes `id` until `done(observation or status)` holds, advancing the world
  // between tries; false when it never did (a bounded number of steps).
  template <typename Done>
  bool DescribeUntil(const std::string& id, Done done) {
    for (int i = 0; i < 200; ++i) {
      if (done(h_.provider().Describe(id))) return true;
      h_.Advance();
    }
    return false;
  }
  std::vector<std::string> Listed(const std::string& cluster_id) {
    auto ids = h_.provider().List(cluster_id);
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    std::vector<std::string> out = ids.ok() ? *ids : std::vector<std::string>{};
    std::sort(out.begin(), out.end());
    return out;
  }
};

TYPED_TEST_SUITE_P(ProviderConformanceTest);

// A reconciler repeats Launch after a crash: the second call must not make a
// second machine, nor change the first one's address.
TYPED_TEST_P(ProviderConformanceTest, LaunchIsIdempotent) {
  Provider& p = this->h_.provider();
  const LaunchSpec spec = this->h_.Spec("i-0c0000000000000a1", "conf-c1");
  ASSERT_TRUE(p.Launch(spec).ok());
  auto first = p.Describe(spec.instance_id);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(p.Launch(spec).ok());
  auto second = p.Describe(spec.instance_id);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->private_ip, first->private_ip);
  EXPECT_EQ(this->Listed("conf-c1"), std::vector<std::string>{spec.instance_id});
  EXPECT_EQ(this->h_.Starts(spec.instance_id), 1);
  EXPECT_TRUE(this->DescribeUntil(spec.instance_id, [](const StatusOr<NodeObservation>& o) {
    return o.ok() && o->state == NodeState::kRunning;
  })) << "the launched node never became Running";
}

// Terminating an id the provider never had (or already forgot) is a no-op: a
// reconciler repeats Terminate after a crash too.
TYPED_TEST_P(ProviderConformanceTest, TerminateOfAnUnknownIdIsANoOp) {
  Provider& p = this->h_.provider();
  const LaunchSpec spec = this->h_.Spec("i-0c0000000000000b1", "conf-c1");
  ASSERT_TRUE(p.Launch(spec).ok());
  EXPECT_TRUE(p.Terminate("i-0c00000000000dead").ok());
  EXPECT_EQ(this->Listed("conf-c1"), std::vector<std::string>{spec.instance_id});
  auto o = p.Describe("i-0c00000000000dead");
  EXPECT_EQ(o.status().code(), StatusCode::kNotFound) << o.status().ToString();
}

// After Terminate the node goes (Terminating, Terminated) and is then forgotten:
// Describe says kNotFound from then on, List leaves it out, and a repeated
// Terminate changes nothing.
TYPED_TEST_P(ProviderConformanceTest, DescribeAfterForgetIsNotFound) {
  Provider& p = this->h_.provider();
  const LaunchSpec spec = this->h_.Spec("i-0c0000000000000c1", "conf-c1");
  ASSERT_TRUE(p.Launch(spec).ok());
  ASSERT_TRUE(p.Terminate(spec.instance_id).ok());
  bool never_back = true;
  EXPECT_TRUE(this->DescribeUntil(spec.instance_id, [&](const StatusOr<NodeObservation>& o) {
    if (o.ok() && (o->state == NodeState::kPending || o->state == NodeState::kRunning)) {
      never_back = false;
    }
    return !o.ok() && o.status().code() == StatusCode::kNotFound;
  })) << "a terminated node was never forgotten";
  EXPECT_TRUE(never_back) << "a terminated node was Pending or Running again";
  EXPECT_TRUE(p.Terminate(spec.instance_id).ok());
  EXPECT_EQ(p.Describe(spec.instance_id).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(this->Listed("conf-c1").empty());
}

// Reboot is idempotent per request id: the control plane repeats the call after
// a crash and the node must restart once, not twice.
TYPED_TEST_P(ProviderConformanceTest, RebootOncePerRequestId) {
  Provider& p = this->h_.provider();
  const LaunchSpec spec = this->h_.Spec("i-0c0000000000000d1", "conf-c1");
  ASSERT_TRUE(p.Launch(spec).ok());
  ASSERT_TRUE(this->DescribeUntil(spec.instance_id, [](const StatusOr<NodeObservation>& o) {
    return o.ok() && o->state == NodeState::kRunning;
  }));
  const std::string ip = p.Describe(spec.instance_id)->private_ip;
  Status s = p.Reboot(spec.instance_id, "reboot-1");
  if (s.code() == StatusCode::kUnimplemented) GTEST_SKIP() << "provider cannot reboot nodes";
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(p.Reboot(spec.instance_id, "reboot-1").ok());
  EXPECT_EQ(this->h_.Starts(spec.instance_id), 2);
  ASSERT_TRUE(p.Reboot(spec.instance_id, "reboot-2").ok());
  EXPECT_EQ(this->h_.Starts(spec.instance_id), 3);
  EXPECT_TRUE(this->DescribeUntil(spec.instance_id, [](const StatusOr<NodeObservation>& o) {
    return o.ok() && o->state == NodeState::kRunning;
  })) << "the rebooted node never came back";
  EXPECT_EQ(p.Describe(spec.instance_id)->private_ip, ip) << "a reboot keeps the address";
  EXPECT_EQ(p.Reboot("i-0c00000000000dead", "reboot-3").code(), StatusCode::kNotFound);
}

// List answers per cluster: orphan detection must never see another cluster's
// nodes as its own.
TYPED_TEST_P(ProviderConformanceTest, ListIsPerCluster) {
  Provider& p = this->h_.provider();
  ASSERT_TRUE(p.Launch(this->h_.Spec("i-0c0000000000000e1", "conf-c1")).ok());
  ASSERT_TRUE(p.Launch(this->h_.Spec("i-0c0000000000000e2", "conf-c1")).ok());
  ASSERT_TRUE(p.Launch(this->h_.Spec("i-0c0000000000000e3", "conf-c2")).ok());
  EXPECT_EQ(this->Listed("conf-c1"),
            (std::vector<std::string>{"i-0c0000000000000e1", "i-0c0000000000000e2"}));
  EXPECT_EQ(this->Listed("conf-c2"), std::vector<std::string>{"i-0c0000000000000e3"});
  EXPECT_TRUE(this->Listed("conf-c3").empty());
}

// The declared node environment is consistent, and agrees with what the
// provider does: nodes that run agents can dial hpodd, nodes that see nothing of
// hpodd's have every path hidden, private dirs hide what is under them.
TYPED_TEST_P(ProviderConformanceTest, DeclaredEnvironmentIsConsistent) {
  Provider& p = this->h_.provider();
  const NodeEnvironment env = p.Environment();
  ASSERT_TRUE(env.Validate().ok()) << env.Validate().ToString();
  if (p.RunsAgents()) {
    EXPECT_TRUE(!env.agent_socket.empty() || !env.agent_url.empty())
        << "the provider's nodes run agents but it declares no way for them to dial hpodd";
  }
  if (!env.sees_hpodd_files) {
    EXPECT_EQ(env.PrivateDirOf("/srv/lifecycle"), "/");
    EXPECT_TRUE(env.agent_socket.empty()) << "a Unix socket needs a shared filesystem";
  }
  for (const std::string& d : env.private_dirs) {
    EXPECT_FALSE(env.PrivateDirOf(d + "/below").empty())
        << d << "/below is under a private dir yet declared visible";
  }
  if (env.sees_hpodd_files && !env.agent_socket.empty()) {
    // hpodd's socket directory is shown to the nodes, so it is one of their own.
    const std::string dir = env.agent_socket.substr(0, env.agent_socket.rfind('/'));
    EXPECT_FALSE(env.PrivateDirOf(dir).empty())
        << dir << " holds hpodd's socket in the node, yet is declared to be hpodd's own files";
  }
  EXPECT_TRUE(p.Environment() == env) << "the environment must not change";
}

REGISTER_TYPED_TEST_SUITE_P(ProviderConformanceTest, LaunchIsIdempotent,
                            TerminateOfAnUnknownIdIsANoOp, DescribeAfterForgetIsNotFound,
                            RebootOncePerRequestId, ListIsPerCluster,
                            DeclaredEnvironmentIsConsistent);

}  // namespace hpod::provider::conformance
