#include "hpod/controlplane/health_reconciler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "hpod/api/states.h"
#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/slurm_plan.h"

namespace hpod::controlplane {

using api::ClusterInstanceStatus;
using Steady = std::chrono::steady_clock;

std::string HealthKey(const std::string& cluster_id) {
  return std::string(kHealthKeyPrefix) + cluster_id;
}

std::string_view HealthVerdictName(HealthVerdict v) {
  switch (v) {
    case HealthVerdict::kUnknown:
      return "Unknown";
    case HealthVerdict::kHealthy:
      return "Healthy";
    case HealthVerdict::kReboot:
      return "Reboot";
    case HealthVerdict::kReplace:
      return "Replace";
  }
  return "Unknown";
}

namespace {

long Seconds(Steady::duration d) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(d).count());
}

// The source of the verdicts that say hpodd lost contact with the node's agent.
constexpr char kLostContact[] = "Heartbeat";
// How many heartbeat timeouts a node under a deep health check may be silent
// with its connection open (see Judge).
constexpr int kDeepCheckHeartbeatFactor = 3;

void Ask(NodeHealth& h, RecoveryAction action, std::string source, std::string check,
         std::string reason, bool dead) {
  h.verdict = action == RecoveryAction::kReboot ? HealthVerdict::kReboot : HealthVerdict::kReplace;
  h.reason = reason;
  h.request = RecoveryRequest{action, std::move(source), std::move(check), std::move(reason), dead};
}

// A user's (or hpod's own) HyperPod-style mark in Slurm: FAIL or DOWN with reason
// Action:Replace / Action:Reboot.
std::optional<RecoveryAction> SlurmMark(const slurm::SlurmNodeState& s, bool* down) {
  std::optional<RecoveryAction> action;
  if (s.reason.rfind("Action:Replace", 0) == 0) action = RecoveryAction::kReplace;
  if (s.reason.rfind("Action:Reboot", 0) == 0) action = RecoveryAction::kReboot;
  if (!action) return std::nullopt;
  bool fail = s.state.find("FAIL") != std::string::npos;
  *down = s.state.find("DOWN") != std::string::npos;
  if (!fail && !*down) return std::nullopt;
  return action;
}

// Up to this many agent records are read one by one, more all at once.
constexpr long kAgentReadsOneByOne = 64;

}  // namespace

HealthReconciler::HealthReconciler(store::Store& store, const Clock& clock,
                                   const HealthOptions& options, NodeSignals* signals,
                                   provider::Provider* provider,
                                   std::function<void(const std::string&)> wake)
    : store_(store),
      clock_(clock),
      options_(options),
      signals_(signals),
      provider_(provider),
      wake_(std::move(wake)) {}

StatusOr<std::vector<NodeHealth>> HealthReconciler::Judge(const std::string& cluster_id) {
  std::vector<store::NodeSummary> nodes;
  std::map<std::string, store::AgentRecord> agents;
  std::set<std::string> busy;  // instance ids and hostnames with a recovery in progress
  std::string controller_group;
  const double now_epoch = clock_.NowEpochSeconds();
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(auto cluster, tx.GetCluster(cluster_id));
    HPOD_ASSIGN_OR_RETURN(nodes, tx.ListNodeSummaries(cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(cluster_id));
    HPOD_ASSIGN_OR_RETURN(controller_group, ControllerGroup(tx, cluster_id, groups));
    // The agent's record tells only whether a node under a deep health check or
    // failed came up once (below): read for those few, not for every node each
    // second (nor for the Pending nodes of a creation: at 10,000 nodes a third of
    // hpodd's time while they joined); when many need it, one read of them all
    // is cheaper.
    auto needs_agent = [](const store::NodeSummary& n) {
      return api::Is(n.status, ClusterInstanceStatus::kDeepHealthCheckInProgress) ||
             api::Is(n.status, ClusterInstanceStatus::kFailure);
    };
    if (std::count_if(nodes.begin(), nodes.end(), needs_agent) > kAgentReadsOneByOne) {
      HPOD_ASSIGN_OR_RETURN(auto list, tx.ListAgents(cluster_id));
      for (auto& a : list) agents[a.instance_id] = std::move(a);
    } else {
      for (const auto& n : nodes) {
        if (!needs_agent(n)) continue;
        auto a = tx.GetAgent(n.instance_id);
        if (a.ok()) {
          agents[n.instance_id] = std::move(*a);
        } else if (a.status().code() != StatusCode::kNotFound) {
          return a.status();
        }
      }
    }
    // Not the finished ones, nearly all of a cluster's history (the store's
    // indexes): those in progress, the reported ones, and the failures within
    // the back-off (older ones change nothing below).
    HPOD_ASSIGN_OR_RETURN(
        auto recoveries,
        tx.ListRecoveriesWithStatus(cluster_id, {kRecoveryInProgress, kRecoveryReported}));
    HPOD_ASSIGN_OR_RETURN(auto failed,
                          tx.ListRecoveriesFinishedSince(
                              cluster_id, kRecoveryFailed,
                              now_epoch - static_cast<double>(options_.failed_backoff.count())));
    recoveries.insert(recoveries.end(), std::make_move_iterator(failed.begin()),
                      std::make_move_iterator(failed.end()));
    for (const auto& r : recoveries) {
      // A recovery that failed lately is not started again at once for the same
      // fault (its own Action mark stays in Slurm, a reboot the provider refused
      // would be refused again): the node waits out failed_backoff.
      const bool failed_lately =
          r.status == kRecoveryFailed && now_epoch - r.finished < options_.failed_backoff.count();
      if (failed_lately) {
        busy.insert(r.instance_id);
        if (!r.replacement_id.empty()) busy.insert(r.replacement_id);
        continue;
      }
      if (!RecoveryActive(r) && r.status != kRecoveryReported) continue;
      if (r.status == kRecoveryReported) {
        // A reported node stays as it is until it is recovered another way
        // (BatchReboot keeps its instance id): then the report is over, and a
        // later fault is judged again. At most one per node, a rare few.
        HPOD_ASSIGN_OR_RETURN(std::string latest, tx.LatestRecoveryId(cluster_id, r.instance_id));
        if (latest != r.recovery_id) continue;
      }
      busy.insert(r.instance_id);
      if (!RecoveryActive(r)) continue;  // Reported: that node only, it stays as it is
      if (!r.replacement_id.empty()) busy.insert(r.replacement_id);
      if (!r.hostname.empty()) busy.insert(r.hostname);
    }
    return OkStatus();
  }));
  std::shared_ptr<const SlurmNodesReport> slurm;
  if (signals_ != nullptr) slurm = signals_->SharedSlurmNodes(cluster_id);
  const auto now = clock_.SteadyNow();
  // When many nodes cannot reach the controller at once, the controller (or its
  // link) is the fault, not each of them: their network checks are set aside (the
  // controller's own signals judge it).
  int reporting = 0, unreachable = 0;
  // Each node's latest report, read once (shared, not copied) for both loops below.
  std::vector<std::shared_ptr<const api::agentproto::HealthReport>> reports(nodes.size());
  if (signals_ != nullptr) {
    for (size_t i = 0; i < nodes.size(); i++) {
      reports[i] = signals_->Health(nodes[i].instance_id);
      const auto& report = reports[i];
      if (!report) continue;
      for (const auto& c : report->checks) {
        if (c.name != "network" || c.result == "skipped") continue;
        ++reporting;
        unreachable += c.result != "ok";
      }
    }
  }
  // So is everything while the controller itself is down, rebooting or gone.
  bool controller_down = false;
  for (const auto& n : nodes) {
    if (controller_group.empty() || n.group_name != controller_group || signals_ == nullptr) {
      continue;
    }
    // Under a deep health check it is still up (deep_health.h).
    controller_down |= busy.count(n.instance_id) > 0 ||
                       (!api::Is(n.status, ClusterInstanceStatus::kRunning) &&
                        !api::Is(n.status, ClusterInstanceStatus::kDeepHealthCheckInProgress)) ||
                       !signals_->Liveness(n.instance_id).connected;
  }
  const bool controller_side =
      controller_down || (unreachable >= 2 && unreachable * 2 >= reporting);
  std::vector<NodeHealth> out;
  for (size_t i = 0; i < nodes.size(); i++) {
    const store::NodeSummary& n = nodes[i];
    NodeHealth h;
    h.instance_id = n.instance_id;
    auto a = agents.find(n.instance_id);
    const bool was_up =
        a != agents.end() && api::Parse<api::LifecycleState>(a->second.lifecycle_state) ==
                                 api::LifecycleState::kSucceeded;
    // A node under a deep health check (deep_health.h) is watched as a Running
    // one: its check does not notice an agent that died while it waits.
    const bool running =
        api::Is(n.status, ClusterInstanceStatus::kRunning) ||
        (api::Is(n.status, ClusterInstanceStatus::kDeepHealthCheckInProgress) && was_up);
    const bool failed_after_up = api::Is(n.status, ClusterInstanceStatus::kFailure) && was_up;
    if (signals_ == nullptr || n.remove || !n.launched || (!running && !failed_after_up) ||
        busy.count(n.instance_id) || (!n.hostname.empty() && busy.count(n.hostname))) {
      out.push_back(std::move(h));
      continue;
    }
    h.verdict = HealthVerdict::kHealthy;
    AgentLiveness live = signals_->Liveness(n.instance_id);
    // An agent not heard of since hpodd started is given the startup grace to
    // reconnect (agents retry with backoff); one seen since is judged by what was seen.
    const Steady::time_point floor =
        live.service_started + options_.startup_grace - options_.heartbeat_timeout;
    if (!live.connected) {
      std::optional<provider::NodeObservation> seen;
      if (provider_ != nullptr) {
        auto d = provider_->Describe(n.instance_id);
        if (!d.ok() && d.status().code() == StatusCode::kNotFound) {
          Ask(h, RecoveryAction::kReplace, "Instance", "instance",
              "the instance no longer exists at the provider", true);
        } else if (d.ok() && (d->state == provider::NodeState::kFailed ||
                              d->state == provider::NodeState::kTerminated)) {
          Ask(h, RecoveryAction::kReplace, "Instance", "instance", d->message, true);
        }
      }
      if (h.verdict == HealthVerdict::kHealthy) {
        Steady::time_point since = live.disconnected_at.value_or(floor);
        if (now - since > options_.heartbeat_timeout) {
          Ask(h, RecoveryAction::kReplace, kLostContact, "agent",
              "the hpod agent has been disconnected for " + std::to_string(Seconds(now - since)) +
                  " s (timeout " + std::to_string(options_.heartbeat_timeout.count()) + " ms)",
              true);
        }
      }
    } else {
      // Anything read shows the agent alive (AgentLiveness::last_read); fakes and
      // older snapshots may set the heartbeat's time alone.
      const Steady::time_point last = std::max(live.last_heartbeat.value_or(live.connected_at),
                                               live.last_read.value_or(live.connected_at));
      // Under a deep health check a node is loaded on purpose (stress-ng on every
      // CPU it has; a node held to 2% of one by the cpu-throttle fault runs it
      // there) and is held out of jobs: its heartbeats may lag for the run, so a
      // hang takes three timeouts. Its check fails a node that stops answering.
      // hpodd's own reading that far behind (AgentLiveness::read_lag) is no
      // silence of the node's.
      const auto timeout = (api::Is(n.status, ClusterInstanceStatus::kDeepHealthCheckInProgress)
                                ? options_.heartbeat_timeout * kDeepCheckHeartbeatFactor
                                : options_.heartbeat_timeout) +
                           live.read_lag;
      if (now - last > timeout) {
        Ask(h, RecoveryAction::kReplace, kLostContact, "heartbeat",
            "no heartbeat (nor any other message) from the hpod agent for " +
                std::to_string(Seconds(now - last)) +
                " s while its connection stays open (the node hangs)",
            true);
      }
    }
    if (h.verdict == HealthVerdict::kHealthy && slurm && !n.hostname.empty()) {
      if (const auto* s = slurm->Find(n.hostname)) {
        bool down = false;
        if (auto action = SlurmMark(*s, &down)) {
          Ask(h, *action, "Slurm", "scontrol",
              "Slurm node " + n.hostname + " is " + s->state + " with reason \"" + s->reason + "\"",
              down);
        }
      }
    }
    if (h.verdict == HealthVerdict::kHealthy) {
      if (const auto& report = reports[i]) {
        const api::agentproto::HealthCheck* worst = nullptr;
        for (const auto& c : report->checks) {
          if (!api::agentproto::AsksForAction(c)) continue;
          if (controller_side && c.name == "network") continue;
          if (worst == nullptr || (c.verdict == "Replace" && worst->verdict != "Replace")) {
            worst = &c;
          }
        }
        if (worst != nullptr) {
          Ask(h, worst->verdict == "Reboot" ? RecoveryAction::kReboot : RecoveryAction::kReplace,
              "HealthCheck", worst->name, "health check " + worst->name + ": " + worst->reason,
              false);
        }
      }
    }
    out.push_back(std::move(h));
  }
  // Lost contact with most of the cluster at once: hpodd's side (see the header).
  int judged = 0, lost = 0;
  for (const auto& h : out) {
    judged += h.verdict != HealthVerdict::kUnknown;
    lost += h.verdict != HealthVerdict::kUnknown && h.request.source == kLostContact;
  }
  if (lost >= options_.mass_loss_min && lost * 2 > judged) {
    for (auto& h : out) {
      h.held = h.verdict != HealthVerdict::kUnknown && h.request.source == kLostContact;
    }
  }
  return out;
}

Status HealthReconciler::NoteHold(const std::string& cluster_id, int held, int judged) {
  {
    MutexLock lock(held_mu_);
    if ((held > 0) == (held_.count(cluster_id) > 0)) return OkStatus();
  }
  std::string text =
      held > 0
          ? "hpodd lost contact with " + std::to_string(held) + " of " + std::to_string(judged) +
                " nodes at once: the fault is taken to be on hpodd's side (its host, its "
                "network or its load), and no node is replaced for lost contact until "
                "contact with most of them returns"
          : "contact with most nodes is back: lost contact is acted on again";
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(auto cluster, tx.GetCluster(cluster_id));
    return RecordEvent(tx, clock_, cluster, ClusterSubject(),
                       held > 0 ? EventLevel::kWarn : EventLevel::kInfo, text);
  }));
  spdlog::warn("cluster {}: {}", cluster_id, text);
  MutexLock lock(held_mu_);
  if (held > 0) {
    held_.insert(cluster_id);
  } else {
    held_.erase(cluster_id);
  }
  return OkStatus();
}

WorkQueue::Result HealthReconciler::Reconcile(const std::string& cluster_id) {
  auto verdicts = Judge(cluster_id);
  if (!verdicts.ok() && verdicts.status().code() == StatusCode::kNotFound) return {OkStatus(), {}};
  if (!verdicts.ok()) return {verdicts.status(), {}};
  bool watching = false, started = false;
  int held = 0, judged = 0;
  for (const auto& h : *verdicts) {
    judged += h.verdict != HealthVerdict::kUnknown;
    held += h.held;
  }
  if (Status s = NoteHold(cluster_id, held, judged); !s.ok()) return {s, {}};
  for (const auto& h : *verdicts) {
    if (h.verdict == HealthVerdict::kUnknown) continue;
    watching = true;
    if (h.verdict == HealthVerdict::kHealthy || h.held) continue;
    // The recovery is written from a fresh read, so a node that changed since the
    // judgement (removed, already in a recovery) is not recovered twice.
    Status s = store_.Write([&](store::WriteTx& tx) -> Status {
      HPOD_ASSIGN_OR_RETURN(auto cluster, tx.GetCluster(cluster_id));
      auto node = tx.GetNodeById(h.instance_id);
      if (!node.ok()) return OkStatus();
      HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(cluster_id));
      HPOD_ASSIGN_OR_RETURN(std::string controller, ControllerGroup(tx, cluster_id, groups));
      auto id = RequestRecovery(tx, clock_, cluster, *node,
                                !controller.empty() && node->group_name == controller, h.request);
      if (!id.ok() && id.status().code() == StatusCode::kFailedPrecondition) return OkStatus();
      if (!id.ok()) return id.status();
      spdlog::info("node {} of cluster {}: {} ({}), recovery {}", h.instance_id, cluster_id,
                   HealthVerdictName(h.verdict), h.reason, *id);
      return OkStatus();
    });
    if (!s.ok()) return {s, {}};
    started = true;
  }
  if (started && wake_) wake_(cluster_id);
  // Silence is noticed only by looking: a cluster with nodes to watch is polled.
  return {OkStatus(), watching ? options_.poll_interval : std::chrono::milliseconds(0)};
}

}  // namespace hpod::controlplane
