#pragma once

// The agent's composition root: owns the channel to hpodd, the lifecycle runner,
// the command runner, the shell sessions and the health checks, and routes
// hpodd's messages to them.
// Members are declared in dependency order (the channel last, so it is destroyed
// first and nothing calls into a destroyed runner).
//
// Thread contract: Run is called once from one thread; Stop is thread-safe (main's
// signal thread calls it).

#include <atomic>
#include <chrono>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "hpod/agent/agent_options.h"
#include "hpod/agent/channel.h"
#include "hpod/agent/commands.h"
#include "hpod/agent/health/health_checks.h"
#include "hpod/agent/host_stats.h"
#include "hpod/agent/join.h"
#include "hpod/agent/lifecycle.h"
#include "hpod/agent/local_socket.h"
#include "hpod/agent/slurm_node.h"
#include "hpod/agent/training_queries.h"
#include "hpod/base/clock.h"
#include "hpod/base/thread_annotations.h"

namespace spdlog::sinks {
class sink;
}

namespace hpod::agent {

class Agent final : public ChannelHandler {
 public:
  Agent(AgentOptions options, const Clock& clock);
  ~Agent() override;

  // Serves until Stop(); returns the process exit code: 0, or kExitConfig when hpodd
  // refuses this node (the reason is logged).
  int Run();
  void Stop();

  // A spdlog sink that forwards the agent's own log lines to hpodd as `log`
  // frames (stream "Agent"). main adds it to the default logger before Run.
  std::shared_ptr<spdlog::sinks::sink> MakeLogSink();

  Channel& channel() { return *channel_; }
  LifecycleStatus lifecycle_status() const { return lifecycle_.status(); }

  // Where the log sink forwards to; cleared when the agent goes away.
  struct LogTarget {
    Mutex mu;
    Channel* channel GUARDED_BY(mu) = nullptr;
  };

  // ChannelHandler.
  api::agentproto::Hello Hello() override;
  api::agentproto::Heartbeat HeartbeatFields() override;
  void OnConnected() override;
  void OnMessage(const nlohmann::json& message) override;
  void OnIdle() override;
  std::optional<std::chrono::milliseconds> NextIdle() override;

 private:
  void OnConfig(const nlohmann::json& message);
  void OnSlurm(const nlohmann::json& message);
  // Tells hpodd what Slurm roles the lifecycle source declares (its
  // provisioning_parameters.json), once the scripts succeeded.
  void SendProvisioningParameters();
  // The lifecycle runner's before_script: reports the parameters, then waits
  // (options_.slurm_role_wait) for the node's Slurm role; false when the agent
  // is stopping (the script is left to the next agent).
  bool BeforeLifecycleScript();
  // A `units_request` on the local socket (units.h): the node's systemctl.
  StatusOr<nlohmann::json> ControlUnits(const nlohmann::json& request, uid_t peer_uid);
  void OpenSession(const nlohmann::json& message);
  // The node's instance type from a resource_config (its group's InstanceType).
  void LearnInstanceType(const nlohmann::json& resource_config);
  void ReapSessions(bool all);

  const AgentOptions options_;
  const Clock& clock_;
  const std::chrono::steady_clock::time_point started_;
  const std::string boot_id_;
  // RunningSoftware(), read once at the first hello (hashing the programs takes
  // a moment; they do not change under a running agent).
  std::once_flag software_once_;
  std::map<std::string, std::string> software_;
  std::atomic<bool> stopping_{false};

  LifecycleRunner lifecycle_;
  CommandRunner commands_;
  TrainingQueryRunner training_;  // hpodd's training_query messages (reads /fsx)
  // Before channel_: the heartbeat thread reads it (HeartbeatFields).
  HostSampler host_;
  std::unique_ptr<CertificateRenewal> renewal_;  // network agents only; before channel_
  std::unique_ptr<Channel> channel_;
  std::unique_ptr<SlurmNode> slurm_;  // after channel_: its callbacks send on it
  Mutex instance_type_mu_;
  std::string instance_type_ GUARDED_BY(instance_type_mu_);  // "" until known
  // After slurm_, channel_ and instance_type_: its checks read them and its
  // reports go out on channel_. Null when health checks are off (interval 0).
  std::unique_ptr<health::HealthChecker> health_;
  const std::shared_ptr<LogTarget> log_target_ = std::make_shared<LogTarget>();
  // Local clients' questions relayed to hpodd; the server after channel_ and
  // queries_ (its threads use both) and stopped before them.
  PendingQueries queries_;
  std::unique_ptr<LocalSocketServer> local_socket_;

  // Run's thread only.
  bool have_config_ = false;
  std::optional<std::chrono::steady_clock::time_point> get_config_at_;
  std::thread lifecycle_thread_;

  struct SessionThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  Mutex sessions_mu_;
  std::list<SessionThread> sessions_ GUARDED_BY(sessions_mu_);
};

}  // namespace hpod::agent
