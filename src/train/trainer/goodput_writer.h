// hpod-train's side of the goodput ledger: rank 0 appends one JSON line per
// event (start, step, checkpoint, end; hpod/base/goodput.h has the format and
// reads it back) to a file that outlives the process, so goodput can be
// measured across Slurm requeues and auto-resume retries of one job.
//
// Each line goes out in one write(2) on an O_APPEND descriptor, so lines of
// processes that overlap (a retry starting while the old one still exits) do
// not interleave, and a process killed with -9 leaves whole lines only. The
// ledger is a measurement: a file that cannot be opened or written costs one
// warning on stderr and the ledger, never the training run.
//
// Thread contract: one thread (the training loop) uses a GoodputWriter.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "hpod/base/clock.h"
#include "hpod/base/goodput.h"
#include "hpod/base/status.h"
#include "hpod/train/ckpt/checkpoint.h"
#include "hpod/train/trainer/options.h"

namespace hpod::train {

// The ledger for these options: --goodput-file ("none": no ledger), else
// $HPOD_GOODPUT_FILE when set and not empty, else <checkpoint_dir>/goodput.jsonl
// when there is a checkpoint directory; "" means no ledger.
std::string GoodputLedgerPath(const TrainOptions& o);

// What the start event records about this process.
struct GoodputStart {
  double process_start = 0;  // Unix seconds when main() began
  std::string job_id;        // $SLURM_JOB_ID, "" outside Slurm
  int restart = 0;           // $SLURM_RESTART_COUNT: requeues of the job
  int attempt = 0;           // $HPOD_AUTO_RESUME_ATTEMPT: retries after a node failure
  int world_size = 1;
  int64_t resumed_step = 0;      // the checkpoint loaded; 0 for a fresh start
  double checkpoint_load_s = 0;  // finding, verifying and loading it
  double rendezvous_s = 0;       // joining the other ranks
};

// job_id, restart and attempt from the environment; the rest left at defaults.
GoodputStart GoodputStartFromEnv();

enum class GoodputEnd { kCompleted, kInterrupted, kFailed };
// The ledger's spelling: "completed", "interrupted", "failed".
std::string_view GoodputEndName(GoodputEnd end);

class GoodputWriter {
 public:
  // Opens `path` for appending (created 0644; its directory must exist). On
  // failure prints one warning line to `err` and returns null. When the file
  // does not end in a newline (a writer cut off mid-line, e.g. by a full disk),
  // one is added first, so the torn line stays a line of its own.
  static std::unique_ptr<GoodputWriter> Open(const std::string& path, const Clock& clock,
                                             std::FILE* err);
  ~GoodputWriter();
  GoodputWriter(const GoodputWriter&) = delete;
  GoodputWriter& operator=(const GoodputWriter&) = delete;

  // Once, when training is about to take its first step.
  void Start(const GoodputStart& s);
  // After each optimizer step: `step` is the step just done, `step_s` its wall
  // time (micro-batches, collectives, update).
  void Step(int64_t step, double step_s);
  // After a checkpoint became durable; `save_s` from snapshot to durable.
  void Checkpoint(int64_t step, double save_s);
  // When the process ends. Once: later calls are no-ops, so a failure path may
  // call it after a normal end. Nothing before Start().
  void End(int64_t step, GoodputEnd end);

  // The trainer's saves are asynchronous: it counts each save it handed over
  // (SaveStarted) or that failed in the background (SaveFailed: Save()
  // returned the previous one's error), and PollSaves writes a checkpoint
  // event for each save `checkpointer` completed since the last poll. It reads
  // the checkpointer only while a started save is unreported.
  void SaveStarted() { saves_started_ += 1; }
  void SaveFailed() { saves_started_ -= 1; }
  void PollSaves(const ckpt::AsyncCheckpointer& checkpointer);

  // Reads the whole ledger back (every attempt of the job, not only this
  // process's) and summarizes it; errors are ReadFile's or goodput::Summarize's.
  StatusOr<goodput::Summary> Summarize() const;

  const std::string& path() const { return path_; }
  // False once a write failed (warned once; nothing more is written).
  bool healthy() const { return fd_ >= 0; }

 private:
  GoodputWriter(std::string path, int fd, const Clock& clock, std::FILE* err)
      : path_(std::move(path)), fd_(fd), clock_(clock), err_(err) {}
  // Writes a line (ending in '\n') in one write(2); on failure warns and closes.
  void Append(const char* line, int n);

  const std::string path_;
  int fd_;
  const Clock& clock_;
  std::FILE* const err_;
  bool started_ = false;
  bool ended_ = false;
  int64_t saves_started_ = 0;
  size_t saves_reported_ = 0;  // entries of checkpointer.completed() written
};

}  // namespace hpod::train
