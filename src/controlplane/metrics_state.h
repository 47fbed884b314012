#pragma once

// The scrape-time half of hpodd's metrics (metrics.h): what *is*, computed from
// one read transaction of the store plus the agents' in-memory state, so a
// scrape shows exactly what DescribeCluster/ListClusterNodes/HpodListRecoveries
// would. Families (labels in braces; `node` is an instance id):
//
//   hpod_clusters{status}                       clusters by ClusterStatus (0 for the others)
//   hpod_cluster_info{cluster_name,status}      1 per cluster
//   hpod_instance_groups{cluster_name,status}   groups by InstanceGroupStatus
//   hpod_instance_group_target_nodes{cluster_name,instance_group}   InstanceCount asked for
//   hpod_nodes{cluster_name,instance_group,status}   nodes by ClusterInstanceStatus
//                                               ("Running" is in service)
//   hpod_node_info{cluster_name,instance_group,node,hostname,private_ip}   1 per node
//   hpod_slurm_nodes{cluster_name,state}        the controller's Slurm table by state
//                                               (Slurm's own names, else "other")
//   hpod_recoveries_total{cluster_name,kind,outcome}   finished recoveries (kind
//                                               Reboot|Replace; outcome Succeeded|Failed|
//                                               Reported|Cancelled)
//   hpod_recoveries_in_progress{cluster_name,kind}
//   hpod_recovery_duration_seconds{cluster_name,kind}   histogram: detection → finished, of
//                                               the succeeded ones
//   hpod_recovery_last_duration_seconds{cluster_name,kind}   the latest succeeded one's
//   hpod_recovery_phase_duration_seconds{cluster_name,phase}   histogram: time spent in
//                                               Detected, Marked, Drained, Launched (recovery.h)
//   hpod_agent_connections                      connected node agents
//   hpod_node_heartbeat_age_seconds{cluster_name,node}   since the last heartbeat (or connect)
//   hpod_node_clock_offset_seconds{cluster_name,node}   the node's clock minus hpodd's
//                                               (AgentService::ClockOffset; absent when unknown)
//   hpod_node_health_verdicts{cluster_name,verdict}   connected nodes by their latest health
//                                               report's verdict (Healthy|Reboot|Replace)
//   hpod_health_check_failing_nodes{cluster_name,check}   nodes whose check fails or hangs
//                                               (hpod's checks by name, else "other")
//   hpod_node_cpu_seconds_total{cluster_name,node,mode}   host figures from the heartbeats
//   hpod_node_memory_total_bytes / _available_bytes{cluster_name,node}
//   hpod_node_filesystem_size_bytes / _avail_bytes{cluster_name,node,mountpoint}
//                                               (mountpoint "/" or "/fsx" only)
//   hpod_work_queue_depth                       keys queued or delayed
//
// Labels that agents supply are bounded (metrics_labels.h): a misbehaving agent
// cannot add series beyond a fixed set per node and cluster.
//
// Counters computed from durable records (hpod_recoveries_total, the recovery
// histograms) only grow, except when a cluster is deleted with its records: its
// series then end, as a restarted exporter's would.
//
// Thread contract: free functions on the caller's transaction and values;
// StoreFiguresCache is thread-safe.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/metrics.h"
#include "hpod/controlplane/metrics_recoveries.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

// What a scrape takes from the store, apart from the recoveries: the clusters,
// their groups, and their nodes' counts and hpod_node_info lines.
struct StoreFigures {
  struct Group {
    std::string name, status;
    int target_count = 0;
  };
  struct Cluster {
    std::string id, name, status;
    std::vector<Group> groups;
    // (instance group, ClusterInstanceStatus) → nodes.
    std::map<std::pair<std::string, std::string>, int> nodes_by_status;
    std::string node_info_lines;  // the cluster's hpod_node_info samples, each line whole
  };
  std::vector<Cluster> clusters;  // by id
};

// StoreFigures kept across scrapes for as long as the store has had no write
// (store::Store::WriteGeneration): a running cluster's store sees a few writes
// a minute, and reading 10,000 node summaries, or 100 clusters' and their
// groups' specs, was a fifth of a scrape.
class StoreFiguresCache {
 public:
  // The figures at `generation` (taken before `tx` began): those kept, else read
  // through `tx` and kept.
  StatusOr<std::shared_ptr<const StoreFigures>> Get(store::ReadTx& tx, uint64_t generation);

 private:
  Mutex mu_;
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  std::shared_ptr<const StoreFigures> figures_ GUARDED_BY(mu_);
};

// What a scrape reads besides the store.
struct StateInputs {
  std::vector<AgentSnapshot> agents;  // connected agents
  // The controller's Slurm table of a cluster, when an agent reported one.
  // Shared, not copied: at 10,000 nodes a copy was 40,000 strings per scrape.
  std::function<std::shared_ptr<const SlurmNodesReport>(const std::string& cluster_id)> slurm_nodes;
  std::chrono::steady_clock::time_point steady_now;
  size_t work_queue_depth = 0;
  // Folds finished recoveries once across scrapes (hpodd keeps one); without
  // it, every recovery record is read (metrics_recoveries.h).
  RecoveryFiguresCache* recoveries = nullptr;
  // With it (hpodd keeps one), the store's figures are read once per store
  // generation, `store_generation`, taken before the scrape's transaction.
  StoreFiguresCache* store_figures = nullptr;
  uint64_t store_generation = 0;
};

// Appends the families above, reading the store through `tx`.
Status CollectState(store::ReadTx& tx, const StateInputs& inputs, Exposition& out);

}  // namespace hpod::controlplane
