// DeepHealthChecker::RunCluster: one run of a cluster's due deep health checks
// (deep_health.h says the steps).

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <thread>

#include "hpod/api/states.h"
#include "hpod/base/crypto.h"
#include "hpod/controlplane/deep_health.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/recovery.h"
#include "hpod/controlplane/slurm_plan.h"

namespace hpod::controlplane {

namespace {

using json = nlohmann::json;
using api::ClusterInstanceStatus;
using api::ClusterStatus;
using namespace std::chrono_literals;

constexpr char kStress[] = "InstanceStress";
constexpr char kConnectivity[] = "InstanceConnectivity";

struct Target {
  store::NodeRecord node;
  DeepCheck check;
  json results = json::object();  // check → {passed, message, detail}
};

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string Join(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The last line of a failed command's output, for a message.
std::string Why(const StatusOr<CommandResult>& r) {
  if (!r.ok()) return r.status().message();
  if (r->timed_out) return "it did not finish in time";
  std::string text = !r->stderr_data.empty() ? r->stderr_data : r->stdout_data;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const auto nl = text.rfind('\n');
  if (nl != std::string::npos) text = text.substr(nl + 1);
  return "exit code " + std::to_string(r->exit_code) + (text.empty() ? "" : ": " + text);
}

// hpod-deep-check's one JSON line, or why there is none.
StatusOr<json> Output(const StatusOr<CommandResult>& r) {
  if (!r.ok()) return r.status();
  json j = json::parse(r->stdout_data, nullptr, false);
  if (!j.is_object()) return UnavailableError("hpod-deep-check did not answer (" + Why(r) + ")");
  if (j.contains("error")) return UnavailableError(j.value("error", ""));
  return j;
}

}  // namespace

Status DeepHealthChecker::RunCluster(const std::string& cluster_id) {
  store::ClusterRecord cluster;
  std::vector<store::GroupRecord> groups;
  std::vector<store::NodeRecord> nodes;
  std::map<std::string, DeepCheck> checks;
  std::string controller_group;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(cluster, tx.GetCluster(cluster_id));
    HPOD_ASSIGN_OR_RETURN(groups, tx.ListGroups(cluster_id));
    HPOD_ASSIGN_OR_RETURN(nodes, tx.ListNodes(cluster_id));
    HPOD_ASSIGN_OR_RETURN(checks, LoadDeepChecks(tx, cluster_id));
    HPOD_ASSIGN_OR_RETURN(controller_group, ControllerGroup(tx, cluster_id, groups));
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
  for (const auto& n : nodes) {
    live.insert(n.instance_id);
    if (n.remove || !n.launched) continue;
    auto c = checks.find(n.instance_id);
    Target t{n, {}, json::object()};
    if (c != checks.end()) {
      // A record InProgress here is a run hpodd did not finish (one run at a
      // time, and this pass is the only one): it is taken again.
      if (!c->second.Active()) continue;
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
  if (targets.empty() && stale.empty()) return OkStatus();
  const std::string run = "run-" + NewUuid4().substr(0, 8);
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    for (const auto& id : stale)
      HPOD_RETURN_IF_ERROR(tx.DeleteSetting(DeepCheckSetting(cluster_id, id)));
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
  if (targets.empty()) return OkStatus();
  if (wake_) wake_(cluster_id);  // the gate shows them in DeepHealthCheckInProgress

  // Slurm: the checked compute nodes are held out of new jobs, and the run waits
  // for the jobs already on them.
  const store::NodeRecord* controller = nullptr;
  for (const auto& n : nodes) {
    if (!controller_group.empty() && n.group_name == controller_group && !n.remove &&
        api::Is(n.status, ClusterInstanceStatus::kRunning)) {
      controller = &n;
    }
  }
  std::vector<std::string> reserved;
  for (const auto& t : targets) {
    if (t.node.group_name != controller_group && !t.node.hostname.empty()) {
      reserved.push_back(t.node.hostname);
    }
  }
  std::string slurm_note;
  if (controller != nullptr && !reserved.empty()) {
    const std::string hosts = Join(reserved, ",");
    (void)run_(controller->instance_id,
               {"scontrol", "delete", std::string("reservation=") + kDeepHealthReservation}, 30s);
    auto made =
        run_(controller->instance_id,
             {"scontrol", "create", "reservation",
              std::string("reservationname=") + kDeepHealthReservation, "nodes=" + hosts,
              "starttime=now", "duration=infinite", "users=root", "flags=maint,ignore_jobs"},
             30s);
    if (!made.ok() || made->exit_code != 0) {
      slurm_note = "; the Slurm reservation could not be made (" + Why(made) + ")";
    } else {
      const auto deadline = clock_.SteadyNow() + options_.job_wait;
      for (;;) {
        auto q = run_(controller->instance_id, {"squeue", "-h", "-w", hosts, "-o", "%A"}, 30s);
        std::string jobs = q.ok() && q->exit_code == 0 ? q->stdout_data : "";
        while (!jobs.empty() && (jobs.back() == '\n' || jobs.back() == ' ')) jobs.pop_back();
        if (jobs.empty() || clock_.SteadyNow() > deadline) break;
        {
          MutexLock lock(mu_);
          if (stopping_) return OkStatus();  // the next hpodd takes the run again
        }
        std::replace(jobs.begin(), jobs.end(), '\n', ' ');
        spdlog::info("deep health checks of cluster {} wait for jobs {} on {}", cluster_id, jobs,
                     hosts);
        std::this_thread::sleep_for(2s);
      }
    }
  }

  // InstanceStress: every node at once, each alone.
  {
    std::vector<std::thread> threads;
    for (auto& t : targets) {
      if (!Has(t.check.checks, kStress)) continue;
      threads.emplace_back([&, tp = &t] {
        auto r =
            run_(tp->node.instance_id,
                 {options_.program, "stress", "--seconds", std::to_string(options_.stress_seconds)},
                 std::chrono::seconds(options_.stress_seconds + 120));
        auto out = Output(r);
        if (!out.ok()) {
          tp->results[kStress] = {{"passed", false},
                                  {"message", "could not run: " + out.status().message()}};
        } else {
          tp->results[kStress] = {{"passed", out->value("passed", false)},
                                  {"message", out->value("message", "")},
                                  {"detail", out->value("detail", json::object())}};
        }
      });
    }
    for (auto& th : threads) th.join();
  }

  // InstanceConnectivity: all its nodes together, ranked by hostname. A node
  // checked alone is measured against a Running peer of its group (a
  // replacement against a node its job ran with), which is not judged.
  struct Rank {
    store::NodeRecord node;
    Target* target;  // null for the peer
  };
  std::vector<Rank> ring;
  for (auto& t : targets) {
    if (Has(t.check.checks, kConnectivity)) ring.push_back({t.node, &t});
  }
  if (ring.size() == 1) {
    std::set<std::string> taken;
    for (const auto& t : targets) taken.insert(t.node.instance_id);
    for (const auto& n : nodes) {
      if (n.group_name == ring[0].node.group_name && !n.remove && !taken.count(n.instance_id) &&
          !n.hostname.empty() && !n.private_ip.empty() &&
          api::Is(n.status, ClusterInstanceStatus::kRunning)) {
        ring.push_back({n, nullptr});
        break;
      }
    }
  }
  std::sort(ring.begin(), ring.end(),
            [](const Rank& a, const Rank& b) { return a.node.hostname < b.node.hostname; });
  if (ring.size() == 1) {
    ring[0].target->results[kConnectivity] = {
        {"passed", true},
        {"skipped", true},
        {"message", "skipped: it needs a second node, and no other node of group " +
                        ring[0].node.group_name + " was checked with it or Running"}};
  } else if (ring.size() > 1) {
    std::vector<std::string> names;
    std::string peer;
    for (const Rank& r : ring) {
      names.push_back(r.node.hostname);
      if (r.target == nullptr) peer = r.node.hostname;
    }
    std::vector<StatusOr<CommandResult>> out(ring.size(), UnavailableError("not run"));
    std::vector<std::thread> threads;
    for (size_t r = 0; r < ring.size(); ++r) {
      threads.emplace_back([&, r] {
        out[r] = run_(ring[r].node.instance_id,
                      {options_.program, "connectivity", "--rank", std::to_string(r), "--world",
                       std::to_string(ring.size()), "--master", ring[0].node.private_ip, "--port",
                       std::to_string(options_.rendezvous_port), "--names", Join(names, ","),
                       "--iperf-port", std::to_string(options_.iperf_port)},
                      std::chrono::seconds(120 + 4 * static_cast<int>(ring.size())));
      });
    }
    for (auto& th : threads) th.join();
    auto verdict = Output(out[0]);
    for (size_t r = 0; r < ring.size(); ++r) {
      if (ring[r].target == nullptr) continue;
      json& res = ring[r].target->results[kConnectivity];
      auto mine = Output(out[r]);
      if (verdict.ok()) {
        const auto& f = (*verdict)["failures"];
        const std::string why = f.is_array() && r < f.size() ? f[r].get<std::string>() : "";
        res = {{"passed", why.empty()},
               {"message", (why.empty() ? verdict->value("message", "") : why) +
                               (peer.empty() ? "" : " (against " + peer + ", a Running peer)")},
               {"detail", verdict->value("detail", json::object())}};
      } else if (!mine.ok()) {
        res = {{"passed", false}, {"message", "could not run: " + mine.status().message()}};
      } else {
        res = {{"passed", false},
               {"message", "the check did not complete: " + names[0] +
                               " (rank 0): " + verdict.status().message()}};
      }
    }
  }

  if (controller != nullptr && !reserved.empty() && slurm_note.empty()) {
    (void)run_(controller->instance_id,
               {"scontrol", "delete", std::string("reservation=") + kDeepHealthReservation}, 30s);
  }

  // Results, each from a fresh read: a node replaced or removed meanwhile is
  // left alone.
  const double end = clock_.NowEpochSeconds();
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(auto c, tx.GetCluster(cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto fresh, LoadDeepChecks(tx, cluster_id));
    for (auto& t : targets) {
      auto node = tx.GetNode(cluster_id, t.node.instance_id);
      auto rec = fresh.find(t.node.instance_id);
      if (!node.ok() || node->remove || rec == fresh.end() || rec->second.run != run) continue;
      std::vector<std::string> failed, lines, failed_lines;
      for (const auto& name : t.check.checks) {
        const json& r = t.results.contains(name) ? t.results[name] : json::object();
        const bool ok = r.value("passed", false);
        lines.push_back(name +
                        (ok ? (r.value("skipped", false) ? " " : " passed: ") : " failed: ") +
                        r.value("message", "not run"));
        if (!ok) {
          failed.push_back(name);
          failed_lines.push_back(lines.back());
        }
      }
      t.check.state = failed.empty() ? kDeepCheckPassed : kDeepCheckFailed;
      t.check.finished = end;
      t.check.results = t.results;
      t.check.message = "Deep health check " + std::string(failed.empty() ? "passed" : "failed") +
                        " at " + FormatUtc(end) + ": " + Join(lines, "; ") +
                        (failed.empty() ? "" : slurm_note);
      HPOD_RETURN_IF_ERROR(PutDeepCheck(tx, cluster_id, t.check));
      HPOD_RETURN_IF_ERROR(
          RecordEvent(tx, clock_, c, NodeSubject(node->group_name, node->instance_id),
                      failed.empty() ? EventLevel::kInfo : EventLevel::kError, t.check.message));
      if (failed.empty()) continue;
      RecoveryRequest req;
      req.action = RecoveryAction::kReplace;
      req.source = "DeepHealthCheck";
      req.check = Join(failed);
      req.reason = "deep health check " + Join(failed_lines, "; ");
      auto id =
          RequestRecovery(tx, clock_, c, *node,
                          !controller_group.empty() && node->group_name == controller_group, req);
      if (!id.ok() && id.status().code() != StatusCode::kFailedPrecondition) return id.status();
    }
    return OkStatus();
  }));
  if (wake_) wake_(cluster_id);
  return OkStatus();
}

}  // namespace hpod::controlplane
