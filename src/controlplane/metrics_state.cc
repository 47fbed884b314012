#include "hpod/controlplane/metrics_state.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>

#include "hpod/api/agent_protocol_host.h"
#include "hpod/api/states.h"
#include "hpod/controlplane/metrics_labels.h"

namespace hpod::controlplane {

namespace {

constexpr std::string_view kVerdicts[] = {"Healthy", "Reboot", "Replace"};

template <typename E>
std::map<std::string, int> ZeroCounts() {
  std::map<std::string, int> m;
  for (std::string_view n : api::StateTable<E>::kNames) m[std::string(n)] = 0;
  return m;
}

// A connected node of a cluster the scrape knows, with its two labels written
// out (`cluster_name="…"`, `node="…"`): each is in every one of its 13 to 17
// samples.
struct LiveNode {
  const AgentSnapshot* agent;
  std::string_view cluster_label;
  std::string_view node_label;
};

// The per-node families: nearly all of a large cluster's scrape. One pass over the
// nodes writes every family's lines into a buffer of its own (each node's state,
// scattered over the heap, is read once, not once per family: a family at a
// time, the walks' cache misses were most of a scrape in hpodd), then the
// families go out whole, one after another (Exposition::Lines). Labels sort as
// cluster_name, then mode or mountpoint, then node.
void EmitNodes(const std::vector<LiveNode>& live, std::chrono::steady_clock::time_point now,
               Exposition& out) {
  enum Family { kHeartbeat, kClock, kCpu, kMemTotal, kMemAvail, kFsSize, kFsAvail, kFamilies };
  struct Spec {
    std::string_view name, help;
    const char* type;
  };
  static constexpr Spec kSpecs[kFamilies] = {
      {"hpod_node_heartbeat_age_seconds",
       "Seconds since the node's agent last heartbeat (since it connected, before the first)",
       "gauge"},
      {"hpod_node_clock_offset_seconds",
       "The node's clock minus hpodd's, from its agent's heartbeats (low by a heartbeat's "
       "one-way delay)",
       "gauge"},
      {"hpod_node_cpu_seconds_total", "CPU time of the node's host by mode (/proc/stat, all CPUs)",
       "counter"},
      {"hpod_node_memory_total_bytes", "The node's MemTotal (/proc/meminfo)", "gauge"},
      {"hpod_node_memory_available_bytes", "The node's MemAvailable (/proc/meminfo)", "gauge"},
      {"hpod_node_filesystem_size_bytes", "Size of the node's filesystem (statvfs)", "gauge"},
      {"hpod_node_filesystem_avail_bytes",
       "Space an unprivileged user may still write on the node's filesystem (statvfs)", "gauge"},
  };
  // Bytes per line, near enough, so the buffers are not regrown.
  constexpr size_t kLine = 110;
  std::string text[kFamilies];
  const size_t lines[kFamilies] = {1, 1, 8, 1, 1, 2, 2};
  for (int f = 0; f < kFamilies; ++f) text[f].reserve(live.size() * lines[f] * kLine);
  // name{cluster_name="…"[,extra],node="…"} value
  auto line = [&](Family f, const LiveNode& n, std::string_view extra_name,
                  std::string_view extra_value, double value) {
    std::string& t = text[f];
    t.append(kSpecs[f].name);
    t.push_back('{');
    t.append(n.cluster_label);
    t.push_back(',');
    if (!extra_name.empty()) {
      Exposition::AppendLabel(t, extra_name, extra_value);
      t.push_back(',');
    }
    t.append(n.node_label);
    t.append("} ");
    Exposition::AppendValue(t, value);
    t.push_back('\n');
  };
  for (const auto& n : live) {
    const AgentSnapshot& a = *n.agent;
    const auto since = a.last_heartbeat.value_or(a.connected_at);
    line(kHeartbeat, n, "", "", std::max(0.0, std::chrono::duration<double>(now - since).count()));
    if (a.clock_offset) line(kClock, n, "", "", *a.clock_offset);
    if (!a.host) continue;
    const api::agentproto::HostStats& host = *a.host;
    const auto& c = host.cpu_seconds;
    const std::pair<std::string_view, double> modes[] = {
        {"user", c.user},     {"nice", c.nice}, {"system", c.system},   {"idle", c.idle},
        {"iowait", c.iowait}, {"irq", c.irq},   {"softirq", c.softirq}, {"steal", c.steal}};
    for (const auto& [mode, seconds] : modes) line(kCpu, n, "mode", mode, seconds);
    line(kMemTotal, n, "", "", static_cast<double>(host.memory_total_bytes));
    line(kMemAvail, n, "", "", static_cast<double>(host.memory_available_bytes));
    // Only the filesystems node_exporter's dashboards ask for, once each; the
    // protocol's reader drops others already (api/agent_protocol_host.h).
    std::array<std::string_view, 4> seen;  // more than the mount points there are
    size_t count = 0;
    for (const auto& fs : host.filesystems) {
      if (!api::agentproto::IsHostMountpoint(fs.mountpoint) || count == seen.size() ||
          std::find(seen.begin(), seen.begin() + count, fs.mountpoint) != seen.begin() + count) {
        continue;
      }
      seen[count++] = fs.mountpoint;
      line(kFsSize, n, "mountpoint", fs.mountpoint, static_cast<double>(fs.size_bytes));
      line(kFsAvail, n, "mountpoint", fs.mountpoint, static_cast<double>(fs.avail_bytes));
    }
  }
  // A family without a sample is left out, as Gauge leaves it.
  for (int f = 0; f < kFamilies; ++f) {
    if (!text[f].empty()) out.Lines(kSpecs[f].name, kSpecs[f].help, kSpecs[f].type) += text[f];
  }
}

}  // namespace

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
    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodeSummaries(id));
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
    HPOD_ASSIGN_OR_RETURN(RecoveryFigures recoveries, in.recoveries != nullptr
                                                          ? in.recoveries->Figures(tx, id)
                                                          : ReadRecoveryFigures(tx, id));
    EmitRecoveries(cluster, recoveries, out);
    if (in.slurm_nodes) {
      if (auto table = in.slurm_nodes(id)) {
        std::map<std::string, int> states;
        for (const auto& n : table->nodes) ++states[SlurmStateLabel(n.state)];
        for (const auto& [state, count] : CapSlurmStates(std::move(states))) {
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
  // The two labels of each node's samples, written once: `cluster_name` per
  // cluster, `node` per node, all nodes' in one string (views made once it is
  // whole).
  std::map<std::string, std::string> cluster_labels;  // cluster id → cluster_name="…"
  for (const auto& [id, cluster] : names) {
    Exposition::AppendLabel(cluster_labels[id], "cluster_name", cluster);
  }
  std::vector<LiveNode> live;
  live.reserve(in.agents.size());
  std::vector<size_t> node_label_ends;
  node_label_ends.reserve(in.agents.size());
  std::string node_labels;
  for (const auto& a : in.agents) {
    auto name = names.find(a.cluster_id);
    if (name == names.end()) continue;  // its cluster was deleted meanwhile
    live.push_back({&a, cluster_labels[a.cluster_id], {}});
    Exposition::AppendLabel(node_labels, "node", a.instance_id);
    node_label_ends.push_back(node_labels.size());
    if (!a.health_verdict.empty()) ++verdicts[name->second][a.health_verdict];
    // A node counts once per check label (an agent may repeat a name, and
    // names hpodd does not know all read "other").
    std::set<std::string> checks;
    for (const auto& check : a.failing_checks) checks.insert(HealthCheckLabel(check));
    for (const auto& check : checks) ++failing[{name->second, check}];
  }
  for (size_t i = 0, begin = 0; i < live.size(); begin = node_label_ends[i++]) {
    live[i].node_label = std::string_view(node_labels).substr(begin, node_label_ends[i] - begin);
  }
  EmitNodes(live, in.steady_now, out);
  if (in.recoveries != nullptr) {
    std::set<std::string> ids;
    for (const auto& [id, cluster] : names) ids.insert(id);
    in.recoveries->Retain(ids);
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
