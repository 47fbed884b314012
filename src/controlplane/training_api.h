#pragma once

// hpod's read operations on the training runs kept on a cluster's shared /fsx
// (src/api/hpod_extensions_model.json), for the console's training plots and
// `hpod list-training-runs` / `hpod get-training-metrics`:
//   HpodListTrainingRuns   {ClusterName} → {TrainingRuns: [{Path, Kind,
//                          LastModifiedTime, SizeBytes}], NodeId, Warnings}: the
//                          TensorBoard log directories and metrics JSONL files
//                          under /fsx, newest first;
//   HpodGetTrainingMetrics {ClusterName, Path, MaxPoints?} → {Series: [{Tag,
//                          Points: [{Step, WallTime, Value}]}], NodeId, Warnings}:
//                          one run's scalars, each series downsampled to MaxPoints
//                          (default 1000).
// hpodd does not see /fsx: the query goes as a `training_query` to the agent of
// one node of the cluster (src/agent/training_metrics.h reads the files there),
// which must be Running with its agent connected; the controller group's nodes
// are asked first (they exist in every cluster with Slurm and carry no training
// load), then the other groups' in name and ordinal order. /fsx is shared, so
// every node sees the same files. Both operations are read-only: any key may
// call them (a user may read /fsx through a session anyway).
//
// Errors: an unknown cluster is ResourceNotFound; a path the agent refuses (outside
// /fsx, missing, not a run) is a ValidationException with the agent's message; no
// Running node with a connected agent is a ConflictException saying so; an agent
// that does not answer in time, or disconnects, is ServiceUnavailable (retry).
//
// Thread contract: safe for concurrent calls (each blocks its own handler thread
// while the agent answers, bounded by the timeout).

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "hpod/base/status.h"
#include "hpod/controlplane/agent_service.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

struct TrainingApiOptions {
  // How long one agent may take to answer (reading a large run on a busy /fsx);
  // inside the CLI's default 60 s read timeout.
  std::chrono::milliseconds timeout{20000};
};

class TrainingApi {
 public:
  // `agents` may be null (no provider with agents): the operations then fail
  // clearly. Both are borrowed.
  TrainingApi(store::Store& store, AgentService* agents, TrainingApiOptions options = {});

  static bool Handles(const std::string& operation);
  StatusOr<nlohmann::ordered_json> Call(const std::string& operation,
                                        const nlohmann::json& request);

 private:
  struct Answer {
    std::string node_id;
    api::agentproto::TrainingResult result;  // ok
  };
  // Sends `query` to the first node that can take it (see above).
  StatusOr<Answer> Ask(const std::string& cluster_name, api::agentproto::TrainingQuery query);

  store::Store& store_;
  AgentService* const agents_;
  const TrainingApiOptions options_;
};

}  // namespace hpod::controlplane
