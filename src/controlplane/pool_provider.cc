#include "hpod/controlplane/pool_provider.h"

#include <spdlog/spdlog.h>

#include "hpod/api/states.h"
#include "hpod/controlplane/host_pool.h"
#include "hpod/controlplane/host_states.h"

namespace hpod::controlplane {

using api::HostState;

namespace {

std::string PoolOf(const nlohmann::json& group_spec) {
  auto p = group_spec.find("HpodPool");
  if (p != group_spec.end() && p->is_string() && !p->get<std::string>().empty()) return *p;
  return kDefaultPool;
}

std::string Fact(const store::HostRecord& h, const char* key) {
  auto a = h.facts.find(key);
  return a != h.facts.end() && a->is_string() ? a->get<std::string>() : "";
}

bool Serving(const store::HostRecord& h) {
  return api::Is(h.state, HostState::kAssigned) || api::Is(h.state, HostState::kRebooting);
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
  if (!link_.send(host_id, api::agentproto::HostAssign{instance_id}.ToJson())) {
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
    SpareRequest request;
    request.pool = PoolOf(spec.group_spec);
    request.instance_type = spec.instance_type;
    request.placement = {spec.cluster_id, spec.group_name, spec.instance_id};
    request.reason = "serves " + spec.instance_name + " (" + spec.instance_id + ") of cluster " +
                     spec.cluster_name;
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

Status PoolProvider::Terminate(const std::string& instance_id) {
  {
    MutexLock lock(mu_);
    terminating_.insert(instance_id);
  }
  store::HostRecord host;
  Status s = store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(host, tx.GetHostByInstanceId(instance_id));
    return OkStatus();
  });
  if (s.code() == StatusCode::kNotFound) return OkStatus();  // unknown or gone: a no-op
  HPOD_RETURN_IF_ERROR(s);
  SendAssign(host.host_id, "");
  return OkStatus();
}

StatusOr<provider::NodeObservation> PoolProvider::Describe(const std::string& instance_id) {
  store::HostRecord host;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    auto h = tx.GetHostByInstanceId(instance_id);
    if (!h.ok()) {
      return h.status().code() == StatusCode::kNotFound
                 ? NotFoundError("no host serves " + instance_id)
                 : h.status();
    }
    host = *h;
    return OkStatus();
  }));
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
    if (auto r = reported_.find(host.host_id); r != reported_.end()) reported = r->second;
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
  if (!Serving(host)) {
    o.state = provider::NodeState::kFailed;
    o.message = "its host " + host.host_id + " is " + host.state + ": " + host.state_reason;
    return o;
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

void PoolProvider::OnHostStatus(const std::string& host_id,
                                const api::agentproto::HostStatus& status) {
  {
    MutexLock lock(mu_);
    reported_[host_id] = status.instance_id;
  }
  if (!status.message.empty()) spdlog::warn("host {}: {}", host_id, status.message);
  std::string desired;
  Status s = store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::HostRecord host, tx.GetHost(host_id));
    desired = Desired(host);
    if (!status.instance_id.empty() || !desired.empty()) return OkStatus();
    // The host holds no tenure any more: one that was ending is over.
    if (Serving(host) && !host.instance_id.empty()) {
      const std::string ended = host.instance_id;
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
  if (status.instance_id != desired) SendAssign(host_id, desired);
}

}  // namespace hpod::controlplane
