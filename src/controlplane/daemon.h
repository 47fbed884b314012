#pragma once

// hpodd's composition root: owns the store, the provider, the work queue, the
// reconcilers, the API and the HTTP server, in dependency order. After a restart
// it enqueues every cluster, so whatever was in flight when the previous process
// died is picked up again (level-triggered recovery).
//
// Thread contract: Start/port/Shutdown from one thread; internals are threaded.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/base/thread_annotations.h"
#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/api_server.h"
#include "hpod/controlplane/cluster_api.h"
#include "hpod/controlplane/cluster_reconciler.h"
#include "hpod/controlplane/console.h"
#include "hpod/controlplane/deep_health.h"
#include "hpod/controlplane/health_reconciler.h"
#include "hpod/controlplane/host_api.h"
#include "hpod/controlplane/host_channels.h"
#include "hpod/controlplane/jobs.h"
#include "hpod/controlplane/join_service.h"
#include "hpod/controlplane/metrics.h"
#include "hpod/controlplane/node_api.h"
#include "hpod/controlplane/node_logs.h"
#include "hpod/controlplane/options.h"
#include "hpod/controlplane/pool_provider.h"
#include "hpod/controlplane/s3_relay.h"
#include "hpod/controlplane/work_queue.h"
#include "hpod/http/router.h"
#include "hpod/http/server.h"
#include "hpod/provider/provider.h"
#include "hpod/store/backup_schedule.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

struct DaemonOptions {
  // Holds state.db (the store). Created by `hpodd init`.
  std::string data_dir;
  http::ServerOptions http;
  ControlPlaneOptions control_plane;
  bool insecure_no_auth = false;
  // Bound of the API's cache of read answers (response_cache.h); 0: none.
  size_t api_cache_bytes = ResponseCache::kDefaultMaxBytes;
  int reconcile_workers = 2;
  // Node agents (used when the provider runs agents).
  AgentServiceOptions agents;
  // The agents' listener: a Unix socket (empty: <data_dir>/agent.sock).
  std::string agent_socket;
  // The web console's files (console.h); default: none, GET / says how to build it.
  ConsoleOptions console;
  // The agents' network listener (daemon_agent_network.cc): mutual TLS over TCP,
  // where machines join (GET /join/v1/ca, POST /join/v1/join) and their agents
  // connect with the certificate they got. Empty address: none (only the Unix
  // socket). Port 0 picks a free one (agent_network_port()).
  std::string agent_listen_address;
  uint16_t agent_listen_port = 0;
  // Extra names for the listener's certificate (--tls-name).
  std::vector<std::string> agent_tls_names;
  JoinServiceOptions joins;
  // `hpodd --provider pool` (pool_provider.h): nodes are tenures of joined hosts.
  // Start then makes the provider itself (it needs the store and the host
  // channels) and requires agent_listen_address. `provider` must be null.
  bool pool_provider = false;
  std::string pool_spank_plugin = kPackagedSpankPlugin;
  std::chrono::seconds pool_reboot_timeout = PoolProviderOptions{}.reboot_timeout;
  std::string power_command;  // PoolProviderOptions::power_command
  std::chrono::milliseconds pool_lost_host_after = PoolProviderOptions{}.lost_host_after;
  // --slurm-accounting: "on", "off", or "auto" (on when the nodes share this
  // machine's programs, as local nodes do, and it has slurmdbd and mariadbd).
  std::string slurm_accounting = "auto";
  // --backup-interval, --backup-keep, --backup-dir: scheduled backups of the
  // store (store/backup_schedule.h); interval zero: none. Start fills in
  // store_path, and dir when empty (<data_dir>/backups).
  store::BackupScheduleOptions backups;
};

class Daemon {
 public:
  // `provider` may be null (no provider configured: launches fail with a clear message).
  static StatusOr<std::unique_ptr<Daemon>> Start(const DaemonOptions& options,
                                                 std::unique_ptr<provider::Provider> provider,
                                                 const Clock& clock);
  ~Daemon();

  uint16_t port() const { return server_->port(); }
  // The agents' network listener's port; 0 when there is none.
  uint16_t agent_network_port() const { return agent_net_server_ ? agent_net_server_->port() : 0; }
  // The address it listens on: --agent-listen's, or the one the provider's
  // nodes dial (NodeEnvironment::agent_url); empty without a listener.
  const std::string& agent_network_address() const { return options_.agent_listen_address; }
  // Stops serving (in-flight requests finish within `grace`), then stops reconciling.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  Daemon() = default;
  void ResyncLoop() EXCLUDES(mu_);
  // Drops the events and node logs of clusters deleted longer ago than
  // ControlPlaneOptions::deleted_cluster_retention (logs first, then the record,
  // so a crash between repeats the removal).
  void PurgeDeletedClusters();
  // The routes of the API listener (POST /, GET /healthz, the console's files,
  // the session relay's upgrades) and of the agents' listener (their channel and session upgrades).
  Status AddApiRoutes(http::Router& router);
  Status AddAgentRoutes(http::Router& router);
  // The agents' network listener: its certificate, the join service and its
  // routes (daemon_agent_network.cc). Called from Start when configured.
  Status StartAgentNetwork();
  http::Response ServeJoin(const http::Request& request);

  DaemonOptions options_;
  const Clock* clock_ = nullptr;
  // Members in dependency order: each may use the ones above it.
  std::unique_ptr<Metrics> metrics_;
  std::string metrics_token_;            // GET /metrics's bearer token (<data_dir>/metrics-token)
  std::unique_ptr<store::Store> store_;  // a TimedStore (metrics.h) over SQLite
  std::unique_ptr<NodeLogs> logs_;
  std::unique_ptr<provider::Provider> provider_;
  // With agents_, auto-resume's questions; before it, so it outlives the channels.
  std::unique_ptr<JobService> jobs_;
  std::unique_ptr<AgentService> agents_;  // null unless the provider runs agents
  std::unique_ptr<ClusterReconciler> reconciler_;
  std::unique_ptr<HealthReconciler> health_;
  std::unique_ptr<DeepHealthChecker> deep_health_;  // null unless the provider runs agents
  std::unique_ptr<WorkQueue> queue_;
  std::unique_ptr<ClusterApi> api_;
  std::unique_ptr<NodeApi> node_api_;
  std::unique_ptr<ApiServer> api_server_;
  std::unique_ptr<http::Router> agent_routes_;  // the agents' listener's routes
  std::unique_ptr<http::Server> agent_server_;
  std::unique_ptr<S3Relay> s3_relay_;
  // With --agent-listen: joins, spare hosts' channels, their API, the listener.
  std::unique_ptr<JoinService> joins_;
  std::unique_ptr<HostChannels> host_channels_;
  PoolProvider* pool_ = nullptr;  // provider_, when it is the pool provider
  std::unique_ptr<HostApi> host_api_;
  std::unique_ptr<http::Router> agent_net_routes_;
  std::unique_ptr<http::Server> agent_net_server_;
  std::unique_ptr<Console> console_;          // never null once started
  std::unique_ptr<http::Router> api_routes_;  // the API listener's routes
  std::unique_ptr<http::Server> server_;
  // Reads the store's file on its own connections; started last, stopped first.
  std::unique_ptr<store::BackupSchedule> backups_;

  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread resync_;
};

// Path of the store inside a data dir.
std::string StorePath(const std::string& data_dir);
// Default path of the agents' Unix socket inside a data dir.
std::string AgentSocketPath(const std::string& data_dir);
// Default directory of scheduled backups inside a data dir.
std::string BackupDirPath(const std::string& data_dir);

// What the agents' listeners (Unix and network) share: they shed a request that
// waited 2 s for a handler (max_queue_wait), well under the agent's 5 s connect
// timeout, and keep a 512-deep backlog (about a second's work at the ~450 channel
// upgrades a second measured here; the kernel's 4,096 were nine). In a join storm
// of thousands of agents hpodd then answers the ones still waiting and tells the
// rest to back off, instead of serving, one by one, channels whose agents already
// gave up (measured at 10,000 agents: 100,984 upgrades served, 100,914 abandoned).
http::ServerOptions AgentListenerOptions();

}  // namespace hpod::controlplane
