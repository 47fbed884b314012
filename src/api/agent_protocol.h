#pragma once

// The messages of the hpod-agent ↔ hpodd channel (src/agent/PROTOCOL.md, which a
// unit test checks against these structs): one struct per message type, each with
//  - `kType`, the message's "type" string;
//  - `static StatusOr<T> FromJson(const nlohmann::json&)`: kInvalidArgument on a
//    malformed message, the message naming the message type and the field, e.g.
//    "heartbeat: field 'seq' must be an integer", "hello: field 'agent_version' is
//    missing", "config: field 'lifecycle.s3.region' must be a string". A `type`
//    member, when present, must equal kType. Unknown fields are ignored (a newer
//    peer may add some); a null optional field reads as absent;
//  - `nlohmann::json ToJson() const`, which includes "type" and writes the same
//    field names as before the structs existed (optional fields that are empty are
//    left out where they always were).
// Nested objects (LifecycleState, SlurmStatus, …) have the same two functions and
// no type. Values are checked for their JSON type; what a value means (a role
// name, a base64 key) is the receiver's to check.
//
// Thread contract: plain values and pure functions.

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/api/agent_protocol_host.h"
#include "hpod/api/agent_protocol_training.h"
#include "hpod/api/states.h"
#include "hpod/base/status.h"

namespace hpod::api::agentproto {

// Carried in `hello`. hpodd refuses an agent speaking another version (an `error`
// frame naming both, then it closes the channel). Bump it on any change that an
// older peer would misread; adding an optional field is not one.
inline constexpr int kProtocolVersion = 1;

// The "type" of a frame: kInvalidArgument when `frame` is not an object or has no
// string `type` ("frame: field 'type' is missing").
StatusOr<std::string> MessageType(const nlohmann::json& frame);

// ---- Objects nested in messages ----

// A node's lifecycle progress: `hello.lifecycle`, `heartbeat.lifecycle` and the
// body of the `lifecycle` message.
struct LifecycleState {
  // The name of an api::LifecycleState: "NotStarted" | "Running" | "Succeeded" |
  // "Failed" (any other value is refused).
  std::string state{api::Name(api::LifecycleState::kNotStarted)};
  int64_t exit_code = 0;
  std::string message;

  static StatusOr<LifecycleState> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const LifecycleState&) const = default;
};

// The node's Slurm daemons: `heartbeat.slurm` and the body of `slurm_state`.
struct SlurmStatus {
  std::string role;  // "" before the node got its role
  std::string conf_hash;
  std::string daemon = "none";  // none|starting|running|restarting|failed
  int64_t restarts = 0;
  std::string message;
  // Compute nodes: when the agent started the slurmd now running, in epoch
  // seconds of the NODE's clock (read just before the fork, so never later than
  // the start slurmd itself reports to slurmctld, which Slurm shows as
  // SlurmdStartTime). Absent while no slurmd runs, on other roles and from
  // agents older than the field. hpodd compares it only with SlurmdStartTime,
  // which comes from the same clock (slurm_reconciler.h, SlurmdOfThisInstance).
  std::optional<double> slurmd_started{};
  // The node holds the configuration of a `slurm` message with `hold` (its files
  // written, munged up, no slurmctld/slurmd of hpod's start). Out of ToJson when
  // false.
  bool held = false;

  static StatusOr<SlurmStatus> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const SlurmStatus&) const = default;
};

// One row of the controller's `scontrol -o show nodes` (`slurm_nodes.nodes[]`).
struct SlurmNodeEntry {
  std::string name;
  std::string state;  // "IDLE+DRAIN"
  std::string reason;
  std::string slurmd_start_time;

  static StatusOr<SlurmNodeEntry> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const SlurmNodeEntry&) const = default;
};

// One health check's latest result (`health.checks[]`). The agent runs each
// check on an interval with a timeout (src/agent/health/); hpodd turns the worst
// verdict of a report into the node's verdict (docs/node-health.md).
struct HealthCheck {
  std::string name;                 // "disk:/fsx", "slurm", "network", "gpu", "kernel_log", ...
  std::string result = "ok";        // "ok" | "fail" | "timeout" | "skipped"
  std::string verdict = "Healthy";  // "Healthy" | "Reboot" | "Replace" (only for "fail"/"timeout")
  std::string reason;               // one line, for events and the recovery record
  int64_t duration_ms = 0;
  double time = 0;  // epoch seconds when the check finished

  static StatusOr<HealthCheck> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const HealthCheck&) const = default;
};

// Whether a check's result asks for an action: it failed or timed out with a
// Reboot or Replace verdict (a failing check with verdict Healthy, or none, is
// reported only). The one rule hpodd's events and verdicts share.
bool AsksForAction(const HealthCheck& c);

// `config.lifecycle.s3`: how the agent reaches S3 for an s3:// source.
struct S3Config {
  std::string endpoint;
  std::string region;
  std::string access_key_id;
  std::string secret_access_key;
  std::string unix_socket;  // hpodd's S3 relay; "" to connect to endpoint directly

  static StatusOr<S3Config> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const S3Config&) const = default;
};

// `config.lifecycle`: the group's LifeCycleConfig.
struct LifecycleConfig {
  std::string source_s3_uri;
  std::string on_create;
  int64_t timeout_s = 1800;
  std::optional<S3Config> s3;  // null on the wire when absent
  // A file:// source hpodd read itself for nodes that cannot see its files
  // (NodeEnvironment::ships_file_sources): relative path → content (base64 on
  // the wire), and the paths that are executable. Empty: the agent fetches
  // source_s3_uri.
  std::map<std::string, std::string> files;
  std::vector<std::string> executable;

  static StatusOr<LifecycleConfig> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const LifecycleConfig&) const = default;
};

// ---- agent → hpodd ----

struct Hello {
  static constexpr std::string_view kType = "hello";
  // Absent on the wire: 1 (agents older than the field speak version 1).
  int64_t protocol_version = kProtocolVersion;
  std::string agent_version;
  std::string hostname;
  std::string private_ip;
  std::string boot_id;
  std::optional<LifecycleState> lifecycle;
  // The programs the agent runs, name → hex SHA-256 (api/software_image.h);
  // empty from agents older than the field.
  std::map<std::string, std::string> software;

  static StatusOr<Hello> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const Hello&) const = default;
};

struct GetConfig {
  static constexpr std::string_view kType = "get_config";
  static StatusOr<GetConfig> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const GetConfig&) const = default;
};

struct Heartbeat {
  static constexpr std::string_view kType = "heartbeat";
  int64_t seq = 0;
  std::optional<LifecycleState> lifecycle;
  int64_t uptime_s = 0;
  std::optional<SlurmStatus> slurm;
  // The node's host figures (agent_protocol_host.h); absent from older agents and
  // until the agent's first sample.
  std::optional<HostStats> host;
  // Why `host` was present but could not be read (FromJson then leaves `host`
  // absent and the heartbeat still reads: its figures are an extra, the beat is
  // what keeps the node alive); empty otherwise. Not on the wire. (`{}` lets
  // brace-initialisers leave it out without -Wmissing-field-initializers.)
  std::string host_error{};
  // The agent's wall clock when it sent the beat, epoch seconds (absent from
  // agents older than the field). hpodd keeps the node's clock offset from it
  // (AgentService::ClockOffset) and never compares a node's time with its own
  // without it.
  std::optional<double> time{};

  static StatusOr<Heartbeat> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const Heartbeat&) const = default;
};

// The `lifecycle` message: the state's fields at the top level.
struct LifecycleReport {
  static constexpr std::string_view kType = "lifecycle";
  LifecycleState status;

  static StatusOr<LifecycleReport> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const LifecycleReport&) const = default;
};

struct Log {
  static constexpr std::string_view kType = "log";
  std::string stream;  // "LifecycleConfig" | "Agent"
  std::string data;    // ≤ 64 KiB

  static StatusOr<Log> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const Log&) const = default;
};

struct ProvisioningParameters {
  static constexpr std::string_view kType = "provisioning_parameters";
  // The file's JSON, null when there is none, {"unparsable": text} when it is not JSON.
  nlohmann::json content;

  static StatusOr<ProvisioningParameters> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const ProvisioningParameters&) const = default;
};

// The `slurm_state` message: the status's fields at the top level.
struct SlurmStateReport {
  static constexpr std::string_view kType = "slurm_state";
  SlurmStatus status;

  static StatusOr<SlurmStateReport> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const SlurmStateReport&) const = default;
};

struct SlurmNodes {
  static constexpr std::string_view kType = "slurm_nodes";
  std::vector<SlurmNodeEntry> nodes;

  static StatusOr<SlurmNodes> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const SlurmNodes&) const = default;
};

// The agent's health checks, sent when any check's result or verdict changes and
// after every (re)connect; `seq` grows by one per new report of the agent process
// (a re-send after a reconnect repeats the last one's).
struct HealthReport {
  static constexpr std::string_view kType = "health";
  int64_t seq = 0;
  std::vector<HealthCheck> checks;

  static StatusOr<HealthReport> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const HealthReport&) const = default;
};

struct CommandResult {
  static constexpr std::string_view kType = "command_result";
  std::string id;
  int64_t exit_code = -1;
  std::string stdout_data;  // "stdout"
  std::string stderr_data;  // "stderr"
  bool timed_out = false;
  std::string error;  // set when the command could not be started

  static StatusOr<CommandResult> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const CommandResult&) const = default;
};

// A question from a program on the node (the auto-resume supervisor inside srun,
// src/slurm/spank/) that the agent relays from its local socket (`request`,
// opaque to the agent: hpodd's JobService reads it). Answered by `job_answer`
// with the same id.
struct JobQuery {
  static constexpr std::string_view kType = "job_query";
  std::string id;          // "q-<n>", unique per agent process
  nlohmann::json request;  // an object with "op" (job_health | job_event)

  static StatusOr<JobQuery> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const JobQuery&) const = default;
};

// ---- hpodd → agent ----

// hpodd's answer to a `job_query`, relayed verbatim to the local client.
struct JobAnswer {
  static constexpr std::string_view kType = "job_answer";
  std::string id;         // the job_query's id
  nlohmann::json answer;  // an object; {"error": "..."} when hpodd could not answer

  static StatusOr<JobAnswer> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const JobAnswer&) const = default;
};

struct Credential {
  static constexpr std::string_view kType = "credential";
  std::string secret;

  static StatusOr<Credential> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const Credential&) const = default;
};

// Mutual-TLS agents (PROTOCOL.md, "Network agents"): asks for a new client
// certificate for the key that signed `csr` (a new key, made on the node).
struct RenewCertificate {
  static constexpr std::string_view kType = "renew_certificate";
  std::string csr;  // PEM

  static StatusOr<RenewCertificate> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const RenewCertificate&) const = default;
};

// The answer to renew_certificate; on failure hpodd sends an `error` frame instead.
struct Certificate {
  static constexpr std::string_view kType = "certificate";
  std::string certificate;  // PEM
  double not_after = 0;     // epoch seconds

  static StatusOr<Certificate> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const Certificate&) const = default;
};

// ---- the host channel (GET /agent/v1/host, a pool host's own channel) ----

// hpodd → host: which instance the host is to serve (its tenure), level-triggered:
// sent when the host connects, after each host_status that differs, and when a
// launch or termination changes it. "" means none: the host ends any tenure it
// holds (stops the node's daemons and processes, wipes the tenure directory).
// `assign.shared_fs`: what the host must have at /fsx before its node's
// lifecycle scripts run, and how it proves it is the cluster's (a marker file).
struct SharedFilesystem {
  std::string type;         // mount -t, or "Existing" (mounted by the admin); `fs_type` on the wire
  std::string source;       // mount's source; "" for Existing
  std::string options;      // mount -o; "" for none
  std::string marker_name;  // .hpod-fsx-<cluster id>, a file directly under /fsx
  std::string marker_value;  // what it holds on the cluster's filesystem
  bool writer = false;       // this node writes the marker when absent; others wait for it

  static StatusOr<SharedFilesystem> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const SharedFilesystem&) const = default;
};

struct HostAssign {
  static constexpr std::string_view kType = "assign";
  std::string instance_id;
  std::optional<SharedFilesystem> shared_fs;  // null: none declared

  static StatusOr<HostAssign> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const HostAssign&) const = default;
};

// host → hpodd: the instance whose tenure the host holds now ("" once every
// tenure is gone: its directory wiped), sent on connecting and after each change.
struct HostStatus {
  static constexpr std::string_view kType = "host_status";
  std::string instance_id;
  std::string message;  // why a tenure could not start or end; "" when it did
  // Whether the node agent of `instance_id` runs (false for a tenure an agent
  // restart or a reboot left on disk, which hpodd's `assign` starts again).
  bool running = false;
  // The host failed the shared filesystem check of the instance it was given
  // (`message` says how): hpodd quarantines it and places the instance elsewhere.
  bool check_failed = false;
  // The agent stops on purpose (SIGTERM: a restart, an upgrade) and will be
  // back; without it, a channel that drops is the machine lost (pool_provider.h).
  bool leaving = false;

  static StatusOr<HostStatus> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const HostStatus&) const = default;
};

// hpodd → host: reboot the machine (the agent runs its reboot command, default
// `systemctl reboot`). hpodd knows it is back by the new boot id of its next
// connection. `request_id` names the request (logged; a repeat is harmless).
struct HostReboot {
  static constexpr std::string_view kType = "reboot";
  std::string request_id;

  static StatusOr<HostReboot> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const HostReboot&) const = default;
};

// hpodd → host: inject a fault into the machine (hpod inject-fault on a pool
// host). `kind` is one of kill-agent, kill-slurmd, partition, hang, flag-file
// (provider::FaultKindName); `seconds` is how long a partition lasts.
struct HostFault {
  static constexpr std::string_view kType = "fault";
  std::string kind;
  int64_t seconds = 0;

  static StatusOr<HostFault> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const HostFault&) const = default;
};

struct Config {
  static constexpr std::string_view kType = "config";
  std::optional<int64_t> heartbeat_interval_ms;  // absent: the agent keeps its default
  std::optional<LifecycleConfig> lifecycle;      // null: the group has no LifeCycleConfig
  nlohmann::json resource_config = nlohmann::json::object();  // written verbatim
  nlohmann::json provisioning;  // provisioning_parameters.json, or null

  static StatusOr<Config> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const Config&) const = default;
};

struct ConfigPending {
  static constexpr std::string_view kType = "config_pending";
  int64_t retry_ms = 500;

  static StatusOr<ConfigPending> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const ConfigPending&) const = default;
};

struct Command {
  static constexpr std::string_view kType = "command";
  std::string id;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // left out of ToJson when empty
  std::string cwd;                         // left out of ToJson when empty
  int64_t timeout_ms = 30000;

  static StatusOr<Command> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const Command&) const = default;
};

struct OpenSession {
  static constexpr std::string_view kType = "open_session";
  std::string session_id;
  std::vector<std::string> argv;  // empty: the login shell
  int64_t rows = 24;
  int64_t cols = 80;
  bool pty = true;
  // The node's user the session runs as ([a-z_][a-z0-9_-]*, at most 32); empty:
  // root. Out of ToJson when empty.
  std::string user;
  // The caller may not have root's powers (a key of the user role): the agent
  // refuses a `user` that is a system account (uid below 1000: root, munge,
  // mysql...). Out of ToJson when false.
  bool unprivileged = false;

  static StatusOr<OpenSession> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const OpenSession&) const = default;
};

// The `slurm` message: the node's part of Slurm.
struct SlurmRole {
  static constexpr std::string_view kType = "slurm";
  std::string role;  // controller | login | compute | none (the cluster has no Slurm)
  std::string node_name;
  std::string controller_addr;
  std::string munge_key;  // base64url
  std::string conf_hash;
  std::vector<std::string> node_names;
  std::string motd;
  std::map<std::string, std::string> files;  // controller and login only; out when empty
  int64_t stand_in_gpus = 0;                 // out of ToJson when 0
  std::string gpu_device_dir;                // out of ToJson when empty
  // A SlurmdStartTime the new slurmd must not show (the row a recovery marked,
  // as slurmctld prints it); out of ToJson when empty. See PROTOCOL.md.
  std::string avoid_start_time;
  // Every node's NodeName → address, for agents that keep the cluster's block in
  // the machine's /etc/hosts (pool hosts); out of ToJson when empty.
  std::map<std::string, std::string> hosts;
  // Nodes whose sshd hpod runs (NodeEnvironment::cluster_sshd): this node's
  // Ed25519 host key (OpenSSH format; the same for every node that holds the
  // NodeName) and the cluster's known_hosts lines ("name,address ssh-ed25519 …").
  // Both out of ToJson when empty: no sshd.
  std::string ssh_host_key;
  std::string ssh_known_hosts;
  // The controller's: run MariaDB and slurmdbd before slurmctld (slurm.conf
  // names slurmdbd). Out of ToJson when false.
  bool accounting = false;
  // Write the configuration and start munged (and sshd), but not slurmctld or
  // slurmd until a later message without it (a node whose lifecycle scripts
  // still run gets its slurm.conf before them, as on HyperPod; a worker waits
  // for the controller). A start the node's own `systemctl` asks for goes ahead
  // regardless. Out of ToJson when false.
  bool hold = false;

  static StatusOr<SlurmRole> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const SlurmRole&) const = default;
};

struct Reprovision {
  static constexpr std::string_view kType = "reprovision";
  static StatusOr<Reprovision> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const Reprovision&) const = default;
};

// hpodd refused a frame the agent sent (malformed, or a `hello` of another
// protocol version); `message` says why.
struct Error {
  static constexpr std::string_view kType = "error";
  std::string frame_type;  // the refused frame's type; "" when it had none
  std::string message;

  static StatusOr<Error> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const Error&) const = default;
};

// Every message type above (the PROTOCOL.md test checks the document against it).
// (The training messages are in agent_protocol_training.h.)
inline constexpr std::array<std::string_view, 28> kMessageTypes = {
    // agent → hpodd
    Hello::kType, GetConfig::kType, Heartbeat::kType, LifecycleReport::kType, Log::kType,
    ProvisioningParameters::kType, SlurmStateReport::kType, SlurmNodes::kType, HealthReport::kType,
    CommandResult::kType, JobQuery::kType, TrainingResult::kType, RenewCertificate::kType,
    HostStatus::kType,
    // hpodd → agent
    JobAnswer::kType, Credential::kType, Certificate::kType, Config::kType, ConfigPending::kType,
    Command::kType, OpenSession::kType, SlurmRole::kType, Reprovision::kType, Error::kType,
    TrainingQuery::kType, HostAssign::kType, HostReboot::kType, HostFault::kType};

}  // namespace hpod::api::agentproto
