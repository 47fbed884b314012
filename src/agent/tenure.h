#pragma once

// A pool host's tenures (issue 26): the instance hpodd's pool provider gave the
// host (`assign`, PROTOCOL.md), run as a node agent inside the host's agent
// process, with everything of the instance under one directory,
// <state_dir>/instances/<instance id>/:
//   state/       the node agent's state dir (lifecycle.json, munge key and seed)
//   config/      resource_config.json, provisioning_parameters.json
//                (/opt/ml/config links here, HyperPod's path)
//   slurm-etc/   slurm.conf and its files on a controller (/opt/slurm/etc links here)
//   spool/ log/  Slurm's spool and logs (/var/spool/slurm{ctld,d}, /var/log/slurm
//                link here)
//   lifecycle/   the fetched lifecycle scripts (sagemaker-lifecycle-<id>/src/)
//   fsx-mounted  present when the tenure mounted the shared filesystem at /fsx
// so that ending a tenure — stop the node agent, its Slurm daemons and every job
// step they left, then remove that directory and the links into it — leaves the
// host as it was before. The host's identity (its certificate, under the state
// dir's tls/) is not the tenure's: the node agent connects with it.
//
// An agent restart keeps the tenure on disk (the host reports it; hpodd says
// whether it still serves it), so a restarted agent resumes the node with its
// lifecycle state instead of provisioning it again.
//
// Thread contract: not thread-safe; one thread (the host channel's loop) calls
// Serve and Current. The node agent runs on a thread of its own.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hpod/agent/agent.h"
#include "hpod/agent/systemd_handover.h"
#include "hpod/base/status.h"

namespace hpod::agent {

struct TenureOptions {
  std::string state_dir;  // the host's (/var/lib/hpod-agent)
  std::string server;     // hpodd's https:// agent URL (join.json)
  // Machine paths that link into the tenure (path → directory under it), where
  // HyperPod's scripts and hpodd's slurm.conf (StateSaveLocation, SlurmdSpoolDir,
  // the log files) look. A path that exists and is no link is left alone (and
  // logged): the tenure then uses the machine's. Tests point them elsewhere.
  std::vector<std::pair<std::string, std::string>> links = {
      {"/opt/ml/config", "config"},
      {"/opt/slurm/etc", "slurm-etc"},
      {"/var/spool/slurmctld", "spool/slurmctld"},
      {"/var/spool/slurmd", "spool/slurmd"},
      {"/var/log/slurm", "log/slurm"}};
  std::string local_socket = "/run/hpod-agent/agent.sock";  // kLocalSocketPath
  // Where the shared filesystem goes, and how long a node waits for the
  // cluster's marker on it (shared_fs.h).
  std::string shared_fs_mount = "/fsx";
  // Where the cluster's names go (hosts_file.h); its block leaves with the tenure.
  std::string hosts_file = "/etc/hosts";
  std::chrono::milliseconds marker_wait{120000};
  // Whether ending a tenure kills the machine's job steps (KillJobSteps); unit
  // tests, which share the machine with other tests' Slurm jobs, turn it off.
  bool kill_job_steps = true;
  // Non-empty on a machine whose PID 1 is systemd: for each tenure, Slurm's and
  // munge's units there are handed to the node agent (systemd_handover.h), with
  // drop-ins in this directory (/etc/systemd/system), and handed back at its end.
  std::string systemd_unit_dir;
  std::string systemctl = "systemctl";
  // Overrides for the node agent (tests: fake Slurm programs, short intervals).
  AgentOptions node_template;
};

class TenureRunner {
 public:
  explicit TenureRunner(TenureOptions options);
  // Stops the running node agent; keeps its tenure on disk (an agent restart).
  ~TenureRunner();

  // The instance whose tenure is on disk; "" for none (the first found when
  // several are, which only a crash mid-switch leaves: Serve ends the others).
  std::string Current() const;

  // Makes `instance_id` ("" for none) the host's only tenure: ends every other
  // (stops its node agent, its Slurm daemons and job steps, unmounts the shared
  // filesystem it mounted, wipes its directory) and starts the node agent for
  // it unless it runs — after the shared filesystem check when `shared_fs` is
  // declared (a failure leaves no tenure and sets CheckFailed()). Idempotent.
  // kInvalidArgument for an id that is not i- and hex (it names a directory).
  Status Serve(const std::string& instance_id,
               const std::optional<api::agentproto::SharedFilesystem>& shared_fs = std::nullopt);
  // Whether the last Serve failed the shared filesystem check.
  bool CheckFailed() const { return check_failed_; }

  std::string TenureDir(const std::string& instance_id) const;
  // Whether the node agent of Current() runs.
  bool Running() const { return !running_.empty(); }

 private:
  Status End(const std::string& instance_id);
  Status Start(const std::string& instance_id,
               const std::optional<api::agentproto::SharedFilesystem>& shared_fs);
  void StopAgent();
  // How this machine's units are handed to its node agents (systemd_unit_dir set).
  SystemdHandoverOptions Handover() const;

  const TenureOptions options_;
  std::string running_;  // the instance whose node agent runs; "" for none
  bool check_failed_ = false;
  std::unique_ptr<Agent> agent_;
  std::thread thread_;
};

// Kills every slurmstepd of this machine with its process tree (SIGKILL): the job
// steps a tenure's slurmd left, which outlive it by design. A host serves one
// tenure at a time, so every slurmstepd on it is the ending tenure's.
void KillJobSteps();

}  // namespace hpod::agent
