#pragma once

// The node's Slurm daemons, run and watched by the agent once hpodd sent the node
// its Slurm role (`slurm` message, PROTOCOL.md; it comes before the lifecycle
// script runs, so slurm.conf is there for it, as on HyperPod). munged (and sshd)
// start at once; slurmctld or slurmd (and MariaDB and slurmdbd) once the scripts
// succeeded (SetAutoStart) and hpodd does not hold the node, or as soon as the
// node's systemctl starts them (units.h, slurm_units.cc: a script's start and
// hpod's are the same daemon):
//  - every node: munged (as user munge, foreground) with the cluster's key, kept on
//    the node's own disk at 0400 munge:munge;
//  - controller: slurm.conf, gres.conf, plugstack.conf written to /opt/slurm/etc
//    (slurm.user.conf created once, never rewritten) and `slurmctld -D`;
//  - compute: `slurmd -D --conf-server <controller>` (configless: slurmd fetches
//    the config from slurmctld and clients find it via /run/slurm/conf);
//  - login: the same files as the controller, for clients only (no daemon);
//  - none (a cluster without Slurm): no daemon; the motd says why and a marker
//    (kNoSlurmMarker) makes shell sessions answer Slurm's commands with a hint
//    (session.h). Both are written in Apply, on the caller's thread, so a session
//    that hpodd opens after the message finds them.
// A daemon that exits is restarted with exponential backoff; each exit and
// restart is reported (`slurm_state`, which hpodd records as an event).
//
// Config changes on the controller: Slurm 22.05 cannot change its node count with
// `scontrol reconfigure` (slurmctld dies with "MaxNodeCount has changed … during
// reconfig, slurmctld must be restarted", losing unsaved job state), so a changed
// node set restarts slurmctld gracefully (SIGTERM saves state; running jobs keep
// running on their slurmds) and then runs `scontrol reconfigure`, which pushes the
// new config to every configless slurmd at once. Other changes only reconfigure.
//
// The controller also polls `scontrol -o show nodes` (every poll_interval, five
// times as often while nodes are joining or leaving) and reports the node table
// when it changes; that is how hpodd learns that workers registered.
//
// Thread contract: Apply, State and Stop are thread-safe. One worker thread owns
// every child process.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "hpod/agent/slurm_accounting.h"
#include "hpod/agent/ssh_node.h"
#include "hpod/agent/units.h"
#include "hpod/api/agent_protocol.h"
#include "hpod/base/backoff.h"
#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/base/subprocess.h"
#include "hpod/base/thread_annotations.h"
#include "hpod/slurm/scontrol.h"

namespace hpod::agent {

// Present while the node's cluster has no Slurm (node-private: every node has its
// own /run, and it never lands on the host's shared /opt).
inline constexpr char kNoSlurmMarker[] = "/run/hpod-no-slurm";
// Present on a local node that shares the host's root filesystem (node-init's
// fallback without overlayfs; provider/local/node_init.h): the agent then writes
// no /etc/ssh and runs no MariaDB there, as those would be the host's.
inline constexpr char kSharedRootMarker[] = "/run/hpod-shared-root";

// hpodd's `slurm` message.
struct SlurmSpec {
  std::string role;  // "controller" | "login" | "compute" | "none"
  std::string node_name;
  std::string controller_addr;               // "10.77.1.10"
  std::string munge_key;                     // raw key bytes
  std::map<std::string, std::string> files;  // file name in conf_dir → content
  std::string conf_hash;
  std::vector<std::string> node_names;  // compute node names in slurm.conf
  int stand_in_gpus = 0;                // create this many stand-in GPU devices …
  std::string gpu_device_dir;           // … here (local provider only)
  std::string motd;
  // A replacement's predecessor's SlurmdStartTime (PROTOCOL.md, slurm): slurmd
  // starts only outside that second and the one before it, on this node's clock.
  std::string avoid_start_time;
  std::map<std::string, std::string> hosts;  // NodeName → address (hosts_file)
  // Nodes whose sshd hpod runs (ssh_node.h): this node's host key and the
  // cluster's known_hosts lines; empty: no sshd.
  std::string ssh_host_key;
  std::string ssh_known_hosts;
  // The controller's: MariaDB and slurmdbd before slurmctld (slurm_accounting.h).
  bool accounting = false;
  // Configure, but start no slurmctld/slurmd of hpod's own (PROTOCOL.md, slurm).
  bool hold = false;
};

// kInvalidArgument naming the field for a malformed message (api::agentproto::
// SlurmRole), an unknown role, a munge key that is not base64url of ≥ 32 bytes (role
// "none" has none), or a file name that is not a plain name.
StatusOr<SlurmSpec> ParseSlurmSpec(const nlohmann::json& message);

struct SlurmNodeOptions {
  std::string conf_dir = "/opt/slurm/etc";
  std::string munge_dir;  // key and seed; the agent's state dir + "/munge"
  std::string run_dir = "/run";
  std::string log_dir = "/var/log";
  std::string spool_dir = "/var/spool";
  std::string motd_path = "/opt/hpod/motd";
  std::string no_slurm_marker = kNoSlurmMarker;
  std::string shared_root_marker = kSharedRootMarker;
  // Where the cluster's names are kept (hosts_file.h); empty: not kept (a local
  // node's /etc/hosts is its provider's).
  std::string hosts_file;
  // Programs (looked up in PATH); tests substitute scripts.
  std::string munged = "munged";
  std::string slurmctld = "slurmctld";
  std::string slurmd = "slurmd";
  std::string scontrol = "scontrol";
  // munged runs as this user (it refuses a key not owned by its own uid); empty:
  // as the agent's user (tests).
  std::string munge_user = "munge";
  // sshd and where its setup goes (ssh_node.h), for specs with a host key.
  std::string sshd = "/usr/sbin/sshd";
  SshPaths ssh;
  AccountingOptions accounting;
  // Called on the worker thread with a unit's name (units.h) each time it
  // becomes active, unless a systemctl stop holds it; empty: nothing. A pool
  // host's agent tells systemd (AgentOptions::handed_units_systemctl).
  std::function<void(const std::string& unit)> on_unit_active;
  std::chrono::milliseconds poll_interval{1000};
  std::chrono::milliseconds restart_backoff_initial{500};
  std::chrono::milliseconds restart_backoff_max{30000};
};

class SlurmNode {
 public:
  // `on_state` gets the `slurm_state` body on every change of State();
  // `on_nodes` the controller's node table whenever it changed. Both are called
  // from the worker thread.
  using StateCallback = std::function<void(const api::agentproto::SlurmStatus& state)>;
  using NodesCallback = std::function<void(const std::vector<slurm::SlurmNodeState>& nodes)>;

  SlurmNode(SlurmNodeOptions options, const Clock& clock, StateCallback on_state,
            NodesCallback on_nodes);
  ~SlurmNode();  // Stop()

  // Makes `spec` the desired state (idempotent; the same spec again is a no-op).
  void Apply(SlurmSpec spec);
  // Lets hpod start slurmctld/slurmd (and, with accounting, MariaDB and
  // slurmdbd) of its own accord: the agent sets it once the node's lifecycle
  // scripts succeeded. Before that a spec is written and munged (and sshd) run,
  // but Slurm's daemons start only when the node's systemctl asks (units.h), as
  // on HyperPod, where the lifecycle script starts them.
  void SetAutoStart(bool on);
  // Waits up to `timeout` for a first spec (any role, "none" included) to be
  // applied; whether one was.
  bool WaitForRole(std::chrono::milliseconds timeout);
  // The node's systemctl (units.h, slurm_units.cc): records the request, then
  // waits up to request.wait_ms for started units to be active and stopped ones
  // gone; returns the units' states (all of them for kQuery without units).
  // FailedPrecondition for a start of a unit this node's role does not run.
  StatusOr<std::vector<UnitState>> ControlUnits(const UnitRequest& request);
  // Ends every wait of ControlUnits and WaitForRole now, and those to come (the
  // agent is stopping: its local socket joins the threads that wait).
  void CancelWaits();
  // daemon "none|starting|running|restarting|failed"; role "" before the first Apply.
  api::agentproto::SlurmStatus State() const;
  // "a.b.c.d:6817" of the controller this node's slurmd or clients talk to; "" on
  // the controller itself and before the first Apply (the network health check).
  std::string ControllerTarget() const;
  // The hostname slurmd, and so the node's jobs, run under: the NodeName when
  // it is not the machine's own name (a pool host serving another's node),
  // else "" (the machine's name is the node's).
  std::string JobHostname() const;
  // Stops the daemons (SIGTERM, then SIGKILL) and the worker.
  void Stop();
  // The controller reports its node table again at the next poll even if
  // unchanged (hpodd lost it when the channel reconnected).
  void ResendNodes() { resend_nodes_ = true; }

 private:
  // A supervised daemon (defined here for slurm_node_services.cc).
  struct Daemon {
    std::string name;
    SubprocessOptions options;
    std::unique_ptr<Subprocess> proc;
    std::chrono::steady_clock::time_point start_after{};
    Backoff backoff;  // between restarts; Reset once it ran for a while
    std::chrono::steady_clock::time_point started_at{};
    // The node's wall clock just before the fork (slurm_state's slurmd_started).
    double started_epoch = 0;
    bool ready = false;
    std::string failure;  // why its last start failed; "" once one succeeded
  };
  // What the worker reads of the units' requests once per pass.
  struct UnitWishes {
    std::map<std::string, UnitIntent> intents;
    std::set<std::string> restarts;
    std::set<std::string> kicks;    // started now: no restart pause, no old failure
    std::set<std::string> reloads;  // SIGHUP, as the units' ExecReload
    std::set<std::string> disabled;
    bool auto_start = false;
    uint64_t version = 0;
    UnitIntent Of(const std::string& unit) const {
      auto it = intents.find(unit);
      return it == intents.end() ? UnitIntent::kAuto : it->second;
    }
  };
  // slurm_units.cc: which daemons run now, by what hpod and the node's systemctl
  // want (units.h); the daemon that stands for a unit (nullptr: none on this
  // role); the units' states for ControlUnits.
  struct Wanted {
    bool munged = true, sshd = true, mariadb = false, slurmdbd = false, main = false;
  };
  Wanted ComputeWanted(const UnitWishes& wishes) const;
  Daemon* DaemonOf(const std::string& unit) const;
  // Keeps d running when wanted (Supervise), else stops it (a user's stop).
  void Keep(Daemon& d, bool wanted);
  void RestartRequested(const UnitWishes& wishes);
  void StartRequested(const UnitWishes& wishes);
  void PublishUnits(const UnitWishes& wishes, const Wanted& wanted);
  // The states the worker published for `units` (all, when empty).
  std::vector<UnitState> PublishedUnits(const std::vector<std::string>& units) const REQUIRES(mu_);
  bool WantedUnit(const std::string& unit, const Wanted& wanted) const;
  std::vector<std::string> LogsOf(const std::string& unit) const;
  UnitState UnitStateOf(const std::string& unit, const UnitWishes& wishes,
                        const Wanted& wanted) const;
  void Loop();
  Status ApplySpec(const SlurmSpec& spec, bool* restart_ctld, bool* reconfigure);
  void Supervise(Daemon& d);
  // Schedules d's restart after its backoff's next (doubled) wait; returns the wait.
  std::chrono::milliseconds PauseBeforeRestart(Daemon& d,
                                               std::chrono::steady_clock::time_point now);
  std::unique_ptr<Daemon> NewDaemon(std::string name) const;
  Status StartDaemon(Daemon& d);
  // How long slurmd's start must wait so that its SlurmdStartTime cannot read as
  // `start_time` (SlurmSpec::avoid_start_time); 0 when it need not.
  std::chrono::milliseconds WaitToAvoid(const std::string& start_time) const;
  void StopDaemon(Daemon& d);
  void PollNodes();
  // slurm_node_services.cc: the daemons beside Slurm's own.
  // Writes the SSH setup and (re)defines sshd when the spec carries a host key;
  // stops sshd when it no longer does. Failures are logged: SSH never holds the
  // node out of Slurm.
  void ApplySsh(const SlurmSpec& spec);
  // Defines (or drops) MariaDB and slurmdbd for the controller's spec.
  Status ApplyAccounting(const SlurmSpec& spec);
  // Whether MariaDB (the database made) or slurmdbd (the cluster registered) is
  // ready, for Supervise.
  bool AccountingReady(Daemon& d);
  // Stops and forgets every daemon (the role went away, or the agent stops).
  void StopAll();
  void SetState(const std::string& daemon, const std::string& message);

  const SlurmNodeOptions options_;
  const Clock& clock_;
  const StateCallback on_state_;
  const NodesCallback on_nodes_;

  mutable Mutex mu_;
  std::condition_variable cv_;
  std::optional<SlurmSpec> desired_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::atomic<bool> resend_nodes_{false};
  api::agentproto::SlurmStatus state_ GUARDED_BY(mu_);
  // Units (units.h): what the node's systemctl asked, and the states the worker
  // published after its last pass (publish_gen_ counts the passes).
  std::map<std::string, UnitIntent> intents_ GUARDED_BY(mu_);
  std::set<std::string> restart_requests_ GUARDED_BY(mu_);
  std::set<std::string> kick_requests_ GUARDED_BY(mu_);
  std::set<std::string> reload_requests_ GUARDED_BY(mu_);
  bool waits_cancelled_ GUARDED_BY(mu_) = false;
  std::set<std::string> disabled_ GUARDED_BY(mu_);
  bool auto_start_ GUARDED_BY(mu_) = false;
  bool poked_ GUARDED_BY(mu_) = false;
  std::map<std::string, UnitState> units_ GUARDED_BY(mu_);
  // Each request bumps wish_version_; the worker publishes the version it read.
  uint64_t wish_version_ GUARDED_BY(mu_) = 0;
  uint64_t published_version_ GUARDED_BY(mu_) = 0;

  // Worker thread only.
  std::optional<SlurmSpec> applied_;
  std::unique_ptr<Daemon> munged_;
  std::unique_ptr<Daemon> sshd_;  // with SlurmSpec::ssh_host_key
  // With SlurmSpec::accounting (controller): MariaDB, then slurmdbd, then slurmctld.
  std::unique_ptr<Daemon> mariadb_;
  std::unique_ptr<Daemon> slurmdbd_;
  std::unique_ptr<Daemon> daemon_;  // slurmctld or slurmd
  bool reconfigure_pending_ = false;
  bool main_held_ = false;  // slurmctld/slurmd not wanted now (hold, lifecycle, systemctl)
  int restarts_ = 0;
  std::optional<std::vector<slurm::SlurmNodeState>> last_nodes_;
  std::chrono::steady_clock::time_point next_poll_{};
  std::thread worker_;
};

}  // namespace hpod::agent
