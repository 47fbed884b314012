#pragma once

// Answers hpodd's `training_query` messages (PROTOCOL.md) off the channel's
// reader thread: reading a run's event files can take a while on a busy /fsx,
// and heartbeats, commands and sessions must not wait behind it. One worker
// answers one query at a time (they are reads of one shared filesystem; running
// them side by side would only make each slower), and at most `max_queued` wait
// for it: more are refused at once with RESOURCE_EXHAUSTED, so a flood of
// console refreshes costs neither memory nor minutes of stale answers.
//
// Thread contract: thread-safe; `reply` is called from the worker thread (and
// from Submit's caller for refusals) and must be thread-safe.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "hpod/agent/training_metrics.h"
#include "hpod/api/agent_protocol_training.h"
#include "hpod/base/thread_annotations.h"

namespace hpod::agent {

class TrainingQueryRunner {
 public:
  // `reply` receives each `training_result` message. Starts the worker.
  TrainingQueryRunner(TrainingMetricsOptions options, std::function<void(nlohmann::json)> reply,
                      size_t max_queued = 4);
  // Shutdown().
  ~TrainingQueryRunner();
  TrainingQueryRunner(const TrainingQueryRunner&) = delete;
  TrainingQueryRunner& operator=(const TrainingQueryRunner&) = delete;

  // Queues a `training_query` message (never blocks). A malformed one is answered
  // at once with INVALID_ARGUMENT, under whatever id it had, so that hpodd's
  // caller is not left waiting for its timeout.
  void Submit(const nlohmann::json& message);

  // Stops taking queries, answers the waiting ones with UNAVAILABLE and waits for
  // the one being answered (its reads are bounded by the options' byte limit), so
  // that `reply` is never called after Shutdown returns. Not from `reply`.
  void Shutdown();

 private:
  void Work();

  const TrainingMetricsOptions options_;
  const std::function<void(nlohmann::json)> reply_;
  const size_t max_queued_;
  Mutex mu_;
  std::condition_variable cv_;
  std::deque<api::agentproto::TrainingQuery> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::mutex join_mu_;  // one joiner at a time
  std::thread worker_;  // last: started once the members above exist
};

}  // namespace hpod::agent
