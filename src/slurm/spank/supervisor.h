#pragma once

// The auto-resume decision loop: run the step, ask the agent what happened to the
// job's nodes, wait for their recovery and run the step again, or stop with the
// step's exit code. It runs inside the srun process the user started (the SPANK
// plugin hands over to it), so srun's final exit code is the one Supervise returns.
//
// srun's own exit code is not trusted (slurm-on-namespaces.md §10 quirk 1): srun can
// exit 0 after a node died. A node failure is judged by the agent, whatever the rc.
//
// Everything outside the loop sits behind an interface with a fake in the tests:
// the agent (AgentClient), the child srun (StepRunner), time (Clock + Sleeper) and
// the lines users see (Output).
//
// Thread contract: Supervise runs on one thread and calls its collaborators only
// from that thread; the interfaces below need not be thread-safe.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/slurm/spank/agent_client.h"

namespace hpod::spank {

// The outcome of one attempt of the step.
struct RunResult {
  int exit_code = 0;  // exit status, or 128 + the signal that ended the step's srun
  // The signal (SIGINT, SIGTERM, SIGHUP) the user sent the supervisor during the
  // attempt, 0 for none: a user cancel, never retried.
  int user_signal = 0;
  std::string step_id;  // as the child srun reported it; empty when unknown
  // The supervisor ended the step (the watch said a node of it failed): srun was
  // killed rather than left to wait out Slurm's timeouts for the lost node.
  bool ended_by_watch = false;
};

// Asked now and then while an attempt runs; true: end the attempt now.
using StepWatch = std::function<bool()>;

// Starts the step's srun for one attempt and waits for it.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // Error only when the step could not be started at all (fork failed): the
  // supervisor stops with exit code 1. `watch` (may be empty) is called about
  // every watch interval while the step runs; when it returns true the runner
  // kills the step's srun and returns with ended_by_watch.
  virtual StatusOr<RunResult> Run(int attempt, const StepWatch& watch) = 0;
};

// Waits. The fake advances a FakeClock instead.
class Sleeper {
 public:
  virtual ~Sleeper() = default;
  virtual void Sleep(std::chrono::milliseconds d) = 0;
};

class RealSleeper final : public Sleeper {
 public:
  void Sleep(std::chrono::milliseconds d) override;
};

// Where the supervisor's lines go (one call per complete line, no newline).
class Output {
 public:
  virtual ~Output() = default;
  virtual void Line(std::string_view line) = 0;
};

// Writes each line to stderr with one write(2), so that lines of the supervisor
// and of the child srun do not interleave mid-line.
class StderrOutput final : public Output {
 public:
  void Line(std::string_view line) override;
};

struct SupervisorConfig {
  std::string job_id;
  // Retries allowed after the first attempt (the N of --auto-resume=N).
  int max_attempts = 0;
  // The job's nodes (expanded SLURM_JOB_NODELIST), named to the agent.
  std::vector<std::string> nodes;
  int restart = 0;  // SLURM_RESTART_COUNT
  // Between questions to the agent while waiting (the grace, a recovery): a
  // replacement is back within about a second, and each wasted poll is added to
  // the job's restart.
  std::chrono::milliseconds poll_interval{250};
  // After a failed step on healthy nodes, how long to keep asking: the step may
  // have failed because a peer died before the agent flagged that peer (§10 quirk 7).
  std::chrono::milliseconds grace{std::chrono::seconds(10)};
  // While a step runs, the agent is asked whether a node of it failed; once hpod
  // has judged one failed (recovering or recovered), the step is ended at once
  // instead of srun waiting out Slurm's KillWait and MessageTimeout for the lost
  // node's tasks (5-7 s on 22.05). The runner calls the watch at its own interval.
  bool watch_running_step = true;
  // How long to wait for the nodes' recovery before giving up.
  std::chrono::milliseconds recovery_timeout{std::chrono::seconds(900)};
  // The goodput ledger whose summary (or tail) goes with the finished event; empty:
  // none.
  std::string ledger_path;
};

// Runs attempts until the step needs no retry or may not have one; returns the exit
// code for srun. Reports started/ended/retrying/finished to the agent (best effort:
// none changes the outcome; the first failure to report prints one line at the end,
// none when a line already said the agent cannot be reached).
int Supervise(const SupervisorConfig& config, AgentClient& agent, StepRunner& runner,
              const Clock& clock, Sleeper& sleeper, Output& out);

enum class Severity { kInfo, kError };

// "[Auto Resume] Info: JobID: 12 StepID: 0 <text>"; without "StepID: ..." when the
// step id is unknown.
std::string FormatLine(Severity severity, std::string_view job_id, std::string_view step_id,
                       std::string_view text);

// The most of a ledger that is summarized (about a million steps); a longer one is
// sent as its tail, since a summary of a suffix would be wrong.
inline constexpr std::size_t kMaxLedgerBytes = 64u << 20;
// The most of a ledger sent raw.
inline constexpr std::size_t kMaxLedgerTailBytes = 256u << 10;

// Adds the goodput ledger at `path` to a finished event: its summary
// (hpod::goodput::ToJson) when the library is built with it and the ledger holds a
// start, else its last kMaxLedgerTailBytes from a line boundary as ledger_tail.
// Nothing when there is no such file.
void AttachLedger(const std::string& path, JobEvent& event);

}  // namespace hpod::spank
