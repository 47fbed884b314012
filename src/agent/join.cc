#include "hpod/agent/join.h"

#include <spdlog/spdlog.h>

#include <signal.h>

#include <filesystem>
#include <thread>

#include "hpod/agent/fs_util.h"
#include "hpod/agent/tenure.h"
#include "hpod/auth/join_token.h"
#include "hpod/auth/pki.h"
#include "hpod/base/backoff.h"
#include "hpod/base/subprocess.h"
#include "hpod/http/client.h"
#include "hpod/http/websocket.h"

namespace hpod::agent {
namespace {

namespace pki = auth::pki;
using Json = nlohmann::json;

constexpr auto kAskAgainAfter = std::chrono::seconds(60);

std::string Base(std::string server) {
  while (!server.empty() && server.back() == '/') server.pop_back();
  return server;
}

// hpod inject-fault on this machine (PROTOCOL.md, `fault`): the test of the
// recovery path on real parts, so each kind does to the machine what the fault is.
Status InjectHostFault(const api::agentproto::HostFault& fault, const std::string& server) {
  spdlog::warn("hpodd injects the fault {} into this machine", fault.kind);
  auto sh = [](const std::string& script, bool detach) -> Status {
    SubprocessOptions o;
    o.argv = detach ? std::vector<std::string>{"setsid", "-f", "bash", "-c", script}
                    : std::vector<std::string>{"bash", "-c", script};
    o.timeout = std::chrono::seconds(30);
    o.merge_stderr = true;
    auto r = RunCommand(o);
    if (!r.ok()) return r.status();
    if (r->exit_code != 0) {
      return InternalError("`" + script + "` exited " + std::to_string(r->exit_code) + ": " +
                           r->stdout_data.substr(0, 300));
    }
    return OkStatus();
  };
  if (fault.kind == "kill-agent") {
    ::raise(SIGKILL);
    return OkStatus();
  }
  if (fault.kind == "kill-slurmd") return sh("pkill -KILL -x slurmd", false);
  if (fault.kind == "flag-file") return sh("echo 1 >> /var/run/sagemaker_healthcheck_status", false);
  if (fault.kind == "partition") {
    if (fault.seconds <= 0) return InvalidArgumentError("partition needs seconds > 0");
    // The link hpodd is reached by, down and up again from a child that outlives
    // this connection (the agent cannot tell hpodd anything meanwhile).
    HPOD_ASSIGN_OR_RETURN(http::Url url, http::ParseUrl(server));
    std::string host = url.host;
    if (!host.empty() && host.front() == '[') host = host.substr(1, host.size() - 2);
    return sh("dev=$(ip -o route get '" + host + "' | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p'); "
              "[ -n \"$dev\" ] || exit 3; ip link set dev \"$dev\" down; sleep " +
                  std::to_string(fault.seconds) + "; ip link set dev \"$dev\" up",
              true);
  }
  if (fault.kind == "hang") {
    // Every process but init (kill -1 spares it and the sender), then this one.
    Status s = sh("kill -STOP -1", false);
    ::raise(SIGSTOP);
    return s;
  }
  return UnimplementedError("a pool host cannot inject " + fault.kind);
}

}  // namespace

IdentityPaths NodeIdentityPaths(const std::string& state_dir) {
  std::filesystem::path d(state_dir);
  return {(d / "tls" / "ca.pem").string(), (d / "tls" / "node.pem").string(),
          (d / "join.json").string()};
}

StatusOr<JoinedState> LoadJoinedState(const std::string& state_dir) {
  IdentityPaths paths = NodeIdentityPaths(state_dir);
  auto text = ReadFile(paths.join);
  if (!text.ok()) return text.status();
  if (!std::filesystem::exists(paths.node) || !std::filesystem::exists(paths.ca)) {
    return NotFoundError(paths.join + " exists, but its certificate or CA is missing");
  }
  Json j = Json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("server") || !j["server"].is_string() ||
      !j.contains("host_id") || !j["host_id"].is_string()) {
    return FailedPreconditionError(paths.join +
                                   " is damaged; remove it and join again with a new token");
  }
  JoinedState s;
  s.server = j["server"];
  s.host_id = j["host_id"];
  s.pool = j.value("pool", "");
  s.instance_id = j.value("instance_id", "");
  return s;
}

StatusOr<JoinedState> JoinHpodd(const JoinOptions& options) {
  HPOD_ASSIGN_OR_RETURN(auth::JoinToken token, auth::ParseJoinToken(options.token));
  const std::string server = Base(options.server);
  if (server.rfind("https://", 0) != 0) {
    return InvalidArgumentError(
        "--server must be https://HOST:PORT (hpodd's --agent-listen), got " + options.server);
  }
  IdentityPaths paths = NodeIdentityPaths(options.state_dir);

  // 1. The CA, over a connection nothing vouches for yet: its bytes are trusted
  //    only because their hash is the pin the token carries.
  http::ClientOptions discover;
  discover.timeout = options.timeout;
  discover.verify_server = false;
  http::Request get;
  get.method = "GET";
  auto ca = http::Client(discover).Send(server + "/join/v1/ca", get);
  if (!ca.ok())
    return UnavailableError("cannot reach hpodd at " + server + ": " + ca.status().message());
  if (ca->status != 200) {
    return UnavailableError(server + "/join/v1/ca answered " + std::to_string(ca->status) +
                            "; is this hpodd's --agent-listen address?");
  }
  auto pin = pki::CaPin(ca->body);
  if (!pin.ok()) return UnavailableError(server + " sent no CA certificate");
  if (*pin != token.ca_pin) {
    return PermissionDeniedError("the CA at " + server + " has pin " + *pin +
                                 ", but the token pins " + token.ca_pin +
                                 ": this is another hpodd, or something between is posing as it; "
                                 "nothing was sent");
  }
  HPOD_RETURN_IF_ERROR(WriteFileAtomic(paths.ca, ca->body, 0644));

  // 2. The key, made here; hpodd sees only the request.
  HPOD_ASSIGN_OR_RETURN(std::string key, pki::GeneratePrivateKeyPem());
  const std::string machine = options.facts.value("machine_id", "machine");
  HPOD_ASSIGN_OR_RETURN(std::string csr, pki::CreateCsr(key, machine));

  // 3. The join itself, now verifying hpodd against the pinned CA.
  http::ClientOptions verified;
  verified.timeout = options.timeout;
  verified.ca_file = paths.ca;
  http::Request post;
  post.method = "POST";
  post.headers = {{"Content-Type", "application/json"}};
  Json request{{"token", options.token}, {"csr", csr}, {"facts", options.facts}};
  if (!options.instance_type.empty()) request["instance_type"] = options.instance_type;
  post.body = request.dump();
  auto answer = http::Client(verified).Send(server + "/join/v1/join", post);
  if (!answer.ok()) {
    return UnavailableError("join request to " + server + " failed: " + answer.status().message());
  }
  Json body = Json::parse(answer->body, nullptr, false);
  if (answer->status != 200) {
    std::string why = body.is_object() && body.contains("error") && body["error"].is_string()
                          ? body["error"].get<std::string>()
                          : "HTTP " + std::to_string(answer->status);
    if (answer->status == 429 || answer->status >= 500) {
      // Busy (its request queue full: thousands of machines joining at once) or
      // failing: nothing was decided about this machine, and the token is unspent.
      return UnavailableError("hpodd could not take the join now (HTTP " +
                              std::to_string(answer->status) + ": " + why + ")");
    }
    return PermissionDeniedError("hpodd refused the join: " + why);
  }
  if (!body.is_object() || !body.contains("certificate") || !body["certificate"].is_string() ||
      !body.contains("host_id") || !body["host_id"].is_string()) {
    return UnavailableError("hpodd's join answer has no certificate");
  }
  const std::string cert = body["certificate"];
  HPOD_RETURN_IF_ERROR(pki::KeyMatchesCertificate(key, cert));

  // 4. The state, certificate and key first: join.json says the join is complete.
  HPOD_RETURN_IF_ERROR(WriteFileAtomic(paths.node, cert + key, 0600));
  JoinedState state;
  state.server = server;
  state.host_id = body["host_id"];
  state.pool = body.value("pool", "");
  state.instance_id = body.value("instance_id", "");
  HPOD_RETURN_IF_ERROR(WriteFileAtomic(paths.join,
                                       Json{{"server", state.server},
                                            {"host_id", state.host_id},
                                            {"pool", state.pool},
                                            {"instance_id", state.instance_id}}
                                               .dump(2) +
                                           "\n",
                                       0644));
  return state;
}

Status RunSpareHost(const JoinedState& state, const std::string& state_dir,
                    const std::function<bool()>& stopped, const PoolHostOptions& options) {
  namespace proto = api::agentproto;
  TenureOptions tenure;
  tenure.state_dir = state_dir;
  tenure.server = state.server;
  tenure.node_template = options.node_template;
  tenure.systemd_unit_dir = options.systemd_unit_dir;
  TenureRunner tenures(tenure);
  auto status = [&](const std::string& message) {
    return proto::HostStatus{tenures.Current(), message, tenures.Running(), tenures.CheckFailed()}
        .ToJson()
        .dump();
  };
  IdentityPaths paths = NodeIdentityPaths(state_dir);
  http::WebSocketClientOptions o;
  o.ca_file = paths.ca;
  o.client_cert_file = paths.node;
  o.client_key_file = paths.node;
  Backoff backoff({.initial = std::chrono::milliseconds(100),
                   .max = std::chrono::milliseconds(10000),
                   .jitter = true});
  std::string url = state.server + "/agent/v1/host";
  CertificateRenewal renewal(paths.node, RealClock::Get());
  // The machine's boot, so that hpodd sees it reboot (PROTOCOL.md, X-Hpod-Boot-Id).
  std::vector<http::Header> headers;
  if (std::string boot = ReadBootId(); !boot.empty()) headers.push_back({"X-Hpod-Boot-Id", boot});
  while (!stopped()) {
    auto conn = http::WebSocketClient::Connect(url, headers, o);
    if (!conn.ok()) {
      if (conn.status().code() == StatusCode::kUnauthenticated) {
        return FailedPreconditionError("hpodd refused host " + state.host_id + "'s certificate: " +
                                       conn.status().message() + "; not retrying");
      }
      auto wait = backoff.Next();
      spdlog::warn("cannot reach hpodd at {} ({}); retrying in {} ms", state.server,
                   conn.status().message(), wait.count());
      for (auto waited = std::chrono::milliseconds(0); waited < wait && !stopped();
           waited += std::chrono::milliseconds(100)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      continue;
    }
    backoff.Reset();
    spdlog::info("host {} of pool {} connected to {}", state.host_id, state.pool, state.server);
    // What it holds, first: hpodd answers with what it should serve.
    (void)(*conn)->Send(status(""), false);
    while (!stopped()) {
      if (auto renew = renewal.Due()) (void)(*conn)->Send(renew->ToJson().dump(), false);
      auto m = (*conn)->Receive(std::chrono::seconds(1));
      if (m.ok()) {
        Json j = Json::parse(m->data, nullptr, false);
        if (j.is_object() && j.value("type", "") == proto::HostAssign::kType) {
          auto assign = proto::HostAssign::FromJson(j);
          Status s = assign.ok() ? tenures.Serve(assign->instance_id, assign->shared_fs)
                                 : assign.status();
          if (!s.ok()) spdlog::error("serving '{}': {}", j.value("instance_id", ""), s.message());
          (void)(*conn)->Send(status(s.ok() ? "" : std::string(s.message())), false);
        } else if (j.is_object() && j.value("type", "") == proto::HostFault::kType) {
          auto fault = proto::HostFault::FromJson(j);
          Status s = fault.ok() ? InjectHostFault(*fault, state.server) : fault.status();
          if (!s.ok()) {
            spdlog::error("{}", s.message());
            (void)(*conn)->Send(status(std::string(s.message())), false);
          }
        } else if (j.is_object() && j.value("type", "") == proto::HostReboot::kType) {
          // The machine goes down with everything on it; hpodd learns it is back
          // from the new boot id of the next connection.
          spdlog::warn("hpodd asked for a reboot ({}): running `{}`", j.value("request_id", ""),
                       options.reboot_command);
          SubprocessOptions reboot;
          reboot.argv = {"bash", "-c", options.reboot_command};
          reboot.timeout = std::chrono::seconds(60);
          reboot.merge_stderr = true;
          auto r = RunCommand(reboot);
          if (!r.ok() || r->exit_code != 0) {
            const std::string why = "reboot failed: `" + options.reboot_command + "` " +
                                    (r.ok() ? "exited " + std::to_string(r->exit_code) + ": " +
                                                  r->stdout_data.substr(0, 500)
                                            : std::string(r.status().message()));
            spdlog::error("{}", why);
            (void)(*conn)->Send(status(why), false);
          }
        } else if (j.is_object() && j.value("type", "") == api::agentproto::Certificate::kType) {
          auto cert = api::agentproto::Certificate::FromJson(j);
          Status s = cert.ok() ? renewal.Accept(*cert) : cert.status();
          if (!s.ok()) spdlog::warn("renewing this host's certificate: {}", s.message());
        } else if (j.is_object() && j.value("type", "") == api::agentproto::Error::kType) {
          spdlog::warn("hpodd: {}", j.value("message", std::string()));
        }
        continue;
      }
      if (m.status().code() == StatusCode::kDeadlineExceeded) continue;
      spdlog::warn("connection to hpodd lost: {}", m.status().message());
      break;
    }
    if (stopped()) {
      // Stopping on purpose: the machine is not lost, its node goes on.
      proto::HostStatus bye{tenures.Current(), "the agent stops (a restart or an upgrade)",
                            tenures.Running(), false, true};
      (void)(*conn)->Send(bye.ToJson().dump(), false);
    }
    (*conn)->Close("agent stopping");
  }
  return OkStatus();
}

CertificateRenewal::CertificateRenewal(std::string node_pem, const Clock& clock)
    : node_pem_(std::move(node_pem)), clock_(clock) {}

std::optional<api::agentproto::RenewCertificate> CertificateRenewal::Due() {
  auto pem = ReadFile(node_pem_);
  if (!pem.ok()) return std::nullopt;
  auto info = pki::ParseCertificate(*pem);
  if (!info.ok()) return std::nullopt;
  // hpodd backdates notBefore (pki::kBackdate) for clocks that lag; the life
  // counted here starts when it was issued.
  const auto issued = info->not_before + pki::kBackdate;
  if (clock_.Now() < issued + (info->not_after - issued) * 2 / 3) return std::nullopt;
  MutexLock lock(mu_);
  const auto now = clock_.SteadyNow();
  if (asked_ && now - *asked_ < kAskAgainAfter) return std::nullopt;
  if (pending_key_.empty()) {
    auto key = pki::GeneratePrivateKeyPem();
    if (!key.ok()) return std::nullopt;
    pending_key_ = *key;
  }
  auto csr = pki::CreateCsr(pending_key_, info->common_name.empty() ? "host" : info->common_name);
  if (!csr.ok()) return std::nullopt;
  asked_ = now;
  spdlog::info("certificate {} expires within a third of its life; asking hpodd for a new one",
               info->serial_hex);
  return api::agentproto::RenewCertificate{*csr};
}

Status CertificateRenewal::Accept(const api::agentproto::Certificate& answer) {
  MutexLock lock(mu_);
  if (pending_key_.empty()) {
    return FailedPreconditionError("a certificate came that this agent did not ask for");
  }
  HPOD_RETURN_IF_ERROR(pki::KeyMatchesCertificate(pending_key_, answer.certificate));
  HPOD_RETURN_IF_ERROR(WriteFileAtomic(node_pem_, answer.certificate + pending_key_, 0600));
  auto info = pki::ParseCertificate(answer.certificate);
  spdlog::info("renewed this host's certificate: {} (until {:.0f}); used from the next connection",
               info.ok() ? info->serial_hex : "?", answer.not_after);
  pending_key_.clear();
  asked_.reset();
  return OkStatus();
}

}  // namespace hpod::agent
