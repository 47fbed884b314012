#pragma once

// Which spare host serves an instance (issue 26, "Replacement and reboot on real
// machines"): chosen and reserved in the caller's transaction, so two launches
// can never take the same host, and a crash leaves it either Spare or Assigned.
//
// A candidate is Spare, of the pool and instance type asked for, and usable now
// (its agent connected: `usable`). Among them the one with the fewest failures
// in the last 30 days wins (a host that failed comes back last), then the one
// idle longest (its Spare state is oldest: wear spreads over the pool), then the
// lowest host id (a stable order).
//
// Thread contract: free functions over the caller's transaction; no state.

#include <functional>
#include <string>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/controlplane/host_states.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

struct SpareRequest {
  std::string pool = "default";
  std::string instance_type;
  HostPlacement placement;  // the instance the host will serve
  std::string reason;       // the history row's reason ("launch of workers-2 ...")
};

// The chosen host, now Assigned to `request.placement`. kResourceExhausted, one
// line, when no candidate exists: "no Spare host of type T in pool P" (the caller
// adds how short its group is).
StatusOr<store::HostRecord> ReserveSpare(store::WriteTx& tx, const Clock& clock,
                                         const SpareRequest& request,
                                         const std::function<bool(const store::HostRecord&)>& usable);

}  // namespace hpod::controlplane
