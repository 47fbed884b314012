#pragma once

// The recovery concern of a cluster's reconcile pass: moves each recovery in
// progress (recovery.h) one step along Detected → Marked → Drained → Launched →
// Resumed. Every step is recorded in the store (phase, timeline, events) before
// the next is taken, and every outside call it makes is idempotent (Slurm state
// updates, Terminate, Reboot keyed by the recovery id), so a crash anywhere
// repeats at most the last call and the recovery finishes once.
//
// The nodes a recovery holds (marked or draining, not yet rebooted or replaced)
// are left alone by the node concern in the same pass (Outcome::held).
//
// Thread contract: stateless; Step may run concurrently for different clusters.

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/controlplane/recovery.h"
#include "hpod/controlplane/slurm_plan.h"
#include "hpod/controlplane/slurm_reconciler.h"
#include "hpod/provider/provider.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

class RecoveryReconciler {
 public:
  // `provider` and `agents` may be null (no provider, no Slurm).
  RecoveryReconciler(store::Store& store, provider::Provider* provider, const Clock& clock,
                     SlurmAgents* agents);

  struct Outcome {
    std::set<std::string> held;  // instance ids the node concern must not act on
    // Every node a recovery still in progress names (the faulty one and its
    // replacement): provisioning retries leave them to it (provisioning.h).
    std::set<std::string> recovering;
    bool rows_changed = false;   // node rows were swapped or rewritten: read them again
    bool busy = false;           // a recovery is in progress: poll the cluster
  };
  // Errors of one recovery's step are logged and retried at the next pass (every
  // step is repeatable); only a failure to read the recoveries is returned.
  // `slurm` learns the Slurm rows the recoveries marked
  // (SlurmReconciler::NoteRecovery), for the node concern later in the pass.
  StatusOr<Outcome> Step(const store::ClusterRecord& cluster,
                         const std::vector<store::NodeRecord>& nodes,
                         const std::map<std::string, store::AgentRecord>& agents,
                         SlurmReconciler::Pass& slurm);

 private:
  // One step of one recovery; writes what it did.
  Status Advance(const store::ClusterRecord& cluster, store::RecoveryRecord& r,
                 const std::map<std::string, const store::NodeRecord*>& rows,
                 const std::map<std::string, store::AgentRecord>& agents,
                 const SlurmReconciler::Pass& slurm, Outcome* out);
  Status Mark(const store::ClusterRecord& cluster, store::RecoveryRecord& r,
              const store::NodeRecord& node, const SlurmReconciler::Pass& slurm);
  Status Drain(const store::ClusterRecord& cluster, store::RecoveryRecord& r,
               const store::NodeRecord& node, const SlurmReconciler::Pass& slurm);
  // When every job on `hostname` is a supervised auto-resume job (jobs.h): cancels
  // their steps on it and returns true (*cancelled: the step ids); false when some
  // other job runs there (or none shows yet).
  StatusOr<bool> CancelSupervisedSteps(const store::ClusterRecord& cluster,
                                       const std::string& hostname,
                                       const SlurmReconciler::Pass& slurm, std::string* cancelled);
  // scancel of every job step on `hostname` but batch and extern, and `scontrol
  // requeue` of the auto-resume jobs whose batch script ran there; *ids: what it
  // did ("12.0 requeued job 12").
  Status CancelSteps(const store::ClusterRecord& cluster, const SlurmReconciler::Pass& slurm,
                     const std::string& hostname, std::string* ids);
  // The jobs on `hostname` with their batch hosts (squeue %A %B).
  StatusOr<std::vector<std::pair<std::string, std::string>>> JobsOn(
      const SlurmReconciler::Pass& slurm, const std::string& hostname);
  // A live node whose auto-resume job was just requeued (its batch host) stays
  // until Slurm has ended that job on it, at most kSettleSeconds: terminated
  // sooner, slurmctld retries the job's termination against the node of the
  // same name that replaces it, and kills the job's next run there. true: wait.
  StatusOr<bool> Settling(const store::ClusterRecord& cluster, store::RecoveryRecord& r,
                          const SlurmReconciler::Pass& slurm);
  static constexpr double kSettleSeconds = 30;
  // How long a live controller's reboot waits for slurmctld to exit after
  // `scontrol shutdown slurmctld` (its state written).
  static constexpr double kStateSaveSeconds = 20;
  Status Act(const store::ClusterRecord& cluster, store::RecoveryRecord& r,
             const store::NodeRecord& node, const SlurmReconciler::Pass& slurm, Outcome* out);
  Status Follow(const store::ClusterRecord& cluster, store::RecoveryRecord& r,
                const std::map<std::string, const store::NodeRecord*>& rows,
                const std::map<std::string, store::AgentRecord>& agents,
                const SlurmReconciler::Pass& slurm, Outcome* out);
  // Ends a recovery (status, message, event) in one transaction.
  Status Finish(const store::ClusterRecord& cluster, store::RecoveryRecord& r,
                const std::string& status, const std::string& message);
  // Saves the record with one event (none when empty) and, when `node` is given,
  // applies it to the node's current row (left alone when being removed).
  Status Save(const store::ClusterRecord& cluster, const store::RecoveryRecord& r,
              const std::function<void(store::NodeRecord&)>& node, const std::string& event);
  // Runs a Slurm command on the controller (env SLURM_CONF=… argv…).
  Status Scontrol(const SlurmReconciler::Pass& slurm, const std::vector<std::string>& argv,
                  std::string* out = nullptr);

  store::Store& store_;
  provider::Provider* const provider_;
  const Clock& clock_;
  SlurmAgents* const agents_;
};

}  // namespace hpod::controlplane
