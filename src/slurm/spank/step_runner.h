#pragma once

// The real StepRunner: each attempt forks and execs the step's srun again, the same
// argv the user typed, with "--overlap" from the first retry on, and waits for it.
// Also the child side of the step-id handshake.
//
// Why a child srun: Slurm has no API to relaunch a step, so the srun process the
// user started becomes the supervisor and every attempt is a fresh srun of the same
// command line (slurm-on-namespaces.md §10).
//
// Thread contract: a ForkExecRunner may be used from one thread at a time, and only
// one Run may be in progress per process: Run installs process-wide handlers for
// SIGINT, SIGTERM and SIGHUP (forwarded to the child) and resets SIGCHLD to default
// for its duration, restoring the previous dispositions before it returns.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/slurm/spank/supervisor.h"

namespace hpod::spank {

struct ForkExecOptions {
  // What is exec'd: srun itself, whatever its path.
  std::string executable = "/proc/self/exe";
  // argv[0] first. In srun, from /proc/self/cmdline (ReadCmdline).
  std::vector<std::string> argv;
  // Insert "--overlap" right after argv[0] from attempt 1 on: the failed attempt's
  // ghost step keeps the replaced node's CPUs busy in slurmctld until the job ends,
  // and a new step without it waits forever for them (§10 quirk 3).
  bool overlap_on_retry = true;
  // Set in the child over the supervisor's own environment (HPOD_GOODPUT_FILE).
  std::vector<std::pair<std::string, std::string>> env;
  // Pass a pipe in HPOD_AUTO_RESUME_STEP_FD on which the child srun's plugin writes
  // its step id (RunResult::step_id).
  bool step_id_pipe = true;
  // How often Run calls its watch while the child runs.
  std::chrono::milliseconds watch_interval{500};
};

class ForkExecRunner final : public StepRunner {
 public:
  explicit ForkExecRunner(ForkExecOptions options) : options_(std::move(options)) {}

  // Sets HPOD_AUTO_RESUME_ATTEMPT=<attempt> (and the step-id pipe variables) in the
  // child. While the child runs, SIGINT/SIGTERM/SIGHUP sent to the supervisor are
  // forwarded to it and make RunResult::user_signal non-zero; the child starts with
  // default dispositions and an empty signal mask. exec failure: exit code 127.
  // When `watch` says so, the child gets SIGKILL (exit code 137, ended_by_watch).
  // Error: the pipe or fork failed.
  StatusOr<RunResult> Run(int attempt, const StepWatch& watch) override;

 private:
  const ForkExecOptions options_;
};

// The argv of one attempt: `argv` with "--overlap" after argv[0] when `overlap` and
// attempt >= 1.
std::vector<std::string> AttemptArgv(const std::vector<std::string>& argv, int attempt,
                                     bool overlap);

// "NAME=value" entries: `base` (an environ-style array, may be null) with every
// variable named in `overrides` replaced by its value there.
std::vector<std::string> AttemptEnv(
    char** base, const std::vector<std::pair<std::string, std::string>>& overrides);

// A process's argv from a /proc/<pid>/cmdline file (NUL-separated). Error when it
// cannot be read or is empty.
StatusOr<std::vector<std::string>> ReadCmdline(const std::string& path = "/proc/self/cmdline");

// The child srun's side of the handshake: writes "<step_id>\n" to the fd named by
// `fd_env` and closes it, but only when `pid_env` is `parent` (our parent is the
// supervisor) and the fd is a pipe; tasks inherit both variables on other nodes,
// where the number could name any file. FailedPrecondition otherwise, nothing written.
Status ReportStepIdToSupervisor(const char* fd_env, const char* pid_env, pid_t parent,
                                std::string_view step_id);

}  // namespace hpod::spank
