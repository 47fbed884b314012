// The fake provider passes the provider conformance suite (provider_conformance.h),
// with nodes that stay Pending for a while on a fake clock and take a while to
// terminate, so the suite's waits are exercised.

#include <gtest/gtest.h>

#include "hpod/base/clock.h"
#include "hpod/provider/fake/fake_provider.h"
#include "hpod/provider/provider_conformance.h"

namespace hpod::provider {
namespace {

using namespace std::chrono_literals;

class FakeHarness {
 public:
  FakeHarness() : provider_(clock_, Options()) {}

  Provider& provider() { return provider_; }
  LaunchSpec Spec(const std::string& id, const std::string& cluster) {
    LaunchSpec s;
    s.instance_id = id;
    s.cluster_id = cluster;
    s.group_name = "workers";
    s.instance_type = "ml.c5.xlarge";
    return s;
  }
  void Advance() { clock_.AdvanceTime(100ms); }
  int Starts(const std::string& id) {
    int starts = 0;
    for (const FakeProvider::Action& a : provider_.actions()) {
      // Every Launch call is recorded, repeats included; only the first one made
      // the node. Reboots are recorded only when they took effect.
      if (a.instance_id == id && a.verb == "Reboot") ++starts;
    }
    return Launched(id) ? starts + 1 : starts;
  }

 private:
  static FakeProviderOptions Options() {
    FakeProviderOptions o;
    o.pending_for = 500ms;
    o.terminating_for = 300ms;
    return o;
  }
  bool Launched(const std::string& id) {
    for (const FakeProvider::Action& a : provider_.actions()) {
      if (a.instance_id == id && a.verb == "Launch") return true;
    }
    return false;
  }

  FakeClock clock_;
  FakeProvider provider_;
};

TEST(FakeProviderEnvironmentTest, OtherMachinesSeeNothingOfHpodds) {
  FakeClock clock;
  FakeProviderOptions o;
  o.environment = NodeEnvironment{};
  o.environment.agent_url = "https://hpodd.example:8451";
  FakeProvider p(clock, o);
  const NodeEnvironment env = p.Environment();
  EXPECT_TRUE(env.Validate().ok()) << env.Validate().ToString();
  EXPECT_EQ(env.PrivateDirOf("/srv/lifecycle"), "/");
  EXPECT_EQ(env.PrivateDirOf("/var/tmp"), "/");
}

}  // namespace
}  // namespace hpod::provider

// The suite's generated names live in its own namespace.
namespace hpod::provider::conformance {
INSTANTIATE_TYPED_TEST_SUITE_P(Fake, ProviderConformanceTest, ::hpod::provider::FakeHarness);
}  // namespace hpod::provider::conformance
