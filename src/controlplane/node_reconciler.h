#pragma once

// The node concern of a cluster's reconcile pass: launches nodes that have a row
// but no machine, terminates nodes marked for removal, and observes the rest
// through the Provider (and, when the provider runs agents, the agents' lifecycle
// reports and the Slurm concern's readiness). It only observes: what it learns is
// returned as NodeChanges, which the roll-up records in one transaction. Every
// provider call is idempotent, so a crash between a call and its record repeats
// the call, harmlessly.
//
// Thread contract: one NodeReconciler serves every cluster; Act may run
// concurrently for different clusters. It holds no lock and keeps no state; Act
// launches up to 8 nodes at once on threads of its own, joined before it returns.

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hpod/api/states.h"
#include "hpod/base/clock.h"
#include "hpod/controlplane/options.h"
#include "hpod/controlplane/slurm_reconciler.h"
#include "hpod/provider/provider.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

// What one pass learnt of one node.
struct NodeChange {
  std::string instance_id;
  bool gone = false;                                 // terminated and forgotten: delete the row
  bool launched = false;                             // Launch acknowledged in this pass
  // Launch found no capacity, which arrives by itself (Provider::CapacityArrives):
  // the node stays Pending with `message` and is launched on a later pass.
  bool waiting = false;
  std::optional<api::ClusterInstanceStatus> status;  // new status, if observed
  std::string message;
  std::string private_ip;
  std::string hostname;
};

// The phase of a node's row (api::NodePhase says what each means).
api::NodePhase PhaseOf(const store::NodeRecord& n);

class NodeReconciler {
 public:
  // `provider` may be null: then every launch fails with a message saying so.
  // `bootstrap_token` gives the one-time agent token for an instance id.
  NodeReconciler(provider::Provider* provider, const Clock& clock,
                 const ControlPlaneOptions& options,
                 std::function<std::string(const std::string&)> bootstrap_token,
                 SlurmReconciler& slurm);

  // Whether nodes are Running only once their agent says their scripts succeeded.
  bool AgentsDecide() const { return provider_ != nullptr && provider_->RunsAgents(); }

  // When the agent of an instance joined hpodd (a network agent, join.h); nullopt:
  // it has not. Such an agent has started and reached hpodd, and what is left of
  // its registration (the channel, through hpodd's own listener, which thousands
  // of machines joining at once can hold up) gets the whole
  // agent_register_timeout again from its join. Unset: the timeout counts from
  // the launch only. Called from Act's thread, only for nodes past the timeout.
  void SetJoinedAt(std::function<std::optional<double>(const std::string&)> joined_at) {
    joined_at_ = std::move(joined_at);
  }

  // Acts on every node of `cluster` but those in `held` (a recovery has them).
  // A node is launched with its group's image in `images` (software_update.h;
  // none: the provider's current one). Appends what it learnt to `changes` even
  // when a provider call failed transiently; that failure is the returned status.
  Status Act(const store::ClusterRecord& cluster, const std::vector<store::GroupRecord>& groups,
             const std::vector<store::NodeRecord>& nodes,
             const std::map<std::string, store::AgentRecord>& agents, SlurmReconciler::Pass& slurm,
             const std::set<std::string>& held, const std::map<std::string, std::string>& images,
             std::vector<NodeChange>* changes);

 private:
  // Removing: drain (Slurm), terminate, forget once the provider says it is gone.
  Status Remove(const store::NodeRecord& n, SlurmReconciler::Pass& slurm, NodeChange* change);
  Status Launch(const store::ClusterRecord& cluster,
                const std::map<std::string, const store::GroupRecord*>& groups,
                const std::map<std::string, std::string>& images, const store::NodeRecord& n,
                NodeChange* change);
  Status Observe(const store::NodeRecord& n,
                 const std::map<std::string, store::AgentRecord>& agents,
                 SlurmReconciler::Pass& slurm, NodeChange* change);
  // Whether `n`'s agent joined within agent_register_timeout, after its launch.
  bool JoinedLately(const store::NodeRecord& n) const;
  // A running machine's status, from its agent's lifecycle report and Slurm.
  void FromAgent(const store::NodeRecord& n,
                 const std::map<std::string, store::AgentRecord>& agents,
                 SlurmReconciler::Pass& slurm, NodeChange* change);

  provider::Provider* const provider_;
  const Clock& clock_;
  const ControlPlaneOptions& options_;
  const std::function<std::string(const std::string&)> bootstrap_token_;
  SlurmReconciler& slurm_;
  std::function<std::optional<double>(const std::string&)> joined_at_;  // set before Act
};

}  // namespace hpod::controlplane
