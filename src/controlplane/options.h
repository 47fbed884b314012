#pragma once

// Settings shared by the control plane's handlers and reconcilers.
//
// Thread contract: a plain value, read-only once the control plane starts.

#include <chrono>
#include <string>

namespace hpod::controlplane {

struct SlurmOptions {
  // slurm.conf SlurmdTimeout (see slurm::SlurmClusterSpec).
  int slurmd_timeout_s = 30;
  // Where compute nodes find GPU device files, and whether the agent creates
  // stand-ins there; the daemon sets both from the provider's NodeEnvironment.
  std::string gpu_device_dir = "/dev";
  bool stand_in_gpus = false;
  // spank_hpod.so's path on every node (NodeEnvironment::spank_plugin); empty: none.
  std::string spank_plugin;
  // Whether the agents run sshd with the cluster's host keys (one per NodeName,
  // kept in the store) and host-based trust between the nodes
  // (NodeEnvironment::cluster_sshd).
  bool cluster_sshd = false;
  // Whether nodes keep the cluster's names in their own /etc/hosts (machines that
  // do not share the provider's hosts file: NodeEnvironment::sees_hpodd_files is
  // false), so every `slurm` message carries every node's address. Otherwise it
  // carries the node's own at most: the whole table to each of n nodes is n x n.
  bool send_hosts = true;
  // Slurm accounting (slurm::SlurmClusterSpec::accounting): the controller's agent
  // runs MariaDB and slurmdbd before slurmctld. hpodd resolves --slurm-accounting
  // (auto: where the nodes have slurmdbd and mariadbd) into this.
  bool accounting = false;
  // How long removing a node waits for Slurm to drain and forget it before the
  // node is terminated anyway.
  std::chrono::seconds remove_timeout{30};
  // How long a node whose lifecycle scripts succeeded may wait for its part of
  // Slurm (daemons up, registered) before it fails to provision.
  std::chrono::seconds ready_timeout{300};
};

// Node health (health_reconciler.h). Defaults are chosen so that detection plus a
// replacement (a few seconds locally) finish well inside slurmd_timeout_s, before
// Slurm itself marks the node DOWN and kills its jobs.
struct HealthOptions {
  // A node whose agent sent no heartbeat (or stayed disconnected) this long is
  // dead: Replace. Agents beat every AgentServiceOptions::heartbeat_interval (2 s).
  std::chrono::milliseconds heartbeat_timeout{6000};
  // After hpodd starts, agents reconnect with backoff (at most 10 s between
  // tries): no heartbeat verdict before this much time has passed since the start.
  std::chrono::milliseconds startup_grace{15000};
  // How often a cluster with running nodes is judged even without news (a hung
  // node sends nothing; only the clock tells).
  std::chrono::milliseconds poll_interval{1000};
  // A node whose recovery failed is not recovered again for the same signal for
  // this long (a replacement that never registers would otherwise be replaced in
  // a loop); a user's Batch request is not held back.
  std::chrono::seconds failed_backoff{300};
  // Lost contact with more than half of a cluster's judged nodes, and with at
  // least this many, holds those verdicts (health_reconciler.h): hpodd's side.
  int mass_loss_min = 10;
};

// Continuous provisioning (provisioning_retry.h): a worker that failed to
// provision is launched again after base × 2^(attempt-1), at most `max_delay`.
struct ProvisioningRetryOptions {
  std::chrono::milliseconds base_delay{5000};
  std::chrono::milliseconds max_delay{300000};
};

struct ControlPlaneOptions {
  // Used in ARNs and DNS names; scripts split the ARN to find the region.
  std::string region = "us-west-2";
  std::string account_id = "123456789012";
  // Quotas answered with ResourceLimitExceeded.
  int max_clusters = 100;
  int max_nodes_per_cluster = 20000;
  // How often a reconciler looks again at a cluster that is still converging.
  std::chrono::milliseconds poll_interval{500};
  // How often every cluster is reconciled even without a change (level-triggered
  // safety net for anything missed, e.g. a node that died silently).
  std::chrono::milliseconds resync_interval{30000};
  // A node whose machine is up but whose agent has not registered within this
  // time fails to provision (the agent could not start or reach hpodd).
  std::chrono::seconds agent_register_timeout{120};
  // A deleted cluster's events (ListClusterEvents, DescribeClusterEvent by its
  // ARN) and its nodes' logs (HpodGetNodeLogs) stay readable this long.
  std::chrono::seconds deleted_cluster_retention{7 * 24 * 3600};
  SlurmOptions slurm;
  HealthOptions health;
  ProvisioningRetryOptions retry;
};

}  // namespace hpod::controlplane
