#include "hpod/api/agent_protocol.h"

#include <utility>

#include "hpod/api/agent_protocol_reader.h"
#include "hpod/base/base64.h"

namespace hpod::api::agentproto {
namespace {

using Json = nlohmann::json;

using internal::Ctx;
using internal::Reader;
using internal::Typed;

StatusOr<LifecycleState> ParseLifecycleState(const Json& j, Ctx ctx) {
  Reader r(j, ctx);
  LifecycleState s;
  r.Str("state", &s.state, true);
  r.Int("exit_code", &s.exit_code);
  r.Str("message", &s.message);
  if (r.status().ok() && !api::Parse<api::LifecycleState>(s.state)) {
    r.Fail("state",
           "must be one of NotStarted, Running, Succeeded, Failed (not '" + s.state + "')");
  }
  return r.Done(std::move(s));
}

StatusOr<SlurmStatus> ParseSlurmStatus(const Json& j, Ctx ctx) {
  Reader r(j, ctx);
  SlurmStatus s;
  r.Str("role", &s.role);
  r.Str("conf_hash", &s.conf_hash);
  r.Str("daemon", &s.daemon, true);
  r.Int("restarts", &s.restarts);
  r.Str("message", &s.message);
  r.Num("slurmd_started", &s.slurmd_started);
  r.Bool("held", &s.held);
  return r.Done(std::move(s));
}

StatusOr<SlurmNodeEntry> ParseSlurmNodeEntry(const Json& j, Ctx ctx) {
  Reader r(j, ctx);
  SlurmNodeEntry n;
  r.Str("name", &n.name, true);
  r.Str("state", &n.state);
  r.Str("reason", &n.reason);
  r.Str("slurmd_start_time", &n.slurmd_start_time);
  return r.Done(std::move(n));
}

StatusOr<HealthCheck> ParseHealthCheck(const Json& j, Ctx ctx) {
  Reader r(j, ctx);
  HealthCheck c;
  r.Str("name", &c.name, true);
  r.OneOf("result", &c.result, {"ok", "fail", "timeout", "skipped"}, true);
  r.OneOf("verdict", &c.verdict, {"Healthy", "Reboot", "Replace"});
  r.Str("reason", &c.reason);
  r.Int("duration_ms", &c.duration_ms);
  r.Num("time", &c.time);
  return r.Done(std::move(c));
}

StatusOr<S3Config> ParseS3Config(const Json& j, Ctx ctx) {
  Reader r(j, ctx);
  S3Config s;
  r.Str("endpoint", &s.endpoint);
  r.Str("region", &s.region);
  r.Str("access_key_id", &s.access_key_id);
  r.Str("secret_access_key", &s.secret_access_key);
  r.Str("unix_socket", &s.unix_socket);
  return r.Done(std::move(s));
}

Json Files(const std::map<std::string, std::string>& files) {
  Json out = Json::object();
  for (const auto& [path, bytes] : files) out[path] = Base64Encode(bytes);
  return out;
}

StatusOr<LifecycleConfig> ParseLifecycleConfig(const Json& j, Ctx ctx) {
  Reader r(j, ctx);
  LifecycleConfig c;
  r.Str("source_s3_uri", &c.source_s3_uri, true);
  r.Str("on_create", &c.on_create, true);
  r.Int("timeout_s", &c.timeout_s);
  r.Obj("s3", &c.s3, ParseS3Config);
  std::map<std::string, std::string> encoded;
  r.StrMap("files", &encoded);
  r.StrList("executable", &c.executable);
  for (auto& [path, b64] : encoded) {
    auto bytes = Base64Decode(b64);
    if (!bytes.ok()) {
      r.Fail("files." + path, "must be base64");
      break;
    }
    c.files[path] = std::move(*bytes);
  }
  return r.Done(std::move(c));
}

}  // namespace

StatusOr<std::string> MessageType(const Json& frame) {
  Reader r(frame, {"frame", ""});
  std::string type;
  r.Str("type", &type, true);
  return r.Done(std::move(type));
}

// ---- Nested objects ----

StatusOr<LifecycleState> LifecycleState::FromJson(const Json& j) {
  return ParseLifecycleState(j, {"lifecycle", ""});
}
Json LifecycleState::ToJson() const {
  return Json{{"state", state}, {"exit_code", exit_code}, {"message", message}};
}

StatusOr<SlurmStatus> SlurmStatus::FromJson(const Json& j) {
  return ParseSlurmStatus(j, {"slurm", ""});
}
Json SlurmStatus::ToJson() const {
  Json j{{"role", role},
         {"conf_hash", conf_hash},
         {"daemon", daemon},
         {"restarts", restarts},
         {"message", message}};
  if (slurmd_started) j["slurmd_started"] = *slurmd_started;
  if (held) j["held"] = true;
  return j;
}

StatusOr<SlurmNodeEntry> SlurmNodeEntry::FromJson(const Json& j) {
  return ParseSlurmNodeEntry(j, {"slurm node", ""});
}
Json SlurmNodeEntry::ToJson() const {
  return Json{{"name", name},
              {"state", state},
              {"reason", reason},
              {"slurmd_start_time", slurmd_start_time}};
}

StatusOr<HealthCheck> HealthCheck::FromJson(const Json& j) {
  return ParseHealthCheck(j, {"health check", ""});
}
Json HealthCheck::ToJson() const {
  return Json{{"name", name},     {"result", result},           {"verdict", verdict},
              {"reason", reason}, {"duration_ms", duration_ms}, {"time", time}};
}

StatusOr<S3Config> S3Config::FromJson(const Json& j) { return ParseS3Config(j, {"s3", ""}); }
Json S3Config::ToJson() const {
  return Json{{"endpoint", endpoint},
              {"region", region},
              {"access_key_id", access_key_id},
              {"secret_access_key", secret_access_key},
              {"unix_socket", unix_socket}};
}

StatusOr<LifecycleConfig> LifecycleConfig::FromJson(const Json& j) {
  return ParseLifecycleConfig(j, {"lifecycle", ""});
}
Json LifecycleConfig::ToJson() const {
  return Json{{"source_s3_uri", source_s3_uri}, {"on_create", on_create},
              {"timeout_s", timeout_s},         {"s3", s3 ? s3->ToJson() : Json(nullptr)},
              {"files", Files(files)},          {"executable", executable}};
}

// ---- agent → hpodd ----

StatusOr<Hello> Hello::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  Hello h;
  h.protocol_version = 1;
  r.Int("protocol_version", &h.protocol_version);
  r.Str("agent_version", &h.agent_version, true);
  r.Str("hostname", &h.hostname);
  r.Str("private_ip", &h.private_ip);
  r.Str("boot_id", &h.boot_id);
  r.Obj("lifecycle", &h.lifecycle, ParseLifecycleState);
  r.StrMap("software", &h.software);
  return r.Done(std::move(h));
}
Json Hello::ToJson() const {
  Json j{{"protocol_version", protocol_version},
         {"agent_version", agent_version},
         {"hostname", hostname},
         {"private_ip", private_ip},
         {"boot_id", boot_id}};
  if (lifecycle) j["lifecycle"] = lifecycle->ToJson();
  if (!software.empty()) j["software"] = software;
  return Typed(kType, std::move(j));
}

StatusOr<GetConfig> GetConfig::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  return r.Done(GetConfig{});
}
Json GetConfig::ToJson() const { return Typed(kType); }

StatusOr<Heartbeat> Heartbeat::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  Heartbeat h;
  r.Int("seq", &h.seq, true);
  r.Obj("lifecycle", &h.lifecycle, ParseLifecycleState);
  r.Int("uptime_s", &h.uptime_s);
  r.Obj("slurm", &h.slurm, ParseSlurmStatus);
  r.Num("time", &h.time);
  // Read apart: a malformed `host` is dropped, the heartbeat counts.
  if (auto it = j.find("host"); r.status().ok() && it != j.end() && !it->is_null()) {
    auto host = internal::ParseHostStats(*it, {kType, "host."});
    if (host.ok()) {
      h.host = std::move(*host);
    } else {
      h.host_error = std::string(host.status().message());
    }
  }
  return r.Done(std::move(h));
}
Json Heartbeat::ToJson() const {
  Json j{{"seq", seq}, {"uptime_s", uptime_s}};
  if (lifecycle) j["lifecycle"] = lifecycle->ToJson();
  if (slurm) j["slurm"] = slurm->ToJson();
  if (host) j["host"] = host->ToJson();
  if (time) j["time"] = *time;
  return Typed(kType, std::move(j));
}

StatusOr<LifecycleReport> LifecycleReport::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  if (!r.status().ok()) return r.status();
  HPOD_ASSIGN_OR_RETURN(LifecycleState s, ParseLifecycleState(j, {kType, ""}));
  return LifecycleReport{std::move(s)};
}
Json LifecycleReport::ToJson() const { return Typed(kType, status.ToJson()); }

StatusOr<Log> Log::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  Log l;
  r.Str("stream", &l.stream, true);
  r.Str("data", &l.data, true);
  return r.Done(std::move(l));
}
Json Log::ToJson() const { return Typed(kType, Json{{"stream", stream}, {"data", data}}); }

StatusOr<ProvisioningParameters> ProvisioningParameters::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  ProvisioningParameters p;
  r.Any("content", &p.content);
  return r.Done(std::move(p));
}
Json ProvisioningParameters::ToJson() const { return Typed(kType, Json{{"content", content}}); }

StatusOr<SlurmStateReport> SlurmStateReport::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  if (!r.status().ok()) return r.status();
  HPOD_ASSIGN_OR_RETURN(SlurmStatus s, ParseSlurmStatus(j, {kType, ""}));
  return SlurmStateReport{std::move(s)};
}
Json SlurmStateReport::ToJson() const { return Typed(kType, status.ToJson()); }

StatusOr<SlurmNodes> SlurmNodes::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  SlurmNodes s;
  auto it = j.is_object() ? j.find("nodes") : j.end();
  if (r.status().ok() && (it == j.end() || !it->is_array())) {
    r.Fail("nodes", it == j.end() || it->is_null() ? "is missing" : "must be an array");
  }
  if (!r.status().ok()) return r.status();
  for (size_t i = 0; i < it->size(); ++i) {
    HPOD_ASSIGN_OR_RETURN(
        SlurmNodeEntry n,
        ParseSlurmNodeEntry((*it)[i], {kType, "nodes[" + std::to_string(i) + "]."}));
    s.nodes.push_back(std::move(n));
  }
  return s;
}
Json SlurmNodes::ToJson() const {
  Json list = Json::array();
  for (const auto& n : nodes) list.push_back(n.ToJson());
  return Typed(kType, Json{{"nodes", std::move(list)}});
}

StatusOr<HealthReport> HealthReport::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  HealthReport h;
  r.Int("seq", &h.seq);
  auto it = j.is_object() ? j.find("checks") : j.end();
  if (r.status().ok() && (it == j.end() || !it->is_array())) {
    r.Fail("checks", it == j.end() || it->is_null() ? "is missing" : "must be an array");
  }
  if (!r.status().ok()) return r.status();
  for (size_t i = 0; i < it->size(); ++i) {
    HPOD_ASSIGN_OR_RETURN(
        HealthCheck c, ParseHealthCheck((*it)[i], {kType, "checks[" + std::to_string(i) + "]."}));
    h.checks.push_back(std::move(c));
  }
  return h;
}
Json HealthReport::ToJson() const {
  Json list = Json::array();
  for (const auto& c : checks) list.push_back(c.ToJson());
  return Typed(kType, Json{{"seq", seq}, {"checks", std::move(list)}});
}

StatusOr<CommandResult> CommandResult::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  CommandResult c;
  r.Str("id", &c.id, true);
  r.Int("exit_code", &c.exit_code);
  r.Str("stdout", &c.stdout_data);
  r.Str("stderr", &c.stderr_data);
  r.Bool("timed_out", &c.timed_out);
  r.Str("error", &c.error);
  return r.Done(std::move(c));
}
Json CommandResult::ToJson() const {
  return Typed(kType, Json{{"id", id},
                           {"exit_code", exit_code},
                           {"stdout", stdout_data},
                           {"stderr", stderr_data},
                           {"timed_out", timed_out},
                           {"error", error}});
}

// A job question's `request` and its answer are objects hpodd's JobService reads;
// the agent only relays them.
StatusOr<JobQuery> JobQuery::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  JobQuery q;
  r.Str("id", &q.id, true);
  r.Any("request", &q.request);
  if (r.status().ok() && !q.request.is_object()) {
    return InvalidArgumentError("job_query: field 'request' must be an object");
  }
  return r.Done(std::move(q));
}
Json JobQuery::ToJson() const { return Typed(kType, Json{{"id", id}, {"request", request}}); }

// ---- hpodd → agent ----

StatusOr<JobAnswer> JobAnswer::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  JobAnswer a;
  r.Str("id", &a.id, true);
  r.Any("answer", &a.answer);
  if (r.status().ok() && !a.answer.is_object()) {
    return InvalidArgumentError("job_answer: field 'answer' must be an object");
  }
  return r.Done(std::move(a));
}
Json JobAnswer::ToJson() const { return Typed(kType, Json{{"id", id}, {"answer", answer}}); }

StatusOr<Credential> Credential::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  Credential c;
  r.Str("secret", &c.secret, true);
  return r.Done(std::move(c));
}
Json Credential::ToJson() const { return Typed(kType, Json{{"secret", secret}}); }

StatusOr<RenewCertificate> RenewCertificate::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  RenewCertificate c;
  r.Str("csr", &c.csr, true);
  return r.Done(std::move(c));
}
Json RenewCertificate::ToJson() const { return Typed(kType, Json{{"csr", csr}}); }

StatusOr<Certificate> Certificate::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  Certificate c;
  r.Str("certificate", &c.certificate, true);
  r.Num("not_after", &c.not_after, true);
  return r.Done(std::move(c));
}
Json Certificate::ToJson() const {
  return Typed(kType, Json{{"certificate", certificate}, {"not_after", not_after}});
}

StatusOr<Config> Config::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  Config c;
  int64_t interval = 0;
  r.Int("heartbeat_interval_ms", &interval);
  if (j.is_object() && j.contains("heartbeat_interval_ms") &&
      !j["heartbeat_interval_ms"].is_null()) {
    c.heartbeat_interval_ms = interval;
  }
  r.Obj("lifecycle", &c.lifecycle, ParseLifecycleConfig);
  r.Any("resource_config", &c.resource_config);
  if (r.status().ok() && !c.resource_config.is_object()) {
    r.Fail("resource_config", "must be an object");
  }
  r.Any("provisioning", &c.provisioning);
  return r.Done(std::move(c));
}
Json Config::ToJson() const {
  Json j{{"lifecycle", lifecycle ? lifecycle->ToJson() : Json(nullptr)},
         {"resource_config", resource_config},
         {"provisioning", provisioning}};
  if (heartbeat_interval_ms) j["heartbeat_interval_ms"] = *heartbeat_interval_ms;
  return Typed(kType, std::move(j));
}

StatusOr<ConfigPending> ConfigPending::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  ConfigPending c;
  r.Int("retry_ms", &c.retry_ms);
  return r.Done(c);
}
Json ConfigPending::ToJson() const { return Typed(kType, Json{{"retry_ms", retry_ms}}); }

StatusOr<Command> Command::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  Command c;
  r.Str("id", &c.id, true);
  r.StrList("argv", &c.argv, true);
  r.StrMap("env", &c.env);
  r.Str("cwd", &c.cwd);
  r.Int("timeout_ms", &c.timeout_ms);
  return r.Done(std::move(c));
}
Json Command::ToJson() const {
  Json j{{"id", id}, {"argv", argv}, {"timeout_ms", timeout_ms}};
  if (!env.empty()) j["env"] = env;
  if (!cwd.empty()) j["cwd"] = cwd;
  return Typed(kType, std::move(j));
}

StatusOr<OpenSession> OpenSession::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  OpenSession s;
  r.Str("session_id", &s.session_id, true);
  r.StrList("argv", &s.argv);
  r.Int("rows", &s.rows);
  r.Int("cols", &s.cols);
  r.Bool("pty", &s.pty);
  r.Str("user", &s.user);
  r.Bool("unprivileged", &s.unprivileged);
  if (r.status().ok() && (s.rows < 0 || s.rows > 0xffff)) r.Fail("rows", "must be 0..65535");
  if (r.status().ok() && (s.cols < 0 || s.cols > 0xffff)) r.Fail("cols", "must be 0..65535");
  return r.Done(std::move(s));
}
Json OpenSession::ToJson() const {
  Json j{{"session_id", session_id}, {"argv", argv}, {"rows", rows}, {"cols", cols}, {"pty", pty}};
  if (!user.empty()) j["user"] = user;
  if (unprivileged) j["unprivileged"] = true;
  return Typed(kType, std::move(j));
}

StatusOr<SlurmRole> SlurmRole::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  SlurmRole s;
  r.Str("role", &s.role, true);
  r.Str("node_name", &s.node_name, true);
  r.Str("controller_addr", &s.controller_addr, true);
  r.Str("munge_key", &s.munge_key, true);
  r.Str("conf_hash", &s.conf_hash);
  r.StrList("node_names", &s.node_names);
  r.Str("motd", &s.motd);
  r.StrMap("files", &s.files);
  r.Int("stand_in_gpus", &s.stand_in_gpus);
  r.Str("gpu_device_dir", &s.gpu_device_dir);
  r.Str("avoid_start_time", &s.avoid_start_time);
  r.StrMap("hosts", &s.hosts);
  r.Str("ssh_host_key", &s.ssh_host_key);
  r.Str("ssh_known_hosts", &s.ssh_known_hosts);
  r.Bool("accounting", &s.accounting);
  r.Bool("hold", &s.hold);
  return r.Done(std::move(s));
}
Json SlurmRole::ToJson() const {
  Json j{{"role", role},
         {"node_name", node_name},
         {"controller_addr", controller_addr},
         {"munge_key", munge_key},
         {"conf_hash", conf_hash},
         {"node_names", node_names},
         {"motd", motd}};
  if (!files.empty()) j["files"] = files;
  if (stand_in_gpus > 0) j["stand_in_gpus"] = stand_in_gpus;
  if (!gpu_device_dir.empty()) j["gpu_device_dir"] = gpu_device_dir;
  if (!avoid_start_time.empty()) j["avoid_start_time"] = avoid_start_time;
  if (!hosts.empty()) j["hosts"] = hosts;
  if (!ssh_host_key.empty()) j["ssh_host_key"] = ssh_host_key;
  if (!ssh_known_hosts.empty()) j["ssh_known_hosts"] = ssh_known_hosts;
  if (accounting) j["accounting"] = true;
  if (hold) j["hold"] = true;
  return Typed(kType, std::move(j));
}

StatusOr<Reprovision> Reprovision::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  return r.Done(Reprovision{});
}
Json Reprovision::ToJson() const { return Typed(kType); }

StatusOr<Error> Error::FromJson(const Json& j) {
  Reader r(j, {kType, ""});
  r.Type(kType);
  Error e;
  r.Str("frame_type", &e.frame_type);
  r.Str("message", &e.message, true);
  return r.Done(std::move(e));
}
Json Error::ToJson() const {
  return Typed(kType, Json{{"frame_type", frame_type}, {"message", message}});
}

bool AsksForAction(const HealthCheck& c) {
  return (c.result == "fail" || c.result == "timeout") &&
         (c.verdict == "Reboot" || c.verdict == "Replace");
}

}  // namespace hpod::api::agentproto
