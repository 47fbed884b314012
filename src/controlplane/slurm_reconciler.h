#pragma once

// The Slurm concern of a cluster's reconcile pass: plans slurm.conf from the
// nodes, brings each node's Slurm part in step with the plan (through its agent),
// drains nodes on their way out and says when a node may be terminated. It keeps
// two kinds of clocks in memory (when a node's removal began, since when a node
// waits for Slurm); losing them in a restart only restarts those bounded waits.
//
// Thread contract: one SlurmReconciler serves every cluster; its methods may run
// concurrently for different clusters (the WorkQueue runs one pass per cluster at
// a time). A Pass belongs to the one pass that began it. No lock is held across
// an agent call.

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/thread_annotations.h"
#include "hpod/controlplane/options.h"
#include "hpod/controlplane/slurm_plan.h"
#include "hpod/slurm/scontrol.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

// Whether `row`, the controller's row for a compute node's NodeName, shows the
// slurmd of the node's current instance registered, and not a row Slurm still
// holds from before: from the instance it replaced (a replacement keeps its
// predecessor's NodeName) or from the slurmd before a reboot.
//  - `agent_state`: the instance's own agent's `slurm_state`; null (not reported
//    since it connected) counts no row.
//    With `slurmd_started` in it (the node's clock, just before the agent forked
//    the slurmd that runs): the row counts when its SlurmdStartTime, which that
//    slurmd stamped from the same clock when it first registered, is not earlier
//    than that second. Both times come from the worker's clock, so no skew
//    between machines enters (hpodd's launch time is not used).
//  - `stale_start`: the SlurmdStartTime a recovery recorded of the row it marked
//    ("" when none). A row that still shows it never counts: it is the old
//    slurmd's. (The old row may pass the time test when the replaced machine's
//    clock ran ahead of the new one's; the string is compared, not a clock.) The
//    new slurmd cannot show the very same string: the replacement's `slurm`
//    message carries it (avoid_start_time) and its agent starts slurmd outside
//    that second on its own clock. (Before, a node killed within a second of its
//    slurmd's start left a replacement whose row read as the old one, and the
//    recovery failed at ready_timeout.) An agent older than the field may still
//    show it; then the node waits until ready_timeout fails it, the safe side.
//  - Agents without `slurmd_started` are judged by the rule before it, which
//    assumes the node's clock agrees with hpodd's: SlurmdStartTime not earlier
//    than `launch_time` (hpodd's clock); a `stale_start` row does not count
//    unless it passes that test itself (then the two cannot be told apart, and
//    the launch-time rule alone decides).
// SlurmdStartTime is read as the controller's local time in hpodd's time zone
// (slurm::SlurmNodeState::SlurmdStartEpoch): a time zone, unlike a clock, is
// configuration, the same on the controller and hpodd.
bool SlurmdOfThisInstance(const slurm::SlurmNodeState& row, const nlohmann::json& agent_state,
                          double launch_time, const std::string& stale_start);

class SlurmReconciler {
 public:
  // `agents` may be null: then no cluster has Slurm (tests, providers without agents).
  SlurmReconciler(store::Store& store, const Clock& clock, const ControlPlaneOptions& options,
                  SlurmAgents* agents);

  // What one pass knows of the cluster's Slurm.
  struct Pass {
    std::string cluster_id;
    std::optional<SlurmPlan> plan;           // none: Slurm is not in play this pass
    std::optional<SlurmNodesReport> report;  // the controller's view of its nodes
    std::vector<std::string> to_drain;       // hostnames to drain at Finish
    bool busy = false;                       // Slurm is not yet in step with the cluster
    // By the instance id an active recovery brings up (the replacement, or the
    // rebooted node): the SlurmdStartTime of the row it marked (SlurmdOfThisInstance).
    std::map<std::string, std::string> stale_start;
    // By the replacement an active recovery brings up: its predecessor's address.
    // A replacement elsewhere (a pool's Spare) has another, which slurmctld is
    // told (scontrol update NodeAddr=) before the new slurmd starts.
    std::map<std::string, std::string> replaced_addr;
  };

  // Starts a pass over `nodes` (the cluster's rows). `in_play` is false when the
  // provider runs no agents or the cluster is winding down.
  StatusOr<Pass> Begin(const std::string& cluster_id, const std::vector<store::NodeRecord>& nodes,
                       bool in_play);
  // Keeps in `pass.stale_start` the row `r` marked, while `r` is active (Begin
  // does for the recoveries it reads; the recovery concern again for those it
  // advanced in the pass, which may mark and reboot a node before the node
  // concern looks at it).
  static void NoteRecovery(Pass& pass, const store::RecoveryRecord& r);
  // Brings one node's Slurm in step with the plan; returns whether the node's part
  // is up (controller: slurmctld answers; compute: registered). In a cluster
  // without Slurm (Mode::kNone) it tells the node so (NoSlurmMessage) until the
  // agent reports role "none", and returns whether it has.
  // Called from the moment the node's agent is connected, before its lifecycle
  // scripts ran: a worker or login node that never ran Slurm yet gets its part
  // held (configured, no slurmd) until slurmctld runs this configuration; once
  // it ran unheld, a new configuration waits for slurmctld instead (so a
  // restarting controller never stops a worker's slurmd).
  bool SyncNode(Pass& pass, const store::NodeRecord& n);
  // Whether a node being removed may be terminated now; queues its drain while
  // Slurm still has it undrained.
  bool ReadyToTerminate(Pass& pass, const store::NodeRecord& n);
  // The failure message once a node whose scripts succeeded has waited longer
  // than options.slurm.ready_timeout for its Slurm part.
  std::optional<std::string> WaitExpired(const Pass& pass, const store::NodeRecord& n);
  void WaitDone(const std::string& instance_id);
  // Ends the pass: drains what it queued, in one short command.
  void Finish(Pass& pass);

 private:
  // Starts the removal clock of a node on first call; true once it ran out.
  bool RemovalTimedOut(const std::string& cluster_id, const std::string& instance_id) EXCLUDES(mu_);
  // Tells slurmctld a replacement's new address (Pass::replaced_addr) once;
  // false while it could not (the pass is retried).
  bool MoveNodeAddr(Pass& pass, const store::NodeRecord& n) EXCLUDES(mu_);
  // Records kNoSlurmEvent once per cluster (a setting keeps it once across
  // restarts of hpodd).
  void NoteNoSlurm(const std::string& cluster_id) EXCLUDES(mu_);

  store::Store& store_;
  const Clock& clock_;
  const ControlPlaneOptions& options_;
  SlurmAgents* const agents_;
  Mutex mu_;
  // When hpod began removing a node from Slurm, by cluster id, then instance id.
  std::map<std::string, std::map<std::string, std::chrono::steady_clock::time_point>> removals_
      GUARDED_BY(mu_);
  // Since when a node whose scripts succeeded waits for Slurm, by instance id.
  std::map<std::string, std::chrono::steady_clock::time_point> waits_ GUARDED_BY(mu_);
  // Clusters without Slurm whose event is recorded (saves a store write per pass).
  std::set<std::string> noted_no_slurm_ GUARDED_BY(mu_);
  // "<instance id> <address>" whose NodeAddr slurmctld was told (replaced_addr).
  std::set<std::string> addr_moved_ GUARDED_BY(mu_);
};

}  // namespace hpod::controlplane
