#pragma once

// Node recovery: the records (store::RecoveryRecord) and their state machine.
//
// A recovery begins as an intent written in one transaction with its events:
// the health reconciler writes it for a verdict (health_reconciler.h), the Batch
// APIs for a caller's request, the Slurm watcher for a user's
// `scontrol update node=X state=fail reason="Action:Replace"`. From then on the
// cluster's reconcile pass drives it one step at a time (RecoveryReconciler,
// recovery_reconciler.h), each step recorded before the next is taken, so
// `kill -9` of hpodd anywhere resumes it where it stopped and it finishes once.
//
// Phases (HyperPod's contract, hyperpod-contract.md §12):
//   Detected  → mark the node in Slurm: state=fail reason="Action:<action>"
//   Marked    → wait for its jobs to leave it (FAILING → FAIL), or, for a node that
//               is already dead, cancel the job steps on it. NodeRecovery=None
//               stops here (status Reported).
//   Drained   → Reboot: the provider reboots the node (same instance id, disk kept)
//               Replace: terminate the node, then one transaction swaps its row for
//               the replacement's (new instance id, same group slot, hostname, IP)
//   Launched  → the node reconciler launches / observes the node as any other;
//               once it is Running (lifecycle scripts succeeded, a slurmd newer
//               than the launch registered), `scontrol update … state=resume`
//   Resumed   → done (status Succeeded)
// slurmctld is never restarted: the node keeps its name and address, so the
// cluster's slurm.conf does not change.
//
// At most one recovery is in progress per node (and per hostname).
//
// Thread contract: free functions; the WriteTx is the caller's.

#include <optional>
#include <string>
#include <string_view>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

enum class RecoveryAction { kReboot, kReplace };
std::string_view RecoveryActionName(RecoveryAction a);  // "Reboot" | "Replace"
std::optional<RecoveryAction> ParseRecoveryAction(std::string_view name);

enum class RecoveryPhase { kDetected, kMarked, kDrained, kLaunched, kResumed };
std::string_view RecoveryPhaseName(RecoveryPhase p);
std::optional<RecoveryPhase> ParseRecoveryPhase(std::string_view name);

inline constexpr char kRecoveryInProgress[] = "InProgress";
inline constexpr char kRecoverySucceeded[] = "Succeeded";
inline constexpr char kRecoveryFailed[] = "Failed";
inline constexpr char kRecoveryReported[] = "Reported";  // NodeRecovery=None: marked only
inline constexpr char kRecoveryCancelled[] = "Cancelled";

bool RecoveryActive(const store::RecoveryRecord& r);  // status InProgress
// A cluster's recoveries in progress, oldest first, read through the store's
// status index: a pass costs what is in flight, not the cluster's history.
StatusOr<std::vector<store::RecoveryRecord>> ActiveRecoveries(store::ReadTx& tx,
                                                              const std::string& cluster_id);

// When the timeline last recorded `step` ("Resumed", …), epoch seconds; 0: never
// (1 for an entry without a time). Reads the body defensively: it is data.
double RecoveryStepTime(const store::RecoveryRecord& r, std::string_view step);

// What starts a recovery.
struct RecoveryRequest {
  RecoveryAction action = RecoveryAction::kReplace;
  std::string source;  // RecoveryRecord::source
  std::string check;
  std::string reason;
  bool node_dead = false;
};

// Writes a new recovery of `node` (and its events) in `tx`, unless one is already
// in progress for the node: then returns that one's id and writes nothing (a
// node that flaps or is reported twice is recovered once). The cluster's
// NodeRecovery decides `automatic` (Automatic unless it says None), except for the
// Batch APIs' requests (source "Batch…"), which always act.
// A controller node is always rebooted, never replaced (its slurmctld state and
// the cluster's munge key live on the node's disk and in the store): a Replace
// request for it becomes a Reboot with the reason saying so.
// kFailedPrecondition when the node is being removed or was never launched.
StatusOr<std::string> RequestRecovery(store::WriteTx& tx, const Clock& clock,
                                      const store::ClusterRecord& cluster,
                                      const store::NodeRecord& node, bool is_controller,
                                      const RecoveryRequest& request);

// Appends a step to the record's timeline (time = now).
void AddTimelineStep(store::RecoveryRecord& r, const Clock& clock, std::string_view step,
                     const std::string& detail);

}  // namespace hpod::controlplane
