// AgentService's intake of channel messages: parsed and heartbeats noted on the
// HTTP server's I/O thread, everything else queued on the connection's lane
// (agent_service.h says why) and dispatched by type there.

#include <spdlog/spdlog.h>

#include <utility>

#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/agent_service_internal.h"
#include "hpod/controlplane/events.h"

namespace hpod::controlplane {

using nlohmann::json;
namespace proto = api::agentproto;

namespace {

constexpr size_t kMaxLogChunk = 64 * 1024;
// The `error` frame's frame_type for a heartbeat read without its `host`.
constexpr char kBadHost[] = "heartbeat.host";

}  // namespace

void AgentService::Refuse(const std::shared_ptr<Channel>& ch, const std::string& frame_type,
                          const std::string& why) {
  spdlog::warn("agent of {} sent a frame hpodd refused: {}", ch->instance_id, why);
  bool first;
  {
    MutexLock lock(mu_);
    first = ch->refused_types(*this).insert(frame_type).second;
  }
  // One event per message type and connection: an agent repeating a bad heartbeat
  // every few seconds must not flood the cluster's events (the log has each one).
  // Written before the answer goes out, so whoever reads the answer finds the
  // event (the answer was sent first, and a reader could miss it).
  if (first) {
    Status s = store_.Write([&](store::WriteTx& tx) -> Status {
      HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, tx.GetCluster(ch->cluster_id));
      return RecordEvent(tx, clock_, c, NodeSubject(ch->group_name, ch->instance_id),
                         EventLevel::kWarn, "hpodd refused a frame from the hpod agent: " + why);
    });
    if (!s.ok()) spdlog::warn("malformed-frame event for {}: {}", ch->instance_id, s.ToString());
  }
  ch->socket->Send(proto::Error{frame_type, why}.ToJson().dump(), false);
}

void AgentService::Post(const std::shared_ptr<Channel>& ch, std::function<void()> task) {
  if (lanes_.Post(ch->lane, std::move(task), options_.max_queued_messages)) return;
  MutexLock lock(mu_);
  if (shut_down_) return;
  spdlog::warn("agent of {}: {} messages wait to be handled; closing its connection",
               ch->instance_id, options_.max_queued_messages);
  ch->socket->Close("hpodd is too far behind on this connection's messages");
}

void AgentService::OnChannelMessage(const std::shared_ptr<Channel>& ch,
                                    const http::WebSocketMessage& m) {
  // Binary frames and text that is not JSON are "not a JSON object" too.
  json msg = m.binary ? json() : json::parse(m.data, nullptr, false);
  auto type = proto::MessageType(msg);
  // Every frame shows the agent alive (AgentLiveness::last_read); a heartbeat's
  // is noted with the heartbeat, under the one lock. Parts of a large frame are
  // noted as they are read (on_progress).
  if (!type.ok() || *type != proto::Heartbeat::kType) NoteRead(ch);
  if (!type.ok()) {
    Post(ch, [this, ch, why = std::string(type.status().message())] { Refuse(ch, "", why); });
    return;
  }
  // Every field is checked by the structs' FromJson, which never throws; what is
  // left to throw (dumping text that is not UTF-8) costs the frame, not the reader.
  auto dispatch = [this, ch](const std::string& type, const json& msg) {
    try {
      Dispatch(ch, type, msg);
    } catch (const json::exception& e) {
      Refuse(ch, type, type + ": " + e.what());
    }
  };
  if (*type == proto::Heartbeat::kType) {
    try {
      HandleHeartbeat(ch, msg);
    } catch (const json::exception& e) {
      Post(ch, [this, ch, why = std::string(e.what())] {
        Refuse(ch, std::string(proto::Heartbeat::kType), "heartbeat: " + why);
      });
    }
    return;
  }
  Post(ch, [dispatch, type = *type, msg = std::move(msg)] { dispatch(type, msg); });
}

void AgentService::NoteRead(const std::shared_ptr<Channel>& ch) {
  MutexLock lock(mu_);
  ch->last_read = clock_.SteadyNow();
}

void AgentService::HandleHeartbeat(const std::shared_ptr<Channel>& ch, const json& msg) {
  auto parsed = proto::Heartbeat::FromJson(msg);
  if (!parsed.ok()) {
    NoteRead(ch);
    Post(ch, [this, ch, msg] { Parse<proto::Heartbeat>(ch, msg); });  // refuses it, in order
    return;
  }
  auto beat = std::make_shared<proto::Heartbeat>(std::move(*parsed));
  bool first_bad_host = false, more = false;
  {
    MutexLock lock(mu_);
    ch->last_heartbeat = clock_.SteadyNow();
    ch->last_read = ch->last_heartbeat;
    if (beat->time) {
      ch->clock_offsets.Add(*beat->time - clock_.NowEpochSeconds());
    }
    // Kept while an agent that stopped sending them is connected: the figures
    // are then its last, as a scrape of a node_exporter that hung would be.
    if (beat->host) {
      ch->host = AgentHostFigures::Of(*beat->host);
    }
    // Figures it sends but hpodd cannot read are not its last: none is shown.
    if (!beat->host_error.empty()) {
      ch->host.reset();
      first_bad_host = !std::exchange(ch->bad_host_refused, true);
    }
    // Heartbeats repeat the lifecycle and Slurm states: only a change is work.
    more = (beat->lifecycle && beat->lifecycle->state != ch->lifecycle_state) ||
           (beat->slurm && beat->slurm->ToJson() != ch->slurm_state(*this));
  }
  if (!first_bad_host && !more) return;
  Post(ch, [this, ch, beat, first_bad_host] {
    // The heartbeat counted; its figures are dropped. Said once per connection
    // (the agent sends the same bad figures every beat), under its own key, so
    // that a heartbeat refused whole is still reported.
    if (first_bad_host) {
      Refuse(ch, kBadHost,
             beat->host_error + " (the heartbeat counts; its host figures are dropped)");
    }
    if (beat->lifecycle) HandleLifecycle(ch, *beat->lifecycle);
    if (beat->slurm) HandleSlurmState(ch, *beat->slurm);
  });
}

void AgentService::Dispatch(const std::shared_ptr<Channel>& ch, const std::string& type,
                            const json& msg) {
  if (type == proto::Hello::kType) {
    HandleHello(ch, msg);
  } else if (type == proto::LifecycleReport::kType) {
    if (auto report = Parse<proto::LifecycleReport>(ch, msg)) HandleLifecycle(ch, report->status);
  } else if (type == proto::SlurmStateReport::kType) {
    if (auto report = Parse<proto::SlurmStateReport>(ch, msg)) HandleSlurmState(ch, report->status);
  } else if (type == proto::SlurmNodes::kType) {
    if (auto nodes = Parse<proto::SlurmNodes>(ch, msg)) HandleSlurmNodes(ch, *nodes);
  } else if (type == proto::ProvisioningParameters::kType) {
    if (auto p = Parse<proto::ProvisioningParameters>(ch, msg)) {
      HandleProvisioningParameters(ch, *p);
    }
  } else if (type == proto::GetConfig::kType) {
    if (Parse<proto::GetConfig>(ch, msg)) {
      ch->socket->SendShared(ConfigFor(ch), false);
    }
  } else if (type == proto::Log::kType) {
    auto log = Parse<proto::Log>(ch, msg);
    if (!log) return;
    if (log->data.size() > kMaxLogChunk) log->data.resize(kMaxLogChunk);
    Status s = logs_.Append(ch->cluster_id, ch->instance_id, log->stream, log->data);
    if (!s.ok()) spdlog::warn("log from {}: {}", ch->instance_id, s.ToString());
  } else if (type == proto::HealthReport::kType) {
    if (auto report = Parse<proto::HealthReport>(ch, msg)) HandleHealth(ch, *report);
  } else if (type == proto::CommandResult::kType) {
    HandleCommandResult(ch, msg);
  } else if (type == proto::JobQuery::kType) {
    if (auto q = Parse<proto::JobQuery>(ch, msg)) HandleJobQuery(ch, *q);
  } else if (type == proto::TrainingResult::kType) {
    HandleTrainingResult(ch, msg);
  } else if (type == proto::RenewCertificate::kType) {
    auto renew = Parse<proto::RenewCertificate>(ch, msg);
    if (!renew) return;
    if (ch->cert_serial.empty() || !certificate_hooks_.renew) {
      Refuse(ch, type, "renew_certificate: this channel is not authenticated by a certificate");
      return;
    }
    auto issued = certificate_hooks_.renew(ch->cert_serial, ch->cert_cn, renew->csr);
    if (!issued.ok()) {
      // Not Refuse: a refusal here is no malformed frame, and must reach the agent
      // every time it asks.
      ch->socket->Send(
          proto::Error{type, "renew_certificate: " + issued.status().message()}.ToJson().dump(),
          false);
      return;
    }
    ch->socket->Send(issued->ToJson().dump(), false);
  } else {
    // A newer agent's message: not malformed, just not ours to act on.
    spdlog::debug("agent of {} sent unknown frame type {}", ch->instance_id, type);
  }
}

void AgentService::HandleCommandResult(const std::shared_ptr<Channel>& ch, const json& msg) {
  CommandResult r;
  std::string id;
  auto result = Parse<proto::CommandResult>(ch, msg);
  if (result) {
    id = result->id;
    r.exit_code = static_cast<int>(result->exit_code);
    r.timed_out = result->timed_out;
    r.stdout_data = std::move(result->stdout_data);
    r.stderr_data = result->error.empty() ? std::move(result->stderr_data) : result->error;
  } else if (auto it = msg.find("id"); it != msg.end() && it->is_string()) {
    // The caller waiting for it learns now, not at its timeout.
    id = it->get<std::string>();
    r.exit_code = -1;
    r.stderr_data = "the agent's command_result was malformed";
  } else {
    return;
  }
  MutexLock lock(mu_);
  auto it = commands_.find(id);
  if (it == commands_.end() || it->second->done || it->second->instance_id != ch->instance_id) {
    return;
  }
  it->second->done = true;
  it->second->result.set_value(std::move(r));
}

}  // namespace hpod::controlplane
