#pragma once

// The cluster reconciler: level-triggered and idempotent. Each call takes one
// cluster, re-reads desired state (store) and observed state (provider), moves
// one step towards the desired state, and writes status and events. It writes
// every intent before acting on it (a node row exists before Launch is called; a
// node is ShuttingDown before Terminate is called) and every provider call is
// idempotent, so `kill -9` at any point followed by a restart converges with no
// lost, duplicated or orphaned node.
//
// A pass is made of one piece per concern, each in its own file: the node
// concern (node_reconciler.h: Provider calls), the Slurm concern
// (slurm_reconciler.h: plan, config, drain), node recovery (recovery_reconciler.h:
// one step of each recovery in progress) and the roll-up (rollup.h: status,
// FailureMessage, Degraded, events). Node and Slurm run in the same pass because
// a node is Running only once its Slurm part is up. Health has its own key on the
// shared queue (health_reconciler.h).
//
// Thread contract: Reconcile may run concurrently for different clusters; the
// WorkQueue guarantees one call per cluster at a time. No lock is held across a
// provider call.

#include <functional>
#include <string>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/controlplane/node_reconciler.h"
#include "hpod/controlplane/options.h"
#include "hpod/controlplane/provisioning.h"
#include "hpod/controlplane/recovery_reconciler.h"
#include "hpod/controlplane/rollup.h"
#include "hpod/controlplane/slurm_plan.h"
#include "hpod/controlplane/slurm_reconciler.h"
#include "hpod/controlplane/software_update.h"
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

  // One pass over a cluster: plan (intents) → nodes and Slurm (provider and agent
  // calls, outside any transaction) → roll-up (one transaction).
  WorkQueue::Result Reconcile(const std::string& cluster_id);

 private:
  // Writes intents: which nodes should exist (creating rows for missing ones) and
  // which should go (marking them), from a fresh read inside the transaction so a
  // concurrent handler's change is never overwritten.
  Status PlanNodes(const std::string& cluster_id);
  // Acts on the nodes; `slurm_busy` is set when Slurm is not yet in step with the
  // cluster (an agent still has an old configuration, a removed node is still in
  // Slurm).
  StatusOr<std::vector<NodeChange>> ActOnNodes(const std::string& cluster_id, bool* slurm_busy);

  store::Store& store_;
  provider::Provider* const provider_;
  const Clock& clock_;
  const ControlPlaneOptions options_;
  SlurmReconciler slurm_;
  NodeReconciler nodes_;
  RecoveryReconciler recovery_;
  ProvisioningRetry retry_;
  SoftwareUpdater software_;
  ClusterRollUp rollup_;
};

}  // namespace hpod::controlplane
