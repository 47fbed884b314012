#include "hpod/controlplane/metrics_state.h"

#include <algorithm>
#include <map>

#include "hpod/api/states.h"
#include "hpod/controlplane/recovery.h"

namespace hpod::controlplane {

namespace {

using Labels = Exposition::Labels;

const std::vector<double> kRecoveryBuckets = {1,  2,   5,   10,  15,  20,   30,   45,  60,
                                              90, 120, 180, 300, 600, 1200, 1800, 3600};
const std::vector<double> kPhaseBuckets = {0.1, 0.25, 0.5, 1,   2,   5,   10,
                                           20,  30,   60,  120, 300, 600, 1800};

constexpr std::string_view kKinds[] = {"Reboot", "Replace"};
constexpr std::string_view kOutcomes[] = {kRecoverySucceeded, kRecoveryFailed, kRecoveryReported,
                                          kRecoveryCancelled};
constexpr std::string_view kVerdicts[] = {"Healthy", "Reboot", "Replace"};

// Which phase a timeline step enters (recovery_reconciler.cc writes the steps);
// steps inside a phase (RebootRequested, Launched, LifecycleDone, ...) enter none.
std::optional<RecoveryPhase> PhaseEnteredBy(std::string_view step) {
  if (step == "Detected") return RecoveryPhase::kDetected;
  if (step == "Marked") return RecoveryPhase::kMarked;
  if (step == "Drained" || step == "StepsCancelled") return RecoveryPhase::kDrained;
  if (step == "Rebooted" || step == "Terminated") return RecoveryPhase::kLaunched;
  if (step == "Resumed") return RecoveryPhase::kResumed;
  return std::nullopt;
}

std::string Kind(const store::RecoveryRecord& r) {
  return ParseRecoveryAction(r.action) ? r.action : "unknown";
}

// Per cluster, what its recoveries add up to.
struct RecoveryFigures {
  std::map<std::pair<std::string, std::string>, int> finished;  // (kind, outcome)
  std::map<std::string, int> in_progress;                       // by kind
  std::map<std::string, std::vector<double>> durations;         // by kind
  std::map<std::string, std::pair<double, double>> last;        // kind → (finished, duration)
  std::map<std::string, std::vector<double>> phases;            // by phase
  bool any = false;
};

RecoveryFigures Recoveries(const std::vector<store::RecoveryRecord>& records) {
  RecoveryFigures f;
  for (const auto& r : records) {
    f.any = true;
    const std::string kind = Kind(r);
    if (RecoveryActive(r)) {
      ++f.in_progress[kind];
    } else {
      ++f.finished[{kind, r.status}];
    }
    if (r.status == kRecoverySucceeded && r.finished >= r.created && r.created > 0) {
      const double took = r.finished - r.created;
      f.durations[kind].push_back(took);
      auto& last = f.last[kind];
      if (r.finished >= last.first) last = {r.finished, took};
    }
    for (const auto& [phase, seconds] : RecoveryPhaseDurations(r)) {
      f.phases[phase].push_back(seconds);
    }
  }
  return f;
}

void EmitRecoveries(const std::string& cluster, const RecoveryFigures& f, Exposition& out) {
  for (std::string_view kind : kKinds) {
    const std::string k(kind);
    for (std::string_view outcome : kOutcomes) {
      auto it = f.finished.find({k, std::string(outcome)});
      out.Counter("hpod_recoveries_total", "Finished node recoveries by kind and outcome",
                  {{"cluster_name", cluster}, {"kind", k}, {"outcome", std::string(outcome)}},
                  it == f.finished.end() ? 0 : it->second);
    }
    auto running = f.in_progress.find(k);
    out.Gauge("hpod_recoveries_in_progress", "Node recoveries in progress",
              {{"cluster_name", cluster}, {"kind", k}},
              running == f.in_progress.end() ? 0 : running->second);
  }
  if (!f.any) return;
  for (std::string_view kind : kKinds) {
    const std::string k(kind);
    auto d = f.durations.find(k);
    out.Histogram("hpod_recovery_duration_seconds",
                  "Succeeded node recoveries: from detection to the node back in service",
                  {{"cluster_name", cluster}, {"kind", k}}, kRecoveryBuckets,
                  d == f.durations.end() ? std::vector<double>{} : d->second);
    if (auto last = f.last.find(k); last != f.last.end()) {
      out.Gauge("hpod_recovery_last_duration_seconds",
                "The latest succeeded node recovery's duration (detection to back in service)",
                {{"cluster_name", cluster}, {"kind", k}}, last->second.second);
    }
  }
  for (RecoveryPhase p : {RecoveryPhase::kDetected, RecoveryPhase::kMarked, RecoveryPhase::kDrained,
                          RecoveryPhase::kLaunched}) {
    const std::string name(RecoveryPhaseName(p));
    auto v = f.phases.find(name);
    out.Histogram("hpod_recovery_phase_duration_seconds",
                  "Time node recoveries spent in each phase (recovery.h)",
                  {{"cluster_name", cluster}, {"phase", name}}, kPhaseBuckets,
                  v == f.phases.end() ? std::vector<double>{} : v->second);
  }
}

template <typename E>
std::map<std::string, int> ZeroCounts() {
  std::map<std::string, int> m;
  for (std::string_view n : api::StateTable<E>::kNames) m[std::string(n)] = 0;
  return m;
}

void EmitHost(const Labels& node, const api::agentproto::HostStats& h, Exposition& out) {
  const auto& c = h.cpu_seconds;
  const std::pair<const char*, double> modes[] = {
      {"user", c.user},     {"nice", c.nice}, {"system", c.system},   {"idle", c.idle},
      {"iowait", c.iowait}, {"irq", c.irq},   {"softirq", c.softirq}, {"steal", c.steal}};
  for (const auto& [mode, seconds] : modes) {
    Labels l = node;
    l.push_back({"mode", mode});
    out.Counter("hpod_node_cpu_seconds_total",
                "CPU time of the node's host by mode (/proc/stat, all CPUs)", l, seconds);
  }
  out.Gauge("hpod_node_memory_total_bytes", "The node's MemTotal (/proc/meminfo)", node,
            static_cast<double>(h.memory_total_bytes));
  out.Gauge("hpod_node_memory_available_bytes", "The node's MemAvailable (/proc/meminfo)", node,
            static_cast<double>(h.memory_available_bytes));
  for (const auto& fs : h.filesystems) {
    Labels l = node;
    l.push_back({"mountpoint", fs.mountpoint});
    out.Gauge("hpod_node_filesystem_size_bytes", "Size of the node's filesystem (statvfs)", l,
              static_cast<double>(fs.size_bytes));
    out.Gauge("hpod_node_filesystem_avail_bytes",
              "Space an unprivileged user may still write on the node's filesystem (statvfs)", l,
              static_cast<double>(fs.avail_bytes));
  }
}

}  // namespace

std::vector<std::pair<std::string, double>> RecoveryPhaseDurations(const store::RecoveryRecord& r) {
  // The first time each phase was entered, in phase order.
  std::map<RecoveryPhase, double> entered;
  if (r.created > 0) entered[RecoveryPhase::kDetected] = r.created;
  if (r.timeline.is_array()) {
    for (const auto& s : r.timeline) {
      if (!s.is_object() || !s.contains("step") || !s["step"].is_string()) continue;
      auto time = s.find("time");
      if (time == s.end() || !time->is_number()) continue;
      auto phase = PhaseEnteredBy(s["step"].get<std::string>());
      if (phase && !entered.count(*phase)) entered[*phase] = time->get<double>();
    }
  }
  std::vector<std::pair<std::string, double>> out;
  for (auto it = entered.begin(); it != entered.end(); ++it) {
    auto next = std::next(it);
    if (next == entered.end()) break;
    // A phase skipped (a Reboot's Drained → Launched is never skipped, but a
    // record may be cut short) leaves its predecessor's time to the next one.
    if (next->second >= it->second) {
      out.push_back({std::string(RecoveryPhaseName(it->first)), next->second - it->second});
    }
  }
  return out;
}

Status CollectState(store::ReadTx& tx, const StateInputs& in, Exposition& out) {
  HPOD_ASSIGN_OR_RETURN(std::vector<std::string> ids, tx.ListClusterIds());
  std::map<std::string, int> clusters = ZeroCounts<api::ClusterStatus>();
  std::map<std::string, std::string> names;  // cluster id → name
  for (const auto& id : ids) {
    auto c = tx.GetCluster(id);
    if (!c.ok() && c.status().code() == StatusCode::kNotFound) continue;
    if (!c.ok()) return c.status();
    names[id] = c->name;
    ++clusters[c->status];
    out.Gauge("hpod_cluster_info", "1 per cluster, with its status",
              {{"cluster_name", c->name}, {"status", c->status}}, 1);
  }
  for (const auto& [status, n] : clusters) {
    out.Gauge("hpod_clusters", "Clusters by status", {{"status", status}}, n);
  }
  for (const auto& [id, cluster] : names) {
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(id));
    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(id));
    HPOD_ASSIGN_OR_RETURN(auto recoveries, tx.ListRecoveries(id));
    std::map<std::string, int> group_status = ZeroCounts<api::InstanceGroupStatus>();
    // (group, status) → count; every group gets every status, so "0 Running"
    // is a sample rather than an absent series.
    std::map<std::pair<std::string, std::string>, int> node_status;
    for (const auto& g : groups) {
      ++group_status[g.status];
      out.Gauge("hpod_instance_group_target_nodes", "Nodes an instance group asks for",
                {{"cluster_name", cluster}, {"instance_group", g.name}}, g.target_count);
      for (std::string_view s : api::StateTable<api::ClusterInstanceStatus>::kNames) {
        node_status[{g.name, std::string(s)}] = 0;
      }
    }
    for (const auto& [status, n] : group_status) {
      out.Gauge("hpod_instance_groups", "Instance groups by status",
                {{"cluster_name", cluster}, {"status", status}}, n);
    }
    for (const auto& n : nodes) {
      ++node_status[{n.group_name, n.status}];
      out.Gauge("hpod_node_info", "1 per node: its instance id (node), hostname and address",
                {{"cluster_name", cluster},
                 {"instance_group", n.group_name},
                 {"node", n.instance_id},
                 {"hostname", n.hostname},
                 {"private_ip", n.private_ip}},
                1);
    }
    for (const auto& [key, count] : node_status) {
      out.Gauge("hpod_nodes", "Nodes by instance group and status (Running: in service)",
                {{"cluster_name", cluster}, {"instance_group", key.first}, {"status", key.second}},
                count);
    }
    EmitRecoveries(cluster, Recoveries(recoveries), out);
    if (in.slurm_nodes) {
      if (auto table = in.slurm_nodes(id)) {
        std::map<std::string, int> states;
        for (const auto& n : table->nodes) ++states[n.state];
        for (const auto& [state, count] : states) {
          out.Gauge("hpod_slurm_nodes", "Nodes in the controller's Slurm table, by state",
                    {{"cluster_name", cluster}, {"state", state}}, count);
        }
      }
    }
  }

  out.Gauge("hpod_agent_connections", "Node agents connected to hpodd", {},
            static_cast<double>(in.agents.size()));
  std::map<std::string, std::map<std::string, int>> verdicts;  // cluster → verdict → nodes
  std::map<std::pair<std::string, std::string>, int> failing;  // (cluster, check) → nodes
  for (const auto& [id, cluster] : names) {
    for (std::string_view v : kVerdicts) verdicts[cluster][std::string(v)] = 0;
  }
  for (const auto& a : in.agents) {
    auto name = names.find(a.cluster_id);
    if (name == names.end()) continue;  // its cluster was deleted meanwhile
    const Labels node = {{"cluster_name", name->second}, {"node", a.instance_id}};
    const auto since = a.last_heartbeat.value_or(a.connected_at);
    out.Gauge("hpod_node_heartbeat_age_seconds",
              "Seconds since the node's agent last heartbeat (since it connected, before "
              "the first)",
              node, std::max(0.0, std::chrono::duration<double>(in.steady_now - since).count()));
    if (a.host) EmitHost(node, *a.host, out);
    if (!a.health_verdict.empty()) ++verdicts[name->second][a.health_verdict];
    for (const auto& check : a.failing_checks) ++failing[{name->second, check}];
  }
  for (const auto& [cluster, counts] : verdicts) {
    for (const auto& [verdict, n] : counts) {
      out.Gauge("hpod_node_health_verdicts",
                "Connected nodes by the verdict of their latest health report",
                {{"cluster_name", cluster}, {"verdict", verdict}}, n);
    }
  }
  for (const auto& [key, n] : failing) {
    out.Gauge("hpod_health_check_failing_nodes",
              "Connected nodes whose health check fails or hangs, by check",
              {{"cluster_name", key.first}, {"check", key.second}}, n);
  }
  out.Gauge("hpod_work_queue_depth", "Reconcile keys queued or delayed", {},
            static_cast<double>(in.work_queue_depth));
  return OkStatus();
}

}  // namespace hpod::controlplane
