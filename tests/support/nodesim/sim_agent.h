#pragma once

// One simulated node's hpod-agent, speaking the channel protocol as the real
// agent does (src/agent/PROTOCOL.md, src/agent/agent.cc): bootstrap token, then
// the node credential, over hpodd's Unix socket; or, for a network agent (an
// https:// endpoint), the join with its launch's join token (agent::JoinHpodd, the
// real agent's own code, run on the simulator's blocking pool) and then the
// channel over mutual TLS with the certificate the join got; hello (with the software it runs);
// get_config; heartbeats with the lifecycle, Slurm and host figures; the lifecycle report (its
// scripts "succeed" after `lifecycle_delay`); provisioning_parameters; slurm_state for the role
// hpodd sends, with a slurmd registered in the cluster's SlurmSim; a health report of the real
// agent's checks; command results; and, on the controller, the cluster's `slurm_nodes` whenever it
// changed (polled every second, as the real agent polls scontrol). Channel loss reconnects with the
// real agent's backoff (100 ms → 10 s, full jitter). Frames go out as the real agent's
// channel sends them: one at a time, the rest in the real agent's Outbox (a heartbeat ahead
// of the Slurm table queued last, an unsent table replaced by the next).
//
// Faults (the simulator's control commands): silence (the process hangs: no
// frame goes out, the socket stays open), disconnect (the socket drops, the
// agent reconnects), kill (the socket drops and the node never speaks again, as
// a dead machine), a failing health check, and flapping (disconnect every period).
//
// Thread contract: not synchronized; everything runs on the simulator's one I/O
// thread (WebSocketSwarm's), which owns the agents through shared_ptr; timers
// hold weak_ptrs, so an agent may go at any time.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "hpod/agent/join.h"
#include "hpod/agent/outbox.h"
#include "hpod/api/agent_protocol.h"
#include "hpod/http/websocket_swarm.h"
#include "slurm_sim.h"

namespace hpod::nodesim {

// What a launched node's agent config says (FakeProviderOptions::agent_dir).
struct NodeConfig {
  std::string instance_id, cluster_id, endpoint, bootstrap_token, hostname, private_ip, group,
      instance_type;
  std::string join_token;  // network agents (an https:// endpoint)
  int boot = 0;
  static std::optional<NodeConfig> FromJson(const nlohmann::json& j);
};

struct SimCounters {
  uint64_t connects = 0, refusals = 0, connect_failures = 0, closes = 0, sent = 0, received = 0,
           commands = 0, errors = 0, heartbeats = 0;
  // Network agents: joins that got a certificate, joins refused (the real agent
  // then exits 78 and never comes back), joins hpodd could not take then (tried
  // again later, by reason), and the slowest join.
  uint64_t joins = 0, join_failures = 0, join_retries = 0;
  int64_t max_join_ms = 0;
  std::map<std::string, uint64_t> join_retry_reasons;
  // Between two heartbeats one agent wrote to its socket on one open connection:
  // the longest, and how many were over 5 s (hpodd takes 6 s of silence for a hung
  // node). A gap the simulator made itself, busy elsewhere, tells an unasked
  // recovery from hpodd's.
  int64_t max_heartbeat_gap_ms = 0, heartbeat_gaps_over_5s = 0;
  std::map<std::string, uint64_t> failure_reasons;  // connect failures by message
  std::map<std::string, uint64_t> received_by_type, received_bytes_by_type;
};

// What every agent shares: the swarm, each cluster's Slurm, counters.
class SimWorld {
 public:
  virtual ~SimWorld() = default;
  virtual http::WebSocketSwarm& swarm() = 0;
  virtual SlurmSim& slurm(const std::string& cluster_id) = 0;
  virtual SimCounters& counters() = 0;
  virtual std::mt19937_64& rng() = 0;
  virtual std::chrono::milliseconds lifecycle_delay() const = 0;
  // Where each simulated node's disk is (<state_dir>/<instance_id>: what a
  // network agent's join leaves, join.h).
  virtual const std::string& state_dir() const = 0;
  // Runs `work` on a thread of the simulator's blocking pool (a join's HTTPS
  // requests and key generation must not stall the I/O thread); `work` reaches
  // back to an agent only through swarm().Post.
  virtual void Blocking(std::function<void()> work) = 0;
  // One JSON line on stdout for the driver (a refusal, a fault applied).
  virtual void Event(const nlohmann::json& event) = 0;
};

class SimAgent : public std::enable_shared_from_this<SimAgent> {
 public:
  SimAgent(SimWorld& world, NodeConfig config);

  void Start();
  // The machine is gone (terminated): the socket drops, nothing more is sent, and
  // its slurmd leaves Slurm.
  void Stop();
  // The machine rebooted (a new `boot`): a new agent process on the same disk.
  void Reboot(int boot);

  // Faults; `on` false heals.
  void Silence(bool on);
  void Disconnect();
  void Kill();
  void FailCheck(const std::string& check, const std::string& verdict);
  void Flap(std::chrono::milliseconds period);
  // The simulator's own lateness, on purpose: no heartbeat goes out for `d`, as
  // when its thread is busy (unlike Silence, the gap counts as the simulator's).
  void Late(std::chrono::milliseconds d);

  const NodeConfig& config() const { return config_; }
  bool connected() const { return conn_ != 0 && open_; }
  bool silent() const { return silent_; }
  const std::string& lifecycle_state() const { return lifecycle_.state; }
  // This agent's last 16 heartbeat gaps over 5 s on a connection that stayed
  // open, as [start, end] in epoch seconds: the simulator's own lateness (or a
  // fault it was told to make). A gap still open when the connection closed, the
  // node rebooted or the node went counts up to then. The benchmark lays hpodd's recoveries against
  // them.
  const std::deque<std::pair<double, double>>& long_gaps() const { return long_gaps_; }

 private:
  template <typename F>
  void Later(std::chrono::milliseconds delay, F fn);
  void Connect();
  // The wait before a retry after `failures` failed attempts in a row (full jitter).
  std::chrono::milliseconds JitteredWait(int failures, std::chrono::milliseconds initial,
                                         std::chrono::milliseconds max);
  // A network agent that has not joined yet: the join on the blocking pool, then
  // OnJoined on the I/O thread.
  void Join();
  void OnJoined(const StatusOr<agent::JoinedState>& joined, int64_t took_ms);
  bool network() const { return !config_.join_token.empty(); }
  void OnOpen(const Status& s);
  void OnHello();  // sends hello and what hpodd may have lost (Agent::OnConnected)
  void OnMessage(const http::WebSocketMessage& m);
  void OnClose();
  void Reconnect();
  void Send(const nlohmann::json& message, agent::Outbox::Kind kind = agent::Outbox::Kind::kOrdered,
            uint64_t tag = 0);
  // Hands the outbox's next frame to the swarm unless one is being written.
  void Pump();
  // A heartbeat of connection `conn` is in the socket: the gap since the last ends.
  void BeatWritten(uint64_t conn);
  void OnConfig(const nlohmann::json& m);
  void OnSlurm(const nlohmann::json& m);
  void OnCommand(const nlohmann::json& m);
  void Beat(uint64_t process);
  // Ends the gap since this connection's last heartbeat at `now`; `count` adds it
  // to the counters (not for a node the simulator itself made silent or dead).
  void EndGap(std::chrono::steady_clock::time_point now, bool count);
  // The connection ends (closed, rebooted, gone): a gap still open counts up to now.
  void EndOpenGap();
  void PollSlurmNodes(uint64_t process);
  void SendHealth();
  void SendSlurmState();
  api::agentproto::SlurmStatus slurm_status() const;
  void StopSlurmd();
  std::string node_dir() const;  // this node's disk (SimWorld::state_dir)

  SimWorld& world_;
  NodeConfig config_;
  uint64_t process_ = 0;  // bumped by each new agent process: stale timers stop
  uint64_t conn_ = 0;     // the swarm id; 0: none
  uint64_t attempt_ = 0;  // bumped by each connection attempt: stale callbacks stop
  int failures_ = 0;      // connection attempts since the last that opened
  bool open_ = false;
  bool awaiting_credential_ = false;  // bootstrapped: the credential comes first
  bool dead_ = false, silent_ = false;
  std::chrono::steady_clock::time_point late_until_;  // Late
  bool joined_ = false, joining_ = false;  // network agents
  int unavailable_joins_ = 0;              // joins hpodd could not take, in a row
  std::optional<std::chrono::milliseconds> flap_;
  std::string secret_;
  std::string boot_id_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::milliseconds heartbeat_interval_{2000};
  int64_t seq_ = 0, health_seq_ = 0;
  // This connection's last heartbeat written to its socket, or its opening before the
  // first (unset after a silence asked for).
  std::optional<std::chrono::steady_clock::time_point> last_beat_;
  uint64_t last_beat_conn_ = 0;
  // This connection's frames not yet handed to the swarm, and whether one is
  // being written (its on_written not yet run). Both start over with each
  // connection: a frame handed to a connection that dropped never completes.
  agent::Outbox outbox_{4 * 1024 * 1024};
  bool writing_ = false;
  std::deque<std::pair<double, double>> long_gaps_;
  bool have_config_ = false;
  api::agentproto::LifecycleState lifecycle_;
  nlohmann::json provisioning_;
  // Slurm: the last `slurm` message's role and what runs.
  std::string role_, node_name_, conf_hash_, avoid_start_;
  bool held_ = false;
  double slurmd_started_ = 0;            // 0: no slurmd
  std::vector<std::string> node_names_;  // controller: slurm.conf's nodes
  uint64_t reported_version_ = UINT64_MAX;
  std::map<std::string, std::pair<std::string, std::string>> failing_;  // check → verdict, reason
};

}  // namespace hpod::nodesim
