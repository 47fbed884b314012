#include "hpod/controlplane/jobs.h"

#include <spdlog/spdlog.h>

#include <set>

#include "hpod/api/states.h"
#include "hpod/controlplane/recovery.h"

namespace hpod::controlplane {
namespace {

using Json = nlohmann::json;

Json Error(const std::string& message) { return Json{{"error", message}}; }

// The request's string field, or "" (and *bad set) when it is not a string.
std::string Field(const Json& request, const char* key, bool required, std::string* bad) {
  auto it = request.find(key);
  if (it == request.end() || it->is_null()) {
    if (required && bad->empty()) *bad = std::string("field '") + key + "' is missing";
    return "";
  }
  if (!it->is_string()) {
    if (bad->empty()) *bad = std::string("field '") + key + "' must be a string";
    return "";
  }
  return it->get<std::string>();
}

// Slurm job ids are digits, with _ and + for arrays and het jobs; anything else
// (a path, a quote) never reaches a settings key.
bool ValidJobId(const std::string& id) {
  if (id.empty() || id.size() > 32) return false;
  for (char c : id) {
    if (!isdigit(static_cast<unsigned char>(c)) && c != '_' && c != '+') return false;
  }
  return true;
}

}  // namespace

std::string JobKey(const std::string& cluster_id, const std::string& job_id) {
  return "cluster/" + cluster_id + "/job/" + job_id;
}

StatusOr<Json> ReadJob(store::ReadTx& tx, const std::string& cluster_id,
                       const std::string& job_id) {
  HPOD_ASSIGN_OR_RETURN(std::string text, tx.GetSetting(JobKey(cluster_id, job_id)));
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InternalError("job " + job_id + ": unreadable record");
  return j;
}

bool JobIsSupervised(store::ReadTx& tx, const std::string& cluster_id, const std::string& job_id) {
  auto j = ReadJob(tx, cluster_id, job_id);
  return j.ok() && !(j->contains("finished") && (*j)["finished"] == true);
}

Json JudgeJobNodes(const std::vector<store::RecoveryRecord>& recoveries,
                   const std::vector<store::NodeRecord>& nodes,
                   const std::vector<std::string>& names, double since, bool automatic) {
  Json out = Json::array();
  bool any_failed = false, any_recovering = false, any_recovered = false;
  std::string message;
  for (const std::string& name : names) {
    Json n = {{"name", name}, {"state", "healthy"}};
    // The newest recovery of the hostname that matters to this step: one in
    // progress, else the latest begun since the step started.
    const store::RecoveryRecord* pick = nullptr;
    for (const auto& r : recoveries) {
      if (r.hostname != name) continue;
      if (RecoveryActive(r)) {
        pick = &r;
        break;
      }
      if (r.created >= since && (pick == nullptr || r.created >= pick->created)) pick = &r;
    }
    if (pick != nullptr) {
      n["recovery_id"] = pick->recovery_id;
      n["action"] = pick->action;
      n["phase"] = pick->phase;
      n["status"] = pick->status;
      n["reason"] = pick->reason;
      n["detected"] = pick->created;
      if (double resumed = RecoveryStepTime(*pick, "Resumed"); resumed > 0) n["resumed"] = resumed;
      if (RecoveryActive(*pick)) {
        n["state"] = "recovering";
        any_recovering = true;
      } else if (pick->status == kRecoverySucceeded) {
        n["state"] = "recovered";
        any_recovered = true;
      } else {
        n["state"] = "failed";
        any_failed = true;
        if (message.empty()) {
          message = "node " + name + ": recovery " + pick->recovery_id + " " + pick->status +
                    (pick->message.empty() ? "" : ": " + pick->message);
        }
      }
    } else {
      bool known = false;
      for (const auto& row : nodes) {
        if (row.hostname != name) continue;
        known = true;
        if (api::Is(row.status, api::ClusterInstanceStatus::kRunning)) continue;
        if (automatic) {
          // Not Running and no recovery yet: the node concern saw the machine go
          // before the health concern wrote its recovery (next pass, ~1 s). Saying
          // "failed" here would end a job that is about to be resumed.
          n["state"] = "recovering";
          any_recovering = true;
        } else {
          // NodeRecovery=None: hpod will not bring it back by itself.
          n["state"] = "failed";
          any_failed = true;
          if (message.empty()) message = "node " + name + " is " + row.status + ", not Running";
        }
      }
      if (!known) n["state"] = "unknown";
    }
    out.push_back(std::move(n));
  }
  // Failed wins: a retry cannot succeed without that node. Then in progress.
  std::string verdict = any_failed       ? "failed"
                        : any_recovering ? "recovering"
                        : any_recovered  ? "recovered"
                                         : "healthy";
  if (message.empty()) {
    message = verdict == "recovering"  ? "a node of the job is being recovered"
              : verdict == "recovered" ? "every failed node of the job was recovered"
                                       : "every node of the job is healthy";
  }
  return Json{{"verdict", verdict}, {"message", message}, {"nodes", std::move(out)}};
}

JobService::JobService(store::Store& store, const Clock& clock) : store_(store), clock_(clock) {}

Json JobService::Answer(const std::string& cluster_id, const Json& request,
                        std::optional<double> node_clock_offset) {
  std::string bad;
  const std::string op = Field(request, "op", true, &bad);
  if (!bad.empty()) return Error(bad);
  if (op == "job_health") return Health(cluster_id, request, node_clock_offset);
  if (op == "job_event") return Event(cluster_id, request, node_clock_offset);
  return Error("unknown op '" + op + "' (job_health or job_event)");
}

Json JobService::Health(const std::string& cluster_id, const Json& request,
                        std::optional<double> node_clock_offset) {
  std::vector<std::string> names;
  auto it = request.find("nodes");
  if (it == request.end() || !it->is_array() || it->empty()) {
    return Error("field 'nodes' must be a non-empty array of node names");
  }
  for (const auto& n : *it) {
    if (!n.is_string()) return Error("field 'nodes' must be a non-empty array of node names");
    names.push_back(n.get<std::string>());
  }
  double since = 0;
  if (auto s = request.find("since"); s != request.end() && !s->is_null()) {
    if (!s->is_number()) return Error("field 'since' must be a number (epoch seconds)");
    since = s->get<double>();
    // `since` is the supervisor's reading of its node's clock; recoveries' times
    // are hpodd's. The node's offset moves it onto hpodd's clock (off by at most
    // the offset's error, a heartbeat's one-way delay: milliseconds, against
    // recoveries that begin seconds after a failure). Joining by ids instead
    // (the step's job_event `started`, stamped `received` by hpodd) was the
    // other choice; it breaks when that event was lost (the supervisor goes on
    // without it) and needs the attempt in the request, which older supervisors
    // do not send.
    if (node_clock_offset) since -= *node_clock_offset;
  }
  Json answer;
  Status st = store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(auto cluster, tx.GetCluster(cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto recoveries, tx.ListRecoveries(cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(cluster_id));
    const auto setting = cluster.spec.find("NodeRecovery");
    const bool none = setting != cluster.spec.end() && setting->is_string() &&
                      setting->get<std::string>() == "None";
    answer = JudgeJobNodes(recoveries, nodes, names, since, !none);
    return OkStatus();
  });
  if (!st.ok()) return Error("hpodd could not read the cluster: " + st.ToString());
  return answer;
}

Json JobService::Event(const std::string& cluster_id, const Json& request,
                       std::optional<double> node_clock_offset) {
  std::string bad;
  const std::string job_id = Field(request, "job_id", true, &bad);
  const std::string event = Field(request, "event", true, &bad);
  if (!bad.empty()) return Error(bad);
  if (!ValidJobId(job_id)) return Error("field 'job_id' must be a Slurm job id (digits)");
  static const std::set<std::string> kEvents = {"started", "ended", "retrying", "finished"};
  if (!kEvents.count(event)) {
    return Error("field 'event' must be one of started, ended, retrying, finished");
  }
  Status st = store_.Write([&](store::WriteTx& tx) -> Status {
    // A record outliving its cluster would never be deleted.
    HPOD_RETURN_IF_ERROR(tx.GetCluster(cluster_id).status());
    Json job;
    auto read = ReadJob(tx, cluster_id, job_id);
    if (read.ok()) {
      job = std::move(*read);
    } else if (read.status().code() == StatusCode::kNotFound) {
      job = Json{{"job_id", job_id}, {"events", Json::array()}};
    } else {
      return read.status();
    }
    // Only the fields hpod reads, each bounded: a record is kept as long as its
    // cluster, and any program on a node may send events.
    Json e = Json::object();
    for (const char* key : {"job_id", "step_id", "event", "message"}) {
      if (auto it = request.find(key); it != request.end() && it->is_string()) {
        e[key] = it->get<std::string>().substr(0, 1024);
      }
    }
    for (const char* key : {"attempt", "restart", "exit_code", "max_attempts", "time"}) {
      if (auto it = request.find(key); it != request.end() && it->is_number()) e[key] = *it;
    }
    if (auto it = request.find("recovery_ids"); it != request.end() && it->is_array()) {
      Json ids = Json::array();
      for (const auto& id : *it) {
        if (id.is_string() && ids.size() < 64) ids.push_back(id.get<std::string>().substr(0, 64));
      }
      e["recovery_ids"] = std::move(ids);
    }
    // The goodput summary is the job's, not the event's: the latest one wins
    // (DescribeJobGoodput reads it defensively). A ledger tail is never stored.
    if (auto g = request.find("goodput");
        g != request.end() && g->is_object() && g->dump().size() <= kMaxGoodputBytes) {
      job["goodput"] = *g;
    }
    e["received"] = clock_.NowEpochSeconds();
    // The sender's clock offset, with which DescribeJobGoodput moves the times the
    // node read (the event's, the ledger's) onto hpodd's clock, to join them with
    // recoveries. The job's is its latest event's (the ledger's writer's node).
    if (node_clock_offset) {
      e["clock_offset"] = *node_clock_offset;
      job["clock_offset"] = *node_clock_offset;
    }
    Json& events = job["events"];
    if (!events.is_array()) events = Json::array();
    events.push_back(std::move(e));
    while (events.size() > kMaxJobEvents) events.erase(events.begin());
    if (auto n = request.find("nodes"); n != request.end() && n->is_array()) {
      Json names = Json::array();
      for (const auto& name : *n) {
        if (name.is_string() && names.size() < 4096)
          names.push_back(name.get<std::string>().substr(0, 128));
      }
      job["nodes"] = std::move(names);
    }
    // A requeued job runs its script (and a new supervisor) again: started reopens it.
    job["finished"] = event == "finished";
    job["updated"] = clock_.NowEpochSeconds();
    return tx.PutSetting(JobKey(cluster_id, job_id),
                         job.dump(-1, ' ', false, Json::error_handler_t::replace));
  });
  if (st.code() == StatusCode::kNotFound) return Error("the cluster is gone");
  if (!st.ok()) return Error("hpodd could not record the event: " + st.ToString());
  spdlog::info("cluster {}: job {} {} (attempt {})", cluster_id, job_id, event,
               request.value("attempt", Json(0)).dump());
  return Json{{"ok", true}};
}

namespace {

// Typed reads of JSON a node sent (the goodput summary): a wrong type reads as 0
// or empty, never throws.
double Num(const Json& j, const char* key) {
  if (!j.is_object()) return 0;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0;
}
Json Arr(const Json& j, const char* key) {
  if (!j.is_object()) return Json::array();
  auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : Json::array();
}

}  // namespace

StatusOr<nlohmann::ordered_json> DescribeJobGoodput(store::ReadTx& tx,
                                                    const store::ClusterRecord& cluster,
                                                    const std::string& job_id) {
  auto job = ReadJob(tx, cluster.id, job_id);
  if (!job.ok() && job.status().code() == StatusCode::kNotFound) {
    return NotFoundError("job " + job_id + " of cluster " + cluster.name +
                         " is not known to hpodd (only jobs run with --auto-resume report to it)")
        .WithAwsType("ResourceNotFound");
  }
  HPOD_RETURN_IF_ERROR(job.status());
  nlohmann::ordered_json out;
  out["JobId"] = job_id;
  out["Finished"] = job->contains("finished") && (*job)["finished"].is_boolean() &&
                    (*job)["finished"].get<bool>();
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  std::vector<double> started;  // each attempt's srun start, on hpodd's clock
  int attempts = 0;
  double first = 0, last = 0;
  // Times the nodes read, on hpodd's clock (0 stays 0: not reported). Events and
  // ledgers of agents older than heartbeat.time carry no offset: taken as they are.
  const double job_offset = Num(*job, "clock_offset");
  auto on_hpodd = [](double node_time, double offset) {
    return node_time > 0 ? node_time - offset : 0.0;
  };
  for (const auto& e : Arr(*job, "events")) {
    if (!e.is_object()) continue;
    const double t =
        Num(e, "time") > 0 ? on_hpodd(Num(e, "time"), Num(e, "clock_offset")) : Num(e, "received");
    if (first == 0 || t < first) first = t;
    last = std::max(last, t);
    const std::string event =
        e.contains("event") && e["event"].is_string() ? e["event"].get<std::string>() : "";
    attempts += event == "started";
    if (event == "started") started.push_back(t);
    nlohmann::ordered_json o;
    o["Event"] = event;
    o["Time"] = t;
    if (e.contains("step_id")) o["StepId"] = e["step_id"];
    if (e.contains("attempt")) o["Attempt"] = e["attempt"];
    if (e.contains("restart")) o["Restart"] = e["restart"];
    if (e.contains("exit_code")) o["ExitCode"] = e["exit_code"];
    if (e.contains("message")) o["Message"] = e["message"];
    events.push_back(std::move(o));
  }
  out["Attempts"] = attempts;
  out["Events"] = std::move(events);
  // The ledger's attempts and gaps (base/goodput.h), when the supervisor sent them.
  const Json goodput = job->contains("goodput") && (*job)["goodput"].is_object() ? (*job)["goodput"]
                                                                                 : Json::object();
  const Json ledger_attempts = Arr(goodput, "attempts");
  const Json gaps = Arr(goodput, "gaps");
  std::set<std::string> hosts;
  for (const auto& n : Arr(*job, "nodes")) {
    if (n.is_string()) hosts.insert(n.get<std::string>());
  }
  // Each recovery of one of the job's nodes detected while the job ran, joined
  // with the ledger by time: the attempt that was running when it was detected and
  // the gap to the next one (a requeue after the batch host died has no retry
  // event, so time, not the supervisor's events, is the join key).
  nlohmann::ordered_json failures = nlohmann::ordered_json::array();
  HPOD_ASSIGN_OR_RETURN(auto recoveries, tx.ListRecoveries(cluster.id));
  for (const auto& r : recoveries) {
    if (!hosts.count(r.hostname) || r.created < first - 1 || r.created > last + 1) continue;
    nlohmann::ordered_json f;
    f["RecoveryId"] = r.recovery_id;
    f["Hostname"] = r.hostname;
    f["Action"] = r.action;
    f["Check"] = r.check;
    f["Reason"] = r.reason;
    f["Status"] = r.status;
    const double resumed = RecoveryStepTime(r, "Resumed");
    size_t i = 0;
    bool found = false;
    for (size_t k = 0; k < ledger_attempts.size(); ++k) {
      const double start = on_hpodd(Num(ledger_attempts[k], "process_start"), job_offset);
      if (start > 0 && start <= r.created) {
        i = k;
        found = true;
      }
    }
    if (found) {
      // Since the last step the failed attempt logged: an upper bound of the time
      // from the fault to its detection (the fault came after that step).
      f["DetectionSeconds"] =
          r.created - on_hpodd(Num(ledger_attempts[i], "last_time"), job_offset);
    }
    if (resumed > 0) f["ReplacementSeconds"] = resumed - r.created;
    if (!found) {
      // A program that writes no ledger: what the supervisor knows, the next
      // attempt's srun start after the detection.
      for (double t : started) {
        if (t < r.created) continue;
        f["StepRestartSeconds"] = t - r.created;
        if (resumed > 0 && t >= resumed) f["RestartSeconds"] = t - resumed;
        break;
      }
    }
    if (found && i + 1 < ledger_attempts.size() && i < gaps.size()) {
      const Json& next = ledger_attempts[i + 1];
      if (resumed > 0) {
        f["RestartSeconds"] = on_hpodd(Num(next, "process_start"), job_offset) - resumed;
      }
      f["RendezvousSeconds"] = Num(gaps[i], "rendezvous_s");
      f["CheckpointLoadSeconds"] = Num(gaps[i], "checkpoint_load_s");
      f["FirstStepSeconds"] = Num(gaps[i], "first_step_s");
      f["StepsRerun"] = static_cast<int64_t>(Num(gaps[i], "steps_rerun"));
      if (Num(next, "first_step_time") > 0) {
        f["FaultToFirstStepSeconds"] =
            Num(next, "first_step_time") - Num(ledger_attempts[i], "last_time");
      }
    }
    failures.push_back(std::move(f));
  }
  out["Failures"] = std::move(failures);
  if (!goodput.empty()) out["Goodput"] = nlohmann::ordered_json::parse(goodput.dump());
  return out;
}

}  // namespace hpod::controlplane
