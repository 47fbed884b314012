// DeepHealthChecker::RunCluster: one pass over a cluster's due deep health
// checks (deep_health.h says the steps; deep_health_exec.h what an answer means).

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "hpod/api/states.h"
#include "hpod/base/crypto.h"
#include "hpod/base/hostlist.h"
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
constexpr int kUnjudged = 6;
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
//  - a check said nothing of the node: tried again kRetrySeconds later. When
//    its own command failed (`counts`), after kAttempts the node is taken for
//    unreachable, as a failure; when it was only not judged (a world that did
//    not form around another node), after kUnjudged it is Unavailable;
//  - a check could not run for lack of a tool: Unavailable, the node left as it
//    is (another node would lack it too);
//  - else Passed.
Status WriteResults(store::Store& store, const Clock& clock, const std::string& cluster_id,
                    const std::string& run, const std::string& controller_group,
                    const std::map<std::string, std::string>& notes, std::vector<Target>& targets) {
  const double end = clock.NowEpochSeconds();
  return store.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(auto c, tx.GetCluster(cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto fresh, LoadDeepChecks(tx, cluster_id));
    for (auto& t : targets) {
      auto node = tx.GetNode(cluster_id, t.node.instance_id);
      auto rec = fresh.find(t.node.instance_id);
      if (!node.ok() || node->remove || rec == fresh.end() || rec->second.run != run) continue;
      std::vector<std::string> lines, failed, failed_lines, unsure, missing;
      bool counted = false;
      auto note_it = notes.find(t.node.instance_id);
      const std::string note = note_it == notes.end() ? "" : note_it->second;
      for (const auto& name : t.check.checks) {
        auto it = t.results.find(name);
        const CheckResult r = it == t.results.end() ? CheckResult{} : it->second;
        const std::string verb = r.skipped ? "" : std::string(deep::OutcomeName(r.outcome)) + ": ";
        lines.push_back(name + " " + verb + (r.message.empty() ? "no answer" : r.message));
        if (r.outcome == Outcome::kFailed) {
          failed.push_back(name);
          failed_lines.push_back(lines.back());
        }
        if (r.outcome == Outcome::kInconclusive) {
          unsure.push_back(lines.back());
          counted |= r.counts;
        }
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
      const bool retry = failed.empty() && !unsure.empty() &&
                         (counted ? d.attempts + 1 < kAttempts : d.unjudged + 1 < kUnjudged);
      if (retry) {
        counted ? ++d.attempts : ++d.unjudged;
        d.state = kDeepCheckRequested;
        d.retry_after = end + kRetrySeconds;
        d.message = "Deep health check could not complete at " + FormatUtc(end) + " (" +
                    Join(unsure, "; ") + "); trying again in " +
                    std::to_string(static_cast<int>(kRetrySeconds)) + " s" +
                    (counted ? " (attempt " + std::to_string(d.attempts + 1) + " of " +
                                   std::to_string(kAttempts) + ")"
                             : "");
        level = EventLevel::kWarn;
      } else if (failed.empty() && !unsure.empty() && !counted) {
        d.state = kDeepCheckUnavailable;
        d.message = "Deep health check could not judge the node " + std::to_string(kUnjudged) +
                    " times, by " + FormatUtc(end) + ": " + Join(lines, "; ") +
                    "; the node is left as it is" + note;
        level = EventLevel::kWarn;
      } else if (!failed.empty() || !unsure.empty()) {
        d.state = kDeepCheckFailed;
        if (failed.empty()) {
          failed = t.check.checks;
          failed_lines = {"could not complete " + std::to_string(kAttempts) +
                          " times, the node taken for unreachable: " + Join(unsure, "; ")};
        }
        d.message =
            "Deep health check failed at " + FormatUtc(end) + ": " + Join(lines, "; ") + note;
        level = EventLevel::kError;
        recover = true;
      } else if (!missing.empty()) {
        d.state = kDeepCheckUnavailable;
        d.message = "Deep health check could not run at " + FormatUtc(end) + ": " +
                    Join(lines, "; ") + "; the node is left as it is" + note;
        level = EventLevel::kWarn;
      } else {
        d.state = kDeepCheckPassed;
        d.message =
            "Deep health check passed at " + FormatUtc(end) + ": " + Join(lines, "; ") + note;
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
             const std::vector<store::NodeRecord>& peers,
             std::vector<std::pair<store::NodeRecord, Target*>>& ring) {
  if (ring.size() == 1) {
    for (const auto& n : peers) {
      if (n.group_name == ring[0].first.group_name && n.instance_id != ring[0].first.instance_id &&
          !n.hostname.empty() && !n.private_ip.empty()) {
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
  std::vector<store::RecoveryRecord> recoveries;
  std::string controller_group, reservation_left;
  std::optional<std::set<std::string>> priority;
  bool idle = false;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(cluster, tx.GetCluster(cluster_id));
    HPOD_ASSIGN_OR_RETURN(checks, LoadDeepChecks(tx, cluster_id));
    auto left = tx.GetSetting(ReservationSetting(cluster_id));
    if (!left.ok() && left.status().code() != StatusCode::kNotFound) return left.status();
    if (left.ok()) reservation_left = *left;
    // Nearly every pass finds nothing to do: no check asked, no reservation to
    // lift and no node waiting for its on-start checks. That much is told from
    // the nodes' summaries; the whole records (and the rest) are read only for
    // work (a 10,000-node cluster's every second took a core's 3%).
    if (checks.empty() && reservation_left.empty()) {
      HPOD_ASSIGN_OR_RETURN(auto summaries, tx.ListNodeSummaries(cluster_id));
      idle = std::none_of(summaries.begin(), summaries.end(), [](const store::NodeSummary& n) {
        return api::Is(n.status, ClusterInstanceStatus::kDeepHealthCheckInProgress);
      });
      if (idle) return OkStatus();
    }
    HPOD_ASSIGN_OR_RETURN(groups, tx.ListGroups(cluster_id));
    HPOD_ASSIGN_OR_RETURN(nodes, tx.ListNodes(cluster_id));
    HPOD_ASSIGN_OR_RETURN(recoveries, ActiveRecoveries(tx, cluster_id));
    HPOD_ASSIGN_OR_RETURN(controller_group, ControllerGroup(tx, cluster_id, groups));
    HPOD_ASSIGN_OR_RETURN(priority, PriorityGroups(tx, cluster_id, groups));
    return OkStatus();
  }));
  if (idle) return OkStatus();
  if (api::Is(cluster.status, ClusterStatus::kDeleting) ||
      api::Is(cluster.status, ClusterStatus::kFailed)) {
    return OkStatus();
  }
  // A node being recovered is not checked meanwhile (a reboot would look like a
  // dead node); the replacement a recovery launched is, before it counts.
  std::set<std::string> recovering;
  for (const auto& r : recoveries) {
    if (!RecoveryActive(r)) continue;
    recovering.insert(r.instance_id);
  }
  std::map<std::string, const store::GroupRecord*> by_group;
  for (const auto& g : groups) by_group[g.name] = &g;
  auto compute = [&](const store::NodeRecord& n) {
    return priority ? !priority->count(n.group_name) : n.group_name != controller_group;
  };
  std::set<std::string> live;
  std::vector<Target> targets;
  std::vector<std::string> held;  // compute hosts the reservation holds
  const double now = clock_.NowEpochSeconds();
  for (const auto& n : nodes) {
    live.insert(n.instance_id);
    if (n.remove || !n.launched || recovering.count(n.instance_id)) continue;
    auto c = checks.find(n.instance_id);
    Target t{n, {}, {}};
    if (c != checks.end()) {
      // InProgress here is a run an earlier hpodd did not finish (this thread
      // runs one at a time): it is taken again.
      if (!c->second.Active()) continue;
      if (compute(n) && !n.hostname.empty()) held.push_back(n.hostname);
      if (c->second.retry_after > now) continue;  // held out of jobs meanwhile
      t.check = c->second;
    } else if (api::Is(n.status, ClusterInstanceStatus::kDeepHealthCheckInProgress) &&
               by_group.count(n.group_name) && !OnStartChecks(*by_group[n.group_name]).empty()) {
      if (compute(n) && !n.hostname.empty()) held.push_back(n.hostname);
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

  // Slurm: the controller (by its group: it may be under a check itself) holds
  // the compute nodes with a check due, waiting or retrying out of new jobs
  // (controller and login nodes are not Slurm nodes), until none is left.
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
  auto set_reservation = [&](const std::string& hosts) {
    return store_.Write([&](store::WriteTx& tx) {
      return hosts.empty() ? tx.DeleteSetting(ReservationSetting(cluster_id))
                           : tx.PutSetting(ReservationSetting(cluster_id), hosts);
    });
  };
  if (held.empty()) {
    if (!reservation_left.empty() && controller != nullptr) {
      // Slurm answers "Requested reservation is invalid" for one that is gone.
      auto r = slurm(kDeleteReservation);
      const std::string said = r.ok() ? r->stdout_data + r->stderr_data : "";
      if (r.ok() && (r->exit_code == 0 || said.find("invalid") != std::string::npos ||
                     said.find("not found") != std::string::npos)) {
        HPOD_RETURN_IF_ERROR(set_reservation(""));
      }  // else tried again on a later pass
    }
    if (targets.empty()) return OkStatus();
  }
  const std::string hosts = Join(held, ",");
  std::string slurm_note;
  std::set<std::string> busy;  // hosts with jobs, whose checks wait
  std::string jobs_text;
  if (controller != nullptr && !held.empty()) {
    bool reserved = reservation_left == hosts;
    if (!reserved) {
      // Recorded before it exists, so it is never left unrecorded.
      HPOD_RETURN_IF_ERROR(set_reservation(hosts));
      (void)slurm(kDeleteReservation);
      auto made = slurm(ReservationArgv(hosts));
      reserved = made.ok() && made->exit_code == 0;
      if (!reserved) {
        slurm_note = " (the Slurm reservation could not be made: " +
                     (made.ok() ? made->stderr_data + made->stdout_data : made.status().message()) +
                     ")";
        HPOD_RETURN_IF_ERROR(set_reservation(""));
      }
    }
    if (reserved) {
      // Jobs still on the held nodes, by node ("%N" is a Slurm host list).
      auto q = slurm({"squeue", "-h", "-w", hosts, "-o", "%A %N"});
      if (!q.ok() || q->exit_code != 0) {
        for (const auto& h : held) busy.insert(h);
        jobs_text =
            "(squeue did not answer: " + (q.ok() ? q->stderr_data : q.status().message()) + ")";
      } else {
        std::istringstream lines(q->stdout_data);
        for (std::string line; std::getline(lines, line);) {
          std::istringstream f(line);
          std::string job, list;
          if (!(f >> job >> list)) continue;
          jobs_text += (jobs_text.empty() ? "" : " ") + job;
          auto names = ExpandHostlist(list);
          for (const auto& h : names.ok() ? *names : held) busy.insert(h);
        }
      }
    }
  }

  // Busy nodes wait (not here: the checker serves every cluster; the next pass
  // looks again), up to job_wait; the others run now.
  const double wait_limit = std::chrono::duration<double>(options_.job_wait).count();
  std::vector<Target> now_targets;
  std::vector<Target*> waiting;
  std::map<std::string, std::string> notes;  // instance id → what Slurm left to say
  for (auto& t : targets) {
    const double since = t.check.waiting_since > 0 ? t.check.waiting_since : now;
    if (busy.count(t.node.hostname) && now - since < wait_limit) {
      waiting.push_back(&t);
      continue;
    }
    if (busy.count(t.node.hostname)) {
      notes[t.node.instance_id] = " (Slurm jobs " + jobs_text + " still ran on it after the wait)";
    }
    now_targets.push_back(t);
  }
  if (!waiting.empty()) {
    HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
      for (Target* t : waiting) {
        t->check.state = kDeepCheckRequested;
        if (t->check.waiting_since == 0) t->check.waiting_since = now;
        t->check.message = "Deep health checks " + Join(t->check.checks) + " wait for Slurm jobs " +
                           jobs_text + " to end on " + t->node.hostname +
                           " (held out of new jobs by reservation " + kDeepHealthReservation + ")";
        HPOD_RETURN_IF_ERROR(PutDeepCheck(tx, cluster_id, t->check));
      }
      return OkStatus();
    }));
  }
  targets = std::move(now_targets);
  if (targets.empty()) return OkStatus();

  const std::string run = "run-" + NewUuid4().substr(0, 8);
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    for (auto& t : targets) {
      t.check.state = kDeepCheckRunning;
      t.check.run = run;
      t.check.started = now;
      t.check.finished = 0;
      t.check.waiting_since = 0;
      t.check.results = json::object();
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
  std::vector<store::NodeRecord> peers;  // Running, not recovered, not checked
  for (const auto& n : nodes) {
    auto c = checks.find(n.instance_id);
    if (!n.remove && !recovering.count(n.instance_id) &&
        (c == checks.end() || !c->second.Active()) &&
        api::Is(n.status, ClusterInstanceStatus::kRunning)) {
      peers.push_back(n);
    }
  }
  for (auto& [group, ring] : rings) RunRing(run_, options_, peers, ring);
  {
    MutexLock lock(mu_);
    // hpodd is stopping: its agents went first, so what came back says nothing
    // of the nodes. The records stay InProgress; the next hpodd runs them again.
    if (stopping_) return OkStatus();
  }
  // Slurm's notes join each node's result; the reservation ends on a pass with
  // no check left to hold (above).
  for (auto& t : targets) notes[t.node.instance_id] = notes[t.node.instance_id] + slurm_note;
  HPOD_RETURN_IF_ERROR(
      WriteResults(store_, clock_, cluster_id, run, controller_group, notes, targets));
  if (wake_) wake_(cluster_id);
  return OkStatus();
}

}  // namespace hpod::controlplane
