#include "hpod/controlplane/agent_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "hpod/api/states.h"
#include "hpod/base/crypto.h"
#include "hpod/controlplane/agent_service_internal.h"
#include "hpod/controlplane/events.h"
#include "hpod/controlplane/ids.h"
#include "hpod/controlplane/lifecycle_bundle.h"
#include "hpod/controlplane/software_update.h"

namespace hpod::controlplane {

using nlohmann::json;
namespace proto = api::agentproto;

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
  ch->lane = lanes_.NewLane();
  ch->instance_id = node->instance_id;
  ch->cluster_id = node->cluster_id;
  ch->group_name = node->group_name;
  ch->cert_serial = request.peer_cert_serial_hex;
  ch->cert_cn = request.peer_cert_cn;
  if (bootstrapped) {
    StatusOr<std::string> secret = IssueCredential(*node);
    if (!secret.ok()) {
      return RefuseUpgrade(503, "cannot record the node credential: " + secret.status().ToString());
    }
    ch->confirm_bootstrap = true;
    // Queued now, delivered as the first frame once the handshake completes.
    socket->Send(proto::Credential{*secret}.ToJson().dump(), false);
  } else if (!ch->cert_serial.empty()) {
    // A network agent registered when it joined; its certificate, checked above,
    // serves this node. Its record is made here, its hello confirms it.
    if (Status s = PutAgentRecord(*node, /*credential_hash=*/""); !s.ok()) {
      return RefuseUpgrade(503, "cannot record the node's agent: " + s.ToString());
    }
    ch->confirm_bootstrap = true;
  }
  {
    MutexLock lock(mu_);
    if (shut_down_) return RefuseUpgrade(503, "hpodd is shutting down");
    static uint64_t serial = 0;
    ch->serial = ++serial;
    ch->connected_at = clock_.SteadyNow();
    ch->connected_epoch = clock_.NowEpochSeconds();
    disconnected_at_.erase(ch->instance_id);
    auto old = channels_.find(ch->instance_id);
    if (old != channels_.end()) old->second->socket->Close("replaced by a new connection");
    channels_[ch->instance_id] = ch;
    ch->health = &health_[ch->instance_id];
  }
  spdlog::info("agent of {} connected ({})", ch->instance_id,
               bootstrapped ? "bootstrap" : "credential");
  http::WebSocketCallbacks cb;
  cb.on_message = [this, ch](http::WebSocketMessage m) { OnChannelMessage(ch, m); };
  cb.on_progress = [this, ch] { NoteRead(ch); };
  // After the messages still queued; inline once the lanes are shut down.
  cb.on_close = [this, ch] {
    if (!lanes_.Post(ch->lane, [this, ch] { OnChannelClosed(ch); })) OnChannelClosed(ch);
  };
  return cb;
}

bool AgentService::IsConnected(const std::string& instance_id) const {
  MutexLock lock(mu_);
  return channels_.count(instance_id) > 0;
}

void AgentService::Disconnect(const std::string& instance_id, const std::string& reason) {
  std::shared_ptr<http::WebSocket> socket;
  {
    MutexLock lock(mu_);
    auto it = channels_.find(instance_id);
    if (it == channels_.end()) return;
    socket = it->second->socket;
  }
  socket->Close(reason);
}

void AgentService::OnChannelClosed(const std::shared_ptr<Channel>& ch) {
  std::vector<std::shared_ptr<PendingCommand>> orphaned;
  bool current = false;
  {
    MutexLock lock(mu_);
    auto it = channels_.find(ch->instance_id);
    if (it != channels_.end() && it->second->serial == ch->serial) {
      current = true;
      channels_.erase(it);
      disconnected_at_[ch->instance_id] = clock_.SteadyNow();
      // The table is only as live as its reporter's connection.
      auto nodes = slurm_nodes_.find(ch->cluster_id);
      if (nodes != slurm_nodes_.end() && nodes->second->reporter == ch->instance_id) {
        slurm_nodes_.erase(nodes);
      }
    }
    for (auto& [id, cmd] : commands_) {
      if (cmd->instance_id == ch->instance_id && !cmd->done) orphaned.push_back(cmd);
    }
  }
  for (auto& cmd : orphaned) {
    MutexLock lock(mu_);
    if (cmd->done) continue;
    cmd->done = true;
    cmd->result.set_value(CommandResult{-1, false, "", "the node's agent disconnected"});
  }
  FailTrainingQueries(ch);
  spdlog::info("agent of {} disconnected", ch->instance_id);
  // A connection replaced by a newer one (or closed by Shutdown, which empties the
  // table first) is no news: the node is still, or no longer needs to be, connected.
  if (!current) return;
  Status s = store_.Write([&](store::WriteTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, tx.GetCluster(ch->cluster_id));
    return RecordEvent(tx, clock_, c, NodeSubject(ch->group_name, ch->instance_id),
                       EventLevel::kWarn, "hpod agent on the instance disconnected");
  });
  if (!s.ok() && s.code() != StatusCode::kNotFound) {
    spdlog::warn("disconnect event for {}: {}", ch->instance_id, s.ToString());
  }
  // The reconciler decides what a silent node means (its liveness changed).
  if (on_change_) on_change_(ch->cluster_id);
}

void AgentService::HandleHello(const std::shared_ptr<Channel>& ch, const json& m) {
  // The handshake: an agent hpodd cannot understand is refused and disconnected
  // (it retries with backoff; an upgrade on either side lets it in).
  auto hello = proto::Hello::FromJson(m);
  std::string refusal;
  if (!hello.ok()) {
    refusal = "hpodd speaks agent protocol version " + std::to_string(proto::kProtocolVersion) +
              " and cannot read this hello: " + std::string(hello.status().message());
  } else if (hello->protocol_version != proto::kProtocolVersion) {
    refusal = "agent protocol version " + std::to_string(hello->protocol_version) +
              " is not supported: hpodd speaks version " + std::to_string(proto::kProtocolVersion) +
              " (upgrade the agent or hpodd so that they match)";
  }
  if (!refusal.empty()) {
    Refuse(ch, std::string(proto::Hello::kType), refusal);
    ch->socket->Close("agent protocol mismatch");
    return;
  }
  bool confirm = ch->confirm_bootstrap;
  ch->confirm_bootstrap = false;
  Status s = store_.Write([&](store::WriteTx& tx) -> Status {
    auto existing = tx.GetAgent(ch->instance_id);
    if (!existing.ok()) {
      // Connected with a credential but the record is gone: the node was deleted.
      return existing.status();
    }
    store::AgentRecord a = *existing;
    a.agent_version = hello->agent_version;
    if (confirm && a.registered_time == 0) a.registered_time = clock_.NowEpochSeconds();
    HPOD_RETURN_IF_ERROR(tx.PutAgent(a));
    // What the node runs (software_update.h); an agent older than the field says nothing.
    if (hello->software.empty()) return OkStatus();
    return RecordNodeSoftware(tx, clock_, a.cluster_id, a.instance_id, hello->software);
  });
  if (!s.ok()) spdlog::warn("hello from {}: {}", ch->instance_id, s.ToString());
  if (hello->lifecycle) HandleLifecycle(ch, *hello->lifecycle);
}

void AgentService::HandleLifecycle(const std::shared_ptr<Channel>& ch,
                                   const proto::LifecycleState& lc) {
  const std::string& state = lc.state;  // one of the four: FromJson checked it
  const std::string& message = lc.message;
  {
    MutexLock lock(mu_);
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
    const bool failed = api::Is(state, api::LifecycleState::kFailed);
    return RecordEvent(tx, clock_, c, NodeSubject(ch->group_name, ch->instance_id),
                       failed ? EventLevel::kError : EventLevel::kInfo, text);
  });
  if (!s.ok()) {
    spdlog::warn("lifecycle from {}: {}", ch->instance_id, s.ToString());
    return;
  }
  {
    MutexLock lock(mu_);
    ch->lifecycle_state = state;
  }
  if (changed && on_change_) on_change_(ch->cluster_id);
}

void AgentService::HandleProvisioningParameters(const std::shared_ptr<Channel>& ch,
                                                const proto::ProvisioningParameters& m) {
  // Roles must not change under a running cluster, so the first file reported
  // wins.
  bool stored = false;
  const json& content = m.content;
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

bool AgentService::Send(const std::string& instance_id, const json& message) {
  std::shared_ptr<Channel> ch;
  {
    MutexLock lock(mu_);
    auto it = channels_.find(instance_id);
    if (it == channels_.end()) return false;
    ch = it->second;
  }
  return ch->socket->Send(message.dump(), false);
}

bool AgentService::SendUnlessRecent(const std::string& instance_id, const json& message,
                                    std::chrono::milliseconds resend_after) {
  std::string text = message.dump();
  const size_t hash = std::hash<std::string>()(text);
  const auto now = clock_.SteadyNow();
  std::shared_ptr<Channel> ch;
  {
    MutexLock lock(mu_);
    auto it = channels_.find(instance_id);
    if (it == channels_.end()) return false;
    ch = it->second;
    // A hash collision would hold back a different message for one interval at
    // most: it is sent when the interval is over.
    Channel::Sent& last = ch->recent_sends(*this)[message.value("type", "")];
    if (last.hash == hash && now - last.at < resend_after) return false;
    last = {hash, now};
  }
  return ch->socket->Send(std::move(text), false);
}

std::shared_ptr<const std::string> AgentService::ConfigFor(const std::shared_ptr<Channel>& ch) {
  // A snapshot at most this old: what a node asking this much earlier would get.
  constexpr std::chrono::milliseconds kConfigReuse{1000};
  // A `config_pending` delays the node by at most this much more than its retry.
  constexpr std::chrono::milliseconds kPendingReuse{250};
  const auto key = std::make_pair(ch->cluster_id, ch->group_name);
  auto cached = [&]() -> std::shared_ptr<const std::string> {
    const auto now = clock_.SteadyNow();
    MutexLock lock(config_mu_);
    auto it = configs_.find(key);
    // A node the snapshot does not list yet (a replacement launched since) gets a
    // new one: its scripts find themselves in resource_config.json.
    if (it != configs_.end() &&
        (it->second.pending
             ? now - it->second.built < kPendingReuse
             : now - it->second.built < kConfigReuse && it->second.listed.count(ch->instance_id))) {
      return it->second.message;
    }
    return nullptr;
  };
  if (auto message = cached()) return message;
  // One build of a group's config at a time: its nodes that asked meanwhile get
  // the one just made.
  std::shared_ptr<Mutex> build;
  {
    MutexLock lock(config_mu_);
    auto& slot = builds_[key];
    if (!slot) slot = std::make_shared<Mutex>();
    build = slot;
  }
  MutexLock building(*build);
  if (auto message = cached()) return message;
  const auto now = clock_.SteadyNow();
  BuiltConfig entry;
  json built = BuildConfig(ch->instance_id, &entry.listed);
  entry.message = std::make_shared<const std::string>(built.dump());
  entry.built = now;
  entry.pending = built.value("type", "") != proto::Config::kType;
  MutexLock lock(config_mu_);
  // Old entries go with the next build (deleted clusters, removed groups).
  std::erase_if(configs_, [&](const auto& e) { return now - e.second.built >= kConfigReuse; });
  std::erase_if(builds_,
                [&](const auto& e) { return e.first != key && e.second.use_count() == 1; });
  return configs_.insert_or_assign(key, std::move(entry)).first->second.message;
}

json AgentService::BuildConfig(const std::string& instance_id,
                               std::unordered_set<std::string>* listed) {
  json out;
  Status s = store_.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(store::NodeRecord self, tx.GetNodeById(instance_id));
    HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, tx.GetCluster(self.cluster_id));
    HPOD_ASSIGN_OR_RETURN(auto groups, tx.ListGroups(c.id));
    HPOD_ASSIGN_OR_RETURN(auto nodes, tx.ListNodes(c.id));
    json igs = json::array();
    std::string self_type;
    std::optional<proto::LifecycleConfig> lifecycle;
    for (const auto& g : groups) {
      json instances = json::array();
      for (const auto& n : nodes) {
        if (n.group_name != g.name || n.remove || n.status == "Failure") continue;
        // Scripts find themselves by their address: every node that will be in the
        // cluster must have one before any script runs.
        if (n.private_ip.empty()) {
          // Every node of the cluster asks again after this: 300 ms for a small
          // cluster, longer for a large one (2.5 s at 10,000 nodes), so that the
          // nodes waiting do not keep hpodd from launching the rest.
          int64_t retry_ms = std::clamp<int64_t>(static_cast<int64_t>(nodes.size()) / 4, 300, 5000);
          out = proto::ConfigPending{retry_ms}.ToJson();
          listed->clear();
          return OkStatus();
        }
        listed->insert(n.instance_id);
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
        lifecycle = proto::LifecycleConfig{lcc.value("SourceS3Uri", ""), lcc.value("OnCreate", ""),
                                           options_.lifecycle_timeout.count(), std::nullopt};
        if (options_.ship_file_sources && lifecycle->source_s3_uri.rfind("file://", 0) == 0) {
          // Read at each config: the node runs the scripts as they are now. Gone
          // since CreateCluster checked it: the node's own fetch fails and says so.
          auto bundle = ReadLifecycleBundle(lifecycle->source_s3_uri, lifecycle->on_create);
          if (bundle.ok()) {
            lifecycle->files = std::move(bundle->files);
            lifecycle->executable.assign(bundle->executable.begin(), bundle->executable.end());
          } else {
            spdlog::warn("config for {}: {}", instance_id, bundle.status().message());
          }
        }
        if (!options_.s3.endpoint.empty()) {
          lifecycle->s3 =
              proto::S3Config{options_.s3.endpoint, options_.s3.region, options_.s3.access_key_id,
                              options_.s3.secret_access_key, options_.s3.relay_socket};
        }
      }
    }
    proto::Config config;
    config.heartbeat_interval_ms = options_.heartbeat_interval.count();
    config.lifecycle = std::move(lifecycle);
    // Roles declared through the API reach the scripts as HyperPod's file.
    config.provisioning = ProvisioningParametersFor(groups);
    config.resource_config = {{"ClusterConfig", {{"ClusterArn", c.arn}, {"ClusterName", c.name}}},
                              {"InstanceGroups", igs}};
    out = config.ToJson();
    return OkStatus();
  });
  if (!s.ok()) {
    spdlog::warn("config for {}: {}", instance_id, s.ToString());
    return proto::ConfigPending{1000}.ToJson();
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
    MutexLock lock(mu_);
    auto it = channels_.find(instance_id);
    if (it == channels_.end()) {
      return FailedPreconditionError("the agent of node " + instance_id + " is not connected");
    }
    ch = it->second;
    commands_[id] = cmd;
  }
  auto future = cmd->result.get_future();
  proto::Command m;
  m.id = id;
  m.argv = argv;
  m.timeout_ms = timeout.count();
  bool sent = ch->socket->Send(m.ToJson().dump(), false);
  // The agent enforces `timeout`; the margin covers the round trip.
  bool ready =
      sent && future.wait_for(timeout + std::chrono::seconds(5)) == std::future_status::ready;
  {
    MutexLock lock(mu_);
    commands_.erase(id);
  }
  if (!ready) {
    return DeadlineExceededError("no result from the agent of " + instance_id + " within " +
                                 std::to_string(timeout.count()) + " ms");
  }
  return future.get();
}

void AgentService::Shutdown() {
  std::map<std::string, std::shared_ptr<Channel>> channels;
  std::map<std::string, std::shared_ptr<Session>> sessions;
  {
    MutexLock lock(mu_);
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
  // No handler runs after this; a close still to come is handled inline.
  lanes_.Shutdown();
}

}  // namespace hpod::controlplane
