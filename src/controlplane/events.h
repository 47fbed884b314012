#pragma once

// Every state change of a cluster, group or node is recorded as an event (what
// ListClusterEvents returns) in the same transaction as the change itself.
//
// Thread contract: stateless functions; the WriteTx is the caller's.

#include <string>

#include "hpod/base/clock.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

enum class EventLevel { kInfo, kWarn, kError };

struct EventSubject {
  std::string resource_type;  // Cluster | InstanceGroup | Instance
  std::string group_name;
  std::string instance_id;
};

inline EventSubject ClusterSubject() { return {"Cluster", "", ""}; }
inline EventSubject GroupSubject(const std::string& group) { return {"InstanceGroup", group, ""}; }
inline EventSubject NodeSubject(const std::string& group, const std::string& id) {
  return {"Instance", group, id};
}

Status RecordEvent(store::WriteTx& tx, const Clock& clock, const store::ClusterRecord& cluster,
                   const EventSubject& subject, EventLevel level, const std::string& description);

}  // namespace hpod::controlplane
