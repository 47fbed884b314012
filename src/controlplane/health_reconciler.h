#pragma once

// The health concern, on its own keys of the shared work queue
// ("health/<cluster id>", HealthKey): turns what hpodd knows of each node into a
// verdict (healthy, reboot, replace; docs/node-health.md has the table) and a
// verdict that asks for an action into a recovery (recovery.h), which the
// cluster's reconcile pass then carries out. Signals, strongest first:
//   - the provider says the node's machine is gone (its processes died): Replace;
//   - the agent has been disconnected, or connected but silent (a hung node keeps
//     its socket open), for longer than heartbeat_timeout: Replace. An agent not
//     seen since hpodd started is given startup_grace to reconnect (after a
//     restart of hpodd every agent reconnects with backoff), so a restart judges
//     nobody; an agent that reconnects in time is healthy (no action);
//   - Slurm shows the node FAIL or DOWN with reason "Action:Replace" or
//     "Action:Reboot" (a user's `scontrol update`, HyperPod's contract): that
//     action; DOWN means its jobs are already gone;
//   - the agent's health checks: the worst failing check's verdict (a failing
//     check without a Reboot/Replace verdict is reported only). Network checks
//     are set aside while the controller node is down, in a recovery or not
//     Running, and when half or more of the nodes (at least two) fail them at
//     once: that blames the controller, whose own signals judge it.
// When hpodd loses contact (disconnected or silent agents) with more than half of
// a cluster's judged nodes at once, and with at least HealthOptions::mass_loss_min
// of them, the fault is on hpodd's side (its host, its network, its own overload),
// not on each node: those verdicts are held (NodeHealth::held), no node is
// replaced for lost contact, and the cluster gets one event when the hold starts
// and one when it ends. Replacing a whole cluster because hpodd's link blinked
// would cost every job on it (Kubernetes' node controller stops evicting in an
// unhealthy zone for the same reason). Other signals still act.
// A node whose last recovery failed less than failed_backoff ago is not judged.
// Only nodes that were up (Running, or Failure after their lifecycle scripts had
// succeeded) are judged; provisioning failures belong to the create flow.
// A node with a recovery in progress is not judged again (a node that flaps is
// recovered once).
//
// Thread contract: its only state is which clusters are held (under a mutex);
// Reconcile may run concurrently for different clusters (the WorkQueue runs one
// pass per key at a time).

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/thread_annotations.h"
#include "hpod/controlplane/options.h"
#include "hpod/controlplane/recovery.h"
#include "hpod/controlplane/work_queue.h"
#include "hpod/provider/provider.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

class NodeSignals;

inline constexpr std::string_view kHealthKeyPrefix = "health/";
std::string HealthKey(const std::string& cluster_id);

enum class HealthVerdict {
  kUnknown,  // nothing to judge by yet (no agent, not launched, in recovery)
  kHealthy,
  kReboot,   // the node is repairable in place
  kReplace,  // the node must be replaced, keeping its hostname
};
std::string_view HealthVerdictName(HealthVerdict v);

struct NodeHealth {
  std::string instance_id;
  HealthVerdict verdict = HealthVerdict::kUnknown;
  std::string reason;  // empty unless the verdict asks for an action
  // For a verdict that asks for an action: what starts its recovery.
  RecoveryRequest request;
  // Lost contact, but so did most of the cluster at once: not acted on (above).
  bool held = false;
};

class HealthReconciler {
 public:
  // `signals` and `provider` may be null (no agents): then every node is kUnknown.
  // `wake` queues a cluster's reconcile pass (it carries out new recoveries).
  HealthReconciler(store::Store& store, const Clock& clock, const HealthOptions& options,
                   NodeSignals* signals, provider::Provider* provider,
                   std::function<void(const std::string& cluster_id)> wake);

  // One pass over a cluster's nodes: judge each, write a recovery for each verdict
  // that asks for one. A cluster that no longer exists is done.
  WorkQueue::Result Reconcile(const std::string& cluster_id);
  // The verdicts of one pass, in node order (what Reconcile acts on).
  StatusOr<std::vector<NodeHealth>> Judge(const std::string& cluster_id);

 private:
  // Records the event when the cluster's hold starts (held > 0) or ends.
  Status NoteHold(const std::string& cluster_id, int held, int judged) EXCLUDES(held_mu_);
  store::Store& store_;
  const Clock& clock_;
  const HealthOptions options_;
  NodeSignals* const signals_;
  provider::Provider* const provider_;
  const std::function<void(const std::string&)> wake_;
  Mutex held_mu_;
  std::set<std::string> held_ GUARDED_BY(held_mu_);  // clusters whose lost nodes are held
};

}  // namespace hpod::controlplane
