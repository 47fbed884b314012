#pragma once

// The `--auto-resume=N` option and the names of the environment variables the
// plugin, the supervisor and the step share. Pure functions, no I/O.
//
// Thread contract: stateless functions; safe from any thread.

#include <string>
#include <string_view>

#include "hpod/base/status.h"

namespace hpod::spank {

// The most retries one step may ask for. A bound keeps a typo (`--auto-resume=1000`)
// from holding an allocation for days of replacements.
inline constexpr int kMaxAutoResume = 100;

// Slurm's name for the option value that sbatch/salloc/srun export to every srun of
// the job: "SLURM_SPANK_" + "_SLURM_SPANK_OPTION_" + <plugin> + "_" + <option>, each
// non-alphanumeric character of plugin and option replaced by '_' (plugstack.c
// `_opt_env_name`, read by `spank_process_env_options` in srun, which then calls the
// option callback with remote=0).
inline constexpr char kPropagatedOptionEnv[] = "SLURM_SPANK__SLURM_SPANK_OPTION_hpod_auto_resume";

// Set by the supervisor in each child srun's environment (and so in every task):
// the attempt number, 0 for the first run. Its presence also tells the child's own
// plugin instance not to supervise again.
inline constexpr char kAttemptEnv[] = "HPOD_AUTO_RESUME_ATTEMPT";
// The write end of the pipe on which the child srun reports its step id.
inline constexpr char kStepFdEnv[] = "HPOD_AUTO_RESUME_STEP_FD";
// The supervisor's pid: the child srun writes to kStepFdEnv only when it is its parent
// (tasks inherit the variables on other nodes, where the fd number means nothing).
inline constexpr char kSupervisorPidEnv[] = "HPOD_AUTO_RESUME_SUPERVISOR_PID";
// The goodput ledger hpod-train rank 0 appends to.
inline constexpr char kGoodputFileEnv[] = "HPOD_GOODPUT_FILE";
// Overrides of the agent socket path and of the supervisor's waits (seconds).
inline constexpr char kAgentSocketEnv[] = "HPOD_AGENT_SOCKET";
inline constexpr char kGraceEnv[] = "HPOD_AUTO_RESUME_GRACE_S";
inline constexpr char kTimeoutEnv[] = "HPOD_AUTO_RESUME_TIMEOUT_S";

inline constexpr char kDefaultAgentSocket[] = "/run/hpod-agent/agent.sock";

// Parses the value of --auto-resume: a non-negative decimal integer of at most
// kMaxAutoResume (0 = off). Leading zeros are accepted; a sign, spaces, a suffix or
// an empty value are InvalidArgument, with the user-facing line as the message
// (see AutoResumeError).
StatusOr<int> ParseAutoResume(std::string_view value);

// The one line printed for a bad value, e.g. "[Auto Resume] Error: --auto-resume=abc:
// expected the number of retries (0, 1, 2, ...)". No trailing newline.
std::string AutoResumeError(std::string_view value);

}  // namespace hpod::spank
