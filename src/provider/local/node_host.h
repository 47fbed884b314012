#pragma once

// NodeHost: the outside world of the local provider — host routes, bridges, veth
// pairs, network namespaces and the process that is a node's PID 1. The provider
// decides names and addresses; a NodeHost only carries them out, so unit tests run
// the provider against FakeNodeHost and assert the actions it asked for (the guard
// route before any bridge), while RealNodeHost drives `ip`, `nsenter` and `unshare`.
//
// Every method is idempotent where the world allows it (creating what exists or
// deleting what is gone succeeds), because the provider repeats calls after a
// crash.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/base/thread_annotations.h"

namespace hpod {
class Subprocess;
}

namespace hpod::provider::local {

// A process identified so that pid reuse cannot fool us: the kernel's start time
// (clock ticks since boot, /proc/<pid>/stat field 22) goes with the pid.
struct ProcessId {
  pid_t pid = 0;
  uint64_t start_time = 0;
  bool operator==(const ProcessId&) const = default;
};

struct NodeNetwork {
  std::string netns;      // "hpn3" (a file under /run/netns)
  std::string veth_host;  // "hpv3h", enslaved to the bridge
  std::string veth_node;  // "hpv3c", renamed eth0 inside the netns
  std::string bridge;     // "hpbr0"
  std::string address;    // "10.77.0.12/24" for the node's eth0
  // Network agents (LocalProviderOptions::agent_transport): hpodd's agent service
  // address ("10.77.255.254") reached through `via` (the bridge's gateway,
  // "10.77.0.1"): one host route in the netns, and no other way out.
  std::string service_address;
  std::string via;
};

// The MAC of a node's eth0: locally administered, and a function of its IP
// ("10.77.0.12/24" or "10.77.0.12") only. A replacement keeps its predecessor's
// address, and so its MAC: the other nodes' neighbour entries stay right. With a
// random MAC, a peer that had just talked to the lost node (a job's other rank)
// kept sending to the old MAC for up to half a minute, and the retried step's
// launch on the replacement failed ("Communication connection failure").
std::string NodeMac(const std::string& address);

// The `ip` commands (argv without "ip") that let a node find its own address the
// usual ways — a UDP connect() to an outside address then getsockname() (AWS's
// lifecycle_script.py), `ip route get 1.1.1.1` — while no packet for an outside
// address can leave the node: the default route is the node's own loopback (a
// packet sent there comes back in and is dropped, forwarding being off), and TCP
// and DNS to addresses no specific route covers are refused at once (ENETUNREACH),
// so apt, pip or curl fail fast instead of waiting out their timeouts. Routes
// more specific than the default (the node's subnet, the route to hpodd) win.
std::vector<std::vector<std::string>> AddressLookupRoutes(const NodeNetwork& net);

// One process of a node, as the host sees it.
struct NodeProcessInfo {
  ProcessId id;
  std::string name;  // /proc/<pid>/comm ("slurmd"; at most 15 characters)
  std::string exe;   // file name of /proc/<pid>/exe ("hpod-agent"); empty if unreadable
};

struct NodeSpawn {
  std::string netns;        // joined with nsenter --net=/run/netns/<netns>
  std::string init_binary;  // hpod-node-init
  std::string config_path;  // its --config
  std::string log_path;     // nsenter/unshare/node-init stdout+stderr (appended)
  std::string hostname;     // what PID 1 sets; Spawn does not wait for it
};

class NodeHost {
 public:
  virtual ~NodeHost() = default;

  // The main routing table, one route per entry as `ip -4 route show` prints it
  // ("default via 10.0.2.2 dev eth0", "10.0.2.0/24 dev eth0 proto kernel ...").
  virtual StatusOr<std::vector<std::string>> ListRoutes() = 0;
  // `ip route replace unreachable <cidr>` / its removal.
  virtual Status AddGuardRoute(const std::string& cidr) = 0;
  virtual Status DeleteGuardRoute(const std::string& cidr) = 0;

  // `ip addr replace <cidr> dev lo` / its removal: the address hpodd's network
  // agent listener binds, inside the guarded node block, reached only by nodes.
  virtual Status AddServiceAddress(const std::string& cidr) = 0;
  virtual Status DeleteServiceAddress(const std::string& cidr) = 0;

  // A bridge with `gateway` ("10.77.0.1/24") as its address, up.
  virtual Status CreateBridge(const std::string& name, const std::string& gateway) = 0;
  virtual Status DeleteBridge(const std::string& name) = 0;

  // Netns + veth pair (node end renamed eth0 with the address, lo and eth0 up;
  // host end on the bridge, up). Replaces leftovers of the same names.
  virtual Status CreateNodeNetwork(const NodeNetwork& net) = 0;
  // Deletes the netns (which destroys the veth) and the host end if it is left.
  virtual Status DeleteNodeNetwork(const std::string& netns, const std::string& veth_host) = 0;
  virtual bool NetnsExists(const std::string& netns) = 0;

  // Starts a node's process tree in fresh uts/mount/pid(/time) namespaces inside
  // the netns and returns its PID 1 (as the host sees it) once it exists. The
  // node outlives this object and the provider.
  virtual StatusOr<ProcessId> SpawnNode(const NodeSpawn& spawn) = 0;
  // True when the process runs (not a zombie) and is the one we started.
  virtual bool IsAlive(const ProcessId& id) = 0;
  // SIGKILL, then waits (up to `timeout`) until it is gone; OK if already gone.
  virtual Status Kill(const ProcessId& id, std::chrono::milliseconds timeout) = 0;
  // The hostname in the process's UTS namespace; empty when it cannot be read.
  virtual std::string HostnameOf(const ProcessId& id) = 0;

  // Fault injection and sized node disks (hpod inject-fault; see local_faults.cc).
  //
  // Every live process in the pid namespace whose PID 1 is `pid1` (same
  // /proc/<pid>/ns/pid inode), PID 1 first. Empty when `pid1` is gone.
  virtual StatusOr<std::vector<NodeProcessInfo>> NodeProcesses(const ProcessId& pid1) = 0;
  // Sends `signal` to `id` if it is still that process (pid and start time); OK
  // when it is gone.
  virtual Status Signal(const ProcessId& id, int signal) = 0;
  // `ip link set <link> up|down`.
  virtual Status SetLinkUp(const std::string& link, bool up) = 0;
  // Mounts a tmpfs of `size_mb` MiB on the existing directory `dir`; OK when one is
  // mounted there already (an adopted node keeps its disk and its data).
  virtual Status MountDisk(const std::string& dir, int size_mb) = 0;
  // Unmounts `dir`, lazily when it is busy; OK when nothing is mounted there.
  virtual Status UnmountDisk(const std::string& dir) = 0;
  // Writes <dir>/hpod-disk-full until the filesystem has no block left (ENOSPC).
  // Only ever called on a sized (tmpfs) disk, never on the host's own disk.
  virtual Status FillDisk(const std::string& dir) = 0;
  // Runs argv (found in the node's filesystem) in `pid1`'s mount namespace, and
  // only that one, so it sees the node's private /run; kInternal if it fails.
  virtual Status RunInNodeMounts(const ProcessId& pid1, const std::vector<std::string>& argv) = 0;
  // Moves every process of the node into a CPU cgroup `name` of its own held to
  // `percent` of one CPU (cgroup v2's cpu.max, else v1's cpu controller); what
  // they start later inherits it.
  virtual Status ThrottleCpu(const ProcessId& pid1, const std::string& name, int percent) = 0;
  // Removes that cgroup once its processes are gone; OK when there is none.
  virtual Status RemoveCpuThrottle(const std::string& name) = 0;
  // Shapes what leaves `dev` in `netns` to `kbit` kbit/s (tc's tbf as the root
  // qdisc; it goes with the netns).
  virtual Status ShapeEgress(const std::string& netns, const std::string& dev, int kbit) = 0;
};

// Thread contract: safe for concurrent calls (the provider serializes anyway).
class RealNodeHost final : public NodeHost {
 public:
  RealNodeHost();
  ~RealNodeHost() override;

  StatusOr<std::vector<std::string>> ListRoutes() override;
  Status AddGuardRoute(const std::string& cidr) override;
  Status DeleteGuardRoute(const std::string& cidr) override;
  Status AddServiceAddress(const std::string& cidr) override;
  Status DeleteServiceAddress(const std::string& cidr) override;
  Status CreateBridge(const std::string& name, const std::string& gateway) override;
  Status DeleteBridge(const std::string& name) override;
  Status CreateNodeNetwork(const NodeNetwork& net) override;
  Status DeleteNodeNetwork(const std::string& netns, const std::string& veth_host) override;
  bool NetnsExists(const std::string& netns) override;
  StatusOr<ProcessId> SpawnNode(const NodeSpawn& spawn) override;
  bool IsAlive(const ProcessId& id) override;
  Status Kill(const ProcessId& id, std::chrono::milliseconds timeout) override;
  std::string HostnameOf(const ProcessId& id) override;
  StatusOr<std::vector<NodeProcessInfo>> NodeProcesses(const ProcessId& pid1) override;
  Status Signal(const ProcessId& id, int signal) override;
  Status SetLinkUp(const std::string& link, bool up) override;
  Status MountDisk(const std::string& dir, int size_mb) override;
  Status UnmountDisk(const std::string& dir) override;
  Status FillDisk(const std::string& dir) override;
  Status RunInNodeMounts(const ProcessId& pid1, const std::vector<std::string>& argv) override;
  Status ThrottleCpu(const ProcessId& pid1, const std::string& name, int percent) override;
  Status RemoveCpuThrottle(const std::string& name) override;
  Status ShapeEgress(const std::string& netns, const std::string& dev, int kbit) override;

  // /proc/<pid>/stat start time; nullopt when the pid does not exist or is a zombie.
  static std::optional<uint64_t> StartTimeOf(pid_t pid);

 private:
  void ReapExited() EXCLUDES(mu_);

  Mutex mu_;
  // Set by the constructor, constant afterwards.
  bool time_ns_ = false;  // unshare --time works here (kernel >= 5.6, util-linux >= 2.36)
  // The unshare processes we started (the node PID 1's parents), reaped once they
  // exit; released (never killed) when we go.
  std::vector<std::unique_ptr<Subprocess>> holders_ GUARDED_BY(mu_);
};

// Records every call; networks, processes and mounts exist only in memory.
// Processes stay alive until Kill(), SimulateDeath() or Signal(SIGKILL); killing a
// PID 1 takes its node's other processes with it. FillDisk and RunInNodeMounts
// only record the call.
//
// Thread contract: safe for concurrent use.
class FakeNodeHost final : public NodeHost {
 public:
  StatusOr<std::vector<std::string>> ListRoutes() override;
  Status AddGuardRoute(const std::string& cidr) override;
  Status DeleteGuardRoute(const std::string& cidr) override;
  Status AddServiceAddress(const std::string& cidr) override;
  Status DeleteServiceAddress(const std::string& cidr) override;
  Status CreateBridge(const std::string& name, const std::string& gateway) override;
  Status DeleteBridge(const std::string& name) override;
  Status CreateNodeNetwork(const NodeNetwork& net) override;
  Status DeleteNodeNetwork(const std::string& netns, const std::string& veth_host) override;
  bool NetnsExists(const std::string& netns) override;
  StatusOr<ProcessId> SpawnNode(const NodeSpawn& spawn) override;
  bool IsAlive(const ProcessId& id) override;
  Status Kill(const ProcessId& id, std::chrono::milliseconds timeout) override;
  std::string HostnameOf(const ProcessId& id) override;
  StatusOr<std::vector<NodeProcessInfo>> NodeProcesses(const ProcessId& pid1) override;
  Status Signal(const ProcessId& id, int signal) override;
  Status SetLinkUp(const std::string& link, bool up) override;
  Status MountDisk(const std::string& dir, int size_mb) override;
  Status UnmountDisk(const std::string& dir) override;
  Status FillDisk(const std::string& dir) override;
  Status RunInNodeMounts(const ProcessId& pid1, const std::vector<std::string>& argv) override;
  Status ThrottleCpu(const ProcessId& pid1, const std::string& name, int percent) override;
  Status RemoveCpuThrottle(const std::string& name) override;
  Status ShapeEgress(const std::string& netns, const std::string& dev, int kbit) override;

  // Test controls and observations.
  void SetRoutes(std::vector<std::string> routes);
  std::vector<std::string> calls() const;  // "AddGuardRoute 10.77.0.0/16", ...
  void ClearCalls();
  void SimulateDeath(pid_t pid);
  void RemoveNetns(const std::string& netns);  // as a host reboot would
  void FailNextSpawn();
  // While false, spawned nodes report an empty hostname (PID 1 not yet set up).
  void SetHostnamesReady(bool ready);
  std::set<std::string> bridges() const;
  std::set<std::string> netns() const;
  std::vector<NodeSpawn> spawns() const;
  size_t live_processes() const;
  // Adds a process to a node (as if PID 1 `pid1` had started it).
  ProcessId AddNodeProcess(pid_t pid1, const std::string& name);
  // Signals sent with Signal(), by pid: the last one wins (SIGKILL removes it).
  std::map<pid_t, int> signals() const;
  std::set<std::string> links_down() const;
  std::map<std::string, int> mounted_disks() const;  // dir -> size_mb

 private:
  mutable Mutex mu_;
  std::vector<std::string> calls_ GUARDED_BY(mu_);
  std::vector<std::string> routes_ GUARDED_BY(mu_);
  std::set<std::string> guards_ GUARDED_BY(mu_);
  std::set<std::string> bridges_ GUARDED_BY(mu_);
  std::set<std::string> netns_ GUARDED_BY(mu_);
  std::map<std::string, std::string> bridge_gateways_ GUARDED_BY(mu_);
  // pid -> (id, hostname)
  std::map<pid_t, std::pair<ProcessId, std::string>> processes_ GUARDED_BY(mu_);
  // Processes of nodes other than their PID 1: pid -> (PID 1's pid, info).
  std::map<pid_t, std::pair<pid_t, NodeProcessInfo>> node_processes_ GUARDED_BY(mu_);
  std::map<pid_t, int> signals_ GUARDED_BY(mu_);
  std::set<std::string> links_down_ GUARDED_BY(mu_);
  std::map<std::string, int> mounted_disks_ GUARDED_BY(mu_);
  std::vector<NodeSpawn> spawns_ GUARDED_BY(mu_);
  pid_t next_pid_ GUARDED_BY(mu_) = 1000;
  bool fail_next_spawn_ GUARDED_BY(mu_) = false;
  bool hostnames_ready_ GUARDED_BY(mu_) = true;
};

}  // namespace hpod::provider::local
