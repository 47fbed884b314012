#pragma once

// Test helpers for hpodd's metrics: a store holding one cluster of every kind of
// record the scrape reads, the agents' state beside it, and a reader of the text
// format, so tests assert on samples as Prometheus would see them.

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "hpod/controlplane/metrics.h"
#include "hpod/controlplane/metrics_state.h"
#include "hpod/store/store.h"

namespace hpod::controlplane::testing {

// "name{a="1",b="2"}" → value, for every sample line of an exposition.
inline std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

// The key Samples() uses: labels sorted by name, as hpod writes them.
inline std::string Key(const std::string& name, std::map<std::string, std::string> labels = {}) {
  if (labels.empty()) return name;
  std::string k = name + "{";
  bool first = true;
  for (const auto& [n, v] : labels) {
    k += (first ? "" : ",") + n + "=\"" + v + "\"";
    first = false;
  }
  return k + "}";
}

// Cluster "demo" (InService): group "controller" (1 Running) and "workers"
// (target 3: 2 Running, 1 Pending); a Replace recovery that succeeded in 12 s
// (phases 1, 3, 2, 6 s) and a Reboot in progress.
inline void FillStore(store::Store& s) {
  Status st = s.Write([](store::WriteTx& tx) -> Status {
    store::ClusterRecord c;
    c.id = "c1";
    c.name = "demo";
    c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/c1";
    c.status = "InService";
    c.creation_time = 1700000000;
    HPOD_RETURN_IF_ERROR(tx.PutCluster(c));
    for (const auto& [name, count] :
         {std::pair<std::string, int>{"controller", 1}, {"workers", 3}}) {
      store::GroupRecord g;
      g.cluster_id = "c1";
      g.name = name;
      g.target_count = count;
      g.status = "InService";
      g.position = name == "workers";
      HPOD_RETURN_IF_ERROR(tx.PutGroup(g));
    }
    const std::vector<std::tuple<std::string, std::string, std::string>> nodes = {
        {"i-00000000000000001", "controller", "Running"},
        {"i-00000000000000002", "workers", "Running"},
        {"i-00000000000000003", "workers", "Running"},
        {"i-00000000000000004", "workers", "Pending"}};
    int ordinal = 0;
    for (const auto& [id, group, status] : nodes) {
      store::NodeRecord n;
      n.instance_id = id;
      n.cluster_id = "c1";
      n.group_name = group;
      n.ordinal = ordinal++;
      n.status = status;
      n.private_ip = "10.77.1." + std::to_string(10 + ordinal);
      n.hostname = "ip-10-77-1-" + std::to_string(10 + ordinal);
      n.launched = true;
      HPOD_RETURN_IF_ERROR(tx.PutNode(n));
    }
    store::RecoveryRecord r;
    r.recovery_id = "rcv-aaaaaaaaaaaa";
    r.cluster_id = "c1";
    r.group_name = "workers";
    r.instance_id = "i-00000000000000009";
    r.replacement_id = "i-00000000000000003";
    r.action = "Replace";
    r.source = "HealthCheck";
    r.status = "Succeeded";
    r.phase = "Resumed";
    r.created = 1700000100;
    r.finished = 1700000112;
    r.timeline = nlohmann::json::array({{{"step", "Detected"}, {"time", 1700000100.0}},
                                        {{"step", "Marked"}, {"time", 1700000101.0}},
                                        {{"step", "StepsCancelled"}, {"time", 1700000104.0}},
                                        {{"step", "Terminated"}, {"time", 1700000106.0}},
                                        {{"step", "Launched"}, {"time", 1700000107.0}},
                                        {{"step", "Resumed"}, {"time", 1700000112.0}}});
    HPOD_RETURN_IF_ERROR(tx.PutRecovery(r));
    store::RecoveryRecord b = r;
    b.recovery_id = "rcv-bbbbbbbbbbbb";
    b.instance_id = "i-00000000000000002";
    b.replacement_id.clear();
    b.action = "Reboot";
    b.status = "InProgress";
    b.phase = "Marked";
    b.created = 1700000200;
    b.finished = 0;
    b.timeline = nlohmann::json::array({{{"step", "Detected"}, {"time", 1700000200.0}},
                                        {{"step", "Marked"}, {"time", 1700000200.5}}});
    return tx.PutRecovery(b);
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
}

// The host figures of Inputs' first agent, as its heartbeat carried them.
inline api::agentproto::HostStats TestHost() {
  api::agentproto::HostStats h;
  h.cpu_seconds = {100, 1, 20, 5000, 3, 0.5, 0.25, 0};
  h.memory_total_bytes = 8LL << 30;
  h.memory_available_bytes = 6LL << 30;
  h.filesystems = {{"/", 10LL << 30, 4LL << 30}, {"/fsx", 100LL << 30, 90LL << 30}};
  return h;
}

// Two connected agents of "demo" (one with host figures and a failing check) and
// one of a cluster the store does not know (deleted meanwhile).
inline StateInputs Inputs(std::chrono::steady_clock::time_point now) {
  StateInputs in;
  AgentSnapshot a;
  a.instance_id = "i-00000000000000002";
  a.cluster_id = "c1";
  a.connected_at = now - std::chrono::seconds(30);
  a.last_heartbeat = now - std::chrono::milliseconds(1500);
  a.host = AgentHostFigures::Of(TestHost());
  a.health_verdict = "Reboot";
  a.failing_checks = {"disk:/fsx"};
  a.clock_offset = -90.25;
  in.agents.push_back(a);
  AgentSnapshot b;
  b.instance_id = "i-00000000000000003";
  b.cluster_id = "c1";
  b.connected_at = now - std::chrono::seconds(4);  // no heartbeat yet
  b.health_verdict = "Healthy";
  in.agents.push_back(b);
  AgentSnapshot gone = b;
  gone.instance_id = "i-0000000000000000f";
  gone.cluster_id = "c-deleted";
  in.agents.push_back(gone);
  in.slurm_nodes = [](const std::string& id) -> std::shared_ptr<const SlurmNodesReport> {
    if (id != "c1") return nullptr;
    SlurmNodesReport r;
    r.reporter = "i-00000000000000001";
    r.nodes = {{"ip-10-77-1-12", "IDLE", "", "1"},
               {"ip-10-77-1-13", "IDLE", "", "1"},
               {"ip-10-77-1-14", "DOWN+FAIL", "Action:Reboot", "1"}};
    return std::make_shared<const SlurmNodesReport>(std::move(r));
  };
  in.steady_now = now;
  in.work_queue_depth = 3;
  return in;
}

// Every family hpodd exports, each with samples: the registry after one API
// request, one reconcile pass and one store transaction, plus the state above.
inline std::string FullExpositionText() {
  auto store = std::move(store::OpenSqliteStore({}).value());
  FillStore(*store);
  Metrics metrics("0.1.0");
  metrics.ObserveApiRequest("CreateCluster", 200, 0.012);
  metrics.ObserveApiRequest("unknown", 400, 0.0004);
  metrics.ObserveReconcile("cluster", 0.02, false);
  metrics.ObserveReconcile("health", 0.001, true);
  metrics.ObserveStoreTransaction("read", 0.0003);
  metrics.ObserveStoreTransaction("write", 0.002);
  const auto now = std::chrono::steady_clock::time_point(std::chrono::hours(1));
  StateInputs in = Inputs(now);
  metrics.AddCollector([&](Exposition& out) {
    return store->Read([&](store::ReadTx& tx) { return CollectState(tx, in, out); });
  });
  auto text = metrics.Scrape();
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "";
}

}  // namespace hpod::controlplane::testing
