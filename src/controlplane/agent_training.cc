// AgentService: training queries - hpodd asks a node's agent for the training
// metrics under its /fsx (`training_query`) and waits for the `training_result`,
// as RunCommand waits for a `command_result`.
#include <spdlog/spdlog.h>

#include <vector>

#include "hpod/base/crypto.h"
#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/agent_service_internal.h"

namespace hpod::controlplane {

namespace proto = api::agentproto;
using nlohmann::json;

StatusOr<proto::TrainingResult> AgentService::QueryTraining(const std::string& instance_id,
                                                            proto::TrainingQuery query,
                                                            std::chrono::milliseconds timeout) {
  auto pending = std::make_shared<PendingTraining>();
  pending->instance_id = instance_id;
  query.id = "t-" + RandomString(16, "0123456789abcdef");
  std::shared_ptr<Channel> ch;
  {
    MutexLock lock(mu_);
    auto it = channels_.find(instance_id);
    if (it == channels_.end()) {
      return FailedPreconditionError("the agent of node " + instance_id + " is not connected");
    }
    ch = it->second;
    pending->serial = ch->serial;
    training_[query.id] = pending;
  }
  auto future = pending->result.get_future();
  const bool sent = ch->socket->Send(query.ToJson().dump(), false);
  const bool ready = sent && future.wait_for(timeout) == std::future_status::ready;
  {
    MutexLock lock(mu_);
    training_.erase(query.id);
  }
  if (!sent) {
    // The connection is closing (its close callback has not run yet): the same
    // as a disconnect before the answer, not a timeout.
    return UnavailableError("the agent of " + instance_id +
                            " disconnected before the query could be sent");
  }
  if (!ready) {
    return DeadlineExceededError("no answer from the agent of " + instance_id + " within " +
                                 std::to_string(timeout.count()) + " ms");
  }
  return future.get();
}

void AgentService::HandleTrainingResult(const std::shared_ptr<Channel>& ch, const json& msg) {
  StatusOr<proto::TrainingResult> result = InternalError("");
  std::string id;
  if (auto parsed = Parse<proto::TrainingResult>(ch, msg)) {
    id = parsed->id;
    result = std::move(*parsed);
  } else if (auto it = msg.find("id"); it != msg.end() && it->is_string()) {
    // The caller waiting for it learns now, not at its timeout.
    id = it->get<std::string>();
    result = InternalError("the agent of " + ch->instance_id + " sent a malformed training_result");
  } else {
    return;
  }
  MutexLock lock(mu_);
  auto it = training_.find(id);
  // Only the connection it was asked on may answer it.
  if (it == training_.end() || it->second->done || it->second->instance_id != ch->instance_id) {
    return;
  }
  it->second->done = true;
  it->second->result.set_value(std::move(result));
}

void AgentService::FailTrainingQueries(const std::shared_ptr<Channel>& ch) {
  MutexLock lock(mu_);
  for (auto& [id, pending] : training_) {
    if (pending->done || pending->instance_id != ch->instance_id || pending->serial != ch->serial) {
      continue;
    }
    pending->done = true;
    pending->result.set_value(
        UnavailableError("the agent of " + ch->instance_id + " disconnected before it answered"));
  }
}

}  // namespace hpod::controlplane
