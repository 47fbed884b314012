#include "sim_agent.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "hpod/agent/channel.h"
#include "hpod/base/crypto.h"

namespace hpod::nodesim {

namespace proto = api::agentproto;
using Json = nlohmann::json;
using std::chrono::milliseconds;

namespace {

// The real agent's checks on a node without GPUs (src/agent/health/), in its order.
const char* const kChecks[] = {"disk:/", "disk:/fsx", "memory", "slurm", "flag_file", "kernel_log"};

double EpochNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A `config` message without its resource_config, which lists every node of the
// cluster (10,000 nodes: half a megabyte for each node) and which the simulator
// does not use: reading it for every node would make the simulator's one thread,
// not hpodd, the bottleneck, and delay its heartbeats. hpodd writes an object's
// keys in order (nlohmann::json), so "resource_config" comes just before "type":
// the text before it, closed with the type, is the rest of the message. Any
// other message, or one not laid out so, comes back whole.
std::string ConfigWithoutResources(const std::string& data) {
  static const std::string kKey = "\"resource_config\":";
  static const std::string kEnd = "\"type\":\"config\"}";
  if (data.size() < 64 * 1024 || !data.ends_with(kEnd)) return data;
  size_t at = data.find(kKey);
  if (at == std::string::npos) return data;
  return data.substr(0, at) + kEnd;
}

// The tag of a heartbeat in the outbox (any other frame's is 0).
constexpr uint64_t kHeartbeatTag = 1;

}  // namespace

std::optional<NodeConfig> NodeConfig::FromJson(const Json& j) {
  if (!j.is_object()) return std::nullopt;
  NodeConfig c;
  c.instance_id = j.value("instance_id", "");
  c.cluster_id = j.value("cluster_id", "");
  c.endpoint = j.value("endpoint", "");
  c.bootstrap_token = j.value("bootstrap_token", "");
  c.join_token = j.value("join_token", "");
  c.hostname = j.value("hostname", "");
  c.private_ip = j.value("private_ip", "");
  c.group = j.value("group", "");
  c.instance_type = j.value("instance_type", "");
  c.boot = j.value("boot", 0);
  if (c.instance_id.empty() || c.endpoint.empty()) return std::nullopt;
  return c;
}

SimAgent::SimAgent(SimWorld& world, NodeConfig config)
    : world_(world), config_(std::move(config)) {}

template <typename F>
void SimAgent::Later(milliseconds delay, F fn) {
  std::weak_ptr<SimAgent> weak = weak_from_this();
  world_.swarm().After(delay, [weak, fn = std::move(fn)]() mutable {
    if (auto self = weak.lock()) fn(*self);
  });
}

milliseconds SimAgent::JitteredWait(int failures, milliseconds initial, milliseconds max) {
  // As base/backoff.h with jitter: a uniform draw up to initial · 2^failures, at
  // most `max`; drawn from the simulator's seeded generator, so a run repeats.
  int64_t cap = initial.count();
  for (int i = 0; i < failures && cap < max.count(); ++i) cap *= 2;
  std::uniform_int_distribution<int64_t> wait(0, std::min(cap, max.count()));
  return milliseconds(wait(world_.rng()));
}

void SimAgent::Start() {
  const uint64_t process = ++process_;
  started_ = std::chrono::steady_clock::now();
  char id[40];
  std::snprintf(id, sizeof id, "%016llx%016llx", static_cast<unsigned long long>(world_.rng()()),
                static_cast<unsigned long long>(world_.rng()()));
  boot_id_ = id;
  seq_ = 0;
  have_config_ = false;
  // A new process starts the slurmd its disk has configured (after a reboot).
  if (lifecycle_.state == "Succeeded" && role_ == "compute" && !held_) {
    slurmd_started_ = 0;
    OnSlurm(Json());
  }
  Connect();
  // Beats start at a random point of the first interval, as agents started at
  // different moments would.
  std::uniform_int_distribution<int64_t> first(1, heartbeat_interval_.count());
  Later(milliseconds(first(world_.rng())), [process](SimAgent& a) { a.Beat(process); });
  Later(milliseconds(1000), [process](SimAgent& a) { a.PollSlurmNodes(process); });
}

void SimAgent::Connect() {
  if (dead_) return;
  if (network() && !joined_) return Join();
  // A network agent authenticates by its certificate alone.
  const bool bootstrap = !network() && secret_.empty();
  std::string authorization;
  if (!network()) {
    authorization = bootstrap ? "HpodBootstrap " + config_.bootstrap_token : "HpodNode " + secret_;
  }
  auto dial =
      agent::MakeDial(config_.endpoint, "/agent/v1/channel", config_.instance_id, authorization,
                      agent::ConnectTimeoutAfter(milliseconds(5000), failures_));
  if (dial.ok() && network()) {
    // As Channel::UseCertificate: hpodd's CA and the certificate + key file.
    agent::IdentityPaths identity = agent::NodeIdentityPaths(node_dir());
    dial->options.ca_file = identity.ca;
    dial->options.client_cert_file = identity.node;
    dial->options.client_key_file = identity.node;
  }
  if (!dial.ok()) {
    world_.Event({{"event", "bad_endpoint"},
                  {"instance_id", config_.instance_id},
                  {"message", dial.status().message()}});
    dead_ = true;
    return;
  }
  std::weak_ptr<SimAgent> weak = weak_from_this();
  const uint64_t attempt = ++attempt_;
  http::WebSocketSwarm::Callbacks cb;
  cb.on_open = [weak, attempt](Status s) {
    if (auto self = weak.lock(); self && self->attempt_ == attempt) self->OnOpen(s);
  };
  cb.on_message = [weak, attempt](http::WebSocketMessage m) {
    if (auto self = weak.lock(); self && self->attempt_ == attempt) self->OnMessage(m);
  };
  cb.on_close = [weak, attempt](std::string) {
    if (auto self = weak.lock(); self && self->attempt_ == attempt) self->OnClose();
  };
  open_ = false;
  awaiting_credential_ = bootstrap;
  conn_ = world_.swarm().Open(dial->url, dial->headers, dial->options, std::move(cb));
}

std::string SimAgent::node_dir() const {
  return (std::filesystem::path(world_.state_dir()) / config_.instance_id).string();
}

void SimAgent::Join() {
  if (joining_) return;
  joining_ = true;
  agent::JoinOptions o;
  o.server = config_.endpoint;
  o.token = config_.join_token;
  o.state_dir = node_dir();
  // A machine id of its own (32 hex digits, as /etc/machine-id), the same for
  // every boot of this instance: a replacement is a new machine.
  o.facts = {{"machine_id", HexEncode(Sha256(config_.instance_id)).substr(0, 32)},
             {"hostname", config_.hostname},
             {"simulated", true}};
  std::weak_ptr<SimAgent> weak = weak_from_this();
  SimWorld* world = &world_;
  world_.Blocking([world, weak, o = std::move(o)] {
    const auto start = std::chrono::steady_clock::now();
    // As the real agent's EnsureJoined: a disk that holds a join (a reboot)
    // joins no more.
    StatusOr<agent::JoinedState> joined = agent::LoadJoinedState(o.state_dir);
    if (joined.status().code() == StatusCode::kNotFound) joined = agent::JoinHpodd(o);
    const int64_t took =
        std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start).count();
    world->swarm().Post([weak, joined = std::move(joined), took] {
      if (auto self = weak.lock()) self->OnJoined(joined, took);
    });
  });
}

void SimAgent::OnJoined(const StatusOr<agent::JoinedState>& joined, int64_t took_ms) {
  joining_ = false;
  if (dead_) return;
  SimCounters& c = world_.counters();
  if (!joined.ok() && joined.status().code() == StatusCode::kUnavailable) {
    // As the real agent (cmd/hpod-agent): hpodd could not take the join now; it
    // tries again after a jittered wait, 1 s doubling up to 60 s.
    c.join_retries++;
    c.join_retry_reasons[joined.status().ToString().substr(0, 160)]++;
    const milliseconds wait =
        JitteredWait(unavailable_joins_++, milliseconds(1000), milliseconds(60000));
    const uint64_t process = process_;
    Later(wait, [process](SimAgent& a) {
      if (a.process_ == process) a.Connect();
    });
    return;
  }
  std::string refused;
  if (!joined.ok()) {
    refused = joined.status().ToString();
  } else if (joined->instance_id != config_.instance_id) {
    refused = "joined for node '" + joined->instance_id + "'";
  }
  if (!refused.empty()) {
    // As the real agent: a refused join, or one for another node, is the end
    // of it (exit 78).
    c.join_failures++;
    dead_ = true;
    StopSlurmd();
    world_.Event(
        {{"event", "join_failed"}, {"instance_id", config_.instance_id}, {"message", refused}});
    return;
  }
  c.joins++;
  c.max_join_ms = std::max(c.max_join_ms, took_ms);
  unavailable_joins_ = 0;
  joined_ = true;
  Connect();
}

void SimAgent::OnOpen(const Status& s) {
  if (!s.ok()) {
    conn_ = 0;
    if (s.code() == StatusCode::kUnauthenticated || s.code() == StatusCode::kNotFound) {
      world_.counters().refusals++;
      // The real agent stops retrying and exits 78.
      dead_ = true;
      StopSlurmd();
      world_.Event(
          {{"event", "refused"}, {"instance_id", config_.instance_id}, {"message", s.message()}});
      return;
    }
    world_.counters().connect_failures++;
    world_.counters().failure_reasons[s.ToString().substr(0, 160)]++;
    return Reconnect();
  }
  world_.counters().connects++;
  open_ = true;
  outbox_.TakeAll();
  writing_ = false;
  // A gap counts from the connection's opening until its first heartbeat, as
  // hpodd counts one from its connected_at: a node late from its first beat on
  // has a gap too.
  last_beat_ = std::chrono::steady_clock::now();
  last_beat_conn_ = conn_;
  failures_ = 0;
  if (!awaiting_credential_) OnHello();
}

void SimAgent::OnHello() {
  proto::Hello hello;
  hello.agent_version = "0.1.0-sim";
  hello.hostname = config_.hostname;
  hello.private_ip = config_.private_ip;
  hello.boot_id = boot_id_;
  hello.lifecycle = lifecycle_;
  // What the real agent reports it runs (RunningSoftware: a SHA-256 per program),
  // so hpodd keeps one software record per node, as with real agents.
  hello.software = {{"hpod-agent", std::string(64, 'a')},
                    {"hpod-container", std::string(64, 'c')},
                    {"hpod-deep-check", std::string(64, 'd')},
                    {"spank_hpod.so", std::string(64, 'e')}};
  Send(hello.ToJson());
  // As Agent::OnConnected: what hpodd may have lost comes again.
  if (!have_config_) Send(proto::GetConfig{}.ToJson());
  if (lifecycle_.state == "Succeeded") Send(proto::ProvisioningParameters{provisioning_}.ToJson());
  SendSlurmState();
  reported_version_ = UINT64_MAX;  // the controller re-sends its nodes
  if (health_seq_ == 0) health_seq_ = 1;
  SendHealth();
}

void SimAgent::OnMessage(const http::WebSocketMessage& m) {
  world_.counters().received++;
  if (silent_ || m.binary) return;  // a hung process reads nothing
  Json j = Json::parse(ConfigWithoutResources(m.data), nullptr, false);
  auto type = proto::MessageType(j);
  if (!type.ok()) return;
  world_.counters().received_by_type[*type]++;
  world_.counters().received_bytes_by_type[*type] += m.data.size();
  if (awaiting_credential_) {
    auto credential = proto::Credential::FromJson(j);
    if (!credential.ok()) {
      world_.Event({{"event", "no_credential"}, {"instance_id", config_.instance_id}});
      world_.swarm().Drop(conn_);
      return OnClose();
    }
    secret_ = credential->secret;
    awaiting_credential_ = false;
    return OnHello();
  }
  if (*type == proto::Config::kType) {
    OnConfig(j);
  } else if (*type == proto::ConfigPending::kType) {
    auto pending = proto::ConfigPending::FromJson(j);
    const uint64_t process = process_;
    Later(milliseconds(pending.ok() ? pending->retry_ms : 500), [process](SimAgent& a) {
      if (a.process_ == process && !a.have_config_) a.Send(proto::GetConfig{}.ToJson());
    });
  } else if (*type == proto::SlurmRole::kType) {
    OnSlurm(j);
  } else if (*type == proto::Command::kType) {
    OnCommand(j);
  } else if (*type == proto::Error::kType) {
    world_.counters().errors++;
    world_.Event({{"event", "error_frame"}, {"instance_id", config_.instance_id}, {"frame", j}});
  }
  // open_session, training_query, job_answer, reprovision: nothing on a simulated node.
}

void SimAgent::OnClose() {
  world_.counters().closes++;
  // hpodd may have closed the channel of a node it took for hung.
  EndOpenGap();
  open_ = false;
  conn_ = 0;
  if (!dead_) Reconnect();
}

void SimAgent::Reconnect() {
  if (dead_) return;
  // The real agent's channel backoff: 100 ms doubling up to 10 s.
  const milliseconds wait = JitteredWait(failures_++, milliseconds(100), milliseconds(10000));
  const uint64_t attempt = attempt_;
  Later(wait, [attempt](SimAgent& a) {
    if (a.attempt_ == attempt && !a.open_) a.Connect();
  });
}

void SimAgent::Send(const Json& message, agent::Outbox::Kind kind, uint64_t tag) {
  if (!open_ || silent_ || conn_ == 0) return;
  world_.counters().sent++;
  outbox_.Push(message.dump(), kind,
               kind == agent::Outbox::Kind::kLatest ? message.value("type", "") : "", tag);
  Pump();
}

void SimAgent::Pump() {
  if (writing_ || outbox_.empty() || !open_ || silent_ || conn_ == 0) return;
  uint64_t tag = 0;
  std::string frame = outbox_.Pop(&tag);
  writing_ = true;
  const uint64_t conn = conn_;
  world_.swarm().Send(conn_, std::move(frame), [self = weak_from_this(), conn, tag] {
    auto a = self.lock();
    if (!a || a->conn_ != conn) return;
    a->writing_ = false;
    if (tag == kHeartbeatTag) a->BeatWritten(conn);
    a->Pump();
  });
}

void SimAgent::OnConfig(const Json& m) {
  auto config = proto::Config::FromJson(m);
  if (!config.ok()) {
    world_.Event({{"event", "bad_config"}, {"message", config.status().message()}});
    return;
  }
  have_config_ = true;
  if (config->heartbeat_interval_ms)
    heartbeat_interval_ = milliseconds(*config->heartbeat_interval_ms);
  provisioning_ = config->provisioning;
  if (lifecycle_.state == "Succeeded" || lifecycle_.state == "Running") return;
  lifecycle_.state = "Running";
  lifecycle_.exit_code = -1;
  lifecycle_.message = "";
  Send(proto::LifecycleReport{lifecycle_}.ToJson());
  Send(proto::Log{"LifecycleConfig", "simulated node: lifecycle scripts run\n"}.ToJson());
  const uint64_t process = process_;
  Later(world_.lifecycle_delay(), [process](SimAgent& a) {
    if (a.process_ != process) return;
    a.lifecycle_.state = "Succeeded";
    a.lifecycle_.exit_code = 0;
    a.lifecycle_.message = "Lifecycle scripts succeeded";
    a.Send(proto::LifecycleReport{a.lifecycle_}.ToJson());
    a.Send(proto::ProvisioningParameters{a.provisioning_}.ToJson());
    a.OnSlurm(Json());  // daemons held for the scripts start now
  });
}

void SimAgent::OnSlurm(const Json& m) {
  if (!m.is_null()) {
    auto role = proto::SlurmRole::FromJson(m);
    if (!role.ok()) {
      world_.Event({{"event", "bad_slurm"}, {"message", role.status().message()}});
      return;
    }
    role_ = role->role;
    node_name_ = role->node_name;
    conf_hash_ = role->conf_hash;
    held_ = role->hold;
    avoid_start_ = role->avoid_start_time;
    if (role_ == "controller") node_names_ = role->node_names;
  }
  if (role_ == "compute" && !held_ && lifecycle_.state == "Succeeded" && slurmd_started_ == 0) {
    slurmd_started_ = EpochNow();
    world_.slurm(config_.cluster_id)
        .SlurmdStarted(node_name_, config_.instance_id, slurmd_started_, avoid_start_);
  }
  SendSlurmState();
}

proto::SlurmStatus SimAgent::slurm_status() const {
  proto::SlurmStatus s;
  s.role = role_;
  s.conf_hash = conf_hash_;
  s.held = held_;
  if (role_.empty() || role_ == "none" || role_ == "login") {
    s.daemon = "none";
  } else if (held_ || lifecycle_.state != "Succeeded") {
    s.daemon = "held";
  } else {
    s.daemon = "running";
    if (role_ == "compute") s.slurmd_started = slurmd_started_;
  }
  return s;
}

void SimAgent::SendSlurmState() { Send(proto::SlurmStateReport{slurm_status()}.ToJson()); }

void SimAgent::OnCommand(const Json& m) {
  world_.counters().commands++;
  auto command = proto::Command::FromJson(m);
  if (!command.ok()) return;
  proto::CommandResult result;
  result.id = command->id;
  result.exit_code = 0;
  if (role_ == "controller") world_.slurm(config_.cluster_id).Run(command->argv, &result);
  Send(result.ToJson());
}

void SimAgent::Beat(uint64_t process) {
  if (process != process_ || dead_) return;
  if (open_ && !silent_ && !awaiting_credential_ &&
      std::chrono::steady_clock::now() >= late_until_) {
    proto::Heartbeat beat;
    beat.seq = ++seq_;
    beat.lifecycle = lifecycle_;
    auto up = std::chrono::steady_clock::now() - started_;
    beat.uptime_s = std::chrono::duration_cast<std::chrono::seconds>(up).count();
    beat.slurm = slurm_status();
    beat.time = EpochNow();
    proto::HostStats host;
    const double s = std::chrono::duration<double>(up).count();
    host.cpu_seconds.user = s * 0.3;
    host.cpu_seconds.system = s * 0.05;
    host.cpu_seconds.idle = s * 7.6;
    host.memory_total_bytes = int64_t{32} << 30;
    host.memory_available_bytes = int64_t{28} << 30;
    host.filesystems = {{"/", int64_t{100} << 30, int64_t{80} << 30},
                        {"/fsx", int64_t{1200} << 30, int64_t{900} << 30}};
    beat.host = host;
    world_.counters().heartbeats++;
    // Timed when it is in the socket (BeatWritten), not now: it is written after
    // the frames ahead of it and whatever the I/O thread has queued, and that
    // wait is the simulator's lateness too.
    Send(beat.ToJson(), agent::Outbox::Kind::kHeartbeat, kHeartbeatTag);
  }
  Later(heartbeat_interval_, [process](SimAgent& a) { a.Beat(process); });
}

void SimAgent::BeatWritten(uint64_t conn) {
  // Silenced since it was queued: a silence asked for is no gap of the simulator's.
  if (!open_ || silent_) return;
  const auto now = std::chrono::steady_clock::now();
  if (last_beat_ && last_beat_conn_ == conn) EndGap(now, /*count=*/true);
  last_beat_ = now;
  last_beat_conn_ = conn;
}

void SimAgent::EndGap(std::chrono::steady_clock::time_point now, bool count) {
  const int64_t gap = std::chrono::duration_cast<milliseconds>(now - *last_beat_).count();
  if (count) {
    SimCounters& c = world_.counters();
    c.max_heartbeat_gap_ms = std::max(c.max_heartbeat_gap_ms, gap);
    c.heartbeat_gaps_over_5s += gap > 5000;
  }
  if (gap <= 5000) return;
  const double end = EpochNow();
  long_gaps_.emplace_back(end - static_cast<double>(gap) / 1000, end);
  if (long_gaps_.size() > 16) long_gaps_.pop_front();
}

void SimAgent::EndOpenGap() {
  if (open_ && last_beat_ && last_beat_conn_ == conn_) {
    EndGap(std::chrono::steady_clock::now(), /*count=*/false);
  }
}

void SimAgent::PollSlurmNodes(uint64_t process) {
  if (process != process_ || dead_) return;
  if (role_ == "controller" && slurm_status().daemon == "running" && open_ && !silent_) {
    const SlurmSim& slurm = world_.slurm(config_.cluster_id);
    if (slurm.version() != reported_version_) {
      reported_version_ = slurm.version();
      Send(proto::SlurmNodes{slurm.Report(node_names_)}.ToJson(), agent::Outbox::Kind::kLatest);
    }
  }
  Later(milliseconds(1000), [process](SimAgent& a) { a.PollSlurmNodes(process); });
}

void SimAgent::SendHealth() {
  proto::HealthReport report;
  report.seq = health_seq_;
  const double now = EpochNow();
  std::vector<std::string> names(std::begin(kChecks), std::end(kChecks));
  for (const auto& [name, v] : failing_) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  for (const std::string& name : names) {
    proto::HealthCheck c;
    c.name = name;
    c.time = now;
    c.duration_ms = 3;
    if (auto it = failing_.find(name); it != failing_.end()) {
      c.result = "fail";
      c.verdict = it->second.first;
      c.reason = it->second.second;
    }
    report.checks.push_back(std::move(c));
  }
  Send(report.ToJson());
}

void SimAgent::StopSlurmd() {
  if (slurmd_started_ != 0)
    world_.slurm(config_.cluster_id).SlurmdStopped(node_name_, config_.instance_id);
  slurmd_started_ = 0;
}

void SimAgent::Stop() {
  // hpodd may have replaced the node for a gap still open (its agent hung).
  EndOpenGap();
  dead_ = true;
  process_++;
  if (conn_ != 0) world_.swarm().Drop(conn_);
  conn_ = 0;
  open_ = false;
  StopSlurmd();
}

void SimAgent::Reboot(int boot) {
  EndOpenGap();
  if (conn_ != 0) world_.swarm().Drop(conn_);
  conn_ = 0;
  open_ = false;
  StopSlurmd();
  config_.boot = boot;
  dead_ = silent_ = false;
  flap_.reset();
  failing_.clear();
  attempt_++;
  Start();
}

void SimAgent::Silence(bool on) {
  silent_ = on;
  last_beat_.reset();  // a silence asked for is no gap of the simulator's
  world_.Event({{"event", on ? "silenced" : "unsilenced"}, {"instance_id", config_.instance_id}});
}

void SimAgent::Disconnect() {
  if (conn_ != 0) world_.swarm().Drop(conn_);
  conn_ = 0;
  open_ = false;
  attempt_++;
  Reconnect();
}

void SimAgent::Kill() {
  Stop();
  world_.Event({{"event", "killed"}, {"instance_id", config_.instance_id}});
}

void SimAgent::FailCheck(const std::string& check, const std::string& verdict) {
  if (verdict == "ok") {
    failing_.erase(check);
  } else {
    failing_[check] = {verdict, "simulated failure of " + check};
  }
  health_seq_++;
  SendHealth();
}

void SimAgent::Late(milliseconds d) { late_until_ = std::chrono::steady_clock::now() + d; }

void SimAgent::Flap(milliseconds period) {
  if (period.count() <= 0) {
    flap_.reset();
    return;
  }
  flap_ = period;
  const uint64_t process = process_;
  Later(period, [process](SimAgent& a) {
    if (a.process_ != process || !a.flap_ || a.dead_) return;
    a.Disconnect();
    a.Flap(*a.flap_);
  });
}

}  // namespace hpod::nodesim
