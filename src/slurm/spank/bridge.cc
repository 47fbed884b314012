// The extern "C" edge of the supervisor library. Every function is a try/catch
// around a call into tested C++ code.

#include "hpod/slurm/spank/bridge.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "hpod/base/clock.h"
#include "hpod/slurm/spank/agent_client.h"
#include "hpod/slurm/spank/environment.h"
#include "hpod/slurm/spank/options.h"
#include "hpod/slurm/spank/step_runner.h"
#include "hpod/slurm/spank/supervisor.h"

namespace {

using namespace hpod::spank;  // NOLINT: a file of one-line wrappers

void PrintLine(const std::string& line) {
  StderrOutput out;
  out.Line(line);
}

// Remembers whether a step was started, so that a failure after it does not make
// srun run the step again as a plain srun. Not thread-safe (the supervisor's thread).
class TrackingRunner final : public StepRunner {
 public:
  TrackingRunner(StepRunner& inner, bool& started) : inner_(inner), started_(started) {}
  hpod::StatusOr<RunResult> Run(int attempt, const StepWatch& watch) override {
    started_ = true;
    return inner_.Run(attempt, watch);
  }

 private:
  StepRunner& inner_;
  bool& started_;
};

}  // namespace

extern "C" int hpod_auto_resume_parse(const char* value, int remote, int* retries) {
  try {
    hpod::StatusOr<int> n = ParseAutoResume(value == nullptr ? "" : value);
    if (!n.ok()) {
      if (!remote) PrintLine(n.status().message());
      return -1;
    }
    *retries = *n;
    return 0;
  } catch (...) {
    return -1;
  }
}

extern "C" int hpod_auto_resume_local_decision(int retries, int option_seen, int* retries_out) {
  try {
    LocalChoice c = DecideLocal(retries, option_seen != 0, ProcessEnv());
    if (!c.line.empty()) PrintLine(c.line);
    *retries_out = c.retries;
    return c.decision == LocalDecision::kSupervise ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

extern "C" int hpod_auto_resume_supervise(int retries) {
  bool started = false;
  try {
    SupervisorSetup setup = SetupFromEnv(retries, ProcessEnv());
    for (const auto& w : setup.warnings) PrintLine(w);
    const std::string& job = setup.config.job_id;
    hpod::StatusOr<std::vector<std::string>> argv = ReadCmdline();
    if (!argv.ok()) {
      PrintLine(FormatLine(Severity::kError, job, "",
                           "cannot read srun's command line (" + argv.status().message() +
                               "); running the step once without auto-resume"));
      return -1;
    }
    if (!setup.ledger_dir.empty() && mkdir(setup.ledger_dir.c_str(), 0755) != 0 &&
        errno != EEXIST) {
      PrintLine(FormatLine(Severity::kError, job, "",
                           "cannot create " + setup.ledger_dir + ": " + strerror(errno) +
                               "; the goodput ledger may be missing"));
    }
    setup.runner.argv = std::move(*argv);
    ForkExecRunner fork_exec(setup.runner);
    TrackingRunner runner(fork_exec, started);
    UnixSocketAgentClient agent(UnixSocketAgentClient::Options{.socket_path = setup.agent_socket});
    RealSleeper sleeper;
    StderrOutput out;
    return Supervise(setup.config, agent, runner, hpod::RealClock::Get(), sleeper, out);
  } catch (const std::exception& e) {
    PrintLine(std::string("[Auto Resume] Error: the supervisor failed: ") + e.what());
  } catch (...) {
    PrintLine("[Auto Resume] Error: the supervisor failed");
  }
  // Before any step: srun carries on and runs it once. After one: it must not run
  // again unsupervised, so report a failure.
  return started ? 1 : -1;
}

extern "C" void hpod_auto_resume_report_step(unsigned int step_id) {
  try {
    // Best effort: without it the supervisor's lines just leave out the StepID.
    (void)ReportStepIdToSupervisor(getenv(kStepFdEnv), getenv(kSupervisorPidEnv), getppid(),
                                   std::to_string(step_id));
    // The tasks need neither; the fd number would mean nothing on their nodes.
    unsetenv(kStepFdEnv);
    unsetenv(kSupervisorPidEnv);
  } catch (...) {
  }
}

extern "C" void hpod_auto_resume_task_init(unsigned int job_id, unsigned int step_id,
                                           unsigned int task_id) {
  // Slurm's special steps (batch 0xfffffffb, extern 0xfffffffc, interactive
  // 0xfffffffa, ...) sit at the top of the range; HyperPod prints only real steps.
  if (step_id >= 0xfffffff0u) return;
  char line[160];
  int n = snprintf(line, sizeof(line),
                   "[Auto Resume] Info: JobID: %u StepID: %u TaskID: %u process_task_init\n",
                   job_id, step_id, task_id);
  if (n > 0) {
    ssize_t ignored = write(STDERR_FILENO, line, static_cast<size_t>(n));
    (void)ignored;
  }
}
