#pragma once

// `hpod-agent systemd-unit start|stop|reload UNIT [--socket PATH]`: what the
// drop-ins of a pool host's handed units run (systemd_handover.h).
//   start   asks the node agent to start UNIT (as `systemctl start` does on a
//           local node), tells systemd it is ready (Type=notify) once the agent
//           answered, then stays as the unit's main process: it copies the
//           daemon's new output lines (its stdout and stderr, which the agent
//           keeps in a file) to stdout, so to the journal (`journalctl -u
//           slurmd`), and exits 0 when the agent reports the unit inactive (a
//           stop). While the agent is away (restarting, booting) it waits for it.
//   stop    asks the agent to stop UNIT; with no agent there is nothing to stop.
//   reload  asks the agent to send the daemon SIGHUP.
// One line on stderr for each refusal, and exit 1.
//
// Thread contract: runs on the program's main thread.

namespace hpod::agent {

// argv[1] is "systemd-unit"; returns the exit code.
int SystemdUnitMain(int argc, char** argv);

}  // namespace hpod::agent
