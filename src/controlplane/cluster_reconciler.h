#pragma once

// The cluster reconciler: level-triggered and idempotent. Each call takes one
// cluster, re-reads desired state (store) and observed state (provider), moves
// one step towards the desired state, and writes status and events. It writes
// every intent before acting on it (a node row exists before Launch is called; a
// node is ShuttingDown before Terminate is called) and every provider call is
// idempotent, so `kill -9` at any point followed by a restart converges with no
// lost, duplicated or orphaned node.
//
// Provisioning is all-or-nothing, as HyperPod's default: during CreateCluster one
// failed node fails the cluster (FailureMessage in HyperPod's words) and every node
// is cleaned up; during UpdateCluster it rolls the update back (RollingBack →
// InService, with the FailureMessage kept).
//
// Thread contract: Reconcile may run concurrently for different clusters; the
// WorkQueue guarantees one call per cluster at a time. No lock is held across a
// provider call.

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "hpod/base/clock.h"
#include "hpod/controlplane/options.h"
#include "hpod/controlplane/slurm_plan.h"
#include "hpod/controlplane/work_queue.h"
#include "hpod/provider/provider.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

class ClusterReconciler {
 public:
  // `provider` may be null: then every launch fails with a message saying so.
  // `bootstrap_token` gives the one-time agent token for an instance id (needed
  // when the provider runs agents).
  ClusterReconciler(store::Store& store, provider::Provider* provider, const Clock& clock,
                    const ControlPlaneOptions& options,
                    std::function<std::string(const std::string&)> bootstrap_token = nullptr,
                    SlurmAgents* slurm_agents = nullptr);

  WorkQueue::Result Reconcile(const std::string& cluster_id);

 private:
  struct Observation;
  Status PlanNodes(const std::string& cluster_id);
  // `slurm_busy` is set when Slurm is not yet in step with the cluster (an agent
  // still has an old configuration, a removed node is still in Slurm).
  StatusOr<std::vector<Observation>> ActOnNodes(const std::string& cluster_id, bool* slurm_busy);
  // Brings one node's Slurm in step with `plan`; returns whether the node's part
  // of Slurm is up (controller: slurmctld answers; compute: registered).
  bool SyncSlurm(const SlurmPlan& plan, const store::NodeRecord& n,
                 const std::optional<SlurmNodesReport>& report, bool* slurm_busy);
  // Starts the removal clock of a node on first call; true once it ran out.
  bool RemovalTimedOut(const std::string& cluster_id, const std::string& instance_id);
  // Whether a node being removed may be terminated now; adds it to `to_drain`
  // while Slurm still has it undrained.
  bool ReadyToTerminate(const SlurmPlan& plan, const store::NodeRecord& n,
                        const std::optional<SlurmNodesReport>& report,
                        std::vector<std::string>* to_drain);
  // How long a node whose scripts succeeded has waited for its Slurm part; the
  // failure message once that exceeds options.slurm.ready_timeout.
  std::optional<std::string> SlurmWaitExpired(const SlurmPlan& plan, const store::NodeRecord& n);
  void SlurmWaitDone(const std::string& instance_id);
  // Drains `names` in Slurm through the controller's agent (one short command).
  void Drain(const SlurmPlan& plan, const std::vector<std::string>& names);
  StatusOr<bool> RecordAndRollUp(const std::string& cluster_id,
                                 const std::vector<Observation>& observations);

  store::Store& store_;
  provider::Provider* const provider_;
  const Clock& clock_;
  const ControlPlaneOptions options_;
  const std::function<std::string(const std::string&)> bootstrap_token_;
  SlurmAgents* const slurm_agents_;
  std::mutex removals_mu_;
  // When hpod began removing a node from Slurm, by cluster id, then instance id.
  std::map<std::string, std::map<std::string, std::chrono::steady_clock::time_point>>
      removals_;  // GUARDED_BY(removals_mu_)
  // Since when a node whose scripts succeeded waits for Slurm, by instance id.
  std::map<std::string, std::chrono::steady_clock::time_point>
      slurm_waits_;  // GUARDED_BY(removals_mu_)
};

// HyperPod's FailureMessage for a node that failed to provision.
std::string ProvisioningFailureMessage(const std::string& instance_id, const std::string& why);

}  // namespace hpod::controlplane
