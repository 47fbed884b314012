#include "hpod/controlplane/recovery_reconciler.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <functional>

#include "hpod/api/states.h"
#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/host_states.h"
#include "hpod/controlplane/ids.h"
#include "hpod/controlplane/software_update.h"

namespace hpod::controlplane {

using api::ClusterInstanceStatus;
using store::NodeRecord;
using store::RecoveryRecord;

namespace {

bool HasStep(const RecoveryRecord& r, std::string_view step) {
  return RecoveryStepTime(r, step) > 0;
}

bool Has(const std::string& state, std::string_view flag) {
  return state.find(flag) != std::string::npos;
}

// Slurm still runs (or cleans up) a job on the node.
bool Busy(const std::string& state) {
  return Has(state, "ALLOCATED") || Has(state, "MIXED") || Has(state, "COMPLETING");
}

bool Marked(const slurm::SlurmNodeState& s) {
  return s.reason.rfind("Action:", 0) == 0 && (Has(s.state, "FAIL") || Has(s.state, "DOWN"));
}

std::string NodeName(const RecoveryRecord& r) {
  return r.hostname.empty() ? r.instance_id : r.hostname;
}

}  // namespace

RecoveryReconciler::RecoveryReconciler(store::Store& store, provider::Provider* provider,
                                       const Clock& clock, SlurmAgents* agents)
    : store_(store), provider_(provider), clock_(clock), agents_(agents) {}

StatusOr<RecoveryReconciler::Outcome> RecoveryReconciler::Step(
    const store::ClusterRecord& cluster, const std::vector<NodeRecord>& nodes,
    const std::map<std::string, store::AgentRecord>& agents, SlurmReconciler::Pass& slurm) {
  Outcome out;
  std::vector<RecoveryRecord> active;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(active, ActiveRecoveries(tx, cluster.id));
    return OkStatus();
  }));
  std::map<std::string, const NodeRecord*> rows;
  for (const auto& n : nodes) rows[n.instance_id] = &n;
  for (auto& r : active) {
    Status s = Advance(cluster, r, rows, agents, slurm, &out);
    if (!s.ok()) {
      // Retried on the next pass: every step is repeatable.
      spdlog::warn("recovery {} of {}: {}", r.recovery_id, NodeName(r), s.ToString());
    }
    SlurmReconciler::NoteRecovery(slurm, r);
    if (RecoveryActive(r)) {
      out.busy = true;
      out.recovering.insert(r.instance_id);
      if (!r.replacement_id.empty()) out.recovering.insert(r.replacement_id);
      auto phase = ParseRecoveryPhase(r.phase).value_or(RecoveryPhase::kDetected);
      if (phase < RecoveryPhase::kLaunched) out.held.insert(r.instance_id);
    }
  }
  return out;
}

Status RecoveryReconciler::Advance(const store::ClusterRecord& cluster, RecoveryRecord& r,
                                   const std::map<std::string, const NodeRecord*>& rows,
                                   const std::map<std::string, store::AgentRecord>& agents,
                                   const SlurmReconciler::Pass& slurm, Outcome* out) {
  auto phase = ParseRecoveryPhase(r.phase).value_or(RecoveryPhase::kDetected);
  if (phase == RecoveryPhase::kLaunched) return Follow(cluster, r, rows, agents, slurm, out);
  auto it = rows.find(r.instance_id);
  if (it == rows.end() || it->second->remove) {
    return Finish(cluster, r, kRecoveryCancelled,
                  "the node was removed from the cluster before its recovery finished");
  }
  const NodeRecord& node = *it->second;
  switch (phase) {
    case RecoveryPhase::kDetected:
      HPOD_RETURN_IF_ERROR(Mark(cluster, r, node, slurm));
      if (ParseRecoveryPhase(r.phase) != RecoveryPhase::kMarked || !RecoveryActive(r)) {
        return OkStatus();
      }
      [[fallthrough]];
    case RecoveryPhase::kMarked:
      HPOD_RETURN_IF_ERROR(Drain(cluster, r, node, slurm));
      if (ParseRecoveryPhase(r.phase) != RecoveryPhase::kDrained) return OkStatus();
      [[fallthrough]];
    case RecoveryPhase::kDrained: {
      HPOD_ASSIGN_OR_RETURN(bool settling, Settling(cluster, r, slurm));
      if (settling) return OkStatus();
      return Act(cluster, r, node, slurm, out);
    }
    default:
      return OkStatus();
  }
}

namespace {

// The Slurm node of a recovery, when Slurm is in play for it and the controller
// (not this node) can be asked; `why` says otherwise.
const slurm::SlurmNodeState* SlurmNodeOf(const SlurmReconciler::Pass& slurm,
                                         const RecoveryRecord& r, std::string* why, bool* wait) {
  *wait = false;
  if (!slurm.plan || !slurm.plan->Ready()) {
    *why = "the cluster has no Slurm";
    return nullptr;
  }
  if (slurm.plan->controller_instance == r.instance_id) {
    *why = "the node is the Slurm controller";
    return nullptr;
  }
  if (!slurm.report || slurm.report->reporter != slurm.plan->controller_instance) {
    *why = "waiting for the controller's view of Slurm";
    *wait = true;
    return nullptr;
  }
  const slurm::SlurmNodeState* s = slurm.report->Find(r.hostname);
  if (s == nullptr) *why = "not a Slurm node";
  return s;
}

}  // namespace

Status RecoveryReconciler::Mark(const store::ClusterRecord& cluster, RecoveryRecord& r,
                                const NodeRecord& node, const SlurmReconciler::Pass& slurm) {
  std::string detail;
  bool wait = false;
  const slurm::SlurmNodeState* s = SlurmNodeOf(slurm, r, &detail, &wait);
  if (wait) return OkStatus();
  if (s != nullptr && Marked(*s)) {
    detail = "already marked in Slurm: " + s->state + " \"" + s->reason + "\"";
  } else if (s != nullptr) {
    std::string reason = "Action:" + r.action;
    HPOD_RETURN_IF_ERROR(Scontrol(
        slurm, {"scontrol", "update", "nodename=" + r.hostname, "state=fail", "reason=" + reason}));
    detail = "scontrol update nodename=" + r.hostname + " state=fail reason=\"" + reason + "\"";
  } else {
    detail = "not marked: " + detail;
  }
  if (s != nullptr) r.stale_slurmd_start = s->slurmd_start_time;
  r.phase = std::string(RecoveryPhaseName(RecoveryPhase::kMarked));
  AddTimelineStep(r, clock_, "Marked", detail);
  const std::string message = (r.automatic ? r.action + " in progress" : std::string("Unhealthy")) +
                              " (recovery " + r.recovery_id + "): " + r.reason;
  auto row = [&](NodeRecord& n) { n.message = message; };
  if (!r.automatic) {
    r.status = kRecoveryReported;
    r.finished = clock_.NowEpochSeconds();
    return Save(cluster, r, row,
                "NodeRecovery is None: node " + NodeName(r) + " is only marked (" + detail +
                    "); recover it with BatchReplaceClusterNodes or BatchRebootClusterNodes");
  }
  return Save(cluster, r, row,
              "Recovery " + r.recovery_id + " marked node " + NodeName(r) + ": " + detail);
}

Status RecoveryReconciler::Drain(const store::ClusterRecord& cluster, RecoveryRecord& r,
                                 const NodeRecord& node, const SlurmReconciler::Pass& slurm) {
  std::string detail;
  bool wait = false;
  const slurm::SlurmNodeState* s = SlurmNodeOf(slurm, r, &detail, &wait);
  if (wait) return OkStatus();
  std::string step = "Drained";
  if (s == nullptr) {
    detail = "nothing to drain: " + detail;
  } else if (r.node_dead) {
    // A dead node's steps would hang until Slurm's own timeout: cancel them now
    // (an --auto-resume job re-runs its step on the replacement).
    std::string ids;
    HPOD_RETURN_IF_ERROR(CancelSteps(cluster, slurm, r.hostname, &ids));
    step = "StepsCancelled";
    detail = ids.empty() ? "no job steps on the node" : "cancelled job steps " + ids;
  } else {
    // Wait for the FAIL mark to show and the node's jobs to end (FAILING → FAIL).
    // A mark cleared meanwhile (a user's state=resume) is set again once the
    // table has had time to show it, so the wait cannot last for good.
    if (!Marked(*s)) {
      const double marked_at = RecoveryStepTime(r, "Marked");
      if (marked_at > 0 && clock_.NowEpochSeconds() - marked_at > 5) {
        HPOD_RETURN_IF_ERROR(Scontrol(slurm, {"scontrol", "update", "nodename=" + r.hostname,
                                              "state=fail", "reason=Action:" + r.action}));
        AddTimelineStep(r, clock_, "Marked", "marked again: the mark had been cleared");
        return Save(cluster, r, {}, "");
      }
      return OkStatus();
    }
    if (Busy(s->state)) {
      // An auto-resume job would wait for this node as long as the node waits for
      // it: its steps here are cancelled instead (its supervisor re-runs them on the
      // recovered node). Any other job is waited for, as HyperPod does.
      std::string cancelled;
      HPOD_ASSIGN_OR_RETURN(bool supervised,
                            CancelSupervisedSteps(cluster, r.hostname, slurm, &cancelled));
      if (!supervised) return OkStatus();
      step = "StepsCancelled";
      detail = cancelled.empty() ? "the node's auto-resume jobs run no step on it"
                                 : "cancelled the auto-resume job steps " + cancelled;
      // Its batch host's job was requeued: Settling waits for Slurm to end it here.
      if (Has(cancelled, "requeued job")) AddTimelineStep(r, clock_, "JobRequeued", cancelled);
    } else {
      detail = "no jobs left on the node (Slurm state " + s->state + ")";
    }
  }
  r.phase = std::string(RecoveryPhaseName(RecoveryPhase::kDrained));
  AddTimelineStep(r, clock_, step, detail);
  return Save(cluster, r, {}, "Recovery " + r.recovery_id + ": " + detail);
}

StatusOr<bool> RecoveryReconciler::Settling(const store::ClusterRecord& cluster, RecoveryRecord& r,
                                            const SlurmReconciler::Pass& slurm) {
  const double requeued = RecoveryStepTime(r, "JobRequeued");
  if (r.node_dead || requeued <= 0 || HasStep(r, "Settled")) return false;
  // Asked afresh: the controller's periodic report may predate the requeue.
  std::string completing;
  Status asked =
      Scontrol(slurm, {"squeue", "-h", "-t", "CG", "-w", r.hostname, "-o", "%A"}, &completing);
  const bool waited_enough = clock_.NowEpochSeconds() - requeued > kSettleSeconds;
  if (asked.ok() && completing.find_first_not_of(" \n") != std::string::npos && !waited_enough) {
    return true;
  }
  AddTimelineStep(r, clock_, "Settled",
                  !asked.ok()     ? "Slurm did not answer: " + std::string(asked.message())
                  : waited_enough ? "the requeued job still ends on the node; going on"
                                  : "Slurm ended the requeued job on the node");
  HPOD_RETURN_IF_ERROR(Save(cluster, r, {}, ""));
  return false;
}

Status RecoveryReconciler::Act(const store::ClusterRecord& cluster, RecoveryRecord& r,
                               const NodeRecord& node, const SlurmReconciler::Pass& slurm,
                               Outcome* out) {
  if (provider_ == nullptr) {
    return Finish(cluster, r, kRecoveryFailed, "hpodd has no node provider to recover nodes with");
  }
  if (ParseRecoveryAction(r.action) == RecoveryAction::kReboot) {
    // A live controller saves its state first: `scontrol shutdown slurmctld`
    // writes what slurmctld holds only in memory (a job that just ended) and
    // stops it; a reboot kills it, and the next one would start from older state
    // (a finished job running again, holding its nodes). The reboot is the next
    // pass once slurmctld has exited: the shutdown only asks, and a loaded
    // controller may take seconds to write its state; rebooting before it has
    // is the race the save is there to close. Bounded: a slurmctld that never
    // exits must not hold the recovery.
    const bool live_controller =
        !r.node_dead && slurm.plan && slurm.plan->controller_instance == r.instance_id;
    if (live_controller && !HasStep(r, "StateSaved") && !HasStep(r, "RebootRequested")) {
      Status saved = Scontrol(slurm, {"scontrol", "shutdown", "slurmctld"});
      AddTimelineStep(r, clock_, "StateSaved",
                      saved.ok() ? "scontrol shutdown slurmctld"
                                 : "slurmctld did not answer: " + std::string(saved.message()));
      return Save(cluster, r, {}, "");
    }
    if (live_controller && !HasStep(r, "RebootRequested") &&
        clock_.NowEpochSeconds() - RecoveryStepTime(r, "StateSaved") < kStateSaveSeconds) {
      // pgrep exits 1 and prints nothing once no slurmctld is left.
      std::string pids;
      Status asked = Scontrol(slurm, {"pgrep", "-x", "slurmctld"}, &pids);
      if (asked.ok() && pids.find_first_not_of(" \n") != std::string::npos) return OkStatus();
    }
    // Intent first: the row's launch time (a slurmd newer than it is the rebooted
    // one) is written before the reboot, so a crash between the two repeats the
    // keyed Reboot (a no-op) against the same time.
    if (!HasStep(r, "RebootRequested")) {
      const double at = clock_.NowEpochSeconds();
      AddTimelineStep(r, clock_, "RebootRequested", "same instance id, node disk kept");
      HPOD_RETURN_IF_ERROR(Save(
          cluster, r,
          [&](NodeRecord& n) {
            n.status = api::NameString(ClusterInstanceStatus::kPending);
            n.message = "Rebooting (recovery " + r.recovery_id + "): " + r.reason;
            n.launch_time = at;
          },
          ""));
    }
    if (r.source == kSoftwareUpdateSource) {
      // A node updated in place (the controller) restarts into its group's new
      // image (software_update.h); set again on a repeat, which is a no-op.
      std::string image;
      HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
        HPOD_ASSIGN_OR_RETURN(auto images, LoadGroupImages(tx, cluster.id));
        image = images[r.group_name].Launch();
        return OkStatus();
      }));
      if (!image.empty()) {
        Status set = provider_->SetNodeImage(r.instance_id, image);
        if (!set.ok() && set.code() != StatusCode::kUnavailable) {
          return Finish(cluster, r, kRecoveryFailed,
                        "software update failed: " + std::string(set.message()));
        }
        HPOD_RETURN_IF_ERROR(set);
      }
    }
    Status s = provider_->Reboot(r.instance_id, r.recovery_id);
    if (s.code() == StatusCode::kUnimplemented || s.code() == StatusCode::kNotFound) {
      return Finish(cluster, r, kRecoveryFailed, "reboot failed: " + std::string(s.message()));
    }
    HPOD_RETURN_IF_ERROR(s);
    r.phase = std::string(RecoveryPhaseName(RecoveryPhase::kLaunched));
    AddTimelineStep(r, clock_, "Rebooted", "the node restarts");
    out->rows_changed = true;
    return Save(cluster, r, {}, "Recovery " + r.recovery_id + " rebooted node " + NodeName(r));
  }
  HPOD_ASSIGN_OR_RETURN(bool gone, provider::TerminateAndCheckGone(*provider_, r.instance_id));
  if (!gone) return OkStatus();  // terminating; next pass
  // The old row goes and the replacement's comes in one transaction: the group's
  // count never changes, and a crash leaves one or the other, never both or none.
  NodeRecord b;
  b.instance_id = NewInstanceId();
  b.cluster_id = node.cluster_id;
  b.group_name = node.group_name;
  b.ordinal = node.ordinal;
  b.status = api::NameString(ClusterInstanceStatus::kPending);
  b.message = "Replacement of " + node.instance_id + " (recovery " + r.recovery_id + ")";
  b.launch_time = clock_.NowEpochSeconds();
  b.private_ip = r.private_ip;
  b.hostname = r.hostname;
  // The logical node survives its replacement, as its hostname and Slurm
  // NodeName do (HyperPod: NodeLogicalId names the node, InstanceId the machine).
  b.logical_id = node.logical_id;
  b.created_generation = node.created_generation;
  r.replacement_id = b.instance_id;
  r.phase = std::string(RecoveryPhaseName(RecoveryPhase::kLaunched));
  AddTimelineStep(r, clock_, "Terminated", "instance " + node.instance_id + " terminated");
  out->rows_changed = true;
  bool removed = false;
  Status swapped = store_.Write([&](store::WriteTx& tx) -> Status {
    auto current = tx.GetNodeById(node.instance_id);
    // Removed meanwhile (scale-down, BatchDelete): the user's decision wins; the
    // machine is gone, the row goes with no replacement.
    removed = current.ok() && current->remove;
    if (current.ok()) {
      HPOD_RETURN_IF_ERROR(tx.DeleteNode(node.instance_id));
      HPOD_RETURN_IF_ERROR(ForgetNodeSoftware(tx, cluster.id, node.instance_id));
    }
    // Its host failed it: quarantined with the reason, out of the pool until a
    // person releases it (a pool host; a one-launch host is retired anyway).
    HPOD_RETURN_IF_ERROR(EndHostTenure(tx, clock_, node.instance_id,
                                       "instance " + node.instance_id +
                                           " was terminated for replacement (recovery " +
                                           r.recovery_id + "): " + r.reason,
                                       /*failed=*/true));
    if (removed) return OkStatus();
    HPOD_RETURN_IF_ERROR(tx.PutNode(b));
    HPOD_RETURN_IF_ERROR(tx.PutRecovery(r));
    HPOD_RETURN_IF_ERROR(RecordEvent(
        tx, clock_, cluster, NodeSubject(node.group_name, node.instance_id), EventLevel::kInfo,
        "Instance terminated for replacement (recovery " + r.recovery_id + ")"));
    return RecordEvent(
        tx, clock_, cluster, NodeSubject(b.group_name, b.instance_id), EventLevel::kInfo,
        "Instance " + b.instance_id + " is Pending: replaces " + node.instance_id + " as " +
            NodeName(r) + " (" + r.private_ip + ", recovery " + r.recovery_id + ")");
  });
  HPOD_RETURN_IF_ERROR(swapped);
  if (!removed) return OkStatus();
  r.replacement_id.clear();
  return Finish(cluster, r, kRecoveryCancelled,
                "the node was removed from the cluster before its replacement was launched");
}

Status RecoveryReconciler::Follow(const store::ClusterRecord& cluster, RecoveryRecord& r,
                                  const std::map<std::string, const NodeRecord*>& rows,
                                  const std::map<std::string, store::AgentRecord>& agents,
                                  const SlurmReconciler::Pass& slurm, Outcome* out) {
  const bool replace = ParseRecoveryAction(r.action) == RecoveryAction::kReplace;
  const std::string target = replace ? r.replacement_id : r.instance_id;
  auto it = rows.find(target);
  if (it == rows.end() || it->second->remove) {
    return Finish(cluster, r, kRecoveryCancelled,
                  "the node was removed from the cluster before its recovery finished");
  }
  const NodeRecord& t = *it->second;
  bool changed = false;
  auto step = [&](std::string_view name, const std::string& detail) {
    if (HasStep(r, name)) return;
    AddTimelineStep(r, clock_, name, detail);
    changed = true;
  };
  if (replace && t.launched) {
    step("Launched",
         "instance " + t.instance_id + " launched as " + NodeName(r) + " (" + r.private_ip + ")");
  }
  auto a = agents.find(t.instance_id);
  const bool scripts_done =
      a != agents.end() &&
      api::Parse<api::LifecycleState>(a->second.lifecycle_state) == api::LifecycleState::kSucceeded;
  // A rebooted node's agent is back only on a connection opened after the reboot:
  // the old one may linger (a hung node's socket stays open until the machine
  // restarts) and speaks for the old boot. Without it, a controller whose
  // heartbeats went unread was "recovered" in 0.6 s and rebooted again and again.
  bool agent_back = true;
  if (!replace && agents_ != nullptr) {
    const double rebooted = RecoveryStepTime(r, "Rebooted");
    auto since = agents_->ConnectedSince(t.instance_id);
    agent_back = !since || rebooted <= 0 || *since >= rebooted;
  }
  if (scripts_done && agent_back &&
      (replace || api::Is(t.status, ClusterInstanceStatus::kRunning))) {
    step("LifecycleDone",
         replace ? "lifecycle scripts re-ran and succeeded" : "the node's agent is back");
  }
  std::string why;
  bool wait = false;
  const slurm::SlurmNodeState* s = SlurmNodeOf(slurm, r, &why, &wait);
  // The new slurmd's row, never the old one's: judged on the worker's clock from
  // what the target's own agent says of the slurmd it started, and never the row
  // this recovery marked (SlurmdOfThisInstance says how, and what older agents get).
  const nlohmann::json agent_state =
      agents_ != nullptr ? agents_->SlurmState(t.instance_id) : nlohmann::json();
  if (s != nullptr && SlurmdOfThisInstance(*s, agent_state, t.launch_time, r.stale_slurmd_start)) {
    step("SlurmdRegistered",
         "slurmd started " + s->slurmd_start_time + ", Slurm state " + s->state);
  }
  const bool controller = slurm.plan && slurm.plan->controller_instance == r.instance_id;
  if (api::Is(t.status, ClusterInstanceStatus::kFailure) && !replace && !controller) {
    // A reboot that did not bring the node back becomes a replacement, as on
    // HyperPod: the row is terminated and a new instance takes the logical node
    // (never the controller's, which is only ever rebooted).
    r.action = std::string(RecoveryActionName(RecoveryAction::kReplace));
    r.phase = std::string(RecoveryPhaseName(RecoveryPhase::kDrained));
    AddTimelineStep(r, clock_, "Escalated",
                    "the rebooted node failed (" + t.message + "): replacing it");
    out->busy = true;
    return Save(cluster, r, {},
                "Recovery " + r.recovery_id + ": the rebooted node " + NodeName(r) +
                    " failed; replacing it");
  }
  if (api::Is(t.status, ClusterInstanceStatus::kFailure)) {
    return Finish(
        cluster, r, kRecoveryFailed,
        (replace ? "the replacement failed: " : "the rebooted controller failed: ") + t.message);
  }
  // Resumed only for the new slurmd, never for Slurm's row of the old one.
  if (!api::Is(t.status, ClusterInstanceStatus::kRunning) || wait || !agent_back ||
      (s != nullptr && !HasStep(r, "SlurmdRegistered"))) {
    if (changed) return Save(cluster, r, {}, "");
    return OkStatus();
  }
  if (s != nullptr) {
    // Resume, then finish only once the controller's table shows the node clean:
    // a table from before the resume would still carry the Action mark, which
    // the health concern would take for a new request.
    const bool clean = !Has(s->state, "FAIL") && !Has(s->state, "DRAIN") &&
                       !Has(s->state, "DOWN") && s->reason.rfind("Action:", 0) != 0 &&
                       s->Registered();
    if (!clean || !HasStep(r, "Resumed")) {
      Status resumed =
          Scontrol(slurm, {"scontrol", "update", "nodename=" + r.hostname, "state=resume"});
      // Slurm refuses to resume a node that has nothing to resume from.
      if (!resumed.ok() && resumed.message().find("Invalid node state") == std::string_view::npos) {
        return resumed;
      }
      step("Resumed", "scontrol update nodename=" + r.hostname + " state=resume");
      out->busy = true;
      return Save(cluster, r, {}, "");
    }
  } else {
    step("Resumed", "not resumed in Slurm: " + why);
  }
  r.phase = std::string(RecoveryPhaseName(RecoveryPhase::kResumed));
  double took = clock_.NowEpochSeconds() - r.created;
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%.1f", took);
  return Finish(cluster, r, kRecoverySucceeded,
                "node " + NodeName(r) + " recovered by " + r.action + " in " + secs + " s" +
                    (replace ? " (" + r.instance_id + " → " + r.replacement_id + ")" : ""));
}

Status RecoveryReconciler::Finish(const store::ClusterRecord& cluster, RecoveryRecord& r,
                                  const std::string& status, const std::string& message) {
  r.status = status;
  r.message = message;
  r.finished = clock_.NowEpochSeconds();
  return Save(cluster, r, {}, "Recovery " + r.recovery_id + " " + status + ": " + message);
}

Status RecoveryReconciler::Save(const store::ClusterRecord& cluster, const RecoveryRecord& r,
                                const std::function<void(NodeRecord&)>& node,
                                const std::string& event) {
  const std::string& subject = r.replacement_id.empty() ? r.instance_id : r.replacement_id;
  return store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_RETURN_IF_ERROR(tx.PutRecovery(r));
    if (node) {
      // The row as it is now, not as the pass read it: a concurrent BatchDelete
      // (remove) or status change is kept; a row being removed is left alone.
      auto current = tx.GetNodeById(r.instance_id);
      if (current.ok() && !current->remove) {
        node(*current);
        HPOD_RETURN_IF_ERROR(tx.PutNode(*current));
      }
    }
    if (event.empty()) return OkStatus();
    EventLevel level = r.status == kRecoveryFailed ? EventLevel::kError : EventLevel::kInfo;
    return RecordEvent(tx, clock_, cluster, NodeSubject(r.group_name, subject), level, event);
  });
}

}  // namespace hpod::controlplane
