// hpod-train: flags / train.json → TrainOptions → Trainer::Run.
// Exit codes: 0 done, 1 error (one line on stderr), 2 bad usage,
// 128+N stopped by signal N (SIGTERM, SIGINT) after a final checkpoint.
// SIGUSR1 saves a checkpoint after the current step and training goes on
// (`scancel --signal=USR1 <job>`, or sbatch --signal=USR1@<seconds>).

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "hpod/base/clock.h"
#include "hpod/base/signals.h"
#include "hpod/train/trainer/options.h"
#include "hpod/train/trainer/trainer.h"

// No signal handlers in hpod-train, ever: oneDNN 2.6.3's JIT GEMM runs with
// rsp pointing into the heap (uxlfoundation/oneDNN#4845), so a handler's frame
// corrupts malloc's chunks and the run aborts without its final checkpoint.
// The signals are blocked in every thread, from before any library constructor
// (a library may start threads while it loads), and read by one watcher thread.
HPOD_BLOCK_SIGNALS_AT_LOAD(SIGTERM, SIGINT, SIGUSR1)

namespace {

std::atomic<int> g_stops{0};

// Runs on the watcher thread. The first stop signal lets the loop finish its
// step, save and exit; a second (an impatient Ctrl-C) exits at once, and the
// newest complete checkpoint is still on disk. `trainer` is null for
// --dry-run: nothing to save, so a stop ends the process at once.
void OnSignal(hpod::train::Trainer* trainer, int sig) {
  if (sig == SIGUSR1) {
    if (trainer != nullptr) trainer->RequestCheckpoint(sig);
    return;
  }
  if (g_stops.fetch_add(1) > 0 || trainer == nullptr) {
    if (trainer != nullptr) {
      std::fprintf(stderr, "hpod-train: second %s: exiting now, without a final checkpoint\n",
                   hpod::SignalName(sig).c_str());
    }
    _exit(hpod::train::kExitSignalBase + sig);
  }
  trainer->RequestStop(sig);
}

}  // namespace

int main(int argc, char** argv) {
  // First: the goodput ledger counts start-up (libraries, data, rendezvous,
  // restore) from here as time lost to a restart.
  const double process_start = hpod::RealClock::Get().NowEpochSeconds();
  // Writes to a closed pipe fail with EPIPE instead of ending the run.
  signal(SIGPIPE, SIG_IGN);
  auto parsed = hpod::train::ParseArgs(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "hpod-train: %s\n", parsed.status().message().c_str());
    return hpod::train::kExitUsage;
  }
  if (parsed->help) {
    std::fputs(parsed->help_text.c_str(), stdout);
    return hpod::train::kExitOk;
  }
  parsed->options.process_start_time = process_start;
  const bool dry_run = parsed->options.dry_run;
  hpod::train::Trainer trainer(std::move(parsed->options));
  // Started only now, so that a signal that arrived during start-up (blocked,
  // pending) reaches the trainer: Run() then stops cleanly before its first step.
  hpod::train::Trainer* target = dry_run ? nullptr : &trainer;
  auto watcher = hpod::SignalWatcher::Start({SIGTERM, SIGINT, SIGUSR1},
                                            [target](int sig) { OnSignal(target, sig); });
  if (!watcher.ok()) {
    std::fprintf(stderr, "hpod-train: %s\n", watcher.status().message().c_str());
    return hpod::train::kExitError;
  }
  if (dry_run) {
    auto s = trainer.PrintPlan(stdout);
    if (!s.ok()) {
      std::fprintf(stderr, "hpod-train: %s\n", s.message().c_str());
      return hpod::train::kExitUsage;
    }
    return hpod::train::kExitOk;
  }
  return trainer.Run(stdout, stderr);
}
