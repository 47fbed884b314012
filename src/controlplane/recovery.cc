#include "hpod/controlplane/recovery.h"

#include "hpod/api/states.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/ids.h"
#include "hpod/controlplane/software_update.h"

namespace hpod::controlplane {

std::string_view RecoveryActionName(RecoveryAction a) {
  return a == RecoveryAction::kReboot ? "Reboot" : "Replace";
}

std::optional<RecoveryAction> ParseRecoveryAction(std::string_view name) {
  if (name == "Reboot") return RecoveryAction::kReboot;
  if (name == "Replace") return RecoveryAction::kReplace;
  return std::nullopt;
}

namespace {
constexpr std::string_view kPhaseNames[] = {"Detected", "Marked", "Drained", "Launched", "Resumed"};
}  // namespace

std::string_view RecoveryPhaseName(RecoveryPhase p) { return kPhaseNames[static_cast<int>(p)]; }

std::optional<RecoveryPhase> ParseRecoveryPhase(std::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(kPhaseNames)); ++i) {
    if (kPhaseNames[i] == name) return static_cast<RecoveryPhase>(i);
  }
  return std::nullopt;
}

bool RecoveryActive(const store::RecoveryRecord& r) { return r.status == kRecoveryInProgress; }

StatusOr<std::vector<store::RecoveryRecord>> ActiveRecoveries(store::ReadTx& tx,
                                                              const std::string& cluster_id) {
  return tx.ListRecoveriesWithStatus(cluster_id, {kRecoveryInProgress});
}

void AddTimelineStep(store::RecoveryRecord& r, const Clock& clock, std::string_view step,
                     const std::string& detail) {
  r.timeline.push_back(
      {{"step", std::string(step)}, {"time", clock.NowEpochSeconds()}, {"detail", detail}});
}

double RecoveryStepTime(const store::RecoveryRecord& r, std::string_view step) {
  double at = 0;
  if (!r.timeline.is_array()) return at;
  for (const auto& s : r.timeline) {
    if (!s.is_object()) continue;
    auto name = s.find("step");
    auto time = s.find("time");
    if (name == s.end() || !name->is_string() || name->get<std::string>() != step) continue;
    at = time != s.end() && time->is_number() ? time->get<double>() : 1;
  }
  return at;
}

StatusOr<std::string> RequestRecovery(store::WriteTx& tx, const Clock& clock,
                                      const store::ClusterRecord& cluster,
                                      const store::NodeRecord& node, bool is_controller,
                                      const RecoveryRequest& request) {
  if (node.remove) {
    return FailedPreconditionError("node " + node.instance_id + " is being removed");
  }
  if (!node.launched) {
    return FailedPreconditionError("node " + node.instance_id + " was never launched");
  }
  HPOD_ASSIGN_OR_RETURN(auto active, ActiveRecoveries(tx, cluster.id));
  for (const auto& r : active) {
    // One recovery at a time per node and per hostname: a replacement in flight
    // owns the name even before its own row exists.
    if (r.instance_id == node.instance_id || r.replacement_id == node.instance_id ||
        (!node.hostname.empty() && r.hostname == node.hostname)) {
      return r.recovery_id;
    }
  }
  store::RecoveryRecord r;
  r.recovery_id = NewRecoveryId();
  r.cluster_id = cluster.id;
  r.group_name = node.group_name;
  r.instance_id = node.instance_id;
  r.hostname = node.hostname;
  r.private_ip = node.private_ip;
  RecoveryAction action = request.action;
  r.reason = request.reason;
  if (is_controller && action == RecoveryAction::kReplace) {
    action = RecoveryAction::kReboot;
    r.reason +=
        " (the controller node is rebooted, never replaced: its slurmctld state is on its "
        "disk)";
  }
  r.action = std::string(RecoveryActionName(action));
  r.source = request.source;
  r.check = request.check;
  r.node_dead = request.node_dead;
  // NodeRecovery=None stops hpod's own repairs, not a caller's explicit request
  // (a Batch API, or UpdateClusterSoftware's replacements).
  const bool requested =
      request.source.rfind("Batch", 0) == 0 || request.source == kSoftwareUpdateSource;
  auto setting = cluster.spec.find("NodeRecovery");
  const bool none = setting != cluster.spec.end() && setting->is_string() &&
                    setting->get<std::string>() == "None";
  r.automatic = requested || !none;
  r.phase = std::string(RecoveryPhaseName(RecoveryPhase::kDetected));
  r.status = kRecoveryInProgress;
  r.created = clock.NowEpochSeconds();
  AddTimelineStep(r, clock, "Detected",
                  request.source + (request.check.empty() ? "" : " (" + request.check + ")") +
                      ": " + request.reason);
  HPOD_RETURN_IF_ERROR(tx.PutRecovery(r));
  std::string what = r.automatic ? r.action : "report only (NodeRecovery is None)";
  std::string text =
      requested ? r.action + " of node " + node.instance_id + " (" + node.hostname +
                      ") requested by " + request.source + ". Recovery " + r.recovery_id
                : "Node " + node.instance_id + " (" + node.hostname +
                      ") is unhealthy: " + r.reason + ". Recovery " + r.recovery_id + ": " + what;
  HPOD_RETURN_IF_ERROR(RecordEvent(tx, clock, cluster,
                                   NodeSubject(node.group_name, node.instance_id),
                                   requested ? EventLevel::kInfo : EventLevel::kWarn, text));
  return r.recovery_id;
}

}  // namespace hpod::controlplane
