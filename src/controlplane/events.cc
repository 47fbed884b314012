#include "hpod/controlplane/events.h"

#include <spdlog/spdlog.h>

#include "hpod/controlplane/ids.h"

namespace hpod::controlplane {

Status RecordEvent(store::WriteTx& tx, const Clock& clock, const store::ClusterRecord& cluster,
                   const EventSubject& subject, EventLevel level, const std::string& description) {
  store::EventRecord e;
  e.event_id = NewEventId();
  e.cluster_id = cluster.id;
  e.cluster_name = cluster.name;
  e.cluster_arn = cluster.arn;
  e.resource_type = subject.resource_type;
  e.group_name = subject.group_name;
  e.instance_id = subject.instance_id;
  e.time = clock.NowEpochSeconds();
  e.level = level == EventLevel::kInfo ? "Info" : level == EventLevel::kWarn ? "Warn" : "Error";
  e.description = description;
  // Events are queryable (ListClusterEvents); the log gets them at debug level,
  // and warnings/errors at their level.
  auto log_level = level == EventLevel::kError  ? spdlog::level::err
                   : level == EventLevel::kWarn ? spdlog::level::warn
                                                : spdlog::level::debug;
  spdlog::log(
      log_level, "event cluster={} {} {}{}: {}", cluster.name, e.level, subject.resource_type,
      subject.instance_id.empty() ? subject.group_name.empty() ? "" : " " + subject.group_name
                                  : " " + subject.instance_id,
      description);
  return tx.AddEvent(e).status();
}

}  // namespace hpod::controlplane
