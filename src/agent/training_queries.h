#pragma once

// Answers hpodd's `training_query` messages (PROTOCOL.md) off the channel's
// reader thread: reading a run's event files can take a while on a busy /fsx,
// and heartbeats, commands and sessions must not wait behind it. One worker
// answers one query at a time (they are reads of one shared filesystem; running
// them side by side would only make each slower), and at most `max_queued` wait
// for it: more are refused at once with RESOURCE_EXHAUSTED, so a flood of
// console refreshes costs neither memory nor minutes of stale answers.
//
// A read of a hung /fsx (an NFS or Lustre server gone) blocks in the kernel for
// as long as the mount does, and no option bounds that. So the worker owns only
// state shared with the runner (as HostSampler's thread does): Shutdown waits
// `shutdown_grace` for a query being answered, then abandons the worker (detached;
// it exits when its read returns, and its answer is dropped), so the agent always
// stops.
//
// Thread contract: thread-safe; `reply` is called from the worker thread (and
// from Submit's and Shutdown's callers for refusals) and must be thread-safe.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "hpod/agent/training_metrics.h"
#include "hpod/api/agent_protocol_training.h"

namespace hpod::agent {

// What answers one query (AnswerTrainingQuery; a test's stands in for a hung /fsx).
using TrainingAnswerFn = std::function<api::agentproto::TrainingResult(
    const TrainingMetricsOptions&, const api::agentproto::TrainingQuery&)>;

struct TrainingQueryRunnerOptions {
  // Queries waiting beside the one being answered; more are refused.
  size_t max_queued = 4;
  // How long Shutdown waits for the query being answered before it abandons it.
  std::chrono::milliseconds shutdown_grace{2000};
  // Null: AnswerTrainingQuery.
  TrainingAnswerFn answer;
};

class TrainingQueryRunner {
 public:
  // `reply` receives each `training_result` message. Starts the worker.
  TrainingQueryRunner(TrainingMetricsOptions options, std::function<void(nlohmann::json)> reply,
                      TrainingQueryRunnerOptions runner_options = {});
  // Shutdown().
  ~TrainingQueryRunner();
  TrainingQueryRunner(const TrainingQueryRunner&) = delete;
  TrainingQueryRunner& operator=(const TrainingQueryRunner&) = delete;

  // Queues a `training_query` message (never blocks). A malformed one is answered
  // at once with INVALID_ARGUMENT, under whatever id it had, so that hpodd's
  // caller is not left waiting for its timeout.
  void Submit(const nlohmann::json& message);

  // Stops taking queries, answers the waiting ones with UNAVAILABLE, and waits up
  // to `shutdown_grace` for the one being answered; a worker still reading then
  // is detached and never calls `reply`. Returns within about the grace (plus a
  // reply being sent), and `reply` is never called after it returns. Not from
  // `reply`.
  void Shutdown();

 private:
  struct Shared;
  static void Work(std::shared_ptr<Shared> s);

  const std::shared_ptr<Shared> shared_;
  std::mutex join_mu_;  // one Shutdown at a time
  std::thread worker_;  // last: started once the members above exist
};

}  // namespace hpod::agent
