#include "hpod/agent/agent.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>

#include "hpod/agent/ami_user.h"
#include "hpod/agent/fs_util.h"
#include "hpod/agent/health/checks.h"
#include "hpod/agent/machine_facts.h"
#include "hpod/agent/session.h"
#include "hpod/agent/systemctl_shim.h"
#include "hpod/agent/systemd_handover.h"

namespace hpod::agent {
namespace {

using Json = nlohmann::json;
namespace proto = api::agentproto;

// The InstanceType of the group whose Instances list `instance_id` (HyperPod's
// resource_config.json shape); "" when it is not there.
std::string InstanceTypeOf(const Json& resource_config, const std::string& instance_id) {
  if (!resource_config.is_object()) return "";
  auto groups = resource_config.find("InstanceGroups");
  if (groups == resource_config.end() || !groups->is_array()) return "";
  for (const Json& g : *groups) {
    auto instances = g.is_object() ? g.find("Instances") : g.end();
    if (instances == g.end() || !instances->is_array()) continue;
    for (const Json& i : *instances) {
      if (i.is_object() && i.value("InstanceId", "") == instance_id) {
        auto type = g.find("InstanceType");
        return type != g.end() && type->is_string() ? type->get<std::string>() : "";
      }
    }
  }
  return "";
}

std::string Hostname(const std::string& configured) {
  return configured.empty() ? MachineHostname() : configured;
}

// Forwards formatted log lines to the channel's outbox. Channel::SendLog never logs,
// so there is no recursion through this sink.
class ChannelLogSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit ChannelLogSink(std::shared_ptr<Agent::LogTarget> target) : target_(std::move(target)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    MutexLock lock(target_->mu);
    if (target_->channel != nullptr) {
      target_->channel->SendLog("Agent", std::string_view(formatted.data(), formatted.size()));
    }
  }
  void flush_() override {}

 private:
  const std::shared_ptr<Agent::LogTarget> target_;
};

// Host figures are sampled as often as the agent heartbeats (each heartbeat
// carries the newest).
HostSamplerOptions HostOptions(const AgentOptions& options) {
  HostSamplerOptions o;
  o.interval = options.default_heartbeat_interval;
  return o;
}

}  // namespace

Agent::Agent(AgentOptions options, const Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      started_(clock_.SteadyNow()),
      boot_id_(ReadBootId()),
      lifecycle_(
          [this] {
            LifecycleRunnerOptions o;
            o.config_dir = options_.config_dir;
            o.lifecycle_root = options_.lifecycle_root;
            o.state_dir = options_.state_dir;
            o.before_script = [this] { return BeforeLifecycleScript(); };
            return o;
          }(),
          clock_,
          [this](const LifecycleStatus& s) {
            channel_->Send(proto::LifecycleReport{s.wire()}.ToJson());
          },
          [this](std::string_view chunk) { channel_->SendLog("LifecycleConfig", chunk); }),
      commands_(CommandRunnerOptions{.max_concurrent = options_.max_concurrent_commands,
                                     .max_queued = options_.max_queued_commands,
                                     .state_dir = options_.state_dir},
                [this](Json reply) { channel_->Send(reply); }),
      training_(TrainingMetricsOptions{}, [this](Json reply) { channel_->Send(reply); }),
      host_(HostOptions(options_), clock_) {
  ChannelOptions channel;
  channel.endpoint = options_.endpoint;
  channel.instance_id = options_.instance_id;
  channel.bootstrap_token = options_.bootstrap_token;
  channel.state_dir = options_.state_dir;
  channel.backoff_initial = options_.backoff_initial;
  channel.backoff_max = options_.backoff_max;
  channel.connect_timeout = options_.connect_timeout;
  channel.heartbeat_interval = options_.default_heartbeat_interval;
  if (options_.endpoint.rfind("https://", 0) == 0) {
    // A network agent: the certificate its join left (join.h) is its credential.
    IdentityPaths identity = NodeIdentityPaths(
        options_.identity_dir.empty() ? options_.state_dir : options_.identity_dir);
    channel.tls_ca_file = identity.ca;
    channel.tls_node_pem = identity.node;
    renewal_ = std::make_unique<CertificateRenewal>(identity.node, clock_);
    channel.renewal = renewal_.get();
  }
  channel_ = std::make_unique<Channel>(channel, this);
  log_target_->channel = channel_.get();  // no sink exists yet: MakeLogSink comes later
  SlurmNodeOptions slurm = options_.slurm;
  if (slurm.munge_dir.empty()) slurm.munge_dir = options_.state_dir + "/munge";
  if (!options_.handed_units_systemctl.empty()) {
    slurm.on_unit_active = [systemctl = options_.handed_units_systemctl](const std::string& unit) {
      ShowHandedUnitActive(systemctl, unit);
    };
  }
  slurm_ = std::make_unique<SlurmNode>(
      slurm, clock_,
      [this](const proto::SlurmStatus& state) {
        channel_->Send(proto::SlurmStateReport{state}.ToJson());
      },
      [this](const std::vector<slurm::SlurmNodeState>& nodes) {
        proto::SlurmNodes report;
        for (const auto& n : nodes) {
          report.nodes.push_back({n.name, n.state, n.reason, n.slurmd_start_time});
        }
        channel_->SendLatest(report.ToJson());
      });
  if (options_.health.interval.count() > 0) {
    health::NodeProbes probes;
    probes.state_dir = options_.state_dir;
    probes.slurm_state = [this] { return slurm_->State(); };
    probes.slurm_controller = [this] { return slurm_->ControllerTarget(); };
    probes.instance_type = [this] {
      MutexLock lock(instance_type_mu_);
      return instance_type_;
    };
    // Built now, started in Run: the kernel log is read from this moment on.
    health_ = std::make_unique<health::HealthChecker>(
        health::HealthCheckerOptions{options_.health.interval, options_.health.timeout}, clock_,
        health::MakeHealthChecks(options_.health, probes, clock_),
        [this](const proto::HealthReport& report) { channel_->Send(report.ToJson()); });
  }
  if (!options_.local_socket.empty()) {
    local_socket_ = std::make_unique<LocalSocketServer>(
        options_.local_socket, [this](const Json& request, uid_t peer_uid) -> StatusOr<Json> {
          // The node's systemctl: answered here, connected or not.
          if (request.contains("units_request")) return ControlUnits(request, peer_uid);
          // Asked while disconnected, a question would wait in the channel's queue
          // past the client's patience: say so now (the supervisor asks again).
          if (!channel_->connected()) {
            return UnavailableError("the hpod agent is not connected to hpodd");
          }
          return queries_.Ask(
              [&](const std::string& id) {
                channel_->Send(proto::JobQuery{id, request}.ToJson());
              },
              // Inside the supervisor's own 5 s, so it hears this error, not silence.
              std::chrono::seconds(4));
        });
  }
}

Agent::~Agent() {
  {
    // A sink that outlives the agent (it sits in spdlog's logger) goes quiet.
    MutexLock lock(log_target_->mu);
    log_target_->channel = nullptr;
  }
  Stop();
  commands_.Shutdown();
  training_.Shutdown();
  if (lifecycle_thread_.joinable()) lifecycle_thread_.join();
  ReapSessions(/*all=*/true);
  if (health_) health_->Stop();
  host_.Stop();
  slurm_->Stop();
}

std::shared_ptr<spdlog::sinks::sink> Agent::MakeLogSink() {
  return std::make_shared<ChannelLogSink>(log_target_);
}

int Agent::Run() {
  std::error_code ec;
  std::filesystem::create_directories(options_.state_dir, ec);
  if (Status loaded = lifecycle_.LoadState(); !loaded.ok()) {
    spdlog::warn("ignoring lifecycle state: {}", loaded.ToString());
  }
  spdlog::info("hpod-agent {} for {} starting; endpoint {}", kAgentVersion, options_.instance_id,
               options_.endpoint);
  // The instance type, for the GPU check, until hpodd's config says it again:
  // the resource_config.json of an earlier run of this node.
  if (auto text = ReadFile(options_.config_dir + "/resource_config.json"); text.ok()) {
    LearnInstanceType(Json::parse(*text, nullptr, /*allow_exceptions=*/false));
  }
  // Slurm's daemons start of hpod's accord once the scripts succeeded (before,
  // only the node's systemctl starts them): a rebooted node's scripts had.
  if (lifecycle_.status().state == api::LifecycleState::kSucceeded) slurm_->SetAutoStart(true);
  // Never on a machine with systemd, nor on a node that shares the host's root
  // (its /usr/local/bin and /etc are the host's).
  std::error_code no_systemd_ec;
  if (options_.systemctl && !std::filesystem::exists("/run/systemd/system", no_systemd_ec) &&
      !std::filesystem::exists(options_.slurm.shared_root_marker, no_systemd_ec)) {
    if (Status s = InstallSystemctl(options_.systemctl_link_dir, options_.unit_dir); !s.ok()) {
      spdlog::warn("no systemctl for this node's units: {}", s.message());
    }
    // Before the lifecycle script, which may set up its keys (ami_user.h).
    if (Status s = EnsureAmiUser(); !s.ok()) {
      spdlog::warn("no user {} on this node: {}", kAmiUser, s.message());
    }
  }
  if (health_) health_->Start();
  host_.Start();
  if (local_socket_ && options_.endpoint == "unix://" + options_.local_socket) {
    // Start() replaces the file at its path: never hpodd's own socket.
    spdlog::error("no local socket: {} is hpodd's agent socket", options_.local_socket);
    local_socket_.reset();
  }
  if (local_socket_) {
    // Without it the node still works; only auto-resume cannot ask (it says so).
    if (Status s = local_socket_->Start(); !s.ok()) {
      spdlog::error("no local socket: {}", s.ToString());
    }
  }
  Status served = channel_->Run();
  // systemctl clients waiting on the daemons would hold the socket's Stop.
  slurm_->CancelWaits();
  if (local_socket_) local_socket_->Stop();
  Stop();
  if (health_) health_->Stop();
  host_.Stop();
  commands_.Shutdown();
  training_.Shutdown();
  // A script running when the agent stops is left to its timeout (it may be
  // installing software); Run only returns after it, so the outcome is persisted.
  if (lifecycle_thread_.joinable()) lifecycle_thread_.join();
  ReapSessions(/*all=*/true);
  if (!served.ok()) {
    spdlog::error("hpod-agent exiting: {}", served.message());
    return kExitConfig;
  }
  return 0;
}

void Agent::Stop() {
  stopping_ = true;
  channel_->Stop();
}

proto::Hello Agent::Hello() {
  std::call_once(software_once_, [this] { software_ = RunningSoftware(options_.state_dir); });
  return proto::Hello{proto::kProtocolVersion,
                      std::string(kAgentVersion),
                      Hostname(options_.hostname),
                      options_.private_ip,
                      boot_id_,
                      lifecycle_.status().wire(),
                      software_};
}

proto::Heartbeat Agent::HeartbeatFields() {
  auto uptime = std::chrono::duration_cast<std::chrono::seconds>(clock_.SteadyNow() - started_);
  proto::Heartbeat beat{0, lifecycle_.status().wire(), uptime.count(), slurm_->State(),
                        host_.Sample()};
  // Read last, after the host sample: hpodd takes the node's clock offset from it.
  beat.time = clock_.NowEpochSeconds();
  return beat;
}

void Agent::OnConnected() {
  if (!have_config_) {
    channel_->Send(proto::GetConfig{}.ToJson());
    get_config_at_.reset();
  }
  if (lifecycle_.status().state == api::LifecycleState::kSucceeded) SendProvisioningParameters();
  channel_->Send(proto::SlurmStateReport{slurm_->State()}.ToJson());
  slurm_->ResendNodes();
  // hpodd may have restarted and lost it; reports made while disconnected are
  // in the outbox, but the latest is what counts.
  if (health_) {
    proto::HealthReport latest = health_->Current();
    if (latest.seq > 0) channel_->Send(latest.ToJson());
  }
}

void Agent::LearnInstanceType(const Json& resource_config) {
  std::string type = InstanceTypeOf(resource_config, options_.instance_id);
  if (type.empty()) return;
  MutexLock lock(instance_type_mu_);
  instance_type_ = std::move(type);
}

void Agent::SendProvisioningParameters() {
  auto text = ReadFile(options_.config_dir + "/provisioning_parameters.json");
  Json params = text.ok() ? Json::parse(*text, nullptr, false) : Json();
  if (params.is_discarded()) {
    // Sent as text so hpodd can say what is wrong with it (a node-local parse
    // error would only reach the node's log).
    params = Json{{"unparsable", *text}};
  }
  channel_->Send(proto::ProvisioningParameters{params}.ToJson());
}

void Agent::OnSlurm(const Json& message) {
  auto spec = ParseSlurmSpec(message);
  if (!spec.ok()) {
    spdlog::error("ignoring a bad slurm message: {}", spec.status().message());
    return;
  }
  // Before the scripts succeeded too: the configuration is written at once and
  // Slurm's daemons wait for SetAutoStart or the node's systemctl.
  slurm_->Apply(std::move(*spec));
}

void Agent::OnIdle() {
  if (get_config_at_ && !have_config_ && clock_.SteadyNow() >= *get_config_at_) {
    get_config_at_.reset();
    channel_->Send(proto::GetConfig{}.ToJson());
  }
  ReapSessions(/*all=*/false);
}

std::optional<std::chrono::milliseconds> Agent::NextIdle() {
  if (!get_config_at_ || have_config_) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::milliseconds>(*get_config_at_ -
                                                               clock_.SteadyNow());
}

void Agent::OnMessage(const Json& message) {
  auto type = proto::MessageType(message);
  if (!type.ok()) {
    spdlog::warn("ignoring a malformed channel message: {}", type.status().message());
    return;
  }
  if (*type == proto::Config::kType) {
    OnConfig(message);
  } else if (*type == proto::ConfigPending::kType) {
    auto pending = proto::ConfigPending::FromJson(message);
    if (!pending.ok()) spdlog::warn("{}; asking again in 500 ms", pending.status().message());
    int64_t retry_ms = pending.ok() ? std::clamp<int64_t>(pending->retry_ms, 50, 60000) : 500;
    get_config_at_ = clock_.SteadyNow() + std::chrono::milliseconds(retry_ms);
  } else if (*type == proto::Command::kType) {
    // A malformed one is answered with its error (hpodd's caller waits for it).
    commands_.Submit(ParseCommandRequest(message));
  } else if (*type == proto::TrainingQuery::kType) {
    training_.Submit(message);  // answered on the runner's thread, never this one
  } else if (*type == proto::SlurmRole::kType) {
    OnSlurm(message);
  } else if (*type == proto::OpenSession::kType) {
    OpenSession(message);
  } else if (*type == proto::JobAnswer::kType) {
    auto answer = proto::JobAnswer::FromJson(message);
    if (!answer.ok()) {
      spdlog::warn("ignoring a malformed job_answer: {}", answer.status().message());
    } else {
      queries_.Deliver(answer->id, std::move(answer->answer));
    }
  } else if (*type == proto::Reprovision::kType) {
    spdlog::warn("reprovision is not supported by this agent version; ignored");
  } else if (*type == proto::Error::kType) {
    auto error = proto::Error::FromJson(message);
    spdlog::error("hpodd refused a frame of this agent: {}",
                  error.ok() ? error->message : error.status().message());
  } else {
    spdlog::warn("ignoring channel message of type '{}'", *type);
  }
}

void Agent::OnConfig(const Json& message) {
  auto config = proto::Config::FromJson(message);
  if (config.ok() && config->heartbeat_interval_ms) {
    channel_->SetHeartbeatInterval(std::chrono::milliseconds(*config->heartbeat_interval_ms));
  }
  if (config.ok()) LearnInstanceType(config->resource_config);
  if (have_config_) return;  // the lifecycle runs once per agent process
  have_config_ = true;
  // A malformed config fails the node's lifecycle with the reason (below): waiting
  // for another one would leave the node Pending with no word why.
  StatusOr<std::optional<LifecycleSpec>> spec =
      config.ok() ? LifecycleSpecFrom(config->lifecycle) : config.status();
  Json resource_config = config.ok() ? config->resource_config : Json::object();
  Json provisioning = config.ok() ? config->provisioning : Json();
  lifecycle_thread_ = std::thread([this, spec, resource_config, provisioning] {
    if (!spec.ok()) {
      // A config hpodd should never send; report it as the node's failure.
      LifecycleSpec invalid;
      invalid.source_uri = "(invalid lifecycle configuration: " + spec.status().message() + ")";
      invalid.on_create = "on_create.sh";
      lifecycle_.Run(invalid, resource_config, provisioning);
      return;
    }
    if (lifecycle_.Run(*spec, resource_config, provisioning).state ==
        api::LifecycleState::kSucceeded) {
      // Again, as before this change: hpodd keeps the first file it got, so this
      // counts only where the report before the script was lost.
      SendProvisioningParameters();
      slurm_->SetAutoStart(true);
    }
  });
}

bool Agent::BeforeLifecycleScript() {
  // hpodd learns the cluster's Slurm roles from the parameters and sends this
  // node its part; HyperPod's agent writes slurm.conf before the lifecycle script
  // runs, and AWS's scripts wait for it (lifecycle_script.py, ≤ 60 s).
  SendProvisioningParameters();
  const auto wait = options_.slurm_role_wait;
  if (wait.count() > 0 && !slurm_->WaitForRole(wait) && !stopping_) {
    spdlog::warn("hpodd sent no Slurm role within {} ms; running the lifecycle script without it",
                 wait.count());
  }
  // An agent stopping now starts no script: the next one runs it (LoadState).
  return !stopping_;
}

StatusOr<Json> Agent::ControlUnits(const Json& request, uid_t peer_uid) {
  HPOD_ASSIGN_OR_RETURN(UnitRequest parsed, UnitRequest::FromJson(request));
  // As systemd: anyone may ask what runs; only root changes it.
  if (parsed.verb != UnitVerb::kQuery && peer_uid != 0) {
    return PermissionDeniedError("Access denied: only root may " +
                                 std::string(UnitVerbName(parsed.verb)) + " units");
  }
  HPOD_ASSIGN_OR_RETURN(std::vector<UnitState> units, slurm_->ControlUnits(parsed));
  return UnitsAnswer(units);
}

void Agent::OpenSession(const Json& message) {
  auto parsed = ParseSessionRequest(message);
  if (!parsed.ok()) {
    spdlog::warn("cannot open a session: {}", parsed.status().message());
    return;
  }
  SessionRequest request = std::move(*parsed);
  if (slurm_) request.uts_hostname = slurm_->JobHostname();
  auto dial = channel_->SessionDial(request.session_id);
  if (!dial.ok() || request.session_id.empty()) {
    spdlog::warn("cannot open session '{}': {}", request.session_id,
                 dial.ok() ? "no session_id" : dial.status().message());
    return;
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  MutexLock lock(sessions_mu_);
  sessions_.push_back(SessionThread{std::thread([this, dial = *dial, request, done] {
                                      RunSession(dial, request, stopping_);
                                      *done = true;
                                    }),
                                    done});
}

void Agent::ReapSessions(bool all) {
  std::list<SessionThread> finished;
  {
    MutexLock lock(sessions_mu_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (all || it->done->load()) {
        finished.splice(finished.end(), sessions_, it++);
      } else {
        ++it;
      }
    }
  }
  for (auto& session : finished) session.thread.join();
}

}  // namespace hpod::agent
