// AgentService: what the health concern reads of each agent - its liveness
// (connection and heartbeat times) and its health reports (the `health` message).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "hpod/controlplane/agent_service.h"
#include "hpod/controlplane/agent_service_internal.h"
#include "hpod/controlplane/events.h"

namespace hpod::controlplane {

namespace proto = api::agentproto;

namespace {

// A failing check, as an event describes it.
std::string Failing(const proto::HealthCheck& c) {
  return c.result == "ok" || c.result == "skipped" ? "" : c.verdict + "|" + c.reason;
}

std::string WorstVerdict(const proto::HealthReport& r) {
  std::string worst = "Healthy";
  for (const auto& c : r.checks) {
    if (!proto::AsksForAction(c)) continue;
    if (c.verdict == "Replace") return "Replace";
    if (c.verdict == "Reboot") worst = "Reboot";
  }
  return worst;
}

}  // namespace

void AgentService::HandleHealth(const std::shared_ptr<Channel>& ch,
                                const proto::HealthReport& report) {
  std::shared_ptr<const proto::HealthReport> before;
  StoredHealth stored{
      std::make_shared<const proto::HealthReport>(report), WorstVerdict(report), {}};
  for (const auto& c : report.checks) {
    if (c.result == "fail" || c.result == "timeout") stored.failing.push_back(c.name);
  }
  {
    MutexLock lock(mu_);
    auto current = channels_.find(ch->instance_id);
    if (current == channels_.end() || current->second->serial != ch->serial) return;
    StoredHealth& slot = health_[ch->instance_id];
    before = std::move(slot.report);
    slot = std::move(stored);
  }
  std::map<std::string, std::string> was;
  if (before) {
    for (const auto& c : before->checks) was[c.name] = Failing(c);
  }
  std::vector<std::pair<EventLevel, std::string>> events;
  for (const auto& c : report.checks) {
    std::string now = Failing(c);
    std::string prev = was.count(c.name) ? was[c.name] : "";
    if (now == prev) continue;
    if (!now.empty()) {
      events.push_back(
          {c.verdict == "Healthy" ? EventLevel::kWarn : EventLevel::kError,
           "Health check " + c.name + " " + (c.result == "timeout" ? "timed out" : "failed") +
               (c.verdict == "Healthy" ? " (no action)" : " (verdict " + c.verdict + ")") + ": " +
               c.reason});
    } else if (before) {
      events.push_back({EventLevel::kInfo, "Health check " + c.name + " passes again"});
    }
  }
  if (!events.empty()) {
    Status s = store_.Write([&](store::WriteTx& tx) -> Status {
      HPOD_ASSIGN_OR_RETURN(store::ClusterRecord c, tx.GetCluster(ch->cluster_id));
      for (const auto& [level, text] : events) {
        HPOD_RETURN_IF_ERROR(
            RecordEvent(tx, clock_, c, NodeSubject(ch->group_name, ch->instance_id), level, text));
      }
      return OkStatus();
    });
    if (!s.ok() && s.code() != StatusCode::kNotFound) {
      spdlog::warn("health events for {}: {}", ch->instance_id, s.ToString());
    }
  }
  // The health reconciler judges at once instead of at its next poll.
  if ((!before || WorstVerdict(*before) != WorstVerdict(report)) && on_change_) {
    on_change_(ch->cluster_id);
  }
}

std::shared_ptr<const proto::HealthReport> AgentService::Health(
    const std::string& instance_id) const {
  MutexLock lock(mu_);
  // A report is only as live as the connection that carried it; the last one is
  // kept past a disconnect only to tell what changed in the next (events).
  auto it = channels_.find(instance_id);
  return it == channels_.end() ? nullptr : it->second->health->report;
}

void AgentService::SetReadLag(std::function<std::chrono::milliseconds()> read_lag) {
  MutexLock lock(mu_);
  read_lag_ = std::move(read_lag);
}

AgentLiveness AgentService::Liveness(const std::string& instance_id) const {
  MutexLock lock(mu_);
  AgentLiveness l;
  l.service_started = started_;
  if (read_lag_) l.read_lag = read_lag_();
  auto it = channels_.find(instance_id);
  if (it == channels_.end()) {
    auto d = disconnected_at_.find(instance_id);
    if (d != disconnected_at_.end()) l.disconnected_at = d->second;
    return l;
  }
  l.connected = true;
  l.connected_at = it->second->connected_at;
  l.last_heartbeat = it->second->last_heartbeat;
  l.last_read = it->second->last_read;
  return l;
}

AgentHostFigures AgentHostFigures::Of(const proto::HostStats& host) {
  AgentHostFigures f;
  f.cpu_seconds = host.cpu_seconds;
  f.memory_total_bytes = host.memory_total_bytes;
  f.memory_available_bytes = host.memory_available_bytes;
  for (const auto& fs : host.filesystems) {
    const auto known = std::find(std::begin(proto::kHostMountpoints),
                                 std::end(proto::kHostMountpoints), fs.mountpoint);
    if (known == std::end(proto::kHostMountpoints)) continue;
    Filesystem& slot = f.filesystems[known - std::begin(proto::kHostMountpoints)];
    if (slot.reported) continue;
    slot = {true, fs.size_bytes, fs.avail_bytes};
  }
  return f;
}

std::vector<AgentSnapshot> AgentService::Snapshot() const {
  MutexLock lock(mu_);
  std::vector<AgentSnapshot> out;
  out.reserve(channels_.size());
  // Each connection points at its node's health entry: no lookup or walk by
  // instance id, which at 10,000 nodes was half of a scrape's time (under mu_,
  // which every heartbeat takes too).
  for (const auto& [id, ch] : channels_) {
    AgentSnapshot& a = out.emplace_back();
    a.instance_id = id;
    a.cluster_id = ch->cluster_id;
    a.connected_at = ch->connected_at;
    a.last_heartbeat = ch->last_heartbeat;
    a.host = ch->host;
    a.clock_offset = ch->clock_offsets.Max();
    if (ch->health->report != nullptr) {
      a.health_verdict = ch->health->verdict;
      a.failing_checks = ch->health->failing;
    }
  }
  return out;
}

std::optional<double> AgentService::ClockOffset(const std::string& instance_id) const {
  MutexLock lock(mu_);
  auto it = channels_.find(instance_id);
  if (it == channels_.end()) return std::nullopt;
  return it->second->clock_offsets.Max();
}

void AgentService::HandleJobQuery(const std::shared_ptr<Channel>& ch,
                                  const api::agentproto::JobQuery& q) {
  // The cluster is the channel's (the agent authenticated as its node): a node
  // can ask only about its own cluster's jobs and nodes.
  nlohmann::json answer =
      job_handler_ ? job_handler_(ch->cluster_id, q.request, ClockOffset(ch->instance_id))
                   : nlohmann::json{{"error", "this hpodd does not answer job questions"}};
  ch->socket->Send(api::agentproto::JobAnswer{q.id, std::move(answer)}.ToJson().dump(
                       -1, ' ', false, nlohmann::json::error_handler_t::replace),
                   false);
}

}  // namespace hpod::controlplane
