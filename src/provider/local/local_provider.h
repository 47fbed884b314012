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
// `node-init.log`, and `disk/`, the node-local disk: a plain directory, or a tmpfs
// of `node_disk_mb` MiB mounted before the node starts). Nodes outlive hpodd:
// Create re-adopts every node whose PID 1 still runs, with its disk mounted.
//
// On the node disk, in the agent's state dir (/var/lib/hpod-agent in the node,
// <node dir>/disk/state on the host): `kmsg`, the node's kernel log (HPOD_KERNEL_LOG;
// nodes share the host's kernel, so /dev/kmsg is not theirs), and for GPU instance
// types with a fake NVML library `fake-nvml.json`, its script
// (HPOD_FAKE_NVML_SCRIPT). A reboot starts both afresh, as a machine's kernel ring
// buffer and GPU state do.
//
// Faults (InjectFault, local_faults.cc) act on the real parts: signals to the
// node's processes, its host-side veth, its disk. A partition's end is persisted
// in node.json and a provider-owned timer thread restores the link at its end,
// also after an hpodd restart (Create restores links whose end has passed).
//
// Thread contract: safe for concurrent calls; one mutex serializes them (launches
// hold it while the node's first process starts, typically tens of ms; disk-full
// while it writes the node's disk, at most node_disk_mb MiB of memory; kill-agent
// and kill-slurmd until their processes are reaped, at most 5 s).

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/thread_annotations.h"
#include "hpod/provider/local/ipv4.h"
#include "hpod/provider/local/node_host.h"
#include "hpod/provider/local/node_init.h"
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
  // Ignored with AgentTransport::kTls.
  std::string agent_endpoint;
  // How the nodes' agents reach hpodd. kUnixSocket: agent_endpoint's socket,
  // bound into each node. kTls: over the node network, exactly as a remote
  // machine would: each node joins with the join token of its launch
  // (LaunchSpec::bootstrap_token) at https://<AgentServiceAddress>:<agent_port>
  // (an address on the host's lo inside the guarded node block, whose last /24
  // no cluster gets; each node has one route to it, through its bridge) and then
  // connects with mutual TLS; nothing of hpodd's is bound into the node.
  enum class AgentTransport { kUnixSocket, kTls };
  AgentTransport agent_transport = AgentTransport::kUnixSocket;
  uint16_t agent_port = 8451;
  // What each node's PID 1 runs. Empty: `<agent_binary> --config
  // /var/lib/hpod-agent/agent.json`. Tests run a stand-in such as {"sleep","1000"}.
  std::vector<std::string> node_program;
  // Start of every interface and netns name (<p>br<k>, <p>n<n>, <p>v<n>h): two
  // providers on one host (hpodd and a test) need different prefixes. At most 4
  // characters, so names stay within the kernel's 15.
  std::string link_prefix = "hp";
  // Size in MiB of each node's disk (nodes/<id>/disk), a tmpfs mounted before the
  // node starts and unmounted when it is removed. 0: a plain directory on the host's
  // disk, which `disk-full` refuses to fill. Applies to nodes launched from now on.
  int node_disk_mb = 0;
  // A fake libnvidia-ml (target hpod_fake_nvml) for nodes whose instance type has
  // GPUs: their agent gets HPOD_NVML_LIBRARY=<this path> (it must be visible inside
  // the node: not under /tmp, /run, /var/log or /var/spool) and
  // HPOD_FAKE_NVML_SCRIPT. Empty: no NVML seam.
  std::string fake_nvml_library;
  // A test seam for skewed clocks (hpodd --fake-clock-skew): the nodes of each
  // named instance group run under libfaketime (faketime_library, Debian's
  // faketime package) with their wall clock this many seconds off the host's;
  // the agent, slurmd, munged, sessions and lifecycle scripts inherit it, their
  // monotonic clocks are left alone. A replacement keeps its group's skew.
  std::map<std::string, int> fake_clock_skew_s;
  std::string faketime_library = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
  // spank_hpod.so on the host (absolute), copied onto every node's disk (nodes do
  // not see the host's /tmp, where a CI clone builds it); empty: none.
  std::string spank_plugin;
  // hpod-container on the host (absolute), copied beside the plugin on every node
  // (the plugin runs it for --container-image); empty: none, and a containerized
  // step fails with one line saying so.
  std::string container_helper;
  // hpod-deep-check (deep health checks), copied onto each node's disk beside
  // the agent's state (/var/lib/hpod-agent), where the agent runs it from: a
  // node does not see hpodd's /tmp, where a build tree may be. Empty: none.
  std::string deep_check_program;
  // Wall-clock time for partition ends (persisted, so hpodd restarts keep them).
  // Borrowed, outlives the provider; null: the real clock.
  const Clock* clock = nullptr;
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
  // hostname and node disk. A call with the request id of the node's last reboot
  // (persisted in node.json) does nothing; an empty id always reboots.
  Status Reboot(const std::string& instance_id, const std::string& request_id) override;
  // Every FaultSpec kind. kNotFound for an unknown node; kFailedPrecondition when
  // its PID 1 is gone, for kill-agent/kill-slurmd when no such process runs, and
  // for disk-full without a sized node disk. kill-node leaves the netns and
  // files alone (recovering the node is the control plane's job); hang is never
  // undone (Terminate and Reboot still work: SIGKILL ends stopped processes).
  Status InjectFault(const std::string& instance_id, const FaultSpec& fault) override;
  // Nodes run hpod-agent unless a stand-in program was configured (tests).
  bool RunsAgents() const override { return options_.node_program.empty(); }
  // Nodes are namespaces on hpodd's machine: they see its files except their own
  // /tmp, /run, /var/log, /var/spool, /var/lib/hpod-agent, /fsx and /etc/hosts
  // (node_init.h, PlanMounts); their agents dial hpodd's socket, whose directory is
  // bound on /run/hpod (with the S3 relay beside it); the SPANK plugin is copied
  // onto each node disk; GPU instance types get stand-in devices in
  // /run/hpod-gpus (the host has no GPUs for them); a replacement takes over its
  // predecessor's address on the cluster's bridge.
  NodeEnvironment Environment() const override;
  // The programs this provider puts on nodes (agent_binary, spank_plugin,
  // container_helper, deep_check_program) as an image, copied into its image
  // store (<state_dir>/images/<id>/) the first time they are seen, so that a node
  // launched later with this image, or rebooted, runs these programs even after
  // the build or package beside hpodd changed. "" without an agent_binary file.
  // node_images.cc. The store keeps every image a node runs, the newest
  // kKeptImages others, and any other for kImageRetention (a group's, a rollback's).
  StatusOr<std::string> CurrentImage() const override EXCLUDES(images_mu_, current_mu_);
  bool HasImage(const std::string& image_id) const override;
  // Rewrites the node's record and node-init.json for `image_id`; its disk's
  // copies are refreshed at its next start (PrepareDisk).
  Status SetNodeImage(const std::string& instance_id, const std::string& image_id) override
      EXCLUDES(mu_);
  static constexpr int kKeptImages = 3;
  static constexpr std::chrono::hours kImageRetention{24 * 30};

  // kTls: where hpodd's agent listener must bind (the node block's last usable
  // address, "10.77.255.254" for 10.77.0.0/16); empty for a block of one /24.
  static std::string AgentServiceAddress(const std::string& node_block);

  // Leaves running nodes alone. With `remove_guard`, also removes the guard route,
  // but only when no node remains (the guard is what keeps their traffic local).
  Status Shutdown(bool remove_guard);
  // Terminates every node, then removes the guard route (tests, uninstall).
  Status DestroyAll();

  // The node's PID 1 as the host sees it (tests enter the node with nsenter -t).
  std::optional<ProcessId> NodeProcess(const std::string& instance_id) const;
  std::string NodeDir(const std::string& instance_id) const;
  // The cgroup of a node's cpu-throttle fault.
  static std::string CpuThrottleName(const std::string& instance_id) {
    return "hpod-throttle-" + instance_id;
  }
  // cpu-throttle: the share of one CPU a throttled node keeps (what a failing
  // machine does: its work runs fifty times slower). slow-link: its egress rate,
  // below a quarter of any link this machine's veths carry.
  static constexpr int kThrottlePercent = 2;
  static constexpr int kSlowLinkKbit = 100000;
  // Host paths of the node's kernel log and fake NVML script (see above).
  std::string KernelLogPath(const std::string& instance_id) const;
  std::string FakeNvmlScriptPath(const std::string& instance_id) const;
  // Brings up every partitioned link whose end has passed; returns when the next
  // one ends (nullopt: none left). The timer thread calls it; tests with a fake
  // clock call it directly.
  std::optional<std::chrono::system_clock::time_point> RestoreExpiredPartitions() EXCLUDES(mu_);

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
    int disk_mb = 0;                  // its disk is a tmpfs of this size (0: a directory)
    int gpus = 0;                     // of its instance type; a fake NVML script when > 0
    std::string last_reboot_request;  // Reboot's request id, for idempotency
    std::string image_id;             // its software image; "" = the options' programs
    double partition_until = 0;       // epoch seconds its link comes up again; 0: not cut
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
  // Mounts the node's sized disk (if any) and writes a fresh kernel log and fake
  // NVML script on it: before every start of the node's PID 1.
  Status PrepareDisk(const Node& n);
  std::map<std::string, std::string> AgentEnv(const Node& n) const;
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
  bool network_agents() const;
  // The node's netns, veths and address (and, for network agents, its one route
  // to hpodd's agent address) on the bridge of /24 number `subnet`.
  NodeNetwork NetworkOf(const Node& n, int subnet) const;
  // What the node block holds on the host while nodes exist, the guard route last:
  // libfaketime's shared pair (fake_clock_skew_s), the service address (network
  // agents), the guard route. Only when no node remains.
  Status RemoveBlockState() REQUIRES(mu_);
  std::string SubnetBase(int k) const;  // "10.77.3." (the /24 without its last octet)
  std::string ClusterDir(const std::string& id) const;
  std::string FsxDir(const std::string& id) const;

  // node_images.cc. The store's directory of image `id`.
  std::string ImageDir(const std::string& id) const;
  // Where node `n` gets program `name` (api::SoftwareNames()) from: its image, or
  // the option's path for a node without one; "" when the option is empty.
  std::string NodeProgram(const Node& n, const std::string& name) const;
  // Deletes images no node runs, older than kImageRetention, but for the newest
  // kKeptImages.
  void CollectImages() REQUIRES(mu_);

  // local_faults.cc. `n` is one of nodes_.
  Status KillNamed(const Node& n, const std::string& name) REQUIRES(mu_);
  Status Hang(const Node& n) REQUIRES(mu_);
  Status Partition(Node& n, int seconds) REQUIRES(mu_);
  Status GpuXid(const Node& n, int xid) REQUIRES(mu_);
  void TimerLoop() EXCLUDES(mu_);
  void StartTimer();
  void StopTimer() EXCLUDES(mu_);

  const LocalProviderOptions options_;
  const std::unique_ptr<NodeHost> host_;
  const uint32_t block_;
  const int block_prefix_;

  // Serializes CurrentImage()'s copies; never held with mu_.
  mutable Mutex images_mu_;
  // CurrentImage()'s last answer, for programs of this size, time and inode.
  // Taken briefly, after mu_ when both are held (CollectImages under RemoveNode).
  mutable Mutex current_mu_;
  mutable std::string image_key_ GUARDED_BY(current_mu_);
  mutable std::string image_id_ GUARDED_BY(current_mu_);

  mutable Mutex mu_;
  int next_index_ GUARDED_BY(mu_) = 0;
  std::map<std::string, Cluster> clusters_ GUARDED_BY(mu_);
  std::map<std::string, Node> nodes_ GUARDED_BY(mu_);

  // The partition timer: wakes at the next partition end, on Partition(), or to
  // stop. Declared last: it uses everything above and is joined first.
  std::condition_variable timer_cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread timer_;
};

}  // namespace hpod::provider::local
