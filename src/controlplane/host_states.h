#pragma once

// The host state machine (api::HostState, issue 26): which changes hpodd makes,
// each written in the caller's transaction together with its history row and its
// reason, so that a host's row and its history never disagree.
//
//   Joining ──agent connects──▶ Spare ──assigned──▶ Assigned ──reboot──▶ Rebooting (→ Draining)
//      │                         ▲  ▲                  │  ▲                  │
//      │                         │  └──── Draining ◀───┤  └── back up ───────┘
//      │                         │                     │
//      └──▶ Retired ◀── third failure in 30 days ── Quarantined ◀── failed
//              └── release (a person) ──▶ Spare ◀── release ──┘
//
// Any state goes to Joining when the machine joins again (it starts over), and to
// Retired when a person retires or revokes it. A change to the state a host is
// already in writes nothing (reconcilers repeat themselves).
//
// Thread contract: free functions over the caller's transaction; no state.

#include <string>
#include <vector>

#include "hpod/api/states.h"
#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/store/store.h"

namespace hpod::controlplane {

// Failures ("to Quarantined") within this window retire a host at the third.
inline constexpr double kHostFailureWindowSeconds = 30.0 * 24 * 3600;
inline constexpr int kHostFailuresToRetire = 3;

bool HostTransitionAllowed(api::HostState from, api::HostState to);

// Where a host goes when it serves an instance (Assigned) or stops serving one.
struct HostPlacement {
  std::string cluster_id;
  std::string group_name;
  std::string instance_id;
};

// Moves `host` to `to` for `reason` and appends the history row; `host` is
// updated in place and written. kFailedPrecondition, one line naming both states,
// for a change the machine does not make. `placement` is where it serves (for
// Assigned) or the tenure the change ends (the history row names it); leaving
// Assigned clears the host's placement.
Status ChangeHostState(store::WriteTx& tx, const Clock& clock, store::HostRecord& host,
                       api::HostState to, const std::string& reason,
                       const HostPlacement& placement = {});

// The first state of a host that has just joined (or joined again), written with
// its history row; nothing is checked (a join starts over).
Status RecordHostJoin(store::WriteTx& tx, const Clock& clock, store::HostRecord& host,
                      api::HostState to, const std::string& reason);

// How many times the history shows the host entering Quarantined at or after
// `since` (epoch seconds).
int FailuresSince(const std::vector<store::HostHistoryRecord>& history, double since);

// Revokes every certificate of `host` still in force (its agent is refused from
// its next connection on) and retires it for `reason`. Returns the serials
// revoked now. Needs no CA: revocation is rows in the store.
StatusOr<std::vector<std::string>> RevokeHostCertificates(store::WriteTx& tx, const Clock& clock,
                                                          store::HostRecord& host,
                                                          const std::string& reason);

// HpodRevokeHost in one transaction: the host as it was before (whose channel
// the caller closes: it may have served an instance) and the serials revoked.
// kNotFound for an unknown host.
struct RevokedHost {
  store::HostRecord before;
  std::vector<std::string> serials;
};
StatusOr<RevokedHost> RevokeHost(store::Store& store, const Clock& clock,
                                 const std::string& host_id);

// A failure: the host goes to Quarantined, and on to Retired when this is its
// kHostFailuresToRetire-th within kHostFailureWindowSeconds.
Status QuarantineHost(store::WriteTx& tx, const Clock& clock, store::HostRecord& host,
                      const std::string& reason);

// The instance `instance_id` is gone (terminated, replaced, its cluster
// deleted): the host that served it, if any, leaves it. A host that joined for
// that one launch (a local node over TLS: its token named the instance) is
// Retired and its certificates revoked, since its machine ended with the
// instance; a pool host goes to
// Draining (its tenure is wiped there, then it is Spare again), or, when the
// instance ended because it `failed` (a replacement), to Quarantined with the
// reason (QuarantineHost: the third time in 30 days retires it). No host serves
// it: nothing to do. A change the state machine refuses is logged and skipped,
// never returned: the caller's removal of the instance must go through.
Status EndHostTenure(store::WriteTx& tx, const Clock& clock, const std::string& instance_id,
                     const std::string& reason, bool failed = false);

}  // namespace hpod::controlplane
