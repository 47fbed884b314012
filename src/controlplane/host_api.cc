#include "hpod/controlplane/host_api.h"

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

}  // namespace

HostApi::HostApi(store::Store& store, const Clock& clock, JoinService& joins,
                 std::function<bool(const store::HostRecord&)> connected,
                 std::function<void(const store::HostRecord&)> disconnect)
    : store_(store),
      clock_(clock),
      joins_(joins),
      connected_(std::move(connected)),
      disconnect_(std::move(disconnect)) {}

bool HostApi::Handles(const std::string& op) {
  return op == "HpodCreateJoinToken" || op == "HpodRevokeJoinToken" || op == "HpodListJoinTokens" ||
         op == "HpodListHosts" || op == "HpodRevokeHost";
}

StatusOr<ordered_json> HostApi::Call(const std::string& op, const json& req) {
  if (op == "HpodCreateJoinToken") return CreateJoinToken(req);
  if (op == "HpodRevokeJoinToken") return RevokeJoinToken(req);
  if (op == "HpodListJoinTokens") return ListJoinTokens();
  if (op == "HpodListHosts") return ListHosts(req);
  if (op == "HpodRevokeHost") return RevokeHost(req);
  return UnimplementedError("operation " + op + " is not served by HostApi");
}

StatusOr<ordered_json> HostApi::CreateJoinToken(const json& req) {
  JoinTokenSpec spec;
  spec.pool = req.value("Pool", std::string("default"));
  spec.ttl = std::chrono::seconds(req.value("TtlSeconds", int64_t{3600}));
  spec.uses = req.value("Uses", int64_t{1});
  spec.description = req.value("Description", std::string());
  HPOD_ASSIGN_OR_RETURN(CreatedJoinToken created, joins_.CreateToken(spec));
  ordered_json out;
  out["JoinToken"] = created.text;
  out["TokenId"] = created.record.id;
  out["Pool"] = created.record.pool;
  out["Uses"] = created.record.uses_left;
  out["ExpiresAt"] = created.record.expires;
  return out;
}

StatusOr<ordered_json> HostApi::RevokeJoinToken(const json& req) {
  HPOD_ASSIGN_OR_RETURN(store::JoinTokenRecord t,
                        joins_.RevokeToken(req.at("TokenId").get<std::string>()));
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
  std::vector<store::HostRecord> hosts;
  std::vector<std::vector<store::CertificateRecord>> certs;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(hosts, tx.ListHosts(req.value("Pool", std::string())));
    for (const store::HostRecord& h : hosts) {
      HPOD_ASSIGN_OR_RETURN(auto c, tx.ListCertificates(h.host_id));
      certs.push_back(std::move(c));
    }
    return OkStatus();
  }));
  ordered_json list = ordered_json::array();
  for (size_t i = 0; i < hosts.size(); ++i) {
    const store::HostRecord& h = hosts[i];
    ordered_json o;
    o["HostId"] = h.host_id;
    o["MachineId"] = h.machine_id;
    CopyFact<std::string>(h.facts, "hostname", o, "Hostname");
    o["Pool"] = h.pool;
    if (!h.instance_id.empty()) o["InstanceId"] = h.instance_id;
    o["TokenId"] = h.token_id;
    o["Status"] = h.state;
    o["Connected"] = connected_ ? connected_(h) : false;
    o["JoinedAt"] = h.joined;
    // The newest certificate still in force, if any.
    for (auto c = certs[i].rbegin(); c != certs[i].rend(); ++c) {
      if (c->revoked > 0) continue;
      o["CertificateSerial"] = c->serial;
      o["CertificateNotAfter"] = c->not_after;
      break;
    }
    CopyFact<int64_t>(h.facts, "cpus", o, "Cpus");
    if (auto m = h.facts.find("memory_bytes"); m != h.facts.end() && m->is_number_integer()) {
      o["MemoryMiB"] = m->get<int64_t>() / (1024 * 1024);
    }
    if (auto g = h.facts.find("gpus"); g != h.facts.end() && g->is_array()) {
      o["Gpus"] = static_cast<int64_t>(g->size());
    }
    CopyFact<std::string>(h.facts, "os", o, "Os");
    CopyFact<std::string>(h.facts, "slurm_version", o, "SlurmVersion");
    list.push_back(std::move(o));
  }
  return ordered_json{{"Hosts", std::move(list)}};
}

StatusOr<ordered_json> HostApi::RevokeHost(const json& req) {
  const std::string host_id = req.at("HostId");
  HPOD_ASSIGN_OR_RETURN(std::vector<std::string> serials, joins_.RevokeHost(host_id));
  store::HostRecord host;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(host, tx.GetHost(host_id));
    return OkStatus();
  }));
  if (disconnect_) disconnect_(host);
  return ordered_json{{"HostId", host_id}, {"RevokedSerials", serials}};
}

}  // namespace hpod::controlplane
