#pragma once

// The agent messages that read training metrics from the node's /fsx for hpodd's
// HpodListTrainingRuns and HpodGetTrainingMetrics (hpodd does not see /fsx; the
// agent reads TensorBoard event files and metrics JSONL there,
// src/agent/training_metrics.h). Same conventions as agent_protocol.h: `kType`,
// FromJson (kInvalidArgument naming the message and the field; unknown fields
// ignored; null reads as absent) and ToJson; registered in its kMessageTypes and
// documented in src/agent/PROTOCOL.md.
//
//   hpodd → agent   training_query  {id, op: "list_runs" | "read_run", path?, max_points?}
//   agent → hpodd   training_result {id, ok, code?, error?, runs?, series?, warnings?}
//
// Thread contract: plain values and pure functions.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::api::agentproto {

// One run found under /fsx (`training_result.runs[]`).
struct TrainingRun {
  std::string path;          // absolute: a directory (tensorboard) or a file (jsonl)
  std::string kind;          // "tensorboard" | "jsonl"
  double last_modified = 0;  // newest mtime of the run's files, epoch seconds
  int64_t size_bytes = 0;    // the run's files together

  static StatusOr<TrainingRun> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const TrainingRun&) const = default;
};

// One scalar at one step (`training_result.series[].points[]`).
struct TrainingPoint {
  int64_t step = 0;
  double wall_time = 0;  // epoch seconds; 0 when the file has none (hpod-train's JSONL)
  double value = 0;      // always finite (non-finite values are left out, with a warning)

  static StatusOr<TrainingPoint> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const TrainingPoint&) const = default;
};

// One tag's points in step order (`training_result.series[]`).
struct TrainingSeries {
  std::string tag;  // "train/loss" (TensorBoard) or "loss" (a JSONL key)
  std::vector<TrainingPoint> points;

  static StatusOr<TrainingSeries> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const TrainingSeries&) const = default;
};

// ---- hpodd → agent ----

struct TrainingQuery {
  static constexpr std::string_view kType = "training_query";
  static constexpr std::string_view kListRuns = "list_runs";
  static constexpr std::string_view kReadRun = "read_run";
  std::string id;  // "t-…", echoed by the result
  std::string op = std::string(kListRuns);
  std::string path;        // read_run only; left out of ToJson when empty
  int64_t max_points = 0;  // read_run only: per series; 0 = the agent's default; out when 0

  static StatusOr<TrainingQuery> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const TrainingQuery&) const = default;
};

// ---- agent → hpodd ----

struct TrainingResult {
  static constexpr std::string_view kType = "training_result";
  std::string id;
  bool ok = true;
  // When !ok: the Status code's name ("INVALID_ARGUMENT", base/status.h) and its
  // message; both left out of ToJson when ok.
  std::string code;
  std::string error;
  std::vector<TrainingRun> runs;       // list_runs; out when empty
  std::vector<TrainingSeries> series;  // read_run; out when empty
  std::vector<std::string> warnings;   // out when empty

  // The error as a Status (OkStatus when ok); an unknown code name reads as kInternal.
  Status ToStatus() const;
  // A failed result carrying `status` (precondition: !status.ok()).
  static TrainingResult Failed(std::string id, const Status& status);

  static StatusOr<TrainingResult> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  bool operator==(const TrainingResult&) const = default;
};

}  // namespace hpod::api::agentproto
