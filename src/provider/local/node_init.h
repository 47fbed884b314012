#pragma once

// hpod-node-init: PID 1 of a local node. The local provider starts it in fresh
// uts/mount/pid namespaces inside the node's netns; it gives the node its identity
// and private filesystem view, then runs the node's program (hpod-agent) and lives
// exactly as long as it does: the agent's exit is the node's death.
//
// Order matters (see RunNodeInit): every bind source is a HOST path, and some live
// under /tmp or /run (tests use temp dirs; hpodd's socket may be under /run), so
// all sources are opened before anything covers /run or /tmp, and /tmp is covered
// last.
//
// Thread contract: RunNodeInit runs on the only thread of the node's PID 1; the
// config helpers are pure functions.

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::provider::local {

// node-init.json, written by the provider into the node dir.
struct NodeInitConfig {
  std::string hostname;    // "ip-10-77-0-11"
  std::string log_file;    // <node dir>/node-init.log (host path)
  std::string hosts_file;  // cluster hosts file, bound on /etc/hosts
  std::string fsx_dir;     // cluster shared dir, bound on /fsx
  // Directory holding hpodd's agent socket, bound on /run/hpod; empty: none (an
  // agent endpoint over TCP).
  std::string agent_socket_dir;
  // Node-local disk: spool/, log/, state/, tmp/, opt-upper/, opt-work/ below it.
  std::string node_disk;
  // Copied to <node_disk>/state/agent.json = /var/lib/hpod-agent/agent.json.
  std::string agent_config;
  // What PID 1 runs (hpod-agent --config /var/lib/hpod-agent/agent.json).
  std::vector<std::string> program;
  // Set in the program's environment on top of node-init's own (the node's clean
  // boot environment): HPOD_KERNEL_LOG, HPOD_NVML_LIBRARY, HPOD_FAKE_NVML_SCRIPT.
  std::map<std::string, std::string> env;
};

StatusOr<NodeInitConfig> NodeInitConfigFromJson(const nlohmann::json& j);
nlohmann::json NodeInitConfigToJson(const NodeInitConfig& c);
StatusOr<NodeInitConfig> LoadNodeInitConfig(const std::string& path);

// One step of the node's filesystem setup, in order.
struct MountStep {
  enum class Kind { kBind, kTmpfs, kOverlay };
  Kind kind = Kind::kBind;
  std::string source;     // host path (bind), unused for tmpfs
  std::string target;     // path inside the node
  std::string data;       // tmpfs options, or overlay lowerdir/upperdir/workdir
  bool optional = false;  // a failure is logged, not fatal (overlay falls back)
};

// The mounts RunNodeInit performs, in order: /etc/hosts, /fsx, /var/spool,
// /var/log, /var/lib/hpod-agent, /opt (overlay), /run (tmpfs), /run/hpod, and
// /tmp last. Pure, so the order is unit-tested.
std::vector<MountStep> PlanMounts(const NodeInitConfig& c);

// The targets of PlanMounts' binds and tmpfs mounts: what each node has its own
// of ("/etc/hosts", "/fsx", "/tmp", "/run", ...). The /opt overlay is not among
// them: it reads through to the host's /opt.
std::vector<std::string> NodePrivateDirs();

// The directory of NodePrivateDirs that hides the host's `host_path` from a node
// (a target at or above it), or "" when the node sees the host's files there.
// Symlinks are resolved on the host first (/var/run is /run).
std::string NodePrivateDirOf(const std::string& host_path);

// The agent's state dir inside the node, and where agent.json appears there.
inline constexpr char kAgentStateDir[] = "/var/lib/hpod-agent";
inline constexpr char kAgentConfigInNode[] = "/var/lib/hpod-agent/agent.json";
inline constexpr char kAgentSocketDirInNode[] = "/run/hpod";
// Where the agent creates stand-in GPU device files for GPU instance types (the
// host has no GPUs to give the nodes; NodeEnvironment::gpu_stand_ins).
inline constexpr char kGpuStandInDirInNode[] = "/run/hpod-gpus";
// Present in a node that could not get a root filesystem of its own (no
// overlayfs where the node disk is): the agent then leaves the root's system
// files alone (no sshd setup, no MariaDB), since they are the host's. The agent
// spells the same path (slurm_node.h, kSharedRootMarker).
inline constexpr char kSharedRootMarker[] = "/run/hpod-shared-root";
// Where node-init binds the program it runs (given by an absolute path): the
// node may not see that path (a build tree under the host's /tmp), nor may its
// users (hpodd's image store), and they run it as systemctl.
inline constexpr char kProgramInNode[] = "/run/hpod-node-program";
// The node's own kernel log (nodes share the host's kernel, so /dev/kmsg is not
// theirs) and the fake NVML library's script, both on the node disk in the agent's
// state dir: <node_disk>/state/kmsg on the host.
inline constexpr char kKernelLogInNode[] = "/var/lib/hpod-agent/kmsg";
inline constexpr char kFakeNvmlScriptInNode[] = "/var/lib/hpod-agent/fake-nvml.json";
// The fake NVML library, copied onto the node's disk: the host's path may be one
// the node cannot see (its /tmp is its own).
inline constexpr char kFakeNvmlLibraryInNode[] = "/var/lib/hpod-agent/libhpod_fake_nvml.so";

// Runs as the node's PID 1: sets up the node, runs the program, reaps orphans,
// forwards SIGTERM/SIGINT to the program, and returns its exit status (128 + n for
// a signal) once it exits. Returns 1 (after logging why) if setup fails.
int RunNodeInit(const NodeInitConfig& c);

}  // namespace hpod::provider::local
