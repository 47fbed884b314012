#include "hpod/controlplane/agent_service.h"

#include <spdlog/spdlog.h>

#include "hpod/base/crypto.h"
#include "hpod/controlplane/agent_service_internal.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/ids.h"

namespace hpod::controlplane {

using nlohmann::json;

namespace {

constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
constexpr size_t kMaxLogChunk = 64 * 1024;

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

AgentService::AgentService(store::Store& store, NodeLogs& logs, const Clock& clock,
                           AgentServiceOptions options, std::string bootstrap_key,
                           std::function<void(const std::string&)> on_change)
    : store_(store),
      logs_(logs),
      clock_(clock),
      options_(std::move(options)),
      bootstrap_key_(std::move(bootstrap_key)),
      on_change_(std::move(on_change)) {}

AgentService::~AgentService() { Shutdown(); }

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

http::UpgradeResult AgentService::HandleAgentUpgrade(const http::Request& request,
                                                     std::shared_ptr<http::WebSocket> socket) {
  std::string path(request.Path());
  const std::string kSessions = "/agent/v1/sessions/";
  bool is_channel = path == "/agent/v1/channel";
  if (!is_channel && path.rfind(kSessions, 0) != 0) return RefuseUpgrade(404, "no such endpoint");
  bool bootstrapped = false;
  auto node = AuthenticateAgent(request, is_channel, &bootstrapped);
  if (!node.ok()) {
    int status = node.status().code() == StatusCode::kNotFound ? 404 : 401;
    spdlog::warn("agent upgrade refused: {}", node.status().message());
    return RefuseUpgrade(status, std::string(node.status().message()));
  }
  if (!is_channel) {
    return AgentSessionUpgrade(path.substr(kSessions.size()), node->instance_id, socket);
  }

  auto ch = std::make_shared<Channel>();
  ch->socket = socket;
  ch->instance_id = node->instance_id;
  ch->cluster_id = node->cluster_id;
  ch->group_name = node->group_name;
  if (bootstrapped) {
    std::string secret = RandomString(43, kAlnum);
    Status s = store_.Write([&](store::WriteTx& tx) -> Status {
      store::AgentRecord a;
      auto existing = tx.GetAgent(node->instance_id);
      if (existing.ok()) a = *existing;
      a.instance_id = node->instance_id;
      a.cluster_id = node->cluster_id;
      a.credential_hash = HashSecret(secret);
      return tx.PutAgent(a);
    });
    if (!s.ok()) return RefuseUpgrade(503, "cannot record the node credential: " + s.ToString());
    ch->confirm_bootstrap = true;
    // Queued now, delivered as the first frame once the handshake completes.
    socket->Send(json{{"type", "credential"}, {"secret", secret}}.dump(), false);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return RefuseUpgrade(503, "hpodd is shutting down");
    static uint64_t serial = 0;
    ch->serial = ++serial;
    auto old = channels_.find(ch->instance_id);
    if (old != channels_.end()) old->second->socket->Close("replaced by a new connection");
    channels_[ch->instance_id] = ch;
  }
  spdlog::info("agent of {} connected ({})", ch->instance_id,
               bootstrapped ? "bootstrap" : "credential");
  http::WebSocketCallbacks cb;
  cb.on_message = [this, ch](http::WebSocketMessage m) { OnChannelMessage(ch, m); };
  cb.on_close = [this, ch] { OnChannelClosed(ch); };
  return cb;
}

void AgentService::OnChannelClosed(const std::shared_ptr<Channel>& ch) {
  std::vector<std::shared_ptr<PendingCommand>> orphaned;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = channels_.find(ch->instance_id);
    if (it != channels_.end() && it->second->serial == ch->serial) {
      channels_.erase(it);
      // The table is only as live as its reporter's connection.
      auto nodes = slurm_nodes_.find(ch->cluster_id);
      if (nodes != slurm_nodes_.end() && nodes->second.reporter == ch->instance_id) {
        slurm_nodes_.erase(nodes);
      }
    }
    for (auto& [id, cmd] : commands_) {
      if (cmd->instance_id == ch->instance_id && !cmd->done) orphaned.push_back(cmd);
    }
  }
  for (auto& cmd : orphaned) {
    std::lock_guard<std::mutex> lock(mu_);
    if (cmd->done) continue;
    cmd->done = true;
    CommandResult r;
    r.exit_code = -1;
    r.stderr_data = "the node's agent disconnected";
    cmd->result.set_value(r);
  }
  spdlog::info("agent of {} disconnected", ch->instance_id);
}

void AgentService::OnChannelMessage(const std::shared_ptr<Channel>& ch,
                                    const http::WebSocketMessage& m) {
  json msg = json::parse(m.data, nullptr, false);
  if (msg.is_discarded() || !msg.is_object() || !msg.contains("type") || !msg["type"].is_string()) {
    spdlog::warn("agent of {} sent a malformed frame; closing", ch->instance_id);
    ch->socket->Close("malformed frame");
    return;
  }
  const std::string type = msg["type"];
  try {
    if (type == "hello") {
      HandleHello(ch, msg);
    } else if (type == "heartbeat") {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ch->last_heartbeat = clock_.SteadyNow();
      }
      if (msg.contains("lifecycle") && msg["lifecycle"].is_object()) {
        HandleLifecycle(ch, msg["lifecycle"]);
      }
      if (msg.contains("slurm") && msg["slurm"].is_object()) HandleSlurmState(ch, msg["slurm"]);
    } else if (type == "lifecycle") {
      HandleLifecycle(ch, msg);
    } else if (type == "slurm_state") {
      HandleSlurmState(ch, msg);
    } else if (type == "slurm_nodes") {
      HandleSlurmNodes(ch, msg);
    } else if (type == "provisioning_parameters") {
      HandleProvisioningParameters(ch, msg);
    } else if (type == "get_config") {
      ch->socket->Send(BuildConfig(ch->instance_id).dump(), false);
    } else if (type == "log") {
      std::string stream = msg.value("stream", "");
      std::string data = msg.value("data", "");
      if (data.size() > kMaxLogChunk) data.resize(kMaxLogChunk);
      Status s = logs_.Append(ch->cluster_id, ch->instance_id, stream, data);
      if (!s.ok()) spdlog::warn("log from {}: {}", ch->instance_id, s.ToString());
    } else if (type == "command_result") {
      std::string id = msg.value("id", "");
      std::lock_guard<std::mutex> lock(mu_);
      auto it = commands_.find(id);
      if (it == commands_.end() || it->second->done || it->second->instance_id != ch->instance_id) {
        return;
      }
      CommandResult r;
      r.exit_code = msg.value("exit_code", -1);
      r.timed_out = msg.value("timed_out", false);
      r.stdout_data = msg.value("stdout", "");
      r.stderr_data = msg.value("stderr", "");
      if (std::string err = msg.value("error", ""); !err.empty()) r.stderr_data = err;
      it->second->done = true;
      it->second->result.set_value(std::move(r));
    } else {
      spdlog::debug("agent of {} sent unknown frame type {}", ch->instance_id, type);
    }
  } catch (const json::exception& e) {
    // A wrongly typed field costs the frame, not the daemon.
    spdlog::warn("agent of {} sent a bad {} frame: {}", ch->instance_id, type, e.what());
  }
}

void AgentService::HandleHello(const std::shared_ptr<Channel>& ch, const json& m) {
  std::string version = m.value("agent_version", "");
  bool confirm = ch->confirm_bootstrap;
  ch->confirm_bootstrap = false;
  Status s = store_.Write([&](store::WriteTx& tx) -> Status {
    auto existing = tx.GetAgent(ch->instance_id);
    if (!existing.ok()) {
      // Connected with a credential but the record is gone: the node was deleted.
      return existing.status();
    }
    store::AgentRecord a = *existing;
    a.agent_version = version;
    if (confirm && a.registered_time == 0) a.registered_time = clock_.NowEpochSeconds();
    return tx.PutAgent(a);
  });
  if (!s.ok()) spdlog::warn("hello from {}: {}", ch->instance_id, s.ToString());
  if (m.contains("lifecycle") && m["lifecycle"].is_object()) HandleLifecycle(ch, m["lifecycle"]);
}

void AgentService::HandleLifecycle(const std::shared_ptr<Channel>& ch, const json& lc) {
  std::string state = lc.value("state", "");
  if (state != "NotStarted" && state != "Running" && state != "Succeeded" && state != "Failed") {
    return;
  }
  std::string message = lc.value("message", "");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ch->lifecycle_state == state) return;  // heartbeats repeat it
  }
  bool changed = false;
  Status s = store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::AgentRecord a, tx.GetAgent(ch->instance_id));
    if (a.lifecycle_state == state && a.lifecycle_message == message) return OkStatus();
    a.lifecycle_state = state;
    a.lifecycle_message = message;
    HPOD_RETURN_IF_ERROR(tx.PutAgent(a));
    changed = true;
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, tx.GetCluster(ch->cluster_id));
    std::string text = "Lifecycle scripts " + state;
    if (!message.empty()) text += ": " + message;
    return RecordEvent(tx, clock_, c, NodeSubject(ch->group_name, ch->instance_id),
                       state == "Failed" ? EventLevel::kError : EventLevel::kInfo, text);
  });
  if (!s.ok()) {
    spdlog::warn("lifecycle from {}: {}", ch->instance_id, s.ToString());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ch->lifecycle_state = state;
  }
  if (changed && on_change_) on_change_(ch->cluster_id);
}

void AgentService::HandleSlurmState(const std::shared_ptr<Channel>& ch, const json& m) {
  json state = {{"role", m.value("role", "")},
                {"conf_hash", m.value("conf_hash", "")},
                {"daemon", m.value("daemon", "")},
                {"restarts", m.value("restarts", 0)},
                {"message", m.value("message", "")}};
  std::string before;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ch->slurm_state == state) return;  // heartbeats repeat it
    if (ch->slurm_state.is_object()) before = ch->slurm_state.value("daemon", "");
    ch->slurm_state = state;
  }
  const std::string daemon = state["daemon"];
  const bool trouble = daemon == "restarting" || daemon == "failed";
  const bool recovered = daemon == "running" && (before == "restarting" || before == "failed");
  if (trouble || recovered) {
    std::string text =
        trouble ? "Slurm: " + state["message"].get<std::string>()
                : "Slurm: the node's " +
                      std::string(state["role"] == "controller" ? "slurmctld" : "Slurm daemons") +
                      " running again after " + std::to_string(state["restarts"].get<int>()) +
                      " restart(s)";
    Status s = store_.Write([&](store::WriteTx& tx) -> Status {
      HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, tx.GetCluster(ch->cluster_id));
      return RecordEvent(tx, clock_, c, NodeSubject(ch->group_name, ch->instance_id),
                         trouble ? EventLevel::kWarn : EventLevel::kInfo, text);
    });
    if (!s.ok()) spdlog::warn("slurm state of {}: {}", ch->instance_id, s.ToString());
  }
  if (on_change_) on_change_(ch->cluster_id);
}

void AgentService::HandleSlurmNodes(const std::shared_ptr<Channel>& ch, const json& m) {
  if (!m.contains("nodes") || !m["nodes"].is_array()) return;
  // Only the controller's table counts: hpod drains, removes and declares nodes
  // Running by it, so another node's agent must not be able to stand in for it.
  std::string controller_group;
  Status s = store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(ch->cluster_id));
    HPOD_ASSIGN_OR_RETURN(controller_group, ControllerGroup(tx, ch->cluster_id, groups));
    return OkStatus();
  });
  if (!s.ok() || controller_group.empty() || controller_group != ch->group_name) {
    spdlog::warn("ignoring a Slurm node table from {} (group {}), which is not the controller",
                 ch->instance_id, ch->group_name);
    return;
  }
  SlurmNodesReport report;
  report.reporter = ch->instance_id;
  for (const auto& n : m["nodes"]) {
    if (n.is_object()) report.nodes.push_back(slurm::SlurmNodeState::FromJson(n));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    slurm_nodes_[ch->cluster_id] = std::move(report);
  }
  if (on_change_) on_change_(ch->cluster_id);
}

void AgentService::HandleProvisioningParameters(const std::shared_ptr<Channel>& ch, const json& m) {
  // Roles must not change under a running cluster, so the first file reported
  // wins.
  bool stored = false;
  const json content = m.value("content", json());
  Status s = store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_RETURN_IF_ERROR(tx.GetCluster(ch->cluster_id).status());  // not deleted meanwhile
    auto existing = tx.GetSetting(ProvisioningParametersSetting(ch->cluster_id));
    // A file replaces an earlier "no file" (groups may use different sources);
    // a file, once there, stays.
    if (existing.ok() && (*existing != "null" || content.is_null())) return OkStatus();
    if (!existing.ok() && existing.status().code() != StatusCode::kNotFound) {
      return existing.status();
    }
    stored = true;
    return tx.PutSetting(ProvisioningParametersSetting(ch->cluster_id), content.dump());
  });
  if (!s.ok()) spdlog::warn("provisioning parameters from {}: {}", ch->instance_id, s.ToString());
  if (stored && on_change_) on_change_(ch->cluster_id);
}

json AgentService::SlurmState(const std::string& instance_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = channels_.find(instance_id);
  if (it == channels_.end()) return nullptr;
  return it->second->slurm_state;
}

std::optional<SlurmNodesReport> AgentService::SlurmNodes(const std::string& cluster_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slurm_nodes_.find(cluster_id);
  if (it == slurm_nodes_.end()) return std::nullopt;
  return it->second;
}

bool AgentService::Send(const std::string& instance_id, const json& message) {
  std::shared_ptr<Channel> ch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = channels_.find(instance_id);
    if (it == channels_.end()) return false;
    ch = it->second;
  }
  return ch->socket->Send(message.dump(), false);
}

json AgentService::BuildConfig(const std::string& instance_id) {
  json out;
  Status s = store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::NodeRecord self, tx.GetNodeById(instance_id));
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, tx.GetCluster(self.cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(c.id));
    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(c.id));
    json igs = json::array();
    std::string self_type;
    json lifecycle = nullptr;
    for (const auto& g : groups) {
      json instances = json::array();
      for (const auto& n : nodes) {
        if (n.group_name != g.name || n.remove || n.status == "Failure") continue;
        // Scripts find themselves by their address: every node that will be in the
        // cluster must have one before any script runs.
        if (n.private_ip.empty()) {
          out = {{"type", "config_pending"}, {"retry_ms", 300}};
          return OkStatus();
        }
        instances.push_back({{"InstanceName", g.name + "-" + std::to_string(n.ordinal)},
                             {"CustomerIpAddress", n.private_ip},
                             {"InstanceId", n.instance_id}});
      }
      json ig = {{"Name", g.name},
                 {"InstanceType", g.spec.value("InstanceType", "")},
                 {"Instances", instances.empty() ? json(nullptr) : instances}};
      igs.push_back(ig);
      if (g.name == self.group_name && g.spec.contains("LifeCycleConfig")) {
        const json& lcc = g.spec["LifeCycleConfig"];
        lifecycle = {{"source_s3_uri", lcc.value("SourceS3Uri", "")},
                     {"on_create", lcc.value("OnCreate", "")},
                     {"timeout_s", options_.lifecycle_timeout.count()},
                     {"s3", nullptr}};
        if (!options_.s3.endpoint.empty()) {
          lifecycle["s3"] = {{"endpoint", options_.s3.endpoint},
                             {"region", options_.s3.region},
                             {"access_key_id", options_.s3.access_key_id},
                             {"secret_access_key", options_.s3.secret_access_key},
                             {"unix_socket", options_.s3.relay_socket}};
        }
      }
    }
    out = {{"type", "config"},
           {"heartbeat_interval_ms", options_.heartbeat_interval.count()},
           {"lifecycle", lifecycle},
           // Roles declared through the API reach the scripts as HyperPod's file.
           {"provisioning", ProvisioningParametersFor(groups)},
           {"resource_config",
            {{"ClusterConfig", {{"ClusterArn", c.arn}, {"ClusterName", c.name}}},
             {"InstanceGroups", igs}}}};
    return OkStatus();
  });
  if (!s.ok()) {
    spdlog::warn("config for {}: {}", instance_id, s.ToString());
    return {{"type", "config_pending"}, {"retry_ms", 1000}};
  }
  return out;
}

StatusOr<CommandResult> AgentService::RunCommand(const std::string& instance_id,
                                                 const std::vector<std::string>& argv,
                                                 std::chrono::milliseconds timeout) {
  auto cmd = std::make_shared<PendingCommand>();
  cmd->instance_id = instance_id;
  std::string id = "c-" + RandomString(16, "0123456789abcdef");
  std::shared_ptr<Channel> ch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = channels_.find(instance_id);
    if (it == channels_.end()) {
      return FailedPreconditionError("the agent of node " + instance_id + " is not connected");
    }
    ch = it->second;
    commands_[id] = cmd;
  }
  auto future = cmd->result.get_future();
  json m = {{"type", "command"}, {"id", id}, {"argv", argv}, {"timeout_ms", timeout.count()}};
  bool sent = ch->socket->Send(m.dump(), false);
  // The agent enforces `timeout`; the margin covers the round trip.
  bool ready =
      sent && future.wait_for(timeout + std::chrono::seconds(5)) == std::future_status::ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands_.erase(id);
  }
  if (!ready) {
    return DeadlineExceededError("no result from the agent of " + instance_id + " within " +
                                 std::to_string(timeout.count()) + " ms");
  }
  return future.get();
}

AgentLiveness AgentService::Liveness(const std::string& instance_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  AgentLiveness l;
  auto it = channels_.find(instance_id);
  if (it == channels_.end()) return l;
  l.connected = true;
  l.last_heartbeat = it->second->last_heartbeat;
  return l;
}

void AgentService::Shutdown() {
  std::map<std::string, std::shared_ptr<Channel>> channels;
  std::map<std::string, std::shared_ptr<Session>> sessions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    channels.swap(channels_);
    sessions.swap(sessions_);
  }
  for (auto& [id, ch] : channels) ch->socket->Close("hpodd is shutting down");
  for (auto& [id, s] : sessions) {
    if (s->client) s->client->Close("hpodd is shutting down");
    if (s->agent) s->agent->Close("hpodd is shutting down");
  }
}

}  // namespace hpod::controlplane
