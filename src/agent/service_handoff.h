#pragma once

// `apt install ./hpod-agent_*.deb && hpod-agent join --server … --token …` is the
// whole setup of a host (issue 26). The package installs hpod-agent.service
// (packaging/hpod-agent.service) without enabling it; a first join typed in a
// shell on a machine that runs systemd hands the agent over to that unit — it
// enables and starts it, and returns — so the agent survives the shell and the
// machine's reboots, restarted by systemd (Restart=always, KillMode=process:
// slurmd and job steps outlive an agent restart). Anywhere else (no systemd, an
// agent systemd already started, another --state-dir, or --foreground) the
// agent keeps running in the foreground, as before.
//
// Thread contract: free functions; no state.

#include <chrono>
#include <string>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::agent {

struct ServiceHandoff {
  // The state dir the packaged unit runs the agent with.
  std::string unit_state_dir = "/var/lib/hpod-agent";
  // Present while systemd is the init system (sd_booted(3)).
  std::string systemd_run_dir = "/run/systemd/system";
  // Where the package puts the unit (or an admin's copy).
  std::vector<std::string> unit_files = {"/lib/systemd/system/hpod-agent.service",
                                         "/etc/systemd/system/hpod-agent.service"};
  std::string systemctl = "systemctl";
};

// Whether a join that just happened from `state_dir` should hand the agent over:
// systemd runs the machine, the unit is installed and the state dir is the
// unit's. (The unit itself runs `hpod-agent join --foreground`, and only once
// the machine has joined: it never hands off. A join run by another service —
// cloud-init's runcmd, a configuration agent — does hand off.)
bool ShouldHandOff(const ServiceHandoff& h, const std::string& state_dir);

// `systemctl enable hpod-agent.service`, then `systemctl restart` it (a unit
// already active, from an earlier join, runs the new identity too), each within
// `timeout`; one line with systemctl's own words when either fails.
Status HandOff(const ServiceHandoff& h,
               std::chrono::milliseconds timeout = std::chrono::seconds(90));

}  // namespace hpod::agent
