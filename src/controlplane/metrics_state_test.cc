// The scrape-time state (metrics_state.h) from a store holding one cluster of
// every record kind and two connected agents (metrics_test_util.h).

#include "hpod/controlplane/metrics_state.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

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

// With the cache, the node figures are those read at the store generation the
// scrape names; a new generation reads them again, and gives the same text as a
// scrape without the cache.
TEST_F(MetricsStateTest, NodeFiguresAreReadOncePerStoreGeneration) {
  StoreFiguresCache cache;
  StateInputs in = testing::Inputs(now_);
  in.store_figures = &cache;
  in.store_generation = 5;
  const std::string running =
      Key("hpod_nodes",
          {{"cluster_name", "demo"}, {"instance_group", "workers"}, {"status", "Running"}});
  EXPECT_EQ(Scrape(in)[running], 2);
  const std::string first = text_;
  // A node launched under a generation the scrape is not told of: the kept
  // figures stand (the store promises the number moves with every write).
  store::NodeRecord n;
  n.instance_id = "i-00000000000000099";
  n.cluster_id = "c1";
  n.group_name = "workers";
  n.ordinal = 99;
  n.status = "Running";
  n.hostname = "ip-10-77-1-99";
  n.private_ip = "10.77.1.99";
  ASSERT_TRUE(store_->Write([&](store::WriteTx& tx) { return tx.PutNode(n); }).ok());
  EXPECT_EQ(Scrape(in)[running], 2);
  in.store_generation = 6;
  auto s = Scrape(in);
  EXPECT_EQ(s[running], 3);
  EXPECT_EQ(s[Key("hpod_node_info", {{"cluster_name", "demo"},
                                     {"instance_group", "workers"},
                                     {"node", "i-00000000000000099"},
                                     {"hostname", "ip-10-77-1-99"},
                                     {"private_ip", "10.77.1.99"}})],
            1);
  const std::string cached = text_;
  StateInputs plain = testing::Inputs(now_);
  Scrape(plain);
  EXPECT_EQ(cached, text_);
  EXPECT_NE(first, text_);
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
  EXPECT_DOUBLE_EQ(s[Key("hpod_node_clock_offset_seconds", n2)], -90.25);
  // Not known (an agent older than heartbeat.time): no sample rather than a guess.
  EXPECT_FALSE(s.count(Key("hpod_node_clock_offset_seconds",
                           {{"cluster_name", "demo"}, {"node", "i-00000000000000003"}})));
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

// Scrape cost with a long recovery history (a cluster that ran for months): the
// figure is printed, not asserted (a loaded CI host must not fail it).
TEST_F(MetricsStateTest, ScrapeTimeWithTenThousandRecoveries) {
  Status st = store_->Write([](store::WriteTx& tx) -> Status {
    for (int i = 0; i < 10000; ++i) {
      store::RecoveryRecord r;
      r.recovery_id = "rcv-" + std::to_string(100000000000 + i);
      r.cluster_id = "c1";
      r.group_name = "workers";
      r.instance_id = "i-00000000000000002";
      r.action = i % 3 ? "Replace" : "Reboot";
      r.source = "HealthCheck";
      r.check = "disk:/";
      r.status = i % 10 ? "Succeeded" : "Failed";
      r.phase = "Resumed";
      r.created = 1600000000.0 + 100 * i;
      r.finished = r.created + 20;
      r.timeline = nlohmann::json::array({{{"step", "Detected"}, {"time", r.created}},
                                          {{"step", "Marked"}, {"time", r.created + 1}},
                                          {{"step", "Drained"}, {"time", r.created + 3}},
                                          {{"step", "Terminated"}, {"time", r.created + 5}},
                                          {{"step", "Launched"}, {"time", r.created + 6}},
                                          {{"step", "Resumed"}, {"time", r.created + 20}}});
      HPOD_RETURN_IF_ERROR(tx.PutRecovery(r));
    }
    return OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  // The fixture's Reboot is still in progress; finish it, as a recovery does, so
  // that every record can be folded.
  st = store_->Write([](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::RecoveryRecord b, tx.GetRecovery("rcv-bbbbbbbbbbbb"));
    b.status = "Failed";
    b.finished = b.created + 30;
    return tx.PutRecovery(b);
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  RecoveryFiguresCache cache;
  for (bool cached : {false, true}) {
    for (int round = 0; round < 3; ++round) {
      StateInputs in = testing::Inputs(now_);
      if (cached) in.recoveries = &cache;
      const auto start = std::chrono::steady_clock::now();
      auto s = Scrape(in);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      std::printf("[ scrape ] 10002 recoveries, %s, round %d: %.2f ms\n",
                  cached ? "finished ones folded once (hpodd)" : "every record read", round, ms);
      EXPECT_EQ(s[Key("hpod_recoveries_total",
                      {{"cluster_name", "demo"}, {"kind", "Replace"}, {"outcome", "Succeeded"}})],
                1 + 6000);
    }
  }
}

// The cache's figures are a full read's, at every step of a cluster's history,
// while it reads only what was written since the oldest recovery in progress.
TEST_F(MetricsStateTest, FoldedRecoveriesMatchAFullReadAndOnlyNewRecordsAreRead) {
  RecoveryFiguresCache cache;
  size_t read = 0;
  auto check = [&](size_t want_read, const char* when) {
    StateInputs full = testing::Inputs(now_);
    Scrape(full);
    const std::string expected = text_;
    StateInputs in = testing::Inputs(now_);
    in.recoveries = &cache;
    Scrape(in);
    EXPECT_EQ(text_, expected) << when;
    Status s = store_->Read(
        [&](store::ReadTx& tx) -> Status { return cache.Figures(tx, "c1", &read).status(); });
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(read, want_read) << when;
  };
  auto put = [&](store::RecoveryRecord r) {
    ASSERT_TRUE(store_->Write([&](store::WriteTx& tx) { return tx.PutRecovery(r); }).ok());
  };
  store::RecoveryRecord in_progress;
  ASSERT_TRUE(store_
                  ->Read([&](store::ReadTx& tx) -> Status {
                    HPOD_ASSIGN_OR_RETURN(in_progress, tx.GetRecovery("rcv-bbbbbbbbbbbb"));
                    return OkStatus();
                  })
                  .ok());
  // The fixture: a finished Replace (folded), then a Reboot in progress (read
  // at every scrape).
  check(1, "fixture");
  // Recoveries that finish after the one in progress started are read until it
  // finishes: nothing before it is folded past it.
  for (int i = 0; i < 20; ++i) {
    store::RecoveryRecord r = in_progress;
    r.recovery_id = "rcv-c" + std::to_string(1000 + i);
    r.action = i % 2 ? "Replace" : "Reboot";
    r.status = i % 4 ? "Succeeded" : "Cancelled";
    r.created = 1700000300 + i;
    r.finished = r.created + 7 + i;
    put(r);
  }
  check(21, "20 finished after the one in progress");
  // It moves on (written again, still in progress): written last now, it no
  // longer holds back the 20 written before; then it finishes, and a scrape
  // reads nothing more.
  in_progress.phase = "Drained";
  in_progress.timeline.push_back({{"step", "Drained"}, {"time", 1700000201.0}});
  put(in_progress);
  check(1, "the one in progress moved on");
  in_progress.status = "Succeeded";
  in_progress.finished = 1700000250;
  put(in_progress);
  check(0, "all finished");
  // A new one in progress is read (and what is folded is not read again).
  store::RecoveryRecord next = in_progress;
  next.recovery_id = "rcv-dddddddddddd";
  next.status = "InProgress";
  next.finished = 0;
  put(next);
  check(1, "a new one in progress");
  // A cluster deleted with its records is forgotten.
  ASSERT_TRUE(store_->Write([](store::WriteTx& tx) { return tx.DeleteCluster("c1"); }).ok());
  StateInputs in = testing::Inputs(now_);
  in.recoveries = &cache;
  Scrape(in);
  EXPECT_EQ(text_.find("hpod_recoveries_total{"), std::string::npos);
}

// A misbehaving agent cannot add series: agent-supplied label values outside
// hpodd's vocabulary read "other", and lists are bounded.
TEST_F(MetricsStateTest, AgentSuppliedLabelsAreBounded) {
  StateInputs in = testing::Inputs(now_);
  AgentSnapshot& a = in.agents[0];
  api::agentproto::HostStats host = testing::TestHost();
  host.filesystems.push_back({"/mnt/any", 1, 1});
  host.filesystems.push_back({"/", 999, 999});  // a second "/": the first one counts
  a.host = AgentHostFigures::Of(host);
  a.failing_checks = {"disk:/fsx", "disk:/fsx", "evil-1", "evil-2", std::string(500, 'x')};
  in.agents[1].failing_checks = {"evil-3", "gpu"};
  in.slurm_nodes = [](const std::string& id) -> std::shared_ptr<const SlurmNodesReport> {
    if (id != "c1") return nullptr;
    SlurmNodesReport r;
    r.nodes = {{"a", "IDLE", "", "1"}, {"b", "DOWN+FAIL", "", "1"}, {"c", "HACKED", "", "1"}};
    for (int i = 0; i < 200; ++i) {
      r.nodes.push_back({"n" + std::to_string(i), "IDLE+X" + std::to_string(i), "", "1"});
    }
    return std::make_shared<const SlurmNodesReport>(std::move(r));
  };
  auto s = Scrape(in);
  const std::map<std::string, std::string> n2 = {{"cluster_name", "demo"},
                                                 {"node", "i-00000000000000002"}};
  EXPECT_EQ(text_.find("/mnt/any"), std::string::npos);
  auto root = n2;
  root["mountpoint"] = "/";
  EXPECT_EQ(s[Key("hpod_node_filesystem_size_bytes", root)], 10.0 * (1LL << 30));
  auto failing = [&](const std::string& check) {
    return s[Key("hpod_health_check_failing_nodes", {{"cluster_name", "demo"}, {"check", check}})];
  };
  EXPECT_EQ(failing("disk:/fsx"), 1) << "a node counts once per check";
  EXPECT_EQ(failing("other"), 2) << "two nodes with checks hpodd does not know";
  EXPECT_EQ(failing("gpu"), 1);
  EXPECT_EQ(text_.find("evil"), std::string::npos);
  auto slurm = [&](const std::string& state) {
    return s[Key("hpod_slurm_nodes", {{"cluster_name", "demo"}, {"state", state}})];
  };
  EXPECT_EQ(slurm("IDLE"), 1);
  EXPECT_EQ(slurm("DOWN+FAIL"), 1);
  EXPECT_EQ(slurm("other"), 201);
  EXPECT_EQ(text_.find("HACKED"), std::string::npos);
  size_t series = 0;
  for (const auto& [key, value] : s) series += key.rfind("hpod_slurm_nodes{", 0) == 0;
  EXPECT_EQ(series, 3u);
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
