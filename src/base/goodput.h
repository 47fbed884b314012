#pragma once

// Goodput of a training job across its restarts, from the ledger hpod-train's
// rank 0 appends to (src/train/README.md, "Goodput ledger"): one JSON object a
// line, each with "event" and "time" (Unix epoch seconds):
//
//   {"event":"start","time":T,"process_start":T0,"job_id":"12","restart":0,
//    "attempt":0,"world_size":3,"resumed_step":40,"checkpoint_load_s":0.05,
//    "rendezvous_s":0.3}
//   {"event":"step","time":T,"step":41,"step_s":0.123}
//   {"event":"checkpoint","time":T,"step":60,"save_s":0.02}
//   {"event":"end","time":T,"step":200,"status":"completed"}
//
// Every "start" opens an attempt (one process of the job, e.g. one Slurm
// auto-resume retry); the events after it belong to it. Goodput is the step
// time that counts towards the final model over the wall time from the first
// process's start to the last event: time with no process, start-up, restore
// and steps re-run after a restart from an older checkpoint are all lost.
//
// Shared by hpod-train (its --summary-json), the control plane and the SPANK
// plugin, so it depends on the standard library, nlohmann_json and status.h
// only, and is built position-independent.
//
// Thread contract: pure functions of their arguments.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::goodput {

// One process of the job: a "start" event and what followed it.
struct Attempt {
  double process_start = 0;    // the process began (start's process_start)
  double ready_time = 0;       // set up, about to run its first step (start's time)
  double first_step_time = 0;  // its first step ended; 0 when it logged no step
  double last_time = 0;        // its last event of any kind
  int64_t resumed_step = 0;    // the checkpoint it loaded; 0 for a fresh start
  int64_t last_step = 0;       // the newest step it reached (resumed_step if none)
  int64_t steps = 0;           // step events
  double step_s = 0;           // the sum of their step_s
  double checkpoint_load_s = 0;
  double rendezvous_s = 0;
  int64_t checkpoints = 0;       // checkpoint events (saves that completed)
  double checkpoint_save_s = 0;  // the sum of their save_s
  int world_size = 0;
  int restart = 0;  // SLURM_RESTART_COUNT (a requeue)
  int attempt = 0;  // HPOD_AUTO_RESUME_ATTEMPT (an auto-resume retry)
  std::string job_id;
  // The end event's: "completed", "interrupted" or "failed". Empty when there
  // is none: the process still runs, or died without one (kill -9, a node that
  // failed).
  std::string status;
};

// The transition from attempts[i] to attempts[i + 1], as gaps[i].
struct Gap {
  double lost_s = 0;             // no process: i+1's process_start - i's last_time
  double restart_s = 0;          // i+1's ready_time - its process_start
  double checkpoint_load_s = 0;  // i+1's (part of restart_s)
  double rendezvous_s = 0;       // i+1's (part of restart_s)
  double first_step_s = 0;       // i+1's first_step_time - its process_start; 0 if it ran no step
  int64_t steps_rerun = 0;       // max(0, i's last_step - i+1's resumed_step)
  double rerun_s = 0;            // step_s i spent on the steps after i+1's resumed_step
};

struct Summary {
  double wall_s = 0;         // the last event's time - the first process_start
  double useful_step_s = 0;  // step time of steps no later attempt re-ran
  double goodput = 0;        // useful_step_s / wall_s, in [0, 1]; 0 when wall_s is 0
  int64_t useful_steps = 0;  // the steps counted in useful_step_s
  int64_t steps_rerun = 0;   // step events whose work a later attempt redid
  int64_t final_step = 0;    // the last attempt's last_step
  // Lines that were not a ledger event (not JSON, no "event"/"time", an event
  // before any start). Blank lines, a torn last line (no newline: the writer
  // was cut off mid-write) and unknown event kinds are ignored uncounted.
  int64_t skipped_lines = 0;
  std::vector<Attempt> attempts;  // in ledger order
  std::vector<Gap> gaps;          // attempts.size() - 1 of them
};

// Summarizes a whole ledger. A step of attempt i is re-run work when a later
// attempt resumed from an older step (step > min resumed_step of attempts
// i+1..): its time counts as lost, not useful. Exact because every step is
// logged. Errors: NotFoundError when the ledger holds no "start" event (empty,
// only blank or unparsable lines): the job has not started training yet.
StatusOr<Summary> Summarize(std::string_view ledger_text);

// The summary with stable snake_case keys: wall_s, useful_step_s, goodput,
// useful_steps, steps_rerun, final_step, skipped_lines, attempts[] (the
// Attempt fields; first_step_time and status null when absent) and gaps[]
// (the Gap fields).
nlohmann::json ToJson(const Summary& s);

// A few lines for people (hpod describe-job-goodput): the totals, one row per
// attempt and one line per gap.
std::string FormatText(const Summary& s);

}  // namespace hpod::goodput
