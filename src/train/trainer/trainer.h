// The training loop of hpod-train: data → forward/backward (with gradient
// accumulation) → clip → AdamW → progress line, TensorBoard, metrics → async
// checkpoint; resume from the newest complete checkpoint; a JSON summary.
// One process, or one rank of a distributed run launched by srun (or with
// --rank/--world-size/--master-addr): data parallel with the optimizer state
// sharded across ranks (ZeRO-1; run.h), equal to one process with the same
// global batch.
//
// Exact resume: everything a step depends on is either in the checkpoint
// (weights, AdamW moments and step, global step, consumed_samples) or a pure
// function of options recorded there (the data order is a function of seed and
// sample index, the learning rate of the step). So a run resumed from step k
// computes, bit for bit, the losses the uninterrupted run computed after k,
// for the same seed and thread count.
//
// Thread contract: Run() is called once from one thread. RequestStop() and
// RequestCheckpoint() may be called from any thread (they only set atomics;
// hpod-train calls them from its signal watcher thread, never from a signal
// handler: see hpod/base/signals.h for why hpod-train has none).
#pragma once

#include <atomic>
#include <cstdio>
#include <string>

#include "hpod/base/status.h"
#include "hpod/train/trainer/options.h"

namespace hpod::train {

struct Run;  // run.h

// Exit codes of hpod-train.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
// Stopped by SIGTERM/SIGINT after a final checkpoint: 128 + signal, as a
// shell reports it, so Slurm and auto-resume see an interrupted step.
inline constexpr int kExitSignalBase = 128;

class Trainer {
 public:
  explicit Trainer(TrainOptions options) : options_(std::move(options)) {}

  // Trains to max_steps or until a stop is requested. Returns the exit code;
  // errors are printed to `err` as one line.
  int Run(std::FILE* out, std::FILE* err);
  // Prints the plan (--dry-run) without allocating the model's arenas.
  Status PrintPlan(std::FILE* out);

  // Asks the loop to stop: it finishes the step in progress (or drops a
  // partial gradient accumulation), saves a final checkpoint and Run()
  // returns 128 + `signal`. Also before Run(): Run() then sets up (and
  // resumes), runs no step and exits the same way.
  void RequestStop(int signal) { stop_signal_.store(signal); }
  // Asks for a checkpoint after the step in progress (asynchronous, like an
  // interval save), training goes on. `signal` names the request in the log.
  // Requests before a save starts count as one.
  void RequestCheckpoint(int signal) { checkpoint_signal_.store(signal); }

 private:
  // `r` outlives RunImpl so that a failing rank can still tell the others'
  // checkpoint commits to give up before its checkpointer shuts down (Run).
  Status RunImpl(struct Run& r, std::FILE* out, std::FILE* err);

  TrainOptions options_;
  // Errors and warnings start with this: "hpod-train", or in a distributed
  // run "hpod-train[rank 2]" (every rank reports its own errors).
  std::string log_prefix_ = "hpod-train";
  std::atomic<int> stop_signal_{0};
  std::atomic<int> checkpoint_signal_{0};  // 0: no checkpoint requested
};

}  // namespace hpod::train
