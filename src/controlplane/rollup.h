#pragma once

// The cluster roll-up concern: records what a pass learnt of its nodes, then
// derives group and cluster status from the node rows, in one transaction:
//   - provisioning is all-or-nothing, as HyperPod's default: during CreateCluster
//     one failed node fails the cluster (FailureMessage in HyperPod's words);
//     during UpdateCluster a failed new node rolls the update back (RollingBack →
//     InService, with the FailureMessage kept);
//   - with NodeProvisioningMode Continuous (provisioning.h) no operation fails or
//     rolls back: the cluster is InService once each priority group (controller,
//     login) has a Running node, a group once all its nodes run; only a priority
//     node that fails while the cluster is Creating fails it;
//   - a node in Failure outside such an operation makes its group Degraded (the
//     model's word; ClusterStatus has none, so the cluster stays InService and an
//     event says which node and why). The failed node keeps its slot: hpod does
//     not replace it until node recovery does.
// Every status change writes an event.
//
// Thread contract: stateless; RecordAndRollUp may run concurrently for different
// clusters.

#include <string>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/controlplane/node_reconciler.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

class ClusterRollUp {
 public:
  ClusterRollUp(store::Store& store, const Clock& clock) : store_(store), clock_(clock) {}

  // Returns whether the cluster has converged (nothing left to do until the next
  // change), or NotFound once it is deleted.
  StatusOr<bool> RecordAndRollUp(const std::string& cluster_id,
                                 const std::vector<NodeChange>& changes);

 private:
  store::Store& store_;
  const Clock& clock_;
};

// HyperPod's FailureMessage for a node that failed to provision.
std::string ProvisioningFailureMessage(const std::string& instance_id, const std::string& why);

}  // namespace hpod::controlplane
