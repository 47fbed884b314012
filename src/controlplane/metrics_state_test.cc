// The scrape-time state (metrics_state.h) from a store holding one cluster of
// every record kind and two connected agents (metrics_test_util.h).

#include "hpod/controlplane/metrics_state.h"

#include <gtest/gtest.h>

#include "hpod/controlplane/metrics_test_util.h"

namespace hpod::controlplane {
namespace {

using testing::Key;

class MetricsStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(store::OpenSqliteStore({}).value());
    testing::FillStore(*store_);
  }
  std::map<std::string, double> Scrape(const StateInputs& in) {
    Exposition out;
    Status s = store_->Read([&](store::ReadTx& tx) { return CollectState(tx, in, out); });
    EXPECT_TRUE(s.ok()) << s.ToString();
    text_ = out.Text();
    return testing::Samples(text_);
  }

  std::unique_ptr<store::Store> store_;
  const std::chrono::steady_clock::time_point now_{std::chrono::hours(1)};
  std::string text_;
};

TEST_F(MetricsStateTest, ClustersGroupsAndNodesByStatus) {
  auto s = Scrape(testing::Inputs(now_));
  EXPECT_EQ(s[Key("hpod_clusters", {{"status", "InService"}})], 1);
  EXPECT_EQ(s.count(Key("hpod_clusters", {{"status", "Creating"}})), 1u) << "zero, not absent";
  EXPECT_EQ(s[Key("hpod_clusters", {{"status", "Creating"}})], 0);
  EXPECT_EQ(s[Key("hpod_cluster_info", {{"cluster_name", "demo"}, {"status", "InService"}})], 1);
  EXPECT_EQ(s[Key("hpod_instance_groups", {{"cluster_name", "demo"}, {"status", "InService"}})], 2);
  EXPECT_EQ(s[Key("hpod_instance_group_target_nodes",
                  {{"cluster_name", "demo"}, {"instance_group", "workers"}})],
            3);
  auto nodes = [&](const std::string& group, const std::string& status) {
    const std::string k = Key(
        "hpod_nodes", {{"cluster_name", "demo"}, {"instance_group", group}, {"status", status}});
    EXPECT_EQ(s.count(k), 1u) << k;
    return s[k];
  };
  EXPECT_EQ(nodes("workers", "Running"), 2);
  EXPECT_EQ(nodes("workers", "Pending"), 1);
  EXPECT_EQ(nodes("controller", "Running"), 1);
  EXPECT_EQ(nodes("controller", "Failure"), 0);
  EXPECT_EQ(s[Key("hpod_node_info", {{"cluster_name", "demo"},
                                     {"instance_group", "workers"},
                                     {"node", "i-00000000000000004"},
                                     {"hostname", "ip-10-77-1-14"},
                                     {"private_ip", "10.77.1.14"}})],
            1);
  EXPECT_EQ(s[Key("hpod_slurm_nodes", {{"cluster_name", "demo"}, {"state", "IDLE"}})], 2);
  EXPECT_EQ(s[Key("hpod_slurm_nodes", {{"cluster_name", "demo"}, {"state", "DOWN+FAIL"}})], 1);
  EXPECT_EQ(s[Key("hpod_work_queue_depth")], 3);
}

TEST_F(MetricsStateTest, RecoveriesByKindOutcomeAndPhase) {
  auto s = Scrape(testing::Inputs(now_));
  auto demo = [](std::map<std::string, std::string> more) {
    more["cluster_name"] = "demo";
    return more;
  };
  EXPECT_EQ(s[Key("hpod_recoveries_total", demo({{"kind", "Replace"}, {"outcome", "Succeeded"}}))],
            1);
  EXPECT_EQ(s[Key("hpod_recoveries_total", demo({{"kind", "Reboot"}, {"outcome", "Failed"}}))], 0);
  EXPECT_EQ(s[Key("hpod_recoveries_in_progress", demo({{"kind", "Reboot"}}))], 1);
  EXPECT_EQ(s[Key("hpod_recovery_duration_seconds_count", demo({{"kind", "Replace"}}))], 1);
  EXPECT_EQ(s[Key("hpod_recovery_duration_seconds_sum", demo({{"kind", "Replace"}}))], 12);
  EXPECT_EQ(
      s[Key("hpod_recovery_duration_seconds_bucket", demo({{"kind", "Replace"}, {"le", "10"}}))],
      0);
  EXPECT_EQ(
      s[Key("hpod_recovery_duration_seconds_bucket", demo({{"kind", "Replace"}, {"le", "15"}}))],
      1);
  EXPECT_EQ(s[Key("hpod_recovery_last_duration_seconds", demo({{"kind", "Replace"}}))], 12);
  EXPECT_EQ(s.count(Key("hpod_recovery_last_duration_seconds", demo({{"kind", "Reboot"}}))), 0u);
  // The Replace spent 1, 3, 2 and 6 s in its phases; the Reboot 0.5 s detected so far.
  auto phase = [&](const std::string& p, const std::string& what) {
    return s[Key("hpod_recovery_phase_duration_seconds_" + what, demo({{"phase", p}}))];
  };
  EXPECT_EQ(phase("Detected", "count"), 2);
  EXPECT_EQ(phase("Detected", "sum"), 1.5);
  EXPECT_EQ(phase("Marked", "sum"), 3);
  EXPECT_EQ(phase("Drained", "sum"), 2);
  EXPECT_EQ(phase("Launched", "sum"), 6);
  EXPECT_EQ(phase("Launched", "count"), 1);
}

TEST_F(MetricsStateTest, AgentsHeartbeatsHealthAndHostFigures) {
  auto s = Scrape(testing::Inputs(now_));
  EXPECT_EQ(s[Key("hpod_agent_connections")], 3);
  const std::map<std::string, std::string> n2 = {{"cluster_name", "demo"},
                                                 {"node", "i-00000000000000002"}};
  EXPECT_DOUBLE_EQ(s[Key("hpod_node_heartbeat_age_seconds", n2)], 1.5);
  // No heartbeat yet: the age counts from the connection.
  EXPECT_DOUBLE_EQ(s[Key("hpod_node_heartbeat_age_seconds",
                         {{"cluster_name", "demo"}, {"node", "i-00000000000000003"}})],
                   4);
  // An agent whose cluster is gone from the store is not labelled with a guess.
  EXPECT_EQ(text_.find("i-0000000000000000f"), std::string::npos);
  EXPECT_EQ(s[Key("hpod_node_health_verdicts", {{"cluster_name", "demo"}, {"verdict", "Reboot"}})],
            1);
  EXPECT_EQ(s[Key("hpod_node_health_verdicts", {{"cluster_name", "demo"}, {"verdict", "Healthy"}})],
            1);
  EXPECT_EQ(s[Key("hpod_node_health_verdicts", {{"cluster_name", "demo"}, {"verdict", "Replace"}})],
            0);
  EXPECT_EQ(
      s[Key("hpod_health_check_failing_nodes", {{"cluster_name", "demo"}, {"check", "disk:/fsx"}})],
      1);
  auto with = [&](std::string k, std::string v) {
    auto l = n2;
    l[k] = v;
    return l;
  };
  EXPECT_EQ(s[Key("hpod_node_cpu_seconds_total", with("mode", "idle"))], 5000);
  EXPECT_EQ(s[Key("hpod_node_cpu_seconds_total", with("mode", "softirq"))], 0.25);
  EXPECT_EQ(s[Key("hpod_node_memory_total_bytes", n2)], 8.0 * (1LL << 30));
  EXPECT_EQ(s[Key("hpod_node_memory_available_bytes", n2)], 6.0 * (1LL << 30));
  EXPECT_EQ(s[Key("hpod_node_filesystem_size_bytes", with("mountpoint", "/fsx"))],
            100.0 * (1LL << 30));
  EXPECT_EQ(s[Key("hpod_node_filesystem_avail_bytes", with("mountpoint", "/"))], 4.0 * (1LL << 30));
  // An agent without host figures (an older one) has none.
  EXPECT_EQ(s.count(Key("hpod_node_memory_total_bytes",
                        {{"cluster_name", "demo"}, {"node", "i-00000000000000003"}})),
            0u);
}

TEST_F(MetricsStateTest, WithoutAgentsTheStoreStillCounts) {
  StateInputs in;  // a provider that runs no agents: no AgentService
  in.steady_now = now_;
  auto s = Scrape(in);
  EXPECT_EQ(s[Key("hpod_agent_connections")], 0);
  EXPECT_EQ(
      s[Key("hpod_nodes",
            {{"cluster_name", "demo"}, {"instance_group", "workers"}, {"status", "Running"}})],
      2);
  EXPECT_EQ(text_.find("hpod_slurm_nodes{"), std::string::npos);
}

TEST(RecoveryPhaseDurationsTest, FirstEntryOfEachPhase) {
  store::RecoveryRecord r;
  r.created = 100;
  r.timeline = nlohmann::json::array({{{"step", "Detected"}, {"time", 100.0}},
                                      {{"step", "Marked"}, {"time", 102.0}},
                                      {{"step", "Marked"}, {"time", 109.0}},  // marked again
                                      {{"step", "Drained"}, {"time", 110.0}},
                                      {{"step", "RebootRequested"}, {"time", 110.5}},
                                      {{"step", "Rebooted"}, {"time", 111.0}},
                                      {{"step", "LifecycleDone"}, {"time", 130.0}},
                                      {{"step", "Resumed"}, {"time", 131.0}}});
  using P = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(RecoveryPhaseDurations(r),
            (P{{"Detected", 2}, {"Marked", 8}, {"Drained", 1}, {"Launched", 20}}));
  // A timeline that is not what hpod writes is read defensively.
  r.timeline = nlohmann::json::array({"x", {{"step", 3}}, {{"step", "Marked"}}});
  EXPECT_TRUE(RecoveryPhaseDurations(r).empty());
  r.timeline = "garbage";
  EXPECT_TRUE(RecoveryPhaseDurations(r).empty());
}

}  // namespace
}  // namespace hpod::controlplane
