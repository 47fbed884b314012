#pragma once

// A keyed work queue in the style of client-go's: a key is queued at most once,
// is processed by at most one worker at a time, and a key added while it is being
// processed is processed again afterwards. Failed keys come back after an
// exponential backoff; keys can also be scheduled for later (AddAfter), which is
// how reconcilers poll what they wait on.
//
// Thread contract: safe for concurrent use.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/base/thread_annotations.h"

namespace hpod::controlplane {

struct WorkQueueOptions {
  int workers = 2;
  std::chrono::milliseconds base_backoff{100};
  std::chrono::milliseconds max_backoff{30000};
};

class WorkQueue {
 public:
  // What a worker does with a key. OK: done. Error: retried with backoff.
  // Returning a delay > 0 with OK asks to look again after that long.
  struct Result {
    Status status;
    std::chrono::milliseconds requeue_after{0};
  };
  using Processor = std::function<Result(const std::string& key)>;

  WorkQueue(const Clock& clock, WorkQueueOptions options, Processor processor);
  ~WorkQueue();  // Stop()

  void Start();
  // Finishes the keys being processed, drops the rest, joins the workers.
  void Stop();

  void Add(const std::string& key);
  void AddAfter(const std::string& key, std::chrono::milliseconds delay);

  // For tests: processes due keys on the calling thread until none is due.
  // Must not be used together with Start().
  int RunUntilIdle();
  // Keys queued or delayed (for tests and metrics).
  size_t Pending() const;

 private:
  bool PopDue(std::string* key) REQUIRES(mu_);
  // Schedules `key` for `at`, unless it is scheduled for then or earlier already:
  // a key has at most one delayed entry. A reconciler that polls asks again after
  // every pass, wakes included; kept each, the entries of a 10,000-node creation's
  // thousands of wakes ran the health pass 40-70 times a second for good.
  void Delay(const std::string& key, std::chrono::steady_clock::time_point at) REQUIRES(mu_);
  void Process(const std::string& key) EXCLUDES(mu_);
  void WorkerLoop() EXCLUDES(mu_);

  const Clock& clock_;
  const WorkQueueOptions options_;
  const Processor processor_;

  mutable Mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> queued_ GUARDED_BY(mu_);
  std::vector<std::string> order_ GUARDED_BY(mu_);  // FIFO of queued_
  std::set<std::string> active_ GUARDED_BY(mu_);
  std::set<std::string> dirty_ GUARDED_BY(mu_);  // re-added while active
  std::multimap<std::chrono::steady_clock::time_point, std::string> delayed_ GUARDED_BY(mu_);
  // Each delayed key's one entry in delayed_, by key.
  std::map<std::string, std::chrono::steady_clock::time_point> delayed_at_ GUARDED_BY(mu_);
  std::map<std::string, int> failures_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// Shares one queue between the reconcilers, one per concern: a key
// "<prefix><id>" ("health/<cluster id>") goes to the processor registered for its
// prefix; any other key goes to the default one (the cluster pass, whose keys are
// bare cluster ids, as every handler enqueues them). Prefixes must not be
// prefixes of one another.
//
// Thread contract: Route() is called before the queue starts; afterwards the
// router is immutable and operator() may run on every worker.
class KeyRouter {
 public:
  explicit KeyRouter(WorkQueue::Processor default_processor)
      : default_(std::move(default_processor)) {}
  void Route(std::string prefix, WorkQueue::Processor processor);
  WorkQueue::Result operator()(const std::string& key) const;

 private:
  WorkQueue::Processor default_;
  std::vector<std::pair<std::string, WorkQueue::Processor>> routes_;
};

}  // namespace hpod::controlplane
