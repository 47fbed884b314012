// The health concern's interface (empty until node recovery) and the queue's
// routing of keys to one reconciler per concern.

#include "hpod/controlplane/health_reconciler.h"

#include <gtest/gtest.h>

#include "hpod/controlplane/test_harness.h"

namespace hpod::controlplane {
namespace {

using testing::Harness;

TEST(HealthReconcilerTest, JudgesEveryNodeAndChangesNothing) {
  Harness h;
  ASSERT_TRUE(h.Call("CreateCluster",
                     {{"ClusterName", "demo"}, {"InstanceGroups", {Harness::Group("w", 2)}}})
                  .ok());
  h.Converge();
  std::string arn = h.Describe("demo")["ClusterArn"];
  std::string id = arn.substr(arn.size() - 12);
  auto before = h.Call("ListClusterEvents", {{"ClusterName", "demo"}});
  HealthReconciler health(*h.store_);
  auto verdicts = health.Judge(id);
  ASSERT_TRUE(verdicts.ok()) << verdicts.status().ToString();
  ASSERT_EQ(verdicts->size(), 2u);
  // The fake provider runs no agents: nothing to judge by yet.
  for (const auto& v : *verdicts) EXPECT_EQ(v.verdict, HealthVerdict::kUnknown);
  auto r = health.Reconcile(id);
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.requeue_after.count(), 0);
  EXPECT_EQ(h.Describe("demo")["InstanceGroups"][0]["Status"], "InService");
  EXPECT_EQ(h.Call("ListClusterEvents", {{"ClusterName", "demo"}})->dump(), before->dump());
  // A cluster that is gone is done, not an error to retry.
  EXPECT_TRUE(health.Reconcile("nosuchcluster").status.ok());
  EXPECT_EQ(HealthVerdictName(HealthVerdict::kReplace), "Replace");
  EXPECT_EQ(HealthKey(id), "health/" + id);
}

TEST(KeyRouterTest, PrefixedKeysGoToTheirConcernAndTheRestToTheClusterPass) {
  std::vector<std::string> seen;
  auto record = [&seen](std::string who) {
    return [&seen, who](const std::string& key) {
      seen.push_back(who + ":" + key);
      return WorkQueue::Result{OkStatus(), {}};
    };
  };
  KeyRouter router(record("cluster"));
  router.Route(std::string(kHealthKeyPrefix), record("health"));
  router.Route("slurm/", record("slurm"));
  router("abc123");
  router(HealthKey("abc123"));
  router("slurm/x");
  router("healthy");  // not the prefix "health/"
  EXPECT_EQ(seen, (std::vector<std::string>{"cluster:abc123", "health:abc123", "slurm:x",
                                            "cluster:healthy"}));
}

}  // namespace
}  // namespace hpod::controlplane
