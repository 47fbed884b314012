#pragma once

// The local provider: every node is a set of Linux namespaces on this machine.
// A node has its own network namespace with one address on a per-cluster bridge,
// and a process tree in fresh uts/mount/pid(/time) namespaces whose PID 1 is
// hpod-node-init, which runs the node agent. Killing PID 1 kills the node.
//
// Network safety (docs: shared/reference/slurm-on-namespaces.md §3): Create first
// refuses a node block that overlaps any host route, then installs an
// `unreachable <node block>` guard route, and only then may bridges and
// namespaces appear. Each cluster gets one /24 of the block on its own bridge
// (gateway .1); nodes have no default route and the host neither forwards nor
// NATs for them, so node traffic never leaves the machine.
//
// On disk, below `state_dir`: `provider.json` (counters), `clusters/<id>/`
// (`cluster.json`, the cluster's `hosts` file bound on every node's /etc/hosts)
// and `nodes/<instance id>/` (`node.json`, `agent.json`, `node-init.json`,
// `node-init.log`, and `disk/`, the node-local disk). Nodes outlive hpodd:
// Create re-adopts every node whose PID 1 still runs.
//
// Thread contract: safe for concurrent calls; one mutex serializes them (launches
// hold it while the node's first process starts, typically tens of ms).

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hpod/base/thread_annotations.h"
#include "hpod/provider/local/ipv4.h"
#include "hpod/provider/local/node_host.h"
#include "hpod/provider/provider.h"

namespace hpod::provider::local {

struct LocalProviderOptions {
  // <hpodd data dir>/local; clusters/ and nodes/ live below it. Required.
  std::string state_dir;
  // Guarded by an unreachable route; each cluster gets one /24 inside it. IPv4,
  // prefix length at most 24.
  std::string node_block = "10.77.0.0/16";
  // Shared dir per cluster, bound on every node's /fsx: <fsx_root>/<cluster_id>.
  // Empty: <state_dir>/fsx. Kept when a cluster's last node goes (it is user data).
  std::string fsx_root;
  std::string node_init_binary;  // path of hpod-node-init
  std::string agent_binary;      // path of hpod-agent
  // hpodd's agent endpoint as the HOST sees it: unix:///var/lib/hpod/agent.sock.
  // Nodes see the socket's directory at /run/hpod; other schemes pass unchanged.
  std::string agent_endpoint;
  // What each node's PID 1 runs. Empty: `<agent_binary> --config
  // /var/lib/hpod-agent/agent.json`. Tests run a stand-in such as {"sleep","1000"}.
  std::vector<std::string> node_program;
  // Start of every interface and netns name (<p>br<k>, <p>n<n>, <p>v<n>h): two
  // providers on one host (hpodd and a test) need different prefixes. At most 4
  // characters, so names stay within the kernel's 15.
  std::string link_prefix = "hp";
};

class LocalProvider final : public Provider {
 public:
  // Validates options, refuses an overlapping node block (kFailedPrecondition),
  // installs the guard route, then loads and re-adopts persisted nodes.
  static StatusOr<std::unique_ptr<LocalProvider>> Create(LocalProviderOptions options,
                                                         std::unique_ptr<NodeHost> host);
  // Leaves nodes running (they are re-adopted by the next Create); removes the
  // guard route only when no node remains.
  ~LocalProvider() override;

  // kInvalidArgument for a private_ip outside the cluster's /24 or in use;
  // kResourceExhausted when the cluster's /24 or the node block is full.
  Status Launch(const LaunchSpec& spec) override;
  Status Terminate(const std::string& instance_id) override;
  StatusOr<NodeObservation> Describe(const std::string& instance_id) override;
  StatusOr<std::vector<std::string>> List(const std::string& cluster_id) override;
  // Kills PID 1 and starts it again in fresh namespaces: same netns, address,
  // hostname and node disk.
  Status Reboot(const std::string& instance_id) override;
  // Nodes run hpod-agent unless a stand-in program was configured (tests).
  bool RunsAgents() const override { return options_.node_program.empty(); }

  // Leaves running nodes alone. With `remove_guard`, also removes the guard route,
  // but only when no node remains (the guard is what keeps their traffic local).
  Status Shutdown(bool remove_guard);
  // Terminates every node, then removes the guard route (tests, uninstall).
  Status DestroyAll();

  // The node's PID 1 as the host sees it (tests enter the node with nsenter -t).
  std::optional<ProcessId> NodeProcess(const std::string& instance_id) const;
  std::string NodeDir(const std::string& instance_id) const;

 private:
  struct Cluster {
    std::string id;
    int subnet = 0;  // k: the cluster's /24 is the k-th of the node block
  };
  struct Node {
    std::string instance_id, cluster_id, cluster_name, group_name, instance_name, instance_type;
    std::string ip, hostname;
    int index = 0;  // n in the names <p>n<n>, <p>v<n>h
    ProcessId process;
    // In memory only: set when Create found PID 1 gone (hpodd restarted).
    bool vanished = false;
    // In memory only: PID 1 has set the hostname (cached per process).
    bool ready = false;
  };

  LocalProvider(LocalProviderOptions options, std::unique_ptr<NodeHost> host, uint32_t block,
                int block_prefix);
  Status Load() EXCLUDES(mu_);
  void SaveProvider() REQUIRES(mu_);
  Status SaveNode(const Node& n);
  Status SaveCluster(const Cluster& c);
  Status WriteHosts(const std::string& cluster_id) REQUIRES(mu_);
  Status WriteNodeFiles(const Node& n, const LaunchSpec& spec);
  // `n` is one of nodes_.
  Status Spawn(Node& n) REQUIRES(mu_);
  // Kills, unplugs and forgets a node; frees its cluster when it was the last.
  Status RemoveNode(const std::string& instance_id) REQUIRES(mu_);
  // The Cluster* points into clusters_.
  StatusOr<Cluster*> EnsureCluster(const std::string& cluster_id, const std::string& want_ip)
      REQUIRES(mu_);
  StatusOr<std::string> AllocateIp(const Cluster& c, const std::string& requested) REQUIRES(mu_);

  std::string NetnsName(int n) const;
  std::string VethHost(int n) const;
  std::string VethNode(int n) const;
  std::string BridgeName(int k) const;
  std::string SubnetBase(int k) const;  // "10.77.3." (the /24 without its last octet)
  std::string ClusterDir(const std::string& id) const;
  std::string FsxDir(const std::string& id) const;

  const LocalProviderOptions options_;
  const std::unique_ptr<NodeHost> host_;
  const uint32_t block_;
  const int block_prefix_;

  mutable Mutex mu_;
  int next_index_ GUARDED_BY(mu_) = 0;
  std::map<std::string, Cluster> clusters_ GUARDED_BY(mu_);
  std::map<std::string, Node> nodes_ GUARDED_BY(mu_);
};

}  // namespace hpod::provider::local
