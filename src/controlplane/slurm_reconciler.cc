#include "hpod/controlplane/slurm_reconciler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/recovery.h"

namespace hpod::controlplane {

using store::NodeRecord;

namespace {

// A node's Slurm message is resent, while its agent has not reported applying
// it, at most this often: a pass of a 10,000-node creation came every fraction of
// a second and sent it again to every node not yet answered (17 messages a node).
// An agent answers within a second; one that reconnects gets it at once.
constexpr std::chrono::milliseconds kSlurmResend{3000};

std::string NoSlurmNotedSetting(const std::string& cluster_id) {
  return "cluster/" + cluster_id + "/no_slurm_noted";
}
}  // namespace

bool SlurmdOfThisInstance(const slurm::SlurmNodeState& row, const nlohmann::json& agent_state,
                          double launch_time, const std::string& stale_start) {
  // No report from the instance's agent yet (it reports on connect): nothing
  // says which slurmd is its own.
  if (!row.Registered() || !agent_state.is_object()) return false;
  const bool stale = !stale_start.empty() && row.slurmd_start_time == stale_start;
  // The choice, and why (issue 25, one clock per fact): the node's agent says when
  // it started its slurmd, on the node's clock, and Slurm's SlurmdStartTime is the
  // same node's clock (slurmd stamps it when it first registers, after the fork),
  // so "not earlier" compares two readings of one clock. A generation id passed to
  // slurmd would need a field Slurm 22.05 shows for a non-dynamic node and that
  // slurmd sets at each start; it has none (Features/Extra are the controller's
  // and outlive a slurmd).
  if (agent_state.is_object()) {
    auto it = agent_state.find("slurmd_started");
    if (it != agent_state.end() && it->is_number()) {
      return !stale && row.SlurmdStartEpoch() >= std::floor(it->get<double>());
    }
  }
  // An agent older than slurmd_started: hpodd's launch time against the node's
  // clock, which holds only while the two agree (the rule before the field).
  const double launched = std::floor(launch_time);
  if (row.SlurmdStartEpoch() < launched) return false;
  if (!stale) return true;
  return slurm::SlurmTimeEpoch(stale_start) >= launched;
}

SlurmReconciler::SlurmReconciler(store::Store& store, const Clock& clock,
                                 const ControlPlaneOptions& options, SlurmAgents* agents)
    : store_(store), clock_(clock), options_(options), agents_(agents) {}

StatusOr<SlurmReconciler::Pass> SlurmReconciler::Begin(const std::string& cluster_id,
                                                       const std::vector<NodeRecord>& nodes,
                                                       bool in_play) {
  Pass pass;
  pass.cluster_id = cluster_id;
  {
    // Removal clocks live as long as this cluster's node rows marked for removal.
    MutexLock lock(mu_);
    auto& clocks = removals_[cluster_id];
    std::erase_if(clocks, [&](const auto& entry) {
      return std::none_of(nodes.begin(), nodes.end(), [&](const NodeRecord& n) {
        return n.remove && n.instance_id == entry.first;
      });
    });
    if (clocks.empty()) removals_.erase(cluster_id);
    if (!in_play) noted_no_slurm_.erase(cluster_id);
  }
  if (!in_play || agents_ == nullptr) return pass;
  pass.report = agents_->SlurmNodes(cluster_id);
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(auto recoveries, ActiveRecoveries(tx, cluster_id));
    for (const auto& r : recoveries) NoteRecovery(pass, r);
    return OkStatus();
  }));
  // A node leaves Slurm in two steps: drained while still in slurm.conf, then
  // dropped from it (see ReadyToTerminate).
  std::set<std::string> draining;
  for (const auto& n : nodes) {
    const slurm::SlurmNodeState* s = pass.report ? pass.report->Find(n.hostname) : nullptr;
    if (n.remove && s != nullptr && !s->Drained() && !RemovalTimedOut(cluster_id, n.instance_id)) {
      draining.insert(n.instance_id);
    }
  }
  HPOD_ASSIGN_OR_RETURN(SlurmPlan plan,
                        BuildSlurmPlan(store_, cluster_id, options_.slurm, draining));
  if (plan.mode == SlurmPlan::Mode::kNone) NoteNoSlurm(cluster_id);
  pass.plan = std::move(plan);
  return pass;
}

void SlurmReconciler::NoteRecovery(Pass& pass, const store::RecoveryRecord& r) {
  const bool replace = ParseRecoveryAction(r.action) == RecoveryAction::kReplace;
  const std::string& target = replace ? r.replacement_id : r.instance_id;
  // Only added: a pass is short, and a row a recovery that just finished marked
  // is still not the node's new slurmd.
  if (!target.empty() && RecoveryActive(r) && !r.stale_slurmd_start.empty()) {
    pass.stale_start[target] = r.stale_slurmd_start;
  }
  if (replace && !target.empty() && RecoveryActive(r) && !r.private_ip.empty()) {
    pass.replaced_addr[target] = r.private_ip;
  }
}

void SlurmReconciler::NoteNoSlurm(const std::string& cluster_id) {
  {
    MutexLock lock(mu_);
    if (noted_no_slurm_.count(cluster_id)) return;
  }
  Status s = store_.Write([&](store::WriteTx& tx) -> Status {
    auto noted = tx.GetSetting(NoSlurmNotedSetting(cluster_id));
    if (noted.ok()) return OkStatus();
    if (noted.status().code() != StatusCode::kNotFound) return noted.status();
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, tx.GetCluster(cluster_id));
    HPOD_RETURN_IF_ERROR(tx.PutSetting(NoSlurmNotedSetting(cluster_id), "1"));
    return RecordEvent(tx, clock_, c, ClusterSubject(), EventLevel::kWarn, kNoSlurmEvent);
  });
  if (!s.ok()) {
    spdlog::warn("recording that cluster {} has no Slurm: {}", cluster_id, s.ToString());
    return;
  }
  MutexLock lock(mu_);
  noted_no_slurm_.insert(cluster_id);
}

bool SlurmReconciler::SyncNode(Pass& pass, const NodeRecord& n) {
  const SlurmPlan& plan = *pass.plan;
  if (plan.mode == SlurmPlan::Mode::kNone) {
    // Without Slurm a node's `sinfo` would fail with Slurm's own "DNS SRV lookup
    // failed"; the agent says plainly that there is no Slurm instead (motd, and a
    // hint where Slurm's commands would fail). Resent until acknowledged.
    nlohmann::json state = agents_->SlurmState(n.instance_id);
    if (state.is_object() && state.value("role", "") == "none") return true;
    agents_->SendUnlessRecent(n.instance_id, NoSlurmMessage(n), kSlurmResend);
    return false;
  }
  auto role = plan.role_of.find(n.instance_id);
  if (role == plan.role_of.end()) return false;  // no address yet
  nlohmann::json state = agents_->SlurmState(n.instance_id);
  const bool is_object = state.is_object();
  const bool has_hash = is_object && state.value("conf_hash", "") == plan.conf_hash;
  const bool held = is_object && state.value("held", false);
  bool ctl_ready = true;
  if (role->second != slurm::NodeRole::kController) {
    // Workers and login nodes start Slurm once slurmctld runs this configuration:
    // a configless slurmd that starts earlier fails to fetch it and retries only a
    // second later, and one the controller does not know yet is refused.
    nlohmann::json ctl = agents_->SlurmState(plan.controller_instance);
    ctl_ready = ctl.is_object() && ctl.value("conf_hash", "") == plan.conf_hash &&
                ctl.value("daemon", "") == "running";
  }
  if (!ctl_ready) {
    pass.busy = true;
    // A node that ran Slurm unheld keeps its configuration until slurmctld runs
    // the new one; one that never did is configured now, held (its munged and
    // slurm.conf in place while its lifecycle scripts run, as on HyperPod). No
    // report yet (the agent just connected, or hpodd restarted) says neither:
    // wait for it, or a running slurmd could be held.
    const bool never_ran = is_object && (state.value("conf_hash", "").empty() || held);
    if (never_ran && !(has_hash && held)) {
      auto stale = pass.stale_start.find(n.instance_id);
      agents_->SendUnlessRecent(n.instance_id,
                                SlurmMessage(plan, n, options_.slurm,
                                             stale == pass.stale_start.end() ? "" : stale->second,
                                             /*hold=*/true),
                                kSlurmResend);
    }
    return false;
  }
  const bool current = has_hash && !held;
  if (!current && role->second == slurm::NodeRole::kCompute && !MoveNodeAddr(pass, n)) {
    pass.busy = true;
    return false;
  }
  if (!current) {
    pass.busy = true;
    // Resent until the agent reports the new hash (it applies the same message
    // idempotently), at most every kSlurmResend.
    // A replacement's slurmd starts outside its predecessor's start second, so
    // that its registration never reads as the marked row (SlurmdOfThisInstance).
    auto stale = pass.stale_start.find(n.instance_id);
    agents_->SendUnlessRecent(
        n.instance_id,
        SlurmMessage(plan, n, options_.slurm, stale == pass.stale_start.end() ? "" : stale->second),
        kSlurmResend);
    return false;
  }
  if (state.value("daemon", "") != "running") return false;
  if (role->second != slurm::NodeRole::kCompute) return true;
  const slurm::SlurmNodeState* s = pass.report ? pass.report->Find(n.hostname) : nullptr;
  if (pass.report && pass.report->reporter != plan.controller_instance) s = nullptr;
  // The slurmd of this instance, not a row Slurm still has from a node that held
  // the name before (a replacement keeps its predecessor's NodeName).
  if (s == nullptr) return false;
  auto stale = pass.stale_start.find(n.instance_id);
  return SlurmdOfThisInstance(*s, state, n.launch_time,
                              stale == pass.stale_start.end() ? "" : stale->second);
}

bool SlurmReconciler::MoveNodeAddr(Pass& pass, const NodeRecord& n) {
  auto before = pass.replaced_addr.find(n.instance_id);
  if (before == pass.replaced_addr.end() || before->second == n.private_ip) return true;
  const std::string key = n.instance_id + " " + n.private_ip;
  {
    MutexLock lock(mu_);
    if (addr_moved_.count(key)) return true;
  }
  // slurm.conf already says so, but slurmctld 22.05 keeps a known node's
  // address across `scontrol reconfigure` (ParallelCluster tells it the same way).
  auto r = agents_->Run(
      pass.plan->controller_instance,
      {"env", std::string("SLURM_CONF=") + slurm::kConfDir + "/slurm.conf", "scontrol", "update",
       "nodename=" + n.hostname, "nodeaddr=" + n.private_ip, "nodehostname=" + n.hostname},
      std::chrono::seconds(3));
  if (!r.ok() || r->exit_code != 0) {
    spdlog::warn("moving {} to {} in Slurm: {}", n.hostname, n.private_ip,
                 r.ok() ? r->stderr_data : std::string(r.status().message()));
    return false;
  }
  spdlog::info("slurmctld: {} is at {} now (was {})", n.hostname, n.private_ip, before->second);
  MutexLock lock(mu_);
  addr_moved_.insert(key);
  return true;
}

bool SlurmReconciler::RemovalTimedOut(const std::string& cluster_id,
                                      const std::string& instance_id) {
  const auto now = clock_.SteadyNow();
  MutexLock lock(mu_);
  auto started = removals_[cluster_id].emplace(instance_id, now).first->second;
  return now - started > options_.slurm.remove_timeout;
}

std::optional<std::string> SlurmReconciler::WaitExpired(const Pass& pass, const NodeRecord& n) {
  const auto now = clock_.SteadyNow();
  std::chrono::steady_clock::time_point since;
  {
    MutexLock lock(mu_);
    since = waits_.emplace(n.instance_id, now).first->second;
  }
  if (now - since <= options_.slurm.ready_timeout) return std::nullopt;
  WaitDone(n.instance_id);
  std::string limit = std::to_string(options_.slurm.ready_timeout.count()) + " s";
  if (pass.plan->mode == SlurmPlan::Mode::kWaiting) {
    return "hpodd did not learn the cluster's Slurm roles within " + limit +
           " of the lifecycle scripts succeeding (no provisioning_parameters.json report)";
  }
  std::string detail;
  if (agents_ != nullptr) {
    nlohmann::json state = agents_->SlurmState(n.instance_id);
    if (state.is_object()) detail = state.value("message", "");
  }
  return "Slurm on the instance did not come up within " + limit +
         (detail.empty() ? std::string(" (its slurmd did not register with slurmctld; see "
                                       "/var/log/slurm on the node)")
                         : ": " + detail);
}

void SlurmReconciler::WaitDone(const std::string& instance_id) {
  MutexLock lock(mu_);
  waits_.erase(instance_id);
}

bool SlurmReconciler::ReadyToTerminate(Pass& pass, const NodeRecord& n) {
  if (!pass.plan) return true;
  const SlurmPlan& plan = *pass.plan;
  if (plan.mode != SlurmPlan::Mode::kSlurm || n.hostname.empty()) return true;
  const slurm::SlurmNodeState* s = pass.report ? pass.report->Find(n.hostname) : nullptr;
  // Without the controller's view (hpodd just restarted, the controller's agent is
  // reconnecting) hpod cannot tell whether Slurm still has the node: wait for it.
  const bool unknown = !pass.report && !plan.controller_instance.empty();
  if (s == nullptr && !unknown) return true;  // not (or no longer) in Slurm
  if (RemovalTimedOut(n.cluster_id, n.instance_id)) {
    spdlog::warn("{} is still in Slurm {} s after its removal began; terminating it anyway",
                 n.hostname, options_.slurm.remove_timeout.count());
    return true;
  }
  // Drain first, so nothing new lands on it; once drained, the plan leaves it out
  // of slurm.conf and the controller's restart removes it from Slurm.
  if (s != nullptr && !s->Drained()) pass.to_drain.push_back(n.hostname);
  pass.busy = true;
  return false;
}

void SlurmReconciler::Finish(Pass& pass) {
  if (!pass.plan || pass.to_drain.empty() || pass.plan->controller_instance.empty()) return;
  std::string list;
  for (const auto& n : pass.to_drain) list += (list.empty() ? "" : ",") + n;
  // One command for all of them, briefly bounded: this runs on a reconcile
  // worker, and the next pass retries whatever the node table still shows.
  auto r = agents_->Run(
      pass.plan->controller_instance,
      {"env", std::string("SLURM_CONF=") + slurm::kConfDir + "/slurm.conf", "scontrol", "update",
       "nodename=" + list, "state=drain", "reason=hpod: removing the node from the cluster"},
      std::chrono::seconds(3));
  if (!r.ok() || r->exit_code != 0) {
    spdlog::warn("draining {}: {}", list,
                 r.ok() ? r->stderr_data : std::string(r.status().message()));
  }
  pass.to_drain.clear();
}

}  // namespace hpod::controlplane
