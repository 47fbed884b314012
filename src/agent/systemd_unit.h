#pragma once

// `hpod-agent systemd-unit start|stop|reload UNIT [--socket PATH]`: what the
// drop-ins of a pool host's handed units run (systemd_handover.h).
//   start   asks the node agent to start UNIT unless it runs or is coming up
//           (a daemon hpod runs stays hpod's to decide about), tells systemd
//           it is ready (Type=notify) once the agent reports it active, then
//           stays as the unit's main process: it copies the daemon's new output
//           lines (its stdout and stderr, which the agent keeps in a file) to
//           stdout, so to the journal (`journalctl -u slurmd`), and exits 0 when
//           the agent reports the unit inactive because a stop holds it. While
//           no agent answers (boot, an agent restart) it is ready at once, so
//           the machine's boot goes on, and waits for the agent; an agent that
//           comes back without its role yet ends nothing.
//   stop    asks the agent to stop UNIT, only with $MAINPID set (systemd also
//           runs ExecStop after the main process ended by itself, without it);
//           with no agent there is nothing to stop.
//   reload  asks the agent to send the daemon SIGHUP.
// One line on stderr for each refusal, and exit 1.
//
// Thread contract: runs on the program's main thread.

namespace hpod::agent {

// argv[1] is "systemd-unit"; returns the exit code.
int SystemdUnitMain(int argc, char** argv);

}  // namespace hpod::agent
