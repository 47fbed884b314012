// The agents' network listener (--agent-listen): mutual TLS over TCP. A machine
// joins here (join_service.h) and its agent connects with the certificate it got.
// Its routes:
//   GET  /join/v1/ca            hpodd's CA certificate, to anyone: the joining agent
//                               trusts it only if its hash is the token's pin
//   POST /join/v1/join          {token, csr, facts, instance_type} → {host_id, certificate, ...}
//   GET  /agent/v1/channel      a node's channel (agent_service.h), by certificate
//   GET  /agent/v1/sessions/ID  a node's shell sessions, by certificate
//   GET  /agent/v1/host         a spare host's channel (host_channels.h)
// The TLS layer asks every client for a certificate and verifies one that is sent
// against the CA (and its dates); the join routes need none, every upgrade does.

#include <spdlog/spdlog.h>

#include <filesystem>

#include "hpod/auth/pki.h"
#include "hpod/base/file_util.h"
#include "hpod/controlplane/agent_service_internal.h"
#include "hpod/controlplane/daemon.h"
#include "hpod/controlplane/init.h"

namespace hpod::controlplane {
namespace {

namespace pki = auth::pki;
using nlohmann::json;

http::Response JsonAnswer(int status, const json& body) {
  http::Response r;
  r.status = status;
  r.headers.push_back({"Content-Type", "application/json"});
  r.body = body.dump();
  return r;
}

// A refusal the agent prints as is: one line.
http::Response JoinError(const Status& s) {
  int status = 500;
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      status = 400;
      break;
    case StatusCode::kUnauthenticated:
      status = 403;
      break;
    case StatusCode::kAlreadyExists:
      status = 409;
      break;
    case StatusCode::kAborted:
    case StatusCode::kUnavailable:
      status = 503;
      break;
    default:
      break;
  }
  return JsonAnswer(status, json{{"error", s.message()}});
}

// The listener's own server certificate, issued at each start from the CA for
// the listen address (and --tls-name), so that it always names what agents dial.
StatusOr<std::pair<std::string, std::string>> AgentServerCertificate(
    const TlsPaths& tls, const pki::Issued& ca, const std::string& address,
    const std::vector<std::string>& names, const Clock& clock) {
  HPOD_ASSIGN_OR_RETURN(pki::Issued server,
                        pki::IssueServerCertificate(ca, ServerCertificateNames(address, names),
                                                    kServerCertValidity, clock));
  const std::string cert = (std::filesystem::path(tls.dir) / "agent-server.pem").string();
  const std::string key = (std::filesystem::path(tls.dir) / "agent-server.key").string();
  HPOD_RETURN_IF_ERROR(WriteFileAtomic(key, server.key_pem, 0600));
  HPOD_RETURN_IF_ERROR(WriteFileAtomic(cert, server.cert_pem + ca.cert_pem, 0644));
  return std::make_pair(cert, key);
}

// "10.1.0.11:53412" → "10.1.0.11", "[fd00::1]:443" → "fd00::1"; "unix" → "".
std::string AddressOnly(const std::string& remote) {
  if (remote.empty() || remote == "unix") return "";
  if (remote[0] == '[') {
    auto end = remote.find(']');
    return end == std::string::npos ? "" : remote.substr(1, end - 1);
  }
  auto colon = remote.rfind(':');
  return colon == std::string::npos ? remote : remote.substr(0, colon);
}

}  // namespace

Status Daemon::StartAgentNetwork() {
  const TlsPaths tls = TlsFiles(options_.data_dir);
  pki::Issued ca;
  auto ca_cert = ReadFile(tls.ca_cert);
  auto ca_key = ReadFile(tls.ca_key);
  if (!ca_cert.ok() || !ca_key.ok()) {
    return FailedPreconditionError("--agent-listen needs hpodd's CA (" + tls.ca_cert + ", " +
                                   tls.ca_key + "); run `hpodd init --data-dir " +
                                   options_.data_dir + "` (it creates them)");
  }
  ca.cert_pem = *ca_cert;
  ca.key_pem = *ca_key;
  HPOD_RETURN_IF_ERROR(pki::KeyMatchesCertificate(ca.key_pem, ca.cert_pem));
  HPOD_ASSIGN_OR_RETURN(std::string pin, pki::CaPin(ca.cert_pem));
  HPOD_ASSIGN_OR_RETURN(auto files, AgentServerCertificate(tls, ca, options_.agent_listen_address,
                                                           options_.agent_tls_names, *clock_));

  Daemon* self = this;
  auto live = [self](const store::HostRecord& h) {
    if (!h.instance_id.empty()) {
      return self->agents_ != nullptr && self->agents_->IsConnected(h.instance_id);
    }
    return self->host_channels_->IsConnected(h.host_id);
  };
  auto renew = [self](const std::string& serial, const std::string& cn,
                      const std::string& csr) -> StatusOr<api::agentproto::Certificate> {
    HPOD_ASSIGN_OR_RETURN(IssuedCertificate c, self->joins_->Renew(serial, cn, csr));
    return api::agentproto::Certificate{c.certificate_pem, c.not_after};
  };
  host_channels_ = std::make_unique<HostChannels>(renew);
  if (pool_ != nullptr) {
    host_channels_->SetEvents({[self](const std::string& host_id,
                                      const api::agentproto::HostStatus& status) {
      // A cluster with a node waiting for a Spare host is polled while it
      // converges (cluster_reconciler.cc): no wake-up is needed here.
      self->pool_->OnHostStatus(host_id, status);
    }});
    pool_->SetHostLink({[self](const std::string& host_id) {
                          return self->host_channels_->IsConnected(host_id);
                        },
                        [self](const std::string& host_id, const json& frame) {
                          return self->host_channels_->Send(host_id, frame);
                        },
                        [self](const std::string& host_id) {
                          return self->host_channels_->LostSince(host_id);
                        }});
  }
  joins_ = std::make_unique<JoinService>(*store_, *clock_, ca, pin, options_.joins, live);
  HostApiHooks hooks;
  hooks.connected = live;
  hooks.disconnect = [self](const store::HostRecord& h) {
    const std::string why = "host " + h.host_id + " was revoked";
    if (!h.instance_id.empty() && self->agents_) self->agents_->Disconnect(h.instance_id, why);
    self->host_channels_->Disconnect(h.host_id, why);
  };
  hooks.health = [self](const std::string& instance_id)
      -> std::optional<api::agentproto::HealthReport> {
    if (self->agents_ == nullptr) return std::nullopt;
    auto report = self->agents_->Health(instance_id);
    if (report == nullptr) return std::nullopt;
    return *report;
  };
  host_api_ = std::make_unique<HostApi>(*store_, *clock_, joins_.get(), std::move(hooks));
  api_server_->SetHostApi(host_api_.get());
  if (agents_ != nullptr) {
    AgentService::CertificateHooks hooks;
    hooks.auth = [self](const std::string& serial, const std::string& cn) -> StatusOr<std::string> {
      HPOD_ASSIGN_OR_RETURN(store::HostRecord h, self->joins_->Authenticate(serial, cn));
      return h.instance_id;
    };
    hooks.renew = renew;
    agents_->SetCertificateHooks(std::move(hooks));
  }

  agent_net_routes_ = std::make_unique<http::Router>();
  http::Router& router = *agent_net_routes_;
  HPOD_RETURN_IF_ERROR(
      router.Add("GET", "/join/v1/ca", http::AuthRule::kNone, [self](const http::Request&) {
        http::Response r;
        r.headers.push_back({"Content-Type", "application/x-pem-file"});
        r.body = self->joins_->ca_pem();
        return r;
      }));
  HPOD_RETURN_IF_ERROR(router.Add("POST", "/join/v1/join", http::AuthRule::kNone,
                                  [self](const http::Request& r) { return self->ServeJoin(r); }));
  auto node_upgrade = [self](const http::Request& r,
                             std::shared_ptr<http::WebSocket> ws) -> http::UpgradeResult {
    if (self->agents_ == nullptr) {
      return RefuseUpgrade(404, "this hpodd's provider runs no node agents");
    }
    return self->agents_->HandleAgentUpgrade(r, std::move(ws));
  };
  HPOD_RETURN_IF_ERROR(
      router.AddUpgrade("/agent/v1/channel", http::AuthRule::kAgentToken, node_upgrade));
  HPOD_RETURN_IF_ERROR(
      router.AddUpgradePrefix("/agent/v1/sessions/", http::AuthRule::kAgentToken, node_upgrade));
  HPOD_RETURN_IF_ERROR(router.AddUpgrade(
      "/agent/v1/host", http::AuthRule::kAgentToken,
      [self](const http::Request& r, std::shared_ptr<http::WebSocket> ws) -> http::UpgradeResult {
        if (r.peer_cert_serial_hex.empty()) {
          return RefuseUpgrade(401, "no client certificate: join first (hpod-agent join)");
        }
        auto host = self->joins_->Authenticate(r.peer_cert_serial_hex, r.peer_cert_cn);
        if (!host.ok()) {
          spdlog::warn("host upgrade refused: {}", host.status().message());
          return RefuseUpgrade(401, std::string(host.status().message()));
        }
        // Its first connection ends its join: a Joining host is Spare from now on.
        if (Status s = self->joins_->HostConnected(host->host_id,
                                                   std::string(r.HeaderValue("X-Hpod-Boot-Id")),
                                                   AddressOnly(r.remote_address));
            !s.ok()) {
          spdlog::warn("host {}: {}", host->host_id, s.message());
        }
        return self->host_channels_->Accept(host->host_id, r.peer_cert_serial_hex, r.peer_cert_cn,
                                            std::move(ws));
      }));
  router.SetMissHandler([](const http::Request&, const http::RouteMiss&) {
    http::Response r;
    r.status = 404;
    r.body = "hpod agent endpoint: /join/v1/ca, /join/v1/join and WebSocket upgrades only";
    return r;
  });

  http::ServerOptions so = AgentListenerOptions();
  so.address = options_.agent_listen_address;
  so.port = options_.agent_listen_port;
  so.tls.enabled = true;
  so.tls.cert_file = files.first;
  so.tls.key_file = files.second;
  so.tls.client_ca_file = tls.ca_cert;
  so.tls.require_client_cert = false;  // the join routes are reached without one
  HPOD_ASSIGN_OR_RETURN(agent_net_server_,
                        http::Server::Start(so, router.handler(), router.upgrade_handler()));
  spdlog::info("hpodd serving node agents on https://{}:{} (mutual TLS; CA pin {})",
               options_.agent_listen_address, agent_net_server_->port(), pin);
  return OkStatus();
}

http::Response Daemon::ServeJoin(const http::Request& request) {
  json body = json::parse(request.body, nullptr, false);
  if (!body.is_object() || !body.contains("token") || !body["token"].is_string() ||
      !body.contains("csr") || !body["csr"].is_string()) {
    return JoinError(InvalidArgumentError(
        "a join request is a JSON object with string fields token and csr (and object facts)"));
  }
  JoinRequest jr;
  jr.token = body["token"];
  jr.csr_pem = body["csr"];
  if (body.contains("facts")) jr.facts = body["facts"];
  if (auto t = body.find("instance_type"); t != body.end()) {
    if (!t->is_string()) return JoinError(InvalidArgumentError("instance_type must be a string"));
    jr.instance_type = t->get<std::string>();
  }
  auto joined = joins_->Join(jr);
  if (!joined.ok()) return JoinError(joined.status());
  json out;
  out["host_id"] = joined->host.host_id;
  out["pool"] = joined->host.pool;
  out["instance_id"] = joined->host.instance_id;
  out["certificate"] = joined->certificate.certificate_pem;
  out["not_after"] = joined->certificate.not_after;
  out["ca"] = joins_->ca_pem();
  return JsonAnswer(200, out);
}

}  // namespace hpod::controlplane
