#pragma once

// The health concern, on its own keys of the shared work queue
// ("health/<cluster id>", HealthKey): it will turn heartbeats and the agents'
// health reports into a verdict per node and the verdict into an action (reboot
// or replace, HyperPod's Action:Reboot / Action:Replace). This is its interface
// with no checks behind it yet: every node's verdict is kHealthy or kUnknown and
// a pass changes nothing. Node recovery fills in Verdict and the actions.
//
// Thread contract: stateless; Reconcile may run concurrently for different
// clusters (the WorkQueue runs one pass per key at a time).

#include <string>
#include <string_view>
#include <vector>

#include "hpod/controlplane/work_queue.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

inline constexpr std::string_view kHealthKeyPrefix = "health/";
std::string HealthKey(const std::string& cluster_id);

enum class HealthVerdict {
  kUnknown,  // nothing to judge by yet (no agent, not launched)
  kHealthy,
  kReboot,   // the node is repairable in place
  kReplace,  // the node must be replaced, keeping its hostname
};
std::string_view HealthVerdictName(HealthVerdict v);

struct NodeHealth {
  std::string instance_id;
  HealthVerdict verdict = HealthVerdict::kUnknown;
  std::string reason;  // empty unless the verdict asks for an action
};

class HealthReconciler {
 public:
  explicit HealthReconciler(store::Store& store) : store_(store) {}

  // One pass over a cluster's nodes: judge each, act on the verdicts. A cluster
  // that no longer exists is done.
  WorkQueue::Result Reconcile(const std::string& cluster_id);
  // The verdicts of one pass, in node order (what Reconcile acts on).
  StatusOr<std::vector<NodeHealth>> Judge(const std::string& cluster_id);

 private:
  store::Store& store_;
};

}  // namespace hpod::controlplane
