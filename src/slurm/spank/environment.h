#pragma once

// What the plugin reads from srun's environment: whether this srun should become a
// supervisor, and the supervisor's and runner's settings. Pure functions over an
// environment lookup, so that tests pass a map.
//
// Thread contract: stateless functions; ProcessEnv's lookup reads the live process
// environment and must not race with setenv.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/slurm/spank/step_runner.h"
#include "hpod/slurm/spank/supervisor.h"

namespace hpod::spank {

// A read-only view of environment variables; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
EnvLookup ProcessEnv();

enum class LocalDecision {
  kRunOnce,       // no option, 0, or a child srun of a supervisor: carry on as plain srun
  kSupervise,     // become the supervisor
  kNoAllocation,  // asked for, but outside an allocation: one line, then run once
};

struct LocalChoice {
  LocalDecision decision = LocalDecision::kRunOnce;
  int retries = 0;
  std::string line;  // printed when not empty (a bad propagated value, no allocation)
};

// `retries` and `option_seen` come from the option callback. When the callback never
// ran, the value sbatch propagated (kPropagatedOptionEnv) is read here too: srun
// normally hands it to the callback itself, this covers an srun that does not.
LocalChoice DecideLocal(int retries, bool option_seen, const EnvLookup& env);

// Everything the supervisor and its runner need, from the environment of the srun
// that was run with --auto-resume=<retries>.
struct SupervisorSetup {
  SupervisorConfig config;
  ForkExecOptions runner;  // argv left empty: the caller reads /proc/self/cmdline
  std::string agent_socket;
  // The directory to create for the goodput ledger ("" when the user chose the file).
  std::string ledger_dir;
  std::vector<std::string> warnings;  // complete lines about ignored values
};
SupervisorSetup SetupFromEnv(int retries, const EnvLookup& env);

}  // namespace hpod::spank
