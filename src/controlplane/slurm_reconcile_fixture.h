#pragma once

// The fixture of the Slurm reconciler's tests (slurm_reconcile_test.cc,
// slurm_removal_test.cc): the fake provider's nodes with fake agents on them, and
// a harness that drives a cluster's passes and plays the agents' side.

#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/slurm_plan.h"
#include "hpod/controlplane/test_harness.h"
#include "hpod/slurm/config.h"

namespace hpod::controlplane::slurm_testing {

using nlohmann::json;
using store::NodeRecord;
using testing::Harness;

// Whether slurm.conf declares node `name`: its NodeName= lines are host ranges,
// so a node's name need not appear in the text.
inline bool Declares(const std::string& slurm_conf, const std::string& name) {
  auto names = slurm::DeclaredNodeNames(slurm_conf);
  EXPECT_TRUE(names.ok()) << names.status().ToString();
  return names.ok() && std::find(names->begin(), names->end(), name) != names->end();
}

// The fake provider's nodes, with agents on them.
class AgentRunningProvider final : public provider::Provider {
 public:
  explicit AgentRunningProvider(provider::FakeProvider& fake) : fake_(fake) {}
  Status Launch(const provider::LaunchSpec& spec) override { return fake_.Launch(spec); }
  Status Terminate(const std::string& id) override { return fake_.Terminate(id); }
  StatusOr<provider::NodeObservation> Describe(const std::string& id) override {
    return fake_.Describe(id);
  }
  StatusOr<std::vector<std::string>> List(const std::string& cluster_id) override {
    return fake_.List(cluster_id);
  }
  bool RunsAgents() const override { return true; }
  Status Reboot(const std::string& id, const std::string& request_id) override {
    return fake_.Reboot(id, request_id);
  }
  // The fake's nodes as declared (a replacement keeps its address, as locally).
  provider::NodeEnvironment Environment() const override { return fake_.Environment(); }

 private:
  provider::FakeProvider& fake_;
};

// Records what the reconciler asks of the agents; the test scripts their answers.
// Thread-safe.
class FakeSlurmAgents final : public SlurmAgents {
 public:
  json SlurmState(const std::string& instance_id) const override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = states_.find(instance_id);
    return it == states_.end() ? json() : it->second;
  }
  std::optional<SlurmNodesReport> SlurmNodes(const std::string&) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return report_;
  }
  bool Send(const std::string& instance_id, const json& message) override {
    std::lock_guard<std::mutex> lock(mu_);
    sent_[instance_id].push_back(message);
    return true;
  }
  std::optional<double> ConnectedSince(const std::string& instance_id) const override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = connected_since_.find(instance_id);
    if (it == connected_since_.end()) return std::nullopt;
    return it->second;
  }
  // When the agent's connection opened (epoch seconds); unset: unknown.
  void SetConnectedSince(const std::string& instance_id, double epoch) {
    std::lock_guard<std::mutex> lock(mu_);
    connected_since_[instance_id] = epoch;
  }
  StatusOr<CommandResult> Run(const std::string& instance_id, const std::vector<std::string>& argv,
                              std::chrono::milliseconds) override {
    std::lock_guard<std::mutex> lock(mu_);
    runs_.emplace_back(instance_id, argv);
    CommandResult r;
    r.stdout_data = run_output_;
    return r;
  }

  // The agent applied the last message it got and its daemon is `daemon`;
  // `slurmd_started`: when it started its slurmd, by the node's clock (none: an
  // agent older than the field).
  void Ack(const std::string& instance_id, const std::string& daemon = "running",
           std::optional<double> slurmd_started = std::nullopt) {
    std::lock_guard<std::mutex> lock(mu_);
    const json& m = sent_.at(instance_id).back();
    states_[instance_id] = {{"role", m["role"]},
                            {"conf_hash", m["conf_hash"]},
                            {"daemon", daemon},
                            {"restarts", 0},
                            {"message", ""}};
    if (slurmd_started) states_[instance_id]["slurmd_started"] = *slurmd_started;
    if (m.value("hold", false)) states_[instance_id]["held"] = true;
  }
  // What an agent reports as it connects, before any role.
  void Connected(const std::string& instance_id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (states_.count(instance_id) == 0) {
      states_[instance_id] = {
          {"role", ""}, {"conf_hash", ""}, {"daemon", "none"}, {"restarts", 0}, {"message", ""}};
    }
  }
  // The agent has not reported its Slurm state yet (it just connected, or hpodd
  // restarted and lost it).
  void Forget(const std::string& instance_id) {
    std::lock_guard<std::mutex> lock(mu_);
    states_.erase(instance_id);
  }
  void SetReport(const std::string& reporter,
                 const std::vector<std::pair<std::string, std::string>>& nodes) {
    std::lock_guard<std::mutex> lock(mu_);
    SlurmNodesReport r;
    r.reporter = reporter;
    for (const auto& [name, state] : nodes) {
      r.nodes.push_back({name, state, "", "2024-01-01T00:00:00"});
    }
    report_ = r;
  }
  // Sets (or adds) one node of the report.
  void SetNode(const std::string& name, const std::string& state, const std::string& reason = "",
               const std::string& slurmd_start = "2024-01-01T00:00:00") {
    std::lock_guard<std::mutex> lock(mu_);
    if (!report_) return;
    for (auto& n : report_->nodes) {
      if (n.name == name) {
        n = {name, state, reason, slurmd_start};
        return;
      }
    }
    report_->nodes.push_back({name, state, reason, slurmd_start});
  }
  // What the next commands print on stdout.
  void SetRunOutput(const std::string& out) {
    std::lock_guard<std::mutex> lock(mu_);
    run_output_ = out;
  }
  void ClearReport() {
    std::lock_guard<std::mutex> lock(mu_);
    report_.reset();
  }
  std::vector<json> Sent(const std::string& instance_id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sent_.find(instance_id);
    return it == sent_.end() ? std::vector<json>() : it->second;
  }
  size_t SentTotal() const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& [id, v] : sent_) n += v.size();
    return n;
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> Runs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return runs_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, json> states_;
  std::optional<SlurmNodesReport> report_;
  std::map<std::string, std::vector<json>> sent_;
  std::map<std::string, double> connected_since_;
  std::vector<std::pair<std::string, std::vector<std::string>>> runs_;
  std::string run_output_;
};

// slurmctld's local-time form of an epoch time (SlurmdStartTime).
inline std::string SlurmTime(double epoch) {
  std::time_t t = static_cast<std::time_t>(epoch);
  std::tm local{};
  localtime_r(&t, &local);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &local);
  return buf;
}

inline std::string ValueOr(const StatusOr<std::string>& s, const std::string& otherwise) {
  return s.ok() ? *s : otherwise;
}

inline json Req(const std::string& name, json groups) {
  return {{"ClusterName", name}, {"InstanceGroups", groups}};
}

inline json Typed(json group, const std::string& node_type) {
  group["SlurmConfig"] = {{"NodeType", node_type}};
  return group;
}

class SlurmReconcileTest : public ::testing::Test {
 protected:
  SlurmReconcileTest() : provider_(*h_.provider_) {
    h_.reconciler_ = std::make_unique<ClusterReconciler>(*h_.store_, &provider_, h_.clock_,
                                                         h_.options_, nullptr, &agents_);
  }

  // Creates the cluster and runs until its machines are up (agents not yet done).
  void Create(const json& groups) {
    auto r = h_.Call("CreateCluster", Req("demo", groups));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::string arn = h_.Describe("demo")["ClusterArn"];
    id_ = arn.substr(arn.size() - 12);
    Pass(3);
    for (const auto& n : Nodes()) ASSERT_FALSE(n.private_ip.empty()) << n.instance_id;
  }

  // Queues the cluster (a fake agent's change wakes nothing) and runs `rounds`.
  void Pass(int rounds = 3) {
    h_.queue_->Add(id_);
    h_.Converge(rounds);
  }

  std::vector<NodeRecord> Nodes() {
    std::vector<NodeRecord> out;
    EXPECT_TRUE(h_.store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(out, tx.ListNodes(id_));
                      return OkStatus();
                    })
                    .ok());
    return out;
  }
  std::vector<NodeRecord> NodesOf(const std::string& group) {
    std::vector<NodeRecord> out;
    for (auto& n : Nodes()) {
      if (n.group_name == group) out.push_back(n);
    }
    return out;
  }
  std::optional<NodeRecord> Node(const std::string& instance_id) {
    for (auto& n : Nodes()) {
      if (n.instance_id == instance_id) return n;
    }
    return std::nullopt;
  }

  // Every node's lifecycle scripts succeeded.
  void SucceedLifecycle() { SetLifecycle("Succeeded"); }
  // Every node's agent is connected and its lifecycle scripts are in `state`.
  void SetLifecycle(const std::string& state) {
    ASSERT_TRUE(h_.store_
                    ->Write([&](store::WriteTx& tx) -> Status {
                      HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(id_));
                      for (const auto& n : nodes) {
                        store::AgentRecord a;
                        a.instance_id = n.instance_id;
                        a.cluster_id = id_;
                        a.lifecycle_state = state;
                        HPOD_RETURN_IF_ERROR(tx.PutAgent(a));
                        agents_.Connected(n.instance_id);
                      }
                      return OkStatus();
                    })
                    .ok());
  }

  void PutSetting(const std::string& key, const std::string& value) {
    ASSERT_TRUE(
        h_.store_->Write([&](store::WriteTx& tx) { return tx.PutSetting(key, value); }).ok());
  }
  StatusOr<std::string> GetSetting(const std::string& key) {
    StatusOr<std::string> out = NotFoundError("unread");
    EXPECT_TRUE(h_.store_
                    ->Read([&](store::ReadTx& tx) -> Status {
                      out = tx.GetSetting(key);
                      return OkStatus();
                    })
                    .ok());
    return out;
  }

  std::string ClusterStatus() { return h_.Describe("demo")["ClusterStatus"]; }

  bool Terminated(const std::string& instance_id) {
    for (const auto& a : h_.provider_->actions()) {
      if (a.verb == "Terminate" && a.instance_id == instance_id) return true;
    }
    return false;
  }

  // A Slurm cluster (controller + 2 compute) InService with every node
  // registered; returns the controller.
  NodeRecord SlurmClusterInService() {
    Create({Typed(Harness::Group("ctl", 1), "Controller"), Harness::Group("w", 2)});
    SucceedLifecycle();
    Pass();
    NodeRecord ctl = NodesOf("ctl").at(0);
    agents_.Ack(ctl.instance_id);
    Pass();
    for (const auto& n : NodesOf("w")) agents_.Ack(n.instance_id);
    std::vector<std::pair<std::string, std::string>> report;
    for (const auto& n : NodesOf("w")) report.emplace_back(n.hostname, "IDLE");
    agents_.SetReport(ctl.instance_id, report);
    Pass();
    EXPECT_EQ(ClusterStatus(), "InService");
    return ctl;
  }

  Harness h_;
  AgentRunningProvider provider_;
  FakeSlurmAgents agents_;
  std::string id_;
};

}  // namespace hpod::controlplane::slurm_testing
