#pragma once

// hpodd's side of the node agents (protocol: src/agent/PROTOCOL.md). Each agent
// holds one WebSocket channel to hpodd. Through it the agent registers (one-time
// bootstrap token → per-node credential), fetches its configuration (lifecycle
// scripts, resource_config.json), heartbeats, reports lifecycle progress and
// streams logs; hpodd sends it commands and shell sessions.
//
// Bootstrap tokens are derived, not stored: HMAC(daemon key, instance id). The
// reconciler can hand the same token to a repeated Launch after a crash, and the
// token is dead once the agent has confirmed its credential (its first `hello`
// after receiving it), because from then on only the credential is accepted.
// Credentials are stored as SHA-256 hashes (they are 256-bit random strings).
//
// Lifecycle results are written to the store (node_agents) and the cluster is
// queued for reconciliation; heartbeats are kept in memory only (they carry no
// state that must survive a restart, and 200 nodes beating every few seconds
// should cost no disk writes).
//
// Thread contract: thread-safe. Upgrades run on the HTTP server's handler pool.
// A channel's messages arrive on the server's I/O threads, which only parse them
// and note heartbeats; everything else (store writes, configs) runs on the
// service's own threads, in order per connection (lanes_). One mutex guards the
// connection tables and is never held across a store transaction or a socket
// send that could block (WebSocket::Send only queues).

#include <array>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "hpod/api/agent_protocol.h"
#include "hpod/base/clock.h"
#include "hpod/base/lanes.h"
#include "hpod/base/status.h"
#include "hpod/base/thread_annotations.h"
#include "hpod/controlplane/node_logs.h"
#include "hpod/controlplane/slurm_plan.h"
#include "hpod/http/message.h"
#include "hpod/http/websocket.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

struct S3Settings {
  std::string endpoint;  // "http://127.0.0.1:8080"; empty: s3:// lifecycle sources fail clearly
  std::string region = "us-east-1";
  std::string access_key_id;
  std::string secret_access_key;
  // Where agents reach the endpoint through hpodd's S3 relay, as a path inside the
  // node (empty: agents connect to `endpoint` directly).
  std::string relay_socket;
};

struct AgentServiceOptions {
  std::chrono::milliseconds heartbeat_interval{2000};
  // Longest an OnCreate script may run before the node fails.
  std::chrono::seconds lifecycle_timeout{1800};
  // Send file:// lifecycle sources' scripts in the config (the provider's
  // NodeEnvironment::ships_file_sources; lifecycle_bundle.h).
  bool ship_file_sources = false;
  S3Settings s3;
  // A session the client has not connected to within this time is dropped.
  std::chrono::seconds session_connect_timeout{60};
  // Bytes buffered for one side of a session while the other has not connected.
  size_t session_buffer_bytes = 1 << 20;
  // Threads that handle the agents' messages (each connection's in order, on its
  // lane): never the HTTP server's I/O threads, which must stay free to accept.
  int message_threads = 2;
  // A connection with this many messages waiting is closed (an agent sending
  // faster than it can be served; it reconnects with backoff).
  size_t max_queued_messages = 1000;
};

struct CommandResult {
  int exit_code = 0;
  bool timed_out = false;
  std::string stdout_data;
  std::string stderr_data;
};

struct SessionGrant {
  std::string session_id;
  std::string token;  // one-time; the client presents it as `HpodSession <token>`
};

// What hpodd knows, in memory, of whether a node's agent is alive.
struct AgentLiveness {
  bool connected = false;
  std::chrono::steady_clock::time_point connected_at;  // when connected
  std::optional<std::chrono::steady_clock::time_point> last_heartbeat;
  // When hpodd last read from the agent: a whole frame of any type (a heartbeat
  // included) or a part of a large one. The agent is alive while it sends. A
  // controller's agent sends its Slurm table (a megabyte at 10,000 nodes)
  // whenever Slurm changes, and its heartbeat waits behind the table's last
  // byte; hpodd, busy (a cluster's creation), may take seconds to read it.
  std::optional<std::chrono::steady_clock::time_point> last_read;
  // How far behind hpodd's own reading of the agents' connections runs now (the
  // listeners' I/O lag, http::Server::IoLag): an agent's bytes may wait this long
  // for hpodd to read them, so a silence this much longer is hpodd's, not the
  // node's. Zero when unknown.
  std::chrono::milliseconds read_lag{0};
  // When the agent's last connection closed (none: not since hpodd started).
  std::optional<std::chrono::steady_clock::time_point> disconnected_at;
  std::chrono::steady_clock::time_point service_started;
};

// A node's newest host figures (`heartbeat.host`), flat, as a scrape shows
// them. A scrape copies 10,000 of these under the service's lock: a shared
// pointer to each heartbeat's HostStats (what this was) cost a cache miss and
// two atomic operations per node, four fifths of the copy.
struct AgentHostFigures {
  api::agentproto::HostCpuSeconds cpu_seconds;
  int64_t memory_total_bytes = 0;
  int64_t memory_available_bytes = 0;
  struct Filesystem {
    bool reported = false;  // the agent left it out (not mounted, statvfs hung)
    int64_t size_bytes = 0;
    int64_t avail_bytes = 0;
  };
  // By index in api::agentproto::kHostMountpoints.
  std::array<Filesystem, std::size(api::agentproto::kHostMountpoints)> filesystems;

  // The first entry of each known mount point; others are left out (the
  // protocol's reader drops them already: this holds for any HostStats).
  static AgentHostFigures Of(const api::agentproto::HostStats& host);
};

// One connected agent as hpodd holds it in memory, for a metrics scrape.
struct AgentSnapshot {
  std::string instance_id;
  std::string cluster_id;
  std::chrono::steady_clock::time_point connected_at;
  std::optional<std::chrono::steady_clock::time_point> last_heartbeat;
  // The newest `heartbeat.host` of this connection (none from older agents, or
  // when hpodd could not read the last one).
  std::optional<AgentHostFigures> host;
  // Its latest health report's worst verdict among checks that ask for action
  // ("Healthy", "Reboot", "Replace"); empty before the first report.
  std::string health_verdict;
  std::vector<std::string> failing_checks;  // checks of that report that fail or time out
  std::optional<double> clock_offset;       // AgentService::ClockOffset
};

// hpodd's view of the nodes for the health reconciler (AgentService; fakes in
// tests).
//
// Thread contract: implementations are thread-safe (every reconcile worker calls
// them) and return snapshots.
class NodeSignals {
 public:
  virtual ~NodeSignals() = default;
  virtual AgentLiveness Liveness(const std::string& instance_id) const = 0;
  // The agent's latest health report (null when not connected or not reported),
  // shared, not copied: the health pass reads every node's each second.
  virtual std::shared_ptr<const api::agentproto::HealthReport> Health(
      const std::string& instance_id) const = 0;
  // The controller's Slurm table (null before its first report), shared, not
  // copied: at 10,000 nodes a copy each second was 10,000 rows and their index.
  virtual std::shared_ptr<const SlurmNodesReport> SharedSlurmNodes(
      const std::string& cluster_id) const = 0;
};

class AgentService final : public SlurmAgents, public NodeSignals {
 public:
  // `bootstrap_key` is the daemon's secret (BootstrapKey below). `on_change` is
  // called with a cluster id whenever agent-reported state changed, including an
  // agent's disconnect (the daemon queues the cluster for its reconciler).
  AgentService(store::Store& store, NodeLogs& logs, const Clock& clock, AgentServiceOptions options,
               std::string bootstrap_key,
               std::function<void(const std::string& cluster_id)> on_change);
  ~AgentService();

  // The daemon's bootstrap key, created on first use and kept in the store.
  static StatusOr<std::string> BootstrapKey(store::Store& store);

  // The one-time token the provider delivers to the node `instance_id`.
  std::string BootstrapToken(const std::string& instance_id) const;

  // WebSocket upgrades on the agent listener: /agent/v1/channel and
  // /agent/v1/sessions/<id>.
  http::UpgradeResult HandleAgentUpgrade(const http::Request& request,
                                         std::shared_ptr<http::WebSocket> socket);
  // WebSocket upgrades on the API listener: /v1/sessions/<id> (hpod start-session).
  http::UpgradeResult HandleClientSessionUpgrade(const http::Request& request,
                                                 std::shared_ptr<http::WebSocket> socket);

  // Runs argv as root on the node through its agent. kFailedPrecondition when the
  // agent is not connected; kDeadlineExceeded when no result came in time.
  StatusOr<CommandResult> RunCommand(const std::string& instance_id,
                                     const std::vector<std::string>& argv,
                                     std::chrono::milliseconds timeout);

  // Asks the node's agent a `training_query` (it reads training metrics under its
  // /fsx, which hpodd does not see; agent_training.cc) and waits for the
  // `training_result`. `query.id` is assigned here. kFailedPrecondition when the
  // agent is not connected; kUnavailable when it disconnected before answering;
  // kDeadlineExceeded when no answer came within `timeout`. A result whose `ok` is
  // false is returned as it came (its ToStatus() is the agent's error).
  StatusOr<api::agentproto::TrainingResult> QueryTraining(const std::string& instance_id,
                                                          api::agentproto::TrainingQuery query,
                                                          std::chrono::milliseconds timeout);

  // Asks the node's agent to open a shell session (an interactive PTY shell when
  // `command` is empty, else `bash -lc command` without a PTY). The node must be
  // connected (kFailedPrecondition otherwise, saying so).
  // `user`: the node's user the shell runs as; empty: root. `unprivileged`: the
  // agent refuses a system account (OpenSession::unprivileged).
  StatusOr<SessionGrant> StartSession(const std::string& instance_id, const std::string& command,
                                      const std::string& user, bool unprivileged, int rows,
                                      int cols);

  // How far behind the agents' listeners read now (AgentLiveness::read_lag);
  // set once the listeners run. Thread-safe.
  void SetReadLag(std::function<std::chrono::milliseconds()> read_lag);

  // NodeSignals.
  AgentLiveness Liveness(const std::string& instance_id) const override;
  std::shared_ptr<const api::agentproto::HealthReport> Health(
      const std::string& instance_id) const override;

  // SlurmAgents. Slurm state and the controller's node table are kept in memory:
  // agents report them again whenever they reconnect.
  nlohmann::json SlurmState(const std::string& instance_id) const override;
  std::optional<double> ConnectedSince(const std::string& instance_id) const override;
  std::optional<SlurmNodesReport> SlurmNodes(const std::string& cluster_id) const override;
  // The same, shared rather than copied (the health pass reads it each second, a
  // scrape counts it by state).
  std::shared_ptr<const SlurmNodesReport> SharedSlurmNodes(
      const std::string& cluster_id) const override;
  bool Send(const std::string& instance_id, const nlohmann::json& message) override;
  // Remembers, per connection and message type, the last message sent this way
  // (a hash of its text) and when: a reconnect starts afresh.
  bool SendUnlessRecent(const std::string& instance_id, const nlohmann::json& message,
                        std::chrono::milliseconds resend_after) override;
  StatusOr<CommandResult> Run(const std::string& instance_id, const std::vector<std::string>& argv,
                              std::chrono::milliseconds timeout) override {
    return RunCommand(instance_id, argv, timeout);
  }

  // Every connected agent, for GET /metrics (agent_health.cc).
  std::vector<AgentSnapshot> Snapshot() const;

  // The node's clock minus hpodd's, in seconds, while its agent is connected and
  // has sent a heartbeat with `time` (none otherwise: not connected, or an agent
  // older than the field). Each beat gives its `time` minus hpodd's clock when
  // the beat arrived, so a sample also holds the beat's one-way delay (it reads
  // low by it); the largest of the connection's last kClockSamples samples is
  // the beat delayed least, the closest to the true offset, and a clock that was
  // stepped on the node shows within kClockSamples beats. In memory only.
  // Use: turning a time the node read into hpodd's clock (job_health's `since`)
  // and DescribeClusterNode's HpodClockOffsetSeconds.
  static constexpr size_t kClockSamples = 8;
  std::optional<double> ClockOffset(const std::string& instance_id) const;

  // Closes every channel and session (daemon shutdown).
  void Shutdown();

  // Answers the `job_query`s agents relay from their local socket (JobService,
  // jobs.h). Set once, before agents connect; without one, queries are answered
  // {"error": ...}.
  // `clock_offset` is the asking node's ClockOffset (none when unknown): the
  // handler turns the times the node read into hpodd's clock with it.
  using JobHandler =
      std::function<nlohmann::json(const std::string& cluster_id, const nlohmann::json& request,
                                   std::optional<double> clock_offset)>;
  void SetJobHandler(JobHandler handler) { job_handler_ = std::move(handler); }

  // Network agents (mutual TLS; join_service.h). An upgrade that came over TLS is
  // authenticated only by its verified client certificate: `auth(serial, cn)`
  // returns the instance id the certificate's host serves (its
  // X-Hpod-Instance-Id must be that one) or why it is refused; bootstrap tokens
  // and node credentials are not accepted there. `renew(serial, cn, csr)` answers
  // a channel's renew_certificate. Set once, before agents connect.
  struct CertificateHooks {
    std::function<StatusOr<std::string>(const std::string& serial, const std::string& cn)> auth;
    std::function<StatusOr<api::agentproto::Certificate>(
        const std::string& serial, const std::string& cn, const std::string& csr)>
        renew;
  };
  void SetCertificateHooks(CertificateHooks hooks) { certificate_hooks_ = std::move(hooks); }

  // Whether the node's agent holds a channel now.
  bool IsConnected(const std::string& instance_id) const;
  // Closes the node's channel, if it has one (its host was revoked).
  void Disconnect(const std::string& instance_id, const std::string& reason);

 private:
  struct Channel;
  struct Session;
  struct PendingCommand;
  struct PendingTraining;

  // Never closes the channel for a bad frame (except a refused hello): a frame
  // hpodd cannot read is answered with an `error` frame (Refuse).
  void OnChannelMessage(const std::shared_ptr<Channel>& ch, const http::WebSocketMessage& m);
  // Notes a heartbeat (on the I/O thread: its time is when it came, however far
  // the channel's lane is behind) and queues what else it carries.
  void HandleHeartbeat(const std::shared_ptr<Channel>& ch, const nlohmann::json& msg);
  // Notes a read that brought no heartbeat (AgentLiveness::last_read): a frame
  // of another type, or a part of a large frame.
  void NoteRead(const std::shared_ptr<Channel>& ch);
  // Queues `task` on the channel's lane; a channel too far behind is closed.
  void Post(const std::shared_ptr<Channel>& ch, std::function<void()> task);
  void Dispatch(const std::shared_ptr<Channel>& ch, const std::string& type,
                const nlohmann::json& msg);
  // Records a node event ("hpod agent on the instance disconnected") and wakes the
  // cluster's reconciler, unless a newer connection replaced this one.
  void OnChannelClosed(const std::shared_ptr<Channel>& ch);
  // Answers a frame hpodd cannot read with an `error` frame naming what is wrong,
  // logs it and records a node event (the first time per type and connection).
  void Refuse(const std::shared_ptr<Channel>& ch, const std::string& frame_type,
              const std::string& why);
  // T::FromJson(msg), or nullopt after Refuse.
  template <typename T>
  std::optional<T> Parse(const std::shared_ptr<Channel>& ch, const nlohmann::json& msg);
  // Checks the protocol version: another one (or an unreadable hello) is refused and
  // the channel closed.
  void HandleHello(const std::shared_ptr<Channel>& ch, const nlohmann::json& m);
  void HandleLifecycle(const std::shared_ptr<Channel>& ch,
                       const api::agentproto::LifecycleState& lifecycle);
  void HandleSlurmState(const std::shared_ptr<Channel>& ch,
                        const api::agentproto::SlurmStatus& state);
  void HandleSlurmNodes(const std::shared_ptr<Channel>& ch, const api::agentproto::SlurmNodes& m);
  void HandleProvisioningParameters(const std::shared_ptr<Channel>& ch,
                                    const api::agentproto::ProvisioningParameters& m);
  void HandleCommandResult(const std::shared_ptr<Channel>& ch, const nlohmann::json& m);
  // Hands a `training_result` to its waiting QueryTraining (agent_training.cc).
  void HandleTrainingResult(const std::shared_ptr<Channel>& ch, const nlohmann::json& m);
  // Fails the training queries sent on this connection (it closed; agent_training.cc).
  void FailTrainingQueries(const std::shared_ptr<Channel>& ch);
  // Keeps the report, records an event per check that starts or stops failing and
  // wakes the cluster when the node's worst verdict changed (agent_health.cc).
  void HandleHealth(const std::shared_ptr<Channel>& ch, const api::agentproto::HealthReport& m);
  // Answers a `job_query` with a `job_answer` (agent_health.cc).
  void HandleJobQuery(const std::shared_ptr<Channel>& ch, const api::agentproto::JobQuery& q);
  // The `config` (or `config_pending`) for `instance_id`; `listed` gets the
  // instance ids resource_config.json lists.
  nlohmann::json BuildConfig(const std::string& instance_id,
                             std::unordered_set<std::string>* listed);
  // The serialized `config` for a node of (cluster, group): every node of a group
  // gets the same one, and resource_config.json lists every node of the cluster,
  // so it is built once per group and kConfigReuse, not once per node (10,000
  // nodes asking at once made that 10,000 reads and renderings of 10,000 nodes,
  // on the channels' I/O threads). A `config_pending` is kept too, for
  // kPendingReuse: while a cluster's nodes are being launched every node of it
  // asks again and again, and each build read every node (at 10,000 nodes this
  // took all of both I/O threads, and no agent could even connect).
  // Shared: every node of the group is sent the same bytes (no copy per node;
  // 10,000 copies of a 1 MB config took 4.6 GB).
  std::shared_ptr<const std::string> ConfigFor(const std::shared_ptr<Channel>& ch);
  http::UpgradeResult AgentSessionUpgrade(const std::string& session_id,
                                          const std::string& instance_id,
                                          std::shared_ptr<http::WebSocket> socket);
  http::WebSocketCallbacks RelayCallbacks(const std::shared_ptr<Session>& s, bool from_client);
  void EndSession(const std::string& session_id);
  void SweepSessions();
  // The node the request names, if its credential (or bootstrap token, or over
  // TLS its client certificate) is right (agent_auth.cc).
  StatusOr<store::NodeRecord> AuthenticateAgent(const http::Request& request, bool allow_bootstrap,
                                                bool* bootstrapped);
  // A new credential for a node that came with its bootstrap token: stores its
  // hash and returns the secret, for the agent's first frame (agent_auth.cc).
  StatusOr<std::string> IssueCredential(const store::NodeRecord& node);
  // Makes or updates the node's agent record; sets the credential hash if given
  // (a network agent has none: its certificate is its proof).
  Status PutAgentRecord(const store::NodeRecord& node, const std::string& credential_hash);

  store::Store& store_;
  NodeLogs& logs_;
  const Clock& clock_;
  const AgentServiceOptions options_;
  const std::string bootstrap_key_;
  const std::function<void(const std::string&)> on_change_;

  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<Channel>> channels_ GUARDED_BY(mu_);  // by instance id
  std::map<std::string, std::shared_ptr<Session>> sessions_ GUARDED_BY(mu_);  // by session id
  std::map<std::string, std::shared_ptr<PendingCommand>> commands_ GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<PendingTraining>> training_ GUARDED_BY(mu_);  // by id
  // By cluster id; a report is never changed once stored: a new one replaces it.
  std::map<std::string, std::shared_ptr<const SlurmNodesReport>> slurm_nodes_ GUARDED_BY(mu_);
  // By instance id: when the last connection closed; the latest health report
  // (kept across a reconnect, so a check still failing is not a new event; both
  // grow by one entry per node hpodd has seen since it started).
  std::map<std::string, std::chrono::steady_clock::time_point> disconnected_at_ GUARDED_BY(mu_);
  // A report is never changed once stored: a new one replaces it.
  // With what a scrape shows of it, worked out once when it came (10,000 nodes'
  // verdicts at every scrape were a sixth of one).
  struct StoredHealth {
    std::shared_ptr<const api::agentproto::HealthReport> report;
    std::string verdict;               // AgentSnapshot::health_verdict
    std::vector<std::string> failing;  // AgentSnapshot::failing_checks
  };
  std::map<std::string, StoredHealth> health_ GUARDED_BY(mu_);
  const std::chrono::steady_clock::time_point started_ = clock_.SteadyNow();
  bool shut_down_ GUARDED_BY(mu_) = false;
  // SetReadLag's; called under mu_ (it takes no lock of its own).
  std::function<std::chrono::milliseconds()> read_lag_ GUARDED_BY(mu_);
  struct BuiltConfig {
    std::shared_ptr<const std::string> message;
    std::chrono::steady_clock::time_point built;
    bool pending = false;
    std::unordered_set<std::string> listed;  // instance ids in resource_config.json
  };
  Mutex config_mu_;  // never held across a store read
  std::map<std::pair<std::string, std::string>, BuiltConfig> configs_ GUARDED_BY(config_mu_);
  // By (cluster, group): held while that config is built (across its store
  // read), so that its nodes asking at once wait for one build instead of each
  // making its own; other groups' builds go on meanwhile.
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Mutex>> builds_
      GUARDED_BY(config_mu_);
  JobHandler job_handler_;
  CertificateHooks certificate_hooks_;  // set before serving, read-only after
  // Last: destroyed first, so that no message handler runs on a half-destroyed
  // service.
  Lanes lanes_{options_.message_threads};
};

}  // namespace hpod::controlplane
