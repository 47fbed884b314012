#pragma once

// Reads the training metrics users keep on the cluster's shared /fsx, for hpodd's
// HpodListTrainingRuns and HpodGetTrainingMetrics (the `training_query` message,
// PROTOCOL.md): hpodd does not see /fsx, the node agent does.
//
// A run is either
//  - a directory holding TensorBoard event files (`events.out.tfevents.*`, kind
//    "tensorboard"), as `hpod-train --tensorboard-dir` and any TensorBoard writer
//    make them; or
//  - a `*.jsonl` file whose first line is a JSON object with a numeric "step"
//    (kind "jsonl"), as `hpod-train --metrics-jsonl` writes one line per step:
//    {"step", "loss", "lr", "grad_norm", "param_norm", "consumed_samples",
//     "step_time_s", "comm_s", "tokens_per_s", "checkpoint_stall_s"}.
//   Every other numeric key of a line becomes a series of that name, except
//   "wall_time" or "time", which are the point's wall time when present (hpod-train
//   writes none: its points have wall time 0). A malformed line is skipped with a
//   warning; a last line without its newline is being written and is left for
//   the next read.
//
// Event files are TFRecords, decoded by event_file.h: a torn last record (a
// writer mid-write, the normal case during training) ends a file without a word;
// a record whose checksum is wrong stops the reading of that file, with a warning.
//
// A run's points are in step order per tag. When steps go backwards (a run
// resumed from an older checkpoint re-runs steps, in a new event file or in the
// same JSONL), the later points replace the earlier ones from that step on, as
// TensorBoard's purge of orphaned data does. Files of one directory are merged
// oldest first, by the wall time of their first record.
//
// Memory and time are bounded per query: files are decoded in chunks straight
// into the series (no file is held whole), at most `max_read_bytes` of a run are
// read, at most `max_series` tags are kept (the first ones read; the values of
// further tags are dropped while reading, with a warning), and directory listings
// stop at `max_entries`. A run larger than the read budget is read from its
// newest end, so a live plot keeps moving: the newest event files that fit, the
// oldest of them from the middle (resynchronised at a record), or the last
// `max_read_bytes` of a JSONL file; a warning says what was skipped.
//
// Paths are opened component by component beneath the root's fd
// (confined_open.h), so nothing outside the root is reached even while paths
// under it change; symlinks that stay inside the root are followed by ReadRun,
// never by ListRuns.
//
// Thread contract: free functions; safe from any thread (they only read files).
// A call blocks as long as the filesystem does (a hung /fsx blocks in the
// kernel): TrainingQueryRunner runs them on a thread it can abandon.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/api/agent_protocol_training.h"
#include "hpod/base/status.h"

namespace hpod::agent {

struct TrainingMetricsOptions {
  // Every path listed or read lies inside this directory (after symlinks).
  std::string root = "/fsx";
  // ListRuns: directories this far below root are looked into (root is 0).
  int max_depth = 5;
  // ListRuns: directory entries looked at, in breadth-first order; then it stops
  // with a warning (a huge /fsx must not cost a walk of all of it). ReadRun: the
  // entries of a run's directory looked at.
  int64_t max_entries = 20000;
  // ReadRun: event files of one run read (the newest by name), with a warning.
  size_t max_event_files = 1000;
  // ListRuns: the newest this many runs are returned.
  size_t max_runs = 200;
  // ReadRun: points per series when the caller asks for 0, and the most it may ask.
  int64_t default_max_points = 1000;
  int64_t max_points_limit = 10000;
  // ReadRun: all series together; fewer per series when many tags would exceed it
  // (the answer is one channel frame, and hpodd reads frames up to 8 MiB).
  int64_t max_total_points = 50000;
  // ReadRun: tags kept while reading and answered (the first ones read).
  size_t max_series = 256;
  // ReadRun: bytes read from a run's files together, from the newest end; the
  // older rest is left, with a warning.
  int64_t max_read_bytes = int64_t{64} << 20;
  // A JSONL line longer than this is malformed; ListRuns reads at most this much
  // of a *.jsonl file to look at its first line.
  size_t max_line_bytes = 64 * 1024;
};

struct RunList {
  std::vector<api::agentproto::TrainingRun> runs;  // newest first, then by path
  std::vector<std::string> warnings;
};

struct RunMetrics {
  std::vector<api::agentproto::TrainingSeries> series;  // sorted by tag
  std::vector<std::string> warnings;
};

// The runs under options.root. kFailedPrecondition when root is not a directory
// (no /fsx on this node). Unreadable directories are skipped with a warning;
// symlinks are never followed.
StatusOr<RunList> ListRuns(const TrainingMetricsOptions& options);

// The scalar series of the run at `path` (absolute, or relative to root), each
// downsampled to `max_points` (0: default_max_points; more than max_points_limit
// is kInvalidArgument). kInvalidArgument when `path` is outside root (by its
// name or after resolving symlinks) or is neither a directory with event files
// nor a *.jsonl file (a FIFO or device is refused without blocking); kNotFound
// when it does not exist; kFailedPrecondition when root does not.
StatusOr<RunMetrics> ReadRun(const TrainingMetricsOptions& options, const std::string& path,
                             int64_t max_points);

// The answer to a `training_query`: ListRuns or ReadRun, or their error.
api::agentproto::TrainingResult AnswerTrainingQuery(const TrainingMetricsOptions& options,
                                                    const api::agentproto::TrainingQuery& query);

// ---- the parts, for tests ----

// Keeps at most `max_points` of `points`, evenly spaced by index and always the
// first and the last (max_points 1 keeps the last).
void Downsample(std::vector<api::agentproto::TrainingPoint>& points, size_t max_points);

}  // namespace hpod::agent
