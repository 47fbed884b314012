// DeepHealthChecker::RunCluster: one pass over a cluster's due deep health
// checks (deep_health.h says the steps; deep_health_exec.h what an answer means).

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "hpod/api/states.h"
#include "hpod/base/crypto.h"
#include "hpod/controlplane/deep_health.h"
#include "hpod/controlplane/deep_health_exec.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/recovery.h"
#include "hpod/controlplane/slurm_plan.h"

namespace hpod::controlplane {

namespace {

using json = nlohmann::json;
using api::ClusterInstanceStatus;
using api::ClusterStatus;
using deep::CheckResult;
using deep::Outcome;
using namespace std::chrono_literals;

constexpr char kStress[] = "InstanceStress";
constexpr char kConnectivity[] = "InstanceConnectivity";
// A check that said nothing about its node is tried this many times, this far
// apart, before the node is taken for unreachable.
constexpr int kAttempts = 3;
constexpr double kRetrySeconds = 10;

struct Target {
  store::NodeRecord node;
  DeepCheck check;
  std::map<std::string, CheckResult> results;  // by check
};

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string Join(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string ReservationSetting(const std::string& cluster_id) {
  return "cluster/" + cluster_id + "/deep-check-reservation";
}

std::vector<std::string> ReservationArgv(const std::string& hosts) {
  return {"scontrol",
          "create",
          "reservation",
          std::string("reservationname=") + kDeepHealthReservation,
          "nodes=" + hosts,
          "starttime=now",
          "duration=infinite",
          "users=root",
          "flags=maint,ignore_jobs"};
}

const std::vector<std::string> kDeleteReservation = {
    "scontrol", "delete", std::string("reservation=") + kDeepHealthReservation};

// Each target's record from its results, from a fresh read: a node replaced or
// removed meanwhile is left alone.
//  - a check failed: Failed, with a Replace recovery (a Reboot for the
//    controller). A node that is itself the replacement of a recovery in flight
//    has that one: it is marked failed (fail_node), so that recovery ends
//    Failed instead of taking it for a good replacement;
//  - a check said nothing of the node: tried again kRetrySeconds later; after
//    kAttempts the node is taken for unreachable, as a failure;
//  - a check could not run for lack of a tool: Unavailable, the node left as it
//    is (another node would lack it too);
//  - else Passed.
Status WriteResults(store::Store& store, const Clock& clock, const std::string& cluster_id,
                    const std::string& run, const std::string& controller_group,
                    const std::string& slurm_note, std::vector<Target>& targets) {
  const double end = clock.NowEpochSeconds();
  return store.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(auto c, tx.GetCluster(cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto fresh, LoadDeepChecks(tx, cluster_id));
    for (auto& t : targets) {
      auto node = tx.GetNode(cluster_id, t.node.instance_id);
      auto rec = fresh.find(t.node.instance_id);
      if (!node.ok() || node->remove || rec == fresh.end() || rec->second.run != run) continue;
      std::vector<std::string> lines, failed, failed_lines, unsure, missing;
      for (const auto& name : t.check.checks) {
        auto it = t.results.find(name);
        const CheckResult r = it == t.results.end() ? CheckResult{} : it->second;
        const std::string verb = r.skipped ? "" : std::string(deep::OutcomeName(r.outcome)) + ": ";
        lines.push_back(name + " " + verb + (r.message.empty() ? "no answer" : r.message));
        if (r.outcome == Outcome::kFailed) {
          failed.push_back(name);
          failed_lines.push_back(lines.back());
        }
        if (r.outcome == Outcome::kInconclusive) unsure.push_back(lines.back());
        if (r.outcome == Outcome::kUnavailable) missing.push_back(lines.back());
      }
      DeepCheck& d = t.check;
      d.finished = end;
      d.results = json::object();
      for (const auto& [name, r] : t.results) {
        d.results[name] = {{"outcome", deep::OutcomeName(r.outcome)},
                           {"message", r.message},
                           {"detail", r.detail}};
      }
      EventLevel level = EventLevel::kInfo;
      bool recover = false;
      if (failed.empty() && !unsure.empty() && d.attempts + 1 < kAttempts) {
        ++d.attempts;
        d.state = kDeepCheckRequested;
        d.retry_after = end + kRetrySeconds;
        d.message = "Deep health check could not complete at " + FormatUtc(end) + " (" +
                    Join(unsure, "; ") + "); trying again in " +
                    std::to_string(static_cast<int>(kRetrySeconds)) + " s (attempt " +
                    std::to_string(d.attempts + 1) + " of " + std::to_string(kAttempts) + ")";
        level = EventLevel::kWarn;
      } else if (!failed.empty() || !unsure.empty()) {
        d.state = kDeepCheckFailed;
        if (failed.empty()) {
          failed = t.check.checks;
          failed_lines = {"could not complete " + std::to_string(kAttempts) +
                          " times, the node taken for unreachable: " + Join(unsure, "; ")};
        }
        d.message =
            "Deep health check failed at " + FormatUtc(end) + ": " + Join(lines, "; ") + slurm_note;
        level = EventLevel::kError;
        recover = true;
      } else if (!missing.empty()) {
        d.state = kDeepCheckUnavailable;
        d.message = "Deep health check could not run at " + FormatUtc(end) + ": " +
                    Join(lines, "; ") + "; the node is left as it is";
        level = EventLevel::kWarn;
      } else {
        d.state = kDeepCheckPassed;
        d.message = "Deep health check passed at " + FormatUtc(end) + ": " + Join(lines, "; ");
      }
      if (recover) {
        RecoveryRequest req;
        req.action = RecoveryAction::kReplace;
        req.source = "DeepHealthCheck";
        req.check = Join(failed);
        req.reason = "deep health check " + Join(failed_lines, "; ");
        auto id =
            RequestRecovery(tx, clock, c, *node,
                            !controller_group.empty() && node->group_name == controller_group, req);
        if (!id.ok() && id.status().code() != StatusCode::kFailedPrecondition) return id.status();
        if (id.ok()) {
          HPOD_ASSIGN_OR_RETURN(auto r, tx.GetRecovery(*id));
          d.fail_node = r.instance_id != node->instance_id;
        }
      }
      HPOD_RETURN_IF_ERROR(PutDeepCheck(tx, cluster_id, d));
      HPOD_RETURN_IF_ERROR(RecordEvent(
          tx, clock, c, NodeSubject(node->group_name, node->instance_id), level, d.message));
    }
    return OkStatus();
  });
}

// One group's connectivity ring, ranked by hostname. A node checked alone is
// measured against a Running peer of its group (a replacement against a node
// its job ran with), which is not judged.
void RunRing(const deep::RunFn& run, const DeepHealthOptions& options,
             const std::vector<store::NodeRecord>& nodes, const std::vector<Target>& targets,
             std::vector<std::pair<store::NodeRecord, Target*>>& ring) {
  if (ring.size() == 1) {
    std::set<std::string> taken;
    for (const auto& t : targets) taken.insert(t.node.instance_id);
    for (const auto& n : nodes) {
      if (n.group_name == ring[0].first.group_name && !n.remove && !taken.count(n.instance_id) &&
          !n.hostname.empty() && !n.private_ip.empty() &&
          api::Is(n.status, ClusterInstanceStatus::kRunning)) {
        ring.emplace_back(n, nullptr);
        break;
      }
    }
  }
  std::sort(ring.begin(), ring.end(),
            [](const auto& a, const auto& b) { return a.first.hostname < b.first.hostname; });
  if (ring.size() == 1) {
    CheckResult skipped;
    skipped.outcome = Outcome::kPassed;
    skipped.skipped = true;
    skipped.message = "skipped: it needs a second node, and no other node of group " +
                      ring[0].first.group_name + " was checked with it or Running";
    ring[0].second->results[kConnectivity] = skipped;
    return;
  }
  std::vector<store::NodeRecord> ranks;
  std::string peer;
  for (const auto& [n, t] : ring) {
    ranks.push_back(n);
    if (t == nullptr) peer = n.hostname;
  }
  auto results = deep::RunConnectivity(run, options.program, options.rendezvous_port,
                                       options.iperf_port, ranks);
  for (size_t r = 0; r < ring.size(); ++r) {
    if (ring[r].second == nullptr) continue;
    if (!peer.empty() && results[r].outcome == Outcome::kPassed) {
      results[r].message += " (against " + peer + ", a Running peer)";
    }
    ring[r].second->results[kConnectivity] = results[r];
  }
}

}  // namespace

Status DeepHealthChecker::RunCluster(const std::string& cluster_id) {
  store::ClusterRecord cluster;
  std::vector<store::GroupRecord> groups;
  std::vector<store::NodeRecord> nodes;
  std::map<std::string, DeepCheck> checks;
  std::string controller_group, reservation_left;
  std::optional<std::set<std::string>> priority;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(cluster, tx.GetCluster(cluster_id));
    HPOD_ASSIGN_OR_RETURN(groups, tx.ListGroups(cluster_id));
    HPOD_ASSIGN_OR_RETURN(nodes, tx.ListNodes(cluster_id));
    HPOD_ASSIGN_OR_RETURN(checks, LoadDeepChecks(tx, cluster_id));
    HPOD_ASSIGN_OR_RETURN(controller_group, ControllerGroup(tx, cluster_id, groups));
    HPOD_ASSIGN_OR_RETURN(priority, PriorityGroups(tx, cluster_id, groups));
    auto left = tx.GetSetting(ReservationSetting(cluster_id));
    if (!left.ok() && left.status().code() != StatusCode::kNotFound) return left.status();
    if (left.ok()) reservation_left = *left;
    return OkStatus();
  }));
  if (api::Is(cluster.status, ClusterStatus::kDeleting) ||
      api::Is(cluster.status, ClusterStatus::kFailed)) {
    return OkStatus();
  }
  std::map<std::string, const store::GroupRecord*> by_group;
  for (const auto& g : groups) by_group[g.name] = &g;
  std::set<std::string> live;
  std::vector<Target> targets;
  const double now = clock_.NowEpochSeconds();
  bool waiting_retry = false;
  for (const auto& n : nodes) {
    live.insert(n.instance_id);
    if (n.remove || !n.launched) continue;
    auto c = checks.find(n.instance_id);
    Target t{n, {}, {}};
    if (c != checks.end()) {
      // InProgress here is a run an earlier hpodd did not finish (this thread
      // runs one at a time): it is taken again.
      if (!c->second.Active()) continue;
      if (c->second.retry_after > now) {
        waiting_retry = true;
        continue;
      }
      t.check = c->second;
    } else if (api::Is(n.status, ClusterInstanceStatus::kDeepHealthCheckInProgress) &&
               by_group.count(n.group_name) && !OnStartChecks(*by_group[n.group_name]).empty()) {
      t.check.instance_id = n.instance_id;
      t.check.checks = OnStartChecks(*by_group[n.group_name]);
      t.check.origin = "OnStartDeepHealthChecks";
      t.check.requested = now;
    } else {
      continue;
    }
    targets.push_back(std::move(t));
  }
  // Records of nodes that are gone (replaced, removed) go with them.
  std::vector<std::string> stale;
  for (const auto& [id, c] : checks) {
    if (!live.count(id)) stale.push_back(id);
  }
  if (!stale.empty()) {
    HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
      for (const auto& id : stale) {
        HPOD_RETURN_IF_ERROR(tx.DeleteSetting(DeepCheckSetting(cluster_id, id)));
      }
      return OkStatus();
    }));
  }

  // Slurm: the controller (by its group: it may be under a check itself), and
  // the compute nodes among the targets (controller and login nodes are not
  // Slurm nodes).
  const store::NodeRecord* controller = nullptr;
  for (const auto& n : nodes) {
    if (!controller_group.empty() && n.group_name == controller_group && !n.remove && n.launched) {
      controller = &n;
    }
  }
  auto slurm = [&](const std::vector<std::string>& argv) -> StatusOr<CommandResult> {
    if (controller == nullptr) return FailedPreconditionError("no controller");
    return run_(controller->instance_id, argv, 30s);
  };
  auto forget_reservation = [&]() -> Status {
    auto r = slurm(kDeleteReservation);
    const bool gone =
        r.ok() && (r->exit_code == 0 || r->stderr_data.find("not found") != std::string::npos ||
                   r->stdout_data.find("not found") != std::string::npos);
    if (!gone) return OkStatus();  // tried again on a later pass
    return store_.Write(
        [&](store::WriteTx& tx) { return tx.DeleteSetting(ReservationSetting(cluster_id)); });
  };
  if (targets.empty()) {
    // A reservation a run left (hpodd stopped, the controller away) ends here.
    if (!reservation_left.empty() && !waiting_retry && controller != nullptr) {
      return forget_reservation();
    }
    return OkStatus();
  }
  std::vector<std::string> reserved;
  for (const auto& t : targets) {
    const bool compute =
        priority ? !priority->count(t.node.group_name) : t.node.group_name != controller_group;
    if (compute && !t.node.hostname.empty()) reserved.push_back(t.node.hostname);
  }
  std::string slurm_note;
  if (controller != nullptr && !reserved.empty()) {
    const std::string hosts = Join(reserved, ",");
    // Written before the reservation exists, so it is never left unrecorded.
    HPOD_RETURN_IF_ERROR(store_.Write(
        [&](store::WriteTx& tx) { return tx.PutSetting(ReservationSetting(cluster_id), hosts); }));
    (void)slurm(kDeleteReservation);
    auto made = slurm(ReservationArgv(hosts));
    if (!made.ok() || made->exit_code != 0) {
      slurm_note = " (the Slurm reservation could not be made: " +
                   (made.ok() ? made->stderr_data + made->stdout_data : made.status().message()) +
                   ")";
    } else {
      auto q = slurm({"squeue", "-h", "-w", hosts, "-o", "%A"});
      std::string jobs = q.ok() && q->exit_code == 0 ? q->stdout_data : "";
      while (!jobs.empty() && (jobs.back() == '\n' || jobs.back() == ' ')) jobs.pop_back();
      std::replace(jobs.begin(), jobs.end(), '\n', ' ');
      double since = now;
      for (const auto& t : targets) {
        if (t.check.waiting_since > 0) since = std::min(since, t.check.waiting_since);
      }
      if (!jobs.empty() && now - since < std::chrono::duration<double>(options_.job_wait).count()) {
        // Not here: the checker serves every cluster. The next pass looks again.
        return store_.Write([&](store::WriteTx& tx) -> Status {
          for (auto& t : targets) {
            t.check.state = kDeepCheckRequested;
            if (t.check.waiting_since == 0) t.check.waiting_since = now;
            t.check.message = "Deep health checks " + Join(t.check.checks) +
                              " wait for Slurm jobs " + jobs + " to end on " + hosts +
                              " (held out of new jobs by reservation " + kDeepHealthReservation +
                              ")";
            HPOD_RETURN_IF_ERROR(PutDeepCheck(tx, cluster_id, t.check));
          }
          return OkStatus();
        });
      }
      if (!jobs.empty()) slurm_note = " (Slurm jobs " + jobs + " still ran after the wait)";
    }
  }

  const std::string run = "run-" + NewUuid4().substr(0, 8);
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    for (auto& t : targets) {
      t.check.state = kDeepCheckRunning;
      t.check.run = run;
      t.check.started = now;
      t.check.message = "Deep health checks " + Join(t.check.checks) + " running since " +
                        FormatUtc(now) + " with " + std::to_string(targets.size()) + " node(s)";
      HPOD_RETURN_IF_ERROR(PutDeepCheck(tx, cluster_id, t.check));
      HPOD_RETURN_IF_ERROR(
          RecordEvent(tx, clock_, cluster, NodeSubject(t.node.group_name, t.node.instance_id),
                      EventLevel::kInfo,
                      "Deep health checks started on instance " + t.node.instance_id + " (" +
                          t.check.origin + "): " + Join(t.check.checks)));
    }
    return OkStatus();
  }));
  if (wake_) wake_(cluster_id);  // the gate shows them in DeepHealthCheckInProgress

  // InstanceStress: every node at once, each alone.
  {
    std::vector<store::NodeRecord> stressed;
    std::vector<Target*> of;
    for (auto& t : targets) {
      if (!Has(t.check.checks, kStress)) continue;
      stressed.push_back(t.node);
      of.push_back(&t);
    }
    auto results = deep::RunStress(run_, options_.program, options_.stress_seconds, stressed);
    for (size_t i = 0; i < of.size(); ++i) of[i]->results[kStress] = results[i];
  }

  // InstanceConnectivity: the nodes of each instance group together (one type
  // of machine and NIC: a ratio across types would blame the slower type).
  std::map<std::string, std::vector<std::pair<store::NodeRecord, Target*>>> rings;
  for (auto& t : targets) {
    if (Has(t.check.checks, kConnectivity)) rings[t.node.group_name].emplace_back(t.node, &t);
  }
  for (auto& [group, ring] : rings) RunRing(run_, options_, nodes, targets, ring);
  {
    MutexLock lock(mu_);
    // hpodd is stopping: its agents went first, so what came back says nothing
    // of the nodes. The records stay InProgress; the next hpodd runs them again.
    if (stopping_) return OkStatus();
  }
  if (!reserved.empty() && slurm_note.empty()) HPOD_RETURN_IF_ERROR(forget_reservation());
  HPOD_RETURN_IF_ERROR(
      WriteResults(store_, clock_, cluster_id, run, controller_group, slurm_note, targets));
  if (wake_) wake_(cluster_id);
  return OkStatus();
}

}  // namespace hpod::controlplane
