#pragma once

// The agent's configuration: the JSON file the provider writes (PROTOCOL.md, "Agent
// config file") plus roots that tests override. Parsed once in main; no globals.
//
// Thread contract: plain values; not synchronized.

#include <chrono>
#include <string>
#include <string_view>

#include "hpod/agent/health/checks.h"
#include "hpod/agent/slurm_node.h"
#include "hpod/base/status.h"

namespace hpod::agent {

// The exit status of an agent that cannot run with its configuration (sysexits
// EX_CONFIG): a bad config file, or a node credential hpodd refuses. Supervisors
// (systemd, hpod-node-init) must not restart it in a loop.
inline constexpr int kExitConfig = 78;

inline constexpr std::string_view kAgentVersion = "0.1.0";

struct AgentOptions {
  // From the config file. instance_id, endpoint and state_dir are required;
  // bootstrap_token may be empty once a node credential is on disk.
  std::string instance_id;
  std::string cluster_id;
  // "unix:///abs/path.sock" or "http://host:port".
  std::string endpoint;
  std::string bootstrap_token;
  // https:// endpoints: the join token (hpodjoin1....) the agent joins with when
  // its state dir holds no certificate yet (join.h); the provider mints one per
  // launch. Unused once joined.
  std::string join_token;
  // Where the join reads the machine id; empty: /etc/machine-id. The local
  // provider's network nodes each have their own on their node disk.
  std::string machine_id_file;
  // On the node's own disk: node-credential, lifecycle.json, lifecycle.log.
  std::string state_dir;
  // Where the join left the machine's certificate (tls/, join.h); empty: the
  // state dir. A pool host's node agent runs in a tenure directory of its own
  // and connects with the host's certificate (tenure.h).
  std::string identity_dir;
  std::string hostname;    // empty: gethostname()
  std::string private_ip;  // empty: reported as ""
  // The local socket the auto-resume supervisor asks through (local_socket.h,
  // kLocalSocketPath on nodes); empty: none (agents sharing one host's /run).
  std::string local_socket;
  // "systemctl": true — the node's PID 1 is not systemd (a local provider's node
  // with its own root): the agent links systemctl and journalctl into
  // systemctl_link_dir to answer for its units (units.h, docs/systemctl.md),
  // writes their unit files where HyperPod's AMI has them, and makes the AMI's
  // user `ubuntu` (ami_user.h).
  bool systemctl = false;
  // A pool host run by systemd, whose Slurm and munge units are handed to this
  // agent (systemd_handover.h): the systemctl that starts such a unit whenever
  // the agent's daemon becomes active (so `systemctl status slurmd` shows hpod's
  // slurmd however it started). Empty: none.
  std::string handed_units_systemctl;
  // The health checks (docs/node-health.md); the file's optional health_* keys
  // (PROTOCOL.md, "Agent config file"). An interval of 0 turns them off.
  health::HealthOptions health;

  // Not in the file; overridable by tests.
  // Where resource_config.json and provisioning_parameters.json go (HyperPod path).
  std::string config_dir = "/opt/ml/config";
  // Scripts are fetched to <lifecycle_root>/sagemaker-lifecycle-<id>/src/.
  std::string lifecycle_root = "/tmp";
  // Reconnect backoff (full jitter) between these bounds.
  std::chrono::milliseconds backoff_initial{100};
  std::chrono::milliseconds backoff_max{10000};
  // WebSocket connect + handshake limit.
  std::chrono::milliseconds connect_timeout{5000};
  // Heartbeat interval until hpodd's config says otherwise.
  std::chrono::milliseconds default_heartbeat_interval{2000};
  // Commands run at once; more wait in a queue of max_queued_commands.
  int max_concurrent_commands = 8;
  int max_queued_commands = 64;
  // With `systemctl`: where the links go, and the unit files.
  std::string systemctl_link_dir = "/usr/local/bin";
  std::string unit_dir = "/etc/systemd/system";
  // How long the agent waits for hpodd's Slurm role before it runs the
  // lifecycle script (slurm.conf in place first, as on HyperPod).
  std::chrono::milliseconds slurm_role_wait{20000};
  // The node's Slurm daemons; munge_dir empty means <state_dir>/munge.
  SlurmNodeOptions slurm;
};

// Parses the config JSON. kInvalidArgument with a one-line message naming the field
// ("agent config: missing \"instance_id\"") on any problem. Unknown fields are
// ignored so that hpodd can add fields before agents learn them.
StatusOr<AgentOptions> ParseAgentConfig(std::string_view json_text);

// Reads and parses `path` (kInvalidArgument also when it cannot be read).
StatusOr<AgentOptions> LoadAgentConfig(const std::string& path);

}  // namespace hpod::agent
