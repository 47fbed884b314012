#include "hpod/provider/local/local_provider.h"

#include <errno.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "hpod/api/instance_types.h"
#include "hpod/base/file_util.h"
#include "hpod/provider/local/fake_clock.h"
#include "hpod/provider/local/node_init.h"

namespace hpod::provider::local {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

constexpr int kFirstHost = 10;  // .1 is the bridge; .2-.9 stay free for services
constexpr int kLastHost = 254;
constexpr auto kKillTimeout = 10s;

// Base's atomic write (the file has exactly `mode`), reported as kInternal like
// every other host failure here: a full host disk must not read as Launch's
// kResourceExhausted, which the reconciler reports as "no capacity".
Status WriteFileAtomic(const std::string& path, const std::string& data, mode_t mode) {
  Status s = hpod::WriteFileAtomic(path, data, mode);
  return s.ok() ? s : InternalError(s.message());
}

std::optional<json> ReadJson(const fs::path& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  json j = json::parse(f, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::string HostnameFor(const std::string& ip) {
  std::string h = "ip-" + ip;
  std::replace(h.begin(), h.end(), '.', '-');
  return h;
}

}  // namespace

StatusOr<std::unique_ptr<LocalProvider>> LocalProvider::Create(LocalProviderOptions options,
                                                               std::unique_ptr<NodeHost> host) {
  if (options.state_dir.empty()) return InvalidArgumentError("local provider: state_dir is empty");
  if (options.link_prefix.empty() || options.link_prefix.size() > 4) {
    return InvalidArgumentError("local provider: link_prefix must be 1-4 characters");
  }
  auto cidr = ParseCidr(options.node_block);
  if (!cidr) {
    return InvalidArgumentError("node block " + options.node_block +
                                " is not an IPv4 network in CIDR form (e.g. 10.77.0.0/16)");
  }
  if (cidr->second > 24 || cidr->second < 8) {
    return InvalidArgumentError("node block " + options.node_block +
                                " must have a prefix length between /8 and /24 (each cluster "
                                "takes a /24)");
  }
  // Before anything else touches the network: refuse a block the host already
  // routes, then guard it.
  HPOD_ASSIGN_OR_RETURN(std::vector<std::string> routes, host->ListRoutes());
  auto overlaps = OverlappingRoutes(routes, cidr->first, cidr->second, options.link_prefix);
  if (!overlaps.empty()) {
    return FailedPreconditionError("node block " + options.node_block + " overlaps host route " +
                                   overlaps[0] + "; choose another with --node-block");
  }
  HPOD_RETURN_IF_ERROR(host->AddGuardRoute(options.node_block));
  if (options.agent_transport == LocalProviderOptions::AgentTransport::kTls) {
    const std::string service = AgentServiceAddress(options.node_block);
    if (service.empty()) {
      return InvalidArgumentError("node block " + options.node_block +
                                  " is one /24; network agents need a larger block (its last "
                                  "/24 holds hpodd's agent address)");
    }
    // Behind the guard: only the nodes, through their bridges, reach it.
    HPOD_RETURN_IF_ERROR(host->AddServiceAddress(service + "/32"));
    options.agent_endpoint = "https://" + service + ":" + std::to_string(options.agent_port);
  }
  if (!options.fake_clock_skew_s.empty()) {
    HPOD_RETURN_IF_ERROR(CheckFakeClockSkews(options.fake_clock_skew_s, options.faketime_library));
    HPOD_RETURN_IF_ERROR(EnsureFakeClockShared(options.link_prefix));
  }
  if (options.node_disk_mb < 0) {
    return InvalidArgumentError("local provider: node_disk_mb must be 0 (no sized disk) or more");
  }
  if (!options.spank_plugin.empty() && !fs::exists(options.spank_plugin)) {
    return InvalidArgumentError("SPANK plugin " + options.spank_plugin +
                                " does not exist (build the spank_hpod target)");
  }
  if (!options.fake_nvml_library.empty() && !fs::exists(options.fake_nvml_library)) {
    return InvalidArgumentError("fake NVML library " + options.fake_nvml_library +
                                " does not exist (build the hpod_fake_nvml target)");
  }
  if (options.clock == nullptr) options.clock = &RealClock::Get();
  if (options.fsx_root.empty()) options.fsx_root = options.state_dir + "/fsx";
  std::error_code ec;
  for (const char* sub : {"clusters", "nodes"}) {
    fs::create_directories(fs::path(options.state_dir) / sub, ec);
    if (ec) return InternalError("creating " + options.state_dir + ": " + ec.message());
  }
  fs::create_directories(options.fsx_root, ec);
  std::unique_ptr<LocalProvider> p(
      new LocalProvider(std::move(options), std::move(host), cidr->first, cidr->second));
  HPOD_RETURN_IF_ERROR(p->Load());
  // Partitions that ended while hpodd was down end now; the rest on the timer.
  p->RestoreExpiredPartitions();
  p->StartTimer();
  return p;
}

LocalProvider::LocalProvider(LocalProviderOptions options, std::unique_ptr<NodeHost> host,
                             uint32_t block, int block_prefix)
    : options_(std::move(options)),
      host_(std::move(host)),
      block_(block),
      block_prefix_(block_prefix) {}

std::string LocalProvider::NetnsName(int n) const {
  return options_.link_prefix + "n" + std::to_string(n);
}
std::string LocalProvider::VethHost(int n) const {
  return options_.link_prefix + "v" + std::to_string(n) + "h";
}
std::string LocalProvider::VethNode(int n) const {
  return options_.link_prefix + "v" + std::to_string(n) + "c";
}
std::string LocalProvider::BridgeName(int k) const {
  return options_.link_prefix + "br" + std::to_string(k);
}
std::string LocalProvider::SubnetBase(int k) const {
  std::string s = FormatIpv4(block_ + (static_cast<uint32_t>(k) << 8));
  return s.substr(0, s.rfind('.') + 1);
}
std::string LocalProvider::ClusterDir(const std::string& id) const {
  return options_.state_dir + "/clusters/" + id;
}
std::string LocalProvider::FsxDir(const std::string& id) const {
  return options_.fsx_root + "/" + id;
}
std::string LocalProvider::NodeDir(const std::string& id) const {
  return options_.state_dir + "/nodes/" + id;
}
std::string LocalProvider::KernelLogPath(const std::string& id) const {
  return NodeDir(id) + "/disk/state/kmsg";
}
std::string LocalProvider::FakeNvmlScriptPath(const std::string& id) const {
  return NodeDir(id) + "/disk/state/fake-nvml.json";
}

Status LocalProvider::Load() {
  MutexLock lock(mu_);
  if (auto j = ReadJson(fs::path(options_.state_dir) / "provider.json")) {
    next_index_ = j->value("next_node_index", 0);
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(options_.state_dir + "/clusters", ec)) {
    auto j = ReadJson(e.path() / "cluster.json");
    if (!j) continue;
    Cluster c{j->value("cluster_id", ""), j->value("subnet", 0)};
    if (!c.id.empty()) clusters_[c.id] = c;
  }
  for (const auto& e : fs::directory_iterator(options_.state_dir + "/nodes", ec)) {
    auto j = ReadJson(e.path() / "node.json");
    if (!j) continue;
    Node n;
    n.instance_id = j->value("instance_id", "");
    n.cluster_id = j->value("cluster_id", "");
    n.cluster_name = j->value("cluster_name", "");
    n.group_name = j->value("group_name", "");
    n.instance_name = j->value("instance_name", "");
    n.instance_type = j->value("instance_type", "");
    n.ip = j->value("ip", "");
    n.hostname = j->value("hostname", "");
    n.index = j->value("index", 0);
    n.process.pid = j->value("pid", 0);
    n.process.start_time = j->value("pid_start_time", uint64_t{0});
    n.disk_mb = j->value("disk_mb", 0);
    n.gpus = j->value("gpus", 0);
    n.last_reboot_request = j->value("last_reboot_request", "");
    n.image_id = j->value("image_id", "");
    n.partition_until = j->value("partition_until", 0.0);
    if (n.instance_id.empty() || !clusters_.count(n.cluster_id)) continue;
    // Adopt a node whose PID 1 (same pid, same start time) still runs; never kill it.
    n.vanished = !host_->IsAlive(n.process) || !host_->NetnsExists(NetnsName(n.index));
    if (n.vanished) {
      spdlog::warn("local provider: node {} ({}) did not survive: its namespaces vanished",
                   n.instance_id, n.hostname);
    } else {
      spdlog::info("local provider: adopted node {} ({}, pid {})", n.instance_id, n.hostname,
                   n.process.pid);
    }
    next_index_ = std::max(next_index_, n.index + 1);
    nodes_[n.instance_id] = n;
  }
  // In-place writes are not atomic: repair a hosts file a crash cut short. One
  // whose content is right is left alone (WriteHosts), so a restart rewrites none.
  std::set<std::string> with_nodes;
  for (const auto& [id, n] : nodes_) with_nodes.insert(n.cluster_id);
  for (const auto& id : with_nodes) {
    Status s = WriteHosts(id);
    if (!s.ok()) spdlog::warn("local provider: {}", s.ToString());
  }
  return OkStatus();
}

Status LocalProvider::WriteHosts(const std::string& cluster_id) {
  std::vector<std::pair<uint32_t, std::string>> lines;
  for (const auto& [id, n] : nodes_) {
    if (n.cluster_id == cluster_id) lines.emplace_back(ParseIpv4(n.ip).value_or(0), n.hostname);
  }
  std::sort(lines.begin(), lines.end());
  std::string out = "127.0.0.1 localhost\n";
  for (const auto& [ip, host] : lines) out += FormatIpv4(ip) + " " + host + "\n";
  // Unchanged content is not rewritten: every node reads this file through its
  // bind mount, and a replacement with the same name and address changes nothing.
  const std::string path = ClusterDir(cluster_id) + "/hosts";
  StatusOr<std::string> current = hpod::ReadFile(path);
  if (current.ok() && *current == out) return OkStatus();
  return WriteFileInPlace(path, out);
}

StatusOr<LocalProvider::Cluster*> LocalProvider::EnsureCluster(const std::string& cluster_id,
                                                               const std::string& want_ip) {
  auto it = clusters_.find(cluster_id);
  if (it == clusters_.end()) {
    std::set<int> used;
    for (const auto& [id, c] : clusters_) used.insert(c.subnet);
    int count = 1 << (24 - block_prefix_);
    if (network_agents()) --count;  // the last /24 holds hpodd's agent address
    int k = -1;
    // A replacement for the only node of a cluster (whose /24 was freed) gets its
    // old /24 back when it is free.
    if (auto ip = ParseIpv4(want_ip)) {
      uint32_t mask = block_prefix_ == 0 ? 0 : ~uint32_t{0} << (32 - block_prefix_);
      int want = static_cast<int>((*ip - block_) >> 8);
      if ((*ip & mask) == block_ && want < count && !used.count(want)) k = want;
    }
    for (int i = 0; k < 0 && i < count; ++i) {
      if (!used.count(i)) k = i;
    }
    if (k < 0) {
      return ResourceExhaustedError("node block " + options_.node_block +
                                    " has no free /24 for another cluster");
    }
    Cluster c{cluster_id, k};
    HPOD_RETURN_IF_ERROR(SaveCluster(c));
    it = clusters_.emplace(cluster_id, c).first;
    std::error_code ec;
    fs::create_directories(FsxDir(cluster_id), ec);
    if (ec) return InternalError("creating " + FsxDir(cluster_id) + ": " + ec.message());
  }
  // Idempotent: a bridge lost to a host reboot comes back on the next launch.
  HPOD_RETURN_IF_ERROR(
      host_->CreateBridge(BridgeName(it->second.subnet), SubnetBase(it->second.subnet) + "1/24"));
  return &it->second;
}

StatusOr<std::string> LocalProvider::AllocateIp(const Cluster& c, const std::string& requested) {
  std::set<std::string> used;
  for (const auto& [id, n] : nodes_) {
    if (n.cluster_id == c.id) used.insert(n.ip);
  }
  std::string base = SubnetBase(c.subnet);
  if (!requested.empty()) {
    auto a = ParseIpv4(requested);
    auto b = ParseIpv4(base + "0");
    int host = a ? static_cast<int>(*a & 255) : -1;
    if (!a || (*a & ~uint32_t{255}) != *b || host < kFirstHost || host > kLastHost) {
      return InvalidArgumentError("private ip " + requested + " is not a node address of " + base +
                                  "0/24 (." + std::to_string(kFirstHost) + "-." +
                                  std::to_string(kLastHost) + ")");
    }
    if (used.count(requested)) {
      return InvalidArgumentError("private ip " + requested + " is in use by another node");
    }
    return requested;
  }
  for (int h = kFirstHost; h <= kLastHost; ++h) {
    std::string ip = base + std::to_string(h);
    if (!used.count(ip)) return ip;
  }
  return ResourceExhaustedError("cluster " + c.id + " has no free address in " + base + "0/24");
}

Status LocalProvider::WriteNodeFiles(const Node& n, const LaunchSpec& spec) {
  std::string dir = NodeDir(n.instance_id);
  std::error_code ec;
  fs::create_directories(dir + "/disk", ec);
  if (ec) return InternalError("creating " + dir + ": " + ec.message());
  std::string endpoint = options_.agent_endpoint;
  std::string socket_dir;
  const std::string kUnix = "unix://";
  if (endpoint.rfind(kUnix, 0) == 0) {
    fs::path sock(endpoint.substr(kUnix.size()));
    socket_dir = sock.parent_path().string();
    endpoint = kUnix + kAgentSocketDirInNode + "/" + sock.filename().string();
  }
  json agent = {{"instance_id", n.instance_id},
                {"cluster_id", n.cluster_id},
                {"endpoint", endpoint},
                {"state_dir", kAgentStateDir},
                {"hostname", n.hostname},
                {"private_ip", n.ip},
                // In the node's private /run (node_init.cc), where srun finds it.
                {"local_socket", "/run/hpod-agent/agent.sock"},
                // PID 1 is node-init: the agent answers for the node's units
                // (docs/systemctl.md); it checks for a root of the node's own.
                {"systemctl", true}};
  if (network_agents()) {
    // A machine of its own: it joins with its launch's token and its own machine
    // id (PrepareDisk writes it on its disk).
    agent["join_token"] = spec.bootstrap_token;
    agent["machine_id_file"] = std::string(kAgentStateDir) + "/machine-id";
  } else {
    agent["bootstrap_token"] = spec.bootstrap_token;
  }
  HPOD_RETURN_IF_ERROR(WriteFileAtomic(dir + "/agent.json", agent.dump(2), 0600));
  NodeInitConfig init;
  init.hostname = n.hostname;
  init.log_file = dir + "/node-init.log";
  init.hosts_file = ClusterDir(n.cluster_id) + "/hosts";
  init.fsx_dir = FsxDir(n.cluster_id);
  init.agent_socket_dir = socket_dir;
  init.node_disk = dir + "/disk";
  init.agent_config = dir + "/agent.json";
  init.program = options_.node_program;
  if (init.program.empty()) {
    init.program = {NodeProgram(n, "hpod-agent"), "--config", kAgentConfigInNode};
  }
  init.env = AgentEnv(n);
  return WriteFileAtomic(dir + "/node-init.json", NodeInitConfigToJson(init).dump(2), 0644);
}

Status LocalProvider::Spawn(Node& n) {
  NodeSpawn s;
  s.netns = NetnsName(n.index);
  s.init_binary = options_.node_init_binary;
  s.config_path = NodeDir(n.instance_id) + "/node-init.json";
  s.log_path = NodeDir(n.instance_id) + "/node-init.log";
  s.hostname = n.hostname;
  HPOD_RETURN_IF_ERROR(PrepareDisk(n));
  HPOD_ASSIGN_OR_RETURN(n.process, host_->SpawnNode(s));
  n.vanished = false;
  n.ready = false;
  return SaveNode(n);
}

LocalProvider::~LocalProvider() {
  StopTimer();
  // Nothing of ours is left that the guard protects once the last node is gone.
  Status s = Shutdown(/*remove_guard=*/true);
  if (!s.ok()) spdlog::warn("local provider shutdown: {}", s.ToString());
}

Status LocalProvider::Launch(const LaunchSpec& spec) {
  if (spec.instance_id.empty() || spec.cluster_id.empty() ||
      spec.instance_id.find('/') != std::string::npos ||
      spec.cluster_id.find('/') != std::string::npos || spec.instance_id[0] == '.' ||
      spec.cluster_id[0] == '.') {
    return InvalidArgumentError("local provider: bad instance or cluster id");
  }
  std::string image = spec.image_id;
  if (image.empty()) {
    HPOD_ASSIGN_OR_RETURN(image, CurrentImage());  // before mu_: it may copy the programs
  } else if (!HasImage(image)) {
    return InvalidArgumentError("software image " + image + " is not in the image store (" +
                                ImageDir(image) + ")");
  }
  MutexLock lock(mu_);
  if (nodes_.count(spec.instance_id)) return OkStatus();  // idempotent
  // Again under mu_: CollectImages (under mu_) may have taken it meanwhile.
  if (!image.empty() && !HasImage(image)) return UnavailableError("image " + image + " went");
  HPOD_ASSIGN_OR_RETURN(Cluster * cluster, EnsureCluster(spec.cluster_id, spec.private_ip));
  auto release_cluster_if_empty = [&]() REQUIRES(mu_) {
    for (const auto& [id, n] : nodes_) {
      if (n.cluster_id == spec.cluster_id) return;
    }
    Status s = host_->DeleteBridge(BridgeName(cluster->subnet));
    if (!s.ok()) spdlog::warn("local provider: {}", s.ToString());
    std::error_code ec;
    fs::remove_all(ClusterDir(spec.cluster_id), ec);
    clusters_.erase(spec.cluster_id);
  };
  auto ip = AllocateIp(*cluster, spec.private_ip);
  if (!ip.ok()) {
    release_cluster_if_empty();
    return ip.status();
  }
  Node n;
  n.instance_id = spec.instance_id;
  n.cluster_id = spec.cluster_id;
  n.cluster_name = spec.cluster_name;
  n.group_name = spec.group_name;
  n.instance_name = spec.instance_name;
  n.instance_type = spec.instance_type;
  n.ip = *ip;
  n.hostname = HostnameFor(*ip);
  n.index = next_index_++;
  n.disk_mb = options_.node_disk_mb;
  n.image_id = image;
  if (auto type = api::LookupInstanceType(spec.instance_type)) n.gpus = type->gpus;
  SaveProvider();

  // Recorded before any side effect, so a failure anywhere below is undone by the
  // same RemoveNode that Terminate uses.
  nodes_[n.instance_id] = n;
  Status s = WriteNodeFiles(n, spec);
  if (s.ok()) s = SaveNode(n);
  if (s.ok()) s = WriteHosts(n.cluster_id);
  if (s.ok()) {
    s = host_->CreateNodeNetwork(NetworkOf(n, cluster->subnet));
  }
  if (s.ok()) s = Spawn(nodes_[n.instance_id]);
  if (!s.ok()) {
    spdlog::warn("local provider: launching {} failed: {}", n.instance_id, s.ToString());
    Status undo = RemoveNode(n.instance_id);
    if (!undo.ok()) spdlog::warn("local provider: cleaning up: {}", undo.ToString());
    return s;
  }
  spdlog::info("local provider: launched {} as {} ({}, pid {})", n.instance_id, n.hostname,
               NetnsName(n.index), nodes_[n.instance_id].process.pid);
  return OkStatus();
}

Status LocalProvider::RemoveNode(const std::string& instance_id) {
  auto it = nodes_.find(instance_id);
  if (it == nodes_.end()) return OkStatus();
  const Node n = it->second;
  // PID 1 first: its death takes every process of the node's pid namespace.
  HPOD_RETURN_IF_ERROR(host_->Kill(n.process, kKillTimeout));
  HPOD_RETURN_IF_ERROR(host_->DeleteNodeNetwork(NetnsName(n.index), VethHost(n.index)));
  // A cpu-throttle fault's cgroup, empty now (a no-op when there is none).
  if (Status s = host_->RemoveCpuThrottle(CpuThrottleName(instance_id)); !s.ok()) {
    spdlog::warn("local provider: {}", s.ToString());
  }
  if (n.disk_mb > 0) HPOD_RETURN_IF_ERROR(host_->UnmountDisk(NodeDir(instance_id) + "/disk"));
  std::error_code ec;
  fs::remove_all(NodeDir(instance_id), ec);
  if (ec) return InternalError("removing " + NodeDir(instance_id) + ": " + ec.message());
  nodes_.erase(it);
  CollectImages();
  bool cluster_empty = std::none_of(nodes_.begin(), nodes_.end(), [&](const auto& kv) {
    return kv.second.cluster_id == n.cluster_id;
  });
  auto c = clusters_.find(n.cluster_id);
  if (!cluster_empty) return WriteHosts(n.cluster_id);
  if (c != clusters_.end()) {
    HPOD_RETURN_IF_ERROR(host_->DeleteBridge(BridgeName(c->second.subnet)));
    clusters_.erase(c);
  }
  fs::remove_all(ClusterDir(n.cluster_id), ec);
  return OkStatus();
}

Status LocalProvider::Terminate(const std::string& instance_id) {
  MutexLock lock(mu_);
  if (!nodes_.count(instance_id)) return OkStatus();
  Status s = RemoveNode(instance_id);
  if (s.ok()) spdlog::info("local provider: terminated {}", instance_id);
  return s;
}

StatusOr<NodeObservation> LocalProvider::Describe(const std::string& instance_id) {
  MutexLock lock(mu_);
  auto it = nodes_.find(instance_id);
  if (it == nodes_.end()) return NotFoundError("local provider has no node " + instance_id);
  Node& n = it->second;
  NodeObservation o;
  o.private_ip = n.ip;
  o.hostname = n.hostname;
  if (n.vanished) {
    o.state = NodeState::kFailed;
    o.message = "node " + instance_id + " failed: its namespaces vanished (first process pid " +
                std::to_string(n.process.pid) + " was gone when hpodd started)";
    return o;
  }
  if (!host_->IsAlive(n.process)) {
    o.state = NodeState::kFailed;
    o.message = "node " + instance_id + " stopped: its first process (pid " +
                std::to_string(n.process.pid) + ") exited";
    return o;
  }
  if (!host_->NetnsExists(NetnsName(n.index))) {
    o.state = NodeState::kFailed;
    o.message = "node " + instance_id + " failed: its network namespace " + NetnsName(n.index) +
                " vanished";
    return o;
  }
  if (!n.ready) n.ready = host_->HostnameOf(n.process) == n.hostname;
  o.state = n.ready ? NodeState::kRunning : NodeState::kPending;
  return o;
}

StatusOr<std::vector<std::string>> LocalProvider::List(const std::string& cluster_id) {
  MutexLock lock(mu_);
  std::vector<std::string> ids;
  for (const auto& [id, n] : nodes_) {
    if (n.cluster_id == cluster_id) ids.push_back(id);
  }
  return ids;
}

Status LocalProvider::Reboot(const std::string& instance_id, const std::string& request_id) {
  MutexLock lock(mu_);
  auto it = nodes_.find(instance_id);
  if (it == nodes_.end()) return NotFoundError("local provider has no node " + instance_id);
  Node& n = it->second;
  if (!request_id.empty() && request_id == n.last_reboot_request) {
    spdlog::info("local provider: {} already rebooted for request {}", instance_id, request_id);
    return OkStatus();
  }
  HPOD_RETURN_IF_ERROR(host_->Kill(n.process, kKillTimeout));
  auto c = clusters_.find(n.cluster_id);
  if (c == clusters_.end()) return InternalError("node " + instance_id + " has no cluster");
  // After a host reboot the bridge and netns are gone too; bring them back.
  HPOD_RETURN_IF_ERROR(
      host_->CreateBridge(BridgeName(c->second.subnet), SubnetBase(c->second.subnet) + "1/24"));
  if (!host_->NetnsExists(NetnsName(n.index))) {
    HPOD_RETURN_IF_ERROR(host_->CreateNodeNetwork(NetworkOf(n, c->second.subnet)));
    n.partition_until = 0;  // a fresh veth is up
  }
  // Recorded by Spawn's SaveNode together with the new PID 1: a crash before it
  // leaves the old id, and a repeated call reboots (the node was killed anyway).
  const std::string previous = n.last_reboot_request;
  n.last_reboot_request = request_id;
  if (Status s = Spawn(n); !s.ok()) {
    n.last_reboot_request = previous;  // not rebooted: a retry must try again
    return s;
  }
  spdlog::info("local provider: rebooted {} (pid {})", instance_id, n.process.pid);
  return OkStatus();
}

Status LocalProvider::Shutdown(bool remove_guard) {
  MutexLock lock(mu_);
  if (remove_guard && nodes_.empty()) return RemoveBlockState();
  return OkStatus();
}

Status LocalProvider::DestroyAll() {
  MutexLock lock(mu_);
  std::vector<std::string> ids;
  for (const auto& [id, n] : nodes_) ids.push_back(id);
  Status first;
  for (const auto& id : ids) {
    Status s = RemoveNode(id);
    if (!s.ok() && first.ok()) first = s;
  }
  if (!first.ok()) return first;
  return RemoveBlockState();
}

Status LocalProvider::RemoveBlockState() {
  if (!options_.fake_clock_skew_s.empty()) RemoveFakeClockShared(options_.link_prefix);
  if (network_agents()) {
    HPOD_RETURN_IF_ERROR(
        host_->DeleteServiceAddress(AgentServiceAddress(options_.node_block) + "/32"));
  }
  return host_->DeleteGuardRoute(options_.node_block);
}

std::optional<ProcessId> LocalProvider::NodeProcess(const std::string& instance_id) const {
  MutexLock lock(mu_);
  auto it = nodes_.find(instance_id);
  if (it == nodes_.end()) return std::nullopt;
  return it->second.process;
}

}  // namespace hpod::provider::local
