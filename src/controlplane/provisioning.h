#pragma once

// How a cluster's nodes come to be: the rows of new nodes (shared by the
// reconciler's plan and BatchAddClusterNodes), and continuous provisioning
// (NodeProvisioningMode=Continuous, HyperPod's desired-state model for Slurm
// clusters), side by side with the default all-or-nothing mode:
//
//   default     CreateCluster fails, and UpdateCluster rolls back, when one node
//               fails to provision (rollup.h).
//   Continuous  the cluster is InService once its priority groups (the Slurm
//               controller group and any login groups) each have a Running node;
//               every other node is launched in parallel and, when it fails to
//               provision, terminated and launched again (same NodeLogicalId and
//               ordinal, the same address where the provider keeps addresses; a
//               new instance id) after a backoff that doubles per attempt
//               (ProvisioningRetryOptions). Updates and BatchAddClusterNodes are
//               accepted while earlier changes are still converging; nothing
//               fails or rolls back the cluster, except a node that fails before
//               the cluster is InService while it is a priority node or the
//               roles are not known yet (it might be the controller).
//
// A node "failed to provision" when it is in Failure and its lifecycle scripts
// never succeeded. A node that failed after it was up is node recovery's
// (health_reconciler.h), never retried here; so is any node a recovery holds.
//
// Thread contract: free functions are stateless; ProvisioningRetry keeps only
// references and may Step different clusters concurrently.

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/controlplane/options.h"
#include "hpod/provider/provider.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

// The cluster was created with NodeProvisioningMode=Continuous.
bool IsContinuous(const store::ClusterRecord& cluster);

// `count` new Pending rows for `group` of `cluster`, launch requested `now`, on
// the lowest ordinals no row of the group holds (`group_nodes`, removed ones
// included: a node shutting down still holds its name). The caller writes them.
std::vector<store::NodeRecord> NewNodeRows(const store::ClusterRecord& cluster,
                                           const std::string& group,
                                           const std::vector<store::NodeRecord>& group_nodes,
                                           int count, double now);

// How long launch attempt `attempt` (1: the first retry) waits.
std::chrono::milliseconds RetryDelay(const ProvisioningRetryOptions& options, int attempt);

// The node failed to provision: in Failure, not being removed, and its lifecycle
// scripts never succeeded (`agents`: the cluster's agent records by instance id).
bool FailedToProvision(const store::NodeRecord& node,
                       const std::map<std::string, store::AgentRecord>& agents);

class ProvisioningRetry {
 public:
  // `provider` may be null (then nothing is retried: nothing could be launched).
  ProvisioningRetry(store::Store& store, provider::Provider* provider, const Clock& clock,
                    const ProvisioningRetryOptions& options)
      : store_(store), provider_(provider), clock_(clock), options_(options) {}

  // For a continuous cluster that is neither being deleted nor failed: each
  // worker that failed to provision and that no recovery holds (`recovering`:
  // instance ids) is terminated and, once the provider says it is gone, its row
  // is swapped in one transaction for the next attempt's (events say which
  // attempt, why and when it launches). Returns whether rows changed. Every call
  // it makes is idempotent (Terminate, then Describe), so a crash repeats at most
  // the termination.
  StatusOr<bool> Step(const store::ClusterRecord& cluster,
                      const std::vector<store::GroupRecord>& groups,
                      const std::vector<store::NodeRecord>& nodes,
                      const std::map<std::string, store::AgentRecord>& agents,
                      const std::set<std::string>& recovering);

 private:
  store::Store& store_;
  provider::Provider* const provider_;
  const Clock& clock_;
  const ProvisioningRetryOptions options_;
};

}  // namespace hpod::controlplane
