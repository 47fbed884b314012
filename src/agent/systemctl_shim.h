#pragma once

// hpod-agent started as `systemctl` or `journalctl` (a link the agent makes on a
// node whose PID 1 is not systemd; docs/systemctl.md): the client side of the
// node's units (units.h). It asks the node's agent over its local socket and
// prints what systemd's tools print, in the forms scripts test for:
//   systemctl start|stop|restart|enable|disable [--now] UNIT…
//   systemctl is-active|is-enabled|is-failed [-q] UNIT…
//   systemctl status|show [UNIT…]; systemctl list-units
//   systemctl daemon-reload | reset-failed     (nothing to do: exit 0)
//   journalctl -u UNIT [-n N] [-f] [--no-pager] (the unit's log files)
// Exit codes follow systemd's: 0 ok; is-active/status 3 for a unit not
// active; 4 (status) or 5 (start) for an unknown unit; 1 otherwise. Anything
// else systemd offers (other units, reboot, timers) fails with one line that
// says what this node's systemctl answers for.
//
// Thread contract: the Main functions run on the program's main thread.

#include <string>
#include <vector>

#include "hpod/agent/units.h"
#include "hpod/base/status.h"

namespace hpod::agent {

// argv[0]'s base name is systemctl or journalctl.
bool IsSystemctlName(const char* argv0);
// Runs the tool `argv[0]` names against the agent at `socket_path`; returns the
// exit code. Output goes to stdout/stderr.
int SystemctlShimMain(int argc, char** argv, const std::string& socket_path);

// One request to the agent at `socket_path` (its local socket): the units'
// states after it. kUnavailable when no agent listens there; the agent's refusal
// (an unknown unit, a start this node's role does not run) as kFailedPrecondition.
StatusOr<std::vector<UnitState>> AskUnits(const std::string& socket_path,
                                          const UnitRequest& request);

// Links <link_dir>/systemctl and <link_dir>/journalctl to this program
// (/proc/self/exe), replacing only links and nothing else, and writes
// slurmctld.service, slurmd.service and slurmdbd.service into `unit_dir` where
// none is (HyperPod's AMI has them there, and start_slurm.sh rewrites
// slurmd.service with envsubst and moves the controller's aside).
Status InstallSystemctl(const std::string& link_dir, const std::string& unit_dir);

// The unit file written for `unit` (slurmctld, slurmd, slurmdbd), and the same
// without its header comment (a pool host's gets its own: systemd_handover.h).
std::string UnitFileText(const std::string& unit);
std::string UnitFileBody(const std::string& unit);

}  // namespace hpod::agent
