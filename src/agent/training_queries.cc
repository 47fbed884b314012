#include "hpod/agent/training_queries.h"

#include <spdlog/spdlog.h>

#include <string>
#include <utility>

namespace hpod::agent {
namespace {

namespace proto = api::agentproto;
using Json = nlohmann::json;

// hpodd reads channel frames up to 8 MiB; the options' point limits keep answers
// far below, so this only guards against tags or paths of absurd length.
constexpr size_t kMaxAnswerBytes = 7 << 20;

}  // namespace

TrainingQueryRunner::TrainingQueryRunner(TrainingMetricsOptions options,
                                         std::function<void(Json)> reply, size_t max_queued)
    : options_(std::move(options)), reply_(std::move(reply)), max_queued_(max_queued) {
  worker_ = std::thread([this] { Work(); });
}

TrainingQueryRunner::~TrainingQueryRunner() { Shutdown(); }

void TrainingQueryRunner::Submit(const Json& message) {
  auto query = proto::TrainingQuery::FromJson(message);
  if (!query.ok()) {
    std::string id;
    if (auto it = message.find("id"); it != message.end() && it->is_string()) id = *it;
    reply_(proto::TrainingResult::Failed(id, query.status()).ToJson());
    return;
  }
  {
    MutexLock lock(mu_);
    if (!stopping_ && queue_.size() < max_queued_) {
      queue_.push_back(std::move(*query));
      cv_.notify_one();
      return;
    }
  }
  reply_(proto::TrainingResult::Failed(
             query->id, ResourceExhaustedError("the agent is busy reading training metrics "
                                               "(or stopping); try again"))
             .ToJson());
}

void TrainingQueryRunner::Shutdown() {
  std::deque<proto::TrainingQuery> dropped;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    dropped.swap(queue_);
    cv_.notify_all();
  }
  for (const auto& q : dropped) {
    reply_(proto::TrainingResult::Failed(q.id, UnavailableError("the agent is stopping")).ToJson());
  }
  std::lock_guard<std::mutex> lock(join_mu_);
  if (worker_.joinable()) worker_.join();
}

void TrainingQueryRunner::Work() {
  while (true) {
    proto::TrainingQuery query;
    {
      MutexLock lock(mu_);
      lock.Wait(cv_, [&]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      query = std::move(queue_.front());
      queue_.pop_front();
    }
    Json answer = AnswerTrainingQuery(options_, query).ToJson();
    // error_handler replace: a tag or path that is not UTF-8 must not throw here.
    if (answer.dump(-1, ' ', false, Json::error_handler_t::replace).size() > kMaxAnswerBytes) {
      spdlog::warn("training query {} ({} {}): answer too large", query.id, query.op, query.path);
      answer = proto::TrainingResult::Failed(
                   query.id, ResourceExhaustedError("the answer would exceed 7 MiB; ask for "
                                                    "fewer points (MaxPoints)"))
                   .ToJson();
    }
    reply_(std::move(answer));
  }
}

}  // namespace hpod::agent
