#include "hpod/controlplane/host_api.h"

#include <map>

#include "hpod/api/states.h"
#include "hpod/controlplane/host_states.h"

namespace hpod::controlplane {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// A fact the agent reported, if it has the expected type.
template <typename T>
void CopyFact(const json& facts, const char* key, ordered_json& out, const char* as) {
  auto it = facts.find(key);
  if (it == facts.end()) return;
  if constexpr (std::is_same_v<T, std::string>) {
    if (it->is_string()) out[as] = it->template get<std::string>();
  } else {
    if (it->is_number_integer() && it->template get<int64_t>() >= 0) {
      out[as] = it->template get<int64_t>();
    }
  }
}

// The newest certificate still in force, if any.
const store::CertificateRecord* InForce(const std::vector<store::CertificateRecord>& certs) {
  for (auto c = certs.rbegin(); c != certs.rend(); ++c) {
    if (c->revoked <= 0) return &*c;
  }
  return nullptr;
}

int64_t GpuCount(const json& facts) {
  auto g = facts.find("gpus");
  return g != facts.end() && g->is_array() ? static_cast<int64_t>(g->size()) : 0;
}

int64_t MemoryMiB(const json& facts) {
  auto m = facts.find("memory_bytes");
  return m != facts.end() && m->is_number_integer() ? m->get<int64_t>() / (1024 * 1024) : -1;
}

Status NotFoundHost(const Status& s, const std::string& host_id) {
  return s.code() == StatusCode::kNotFound ? NotFoundError("host " + host_id + " not found") : s;
}

// The cluster a host's row names, read once per id (null when it is gone).
const store::ClusterRecord* ClusterOf(store::ReadTx& tx, const std::string& id,
                                      std::map<std::string, store::ClusterRecord>& seen) {
  if (id.empty()) return nullptr;
  auto it = seen.find(id);
  if (it == seen.end()) {
    auto c = tx.GetCluster(id);
    if (!c.ok()) return nullptr;
    it = seen.emplace(id, std::move(*c)).first;
  }
  return &it->second;
}

// What HpodListHosts and HpodDescribeHost both say of a host: its ids, pool,
// type, state and why, whether its agent is connected, and its certificate.
void RenderHostState(const store::HostRecord& h,
                     const std::vector<store::CertificateRecord>& certs, bool connected,
                     ordered_json& o) {
  o["HostId"] = h.host_id;
  o["MachineId"] = h.machine_id;
  o["Pool"] = h.pool;
  if (!h.instance_type.empty()) o["InstanceType"] = h.instance_type;
  o["TokenId"] = h.token_id;
  o["Status"] = h.state;
  if (!h.state_reason.empty()) o["StatusReason"] = h.state_reason;
  if (h.state_changed > 0) o["StatusChangedAt"] = h.state_changed;
  o["Connected"] = connected;
  o["JoinedAt"] = h.joined;
  if (const store::CertificateRecord* c = InForce(certs)) {
    o["CertificateSerial"] = c->serial;
    o["CertificateNotAfter"] = c->not_after;
  }
}

}  // namespace

HostApi::HostApi(store::Store& store, const Clock& clock, JoinService* joins, HostApiHooks hooks)
    : store_(store), clock_(clock), joins_(joins), hooks_(std::move(hooks)) {}

StatusOr<JoinService*> HostApi::Joins() {
  if (joins_ != nullptr) return joins_;
  return FailedPreconditionError(
      "this hpodd has no network listener for agents, so no machine can join it; start hpodd "
      "with --agent-listen ADDRESS:PORT");
}

bool HostApi::Handles(const std::string& op) {
  return op == "HpodCreateJoinToken" || op == "HpodRevokeJoinToken" || op == "HpodListJoinTokens" ||
         op == "HpodListHosts" || op == "HpodDescribeHost" || op == "HpodReleaseHost" ||
         op == "HpodRetireHost" || op == "HpodRevokeHost";
}

StatusOr<ordered_json> HostApi::Call(const std::string& op, const json& req) {
  if (op == "HpodCreateJoinToken") return CreateJoinToken(req);
  if (op == "HpodRevokeJoinToken") return RevokeJoinToken(req);
  if (op == "HpodListJoinTokens") return ListJoinTokens();
  if (op == "HpodListHosts") return ListHosts(req);
  if (op == "HpodDescribeHost") return DescribeHost(req);
  if (op == "HpodReleaseHost" || op == "HpodRetireHost") return SetHostState(op, req);
  if (op == "HpodRevokeHost") return RevokeHost(req);
  return UnimplementedError("operation " + op + " is not served by HostApi");
}

StatusOr<ordered_json> HostApi::CreateJoinToken(const json& req) {
  JoinTokenSpec spec;
  spec.pool = req.value("Pool", std::string("default"));
  spec.ttl = std::chrono::seconds(req.value("TtlSeconds", int64_t{3600}));
  spec.uses = req.value("Uses", int64_t{1});
  spec.description = req.value("Description", std::string());
  spec.instance_type = req.value("InstanceType", std::string());
  HPOD_ASSIGN_OR_RETURN(JoinService * joins, Joins());
  HPOD_ASSIGN_OR_RETURN(CreatedJoinToken created, joins->CreateToken(spec));
  ordered_json out;
  out["JoinToken"] = created.text;
  out["TokenId"] = created.record.id;
  out["Pool"] = created.record.pool;
  out["Uses"] = created.record.uses_left;
  out["ExpiresAt"] = created.record.expires;
  if (!spec.instance_type.empty()) out["InstanceType"] = spec.instance_type;
  return out;
}

StatusOr<ordered_json> HostApi::RevokeJoinToken(const json& req) {
  HPOD_ASSIGN_OR_RETURN(JoinService * joins, Joins());
  HPOD_ASSIGN_OR_RETURN(store::JoinTokenRecord t,
                        joins->RevokeToken(req.at("TokenId").get<std::string>()));
  return ordered_json{{"TokenId", t.id}, {"Status", "Revoked"}};
}

StatusOr<ordered_json> HostApi::ListJoinTokens() {
  std::vector<store::JoinTokenRecord> tokens;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(tokens, tx.ListJoinTokens());
    return OkStatus();
  }));
  const double now = clock_.NowEpochSeconds();
  ordered_json list = ordered_json::array();
  for (const store::JoinTokenRecord& t : tokens) {
    ordered_json o;
    o["TokenId"] = t.id;
    o["Pool"] = t.pool;
    if (!t.instance_id.empty()) o["InstanceId"] = t.instance_id;
    if (!t.instance_type.empty()) o["InstanceType"] = t.instance_type;
    if (!t.description.empty()) o["Description"] = t.description;
    o["Status"] = JoinTokenStatus(t, now);
    o["UsesLeft"] = t.uses_left;
    o["CreatedAt"] = t.created;
    o["ExpiresAt"] = t.expires;
    list.push_back(std::move(o));
  }
  return ordered_json{{"JoinTokens", std::move(list)}};
}

StatusOr<ordered_json> HostApi::ListHosts(const json& req) {
  const std::string state = req.value("State", std::string());
  const std::string type = req.value("InstanceType", std::string());
  ordered_json list = ordered_json::array();
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    std::map<std::string, store::ClusterRecord> clusters;
    HPOD_ASSIGN_OR_RETURN(auto all, tx.ListHosts(req.value("Pool", std::string())));
    for (const store::HostRecord& h : all) {
      if ((!state.empty() && h.state != state) || (!type.empty() && h.instance_type != type)) {
        continue;
      }
      HPOD_ASSIGN_OR_RETURN(auto certs, tx.ListCertificates(h.host_id));
      ordered_json o;
      RenderHostState(h, certs, hooks_.connected && hooks_.connected(h), o);
      CopyFact<std::string>(h.facts, "hostname", o, "Hostname");
      if (const store::ClusterRecord* c = ClusterOf(tx, h.cluster_id, clusters)) {
        o["ClusterName"] = c->name;
      }
      if (!h.group_name.empty()) o["InstanceGroupName"] = h.group_name;
      if (!h.instance_id.empty()) o["InstanceId"] = h.instance_id;
      CopyFact<int64_t>(h.facts, "cpus", o, "Cpus");
      if (int64_t m = MemoryMiB(h.facts); m >= 0) o["MemoryMiB"] = m;
      if (h.facts.contains("gpus")) o["Gpus"] = GpuCount(h.facts);
      CopyFact<std::string>(h.facts, "os", o, "Os");
      CopyFact<std::string>(h.facts, "slurm_version", o, "SlurmVersion");
      list.push_back(std::move(o));
    }
    return OkStatus();
  }));
  return ordered_json{{"Hosts", std::move(list)}};
}

StatusOr<ordered_json> HostApi::DescribeHost(const json& req) {
  const std::string host_id = req.at("HostId");
  store::HostRecord h;
  std::vector<store::CertificateRecord> certs;
  std::vector<store::HostHistoryRecord> history;
  std::optional<store::NodeRecord> node;
  std::map<std::string, store::ClusterRecord> clusters;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    auto got = tx.GetHost(host_id);
    if (!got.ok()) return NotFoundHost(got.status(), host_id);
    h = std::move(*got);
    HPOD_ASSIGN_OR_RETURN(certs, tx.ListCertificates(host_id));
    HPOD_ASSIGN_OR_RETURN(history, tx.ListHostHistory(host_id));
    if (!h.instance_id.empty()) {
      if (auto n = tx.GetNodeById(h.instance_id); n.ok()) node = std::move(*n);
    }
    // The clusters the host serves and served, each read once.
    ClusterOf(tx, h.cluster_id, clusters);
    for (const store::HostHistoryRecord& e : history) ClusterOf(tx, e.cluster_id, clusters);
    return OkStatus();
  }));
  ordered_json o;
  RenderHostState(h, certs, hooks_.connected && hooks_.connected(h), o);
  o["Revoked"] = InForce(certs) == nullptr && !certs.empty();
  o["FailuresLast30Days"] =
      FailuresSince(history, clock_.NowEpochSeconds() - kHostFailureWindowSeconds);
  ordered_json facts = ordered_json::object();
  CopyFact<std::string>(h.facts, "hostname", facts, "Hostname");
  CopyFact<std::string>(h.facts, "boot_id", facts, "BootId");
  CopyFact<int64_t>(h.facts, "cpus", facts, "Cpus");
  if (int64_t m = MemoryMiB(h.facts); m >= 0) facts["MemoryMiB"] = m;
  if (auto g = h.facts.find("gpus"); g != h.facts.end() && g->is_array()) {
    ordered_json gpus = ordered_json::array();
    for (const json& gpu : *g) {
      if (!gpu.is_object()) continue;
      ordered_json one = ordered_json::object();
      CopyFact<std::string>(gpu, "name", one, "Name");
      CopyFact<std::string>(gpu, "uuid", one, "Uuid");
      if (auto m = gpu.find("memory_bytes"); m != gpu.end() && m->is_number_integer()) {
        one["MemoryMiB"] = m->get<int64_t>() / (1024 * 1024);
      }
      gpus.push_back(std::move(one));
    }
    facts["Gpus"] = std::move(gpus);
  }
  if (auto a = h.facts.find("addresses"); a != h.facts.end() && a->is_array()) {
    ordered_json addresses = ordered_json::array();
    for (const json& addr : *a) {
      if (addr.is_object() && addr.contains("ipv4") && addr["ipv4"].is_string()) {
        addresses.push_back(addr["ipv4"].get<std::string>());
      }
    }
    facts["Addresses"] = std::move(addresses);
  }
  CopyFact<std::string>(h.facts, "os", facts, "Os");
  CopyFact<std::string>(h.facts, "slurm_version", facts, "SlurmVersion");
  o["Facts"] = std::move(facts);
  if (!h.instance_id.empty()) {
    ordered_json cur;
    if (auto c = clusters.find(h.cluster_id); c != clusters.end()) {
      cur["ClusterName"] = c->second.name;
      cur["ClusterArn"] = c->second.arn;
    }
    if (!h.group_name.empty()) cur["InstanceGroupName"] = h.group_name;
    cur["InstanceId"] = h.instance_id;
    if (node.has_value()) {
      cur["NodeLogicalId"] = node->logical_id;
      cur["Hostname"] = node->hostname;
      cur["PrivateIpAddress"] = node->private_ip;
      cur["InstanceStatus"] = node->status;
    }
    o["CurrentInstance"] = std::move(cur);
    if (hooks_.health) {
      if (auto report = hooks_.health(h.instance_id); report.has_value()) {
        ordered_json checks = ordered_json::array();
        for (const auto& c : report->checks) {
          ordered_json one{{"Name", c.name}, {"Result", c.result}, {"Verdict", c.verdict}};
          if (!c.reason.empty()) one["Reason"] = c.reason;
          if (c.time > 0) one["Time"] = c.time;
          checks.push_back(std::move(one));
        }
        o["LastHealthReport"] = std::move(checks);
      }
    }
  }
  ordered_json entries = ordered_json::array();
  for (const store::HostHistoryRecord& e : history) {
    ordered_json one;
    one["Time"] = e.time;
    if (!e.from_state.empty()) one["From"] = e.from_state;
    one["To"] = e.to_state;
    one["Reason"] = e.reason;
    if (auto c = clusters.find(e.cluster_id); c != clusters.end()) {
      one["ClusterName"] = c->second.name;
    }
    if (!e.group_name.empty()) one["InstanceGroupName"] = e.group_name;
    if (!e.instance_id.empty()) one["InstanceId"] = e.instance_id;
    entries.push_back(std::move(one));
  }
  o["History"] = std::move(entries);
  return o;
}

StatusOr<ordered_json> HostApi::SetHostState(const std::string& op, const json& req) {
  const std::string host_id = req.at("HostId");
  const bool release = op == "HpodReleaseHost";
  std::string previous, now_state;
  HPOD_RETURN_IF_ERROR(store_.Write([&](store::WriteTx& tx) -> Status {
    auto got = tx.GetHost(host_id);
    if (!got.ok()) return NotFoundHost(got.status(), host_id);
    store::HostRecord h = std::move(*got);
    previous = h.state;
    auto state = api::Parse<api::HostState>(h.state);
    const std::string who = "an admin";
    if (release) {
      if (state == api::HostState::kSpare) {
        now_state = h.state;
        return OkStatus();  // released already
      }
      if (state != api::HostState::kQuarantined && state != api::HostState::kRetired) {
        return FailedPreconditionError("host " + host_id + " is " + h.state +
                                       "; only a Quarantined or Retired host is released");
      }
      if (h.instance_type.empty()) {
        return FailedPreconditionError(
            "host " + host_id + " joined for one instance and has no instance type, so no "
            "cluster could take it as a spare; join the machine again with a pool token and "
            "--instance-type");
      }
      HPOD_ASSIGN_OR_RETURN(auto certs, tx.ListCertificates(host_id));
      if (InForce(certs) == nullptr) {
        return FailedPreconditionError("host " + host_id +
                                       " was revoked; join the machine again with a new token "
                                       "(hpod create-join-token) instead");
      }
      HPOD_RETURN_IF_ERROR(ChangeHostState(
          tx, clock_, h, api::HostState::kSpare,
          req.value("Reason", std::string("released by ") + who + " (hpod release-host)")));
    } else {
      // A Draining host serves nothing any more (its tenure is being wiped).
      if (state == api::HostState::kAssigned || state == api::HostState::kRebooting) {
        return FailedPreconditionError(
            "host " + host_id + " is " + h.state + " and serves instance " + h.instance_id +
            "; replace that node first (hpod batch-replace-cluster-nodes), then retire the host");
      }
      HPOD_RETURN_IF_ERROR(ChangeHostState(
          tx, clock_, h, api::HostState::kRetired,
          req.value("Reason", std::string("retired by ") + who + " (hpod retire-host)")));
    }
    now_state = h.state;
    return OkStatus();
  }));
  return ordered_json{{"HostId", host_id}, {"Status", now_state}, {"PreviousStatus", previous}};
}

StatusOr<ordered_json> HostApi::RevokeHost(const json& req) {
  // Revocation is rows in the store: it needs no CA, so it works without the
  // agents' listener too (a compromised host is cut off all the same).
  HPOD_ASSIGN_OR_RETURN(RevokedHost revoked,
                        controlplane::RevokeHost(store_, clock_, req.at("HostId")));
  // The host as it was: retiring cleared the instance whose channel must close.
  if (hooks_.disconnect) hooks_.disconnect(revoked.before);
  return ordered_json{{"HostId", revoked.before.host_id},
                      {"RevokedSerials", revoked.serials},
                      {"Status", api::NameString(api::HostState::kRetired)}};
}

}  // namespace hpod::controlplane
