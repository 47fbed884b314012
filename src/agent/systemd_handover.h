#pragma once

// Slurm's and munge's systemd units on a pool host while it serves an hpod node
// (docs/systemctl.md, "Pool hosts"). A pool host keeps its real systemd, but its
// agent runs munged, slurmctld/slurmd and slurmdbd itself (tenure.h): a
// lifecycle script's `systemctl enable --now slurmd` (AWS's start_slurm.sh) would
// start Debian's unit beside hpod's slurmd, and Debian's enabled munge.service
// holds /run/munge/munge.socket.2, the socket the node's munged needs.
//
// So for the tenure each of those units is handed to the agent: a drop-in
// (<unit_dir>/<unit>.service.d/50-hpod-agent.conf, kept across reboots as the
// tenure is) replaces the unit's ExecStart with `hpod-agent systemd-unit start
// UNIT` (systemd_unit.h), which asks the node agent over its local socket, as the
// node's own systemctl does on a local node, then stays as the unit's main
// process and copies the daemon's output to the journal. So `systemctl
// start|stop|restart|reload|status|is-active` and `journalctl -u` act on and show
// hpod's one daemon; an `enable` brings it back at boot through the agent.
// Slurm's unit files go where HyperPod's AMI has them (AWS's start_slurm.sh
// fills slurmd.service with envsubst) unless the machine has its own there.
// A unit that was active before the tenure is stopped first and started again
// when the tenure ends; each unit gets its enable state from before back, and
// every file hpod wrote (each begins with "# hpod-agent tenure:") is removed:
// the host is left as it was.
//
// Thread contract: the functions run commands (systemctl) and write files; call
// them from one thread at a time (the host agent's tenure thread).

#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::agent {

// The units handed over, in the order they start (munge first).
inline constexpr std::string_view kHandedUnits[] = {"munge", "slurmdbd", "slurmctld", "slurmd"};

struct SystemdHandoverOptions {
  std::string unit_dir = "/etc/systemd/system";
  std::string systemctl = "systemctl";
  // The program the drop-ins run (the agent's own executable) and the node
  // agent's local socket they ask.
  std::string agent_program;
  std::string socket;
  // Where what ran and was enabled before the first handover is remembered, so
  // that the tenure's end restores it, even after a reboot (the host agent's
  // state dir: the machine's, as the drop-ins are).
  std::string state_file;
};

// Whether systemd is this machine's PID 1 (sd_booted(3): `marker` exists).
bool SystemdRunsThisMachine(const std::string& marker = "/run/systemd/system");

// The drop-in that hands `unit` to the agent.
std::string HandoverDropIn(std::string_view unit, const SystemdHandoverOptions& options);

// Remembers whether each unit of kHandedUnits runs and is enabled (before
// touching it), stops one that runs under its own definition, writes the
// drop-ins and the AMI's unit files (a bare munge.service where the machine
// has none), then `systemctl daemon-reload`. Idempotent: a unit whose drop-in
// is already there is neither stopped nor remembered again. kFailedPrecondition
// without an absolute agent_program.
Status HandOverUnits(const SystemdHandoverOptions& options);

// What a pool host's node agent calls when one of its daemons becomes active
// (AgentOptions::handed_units_systemctl): `systemctl start --no-block` of a
// handed unit, so systemd shows hpod's daemon however it started; nothing for
// other units. Failures are logged.
void ShowHandedUnitActive(const std::string& systemctl, const std::string& unit);

// The tenure's end (its node agent already stopped): stops the handed units,
// gives each its enable state from before, removes every file of hpod's in
// unit_dir, daemon-reload, resets the handed units' failed state, starts the
// units that ran before. Idempotent; failures are logged and the rest is still
// done (the first is returned, and state_file is kept for the next try).
Status ReturnUnits(const SystemdHandoverOptions& options);

}  // namespace hpod::agent
