#include "hpod/agent/training_queries.h"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <deque>
#include <string>
#include <utility>

#include "hpod/base/thread_annotations.h"

namespace hpod::agent {
namespace {

namespace proto = api::agentproto;
using Json = nlohmann::json;

// hpodd reads channel frames up to 8 MiB; the options' point limits keep answers
// far below, so this only guards against tags or paths of absurd length.
constexpr size_t kMaxAnswerBytes = 7 << 20;

}  // namespace

// What the worker uses; it holds a reference of its own, so a worker abandoned
// by Shutdown never touches a destroyed runner.
struct TrainingQueryRunner::Shared {
  TrainingMetricsOptions options;
  std::function<void(Json)> reply;
  TrainingQueryRunnerOptions runner;

  Mutex mu;
  std::condition_variable cv;
  std::deque<proto::TrainingQuery> queue GUARDED_BY(mu);
  bool stopping GUARDED_BY(mu) = false;
  bool busy GUARDED_BY(mu) = false;       // a query is being answered (it may be stuck)
  bool replying GUARDED_BY(mu) = false;   // its answer is being handed to `reply`
  bool abandoned GUARDED_BY(mu) = false;  // Shutdown gave up on the worker: no reply
};

TrainingQueryRunner::TrainingQueryRunner(TrainingMetricsOptions options,
                                         std::function<void(Json)> reply,
                                         TrainingQueryRunnerOptions runner_options)
    : shared_(std::make_shared<Shared>()) {
  shared_->options = std::move(options);
  shared_->reply = std::move(reply);
  shared_->runner = std::move(runner_options);
  if (!shared_->runner.answer) shared_->runner.answer = AnswerTrainingQuery;
  worker_ = std::thread(&TrainingQueryRunner::Work, shared_);
}

TrainingQueryRunner::~TrainingQueryRunner() { Shutdown(); }

void TrainingQueryRunner::Submit(const Json& message) {
  auto query = proto::TrainingQuery::FromJson(message);
  if (!query.ok()) {
    std::string id;
    if (auto it = message.find("id"); it != message.end() && it->is_string()) id = *it;
    shared_->reply(proto::TrainingResult::Failed(id, query.status()).ToJson());
    return;
  }
  {
    MutexLock lock(shared_->mu);
    if (!shared_->stopping && shared_->queue.size() < shared_->runner.max_queued) {
      shared_->queue.push_back(std::move(*query));
      shared_->cv.notify_all();
      return;
    }
  }
  shared_->reply(proto::TrainingResult::Failed(
                     query->id, ResourceExhaustedError("the agent is busy reading training "
                                                       "metrics (or stopping); try again"))
                     .ToJson());
}

void TrainingQueryRunner::Shutdown() {
  std::lock_guard<std::mutex> join_lock(join_mu_);
  Shared& s = *shared_;
  std::deque<proto::TrainingQuery> dropped;
  {
    MutexLock lock(s.mu);
    s.stopping = true;
    dropped.swap(s.queue);
    s.cv.notify_all();
  }
  for (const auto& q : dropped) {
    s.reply(
        proto::TrainingResult::Failed(q.id, UnavailableError("the agent is stopping")).ToJson());
  }
  if (!worker_.joinable()) return;
  bool stuck;
  {
    MutexLock lock(s.mu);
    lock.WaitFor(s.cv, s.runner.shutdown_grace, [&]() REQUIRES(s.mu) { return !s.busy; });
    // A reply being sent is short (the channel queues it): it is waited for, so
    // that none is sent after Shutdown returns.
    lock.Wait(s.cv, [&]() REQUIRES(s.mu) { return !s.replying; });
    stuck = s.busy;
    if (stuck) s.abandoned = true;
  }
  if (stuck) {
    spdlog::warn("a training query is still reading /fsx after {} ms; leaving it behind",
                 s.runner.shutdown_grace.count());
    worker_.detach();
  } else {
    worker_.join();
  }
}

void TrainingQueryRunner::Work(std::shared_ptr<Shared> s) {
  while (true) {
    proto::TrainingQuery query;
    {
      MutexLock lock(s->mu);
      lock.Wait(s->cv, [&]() REQUIRES(s->mu) { return s->stopping || !s->queue.empty(); });
      if (s->stopping) return;  // Shutdown answers the waiting ones
      query = std::move(s->queue.front());
      s->queue.pop_front();
      s->busy = true;
    }
    Json answer = s->runner.answer(s->options, query).ToJson();
    // error_handler replace: a tag or path that is not UTF-8 must not throw here.
    if (answer.dump(-1, ' ', false, Json::error_handler_t::replace).size() > kMaxAnswerBytes) {
      spdlog::warn("training query {} ({} {}): answer too large", query.id, query.op, query.path);
      answer = proto::TrainingResult::Failed(
                   query.id, ResourceExhaustedError("the answer would exceed 7 MiB; ask for "
                                                    "fewer points (MaxPoints)"))
                   .ToJson();
    }
    {
      MutexLock lock(s->mu);
      if (s->abandoned) return;  // the runner (and what `reply` talks to) may be gone
      s->replying = true;
    }
    s->reply(std::move(answer));
    MutexLock lock(s->mu);
    s->replying = false;
    s->busy = false;
    s->cv.notify_all();
  }
}

}  // namespace hpod::agent
