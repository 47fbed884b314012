#include "hpodd_main.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <iostream>

#include "hpod/base/logging.h"
#include "hpod/base/sd_notify.h"
#include "hpod/base/signals.h"
#include "hpod/controlplane/api_tls.h"
#include "hpod/controlplane/console.h"
#include "hpod/controlplane/daemon.h"
#include "hpod/controlplane/init.h"
#include "hpod/controlplane/metrics.h"
#include "hpod/store/store.h"
#include "store_commands.h"

namespace hpod::cmd {
namespace {

constexpr char kPoolProvider[] = "pool";

std::string DefaultDataDir() {
  const char* env = std::getenv("HPOD_DATA_DIR");
  return env ? env : "/var/lib/hpod";
}

// "127.0.0.1:8450" → address, port. A bare port means loopback.
bool ParseListen(const std::string& s, std::string* address, uint16_t* port) {
  size_t colon = s.rfind(':');
  std::string host = colon == std::string::npos ? "127.0.0.1" : s.substr(0, colon);
  std::string p = colon == std::string::npos ? s : s.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  char* end = nullptr;
  long v = std::strtol(p.c_str(), &end, 10);
  if (p.empty() || *end != '\0' || v < 0 || v > 65535) return false;
  *address = host;
  *port = static_cast<uint16_t>(v);
  return true;
}

int RunServe(const controlplane::DaemonOptions& options, const ProviderContext& context,
             const ProviderChoice& choice) {
  // The stop signals are blocked in every thread (started before any other)
  // and read by a watcher thread, never by a handler (hpod/base/signals.h).
  // The first one shuts down; later ones change nothing.
  std::promise<int> stop;
  std::atomic<bool> stopping{false};
  auto watcher = SignalWatcher::Start({SIGTERM, SIGINT}, [&](int sig) {
    if (!stopping.exchange(true)) stop.set_value(sig);
  });
  if (!watcher.ok()) return Fail(watcher.status().message());
  signal(SIGPIPE, SIG_IGN);
  // Before the provider, which creates <data-dir>/local and the guard route: a
  // mistyped --data-dir must leave nothing behind (Daemon::Start says the same).
  if (!std::filesystem::exists(controlplane::StorePath(options.data_dir))) {
    return Fail("no hpod store at " + controlplane::StorePath(options.data_dir) +
                "; run `hpodd init --data-dir " + options.data_dir + "` first");
  }
  if (std::string busy = LockDataDir(options.data_dir); !busy.empty()) return Fail(busy);

  const Clock& clock = RealClock::Get();
  auto provider = choice.make(clock, context);
  if (!provider.ok()) return Fail(provider.status().message());
  auto daemon = controlplane::Daemon::Start(options, std::move(provider).value(), clock);
  if (!daemon.ok()) return Fail(daemon.status().message());
  spdlog::info("node provider: {}", choice.description);
  // The agents' address comes before the ready line, which scripts (and systemd,
  // READY=1) wait for before they call the API.
  if (uint16_t agent_port = (*daemon)->agent_network_port(); agent_port != 0) {
    const std::string& a = (*daemon)->agent_network_address();
    std::printf("hpodd agents join on https://%s:%u\n",
                a.find(':') != std::string::npos ? ("[" + a + "]").c_str() : a.c_str(),
                static_cast<unsigned>(agent_port));
  }
  const std::string& host = options.http.address;
  std::printf("hpodd ready on %s://%s:%u\n", options.http.tls.enabled ? "https" : "http",
              host.find(':') != std::string::npos ? ("[" + host + "]").c_str() : host.c_str(),
              static_cast<unsigned>((*daemon)->port()));
  std::fflush(stdout);
  (void)SdNotify("READY=1");
  const int sig = stop.get_future().get();
  spdlog::info("received {}, shutting down", SignalName(sig));
  (void)SdNotify("STOPPING=1");
  (*daemon)->Shutdown(std::chrono::seconds(10));
  return 0;
}

}  // namespace

int HpoddMain(int argc, char** argv, const std::vector<ProviderChoice>& providers) {
  CLI::App app{"hpodd: the hpod control plane (SageMaker HyperPod cluster API)", "hpodd"};
  app.require_subcommand(0, 1);
  // Subcommands inherit this: `hpodd metrics-token --data-dir D` means what
  // `hpodd --data-dir D metrics-token` does, as scripts and docs write both.
  app.fallthrough();
  std::string data_dir = DefaultDataDir();
  std::string log_level = "info";
  app.add_option("--data-dir", data_dir, "State directory (env HPOD_DATA_DIR)")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error")->capture_default_str();

  // serve (default)
  auto* serve = app.add_subcommand("serve", "Serve the API (the default)");
  std::string listen = "127.0.0.1:8450";
  std::string region = "us-west-2", account = "123456789012";
  bool insecure = false;
  bool tls = false;
  int threads = 2;
  size_t max_body = 8 * 1024 * 1024;
  size_t api_cache_mb = controlplane::ResponseCache::kDefaultMaxBytes >> 20;
  std::string log_file;
  std::string node_block = "10.77.0.0/16", fsx_root, s3_endpoint, s3_region = "us-east-1";
  std::string link_prefix = "hp";
  int node_disk_mb = 0;
  std::string node_software;
  std::string fake_nvml_library;
  std::vector<std::string> fake_clock_skew;
  int heartbeat_ms = 2000, heartbeat_timeout_ms = 6000, lifecycle_timeout_s = 1800,
      register_timeout_s = 120;
  int deleted_retention_h = 168;
  int slurmd_timeout_s = 30;
  std::string slurm_accounting = "auto";
  std::string console_dir;
  std::string agent_listen;
  std::string agent_transport = "unix";
  std::vector<std::string> agent_tls_names;
  int agent_cert_validity_s = 7 * 24 * 3600;
  std::string provider_name = providers.empty() ? "" : providers.front().name;
  std::vector<std::string> provider_names;
  for (const ProviderChoice& p : providers) provider_names.push_back(p.name);
  // Every hpodd offers the pool (controlplane/pool_provider.h): the daemon makes
  // it, since it needs the store and the hosts' channels.
  provider_names.push_back(kPoolProvider);
  std::string pool_spank_plugin = controlplane::kPackagedSpankPlugin;
  int pool_reboot_timeout_s =
      static_cast<int>(controlplane::PoolProviderOptions{}.reboot_timeout.count());
  int pool_lost_host_ms =
      static_cast<int>(controlplane::PoolProviderOptions{}.lost_host_after.count());
  std::string power_command;
  // Strings, checked after parsing (ParseBackupFlags), so a bad value is one
  // "hpodd: error:" line that says what to write.
  std::string backup_interval = "0", backup_keep = "7", backup_dir;
  for (CLI::App* a : {static_cast<CLI::App*>(&app), serve}) {
    a->add_option("--provider", provider_name,
                  "Where nodes come from: " + CLI::detail::join(provider_names, ", "))
        ->check(CLI::IsMember(provider_names))
        ->capture_default_str();
    a->add_option("--listen", listen, "ADDRESS:PORT to serve on (default loopback)")
        ->capture_default_str();
    a->add_option("--region", region, "Region in ARNs and DNS names")->capture_default_str();
    a->add_option("--account-id", account, "12-digit account id in ARNs")->capture_default_str();
    a->add_flag("--tls", tls,
                "Serve the API, the console, sessions and /metrics over TLS on a loopback "
                "address too (any other address is always TLS: <data-dir>/tls, from hpodd init)");
    a->add_flag("--insecure-no-auth", insecure,
                "DEVELOPMENT ONLY: accept unsigned requests and treat every caller as admin");
    a->add_option("--http-threads", threads, "I/O threads")->capture_default_str();
    a->add_option("--max-request-bytes", max_body, "Largest request body")->capture_default_str();
    a->add_option("--api-cache-mb", api_cache_mb,
                  "MiB of read-only API answers (DescribeCluster, List*) kept while the store "
                  "is unchanged, to serve repeated reads without reading it; 0: none")
        ->check(CLI::Range(0, 1 << 16))
        ->capture_default_str();
    a->add_option("--log-file", log_file, "Also log here (default <data-dir>/hpodd.log)");
    a->add_option("--node-block", node_block,
                  "IPv4 block for local nodes (guarded by an unreachable route; one /24 per "
                  "cluster)")
        ->capture_default_str();
    a->add_option("--fsx-root", fsx_root,
                  "Host directory holding each cluster's shared /fsx (default "
                  "<data-dir>/local/fsx)");
    a->add_option("--link-prefix", link_prefix,
                  "Prefix (1-4 chars) of the bridge, veth and netns names of local nodes; two "
                  "hpodd on one host need different ones")
        ->capture_default_str();
    a->add_option("--node-disk-mb", node_disk_mb,
                  "Give each new local node its own disk of this many MiB (a tmpfs, so "
                  "`hpod inject-fault --kind disk-full` fills it, not the host); 0: a directory "
                  "on the host's disk")
        ->check(CLI::Range(0, 1 << 20))
        ->capture_default_str();
    a->add_option("--node-software", node_software,
                  "A directory whose hpod-agent, spank_hpod.so, hpod-container and "
                  "hpod-deep-check local nodes get in place of those beside hpodd: where a new "
                  "release is staged for UpdateClusterSoftware (docs/software-updates.md)")
        ->check(CLI::ExistingDirectory);
    a->add_option("--fake-nvml-library", fake_nvml_library,
                  "Path of a fake libnvidia-ml (hpod_fake_nvml) that the agents of GPU nodes "
                  "load, so GPU health checks and gpu-xid faults work without GPUs");
    a->add_option("--fake-clock-skew", fake_clock_skew,
                  "GROUP=SECONDS: run the local nodes of instance group GROUP with their wall "
                  "clock SECONDS off this machine's (libfaketime; for tests; repeatable)");
    a->add_option("--s3-endpoint", s3_endpoint,
                  "S3 endpoint for s3:// lifecycle scripts (path-style; credentials from "
                  "HPOD_S3_ACCESS_KEY_ID / HPOD_S3_SECRET_ACCESS_KEY)");
    a->add_option("--s3-region", s3_region, "Region S3 requests are signed for")
        ->capture_default_str();
    a->add_option("--heartbeat-interval-ms", heartbeat_ms, "How often node agents heartbeat")
        ->check(CLI::Range(100, 600000))
        ->capture_default_str();
    a->add_option("--heartbeat-timeout-ms", heartbeat_timeout_ms,
                  "A node whose agent is silent this long is replaced (keep detection plus "
                  "replacement inside --slurmd-timeout)")
        ->check(CLI::Range(500, 3600000))
        ->capture_default_str();
    a->add_option("--lifecycle-timeout", lifecycle_timeout_s,
                  "Seconds an OnCreate script may run before its node fails")
        ->check(CLI::Range(1, 86400))
        ->capture_default_str();
    a->add_option("--agent-register-timeout", register_timeout_s,
                  "Seconds a started node's agent has to register before the node fails")
        ->check(CLI::Range(1, 86400))
        ->capture_default_str();
    a->add_option("--deleted-cluster-retention-hours", deleted_retention_h,
                  "Hours a deleted cluster's events and node logs stay readable (by its ARN, or "
                  "its name while no live cluster has it)")
        ->check(CLI::Range(0, 87600))
        ->capture_default_str();
    a->add_option("--slurm-accounting", slurm_accounting,
                  "Slurm accounting (sacct, sreport): slurmdbd and MariaDB on each cluster's "
                  "controller. auto: on where the nodes have slurmdbd and mariadbd "
                  "(local nodes share this machine's)")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
    a->add_option("--slurmd-timeout", slurmd_timeout_s,
                  "Slurm's SlurmdTimeout: seconds without an answer from a node's slurmd "
                  "before Slurm marks it DOWN (hpod's node replacement must finish sooner)")
        ->check(CLI::Range(5, 3600))
        ->capture_default_str();
    a->add_option("--agent-listen", agent_listen,
                  "ADDRESS:PORT where machines join (hpod-agent join) and network agents connect, "
                  "over mutual TLS with hpodd's CA (<data-dir>/tls); default: none, agents use "
                  "the Unix socket");
    a->add_option("--agent-transport", agent_transport,
                  "How local nodes' agents reach hpodd: unix (a socket bound into each node) or "
                  "tls (over the node network, joining with a token and mutual TLS, as remote "
                  "machines do; hpodd listens on the node block's last address, port 8451)")
        ->check(CLI::IsMember({"unix", "tls"}))
        ->capture_default_str();
    a->add_option("--agent-tls-name", agent_tls_names,
                  "A DNS name or IP address agents dial --agent-listen by, for its certificate "
                  "(repeatable)");
    a->add_option("--agent-cert-validity", agent_cert_validity_s,
                  "Seconds a host's client certificate is valid; agents renew it at two thirds")
        ->check(CLI::Range(10, 366 * 24 * 3600))
        ->capture_default_str();
    a->add_option("--pool-spank-plugin", pool_spank_plugin,
                  "With --provider pool: where hpod's SPANK plugin (auto-resume) is on every "
                  "host; \"\" for none")
        ->capture_default_str();
    a->add_option("--pool-reboot-timeout", pool_reboot_timeout_s,
                  "With --provider pool: seconds a host may take to come back from a reboot "
                  "(a new boot id) before --power-command cycles it, or its node is replaced")
        ->check(CLI::Range(10, 3600))
        ->capture_default_str();
    a->add_option("--pool-lost-host-ms", pool_lost_host_ms,
                  "With --provider pool: how long a host's channel may stay down after it "
                  "dropped without its agent saying goodbye before the host is lost and its "
                  "node replaced")
        ->check(CLI::Range(100, 600000))
        ->capture_default_str();
    a->add_option("--power-command", power_command,
                  "With --provider pool: a power hook, run with the host id and off (fencing an "
                  "unreachable host whose node is replaced) or cycle (a reboot past its "
                  "deadline)");
    a->add_option("--backup-interval", backup_interval,
                  "Back the store up this often while serving (e.g. 6h, 30m, 90s; 0: never), "
                  "into --backup-dir as hpodd-<UTC time>.db")
        ->type_name("DURATION")
        ->capture_default_str();
    a->add_option("--backup-keep", backup_keep,
                  "How many scheduled backups to keep (at least 1); older ones are deleted")
        ->type_name("INT")
        ->capture_default_str();
    a->add_option("--backup-dir", backup_dir,
                  "Where scheduled backups go (default <data-dir>/backups)");
    a->add_option("--console-dir", console_dir,
                  "Directory of the web console's built files (index.html, assets/) served at "
                  "GET /; default: <hpodd dir>/../share/hpod/console, else the build tree's "
                  "web/dist");
  }

  // init
  auto* init = app.add_subcommand("init", "Create the data dir, the store and a first admin key");
  std::string profile = "hpod", endpoint, aws_dir;
  init->add_option("--region", region, "Region for the profile")->capture_default_str();
  init->add_option("--profile", profile, "AWS profile to write (empty: none)")
      ->capture_default_str();
  init->add_option("--endpoint-url", endpoint,
                   "Endpoint written into the profile (default http://<--listen>)");
  init->add_option("--listen", listen, "Where hpodd will listen")->capture_default_str();
  init->add_option("--aws-dir", aws_dir, "Directory of credentials/config (default ~/.aws)");
  std::vector<std::string> tls_names;
  init->add_option("--tls-name", tls_names,
                   "A DNS name or IP address agents and clients reach hpodd by, for its TLS "
                   "server certificate besides --listen's address (repeatable)");

  // rotate-certs
  auto* rotate_certs = app.add_subcommand(
      "rotate-certs",
      "Re-issue hpodd's TLS server certificate with a new key from its CA, keeping its names; "
      "a running hpodd serves it once restarted");
  rotate_certs->add_option("--tls-name", tls_names, "A name to add (repeatable)");
  auto* rotate_listen = rotate_certs->add_option(
      "--listen", listen, "Add the names of this ADDRESS:PORT (as `hpodd init --listen`)");

  // metrics-token
  auto* metrics_token = app.add_subcommand(
      "metrics-token",
      "Print the bearer token of GET /metrics (<data-dir>/metrics-token; Prometheus can read "
      "the file itself: authorization.credentials_file)");

  // create-key
  auto* keys = app.add_subcommand("create-key", "Mint an access key and print it once");
  std::string role = "user", description;
  keys->add_option("--role", role, "admin (all operations) or user (read-only)")
      ->check(CLI::IsMember({"admin", "user"}))
      ->capture_default_str();
  keys->add_option("--description", description, "Free text kept with the key");

  // backup
  auto* backup = app.add_subcommand(
      "backup", "Copy the store to FILE (mode 0600, never overwritten), safely while hpodd serves");
  std::string backup_file;
  backup->add_option("FILE", backup_file, "Where the copy goes (must not exist)")->required();

  // restore
  auto* restore = app.add_subcommand(
      "restore", "Put a backup in place as the store of a data dir that has none (hpodd stopped)");
  restore->add_option("BACKUP", backup_file, "A file `hpodd backup` or --backup-interval wrote")
      ->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  LoggingOptions lo;
  lo.level = log_level;
  lo.program = "hpodd";
  std::error_code ec;
  if (log_file.empty() && app.got_subcommand(serve) == false && app.get_subcommands().empty()) {
    log_file = (std::filesystem::path(data_dir) / "hpodd.log").string();
  } else if (log_file.empty() && app.got_subcommand(serve)) {
    log_file = (std::filesystem::path(data_dir) / "hpodd.log").string();
  }
  if (!log_file.empty() && std::filesystem::exists(data_dir, ec)) lo.file = log_file;
  InitLogging(lo);

  std::string address;
  uint16_t port = 0;
  if (!ParseListen(listen, &address, &port)) {
    return Fail("--listen " + listen + " is not ADDRESS:PORT (e.g. 127.0.0.1:8450)");
  }

  // "TLS: CA <path> (pin sha256:<16 hex>…), server certificate for <names>".
  auto print_tls = [](const controlplane::TlsResult& tls) {
    std::string names;
    for (const auto& n : tls.server_names) names += (names.empty() ? "" : ", ") + n;
    std::printf("TLS: CA %s (pin sha256:%s\u2026), server certificate for %s\n",
                tls.paths.ca_cert.c_str(), tls.ca_pin.substr(0, 16).c_str(), names.c_str());
    for (const auto& change : tls.changes) std::printf("TLS: %s\n", change.c_str());
  };
  if (app.got_subcommand(init)) {
    controlplane::InitOptions io;
    io.data_dir = data_dir;
    io.region = region;
    io.profile = profile;
    io.aws_dir = aws_dir;
    // hpodd serves TLS only on a non-loopback address (api_tls.h), and an https://
    // endpoint also gets the profile's ca_bundle.
    const std::string scheme = controlplane::IsLoopbackAddress(address) ? "http://" : "https://";
    io.endpoint_url = endpoint.empty() ? scheme + listen : endpoint;
    io.listen_address = address;
    io.tls_names = tls_names;
    auto r = controlplane::InitDataDir(io, RealClock::Get());
    if (!r.ok()) return Fail(r.status().message());
    std::printf("%s %s\n", r->created ? "Initialized" : "Already initialized:", data_dir.c_str());
    std::printf("Admin access key: %s\n", r->access_key_id.c_str());
    std::printf("Metrics token (GET /metrics): %s\n", r->metrics_token_file.c_str());
    print_tls(r->tls);
    if (!profile.empty()) {
      std::printf("Profile '%s' written to %s and %s\n", profile.c_str(),
                  r->credentials_file.c_str(), r->config_file.c_str());
      std::printf("Next: hpodd --data-dir %s --listen %s\n", data_dir.c_str(), listen.c_str());
      std::printf("Then: hpod --profile %s list-clusters\n", profile.c_str());
    }
    return 0;
  }
  if (app.got_subcommand(rotate_certs)) {
    // Without --listen the new certificate carries exactly the old one's names
    // (plus each --tls-name): the default loopback address is not added to it.
    std::vector<std::string> names = rotate_listen->count() > 0
                                         ? controlplane::ServerCertificateNames(address, tls_names)
                                         : tls_names;
    auto r = controlplane::RotateServerCertificate(data_dir, names, RealClock::Get());
    if (!r.ok()) return Fail(r.status().message());
    print_tls(*r);
    std::printf("Wrote %s and %s (serial %s).\n", r->paths.server_cert.c_str(),
                r->paths.server_key.c_str(), r->server_serial.c_str());
    // hpodd loads its certificate when it starts (it does not watch the files).
    std::printf("A running hpodd keeps serving the old certificate until it is restarted.\n");
    return 0;
  }
  if (app.got_subcommand(metrics_token)) {
    // Only an initialized data dir gets a token: a typo in --data-dir must not
    // create a directory with a token nobody uses.
    if (!std::filesystem::exists(controlplane::StorePath(data_dir))) {
      return Fail("no store in " + data_dir + "; run hpodd init --data-dir " + data_dir);
    }
    auto token = controlplane::EnsureMetricsToken(data_dir);
    if (!token.ok()) return Fail(token.status().message());
    std::printf("%s\n", token->c_str());
    return 0;
  }
  if (app.got_subcommand(keys)) {
    std::string path = controlplane::StorePath(data_dir);
    if (!std::filesystem::exists(path)) return Fail("no store at " + path + "; run hpodd init");
    auto store = store::OpenSqliteStore({path});
    if (!store.ok()) return Fail(store.status().message());
    auto k = controlplane::CreateAccessKey(
        **store, role == "admin" ? store::Role::kAdmin : store::Role::kUser, description,
        RealClock::Get());
    if (!k.ok()) return Fail(k.status().message());
    // The secret is shown once, here, and never logged.
    std::printf("[%s]\naws_access_key_id = %s\naws_secret_access_key = %s\n", role.c_str(),
                k->access_key_id.c_str(), k->secret_access_key.c_str());
    return 0;
  }

  if (app.got_subcommand(backup)) return RunBackup(data_dir, backup_file);
  if (app.got_subcommand(restore)) return RunRestore(data_dir, backup_file);

  controlplane::DaemonOptions options;
  options.data_dir = data_dir;
  options.http.address = address;
  options.http.port = port;
  options.http.threads = threads;
  options.http.body_limit_bytes = max_body;
  options.control_plane.region = region;
  options.control_plane.account_id = account;
  options.insecure_no_auth = insecure;
  options.api_cache_bytes = api_cache_mb << 20;
  if (Status s = ParseBackupFlags(backup_interval, backup_keep, backup_dir, &options.backups);
      !s.ok()) {
    return Fail(s.message());
  }
  {
    auto api_tls = controlplane::ApiTlsOptions(data_dir, address, tls, RealClock::Get());
    if (!api_tls.ok()) return Fail(api_tls.status().message());
    options.http.tls = *api_tls;
  }
  if (account.size() != 12 || account.find_first_not_of("0123456789") != std::string::npos) {
    return Fail("--account-id must be 12 digits");
  }
  if (insecure) {
    spdlog::warn("--insecure-no-auth: every request is accepted as admin; never expose this");
  }
  options.control_plane.agent_register_timeout = std::chrono::seconds(register_timeout_s);
  options.control_plane.deleted_cluster_retention = std::chrono::hours(deleted_retention_h);
  options.control_plane.slurm.slurmd_timeout_s = slurmd_timeout_s;
  options.agents.heartbeat_interval = std::chrono::milliseconds(heartbeat_ms);
  options.control_plane.health.heartbeat_timeout = std::chrono::milliseconds(heartbeat_timeout_ms);
  options.agents.lifecycle_timeout = std::chrono::seconds(lifecycle_timeout_s);
  options.agents.s3.endpoint = s3_endpoint;
  options.agents.s3.region = s3_region;
  // Secrets come from the environment, never from flags (ps would show them).
  if (const char* v = std::getenv("HPOD_S3_ACCESS_KEY_ID")) options.agents.s3.access_key_id = v;
  if (const char* v = std::getenv("HPOD_S3_SECRET_ACCESS_KEY")) {
    options.agents.s3.secret_access_key = v;
  }
  options.agent_socket = controlplane::AgentSocketPath(data_dir);
  if (agent_transport == "tls" && !agent_listen.empty()) {
    return Fail(
        "--agent-transport tls picks the agents' address itself (the node block's last address, "
        "port 8451); give --agent-listen only for machines that join from elsewhere, with "
        "--agent-transport unix");
  }
  if (!agent_listen.empty()) {
    if (!ParseListen(agent_listen, &options.agent_listen_address, &options.agent_listen_port)) {
      return Fail("--agent-listen: expected ADDRESS:PORT, got " + agent_listen);
    }
    options.agent_tls_names = agent_tls_names;
    options.joins.certificate_validity = std::chrono::seconds(agent_cert_validity_s);
  }
  {
    // Found beside the binary as the SPANK plugin is (main.cc), installed or built.
    std::error_code exe_error;
    std::string exe = std::filesystem::read_symlink("/proc/self/exe", exe_error).string();
    options.console = controlplane::ResolveConsoleOptions(console_dir, exe);
  }
  ProviderContext context;
  context.data_dir = data_dir;
  context.agent_socket = options.agent_socket;
  context.node_block = node_block;
  context.fsx_root = fsx_root;
  context.link_prefix = link_prefix;
  context.node_disk_mb = node_disk_mb;
  context.node_software = node_software;
  context.fake_nvml_library = fake_nvml_library;
  for (const std::string& skew : fake_clock_skew) {
    const size_t eq = skew.find('=');
    int seconds = 0;
    const char* end = skew.data() + skew.size();
    // from_chars takes no '+': "+90" is written "90".
    auto [ptr, ec] = eq == std::string::npos
                         ? std::from_chars_result{skew.data(), std::errc::invalid_argument}
                         : std::from_chars(skew.data() + eq + 1, end, seconds);
    if (eq == 0 || ec != std::errc() || ptr != end || eq + 1 == skew.size() || seconds < -86400 ||
        seconds > 86400) {
      return Fail(
          "--fake-clock-skew: expected GROUP=SECONDS within a day (e.g. workers=90), "
          "got " +
          skew);
    }
    context.fake_clock_skew_s[skew.substr(0, eq)] = seconds;
  }
  context.agent_transport = agent_transport;
  options.slurm_accounting = slurm_accounting;
  if (provider_name == kPoolProvider) {
    options.pool_provider = true;
    options.pool_spank_plugin = pool_spank_plugin;
    options.pool_reboot_timeout = std::chrono::seconds(pool_reboot_timeout_s);
    options.power_command = power_command;
    options.pool_lost_host_after = std::chrono::milliseconds(pool_lost_host_ms);
    return RunServe(
        options, context,
        {kPoolProvider, "pool (hosts that joined with hpod-agent join)",
         [](const Clock&, const ProviderContext&) -> StatusOr<std::unique_ptr<provider::Provider>> {
           return std::unique_ptr<provider::Provider>();
         }});
  }
  const auto chosen =
      std::find_if(providers.begin(), providers.end(),
                   [&](const ProviderChoice& p) { return p.name == provider_name; });
  if (chosen == providers.end()) return Fail("no node provider named " + provider_name);
  return RunServe(options, context, *chosen);
}

}  // namespace hpod::cmd
