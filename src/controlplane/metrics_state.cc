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

using api::agentproto::kHostMountpoints;

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

// The per-node families: nearly all of a large cluster's scrape. Each family is
// written whole, one after another (Exposition::Lines), walking the snapshots
// in order: they are one array and hold each node's figures flat
// (AgentHostFigures), so a family's walk follows no pointer into state
// scattered over the heap (that missed the cache at every step, most of a
// scrape in hpodd). Writing every family at once into a buffer of its own
// page-faulted twice the text's 17 MB. Labels sort as cluster_name, then mode
// or mountpoint, then node.
void EmitNodes(const std::vector<LiveNode>& live, std::chrono::steady_clock::time_point now,
               Exposition& out) {
  // The extra labels come from fixed sets: each is written once here, not
  // escaped again at each of a 10,000-node scrape's 120,000 samples (a seventh
  // of its CPU).
  auto labels = [](std::string_view name, auto&& values) {
    std::vector<std::string> out;
    for (std::string_view v : values) Exposition::AppendLabel(out.emplace_back(), name, v);
    return out;
  };
  static constexpr std::string_view kModes[] = {"user",   "nice", "system",  "idle",
                                                "iowait", "irq",  "softirq", "steal"};
  static const std::vector<std::string> kModeLabels = labels("mode", kModes);
  static const std::vector<std::string> kMountLabels = labels("mountpoint", kHostMountpoints);
  // name{cluster_name="…"[,extra],node="…"} value; `extra` is a whole label.
  auto line = [](std::string& t, std::string_view name, const LiveNode& n, std::string_view extra,
                 double value) {
    t.append(name);
    t.push_back('{');
    t.append(n.cluster_label);
    t.push_back(',');
    if (!extra.empty()) {
      t.append(extra);
      t.push_back(',');
    }
    t.append(n.node_label);
    t.append("} ");
    Exposition::AppendValue(t, value);
    t.push_back('\n');
  };
  // A family is made at its first sample, as Gauge makes one: none without.
  auto family = [&](std::string_view name, std::string_view help, const char* type, auto&& write) {
    std::string* text = nullptr;
    for (const LiveNode& n : live) {
      write(*n.agent, [&](std::string_view extra, double value) {
        if (text == nullptr) text = &out.Lines(name, help, type);
        line(*text, name, n, extra, value);
      });
    }
  };
  family("hpod_node_heartbeat_age_seconds",
         "Seconds since the node's agent last heartbeat (since it connected, before the first)",
         "gauge", [now](const AgentSnapshot& a, auto&& emit) {
           const auto since = a.last_heartbeat.value_or(a.connected_at);
           emit("", std::max(0.0, std::chrono::duration<double>(now - since).count()));
         });
  family("hpod_node_clock_offset_seconds",
         "The node's clock minus hpodd's, from its agent's heartbeats (low by a heartbeat's "
         "one-way delay)",
         "gauge", [](const AgentSnapshot& a, auto&& emit) {
           if (a.clock_offset) emit("", *a.clock_offset);
         });
  family("hpod_node_cpu_seconds_total",
         "CPU time of the node's host by mode (/proc/stat, all CPUs)", "counter",
         [](const AgentSnapshot& a, auto&& emit) {
           if (!a.host) return;
           const auto& c = a.host->cpu_seconds;
           const double cpu[] = {c.user,   c.nice, c.system,  c.idle,
                                 c.iowait, c.irq,  c.softirq, c.steal};
           for (size_t m = 0; m < std::size(kModes); ++m) emit(kModeLabels[m], cpu[m]);
         });
  family("hpod_node_memory_total_bytes", "The node's MemTotal (/proc/meminfo)", "gauge",
         [](const AgentSnapshot& a, auto&& emit) {
           if (a.host) emit("", static_cast<double>(a.host->memory_total_bytes));
         });
  family("hpod_node_memory_available_bytes", "The node's MemAvailable (/proc/meminfo)", "gauge",
         [](const AgentSnapshot& a, auto&& emit) {
           if (a.host) emit("", static_cast<double>(a.host->memory_available_bytes));
         });
  family("hpod_node_filesystem_size_bytes", "Size of the node's filesystem (statvfs)", "gauge",
         [](const AgentSnapshot& a, auto&& emit) {
           if (!a.host) return;
           for (size_t m = 0; m < std::size(kHostMountpoints); ++m) {
             const auto& fs = a.host->filesystems[m];
             if (fs.reported) emit(kMountLabels[m], static_cast<double>(fs.size_bytes));
           }
         });
  family("hpod_node_filesystem_avail_bytes",
         "Space an unprivileged user may still write on the node's filesystem (statvfs)", "gauge",
         [](const AgentSnapshot& a, auto&& emit) {
           if (!a.host) return;
           for (size_t m = 0; m < std::size(kHostMountpoints); ++m) {
             const auto& fs = a.host->filesystems[m];
             if (fs.reported) emit(kMountLabels[m], static_cast<double>(fs.avail_bytes));
           }
         });
}

// The store's figures, read now. The hpod_node_info lines are written straight
// (labels in name order): Gauge's family lookup and label sort per node were a
// tenth of a 10,000-node scrape.
StatusOr<std::shared_ptr<const StoreFigures>> ReadStoreFigures(store::ReadTx& tx) {
  auto figures = std::make_shared<StoreFigures>();
  HPOD_ASSIGN_OR_RETURN(std::vector<std::string> ids, tx.ListClusterIds());  // by id
  for (const auto& id : ids) {
    auto c = tx.GetCluster(id);
    if (!c.ok() && c.status().code() == StatusCode::kNotFound) continue;
    if (!c.ok()) return c.status();
    StoreFigures::Cluster& cluster = figures->clusters.emplace_back();
    cluster.id = id;
    cluster.name = c->name;
    cluster.status = c->status;
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(id));
    for (const auto& g : groups) cluster.groups.push_back({g.name, g.status, g.target_count});
    HPOD_ASSIGN_OR_RETURN(auto summaries, tx.ListNodeSummaries(id));
    std::string cluster_label;
    Exposition::AppendLabel(cluster_label, "cluster_name", cluster.name);
    std::string& t = cluster.node_info_lines;
    for (const auto& n : summaries) {
      ++cluster.nodes_by_status[{n.group_name, n.status}];
      t.append("hpod_node_info{");
      t.append(cluster_label);
      t.push_back(',');
      Exposition::AppendLabel(t, "hostname", n.hostname);
      t.push_back(',');
      Exposition::AppendLabel(t, "instance_group", n.group_name);
      t.push_back(',');
      Exposition::AppendLabel(t, "node", n.instance_id);
      t.push_back(',');
      Exposition::AppendLabel(t, "private_ip", n.private_ip);
      t.append("} 1\n");
    }
  }
  return std::shared_ptr<const StoreFigures>(std::move(figures));
}

}  // namespace

StatusOr<std::shared_ptr<const StoreFigures>> StoreFiguresCache::Get(store::ReadTx& tx,
                                                                     uint64_t generation) {
  {
    MutexLock lock(mu_);
    if (figures_ != nullptr && generation_ == generation) return figures_;
  }
  // Read outside the lock: two scrapes at once both read, and the later
  // generation's figures stay.
  HPOD_ASSIGN_OR_RETURN(auto figures, ReadStoreFigures(tx));
  MutexLock lock(mu_);
  if (figures_ == nullptr || generation >= generation_) {
    figures_ = figures;
    generation_ = generation;
  }
  return figures;
}

Status CollectState(store::ReadTx& tx, const StateInputs& in, Exposition& out) {
  HPOD_ASSIGN_OR_RETURN(std::shared_ptr<const StoreFigures> figures,
                        in.store_figures != nullptr ? in.store_figures->Get(tx, in.store_generation)
                                                    : ReadStoreFigures(tx));
  std::map<std::string, int> clusters = ZeroCounts<api::ClusterStatus>();
  std::map<std::string, std::string> names;  // cluster id → name
  for (const auto& c : figures->clusters) {
    names[c.id] = c.name;
    ++clusters[c.status];
    out.Gauge("hpod_cluster_info", "1 per cluster, with its status",
              {{"cluster_name", c.name}, {"status", c.status}}, 1);
  }
  for (const auto& [status, n] : clusters) {
    out.Gauge("hpod_clusters", "Clusters by status", {{"status", status}}, n);
  }
  for (const StoreFigures::Cluster& c : figures->clusters) {
    const std::string& id = c.id;
    const std::string& cluster = c.name;
    std::map<std::string, int> group_status = ZeroCounts<api::InstanceGroupStatus>();
    // (group, status) → count; every group gets every status, so "0 Running"
    // is a sample rather than an absent series.
    std::map<std::pair<std::string, std::string>, int> node_status;
    for (const auto& g : c.groups) {
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
    // A family is made at its first sample: none for a cluster without nodes.
    if (!c.node_info_lines.empty()) {
      out.Lines("hpod_node_info", "1 per node: its instance id (node), hostname and address",
                "gauge")
          .append(c.node_info_lines);
    }
    for (const auto& [key, count] : c.nodes_by_status) node_status[key] += count;
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
        // Counted by the state as Slurm wrote it (a few distinct values among
        // 10,000 rows), then each distinct one labelled once: SlurmStateLabel
        // compares its parts with every state Slurm has.
        std::map<std::string_view, int> raw;
        for (const auto& n : table->nodes) ++raw[n.state];
        std::map<std::string, int> states;
        for (const auto& [state, count] : raw) states[SlurmStateLabel(state)] += count;
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
