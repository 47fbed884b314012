#include "hpod/slurm/spank/environment.h"

#include <stdlib.h>

#include <charconv>

#include "hpod/base/hostlist.h"
#include "hpod/slurm/spank/options.h"

namespace hpod::spank {
namespace {

std::string Get(const EnvLookup& env, std::string_view name) { return env(name).value_or(""); }

// A whole number of seconds from `name`, or `fallback` with a warning line.
std::chrono::milliseconds Seconds(const EnvLookup& env, const char* name,
                                  std::chrono::milliseconds fallback, const std::string& job,
                                  std::vector<std::string>& warnings) {
  std::optional<std::string> v = env(name);
  if (!v) return fallback;
  long s = -1;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), s);
  if (ec == std::errc() && p == v->data() + v->size() && s >= 0 && s <= 7 * 24 * 3600) {
    return std::chrono::seconds(s);
  }
  warnings.push_back(FormatLine(
      Severity::kError, job, "",
      std::string(name) + "=" + *v + ": expected whole seconds; using " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(fallback).count())));
  return fallback;
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

LocalChoice DecideLocal(int retries, bool option_seen, const EnvLookup& env) {
  LocalChoice c;
  c.retries = retries;
  if (!option_seen) {
    std::optional<std::string> propagated = env(kPropagatedOptionEnv);
    if (propagated) {
      StatusOr<int> n = ParseAutoResume(*propagated);
      if (!n.ok()) {
        c.line = n.status().message();
        return c;
      }
      c.retries = *n;
    }
  }
  // A child srun of a supervisor carries the attempt marker: it runs the step once.
  if (c.retries <= 0 || env(kAttemptEnv)) return c;
  if (!env("SLURM_JOB_ID")) {
    c.decision = LocalDecision::kNoAllocation;
    c.line =
        "[Auto Resume] Error: --auto-resume needs an allocation (sbatch or salloc --exclusive); "
        "running the step once without it";
    return c;
  }
  c.decision = LocalDecision::kSupervise;
  return c;
}

SupervisorSetup SetupFromEnv(int retries, const EnvLookup& env) {
  SupervisorSetup s;
  SupervisorConfig& c = s.config;
  c.job_id = Get(env, "SLURM_JOB_ID");
  c.max_attempts = retries;
  const std::string nodelist = Get(env, "SLURM_JOB_NODELIST");
  StatusOr<std::vector<std::string>> nodes = ExpandHostlist(nodelist);
  if (nodes.ok()) {
    c.nodes = std::move(*nodes);
  } else {
    // The agent still knows the job by its id; an empty list asks about all its nodes.
    s.warnings.push_back(FormatLine(
        Severity::kError, c.job_id, "",
        "SLURM_JOB_NODELIST: " + nodes.status().message() + "; asking the agent by job id only"));
  }
  long restart = 0;
  const std::string rc = Get(env, "SLURM_RESTART_COUNT");
  std::from_chars(rc.data(), rc.data() + rc.size(), restart);
  c.restart = static_cast<int>(restart);
  c.grace = Seconds(env, kGraceEnv, c.grace, c.job_id, s.warnings);
  c.recovery_timeout = Seconds(env, kTimeoutEnv, c.recovery_timeout, c.job_id, s.warnings);

  s.agent_socket = Get(env, kAgentSocketEnv);
  if (s.agent_socket.empty()) s.agent_socket = kDefaultAgentSocket;

  // One ledger per job id, in the submit directory: a requeued job (same id)
  // appends to the same file, so goodput spans its restarts.
  std::optional<std::string> user_file = env(kGoodputFileEnv);
  if (user_file && !user_file->empty()) {
    c.ledger_path = *user_file;
  } else {
    std::string dir = Get(env, "SLURM_SUBMIT_DIR");
    if (dir.empty()) dir = Get(env, "PWD");
    if (dir.empty()) dir = ".";
    s.ledger_dir = dir + "/.hpod";
    c.ledger_path = s.ledger_dir + "/goodput-" + (c.job_id.empty() ? "none" : c.job_id) + ".jsonl";
    s.runner.env.emplace_back(kGoodputFileEnv, c.ledger_path);
  }
  return s;
}

}  // namespace hpod::spank
