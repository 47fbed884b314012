#include "hpod/controlplane/pool_provider.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "hpod/api/states.h"
#include "hpod/base/subprocess.h"
#include "hpod/controlplane/host_pool.h"
#include "hpod/controlplane/host_states.h"
#include "hpod/controlplane/recovery.h"

namespace hpod::controlplane {

using api::HostState;

namespace {

// The group's HpodPool, else the cluster's, else "default".
std::string PoolOf(const nlohmann::json& group_spec, const nlohmann::json& cluster_spec) {
  for (const nlohmann::json* spec : {&group_spec, &cluster_spec}) {
    auto p = spec->find("HpodPool");
    if (p != spec->end() && p->is_string() && !p->get<std::string>().empty()) return *p;
  }
  return kDefaultPool;
}

std::string Fact(const store::HostRecord& h, const char* key) {
  auto a = h.facts.find(key);
  return a != h.facts.end() && a->is_string() ? a->get<std::string>() : "";
}

bool Serving(const store::HostRecord& h) {
  return api::Is(h.state, HostState::kAssigned) || api::Is(h.state, HostState::kRebooting);
}

// The host serving `instance_id`; kNotFound ("no host serves i-…") when none does.
StatusOr<store::HostRecord> HostOf(store::Store& store, const std::string& instance_id) {
  store::HostRecord host;
  HPOD_RETURN_IF_ERROR(store.Read([&](store::ReadTx& tx) -> Status {
    auto h = tx.GetHostByInstanceId(instance_id);
    if (!h.ok() && h.status().code() == StatusCode::kNotFound) {
      return NotFoundError("no host serves " + instance_id);
    }
    HPOD_ASSIGN_OR_RETURN(host, std::move(h));
    return OkStatus();
  }));
  return host;
}

// What ReserveSpare needs to place an instance of a group (its spec) of `cluster`.
SpareRequest RequestFor(const nlohmann::json& group_spec, const store::ClusterRecord& cluster,
                        std::string instance_type, HostPlacement placement,
                        const std::string& instance_name) {
  SpareRequest r;
  r.pool = PoolOf(group_spec, cluster.spec);
  r.instance_type = std::move(instance_type);
  r.reason =
      "serves " + instance_name + " (" + placement.instance_id + ") of cluster " + cluster.name;
  r.placement = std::move(placement);
  return r;
}

// A launched instance's row with its cluster and group.
struct Placed {
  store::NodeRecord node;
  store::ClusterRecord cluster;
  store::GroupRecord group;
};

StatusOr<Placed> ReadPlaced(store::ReadTx& tx, const std::string& instance_id) {
  Placed p;
  HPOD_ASSIGN_OR_RETURN(p.node, tx.GetNodeById(instance_id));
  HPOD_ASSIGN_OR_RETURN(p.cluster, tx.GetCluster(p.node.cluster_id));
  HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(p.node.cluster_id));
  auto g = std::find_if(groups.begin(), groups.end(),
                        [&](const store::GroupRecord& r) { return r.name == p.node.group_name; });
  if (g == groups.end()) return NotFoundError("instance " + instance_id + " has no group");
  p.group = *g;
  return p;
}

// The shared filesystem the instance's group (else its cluster) declares; the
// cluster's node with the lowest logical id writes its marker (a replacement
// keeps the logical id, and finds the marker there already). The cluster's
// nodes are read only when there is a declaration.
StatusOr<std::optional<api::agentproto::SharedFilesystem>> SharedFsFor(store::ReadTx& tx,
                                                                       const Placed& p) {
  const nlohmann::json decl = p.group.spec.contains("HpodSharedFilesystem")
                                  ? p.group.spec["HpodSharedFilesystem"]
                                  : p.cluster.spec.value("HpodSharedFilesystem", nlohmann::json());
  if (!decl.is_object()) return std::optional<api::agentproto::SharedFilesystem>();
  HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(p.node.cluster_id));
  std::string first;
  for (const store::NodeRecord& o : nodes) {
    if (!o.remove && (first.empty() || o.logical_id < first)) first = o.logical_id;
  }
  api::agentproto::SharedFilesystem f;
  f.type = decl.value("Type", "");
  f.source = decl.value("Source", "");
  f.options = decl.value("Options", "");
  f.marker_name = ".hpod-fsx-" + p.cluster.id;
  f.marker_value = "hpod shared filesystem of " + p.cluster.arn;
  f.writer = p.node.logical_id == first;
  return std::optional<api::agentproto::SharedFilesystem>(std::move(f));
}

}  // namespace

PoolProvider::PoolProvider(store::Store& store, const Clock& clock, PoolProviderOptions options)
    : store_(store), clock_(clock), options_(std::move(options)) {}

provider::NodeEnvironment PoolProvider::Environment() const {
  provider::NodeEnvironment env;
  env.agent_url = options_.agent_url;
  env.sees_hpodd_files = false;
  env.ships_file_sources = true;  // hosts get file:// scripts in their config
  env.spank_plugin = options_.spank_plugin;
  env.gpu_stand_ins = false;
  // A replacement is another machine, with its own address.
  env.replacement_keeps_address = false;
  return env;
}

std::string PoolProvider::Desired(const store::HostRecord& host) const {
  if (!Serving(host) || host.instance_id.empty()) return "";
  MutexLock lock(mu_);
  return terminating_.count(host.instance_id) ? "" : host.instance_id;
}

void PoolProvider::SendAssign(const std::string& host_id, const std::string& instance_id) {
  if (!link_.send) return;
  api::agentproto::HostAssign assign{instance_id, std::nullopt};
  if (!instance_id.empty()) {
    Status s = store_.Read([&](store::ReadTx& tx) -> Status {
      HPOD_ASSIGN_OR_RETURN(Placed placed, ReadPlaced(tx, instance_id));
      HPOD_ASSIGN_OR_RETURN(assign.shared_fs, SharedFsFor(tx, placed));
      return OkStatus();
    });
    // Without its declaration the host would start the node unchecked: not now.
    if (!s.ok()) {
      spdlog::warn("assigning {} to host {}: {}", instance_id, host_id, s.message());
      return;
    }
  }
  if (!link_.send(host_id, assign.ToJson())) {
    // It is told again when it connects (its first host_status).
    spdlog::info("host {} is not connected; it learns that it serves '{}' when it connects",
                 host_id, instance_id);
  }
}

Status PoolProvider::Launch(const provider::LaunchSpec& spec) {
  store::HostRecord host;
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    // Launching an id that has its host is a no-op (the reconciler repeats calls).
    if (auto serving = tx.GetHostByInstanceId(spec.instance_id); serving.ok()) {
      host = *serving;
      return OkStatus();
    } else if (serving.status().code() != StatusCode::kNotFound) {
      return serving.status();
    }
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord cluster, tx.GetCluster(spec.cluster_id));
    const SpareRequest request =
        RequestFor(spec.group_spec, cluster, spec.instance_type,
                   {spec.cluster_id, spec.group_name, spec.instance_id}, spec.instance_name);
    HPOD_ASSIGN_OR_RETURN(host, ReserveSpare(tx, clock_, request, [this](const auto& h) {
                            return link_.connected && link_.connected(h.host_id);
                          }));
    return OkStatus();
  }));
  {
    MutexLock lock(mu_);
    terminating_.erase(spec.instance_id);
  }
  spdlog::info("instance {} ({}) runs on host {}", spec.instance_id, spec.instance_name,
               host.host_id);
  SendAssign(host.host_id, spec.instance_id);
  return OkStatus();
}

void PoolProvider::Power(const std::string& host_id, const std::string& action) {
  if (options_.power_command.empty()) return;
  SubprocessOptions o;
  o.argv = {"bash", "-c", options_.power_command + " \"$@\"", "power", host_id, action};
  o.timeout = std::chrono::seconds(60);
  o.merge_stderr = true;
  auto r = RunCommand(o);
  if (!r.ok() || r->exit_code != 0) {
    spdlog::error("power hook `{} {} {}` failed: {}", options_.power_command, host_id, action,
                  r.ok() ? "exit " + std::to_string(r->exit_code) + ": " + r->stdout_data
                         : std::string(r.status().message()));
  } else {
    spdlog::warn("power hook: {} {} {}", options_.power_command, host_id, action);
  }
}

Status PoolProvider::Reboot(const std::string& instance_id, const std::string& request_id) {
  HPOD_ASSIGN_OR_RETURN(store::HostRecord host, HostOf(store_, instance_id));
  {
    MutexLock lock(mu_);
    auto it = reboots_.find(host.host_id);
    if (it != reboots_.end() && it->second.request_id == request_id) return OkStatus();
  }
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(host, tx.GetHost(host.host_id));
    return ChangeHostState(tx, clock_, host, HostState::kRebooting,
                           "reboot " + request_id + " of " + instance_id);
  }));
  {
    MutexLock lock(mu_);
    reboots_[host.host_id] = {request_id, Fact(host, "boot_id"),
                              clock_.SteadyNow() + options_.reboot_timeout, false};
  }
  if (!link_.send || !link_.send(host.host_id, api::agentproto::HostReboot{request_id}.ToJson())) {
    // Unreachable: the deadline brings the power hook, or the node's failure.
    spdlog::warn("host {} is not connected: reboot {} waits for it", host.host_id, request_id);
  }
  return OkStatus();
}

Status PoolProvider::Place(const std::string& instance_id) {
  store::HostRecord host;
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(Placed p, ReadPlaced(tx, instance_id));
    const SpareRequest request =
        RequestFor(p.group.spec, p.cluster, p.group.spec.value("InstanceType", ""),
                   {p.node.cluster_id, p.node.group_name, p.node.instance_id},
                   p.node.group_name + "-" + std::to_string(p.node.ordinal));
    HPOD_ASSIGN_OR_RETURN(host, ReserveSpare(tx, clock_, request, [this](const auto& h) {
                            return link_.connected && link_.connected(h.host_id);
                          }));
    return OkStatus();
  }));
  {
    MutexLock lock(mu_);
    unplaced_.erase(instance_id);
  }
  spdlog::info("instance {} moves to host {}", instance_id, host.host_id);
  SendAssign(host.host_id, instance_id);
  return OkStatus();
}

Status PoolProvider::InjectFault(const std::string& instance_id, const provider::FaultSpec& fault) {
  using Kind = provider::FaultSpec::Kind;
  if (fault.kind == Kind::kDiskFull || fault.kind == Kind::kGpuXid) {
    return UnimplementedError(std::string(provider::FaultKindName(fault.kind)) +
                              " is not injected into a machine of yours (it would fill its disk "
                              "or fake its kernel log); use flag-file or kill-slurmd");
  }
  if (fault.kind == Kind::kKillNode && options_.power_command.empty()) {
    return UnimplementedError(
        "kill-node on a pool host is its power hook's `off`, and hpodd has no --power-command; "
        "stop the machine yourself, or use hang");
  }
  HPOD_ASSIGN_OR_RETURN(store::HostRecord host, HostOf(store_, instance_id));
  if (fault.kind == Kind::kKillNode) {
    Power(host.host_id, "off");
    return OkStatus();
  }
  api::agentproto::HostFault frame{std::string(provider::FaultKindName(fault.kind)), fault.seconds};
  if (!link_.send || !link_.send(host.host_id, frame.ToJson())) {
    return UnavailableError("host " + host.host_id + " is not connected");
  }
  return OkStatus();
}

Status PoolProvider::Terminate(const std::string& instance_id) {
  bool first = false;
  {
    MutexLock lock(mu_);
    first = terminating_.insert(instance_id).second;
  }
  auto found = HostOf(store_, instance_id);
  if (found.status().code() == StatusCode::kNotFound) return OkStatus();  // gone: a no-op
  HPOD_ASSIGN_OR_RETURN(store::HostRecord host, std::move(found));
  const bool connected = link_.connected && link_.connected(host.host_id);
  // Out of reach, it may still run the node's processes: the power hook fences it.
  if (first && !connected) Power(host.host_id, "off");
  SendAssign(host.host_id, "");
  return OkStatus();
}

StatusOr<provider::NodeObservation> PoolProvider::Describe(const std::string& instance_id) {
  std::optional<std::string> unplaced;
  bool terminating_now = false;
  {
    MutexLock lock(mu_);
    if (auto u = unplaced_.find(instance_id); u != unplaced_.end()) unplaced = u->second;
    terminating_now = terminating_.count(instance_id) > 0;
  }
  if (unplaced && !terminating_now) {
    // Its host failed the shared filesystem check: another Spare, when one is.
    Status placed = Place(instance_id);
    if (placed.code() == StatusCode::kResourceExhausted) {
      provider::NodeObservation waiting;
      waiting.state = provider::NodeState::kPending;
      waiting.message = std::string(placed.message()) + " (" + *unplaced + ")";
      return waiting;
    }
    HPOD_RETURN_IF_ERROR(placed);
  } else if (unplaced) {
    MutexLock lock(mu_);
    unplaced_.erase(instance_id);
  }
  HPOD_ASSIGN_OR_RETURN(store::HostRecord host, HostOf(store_, instance_id));
  provider::NodeObservation o;
  o.private_ip = Fact(host, "channel_address");
  // The machine's own name is the node's (and Slurm's NodeName, which a
  // replacement keeps with slurmd -N): slurmctld runs only on a host whose
  // hostname is its SlurmctldHost, and an admin knows their machines by name.
  o.hostname = Fact(host, "hostname");
  bool terminating = false;
  std::optional<std::string> reported;
  {
    MutexLock lock(mu_);
    terminating = terminating_.count(instance_id) > 0;
    if (auto r = reported_.find(host.host_id); r != reported_.end()) {
      reported = r->second.instance_id;
    }
  }
  const bool connected = link_.connected && link_.connected(host.host_id);
  if (terminating) {
    // A host out of reach is terminated as far as the node goes: once the row is
    // gone its certificate no longer acts for the instance, and it is wiped when
    // it connects again.
    o.state = !connected || (reported && reported->empty()) ? provider::NodeState::kTerminated
                                                            : provider::NodeState::kTerminating;
    return o;
  }
  if (api::Is(host.state, HostState::kRebooting)) return Rebooting(host, o);
  if (!Serving(host)) {
    o.state = provider::NodeState::kFailed;
    o.message = "its host " + host.host_id + " is " + host.state + ": " + host.state_reason;
    return o;
  }
  if (link_.lost_since) {
    if (auto lost = link_.lost_since(host.host_id)) {
      const auto gone = clock_.SteadyNow() - *lost;
      if (gone > options_.lost_host_after) {
        o.state = provider::NodeState::kFailed;
        o.message =
            "its host " + host.host_id + " is lost: its agent's connection dropped " +
            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(gone).count()) +
            " ms ago without a goodbye (the machine stopped, or its agent died)";
        return o;
      }
    }
  }
  // The machine is up; the node is Running once its agent says the lifecycle
  // scripts succeeded (RunsAgents).
  o.state = provider::NodeState::kRunning;
  if (o.private_ip.empty()) {
    o.state = provider::NodeState::kPending;
    o.message = "waiting for host " + host.host_id + " to connect";
  }
  return o;
}

StatusOr<std::vector<std::string>> PoolProvider::List(const std::string& cluster_id) {
  std::vector<std::string> ids;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(auto hosts, tx.ListHosts(""));
    for (const auto& h : hosts) {
      if (h.cluster_id == cluster_id && !h.instance_id.empty()) ids.push_back(h.instance_id);
    }
    return OkStatus();
  }));
  return ids;
}

provider::NodeObservation PoolProvider::Rebooting(const store::HostRecord& host,
                                                  provider::NodeObservation o) {
  bool cycle = false;
  std::string request;
  {
    MutexLock lock(mu_);
    auto [it, fresh] = reboots_.try_emplace(host.host_id);
    RebootState& rb = it->second;
    // A reboot hpodd asked for before it restarted: a deadline from now.
    if (fresh)
      rb = {"(before a restart of hpodd)", "", clock_.SteadyNow() + options_.reboot_timeout};
    request = rb.request_id;
    if (clock_.SteadyNow() > rb.deadline) {
      if (!options_.power_command.empty() && !rb.cycled) {
        rb.cycled = true;
        rb.deadline = clock_.SteadyNow() + options_.reboot_timeout;
        cycle = true;
      } else {
        o.state = provider::NodeState::kFailed;
        o.message = "its host " + host.host_id + " did not come back from reboot " + request +
                    " within " + std::to_string(options_.reboot_timeout.count()) + " s" +
                    (rb.cycled ? " of a power cycle" : "");
        return o;
      }
    }
  }
  if (cycle) Power(host.host_id, "cycle");
  o.state = provider::NodeState::kPending;
  o.message = "its host " + host.host_id + " is rebooting (" + request + ")";
  return o;
}

void PoolProvider::OnHostStatus(const std::string& host_id,
                                const api::agentproto::HostStatus& status) {
  {
    MutexLock lock(mu_);
    reported_[host_id] = status;
  }
  if (!status.message.empty()) spdlog::warn("host {}: {}", host_id, status.message);
  std::string desired;
  std::string failed_check;  // the instance whose check the host failed
  bool rebooting = false;
  Status s = store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::HostRecord host, tx.GetHost(host_id));
    if (api::Is(host.state, HostState::kRebooting)) {
      // Back when its boot id changed (hpodd restarted meanwhile: when it talks).
      std::optional<RebootState> rb;
      {
        MutexLock lock(mu_);
        if (auto it = reboots_.find(host_id); it != reboots_.end()) rb = it->second;
      }
      const std::string boot = Fact(host, "boot_id");
      if (rb && !rb->old_boot_id.empty() && boot == rb->old_boot_id) {
        rebooting = true;  // the same boot: its agent reconnected before going down
        return OkStatus();
      }
      HPOD_RETURN_IF_ERROR(ChangeHostState(tx, clock_, host, HostState::kAssigned,
                                           "back from reboot with boot id " + boot));
      MutexLock lock(mu_);
      reboots_.erase(host_id);
    }
    desired = Desired(host);
    if (status.check_failed && !desired.empty() && status.instance_id != desired) {
      // It cannot serve the instance: out of the pool with the reason, and the
      // instance goes to another Spare (Describe places it).
      failed_check = desired;
      desired.clear();
      return QuarantineHost(tx, clock_, host, status.message);
    }
    if (!status.instance_id.empty() || !desired.empty()) return OkStatus();
    // The host holds no tenure any more: one that was ending is over.
    if (Serving(host) && !host.instance_id.empty()) {
      const std::string ended = host.instance_id;
      // Ended by a replacement: the host failed its node, and leaves the pool
      // with the reason until a person releases it (as EndHostTenure does for a
      // host that could not be reached).
      HPOD_ASSIGN_OR_RETURN(auto recoveries, ActiveRecoveries(tx, host.cluster_id));
      for (const store::RecoveryRecord& r : recoveries) {
        if (r.instance_id == ended && ParseRecoveryAction(r.action) == RecoveryAction::kReplace) {
          return QuarantineHost(tx, clock_, host,
                                "instance " + ended + " was terminated for replacement (recovery " +
                                    r.recovery_id + "): " + r.reason);
        }
      }
      HPOD_RETURN_IF_ERROR(ChangeHostState(tx, clock_, host, HostState::kDraining,
                                           "instance " + ended + " was terminated",
                                           {host.cluster_id, host.group_name, ended}));
      HPOD_RETURN_IF_ERROR(ChangeHostState(tx, clock_, host, HostState::kSpare,
                                           "its tenure of " + ended + " was wiped"));
    } else if (api::Is(host.state, HostState::kDraining)) {
      HPOD_RETURN_IF_ERROR(
          ChangeHostState(tx, clock_, host, HostState::kSpare, "its last tenure was wiped"));
    }
    return OkStatus();
  });
  if (!s.ok()) {
    spdlog::warn("host {} reported '{}': {}", host_id, status.instance_id, s.message());
    return;
  }
  if (rebooting) return;
  if (!failed_check.empty()) {
    spdlog::warn("host {} failed the shared filesystem check of {}: {}; another Spare takes it",
                 host_id, failed_check, status.message);
    {
      MutexLock lock(mu_);
      unplaced_[failed_check] = "host " + host_id + " failed its check: " + status.message;
    }
    Status placed = Place(failed_check);
    if (!placed.ok()) spdlog::warn("placing {}: {}", failed_check, placed.message());
  }
  // A tenure on disk whose node agent does not run (an agent restart, a reboot)
  // is started again; one that failed to start is not asked again in a loop.
  if (status.instance_id != desired ||
      (!desired.empty() && !status.running && status.message.empty())) {
    SendAssign(host_id, desired);
  }
}

}  // namespace hpod::controlplane
