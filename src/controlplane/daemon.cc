#include "hpod/controlplane/daemon.h"

#include <malloc.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>

#include "hpod/base/crypto.h"
#include "hpod/controlplane/jobs.h"
#include "hpod/controlplane/metrics_state.h"
#include "hpod/http/client.h"

namespace hpod::controlplane {

std::string StorePath(const std::string& data_dir) {
  return (std::filesystem::path(data_dir) / "state.db").string();
}

std::string AgentSocketPath(const std::string& data_dir) {
  return (std::filesystem::path(data_dir) / "agent.sock").string();
}

http::ServerOptions AgentListenerOptions() {
  http::ServerOptions so;
  so.max_queue_wait = std::chrono::milliseconds(2000);
  so.listen_backlog = 512;
  return so;
}

std::string BackupDirPath(const std::string& data_dir) {
  return (std::filesystem::path(data_dir) / "backups").string();
}

namespace {

// What --slurm-accounting auto looks for (Debian's slurmdbd and mariadb-server).
constexpr char kSlurmdbdProgram[] = "/usr/sbin/slurmdbd";
constexpr char kMariadbdProgram[] = "/usr/sbin/mariadbd";

// The pagination secret lives in the store so tokens survive restarts.
StatusOr<std::string> PageSecret(store::Store& store) {
  std::string secret;
  HPOD_RETURN_IF_ERROR(store.Write([&](store::WriteTx& tx) -> Status {
    auto s = tx.GetSetting("page_token_secret");
    if (s.ok()) {
      secret = *s;
      return OkStatus();
    }
    if (s.status().code() != StatusCode::kNotFound) return s.status();
    secret = HexEncode(RandomBytes(32));
    return tx.PutSetting("page_token_secret", secret);
  }));
  return secret;
}

// GET /healthz: the process is up and its API listener answers. Nothing deeper is
// checked, so that a load balancer or systemd can poll it cheaply and without a key.
http::Response Healthz(const http::Request&) {
  http::Response r;
  r.headers.push_back({"Content-Type", "application/json"});
  r.body = R"({"status":"ok"})";
  return r;
}

// "https://10.77.255.254:8451" → its address and port.
Status ListenerOfUrl(const std::string& url, std::string* address, uint16_t* port) {
  StatusOr<http::Url> u = http::ParseUrl(url);
  if (!u.ok() || u->scheme != "https") {
    return InvalidArgumentError("the node provider's agent URL " + url +
                                " is not https://ADDRESS:PORT");
  }
  *address = u->host.size() > 2 && u->host.front() == '[' ? u->host.substr(1, u->host.size() - 2)
                                                          : u->host;
  *port = static_cast<uint16_t>(u->port);
  return OkStatus();
}

std::string RouteTable(const http::Router& router) {
  std::string table;
  for (const http::Route& route : router.routes()) {
    if (!table.empty()) table += ", ";
    table += route.ToString();
  }
  return table;
}

}  // namespace

// Each route names who may call it; its handler enforces that (router.h). A new
// route is one line here.
Status Daemon::AddApiRoutes(http::Router& router) {
  HPOD_RETURN_IF_ERROR(
      router.Add("POST", "/", http::AuthRule::kSigV4,
                 [this](const http::Request& r) { return api_server_->Handle(r); }));
  HPOD_RETURN_IF_ERROR(router.Add("GET", "/healthz", http::AuthRule::kNone, Healthz));
  // Prometheus's scrape: a bearer token from <data_dir>/metrics-token, not SigV4,
  // which Prometheus cannot sign (metrics.h).
  HPOD_RETURN_IF_ERROR(router.Add(
      "GET", "/metrics", http::AuthRule::kBearerToken,
      [this](const http::Request& r) { return ServeMetrics(r, metrics_token_, *metrics_); }));
  // GET / (and /index.html, /assets/*): the web console, or a 404 saying how to build it.
  HPOD_RETURN_IF_ERROR(console_->AddRoutes(router));
  HPOD_RETURN_IF_ERROR(router.AddUpgradePrefix(
      "/v1/sessions/", http::AuthRule::kSessionToken,
      [this](const http::Request& r, std::shared_ptr<http::WebSocket> ws) -> http::UpgradeResult {
        if (agents_ == nullptr) {
          http::Response resp;
          resp.status = 404;
          resp.body = "hpodd runs no node agents, so it has no sessions";
          return resp;
        }
        return agents_->HandleClientSessionUpgrade(r, std::move(ws));
      }));
  // Any other request gets the API's own answer (400 UnknownOperationException:
  // "hpod serves the SageMaker API as POST /"), which AWS clients and
  // tests/e2e/test_bad_input.py expect, rather than the router's plain 404/405; the
  // router still adds Allow on a known path's wrong method.
  router.SetMissHandler(
      [this](const http::Request& r, const http::RouteMiss&) { return api_server_->Handle(r); });
  spdlog::info("hpodd API routes: {}", RouteTable(router));
  return OkStatus();
}

Status Daemon::AddAgentRoutes(http::Router& router) {
  auto upgrade = [this](const http::Request& r, std::shared_ptr<http::WebSocket> ws) {
    return agents_->HandleAgentUpgrade(r, std::move(ws));
  };
  HPOD_RETURN_IF_ERROR(
      router.AddUpgrade("/agent/v1/channel", http::AuthRule::kAgentToken, upgrade));
  HPOD_RETURN_IF_ERROR(
      router.AddUpgradePrefix("/agent/v1/sessions/", http::AuthRule::kAgentToken, upgrade));
  router.SetMissHandler([](const http::Request&, const http::RouteMiss&) {
    http::Response r;
    r.status = 404;
    r.body = "hpod agent endpoint: WebSocket upgrades only";
    return r;
  });
  return OkStatus();
}

StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const DaemonOptions& options,
                                                std::unique_ptr<provider::Provider> provider,
                                                const Clock& clock) {
  std::unique_ptr<Daemon> d(new Daemon());
  d->options_ = options;
  d->clock_ = &clock;
  std::string path = StorePath(options.data_dir);
  if (!std::filesystem::exists(path)) {
    return FailedPreconditionError("no hpod store at " + path + "; run `hpodd init --data-dir " +
                                   options.data_dir + "` first");
  }
  d->metrics_ = std::make_unique<Metrics>(HPOD_VERSION);
  // Data dirs made before the token existed get one now.
  HPOD_ASSIGN_OR_RETURN(d->metrics_token_, EnsureMetricsToken(options.data_dir));
  HPOD_ASSIGN_OR_RETURN(auto sqlite, store::OpenSqliteStore({path}));
  d->store_ = std::make_unique<TimedStore>(std::move(sqlite), *d->metrics_, clock);
  HPOD_ASSIGN_OR_RETURN(std::string secret, PageSecret(*d->store_));
  HPOD_ASSIGN_OR_RETURN(d->console_, Console::Open(options.console));
  d->logs_ = std::make_unique<NodeLogs>(
      NodeLogsOptions{(std::filesystem::path(options.data_dir) / "logs").string()});
  d->provider_ = std::move(provider);
  Daemon* self = d.get();
  if (options.pool_provider) {
    if (d->provider_ != nullptr)
      return InvalidArgumentError("a pool daemon makes its own provider");
    if (options.agent_listen_address.empty()) {
      return FailedPreconditionError(
          "--provider pool needs --agent-listen ADDRESS:PORT: the pool's hosts join and "
          "connect there");
    }
    PoolProviderOptions po;
    po.agent_url = "https://" +
                   (options.agent_listen_address.find(':') != std::string::npos
                        ? "[" + options.agent_listen_address + "]"
                        : options.agent_listen_address) +
                   ":" + std::to_string(options.agent_listen_port);
    po.spank_plugin = options.pool_spank_plugin;
    po.reboot_timeout = options.pool_reboot_timeout;
    po.power_command = options.power_command;
    po.lost_host_after = options.pool_lost_host_after;
    auto pool = std::make_unique<PoolProvider>(*d->store_, clock, po);
    d->pool_ = pool.get();
    d->provider_ = std::move(pool);
  }
  // What the nodes share with hpodd (provider/node_environment.h): every
  // same-machine assumption below reads it.
  provider::NodeEnvironment env;
  if (d->provider_ != nullptr) {
    env = d->provider_->Environment();
    HPOD_RETURN_IF_ERROR(env.Validate());
  }
  std::function<std::string(const std::string&)> bootstrap_token;
  if (d->provider_ != nullptr && d->provider_->RunsAgents()) {
    if (!env.agent_url.empty() && d->options_.agent_listen_address.empty()) {
      // hpodd listens where the provider's nodes dial.
      HPOD_RETURN_IF_ERROR(ListenerOfUrl(env.agent_url, &d->options_.agent_listen_address,
                                         &d->options_.agent_listen_port));
    }
    if (env.agent_socket.empty() && d->options_.agent_listen_address.empty()) {
      return FailedPreconditionError(
          "the node provider's agents dial " +
          (env.agent_url.empty() ? std::string("nothing") : env.agent_url) +
          " over the network; start hpodd with --agent-listen ADDRESS:PORT");
    }
    HPOD_ASSIGN_OR_RETURN(std::string key, AgentService::BootstrapKey(*d->store_));
    AgentServiceOptions agent_options = options.agents;
    agent_options.ship_file_sources = env.ships_file_sources;
    if (!options.agents.s3.endpoint.empty() && !env.s3_relay_socket.empty()) {
      // The relay's socket sits in the directory of hpodd's agent socket, which
      // the provider shows its nodes (NodeEnvironment::s3_relay_socket).
      std::string agent_socket =
          options.agent_socket.empty() ? AgentSocketPath(options.data_dir) : options.agent_socket;
      std::filesystem::path relay = std::filesystem::path(agent_socket).parent_path() /
                                    std::filesystem::path(env.s3_relay_socket).filename();
      HPOD_ASSIGN_OR_RETURN(d->s3_relay_,
                            S3Relay::Start(relay.string(), options.agents.s3.endpoint));
      agent_options.s3.relay_socket = env.s3_relay_socket;
    }
    d->agents_ = std::make_unique<AgentService>(*d->store_, *d->logs_, clock, agent_options, key,
                                                [self](const std::string& cluster_id) {
                                                  // Agent news is both concerns' business: the
                                                  // cluster pass (lifecycle, Slurm) and health (a
                                                  // closed channel, a failing check) right away.
                                                  self->queue_->Add(cluster_id);
                                                  self->queue_->Add(HealthKey(cluster_id));
                                                });
    if (d->pool_ != nullptr) {
      // Pool hosts joined already: their certificate is the node's credential.
    } else if (env.agent_socket.empty()) {
      // Network agents: each launch gets a join token of its own, for that node
      // only, spent by its first join (join_service.h).
      bootstrap_token = [self](const std::string& id) -> std::string {
        JoinTokenSpec spec;
        spec.pool = "nodes";
        spec.instance_id = id;
        spec.ttl = std::chrono::hours(1);
        spec.description = "launch of " + id;
        auto t = self->joins_->CreateToken(spec);
        if (!t.ok()) {
          spdlog::warn("join token for {}: {}", id, t.status().ToString());
          return "";
        }
        return t->text;
      };
    } else {
      bootstrap_token = [self](const std::string& id) { return self->agents_->BootstrapToken(id); };
    }
    d->jobs_ = std::make_unique<JobService>(*d->store_, clock);
    d->agents_->SetJobHandler([self](const std::string& cluster_id, const nlohmann::json& request,
                                     std::optional<double> clock_offset) {
      return self->jobs_->Answer(cluster_id, request, clock_offset);
    });
  }
  SlurmOptions& slurm = d->options_.control_plane.slurm;
  slurm.spank_plugin = env.spank_plugin;
  slurm.stand_in_gpus = env.gpu_stand_ins;
  slurm.cluster_sshd = env.cluster_sshd;
  slurm.send_hosts = !env.sees_hpodd_files;
  slurm.accounting =
      options.slurm_accounting == "on" ||
      (options.slurm_accounting == "auto" && env.sees_hpodd_files &&
       ::access(kSlurmdbdProgram, X_OK) == 0 && ::access(kMariadbdProgram, X_OK) == 0);
  slurm.gpu_device_dir = env.gpu_device_dir;
  d->reconciler_ = std::make_unique<ClusterReconciler>(*d->store_, d->provider_.get(), clock,
                                                       d->options_.control_plane, bootstrap_token,
                                                       d->agents_.get());
  d->health_ = std::make_unique<HealthReconciler>(
      *d->store_, clock, options.control_plane.health, d->agents_.get(), d->provider_.get(),
      [self](const std::string& id) { self->queue_->Add(id); });
  // One queue, one reconciler per concern by key prefix (work_queue.h, KeyRouter),
  // each pass timed as hpod_reconcile_duration_seconds{reconciler}.
  auto timed = [self](std::string reconciler, WorkQueue::Processor pass) -> WorkQueue::Processor {
    return [self, reconciler, pass](const std::string& key) {
      const auto start = self->clock_->SteadyNow();
      WorkQueue::Result result = pass(key);
      self->metrics_->ObserveReconcile(
          reconciler, std::chrono::duration<double>(self->clock_->SteadyNow() - start).count(),
          !result.status.ok());
      return result;
    };
  };
  auto router = std::make_shared<KeyRouter>(timed(
      "cluster", [self](const std::string& key) { return self->reconciler_->Reconcile(key); }));
  router->Route(std::string(kHealthKeyPrefix), timed("health", [self](const std::string& id) {
                  return self->health_->Reconcile(id);
                }));
  WorkQueueOptions qo;
  qo.workers = options.reconcile_workers;
  d->queue_ = std::make_unique<WorkQueue>(
      clock, qo, [router](const std::string& key) { return (*router)(key); });
  d->api_ = std::make_unique<ClusterApi>(
      *d->store_, clock, options.control_plane, PageTokenCodec(secret),
      [self](const std::string& id) { self->queue_->Add(id); }, d->provider_.get());
  d->node_api_ =
      std::make_unique<NodeApi>(*d->store_, clock, d->agents_.get(), *d->logs_, d->provider_.get());
  ApiServerOptions ao;
  ao.insecure_no_auth = options.insecure_no_auth;
  ao.response_cache_bytes = options.api_cache_bytes;
  d->api_server_ = std::make_unique<ApiServer>(*d->store_, *d->api_, *d->node_api_, clock, ao,
                                               d->metrics_.get());
  // What is, computed at each scrape from one read of the store (metrics_state.h).
  // Finished recoveries are folded once, not re-read at every scrape.
  auto recoveries = std::make_shared<RecoveryFiguresCache>();
  // Node summaries are read once per store generation (metrics_state.h).
  auto store_figures = std::make_shared<StoreFiguresCache>();
  d->metrics_->AddCollector([self, recoveries, store_figures](Exposition& out) {
    StateInputs in;
    in.recoveries = recoveries.get();
    in.store_figures = store_figures.get();
    in.store_generation = self->store_->WriteGeneration();  // before the read begins
    if (self->agents_ != nullptr) {
      in.agents = self->agents_->Snapshot();
      in.slurm_nodes = [self](const std::string& id) {
        return self->agents_->SharedSlurmNodes(id);
      };
    }
    in.steady_now = self->clock_->SteadyNow();
    in.work_queue_depth = self->queue_->Pending();
    return self->store_->Read([&](store::ReadTx& tx) { return CollectState(tx, in, out); });
  });
  if (d->agents_ != nullptr) {
    // Agents dial in over a Unix socket: reachable from every local node (the
    // filesystem is shared) without opening a port on any network.
    http::ServerOptions so = AgentListenerOptions();
    so.unix_path =
        options.agent_socket.empty() ? AgentSocketPath(options.data_dir) : options.agent_socket;
    d->agent_routes_ = std::make_unique<http::Router>();
    HPOD_RETURN_IF_ERROR(d->AddAgentRoutes(*d->agent_routes_));
    HPOD_ASSIGN_OR_RETURN(
        d->agent_server_,
        http::Server::Start(so, d->agent_routes_->handler(), d->agent_routes_->upgrade_handler()));
    spdlog::info("hpodd serving node agents on unix:{}", so.unix_path);
  }
  if (!d->options_.agent_listen_address.empty()) {
    HPOD_RETURN_IF_ERROR(d->StartAgentNetwork());
  }
  if (d->agents_ != nullptr) {
    // Both listeners are up (and stay so until the reconcilers stop): a node is
    // not judged silent while hpodd's own reading lags (AgentLiveness::read_lag).
    d->agents_->SetReadLag([self] {
      std::chrono::milliseconds lag{0};
      for (const auto* server : {self->agent_server_.get(), self->agent_net_server_.get()}) {
        if (server != nullptr) lag = std::max(lag, server->IoLag());
      }
      return lag;
    });
  }
  if (d->options_.agent_listen_address.empty()) {
    // No machine can join without the agents' listener, but the hosts that joined
    // an earlier run stay readable (and can be released or retired).
    d->host_api_ = std::make_unique<HostApi>(*d->store_, clock, nullptr, HostApiHooks{});
    d->api_server_->SetHostApi(d->host_api_.get());
  }
  d->queue_->Start();
  if (d->agents_ != nullptr) {
    d->deep_health_ = std::make_unique<DeepHealthChecker>(
        *d->store_, clock, DeepHealthOptions{},
        [self](const std::string& id, const std::vector<std::string>& argv,
               std::chrono::milliseconds timeout) {
          return self->agents_->RunCommand(id, argv, timeout);
        },
        [self](const std::string& id) { self->queue_->Add(id); });
    d->deep_health_->Start();
  }
  d->resync_ = std::thread([self] { self->ResyncLoop(); });
  d->api_routes_ = std::make_unique<http::Router>();
  HPOD_RETURN_IF_ERROR(d->AddApiRoutes(*d->api_routes_));
  HPOD_ASSIGN_OR_RETURN(d->server_, http::Server::Start(options.http, d->api_routes_->handler(),
                                                        d->api_routes_->upgrade_handler()));
  spdlog::info("hpodd serving the SageMaker cluster API on {}:{} (auth: {})", options.http.address,
               d->server_->port(),
               options.insecure_no_auth ? "DISABLED (--insecure-no-auth)" : "SigV4");
  store::BackupScheduleOptions backups = options.backups;
  backups.store_path = StorePath(options.data_dir);
  if (backups.dir.empty()) backups.dir = BackupDirPath(options.data_dir);
  if (backups.interval.count() > 0) {
    spdlog::info("backups: every {} s into {}, keeping the newest {}", backups.interval.count(),
                 backups.dir, backups.keep);
  }
  d->backups_ = std::make_unique<store::BackupSchedule>(backups, clock);
  d->backups_->Start();
  return d;
}

void Daemon::ResyncLoop() {
  MutexLock lock(mu_);
  while (!stopping_) {
    lock.Unlock();
    std::vector<std::string> ids;
    Status s = store_->Read([&](store::ReadTx& tx) -> Status {
      HPOD_ASSIGN_OR_RETURN(ids, tx.ListClusterIds());
      return OkStatus();
    });
    if (!s.ok()) spdlog::warn("resync: {}", s.ToString());
    // Level-triggered: every concern looks at every cluster now and then, whatever
    // events were missed.
    for (const auto& id : ids) {
      queue_->Add(id);
      queue_->Add(HealthKey(id));
    }
    PurgeDeletedClusters();
    // glibc keeps what a burst freed (the configs queued to thousands of agents
    // joining at once) for the threads that freed it: after a 5,000-node
    // creation, about 900 MB of hpodd's 1.6 GB resident set. Given back here.
    malloc_trim(0);
    lock.Lock();
    lock.WaitFor(cv_, options_.control_plane.resync_interval,
                 [this]() REQUIRES(mu_) { return stopping_; });
  }
}

void Daemon::PurgeDeletedClusters() {
  Status s = PurgeExpiredClusters(*store_, *logs_, *clock_,
                                  options_.control_plane.deleted_cluster_retention);
  if (!s.ok()) spdlog::warn("purging deleted clusters: {}", s.ToString());
}

void Daemon::Shutdown(std::chrono::milliseconds grace) {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  // A backup in progress completes (it only reads the store); none starts after.
  if (backups_) backups_->Stop();
  // The checker's run in flight ends without results (the agents' shutdown
  // answers its commands, which says nothing of the nodes); the next hpodd
  // takes it again.
  if (deep_health_) deep_health_->RequestStop();
  if (agents_) agents_->Shutdown();
  if (deep_health_) deep_health_->Stop();
  if (host_channels_) host_channels_->Shutdown();
  if (agent_net_server_) agent_net_server_->Shutdown(grace);
  if (server_) server_->Shutdown(grace);
  if (agent_server_) agent_server_->Shutdown(grace);
  if (s3_relay_) s3_relay_->Shutdown();
  if (resync_.joinable()) resync_.join();
  if (queue_) queue_->Stop();
  spdlog::info("hpodd stopped");
}

Daemon::~Daemon() { Shutdown(std::chrono::milliseconds(0)); }

}  // namespace hpod::controlplane
