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
// every node sees the same files; a node that answers FAILED_PRECONDITION (no
// /fsx mounted there) is passed over for the next, at most `max_nodes` asked,
// all within the one `timeout`. Both operations are read-only: any key may call
// them (a user may read /fsx through a session anyway).
//
// One query at a time per TrainingApi (hpodd has one): the caller's handler
// thread waits for the agent, and hpodd has only a few of them, so two slow
// queries (a hung /fsx, a busy agent) would otherwise stall every API call,
// /metrics scrape and session upgrade. A call while another is in flight is
// refused at once with ThrottlingException (kResourceExhausted), which the AWS
// SDKs, the hpod CLI and the console retry with backoff.
//
// Errors: an unknown cluster is ResourceNotFound; a path the agent refuses (outside
// /fsx, missing, not a run) is a ValidationException with the agent's message; no
// Running node with a connected agent, or none that has /fsx, is a
// ConflictException saying so; an agent that does not answer in time, or
// disconnects, is ServiceUnavailable (retry); another query in flight is
// ThrottlingException (retry).
//
// Thread contract: safe for concurrent calls (at most one waits for an agent,
// bounded by the timeout; the others return at once).

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "hpod/base/status.h"
#include "hpod/controlplane/agent_service.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

struct TrainingApiOptions {
  // How long one query may hold its handler thread, all nodes asked together. An
  // agent reads at most 64 MiB of a run per query, a second or so on a healthy
  // /fsx; beyond this the filesystem is in trouble and the caller retries.
  std::chrono::milliseconds timeout{5000};
  // Nodes asked at most, when the first answer FAILED_PRECONDITION.
  int max_nodes = 3;
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
  std::atomic<bool> in_flight_{false};  // a query is waiting for an agent
};

}  // namespace hpod::controlplane
