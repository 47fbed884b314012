// AgentService (agent_service.h): how a node proves itself. Over the Unix socket
// with a one-time bootstrap token (an HMAC of its instance id), then a credential
// hpodd issued it (only its hash is stored); over the network with the client
// certificate it got when it joined, and nothing else.

#include "hpod/base/crypto.h"
#include "hpod/controlplane/agent_service.h"

namespace hpod::controlplane {
namespace {

constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

std::string HashSecret(const std::string& secret) { return HexEncode(Sha256(secret)); }

// "Scheme value" from the Authorization header; empty when the scheme differs.
std::string AuthValue(const http::Request& request, std::string_view scheme) {
  std::string_view h = request.HeaderValue("Authorization");
  if (h.size() <= scheme.size() + 1 || h.substr(0, scheme.size()) != scheme ||
      h[scheme.size()] != ' ') {
    return "";
  }
  return std::string(h.substr(scheme.size() + 1));
}

}  // namespace

StatusOr<std::string> AgentService::BootstrapKey(store::Store& store) {
  std::string key;
  HPOD_RETURN_IF_ERROR(store.Write([&](store::WriteTx& tx) -> Status {
    auto s = tx.GetSetting("agent_bootstrap_key");
    if (s.ok()) {
      key = *s;
      return OkStatus();
    }
    if (s.status().code() != StatusCode::kNotFound) return s.status();
    key = HexEncode(RandomBytes(32));
    return tx.PutSetting("agent_bootstrap_key", key);
  }));
  return key;
}

std::string AgentService::BootstrapToken(const std::string& instance_id) const {
  return HexEncode(HmacSha256(bootstrap_key_, "hpod-agent-bootstrap:" + instance_id));
}

StatusOr<store::NodeRecord> AgentService::AuthenticateAgent(const http::Request& request,
                                                            bool allow_bootstrap,
                                                            bool* bootstrapped) {
  *bootstrapped = false;
  std::string instance_id(request.HeaderValue("X-Hpod-Instance-Id"));
  if (instance_id.empty()) return UnauthenticatedError("missing X-Hpod-Instance-Id");
  if (request.tls) {
    // Over the network a node proves itself with its certificate only: a secret
    // it was handed could have been handed to anyone.
    if (!certificate_hooks_.auth) {
      return UnauthenticatedError("this hpodd takes no network agents");
    }
    if (request.peer_cert_serial_hex.empty()) {
      return UnauthenticatedError(
          "no client certificate: a node joins first (hpod-agent join) and connects with the "
          "certificate it got");
    }
    HPOD_ASSIGN_OR_RETURN(std::string serves, certificate_hooks_.auth(request.peer_cert_serial_hex,
                                                                      request.peer_cert_cn));
    if (serves != instance_id) {
      return UnauthenticatedError("host " + request.peer_cert_cn + " serves " +
                                  (serves.empty() ? std::string("no node") : serves) + ", not " +
                                  instance_id);
    }
    store::NodeRecord tls_node;
    HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
      HPOD_ASSIGN_OR_RETURN(tls_node, tx.GetNodeById(instance_id));
      return OkStatus();
    }));
    return tls_node;
  }
  store::NodeRecord node;
  std::optional<store::AgentRecord> agent;
  HPOD_RETURN_IF_ERROR(store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(node, tx.GetNodeById(instance_id));
    auto a = tx.GetAgent(instance_id);
    if (a.ok()) agent = *a;
    return OkStatus();
  }));
  if (std::string secret = AuthValue(request, "HpodNode"); !secret.empty()) {
    if (agent && !agent->credential_hash.empty() &&
        ConstantTimeEquals(HashSecret(secret), agent->credential_hash)) {
      return node;
    }
    return UnauthenticatedError("node credential not valid for " + instance_id);
  }
  if (std::string token = AuthValue(request, "HpodBootstrap"); !token.empty() && allow_bootstrap) {
    // Dead once the agent confirmed a credential (registered_time is set then).
    if (agent && agent->registered_time > 0) {
      return UnauthenticatedError("bootstrap token of " + instance_id + " was already used");
    }
    if (ConstantTimeEquals(token, BootstrapToken(instance_id))) {
      *bootstrapped = true;
      return node;
    }
  }
  return UnauthenticatedError("no valid credential for " + instance_id);
}

Status AgentService::PutAgentRecord(const store::NodeRecord& node,
                                    const std::string& credential_hash) {
  return store_.Write([&](store::WriteTx& tx) -> Status {
    store::AgentRecord a;
    auto existing = tx.GetAgent(node.instance_id);
    if (existing.ok()) a = *existing;
    a.instance_id = node.instance_id;
    a.cluster_id = node.cluster_id;
    if (!credential_hash.empty()) a.credential_hash = credential_hash;
    return tx.PutAgent(a);
  });
}

StatusOr<std::string> AgentService::IssueCredential(const store::NodeRecord& node) {
  std::string secret = RandomString(43, kAlnum);
  HPOD_RETURN_IF_ERROR(PutAgentRecord(node, HashSecret(secret)));
  return secret;
}

}  // namespace hpod::controlplane
